/*
 * efd_sync.c -- the hot paths of efd.Semaphore, efd.BoundedSemaphore and
 * efd.Event, in C (as CPython keeps _queuemodule.c apart from
 * _threadmodule.c).
 *
 * Each is a small object around an EventFD (semaphore mode for the
 * semaphores, counter mode for the event) with threading's semantics:
 * a timeout that is not above zero only tries (only looks, for Event.wait),
 * `with sem:` acquires and releases, a BoundedSemaphore refuses to go past
 * its initial value.  efd/_sync.py subclasses them with what is not hot:
 * construction, repr, fileno(), close(), the async methods, pickling.
 */
#include "efd_module.h"

#include <errno.h>
#include <math.h>
#include <structmember.h>

typedef struct {
    PyObject_HEAD
    eventfd_object *ev;
    int bounded;            /* a BoundedSemaphore ... */
    uint64_t bound;         /* ... may not pass this count */
    PyObject *weakreflist;
} sync_object;

static int
sync_check_ev(PyObject *ev, efd_state *st)
{
    if (!PyObject_TypeCheck(ev, st->EventFD_type)) {
        PyErr_Format(PyExc_TypeError, "expected an EventFD, not %.100s",
                     Py_TYPE(ev)->tp_name);
        return -1;
    }
    return 0;
}

/* The "closed" error, naming the drop-in's own class (its Python
 * subclass's name: "Semaphore", "BoundedSemaphore", "Event"). */
static PyObject *
sync_err_closed(PyObject *self)
{
    PyErr_Format(PyExc_ValueError, "I/O operation on closed %s",
                 Py_TYPE(self)->tp_name);
    return NULL;
}

#define EV_OPEN(self)                                      \
    do {                                                   \
        if ((self)->ev->closed)                            \
            return sync_err_closed((PyObject *)(self));    \
    } while (0)

/* ---- common ------------------------------------------------------------ */

static int
sync_traverse(sync_object *self, visitproc visit, void *arg)
{
    Py_VISIT(self->ev);
    Py_VISIT(Py_TYPE(self));
    return 0;
}

static int
sync_clear(sync_object *self)
{
    Py_CLEAR(self->ev);
    return 0;
}

static void
sync_dealloc(sync_object *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    (void)sync_clear(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

/* The arguments of the constructor and of _reinit: an open EventFD of
 * the mode `type` needs, and an optional bound.  0, or -1 with an error. */
static int
sync_parse(PyTypeObject *type, PyObject *args, PyObject *kwds,
           const char *fmt, PyObject **ev_out, int *bounded, uint64_t *bound)
{
    static char *kwlist[] = {"ev", "bound", NULL};
    PyObject *ev, *bound_obj = Py_None;
    efd_state *st = efd_state_from_type(type);

    if (st == NULL)
        return -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, fmt, kwlist, &ev,
                                     &bound_obj))
        return -1;
    if (sync_check_ev(ev, st) < 0)
        return -1;
    *bound = 0;
    if (bound_obj != Py_None) {
        if (efd_to_u64(bound_obj, "bound", bound) < 0)
            return -1;
        if (*bound > EFD_MAX) {
            PyErr_SetString(PyExc_ValueError,
                            "bound must be at most 2**64 - 2");
            return -1;
        }
    }
    if (((eventfd_object *)ev)->closed) {
        efd_err_closed();
        return -1;
    }
    /* A semaphore takes one unit per acquire; an event's flag is a count
     * that clear() empties: the EventFD's mode must say so. */
    if (((eventfd_object *)ev)->impl.semaphore
            != PyType_IsSubtype(type, st->Semaphore_type)) {
        PyErr_Format(PyExc_ValueError, "%s needs a %s-mode EventFD",
                     type->tp_name,
                     ((eventfd_object *)ev)->impl.semaphore ? "counter"
                                                            : "semaphore");
        return -1;
    }
    *ev_out = ev;
    *bounded = bound_obj != Py_None;
    /* Dead holders' units given back never pass the bound, in any process
     * (efd_books.c): the page says it. */
    if (*bounded && ((eventfd_object *)ev)->impl.cnt != NULL)
        atomic_store(&((eventfd_object *)ev)->impl.cnt->bound, *bound);
    return 0;
}

