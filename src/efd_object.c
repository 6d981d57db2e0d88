/*
 * efd_object.c -- the EventFD type: construction, and the methods, each a
 * thin shell around one backend call or efd_wait().  Every method of a
 * closed object raises ValueError (CHECK_OPEN); every syscall on the
 * object's descriptors made without the GIL is inside efd_enter/efd_leave
 * or efd_wait, so close() from another thread can never let a number be
 * recycled under it.
 */
#include "efd_module.h"

#include <errno.h>
#include <stddef.h>
#include <structmember.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef EFD_HAVE_EVENTFD
#  include <sys/eventfd.h>
#endif

#define CHECK_OPEN(self)                                   \
    do {                                                   \
        if ((self)->closed)                                \
            return efd_err_closed();                       \
    } while (0)

/* ---- state ------------------------------------------------------------- */

extern PyModuleDef efd_module;

efd_state *
efd_state_from_type(PyTypeObject *type)
{
#if PY_VERSION_HEX >= 0x030B0000
    PyObject *m = PyType_GetModuleByDef(type, &efd_module);
    return m == NULL ? NULL : (efd_state *)PyModule_GetState(m);
#elif PY_VERSION_HEX >= 0x03090000
    PyObject *mro = type->tp_mro;
    Py_ssize_t i;
    for (i = 0; mro != NULL && i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *base = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        PyObject *m;
        if (!(base->tp_flags & Py_TPFLAGS_HEAPTYPE))
            continue;
        m = PyType_GetModule(base);
        if (m == NULL) {
            PyErr_Clear();
            continue;
        }
        if (PyModule_GetDef(m) == &efd_module)
            return (efd_state *)PyModule_GetState(m);
    }
    PyErr_SetString(PyExc_TypeError, "not an efd type");
    return NULL;
#else
    /* 3.8 has no type -> module link: find the module by name. */
    PyObject *name = PyUnicode_FromString("efd._efd");
    PyObject *m;
    (void)type;
    if (name == NULL)
        return NULL;
    m = PyImport_GetModule(name);
    Py_DECREF(name);
    if (m == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ImportError, "efd._efd is not imported");
        return NULL;
    }
    Py_DECREF(m);   /* sys.modules keeps it alive */
    return (efd_state *)PyModule_GetState(m);
#endif
}

/* ---- construction ------------------------------------------------------ */

/* EFD_HOLDS=off in the environment (read when an object is made or
 * adopted, as EFD_BACKEND is): `with` blocks consume as before the books,
 * and undo=True raises. */
static int
holds_turned_off(void)
{
    const char *v = getenv("EFD_HOLDS");
    return v != NULL && (strcmp(v, "off") == 0 || strcmp(v, "0") == 0);
}

/* Before a backend opens or adopts: what its operations may use here, as
 * this process's probes found (asked once per process). */
static void
what_this_process_offers(efd_impl *impl, efd_state *st, const efd_backend *b)
{
    if (b->syscall_always)
        impl->nowait = efd_state_nowait(st);
    if (b->unblock != NULL)
        impl->bell = efd_state_bell(st);
    impl->holds_off = holds_turned_off();
}

static eventfd_object *
alloc_object(PyTypeObject *type, efd_state *st)
{
    eventfd_object *self = (eventfd_object *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->impl.proc = &st->proc;
    self->impl.forks = &st->forks;
    self->impl.desc_shared = 1;      /* until a fresh open says otherwise */
    self->handed = 1;
    self->lineage = efd_reg_lineage();
    self->impl.desc_proc = st->proc;
    self->impl.desc_forks = st->forks;
    self->impl.ops = NULL;
    self->impl.fd = self->impl.wfd = self->impl.shmfd = -1;
    self->impl.cnt = NULL;
    /* No probe for this: a forced memory backend must not call eventfd2
     * where it has not been seen to work (a sandbox may kill for it). */
    self->impl.chan_eventfd = st->probed && st->err_plain == 0;
    self->impl.nowait = 0;
    self->closed = 1;            /* until a backend has opened it */
    self->detached = 0;
    self->users = 0;
    self->users_proc = st->proc;
    self->waiters = NULL;
    self->spare_rfd = self->spare_wfd = -1;
    self->generation = 0;
    self->herd_ep = self->herd_krfd = self->herd_kwfd = -1;
    self->herd_wrfd = self->herd_wwfd = -1;
    self->herd_watch = self->herd_asleep = 0;
    self->herd_exclusive = self->herd_oneshot = 0;
    self->woken = self->rechecks = 0;
    self->state = st;
    self->reg = NULL;
    self->quiet = 0;
    self->blocks_epoch = 0;
    self->blocks = 0;
    self->hold_warned = 0;
    self->loops = NULL;
    self->spare_ring.fd = -1;
    self->spare_ring_epoch = 0;
    self->spare_helper = NULL;
    self->spare_helper_epoch = 0;
    self->helpers_stopping = 0;
    self->helpers_stopping_epoch = 0;
    self->weakreflist = NULL;
#if PY_VERSION_HEX < 0x03090000
    self->module = PyImport_ImportModule("efd._efd");
    if (self->module == NULL) {
        Py_DECREF(self);
        return NULL;
    }
#endif
    return self;
}

static PyObject *
eventfd_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"initval", "semaphore", "nonblocking",
                             "cloexec", "backend", NULL};
    PyObject *initval_obj = NULL, *backend_obj = NULL;
    int semaphore = 0, nonblocking = 0, cloexec = 1, err;
    uint64_t initval = 0;
    const efd_backend *b;
    efd_state *st;
    eventfd_object *self;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O$pppO:EventFD", kwlist,
                                     &initval_obj, &semaphore, &nonblocking,
                                     &cloexec, &backend_obj))
        return NULL;
    if (initval_obj != NULL) {
        if (efd_to_u64(initval_obj, "initval", &initval) < 0)
            return NULL;
        if (initval > EFD_MAX) {
            PyErr_SetString(PyExc_ValueError,
                            "initval must be at most 2**64 - 2 "
                            "(18446744073709551614)");
            return NULL;
        }
    }
    st = efd_state_from_type(type);
    if (st == NULL)
        return NULL;
    b = efd_choose_backend(st, backend_obj, semaphore);
    if (b == NULL)
        return NULL;
    self = alloc_object(type, st);
    if (self == NULL)
        return NULL;
    what_this_process_offers(&self->impl, st, b);
    err = b->open(&self->impl, initval, semaphore, cloexec);
    if (err) {
        Py_DECREF(self);
        if (err != EMFILE && err != ENFILE && err != ENOMEM)
            return efd_err_unavailable(b->name, err, semaphore);
        return efd_err_errno(err);
    }
    self->impl.ops = b;
    /* A fresh kernel descriptor, close-on-exec: nobody else has it yet. */
    self->impl.desc_shared = self->handed = !cloexec;
    self->nonblocking = nonblocking;
    self->closed = 0;
    efd_reg_add(self);
    return (PyObject *)self;
}

