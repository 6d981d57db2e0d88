/*
 * efd_module.c -- the efd._efd module: multi-phase init, module state, the
 * os.eventfd backport (eventfd, eventfd_read, eventfd_write) and the probe
 * report behind `python -m efd`.
 */
#include "efd_module.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#ifdef EFD_HAVE_EVENTFD
#  include <sys/eventfd.h>
#else
   /* Linux's values, so the constants exist (and mean the same) everywhere. */
#  define EFD_SEMAPHORE 1
#  define EFD_CLOEXEC O_CLOEXEC
#  define EFD_NONBLOCK O_NONBLOCK
#endif

/* ---- the os.eventfd backport ------------------------------------------- */

/* The converters behave as the ones the running interpreter's os module
 * uses (Argument Clinic's unsigned_int / unsigned_long_long / int / fildes).
 * The unsigned ones changed in CPython 3.14: they take any object with
 * __index__ (PyLong_AsNativeBytes with ALLOW_INDEX), a negative value is
 * "Cannot convert negative int" and an overflow names the C type.  Up to
 * 3.13 they take ints only ("an integer is required"), a negative value is
 * "value must be positive" and an overflow is PyLong_AsUnsigned*'s own
 * message.  An extension is built for one interpreter version, so the
 * choice is made at compile time; 3.8 and 3.9, which have no os.eventfd,
 * get 3.13's behaviour. */

#if PY_VERSION_HEX >= 0x030E0000
static int
conv_unsigned(PyObject *obj, int c_uint, unsigned long long *out)
{
    unsigned long long v = 0;
    unsigned int u = 0;
    void *buf = c_uint ? (void *)&u : (void *)&v;
    size_t size = c_uint ? sizeof(u) : sizeof(v);
    Py_ssize_t need = PyLong_AsNativeBytes(
        obj, buf, (Py_ssize_t)size,
        Py_ASNATIVEBYTES_NATIVE_ENDIAN | Py_ASNATIVEBYTES_ALLOW_INDEX
        | Py_ASNATIVEBYTES_REJECT_NEGATIVE | Py_ASNATIVEBYTES_UNSIGNED_BUFFER);
    if (need < 0)
        return -1;
    if ((size_t)need > size) {
        PyErr_SetString(PyExc_OverflowError,
                        c_uint ? "Python int too large for C unsigned int"
                               : "Python int too large for C unsigned long long");
        return -1;
    }
    *out = c_uint ? (unsigned long long)u : v;
    return 0;
}
#else
static int
conv_unsigned(PyObject *obj, int c_uint, unsigned long long *out)
{
    unsigned long long v;
    if (!PyLong_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "an integer is required");
        return -1;
    }
    if (_PyLong_Sign(obj) < 0) {
        PyErr_SetString(PyExc_ValueError, "value must be positive");
        return -1;
    }
    /* The same C calls as os's converters, so the same overflow messages. */
    v = c_uint ? PyLong_AsUnsignedLong(obj) : PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    if (c_uint && v > UINT_MAX) {
        PyErr_SetString(PyExc_OverflowError,
                        "Python int too large for C unsigned int");
        return -1;
    }
    *out = v;
    return 0;
}
#endif