static PyObject *
sync_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *ev;
    int bounded;
    uint64_t bound;
    sync_object *self;

    if (sync_parse(type, args, kwds, "O|O:_new", &ev, &bounded, &bound) < 0)
        return NULL;
    self = (sync_object *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    Py_INCREF(ev);
    self->ev = (eventfd_object *)ev;
    self->bounded = bounded;
    self->bound = bound;
    self->weakreflist = NULL;
    return (PyObject *)self;
}

/* _reinit(ev, bound=None) -> the EventFD it held before: the Python
 * layer's __init__, when a subclass's own __init__ calls it with the
 * arguments that its constructor did not pass on to __new__. */
static PyObject *
sync_reinit(sync_object *self, PyObject *args, PyObject *kwds)
{
    PyObject *ev, *old;
    int bounded;
    uint64_t bound;

    if (sync_parse(Py_TYPE(self), args, kwds, "O|O:_reinit", &ev, &bounded,
                   &bound) < 0)
        return NULL;
    Py_INCREF(ev);
    old = (PyObject *)self->ev;
    self->ev = (eventfd_object *)ev;
    self->bounded = bounded;
    self->bound = bound;
    return old;
}

static PyMemberDef sync_members[] = {
    {"_ev", T_OBJECT, offsetof(sync_object, ev), READONLY,
     "The EventFD that holds the count."},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(sync_object, weakreflist),
     READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

/* ---- Semaphore --------------------------------------------------------- */

/* A blocking call of a drop-in is about to wait: efd._sync._before_block
 * warns if this thread runs an event loop (RuntimeWarning, naming the
 * async way).  Called only once a try found nothing, so that the fast
 * paths pay nothing for it. */
static int
before_block(sync_object *self, const char *method, const char *instead)
{
    PyObject *mod = PyImport_ImportModule("efd._sync"), *r;
    if (mod == NULL)
        return -1;
    r = PyObject_CallMethod(mod, "_before_block", "Oss", (PyObject *)self,
                            method, instead);
    Py_DECREF(mod);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* Whether tasks of this process queue for the semaphore's units (a
 * non-blocking acquire must not take a unit meant for them): asked of
 * efd._aio only while it has records for the object.  1, 0, or -1. */
static int
async_queued(sync_object *self)
{
    PyObject *mod, *r;
    int q;
    if (self->ev->aio_records <= 0)
        return 0;
    if ((mod = PyImport_ImportModule("efd._aio")) == NULL)
        return -1;
    r = PyObject_CallMethod(mod, "queued_anywhere", "O",
                            (PyObject *)self->ev);
    Py_DECREF(mod);
    if (r == NULL)
        return -1;
    q = PyObject_IsTrue(r);
    Py_DECREF(r);
    return q;
}

/* Take one unit: try; if nothing is there and the caller waits, warn if
 * an event loop runs on this thread, then wait.  `op`: EFD_OP_READ, with
 * EFD_OP_HOLD to book it to this process. */
static PyObject *
sem_take(sync_object *self, int op, int blocking, double timeout,
         const char *method, const char *instead)
{
    uint64_t value;
    int r;
    EV_OPEN(self);
    if (!blocking || timeout == 0) {
        if ((r = async_queued(self)) != 0)
            return r < 0 ? NULL : PyBool_FromLong(0);
        blocking = 0;
    }
    r = efd_wait(self->ev, op, &value, 0, 0.0);
    if (r == 0 && blocking) {
        if (before_block(self, method, instead) < 0)
            return NULL;
        r = efd_wait(self->ev, op, &value, 1, timeout);
    }
    if (r < 0)
        return NULL;
    return PyBool_FromLong(r);
}

static PyObject *
sem_acquire(sync_object *self, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames)
{
    int blocking, undo;
    double timeout;

    if (efd_parse_acquire(args, nargs, kwnames, EFD_TIMEOUT_THREADING,
                          &blocking, &timeout, &undo) < 0)
        return NULL;
    EV_OPEN(self);
    if (undo && efd_can_hold(self->ev, 1) < 0)
        return NULL;
    return sem_take(self, EFD_OP_READ | (undo ? EFD_OP_HOLD : 0), blocking,
                    timeout, "acquire", "sem.acquire_async()");
}

/* Add n, refusing to pass `bound` (BoundedSemaphore) or the maximum. */
static PyObject *
sem_release(sync_object *self, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames)
{
    uint64_t n, now;
    int err, too_big;

    if (efd_parse_release(args, nargs, kwnames, &n, &too_big) < 0)
        return NULL;
    if (too_big) {
        if (self->bounded)
            goto too_many;
        PyErr_SetString(PyExc_ValueError,
                        "n is larger than a semaphore can hold (2**64 - 2)");
        return NULL;
    }
    EV_OPEN(self);
    if (self->bounded) {
        efd_impl *impl = &self->ev->impl;
        if (n > self->bound)
            goto too_many;
        if (impl->ops->try_write_limit != NULL) {
            /* A memory backend, whose count refuses to pass the bound in
             * the same compare-and-swap that adds: exact across processes. */
            err = impl->ops->try_write_limit(impl, n, self->bound);
            if (err == EAGAIN)
                goto too_many;
            if (err)
                return efd_err_errno(err);
            Py_RETURN_NONE;
        }
        /* A kernel counter: look, then add, both with the GIL held (exact
         * among this process's threads; see the docs for other processes). */
        if (impl->ops->peek(impl, &now) != 0) {
            PyErr_Format(PyExc_OSError,
                         "BoundedSemaphore.release() cannot read the count "
                         "of a '%s' backend here (no /proc/self/fdinfo?)",
                         impl->ops->name);
            return NULL;
        }
        /* n <= bound here, so bound - n cannot wrap (now + n could). */
        if (now > self->bound - n)
            goto too_many;
        err = impl->ops->try_write(impl, n);
    }
    else
        err = n <= EFD_MAX ? efd_attempt(self->ev, EFD_OP_WRITE, &n) : EAGAIN;
    if (err == 0)
        Py_RETURN_NONE;
    if (err != EAGAIN)
        return efd_err_errno(err);
    return efd_err_past_max(n);
too_many:
    PyErr_SetString(PyExc_ValueError, "Semaphore released too many times");
    return NULL;
}

/* `with sem:` holds its unit: booked to this process where the backend
 * keeps books, so that it comes back if the process dies in the block.
 * `blocking` 0: take only a unit that is there (False: nothing taken, no
 * block entered). */
static PyObject *
enter_block(sync_object *self, int blocking)
{
    PyObject *r;
    int hold;
    EV_OPEN(self);
    if ((hold = efd_can_hold(self->ev, 0)) < 0)
        return NULL;
    r = sem_take(self, EFD_OP_READ | (hold ? EFD_OP_HOLD : 0), blocking,
                 EFD_FOREVER, "__enter__", "async with sem");
    if (r == Py_True)
        efd_block_enter(self->ev);
    return r;
}

static PyObject *
sem_enter(sync_object *self, PyObject *Py_UNUSED(ignored))
{
    return enter_block(self, 1);
}

/* _try_enter() -> bool: efd.aio's `async with` when a unit is there, in
 * one call: __enter__ without the wait. */
static PyObject *
sem_try_enter(sync_object *self, PyObject *Py_UNUSED(ignored))
{
    return enter_block(self, 0);
}

/* The block's unit goes back -- unless this is a fork child that
 * inherited the block from its parent: the parent releases it. */
static PyObject *
sem_exit(sync_object *self, PyObject *const *Py_UNUSED(args),
         Py_ssize_t Py_UNUSED(nargs))
{
    if (!efd_block_exit(self->ev))
        Py_RETURN_NONE;
    return sem_release(self, NULL, 0, NULL);
}

static PyObject *
sem_get_bound(sync_object *self, void *Py_UNUSED(c))
{
    if (!self->bounded)
        Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(self->bound);
}

#define FASTKW (METH_FASTCALL | METH_KEYWORDS)

static PyMethodDef sem_methods[] = {
    {"acquire", (PyCFunction)(void (*)(void))sem_acquire, FASTKW,
     "acquire($self, /, blocking=True, timeout=None, *, undo=False)\n--\n\n"
     "Take one unit, waiting for one if needed, as threading.Semaphore "
     "does: return True once taken, False if none came within timeout "
     "seconds (a timeout that is not above zero only tries).  A call "
     "that would wait on a thread whose event loop is running first warns "
     "(RuntimeWarning, naming acquire_async()); nothing is taken before "
     "the warning.  While tasks of this process are queued in "
     "acquire_async() (or in efd.aio), a call that only tries returns "
     "False rather than take a unit meant for them.  undo=True holds the "
     "unit for this process, as SysV's SEM_UNDO: if the process dies "
     "before a release() of its own, the unit goes back (a `with` block "
     "holds its unit so, wherever the backend keeps books)."},
    {"release", (PyCFunction)(void (*)(void))sem_release, FASTKW,
     "release($self, /, n=1)\n--\n\n"
     "Add n units, waking up to n waiters in any process.  A "
     "BoundedSemaphore raises ValueError instead of passing its initial "
     "value.  Units this process holds (undo=True, `with` blocks) are "
     "settled first: up to n of them stop being held."},
    {"_reinit", (PyCFunction)(void (*)(void))sync_reinit,
     METH_VARARGS | METH_KEYWORDS, NULL},
    {"__enter__", (PyCFunction)sem_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))sem_exit, METH_FASTCALL, NULL},
    {"_try_enter", (PyCFunction)sem_try_enter, METH_NOARGS,
     "_try_enter($self, /)\n--\n\n__enter__ without waiting: take a unit "
     "that is there, held as a `with` block holds it, and enter the block; "
     "False if none is there (nothing taken).  efd.aio's `async with`."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef sem_getset[] = {
    {"_bound", (getter)sem_get_bound, NULL,
     "The count a BoundedSemaphore may not pass; None if unbounded.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot sem_slots[] = {
    {Py_tp_new, sync_new},
    {Py_tp_dealloc, sync_dealloc},
    {Py_tp_traverse, sync_traverse},
    {Py_tp_clear, sync_clear},
    {Py_tp_methods, sem_methods},
    {Py_tp_members, sync_members},
    {Py_tp_getset, sem_getset},
    {Py_tp_doc, "The C core of efd.Semaphore and efd.BoundedSemaphore."},
    {0, NULL},
};

PyType_Spec efd_semaphore_spec = {
    "efd._efd.Semaphore",
    sizeof(sync_object),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    sem_slots,
};

/* ---- Event ------------------------------------------------------------- */

static PyObject *
event_is_set(sync_object *self, PyObject *Py_UNUSED(ignored))
{
    uint64_t unused = 0;
    EV_OPEN(self);
    if (self->ev->impl.cnt != NULL)     /* a memory backend: one load */
        return PyBool_FromLong(atomic_load(&self->ev->impl.cnt->count) > 0);
    return PyBool_FromLong(efd_attempt(self->ev, EFD_OP_READY, &unused) == 0);
}

static PyObject *
event_set(sync_object *self, PyObject *Py_UNUSED(ignored))
{
    eventfd_object *ev = self->ev;
    uint64_t one = 1;
    int err;
    EV_OPEN(self);
    /* The generation first: a waiter of this process that a release wakes
     * must see it changed (gh-57711), even if clear() follows at once. */
    __atomic_add_fetch(&ev->generation, 1, __ATOMIC_ACQ_REL);
    if (efd_attempt(ev, EFD_OP_READY, &one) != 0) {
        one = 1;
        err = efd_attempt(ev, EFD_OP_WRITE, &one);
        if (err && err != EAGAIN)
            return efd_err_errno(err);
    }
    /* Wake this process's waiters even where the release just woke the
     * counted ones (futex): a waiter that was running a signal handler, or
     * was between its look at the generation and counting itself in, is
     * not counted, and its ticket predates this wake-up, so it looks again
     * instead of sleeping through a set() that a clear() already undid. */
    if (ev->waiters != NULL)
        efd_wake_waiters(ev, EFD_OP_READY);
    Py_RETURN_NONE;
}

static PyObject *
event_clear(sync_object *self, PyObject *Py_UNUSED(ignored))
{
    uint64_t taken;
    int err;
    EV_OPEN(self);
    err = efd_attempt(self->ev, EFD_OP_READ, &taken);
    if (err && err != EAGAIN)
        return efd_err_errno(err);
    Py_RETURN_NONE;
}

static PyObject *
event_wait(sync_object *self, PyObject *const *args, Py_ssize_t nargs,
           PyObject *kwnames)
{
    static const char *const names[] = {"timeout", NULL};
    PyObject *a[1] = {NULL};
    double timeout = EFD_FOREVER;
    uint64_t unused = 0;
    int r;

    if ((nargs > 0 || kwnames != NULL)
            && efd_parse_args("wait", names, 1, args, nargs, kwnames, a) < 0)
        return NULL;
    if (efd_to_timeout_ex(a[0], EFD_TIMEOUT_LOOK, &timeout) < 0)
        return NULL;
    EV_OPEN(self);
#if PY_VERSION_HEX >= 0x030E0000
    /* threading.Event.wait(nan) on 3.14+: True if the flag is set, else
     * the ValueError its lock raises (before, it only looked). */
    if (a[0] != NULL && PyFloat_Check(a[0]) && isnan(PyFloat_AS_DOUBLE(a[0]))
            && efd_attempt(self->ev, EFD_OP_READY, &unused) != 0) {
        PyErr_SetString(PyExc_ValueError, "Invalid value NaN (not a number)");
        return NULL;
    }
#endif
    r = efd_wait(self->ev, EFD_OP_READY, &unused, 0, 0.0);
    if (r == 0 && timeout != 0) {
        if (before_block(self, "wait", "event.wait_async()") < 0)
            return NULL;
        r = efd_wait(self->ev, EFD_OP_READY, &unused, 1, timeout);
    }
    if (r < 0)
        return NULL;
    return PyBool_FromLong(r);
}

static PyMethodDef event_methods[] = {
    {"is_set", (PyCFunction)event_is_set, METH_NOARGS,
     "is_set($self, /)\n--\n\n"
     "Return True while the flag is set (in any process sharing it)."},
    {"set", (PyCFunction)event_set, METH_NOARGS,
     "set($self, /)\n--\n\n"
     "Set the flag and wake every waiter, in every process.  A thread of "
     "this process waiting when set() is called returns True even if "
     "clear() follows at once."},
    {"clear", (PyCFunction)event_clear, METH_NOARGS,
     "clear($self, /)\n--\n\nReset the flag."},
    {"_reinit", (PyCFunction)(void (*)(void))sync_reinit,
     METH_VARARGS | METH_KEYWORDS, NULL},
    {"wait", (PyCFunction)(void (*)(void))event_wait, FASTKW,
     "wait($self, /, timeout=None)\n--\n\n"
     "Block until the flag is set or timeout seconds pass (a timeout that "
     "is not above zero only looks); return the flag.  A call that would "
     "wait on a thread whose event loop is running first warns "
     "(RuntimeWarning, naming wait_async())."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot event_slots[] = {
    {Py_tp_new, sync_new},
    {Py_tp_dealloc, sync_dealloc},
    {Py_tp_traverse, sync_traverse},
    {Py_tp_clear, sync_clear},
    {Py_tp_methods, event_methods},
    {Py_tp_members, sync_members},
    {Py_tp_doc, "The C core of efd.Event."},
    {0, NULL},
};

PyType_Spec efd_event_spec = {
    "efd._efd.Event",
    sizeof(sync_object),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    event_slots,
};