/* A backend's adopt() said EINVAL: the descriptors are open but not what
 * the backend is made of (wrong kind or number).  A ValueError naming them
 * and the backend, not OSError(EINVAL). */
static PyObject *
err_not_backend(const efd_backend *b, const int *fds, int nfds, int err)
{
    char list[3 * 16 + 8];
    size_t used = 0;
    int i;
    for (i = 0; i < nfds && used < sizeof(list); i++)
        used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%d",
                                 i ? ", " : "", fds[i]);
    if (err == EPROTO)
        /* efd_count_adopt(): an efd page, of another kind or layout. */
        PyErr_Format(PyExc_ValueError,
                     "fds (%s) hold another kind of efd page than a '%s' "
                     "object's made here: another backend's, another "
                     "version's, or (for 'pipe') one made where its waiters "
                     "sleep on futex words while here they sleep in poll(), "
                     "or the other way round (python -m efd: \"'pipe' "
                     "waiters sleep\")", list, b->name);
    else if (nfds == 1)
        PyErr_Format(PyExc_ValueError,
                     "fd %s is not what a '%s' backend is made of (wrong "
                     "kind or number of descriptors)", list, b->name);
    else
        PyErr_Format(PyExc_ValueError,
                     "fds (%s) are not what a '%s' backend is made of (wrong "
                     "kind or number of descriptors)", list, b->name);
    return NULL;
}

/* Take an object off the process's table, then close it: the table never
 * lists a descriptor that may already be closed (efd_registry.c). */
static void
close_object(eventfd_object *self)
{
    efd_reg_remove(self, 0);
    efd_object_close(self);
}

/* The same, for an object being garbage-collected. */
static void
collect_object(eventfd_object *self)
{
    efd_reg_remove(self, 1);
    efd_object_close(self);
}

/* Adopt descriptors with a known backend: the common end of from_fd() and
 * of unpickling in a multiprocessing child.  On success the object owns the
 * descriptors; on failure the caller still does (and nothing was closed). */
static PyObject *
adopt(PyTypeObject *type, efd_state *st, const efd_backend *b, const int *fds,
      int nfds, int semaphore, int nonblocking)
{
    eventfd_object *self = alloc_object(type, st);
    int err;
    if (self == NULL)
        return NULL;
    what_this_process_offers(&self->impl, st, b);
    err = b->adopt(&self->impl, fds, nfds, semaphore);
    if (err) {
        self->impl.fd = self->impl.wfd = self->impl.shmfd = -1;
        Py_DECREF(self);
        if (err == EINVAL || err == EPROTO)
            return err_not_backend(b, fds, nfds, err);
        return efd_err_errno(err);
    }
    self->impl.ops = b;
    self->nonblocking = nonblocking;
    self->closed = 0;
    efd_reg_add(self);
    return (PyObject *)self;
}

static int
fd_arg(PyObject *obj, const char *what, int *out)
{
    long v;
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s",
                     what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    v = PyLong_AsLong(obj);
    if (v == -1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_OverflowError,
                         "%s %R is out of range for a file descriptor",
                         what, obj);
        }
        return -1;
    }
    if (v < 0 || v > INT32_MAX) {
        PyErr_Format(PyExc_ValueError,
                     "%s must be a non-negative file descriptor, not %ld",
                     what, v);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static PyObject *
eventfd_from_fd(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"fd", "semaphore", "nonblocking", NULL};
    PyObject *fd_obj, *sem_obj = Py_None;
    int fd, semaphore, nonblocking = 0, is_ev, kernel_sem = -1, err;
    efd_state *st;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$Op:from_fd", kwlist,
                                     &fd_obj, &sem_obj, &nonblocking))
        return NULL;
    if (fd_arg(fd_obj, "fd", &fd) < 0)
        return NULL;
    st = efd_state_from_type(type);
    if (st == NULL)
        return NULL;
    is_ev = efd_fd_is_eventfd(fd);
    if (is_ev < 0)
        return efd_err_errno(-is_ev);
    if (efd_reg_owned(fd)) {
        PyErr_Format(PyExc_ValueError,
                     "fd %d is owned by a live efd object of this process "
                     "(descriptors are owned once: use that object; to hand "
                     "it to another program, pass its handle())", fd);
        return NULL;
    }
    if (!is_ev) {
        PyErr_Format(PyExc_ValueError,
                     "fd %d is not an eventfd: from_fd adopts kernel eventfds "
                     "only.  If it is part of an efd object (the 'pipe' or "
                     "'futex' backend's readiness descriptor), hand the whole "
                     "object over with its handle() and efd.from_handle()",
                     fd);
        return NULL;
    }
    err = efd_kernel_fdinfo(fd, NULL, &kernel_sem);
    if (err && err != ENOTSUP && err != ENOENT)
        return efd_err_errno(err);
    if (sem_obj == Py_None) {
        if (kernel_sem < 0) {
            PyErr_Format(PyExc_ValueError,
                         "this kernel does not show whether fd %d is in "
                         "semaphore mode: pass semaphore=True or False", fd);
            return NULL;
        }
        semaphore = kernel_sem;
    }
    else {
        semaphore = PyObject_IsTrue(sem_obj);
        if (semaphore < 0)
            return NULL;
    }
    if (kernel_sem == 1 && !semaphore) {
        PyErr_Format(PyExc_ValueError,
                     "fd %d is a semaphore-mode eventfd: it cannot be "
                     "adopted with semaphore=False", fd);
        return NULL;
    }
    /* Adopted as a semaphore, a normal-mode eventfd needs the emulation, as
     * on a kernel without EFD_SEMAPHORE; and where fdinfo does not say which
     * mode it is in, the emulation is right in both (a semaphore-mode read
     * returns 1 and leaves nothing to write back). */
    return adopt(type, st,
                 (semaphore && kernel_sem != 1) ? &efd_backend_readback
                                                : &efd_backend_eventfd,
                 &fd, 1, semaphore, nonblocking);
}