static int
conv_int(PyObject *obj, int *out)
{
    long v;
    if (PyFloat_Check(obj)) {
        PyErr_SetString(PyExc_TypeError,
                        "'float' object cannot be interpreted as an integer");
        return -1;
    }
    v = PyLong_AsLong(obj);
    if (v == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return -1;
        PyErr_Clear();
        v = LONG_MAX;
    }
    if (v > INT_MAX || v < INT_MIN) {
        PyErr_SetString(PyExc_OverflowError,
                        "Python int too large to convert to C int");
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* The fd argument: an int or an object with fileno(), as os takes it.  An
 * efd.EventFD is refused unless its descriptor is a kernel eventfd: the
 * descriptor of any other backend is for readiness only, and reading it
 * directly would consume the readiness token, not a unit. */
static int
conv_fd(PyObject *module, int for_write, PyObject *obj, int *out)
{
    efd_state *st = (efd_state *)PyModule_GetState(module);
    int fd;
    if (st != NULL && st->EventFD_type != NULL
            && PyObject_TypeCheck(obj, st->EventFD_type)) {
        eventfd_object *ev = (eventfd_object *)obj;
        const efd_backend *ops = ev->impl.ops;
        /* A closed object: its fileno() raises the "closed" error below. */
        if (!ev->closed && ops != NULL && ops != &efd_backend_eventfd
                && ops != &efd_backend_readback) {
            PyErr_Format(PyExc_ValueError,
                         "%s() argument 'fd': this EventFD uses the '%s' "
                         "backend, whose descriptor is not a kernel eventfd; "
                         "use the object's own %s() method",
                         for_write ? "eventfd_write" : "eventfd_read",
                         ops->name, for_write ? "write" : "read");
            return -1;
        }
    }
    fd = PyObject_AsFileDescriptor(obj);
    if (fd < 0)
        return -1;
    *out = fd;
    return 0;
}

/* A required argument was not given: CPython's message. */
static int
missing(const char *fname, const char *name, int pos)
{
    PyErr_Format(PyExc_TypeError,
                 "%s() missing required argument '%s' (pos %d)",
                 fname, name, pos);
    return -1;
}

static PyObject *
efd_fn_eventfd(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames)
{
    static const char *const names[] = {"initval", "flags", NULL};
    PyObject *a[2];
    unsigned long long initval;
    int flags = EFD_CLOEXEC, fd;
    (void)module;

    if (efd_parse_args("eventfd", names, 2, args, nargs, kwnames, a) < 0)
        return NULL;
    if (a[0] == NULL) {
        missing("eventfd", "initval", 1);
        return NULL;
    }
    if (conv_unsigned(a[0], 1, &initval) < 0)
        return NULL;
    if (a[1] != NULL && conv_int(a[1], &flags) < 0)
        return NULL;
#ifdef EFD_HAVE_EVENTFD
    Py_BEGIN_ALLOW_THREADS
    fd = eventfd((unsigned int)initval, flags);
    Py_END_ALLOW_THREADS
    if (fd < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    return PyLong_FromLong(fd);
#else
    (void)fd;
    return efd_err_errno(ENOSYS);
#endif
}

/* One read(2)/write(2) of 8 bytes on a raw eventfd, as os does it, but with
 * the PEP 475 retry that os.eventfd_read/eventfd_write lack.  A transfer of
 * fewer than 8 bytes (the fd is not an eventfd: a pipe holding less, or at
 * its end) fails as os's does: glibc's eventfd_read()/eventfd_write() return
 * -1 without setting errno, and os raises OSError from errno, which a
 * successful read(2) left alone: OSError(0, 'Error') on Python 3.10-3.15.
 * errno is made 0 here, so the result does not depend on a stale value. */
static int
raw_io(int fd, int for_write, uint64_t *value)
{
    ssize_t n;
    int saved;
    for (;;) {
        Py_BEGIN_ALLOW_THREADS
        n = for_write ? write(fd, value, sizeof(*value))
                      : read(fd, value, sizeof(*value));
        saved = errno;
        Py_END_ALLOW_THREADS
        if (n == (ssize_t)sizeof(*value))
            return 0;
        if (n >= 0) {
            efd_err_errno(0);
            return -1;
        }
        if (saved != EINTR) {
            efd_err_errno(saved);
            return -1;
        }
        if (PyErr_CheckSignals() < 0)
            return -1;
    }
}

static PyObject *
efd_fn_eventfd_read(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                    PyObject *kwnames)
{
    static const char *const names[] = {"fd", NULL};
    PyObject *a[1];
    uint64_t value = 0;
    int fd;
    (void)module;

    if (nargs == 1 && kwnames == NULL)
        a[0] = args[0];
    else if (efd_parse_args("eventfd_read", names, 1, args, nargs, kwnames,
                            a) < 0)
        return NULL;
    else if (a[0] == NULL) {
        missing("eventfd_read", "fd", 1);
        return NULL;
    }
    if (conv_fd(module, 0, a[0], &fd) < 0 || raw_io(fd, 0, &value) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(value);
}

static PyObject *
efd_fn_eventfd_write(PyObject *module, PyObject *const *args,
                     Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"fd", "value", NULL};
    PyObject *a[2];
    unsigned long long v;
    uint64_t value;
    int fd;
    (void)module;

    if (nargs == 2 && kwnames == NULL) {
        a[0] = args[0];
        a[1] = args[1];
    }
    else if (efd_parse_args("eventfd_write", names, 2, args, nargs, kwnames,
                            a) < 0)
        return NULL;
    else if (a[0] == NULL || a[1] == NULL) {
        missing("eventfd_write", a[0] == NULL ? "fd" : "value",
                a[0] == NULL ? 1 : 2);
        return NULL;
    }
    if (conv_fd(module, 1, a[0], &fd) < 0 || conv_unsigned(a[1], 0, &v) < 0)
        return NULL;
    value = v;
    if (raw_io(fd, 1, &value) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* ---- the probe report -------------------------------------------------- */

static PyObject *
errno_name(int err)
{
    if (err == 0)
        return PyUnicode_FromString("ok");
    return PyUnicode_FromFormat("%s (errno %d)", strerror(err), err);
}

static int
dict_set(PyObject *d, const char *key, PyObject *value)
{
    int r;
    if (value == NULL)
        return -1;
    r = PyDict_SetItemString(d, key, value);
    Py_DECREF(value);
    return r;
}

/* _probe() -> dict: what the probe chain found in this process. */
static PyObject *
efd_fn_probe(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    efd_state *st = (efd_state *)PyModule_GetState(module);
    PyObject *d;
    int futex_err;
    if (efd_probe(st) < 0)
        return NULL;
    d = PyDict_New();
    if (d == NULL)
        return NULL;
#ifdef EFD_HAVE_EVENTFD
    if (dict_set(d, "compiled_with_eventfd", PyBool_FromLong(1)) < 0)
#else
    if (dict_set(d, "compiled_with_eventfd", PyBool_FromLong(0)) < 0)
#endif
        goto fail;
    if (dict_set(d, "eventfd2", errno_name(st->err_plain)) < 0
            || dict_set(d, "eventfd2_errno", PyLong_FromLong(st->err_plain)) < 0
            || dict_set(d, "eventfd2_semaphore", errno_name(st->err_sem)) < 0
            || dict_set(d, "eventfd2_semaphore_errno",
                        PyLong_FromLong(st->err_sem)) < 0)
        goto fail;
    futex_err = efd_futex_probe();
    if (dict_set(d, "futex", errno_name(futex_err)) < 0
            || dict_set(d, "futex_errno", PyLong_FromLong(futex_err)) < 0)
        goto fail;
    if (dict_set(d, "sealed_pages", PyBool_FromLong(efd_shm_can_seal())) < 0)
        goto fail;
    /* How the pipe backend's blocked waiters sleep here (efd_pipe.c):
     * as the futex backend's, or in poll() on the pipe. */
    if (dict_set(d, "pipe_sleeps", PyUnicode_FromString(
            efd_pipe_backend() == &efd_backend_pipe_futex ? "futex"
                                                          : "poll")) < 0)
        goto fail;
    if (dict_set(d, "death_bell", PyBool_FromLong(
            futex_err == 0 && efd_state_bell(st))) < 0)
        goto fail;
    if (dict_set(d, "robust_holds", PyBool_FromLong(efd_books_probe())) < 0)
        goto fail;
    /* Whether the kernel tells a sleeper that a holder died (pidfds,
     * efd_watch.c), or sleepers look every EFD_RECHECK_MS while another
     * process holds units. */
    if (dict_set(d, "holder_deaths_told", PyBool_FromLong(
            efd_books_probe() && efd_watch_probe())) < 0)
        goto fail;
    {
        int ring_err = efd_loop_ring_probe(st);
        int bell = futex_err == 0 && efd_state_bell(st);
        int ring = ring_err == 0 && futex_err == 0;
        /* How event loops sleep on 'futex' objects here (efd_loop.c). */
        const char *how = bell && !efd_loop_ring_wanted() ? "helper"
                          : ring ? "ring" : NULL;
        if (dict_set(d, "loop_ring", PyBool_FromLong(ring)) < 0
                || dict_set(d, "loop_ring_errno",
                            PyLong_FromLong(ring_err)) < 0
                || dict_set(d, "loop_sleep", how != NULL
                            ? PyUnicode_FromString(how)
                            : (Py_INCREF(Py_None), Py_None)) < 0)
            goto fail;
    }
    if (st->herd < 0)
        st->herd = efd_herd_probe();
    if (dict_set(d, "wake_one", PyUnicode_FromString(
            st->herd == EFD_HERD_EXCLUSIVE ? "epoll-exclusive"
            : st->herd == EFD_HERD_SHARED ? "epoll" : "poll")) < 0)
        goto fail;
    /* How event loops sleep on the kernel counter (efd_herd.c): through a
     * herd helper, or on fileno() themselves. */
    if (dict_set(d, "kernel_loop_sleep", PyUnicode_FromString(
            st->herd == EFD_HERD_EXCLUSIVE && !efd_loop_fileno_wanted()
            ? "helper" : "fileno")) < 0)
        goto fail;
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}

/* _check_timeout(timeout) -> float or None: acquire()'s reading of a
 * timeout, for the asyncio layer (None: no limit). */
static PyObject *
efd_fn_check_timeout(PyObject *module, PyObject *const *args,
                     Py_ssize_t nargs)
{
    double t;
    int rules = EFD_TIMEOUT_STRICT;
    (void)module;
    if (nargs < 1 || nargs > 2) {
        PyErr_Format(PyExc_TypeError,
                     "_check_timeout() takes 1 or 2 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    if (nargs == 2) {
        rules = (int)PyLong_AsLong(args[1]);
        if (rules == -1 && PyErr_Occurred())
            return NULL;
        if (rules != EFD_TIMEOUT_STRICT && rules != EFD_TIMEOUT_THREADING
                && rules != EFD_TIMEOUT_LOOK) {
            PyErr_Format(PyExc_ValueError, "unknown timeout rules %d", rules);
            return NULL;
        }
    }
    if (efd_to_timeout_ex(args[0], rules, &t) < 0)
        return NULL;
    if (t < 0)
        Py_RETURN_NONE;
    return PyFloat_FromDouble(t);
}

/* _owned(fd) -> bool: whether a live efd object of this process owns fd
 * (the same open file, under any number; see efd_registry.c). */
static PyObject *
efd_fn_owned(PyObject *module, PyObject *arg)
{
    long fd = PyLong_AsLong(arg);
    (void)module;
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    if (fd < 0 || fd > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "not a file descriptor");
        return NULL;
    }
    return PyBool_FromLong(efd_reg_owned((int)fd));
}

/* Registered with os.register_at_fork(after_in_child=...). */
static PyObject *
efd_fn_after_fork(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    efd_state *st = (efd_state *)PyModule_GetState(module);
    /* A new process: state that objects recorded for the parent (waiters,
     * spare wake channels, readback's held units) is not ours, and a child
     * may sandbox itself before it makes an EventFD: probe again. */
    st->proc++;
    st->probed = 0;
    st->main_ident = PyThread_get_thread_ident();
    st->fork_thread = efd_thread_id();
    Py_RETURN_NONE;
}

/* Registered with os.register_at_fork(before=...): a fork child gets no
 * copies of the helper threads that objects keep idle for their next
 * event-loop sleeper, so stop them first (efd_loop.c). */
static PyObject *
efd_fn_before_fork(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    int stopped = efd_loops_before_fork((efd_state *)PyModule_GetState(module));
    /* And the holders' watcher, if no sleeper relies on it (efd_watch.c). */
    Py_BEGIN_ALLOW_THREADS
    stopped += efd_watch_before_fork();
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(stopped);
}

/* Registered with os.register_at_fork(after_in_parent=...). */
static PyObject *
efd_fn_after_fork_parent(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    efd_state *st = (efd_state *)PyModule_GetState(module);
    st->forks++;
    Py_RETURN_NONE;
}

static PyMethodDef efd_functions[] = {
    {"eventfd", (PyCFunction)(void (*)(void))efd_fn_eventfd,
     METH_FASTCALL | METH_KEYWORDS,
     "eventfd($module, /, initval, flags=EFD_CLOEXEC)\n--\n\n"
     "Create an eventfd and return its file descriptor (os.eventfd)."},
    {"eventfd_read", (PyCFunction)(void (*)(void))efd_fn_eventfd_read,
     METH_FASTCALL | METH_KEYWORDS,
     "eventfd_read($module, /, fd)\n--\n\n"
     "Read a value from an eventfd file descriptor (os.eventfd_read).\n\n"
     "fd is an int or has fileno(); an efd.EventFD whose backend is not a "
     "kernel eventfd ('pipe', 'futex') is refused with ValueError."},
    {"eventfd_write", (PyCFunction)(void (*)(void))efd_fn_eventfd_write,
     METH_FASTCALL | METH_KEYWORDS,
     "eventfd_write($module, /, fd, value)\n--\n\n"
     "Write a value to an eventfd file descriptor (os.eventfd_write).\n\n"
     "fd is an int or has fileno(); an efd.EventFD whose backend is not a "
     "kernel eventfd ('pipe', 'futex') is refused with ValueError."},
    {"_probe", (PyCFunction)efd_fn_probe, METH_NOARGS,
     "_probe($module, /)\n--\n\nRun (once) and report the backend probe."},
    {"_check_timeout", (PyCFunction)(void (*)(void))efd_fn_check_timeout,
     METH_FASTCALL,
     "_check_timeout($module, timeout, rules=TIMEOUT_STRICT, /)\n--\n\n"
     "The C core's reading of a timeout: seconds as a float, or None for "
     "no limit.  rules: TIMEOUT_STRICT (EventFD's), TIMEOUT_THREADING "
     "(the semaphores') or TIMEOUT_LOOK (Event.wait's)."},
    {"_owned", (PyCFunction)efd_fn_owned, METH_O,
     "_owned($module, fd, /)\n--\n\n"
     "Whether a live efd object of this process owns fd."},
    {"_after_fork_child", (PyCFunction)efd_fn_after_fork, METH_NOARGS,
     "_after_fork_child($module, /)\n--\n\n"
     "Start this fork child's own process state (see efd_impl.proc)."},
    {"_before_fork", (PyCFunction)efd_fn_before_fork, METH_NOARGS,
     "_before_fork($module, /)\n--\n\n"
     "Stop the idle helper threads kept for event loops (efd_loop.c), "
     "and the holders' watcher if no sleeper relies on it (efd_watch.c); "
     "how many."},
    {"_after_fork_parent", (PyCFunction)efd_fn_after_fork_parent, METH_NOARGS,
     "_after_fork_parent($module, /)\n--\n\n"
     "Count a fork of this process (see efd_impl.desc_forks)."},
    {NULL, NULL, 0, NULL},
};

/* Bump st->proc in fork children and st->forks in fork parents, and
 * stop idle helpers before: os.register_at_fork runs the hooks around
 * every fork Python makes (os.fork, multiprocessing), before any other
 * Python code runs after it. */
static int
register_fork_hook(PyObject *module)
{
    PyObject *os, *reg, *hook, *phook, *bhook, *kw = NULL, *r = NULL;
    hook = PyObject_GetAttrString(module, "_after_fork_child");
    if (hook == NULL)
        return -1;
    phook = PyObject_GetAttrString(module, "_after_fork_parent");
    if (phook == NULL) {
        Py_DECREF(hook);
        return -1;
    }
    bhook = PyObject_GetAttrString(module, "_before_fork");
    if (bhook == NULL) {
        Py_DECREF(hook);
        Py_DECREF(phook);
        return -1;
    }
    os = PyImport_ImportModule("os");
    if (os == NULL) {
        Py_DECREF(hook);
        Py_DECREF(phook);
        Py_DECREF(bhook);
        return -1;
    }
    reg = PyObject_GetAttrString(os, "register_at_fork");
    Py_DECREF(os);
    if (reg != NULL)
        kw = Py_BuildValue("{sOsOsO}", "after_in_child", hook,
                           "after_in_parent", phook, "before", bhook);
    if (kw != NULL) {
        PyObject *noargs = PyTuple_New(0);
        if (noargs != NULL) {
            r = PyObject_Call(reg, noargs, kw);
            Py_DECREF(noargs);
        }
    }
    Py_XDECREF(kw);
    Py_XDECREF(reg);
    Py_DECREF(hook);
    Py_DECREF(phook);
    Py_DECREF(bhook);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* ---- module ------------------------------------------------------------ */

/* A heap type from `spec`, kept in *slot and published as `name`.
 * `weaklist`: the offset of its weak-reference list, for 3.8, whose
 * FromSpec ignores the __weaklistoffset__ member (0: it has none). */
static int
add_type(PyObject *module, PyType_Spec *spec, PyTypeObject **slot,
         const char *name, Py_ssize_t weaklist)
{
    PyObject *type;
#if PY_VERSION_HEX >= 0x03090000
    (void)weaklist;
    type = PyType_FromModuleAndSpec(module, spec, NULL);
#else
    type = PyType_FromSpec(spec);
#endif
    if (type == NULL)
        return -1;
#if PY_VERSION_HEX < 0x03090000
    if (weaklist > 0)
        ((PyTypeObject *)type)->tp_weaklistoffset = weaklist;
#endif
    *slot = (PyTypeObject *)type;
    Py_INCREF(type);
    if (PyModule_AddObject(module, name, type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    return 0;
}

/* threading.main_thread().ident: the thread that runs signal handlers. */
static int
main_thread_ident(unsigned long *out)
{
    PyObject *threading, *main, *ident;
    threading = PyImport_ImportModule("threading");
    if (threading == NULL)
        return -1;
    main = PyObject_CallMethod(threading, "main_thread", NULL);
    Py_DECREF(threading);
    if (main == NULL)
        return -1;
    ident = PyObject_GetAttrString(main, "ident");
    Py_DECREF(main);
    if (ident == NULL)
        return -1;
    *out = PyLong_AsUnsignedLong(ident);
    Py_DECREF(ident);
    return PyErr_Occurred() ? -1 : 0;
}

static int
efd_exec(PyObject *module)
{
    efd_state *st = (efd_state *)PyModule_GetState(module);

    st->probed = 0;
    st->nowait = -1;
    st->bell = -1;
    st->proc = 1;
    st->fork_thread = 0;
    st->forks = 0;
    st->parked = NULL;
    st->herd = -1;
    st->loop_ring = -1;
    if (main_thread_ident(&st->main_ident) < 0)
        return -1;
    if (register_fork_hook(module) < 0)
        return -1;
    if (add_type(module, &efd_eventfd_spec, &st->EventFD_type, "EventFD",
                 offsetof(eventfd_object, weakreflist)) < 0
            || add_type(module, &efd_semaphore_spec, &st->Semaphore_type,
                        "Semaphore", efd_semaphore_spec.basicsize
                        - (Py_ssize_t)sizeof(PyObject *)) < 0
            || add_type(module, &efd_event_spec, &st->Event_type, "Event",
                        efd_event_spec.basicsize
                        - (Py_ssize_t)sizeof(PyObject *)) < 0
            || add_type(module, &efd_loop_spec, &st->LoopSleeper_type,
                        "_LoopSleeper", 0) < 0)
        return -1;
    if (PyModule_AddIntConstant(module, "EFD_CLOEXEC", EFD_CLOEXEC) < 0
            || PyModule_AddIntConstant(module, "EFD_NONBLOCK", EFD_NONBLOCK) < 0
            || PyModule_AddIntConstant(module, "EFD_SEMAPHORE", EFD_SEMAPHORE) < 0)
        return -1;
#ifdef EFD_HAVE_EVENTFD
    if (PyModule_AddIntConstant(module, "HAVE_EVENTFD", 1) < 0)
#else
    if (PyModule_AddIntConstant(module, "HAVE_EVENTFD", 0) < 0)
#endif
        return -1;
    if (PyModule_AddObject(module, "MAX", PyLong_FromUnsignedLongLong(EFD_MAX)) < 0)
        return -1;
    if (PyModule_AddIntConstant(module, "_TIMEOUT_STRICT", EFD_TIMEOUT_STRICT) < 0
            || PyModule_AddIntConstant(module, "_TIMEOUT_THREADING",
                                       EFD_TIMEOUT_THREADING) < 0
            || PyModule_AddIntConstant(module, "_TIMEOUT_LOOK",
                                       EFD_TIMEOUT_LOOK) < 0)
        return -1;
    return 0;
}

static int
efd_traverse(PyObject *module, visitproc visit, void *arg)
{
    efd_state *st = (efd_state *)PyModule_GetState(module);
    if (st != NULL) {
        Py_VISIT(st->EventFD_type);
        Py_VISIT(st->Semaphore_type);
        Py_VISIT(st->Event_type);
        Py_VISIT(st->LoopSleeper_type);
    }
    return 0;
}

static int
efd_clear(PyObject *module)
{
    efd_state *st = (efd_state *)PyModule_GetState(module);
    if (st != NULL) {
        Py_CLEAR(st->EventFD_type);
        Py_CLEAR(st->Semaphore_type);
        Py_CLEAR(st->Event_type);
        Py_CLEAR(st->LoopSleeper_type);
    }
    return 0;
}

static void
efd_free(void *module)
{
    efd_clear((PyObject *)module);
}

static PyModuleDef_Slot efd_slots[] = {
    {Py_mod_exec, (void *)efd_exec},
#if PY_VERSION_HEX >= 0x030C0000
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL},
};

PyModuleDef efd_module = {
    PyModuleDef_HEAD_INIT,
    "efd._efd",
    "The C core of efd: the EventFD type and the os.eventfd backport.",
    sizeof(efd_state),
    efd_functions,
    efd_slots,
    efd_traverse,
    efd_clear,
    efd_free,
};

/* setup.py builds with -fvisibility=hidden; before 3.9, PyMODINIT_FUNC does
 * not mark the init function as exported. */
#if PY_VERSION_HEX < 0x03090000 && defined(__GNUC__)
__attribute__((visibility("default")))
#endif
PyMODINIT_FUNC
PyInit__efd(void)
{
    return PyModuleDef_Init(&efd_module);
}
