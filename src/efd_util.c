/*
 * efd_util.c -- what every other file uses: the errors the module raises
 * and the argument converters (METH_FASTCALL keyword parsing with CPython's
 * messages, integers, timeouts).
 */
#include "efd_module.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* ---- errors ------------------------------------------------------------ */

PyObject *
efd_err_closed(void)
{
    PyErr_SetString(PyExc_ValueError, "I/O operation on closed EventFD");
    return NULL;
}

PyObject *
efd_err_errno(int err)
{
    errno = err;
    return PyErr_SetFromErrno(PyExc_OSError);
}


/* ---- argument parsing (METH_FASTCALL | METH_KEYWORDS) ------------------ */

/* Keyword names arrive as (interned, compact ASCII) str objects: compare
 * their bytes directly, the common case, before the general comparison.
 * Lengths first: a key may hold a NUL ("timeout\0") and must not match,
 * nor may the comparison read past the end of `name`. */
static inline int
key_is(PyObject *key, const char *name)
{
    size_t len = strlen(name);
    if (PyUnicode_IS_COMPACT_ASCII(key))
        return (size_t)PyUnicode_GET_LENGTH(key) == len
            && memcmp(PyUnicode_DATA(key), name, len) == 0;
    return PyUnicode_GET_LENGTH(key) == (Py_ssize_t)len
        && PyUnicode_CompareWithASCIIString(key, name) == 0;
}

int
efd_parse_args(const char *fname, const char *const *names, int npos,
           PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
           PyObject **out)
{
    Py_ssize_t i, nkw;
    int n = 0, j;

    while (names[n] != NULL)
        n++;
    for (j = 0; j < n; j++)
        out[j] = NULL;
    if (nargs > npos) {
        PyErr_Format(PyExc_TypeError,
                     "%s() takes at most %d positional argument%s (%zd given)",
                     fname, npos, npos == 1 ? "" : "s", nargs);
        return -1;
    }
    for (i = 0; i < nargs; i++)
        out[i] = args[i];
    nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (i = 0; i < nkw; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        for (j = 0; j < n; j++) {
            if (key_is(key, names[j]))
                break;
        }
        if (j == n) {
            PyErr_Format(PyExc_TypeError,
                         "%s() got an unexpected keyword argument '%U'",
                         fname, key);
            return -1;
        }
        if (out[j] != NULL) {
            PyErr_Format(PyExc_TypeError,
                         "argument for %s() given by name ('%s') and "
                         "position (%d)", fname, names[j], j + 1);
            return -1;
        }
        out[j] = args[nargs + i];
    }
    return 0;
}

/* An integer argument as uint64_t.  Floats and other non-integers are a
 * TypeError; negative values a ValueError; values >= 2**64 OverflowError.
 * Objects with __index__ are accepted, as everywhere in Python. */
int
efd_to_u64(PyObject *obj, const char *what, uint64_t *out)
{
    PyObject *idx;
    unsigned long long v;

    if (PyFloat_Check(obj) || !PyIndex_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be an integer, not %.100s",
                     what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    idx = PyNumber_Index(obj);
    if (idx == NULL)
        return -1;
    if (_PyLong_Sign(idx) < 0) {
        PyErr_Format(PyExc_ValueError, "%s must be non-negative, not %R",
                     what, idx);
        Py_DECREF(idx);
        return -1;
    }
    v = PyLong_AsUnsignedLongLong(idx);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_OverflowError,
                     "%s is too large: %R does not fit in 64 bits", what, idx);
        Py_DECREF(idx);
        return -1;
    }
    Py_DECREF(idx);
    *out = (uint64_t)v;
    return 0;
}

/* timeout: None (or absent) -> EFD_FOREVER; a non-negative real number of
 * seconds.  inf means no deadline.  Anything float() cannot take (str,
 * bytes, complex, ...) is a TypeError naming the argument. */
int
efd_to_timeout(PyObject *obj, double *out)
{
    double t;
    if (obj == NULL || obj == Py_None) {
        *out = EFD_FOREVER;
        return 0;
    }
    t = PyFloat_AsDouble(obj);
    if (t == -1.0 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError,
                         "timeout must be a number or None, not %.100s",
                         Py_TYPE(obj)->tp_name);
        }
        else if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            /* A number too large for a double (an int, a Fraction, ...):
             * a huge positive one means no limit. */
            PyObject *zero = PyLong_FromLong(0);
            int positive;
            PyErr_Clear();
            if (zero == NULL)
                return -1;
            positive = PyObject_RichCompareBool(obj, zero, Py_GT);
            Py_DECREF(zero);
            if (positive < 0)
                return -1;
            if (positive) {
                *out = EFD_FOREVER;
                return 0;
            }
            PyErr_Format(PyExc_ValueError,
                         "timeout must be a non-negative number, not a "
                         "negative %.100s too large for a float",
                         Py_TYPE(obj)->tp_name);
        }
        return -1;
    }
    if (isnan(t)) {
        PyErr_SetString(PyExc_ValueError, "timeout must not be NaN");
        return -1;
    }
    if (t < 0) {
        PyErr_Format(PyExc_ValueError,
                     "timeout must be a non-negative number, not %R", obj);
        return -1;
    }
    *out = isinf(t) ? EFD_FOREVER : t;
    return 0;
}