/* _from_fds(fds, backend, semaphore, nonblocking): used when unpickling in a
 * child process; the descriptors were duplicated for the child. */
static PyObject *
eventfd_from_fds(PyTypeObject *type, PyObject *args)
{
    PyObject *fds_obj;
    const char *name;
    int semaphore, nonblocking, fds[3], n, i;
    const efd_backend *b;
    efd_state *st;

    if (!PyArg_ParseTuple(args, "Ospp:_from_fds", &fds_obj, &name,
                          &semaphore, &nonblocking))
        return NULL;
    b = efd_backend_by_name(name);
    if (b == NULL || b->adopt == NULL) {
        PyErr_Format(PyExc_ValueError, "unknown backend '%s'", name);
        return NULL;
    }
    if (!PyTuple_Check(fds_obj) || PyTuple_GET_SIZE(fds_obj) < 1
            || PyTuple_GET_SIZE(fds_obj) > 3) {
        PyErr_SetString(PyExc_TypeError, "fds must be a tuple of 1 to 3 ints");
        return NULL;
    }
    n = (int)PyTuple_GET_SIZE(fds_obj);
    for (i = 0; i < n; i++) {
        if (fd_arg(PyTuple_GET_ITEM(fds_obj, i), "fd", &fds[i]) < 0)
            return NULL;
    }
    st = efd_state_from_type(type);
    if (st == NULL)
        return NULL;
    return adopt(type, st, b, fds, n, semaphore, nonblocking);
}

/* _from_token(nonce, token): unpickling inside the dumping process (another
 * interpreter, or a queue's get): duplicate the descriptors of the live
 * object listed as `token` (efd_registry.c) and adopt the duplicates. */
static PyObject *
eventfd_from_token(PyTypeObject *type, PyObject *args)
{
    unsigned long long nonce, token;
    int fds[3], nfds = 0, semaphore = 0, nonblocking = 0, err, i;
    const efd_backend *b = NULL;
    efd_state *st;
    PyObject *r;

    if (!PyArg_ParseTuple(args, "KK:_from_token", &nonce, &token))
        return NULL;
    st = efd_state_from_type(type);
    if (st == NULL)
        return NULL;
    err = efd_reg_dup(nonce, token, fds, &nfds, &b, &semaphore,
                      &nonblocking);
    if (err == ESRCH) {
        PyErr_SetString(PyExc_RuntimeError,
                        "this pickle of an efd object was made in another "
                        "process: efd objects should only be shared between "
                        "processes through inheritance (multiprocessing), "
                        "handle() or send_handle()");
        return NULL;
    }
    if (err == ENOENT) {
        PyErr_SetString(PyExc_ValueError,
                        "the efd object this was pickled from is closed");
        return NULL;
    }
    if (err)
        return efd_err_errno(err);
    r = adopt(type, st, b, fds, nfds, semaphore, nonblocking);
    if (r == NULL) {
        for (i = 0; i < nfds; i++)
            close(fds[i]);
    }
    else
        ((eventfd_object *)r)->quiet = 1;
    return r;
}

/* _token() -> (nonce, token): what a pickle made inside this process names
 * this object by. */
static PyObject *
eventfd_token(eventfd_object *self, PyObject *Py_UNUSED(ignored))
{
    uint64_t token;
    CHECK_OPEN(self);
    self->impl.desc_shared = self->handed = 1;  /* its load dups them */
    token = efd_reg_dump(self);
    if (token == 0) {
        PyErr_SetString(PyExc_ValueError,
                        "this efd object is not listed in the process's "
                        "table (out of memory when it was made)");
        return NULL;
    }
    return Py_BuildValue("(KK)", (unsigned long long)efd_reg_nonce(),
                         (unsigned long long)token);
}

/* ---- methods ----------------------------------------------------------- */

static PyObject *
eventfd_fileno(eventfd_object *self, PyObject *Py_UNUSED(ignored))
{
    CHECK_OPEN(self);
    if (self->impl.ops->arm != NULL)
        self->impl.ops->arm(&self->impl);   /* readiness follows the count */
    self->impl.desc_shared = 1;     /* others may reach the description */
    if (self->impl.ops->syscall_always)
        self->handed = 1;           /* ... and, in it, the count */
    return PyLong_FromLong(self->impl.fd);
}

