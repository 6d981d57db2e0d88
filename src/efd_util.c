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
efd_err_past_max(uint64_t n)
{
    PyErr_Format(PyExc_ValueError,
                 "release(%llu) would pass the maximum count 2**64 - 2",
                 (unsigned long long)n);
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
efd_long_is_negative(PyObject *v)
{
#if PY_VERSION_HEX >= 0x030E0000
    int sign = 0;
    (void)PyLong_GetSign(v, &sign);     /* v is an int: cannot fail */
    return sign < 0;
#else
    return _PyLong_Sign(v) < 0;         /* PyLong_GetSign is new in 3.14 */
#endif
}

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
    if (efd_long_is_negative(idx)) {
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

/* obj <op> 0, for numbers a double cannot show: 1, 0, or -1 with an
 * exception. */
static int
compare_zero(PyObject *obj, int op)
{
    PyObject *zero = PyLong_FromLong(0);
    int r;
    if (zero == NULL)
        return -1;
    r = PyObject_RichCompareBool(obj, zero, op);
    Py_DECREF(zero);
    return r;
}

int
efd_to_timeout_ex(PyObject *obj, int rules, double *out)
{
    double t;
    int positive;
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
            return -1;
        }
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return -1;
        /* A number too large for a double (an int, a Fraction, ...): a
         * huge positive one means no limit. */
        PyErr_Clear();
        if ((positive = compare_zero(obj, Py_GT)) < 0)
            return -1;
        if (positive) {
            *out = EFD_FOREVER;
            return 0;
        }
        t = -1.0;
    }
    else if (t == 0 && signbit(t) && !PyFloat_Check(obj)) {
        /* A negative number too small for a double (Fraction(-1, 10**400))
         * rounds to -0.0: it is still negative. */
        int negative = compare_zero(obj, Py_LT);
        if (negative < 0)
            return -1;
        if (negative)
            t = -1.0;
    }
    if (isnan(t)) {
        if (rules == EFD_TIMEOUT_LOOK) {
            *out = 0.0;
            return 0;
        }
        PyErr_SetString(PyExc_ValueError, "timeout must not be NaN");
        return -1;
    }
    if (t < 0) {
        if (rules != EFD_TIMEOUT_STRICT) {
            *out = 0.0;             /* threading: not above zero only tries */
            return 0;
        }
        if (PyFloat_Check(obj) || PyLong_Check(obj))
            PyErr_Format(PyExc_ValueError,
                         "timeout must be a non-negative number, not %R", obj);
        else
            PyErr_Format(PyExc_ValueError,
                         "timeout must be a non-negative number, not a "
                         "negative %.100s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    *out = isinf(t) ? EFD_FOREVER : t;
    return 0;
}

int
efd_to_timeout(PyObject *obj, double *out)
{
    return efd_to_timeout_ex(obj, EFD_TIMEOUT_STRICT, out);
}

int
efd_parse_acquire(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                  int rules, int *blocking, double *timeout, int *undo)
{
    static const char *const names[] = {"blocking", "timeout", "undo", NULL};
    static const char *const names_no_undo[] = {"blocking", "timeout", NULL};
    PyObject *a[3];

    *blocking = 1;
    *timeout = EFD_FOREVER;
    if (undo != NULL)
        *undo = 0;
    if (nargs == 0 && kwnames == NULL)
        return 0;
    if (efd_parse_args("acquire", undo != NULL ? names : names_no_undo, 2,
                       args, nargs, kwnames, a) < 0)
        return -1;
    if (a[0] != NULL && (*blocking = PyObject_IsTrue(a[0])) < 0)
        return -1;
    if (undo != NULL && a[2] != NULL && (*undo = PyObject_IsTrue(a[2])) < 0)
        return -1;
    if (a[1] != NULL && a[1] != Py_None) {
        if (!*blocking) {
            PyErr_SetString(PyExc_ValueError,
                            "can't specify timeout for non-blocking acquire");
            return -1;
        }
        if (efd_to_timeout_ex(a[1], rules, timeout) < 0)
            return -1;
    }
    return 0;
}

int
efd_parse_release(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                  uint64_t *n, int *too_big)
{
    static const char *const names[] = {"n", NULL};
    PyObject *a[1];

    *n = 1;
    *too_big = 0;
    if (nargs == 0 && kwnames == NULL)
        return 0;
    if (efd_parse_args("release", names, 1, args, nargs, kwnames, a) < 0)
        return -1;
    if (a[0] == NULL)
        return 0;
    if (efd_to_u64(a[0], "n", n) < 0) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            *too_big = 1;           /* more than any count can hold */
            return 0;
        }
        if (!PyErr_ExceptionMatches(PyExc_ValueError))
            return -1;
        PyErr_Clear();
        *n = 0;                     /* negative */
    }
    if (*n < 1) {
        PyErr_SetString(PyExc_ValueError, "n must be one or more");
        return -1;
    }
    return 0;
}