static PyObject *
eventfd_fds(eventfd_object *self, PyObject *Py_UNUSED(ignored))
{
    int fds[3], n, i;
    PyObject *t;
    CHECK_OPEN(self);
    self->impl.desc_shared = self->handed = 1;  /* about to be handed on */
    n = self->impl.ops->fds(&self->impl, fds, 3);
    t = PyTuple_New(n);
    if (t == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        PyObject *v = PyLong_FromLong(fds[i]);
        if (v == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

static PyObject *
eventfd_read_method(eventfd_object *self, PyObject *Py_UNUSED(ignored))
{
    uint64_t value = 0;
    int r;
    CHECK_OPEN(self);
    r = efd_wait(self, EFD_OP_READ, &value, !self->nonblocking, EFD_FOREVER);
    if (r < 0)
        return NULL;
    if (r == 0)
        return efd_err_errno(EAGAIN);
    return PyLong_FromUnsignedLongLong(value);
}

/* One non-blocking read of `op` (EFD_OP_READ, booked or not), whatever
 * `nonblocking` says: the value, or None.  For the async layer, which
 * does its own waiting, and reads when the loop reports the descriptor
 * readable. */
static PyObject *
try_read_op(eventfd_object *self, int op)
{
    uint64_t value = 0;
    int r = efd_wait(self, op, &value, 0, EFD_FOREVER);
    if (r < 0)
        return NULL;
    if (r == 0) {
        /* The loop saw the descriptor readable and there was nothing: on
         * the memory backends the token may be stale (a process died
         * before its sync), which would make the loop spin.  Repair. */
        if (self->impl.ops->repair != NULL)
            (void)self->impl.ops->repair(&self->impl);
        Py_RETURN_NONE;
    }
    return PyLong_FromUnsignedLongLong(value);
}

/* _try_read() -> int or None: one non-blocking read. */
static PyObject *
eventfd_try_read(eventfd_object *self, PyObject *Py_UNUSED(ignored))
{
    CHECK_OPEN(self);
    return try_read_op(self, EFD_OP_READ);
}

/* _try_read_hold() -> int or None: _try_read(), the value booked to this
 * process in the same step (efd_books.c): an event loop's reader taking
 * a unit for a task that holds it (a `with` block, undo=True), so that no
 * death between the take and the task's resumption loses it.  ValueError
 * (and nothing taken) where the books cannot be kept. */
static PyObject *
eventfd_try_read_hold(eventfd_object *self, PyObject *Py_UNUSED(ignored))
{
    CHECK_OPEN(self);
    if (efd_can_hold(self, 1) < 0)
        return NULL;
    return try_read_op(self, EFD_OP_READ | EFD_OP_HOLD);
}

/* _wait_readable(timeout=None) -> bool: wait until fileno() polls readable
 * (the count is above zero), consuming nothing: efd.Event's wait().  The
 * one wait loop, so close() from another thread and signals behave as in
 * acquire(); timeout 0 only looks. */
static PyObject *
eventfd_wait_readable(eventfd_object *self, PyObject *const *args,
                      Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"timeout", NULL};
    PyObject *a[1];
    double timeout = EFD_FOREVER;
    uint64_t unused = 0;
    int r;

    if (efd_parse_args("_wait_readable", names, 1, args, nargs, kwnames,
                       a) < 0)
        return NULL;
    if (efd_to_timeout(a[0], &timeout) < 0)
        return NULL;
    CHECK_OPEN(self);
    r = efd_wait(self, EFD_OP_READY, &unused, timeout != 0, timeout);
    if (r < 0)
        return NULL;
    return PyBool_FromLong(r);
}

static PyObject *
eventfd_write_method(eventfd_object *self, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames)
{
    static const char *const names[] = {"value", NULL};
    PyObject *a[1];
    uint64_t value = 1;
    int r;

    if ((nargs > 0 || kwnames != NULL)
            && efd_parse_args("write", names, 1, args, nargs, kwnames, a) < 0)
        return NULL;
    if (nargs > 0 || kwnames != NULL) {
        if (a[0] != NULL && efd_to_u64(a[0], "value", &value) < 0)
            return NULL;
    }
    CHECK_OPEN(self);
    if (value > EFD_MAX)
        return efd_err_errno(EINVAL);       /* the syscall's answer */
    /* write() keeps the syscall's semantics exactly, so it makes sure the
     * description is non-blocking even for a write of 1 (which
     * efd_kernel_write leaves to the wait loop, for release()'s sake). */
    if (self->impl.ops->syscall_always
            && (r = efd_ensure_nonblock(self->impl.fd)) != 0)
        return efd_err_errno(r);
    r = efd_wait(self, EFD_OP_WRITE, &value, !self->nonblocking, EFD_FOREVER);
    if (r < 0)
        return NULL;
    if (r == 0)
        return efd_err_errno(EAGAIN);
    Py_RETURN_NONE;
}

/* ---- robust holds (efd_books.c) ---------------------------------------- */

int
efd_can_hold(eventfd_object *self, int why)
{
    efd_impl *impl = &self->impl;
    int err;
    if (impl->holds_off) {
        if (why)
            PyErr_SetString(PyExc_ValueError,
                            "undo=True: robust holds are turned off here "
                            "(EFD_HOLDS=off in the environment)");
        return why ? -1 : 0;
    }
    if (impl->ops->try_read_hold == NULL || !efd_books_available()) {
        if (why)
            PyErr_Format(PyExc_ValueError,
                         "undo=True: the '%s' backend keeps no books of "
                         "holders%s (the 'futex' and 'pipe' backends do)",
                         impl->ops->name, efd_books_available() ? ""
                         : " on this platform");
        return why ? -1 : 0;
    }
    if ((err = efd_books_claim(impl)) == 0)
        return 1;
    if (!why) {
        /* A `with` block that cannot hold its unit consumes it, as before
         * the books: say so, once per object and process. */
        uint64_t epoch = efd_process_epoch();
        if (self->hold_warned != epoch) {
            self->hold_warned = epoch;
            if (PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                    "efd: a `with` block's unit is not held here, so it "
                    "will not come back if this process dies inside: %s",
                    err == EUSERS ? "every holder slot of the object is "
                                    "taken" : strerror(err)) < 0)
                return -1;
        }
        return 0;
    }
    if (err == EUSERS)
        PyErr_Format(PyExc_OSError,
                     "undo=True: every holder slot of this object is taken "
                     "(%d live processes have held units of it; a process "
                     "keeps its slot until it exits or closes the object)",
                     EFD_HOLDERS);
    else {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
    }
    return -1;
}

void
efd_block_enter(eventfd_object *self)
{
    uint64_t e = efd_process_epoch();
    if (self->blocks_epoch != e) {
        self->blocks_epoch = e;     /* a fork child's first block */
        self->blocks = 0;
    }
    self->blocks++;
}

int
efd_block_exit(eventfd_object *self)
{
    if (self->blocks_epoch != efd_process_epoch() || self->blocks <= 0)
        return 0;                   /* the parent's block, in a child */
    self->blocks--;
    return 1;
}

static PyObject *
eventfd_held(eventfd_object *self, PyObject *Py_UNUSED(ignored))
{
    CHECK_OPEN(self);
    return PyLong_FromUnsignedLongLong(efd_books_held(&self->impl));
}

/* _book(n): book n units a plain read took for this process (an event
 * loop's reader served them to a task that asked for undo). */
static PyObject *
eventfd_book(eventfd_object *self, PyObject *arg)
{
    uint64_t n;
    int err;
    CHECK_OPEN(self);
    if (efd_to_u64(arg, "n", &n) < 0)
        return NULL;
    if (efd_can_hold(self, 1) < 0)
        return NULL;
    if ((err = efd_books_book(&self->impl, n)) != 0)
        return efd_err_errno(err);
    Py_RETURN_NONE;
}

/* _unhold_block() -> 0, 1 or 2: an efd.aio block ends.  0: a fork child's
 * copy of its parent's block (release nothing); 1: this process holds
 * units (release through the count, which settles one in the same step);
 * 2: release as plainly as any release. */
static PyObject *
eventfd_unhold_block(eventfd_object *self, PyObject *Py_UNUSED(ignored))
{
    if (!efd_block_exit(self))
        return PyLong_FromLong(0);
    return PyLong_FromLong(!self->closed && efd_books_held(&self->impl) > 0
                           ? 1 : 2);
}

static PyObject *
eventfd_block_enter_method(eventfd_object *self, PyObject *Py_UNUSED(ignored))
{
    efd_block_enter(self);
    Py_RETURN_NONE;
}

static PyObject *
eventfd_block_exit_method(eventfd_object *self, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(efd_block_exit(self));
}

/* _can_hold(strict=False): whether reads can be booked here; strict:
 * raise instead of answering False (acquire(undo=True)'s errors). */
static PyObject *
eventfd_can_hold_method(eventfd_object *self, PyObject *const *args,
                        Py_ssize_t nargs)
{
    int r, strict = 0;
    CHECK_OPEN(self);
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "_can_hold() takes at most 1 "
                        "argument");
        return NULL;
    }
    if (nargs == 1 && (strict = PyObject_IsTrue(args[0])) < 0)
        return NULL;
    if ((r = efd_can_hold(self, strict)) < 0)
        return NULL;
    return PyBool_FromLong(r);
}

static PyObject *
eventfd_acquire(eventfd_object *self, PyObject *const *args, Py_ssize_t nargs,
                PyObject *kwnames)
{
    int blocking, r, undo;
    double timeout;
    uint64_t value;

    if (efd_parse_acquire(args, nargs, kwnames, EFD_TIMEOUT_STRICT,
                          &blocking, &timeout, &undo) < 0)
        return NULL;
    CHECK_OPEN(self);
    if (undo && efd_can_hold(self, 1) < 0)
        return NULL;
    r = efd_wait(self, EFD_OP_READ | (undo ? EFD_OP_HOLD : 0), &value,
                 blocking, timeout);
    if (r < 0)
        return NULL;
    return PyBool_FromLong(r);
}

static PyObject *
eventfd_release(eventfd_object *self, PyObject *const *args, Py_ssize_t nargs,
                PyObject *kwnames)
{
    uint64_t n;
    int err, too_big;

    if (efd_parse_release(args, nargs, kwnames, &n, &too_big) < 0)
        return NULL;
    if (too_big) {
        PyErr_SetString(PyExc_ValueError,
                        "n is larger than an EventFD can hold (2**64 - 2)");
        return NULL;
    }
    CHECK_OPEN(self);
    /* One try, never waiting (on the kernel backends without the GIL: see
     * efd_attempt). */
    err = n <= EFD_MAX ? efd_attempt(self, EFD_OP_WRITE, &n) : EAGAIN;
    if (err == 0)
        Py_RETURN_NONE;
    if (err != EAGAIN)
        return efd_err_errno(err);
    return efd_err_past_max(n);
}

static PyObject *
eventfd_close(eventfd_object *self, PyObject *Py_UNUSED(ignored))
{
    if (!self->closed)
        close_object(self);
    Py_RETURN_NONE;
}

/* _collect(): close as the garbage collector does (no warning; pickles of
 * the object that are still to be loaded in this process keep duplicates
 * of its descriptors): for the drop-ins, whose own finalizer warns. */
static PyObject *
eventfd_collect(eventfd_object *self, PyObject *Py_UNUSED(ignored))
{
    if (!self->closed)
        collect_object(self);
    Py_RETURN_NONE;
}

static PyObject *
eventfd_enter(eventfd_object *self, PyObject *Py_UNUSED(ignored))
{
    CHECK_OPEN(self);
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *
eventfd_exit(eventfd_object *self, PyObject *const *Py_UNUSED(args),
             Py_ssize_t Py_UNUSED(nargs))
{
    if (!self->closed)
        close_object(self);
    Py_RETURN_NONE;
}

/* detach() -> int: give up the descriptor without closing it, as
 * socket.detach() does.  Threads waiting in the object wake with
 * ValueError; if any of them is still inside it, the caller gets a
 * duplicate (same open file description) and the object closes its own
 * number once they are out, so that none of them can touch a number the
 * caller may close and the system reuse. */
static PyObject *
eventfd_detach(eventfd_object *self, PyObject *Py_UNUSED(ignored))
{
    int fd;
    CHECK_OPEN(self);
    if (!self->impl.ops->syscall_always) {
        PyErr_Format(PyExc_ValueError,
                     "detach() needs a kernel eventfd: the '%s' backend "
                     "keeps its count in shared memory, not in the "
                     "descriptor", self->impl.ops->name);
        return NULL;
    }
    if (self->impl.ops->pending != NULL
            && self->impl.ops->pending(&self->impl) > 0) {
        PyErr_SetString(PyExc_ValueError,
                        "detach() while this object holds units it could "
                        "not write back (the counter is full): close() or "
                        "read first");
        return NULL;
    }
    if (self->users > 0 && self->users_proc == efd_self_proc(self)) {
        fd = fcntl(self->impl.fd, F_DUPFD_CLOEXEC, 0);
        if (fd < 0)
            return PyErr_SetFromErrno(PyExc_OSError);
        if (!(fcntl(self->impl.fd, F_GETFD) & FD_CLOEXEC))
            (void)fcntl(fd, F_SETFD, 0);
        close_object(self);
        return PyLong_FromLong(fd);
    }
    fd = self->impl.fd;
    self->detached = 1;
    close_object(self);
    return PyLong_FromLong(fd);
}

/* _alone() -> bool: whether nobody but the tasks of one event loop of
 * this process can be waiting for this object's units: no other process
 * may hold it (nothing handed out, and no fork through the C library since
 * it was made, in the parent or the child: efd_reg_lineage()), no thread
 * of this process waits in a blocking call on it, and no more than one
 * loop has tasks queued or served here (efd/_aio.py's records).  Then an
 * in-process hand-off between that loop's tasks starves nobody
 * (efd.aio.HANDOFF_RUN).  Asked with the GIL held, which every one of
 * those changes but a fork holds too.  A child made by a bare clone system
 * call runs no fork handler: its parent still answers True (docs:
 * asyncio.rst). */
static PyObject *
eventfd_alone(eventfd_object *self, PyObject *Py_UNUSED(ignored))
{
    CHECK_OPEN(self);
    return PyBool_FromLong(!self->handed && self->aio_records <= 1
                           && self->waiters == NULL
                           && efd_reg_lineage() == self->lineage);
}

/* The count without consuming it, or None where the backend cannot tell. */
static PyObject *
eventfd_peek(eventfd_object *self, PyObject *Py_UNUSED(ignored))
{
    uint64_t v;
    CHECK_OPEN(self);
    if (self->impl.ops->peek(&self->impl, &v) != 0)
        Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(v);
}

/* _look(): an event loop's re-check -- the count, after giving back the
 * units of holders found dead if this process has not looked for them in
 * the last few ms (efd_books.c), as a blocked thread's re-check does. */
static PyObject *
eventfd_look(eventfd_object *self, PyObject *Py_UNUSED(ignored))
{
    CHECK_OPEN(self);
    (void)efd_books_sweep(&self->impl);
    return eventfd_peek(self, NULL);
}

/* _wakeups() -> (woken, rechecks): this process's wait-loop wake-ups. */
static PyObject *
eventfd_wakeups(eventfd_object *self, PyObject *Py_UNUSED(ignored))
{
    if (self->users_proc != efd_self_proc(self))
        return Py_BuildValue("(ii)", 0, 0);   /* the counts are the parent's */
    return Py_BuildValue(
        "(KK)", (unsigned long long)__atomic_load_n(&self->woken,
                                                    __ATOMIC_RELAXED),
        (unsigned long long)__atomic_load_n(&self->rechecks,
                                            __ATOMIC_RELAXED));
}

/* efd/_aio.py: an event loop's sleeper on this object, or None (efd_loop.c). */
static PyObject *
eventfd_loop_sleeper(eventfd_object *self, PyObject *Py_UNUSED(ignored))
{
    if (self->closed) {
        PyErr_SetString(PyExc_ValueError, "I/O operation on closed EventFD");
        return NULL;
    }
    return efd_loop_sleeper_new(self);
}

/* _pass_on() -> bool: a wake-up that came to this process and that it
 * will not use goes on to the next waiter, if units are there. */
static PyObject *
eventfd_pass_on(eventfd_object *self, PyObject *Py_UNUSED(ignored))
{
    CHECK_OPEN(self);
    return PyBool_FromLong(efd_pass_on(self));
}

static PyObject *
eventfd_repr(eventfd_object *self)
{
    PyObject *qual, *mod, *r;
    qual = PyObject_GetAttrString((PyObject *)Py_TYPE(self), "__qualname__");
    if (qual == NULL)
        return NULL;
    mod = PyObject_GetAttrString((PyObject *)Py_TYPE(self), "__module__");
    if (mod == NULL) {
        Py_DECREF(qual);
        return NULL;
    }
    if (self->closed && self->users == 0) {
        r = PyUnicode_FromFormat("<%U.%U [closed]>", mod, qual);
    }
    else {
        uint64_t v;
        char value[48] = "";
        if (!self->closed && self->impl.ops->peek(&self->impl, &v) == 0)
            PyOS_snprintf(value, sizeof(value), " value=%llu",
                          (unsigned long long)v);
        r = PyUnicode_FromFormat(
            "<%U.%U%s fd=%d mode=%s%s backend='%s'%s>", mod, qual,
            self->closed ? " [closing]" : "", self->impl.fd,
            self->impl.semaphore ? "semaphore" : "counter",
            self->nonblocking ? " nonblocking" : "",
            self->impl.ops->name, value);
    }
    Py_DECREF(qual);
    Py_DECREF(mod);
    return r;
}

static void
eventfd_finalize(PyObject *op)
{
    eventfd_object *self = (eventfd_object *)op;
    PyObject *type, *value, *tb;
    if (self->closed)
        return;
    PyErr_Fetch(&type, &value, &tb);
    if (!self->quiet && PyErr_ResourceWarning(op, 1, "unclosed %R", op) < 0)
        PyErr_WriteUnraisable(op);
    collect_object(self);
    PyErr_Restore(type, value, tb);
}

static void
eventfd_dealloc(eventfd_object *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    if (PyObject_CallFinalizerFromDealloc((PyObject *)self) < 0)
        return;
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (self->users_proc == efd_self_proc(self))
        self->users = 0;      /* nobody can be inside: they hold references */
    if (!self->closed || self->impl.fd >= 0 || self->spare_rfd >= 0
            || self->herd_ep >= 0 || self->waiters != NULL)
        collect_object(self);
#if PY_VERSION_HEX < 0x03090000
    Py_CLEAR(self->module);
#endif
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

/* ---- properties -------------------------------------------------------- */

static PyObject *
get_closed(eventfd_object *self, void *Py_UNUSED(c))
{
    return PyBool_FromLong(self->closed);
}

static PyObject *
get_semaphore(eventfd_object *self, void *Py_UNUSED(c))
{
    return PyBool_FromLong(self->impl.semaphore);
}

static PyObject *
get_nonblocking(eventfd_object *self, void *Py_UNUSED(c))
{
    return PyBool_FromLong(self->nonblocking);
}

static PyObject *
get_backend(eventfd_object *self, void *Py_UNUSED(c))
{
    if (self->impl.ops == NULL)
        Py_RETURN_NONE;
    return PyUnicode_FromString(self->impl.ops->name);
}

static PyObject *
get_quiet(eventfd_object *self, void *Py_UNUSED(c))
{
    return PyBool_FromLong(self->quiet);
}

static PyObject *
get_wake_one(eventfd_object *self, void *Py_UNUSED(c))
{
    if (self->impl.ops == NULL || self->closed)
        Py_RETURN_FALSE;
    return PyBool_FromLong(efd_herd_wake_one(self));
}

static PyObject *
get_futex_sleep(eventfd_object *self, void *Py_UNUSED(c))
{
    if (self->impl.ops == NULL || self->closed)
        Py_RETURN_FALSE;
    return PyBool_FromLong(self->impl.ops->block != NULL);
}

/* value: the count now, without consuming it. */
static PyObject *
get_value(eventfd_object *self, void *Py_UNUSED(closure))
{
    uint64_t v, added;
    CHECK_OPEN(self);
    /* The count after settling the books of holders found dead. */
    if (self->impl.ops->settle != NULL && efd_books_foreign(&self->impl))
        (void)self->impl.ops->settle(&self->impl, -1, &added);
    if (self->impl.ops->peek(&self->impl, &v) != 0) {
        PyErr_Format(PyExc_OSError,
                     "the count of a '%s' backend cannot be read here (no "
                     "/proc/self/fdinfo?)", self->impl.ops->name);
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(v);
}

static PyGetSetDef eventfd_getset[] = {
    {"value", (getter)get_value, NULL,
     "The count now, without consuming it (read-only; a snapshot: other "
     "threads and processes may change it at once).", NULL},
    {"closed", (getter)get_closed, NULL,
     "True once close() has been called.", NULL},
    {"semaphore", (getter)get_semaphore, NULL,
     "True if a read takes 1 (EFD_SEMAPHORE semantics), False if it takes "
     "the whole count.", NULL},
    {"nonblocking", (getter)get_nonblocking, NULL,
     "True if read() and write() raise BlockingIOError instead of waiting.",
     NULL},
    {"backend", (getter)get_backend, NULL,
     "The name of the backend in use ('eventfd', 'eventfd-readback', "
     "'pipe' or 'futex').", NULL},
    {"_quiet", (getter)get_quiet, NULL,
     "True if made by loading a pickle inside this process (collected "
     "while open, it closes without a ResourceWarning).", NULL},
    {"_futex_sleep", (getter)get_futex_sleep, NULL,
     "True if blocked waiters sleep on futex words in the shared page "
     "(the futex backend; the pipe backend where futexes are), not in "
     "poll() on the descriptor.", NULL},
    {"_wake_one", (getter)get_wake_one, NULL,
     "True if a release wakes one waiter across processes (event loops that "
     "register fileno() with EPOLLEXCLUSIVE included), not every process's.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef eventfd_members[] = {
    {"__weaklistoffset__", T_PYSSIZET,
     offsetof(eventfd_object, weakreflist), READONLY, NULL},
    {"_aio_records", T_INT, offsetof(eventfd_object, aio_records), 0,
     "Loops of this process with tasks waiting for this object's units "
     "(kept by efd._aio)."},
    {NULL, 0, 0, 0, NULL},
};

#define FASTKW (METH_FASTCALL | METH_KEYWORDS)

static PyMethodDef eventfd_methods[] = {
    {"fileno", (PyCFunction)eventfd_fileno, METH_NOARGS,
     "fileno($self, /)\n--\n\n"
     "Return the descriptor to wait on for readiness (select, poll, "
     "asyncio).\n\nIt polls readable while the count is above zero."},
    {"read", (PyCFunction)eventfd_read_method, METH_NOARGS,
     "read($self, /)\n--\n\n"
     "Take from the counter, with eventfd read(2) semantics: 1 in "
     "semaphore mode, the whole count otherwise; return what was taken.\n\n"
     "Waits while the count is zero, or raises BlockingIOError if the "
     "object is non-blocking."},
    {"write", (PyCFunction)(void (*)(void))eventfd_write_method, FASTKW,
     "write($self, /, value=1)\n--\n\n"
     "Add value to the counter, with eventfd write(2) semantics.\n\n"
     "Waits while the sum would pass 2**64 - 2 (or raises BlockingIOError "
     "if non-blocking); writing 2**64 - 1 is OSError(EINVAL)."},
    {"acquire", (PyCFunction)(void (*)(void))eventfd_acquire, FASTKW,
     "acquire($self, /, blocking=True, timeout=None, *, undo=False)\n--\n\n"
     "Take what one read takes and return True, or return False if "
     "nothing came within timeout seconds (or at once, with "
     "blocking=False).  Never raises BlockingIOError.  undo=True books "
     "what it takes to this process, as SysV's SEM_UNDO: if the process "
     "dies before a release() of its own gives it back, it returns to the "
     "count (the 'futex' and 'pipe' backends; ValueError elsewhere)."},
    {"release", (PyCFunction)(void (*)(void))eventfd_release, FASTKW,
     "release($self, /, n=1)\n--\n\n"
     "Add n (one or more) to the counter.  Never waits: a release that "
     "would pass 2**64 - 2 raises ValueError and changes nothing."},
    {"close", (PyCFunction)eventfd_close, METH_NOARGS,
     "close($self, /)\n--\n\n"
     "Close the descriptor(s).  Threads waiting in this object wake with "
     "ValueError.  Calling close() again does nothing."},
    {"__enter__", (PyCFunction)eventfd_enter, METH_NOARGS, NULL},
    {"_collect", (PyCFunction)eventfd_collect, METH_NOARGS,
     "_collect($self, /)\n--\n\nClose as the garbage collector does "
     "(pickles still to be loaded in this process keep the descriptors)."},
    {"__exit__", (PyCFunction)(void (*)(void))eventfd_exit, METH_FASTCALL,
     NULL},
    {"from_fd", (PyCFunction)(void (*)(void))eventfd_from_fd,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "from_fd($type, /, fd, *, semaphore=None, nonblocking=False)\n--\n\n"
     "Adopt an inherited eventfd descriptor; the new object owns it.\n\n"
     "semaphore=None reads the mode from /proc/self/fdinfo."},
    {"detach", (PyCFunction)eventfd_detach, METH_NOARGS,
     "detach($self, /)\n--\n\n"
     "Give up the descriptor without closing it and return it, as "
     "socket.detach() does; the object is closed afterwards.\n\n"
     "Only for the kernel backends ('eventfd', 'eventfd-readback'): a "
     "'pipe' object's count is not in its descriptor (ValueError)."},
    {"_from_fds", (PyCFunction)(void (*)(void))eventfd_from_fds,
     METH_VARARGS | METH_CLASS, NULL},
    {"_from_token", (PyCFunction)(void (*)(void))eventfd_from_token,
     METH_VARARGS | METH_CLASS,
     "_from_token($type, nonce, token, /)\n--\n\n"
     "Unpickling inside the dumping process: a new object over duplicates "
     "of the live object's descriptors."},
    {"_token", (PyCFunction)eventfd_token, METH_NOARGS,
     "_token($self, /)\n--\n\n(nonce, token): this object in the process's "
     "table, for pickles made and loaded in this process."},
    {"_try_read", (PyCFunction)eventfd_try_read, METH_NOARGS,
     "_try_read($self, /)\n--\n\nOne non-blocking read: the value taken, or None."},
    {"_try_read_hold", (PyCFunction)eventfd_try_read_hold, METH_NOARGS,
     "_try_read_hold($self, /)\n--\n\n_try_read(), the value booked to this "
     "process in the same step (ValueError where no books are kept)."},
    {"_wait_readable", (PyCFunction)(void (*)(void))eventfd_wait_readable,
     FASTKW,
     "_wait_readable($self, /, timeout=None)\n--\n\n"
     "Wait until fileno() polls readable, consuming nothing."},
    {"_fds", (PyCFunction)eventfd_fds, METH_NOARGS,
     "_fds($self, /)\n--\n\nAll descriptors behind the object (for pickling)."},
    {"_wakeups", (PyCFunction)eventfd_wakeups, METH_NOARGS,
     "_wakeups($self, /)\n--\n\n"
     "(woken, rechecks): how often this process's blocking waits on the "
     "object came back from their sleep for an event, and for a bare "
     "re-check (a poll() sleeper the kernel puts back to sleep unseen is "
     "not counted)."},
    {"_loop_sleeper", (PyCFunction)eventfd_loop_sleeper, METH_NOARGS,
     "A sleeper through which an event loop waits on this object's futex\n"
     "word (efd/_aio.py), or None where it cannot."},
    {"_pass_on", (PyCFunction)eventfd_pass_on, METH_NOARGS,
     "_pass_on($self, /)\n--\n\n"
     "If units are there, wake one more waiter (another process's) and "
     "return True; else return False."},
    {"_alone", (PyCFunction)eventfd_alone, METH_NOARGS,
     "_alone($self, /)\n--\n\n"
     "Whether only the tasks of one event loop of this process can be "
     "waiting for the units: no other process may hold the object, no "
     "thread of this process waits in a blocking call, at most one loop "
     "has tasks queued (efd.aio.HANDOFF_RUN)."},
    {"_book", (PyCFunction)eventfd_book, METH_O,
     "_book($self, n, /)\n--\n\nBook n units a plain read took for this "
     "process."},
    {"_held", (PyCFunction)eventfd_held, METH_NOARGS,
     "_held($self, /)\n--\n\nUnits this process holds (undo=True, `with` "
     "blocks of the drop-ins), as its books say."},
    {"_can_hold", (PyCFunction)(void (*)(void))eventfd_can_hold_method,
     METH_FASTCALL,
     "_can_hold($self, strict=False, /)\n--\n\nWhether reads can be "
     "booked here (claims this process's holder slot on first use); "
     "strict: raise, naming why, instead of False."},
    {"_unhold_block", (PyCFunction)eventfd_unhold_block, METH_NOARGS,
     "_unhold_block($self, /)\n--\n\nAn efd.aio block ends: 0 release "
     "nothing (a fork child), 1 release through the count, 2 release."},
    {"_block_enter", (PyCFunction)eventfd_block_enter_method, METH_NOARGS,
     "_block_enter($self, /)\n--\n\nA `with` block's unit was taken in "
     "this process."},
    {"_block_exit", (PyCFunction)eventfd_block_exit_method, METH_NOARGS,
     "_block_exit($self, /)\n--\n\nA `with` block ends: True if it was "
     "entered in this process (release its unit), False in a fork child."},
    {"_look", (PyCFunction)eventfd_look, METH_NOARGS,
     "_look($self, /)\n--\n\nAn event loop's re-check: the count, after "
     "giving back dead holders' units (or None, as _peek())."},
    {"_peek", (PyCFunction)eventfd_peek, METH_NOARGS,
     "_peek($self, /)\n--\n\nThe count without consuming it, or None if unknown."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot eventfd_slots[] = {
    {Py_tp_new, eventfd_new},
    {Py_tp_dealloc, eventfd_dealloc},
    {Py_tp_finalize, eventfd_finalize},
    {Py_tp_repr, eventfd_repr},
    {Py_tp_methods, eventfd_methods},
    {Py_tp_members, eventfd_members},
    {Py_tp_getset, eventfd_getset},
    {Py_tp_doc,
     "EventFD(initval=0, *, semaphore=False, nonblocking=False, "
     "cloexec=True, backend=None)\n--\n\n"
     "A 64-bit counter behind a file descriptor (Linux eventfd)."},
    {0, NULL},
};

PyType_Spec efd_eventfd_spec = {
    "efd._efd.EventFD",
    sizeof(eventfd_object),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    eventfd_slots,
};
