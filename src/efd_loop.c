/*
 * efd_loop.c -- the Python face of an event loop's sleep on a futex object
 * (efd_futex.c, "An event loop's sleep"; the ring is efd_ring.c).
 *
 * EventFD._loop_sleeper() makes one for a loop that is about to wait on
 * the object (efd/_aio.py keeps one per loop and object while its tasks
 * wait); None where the loop must wait the old way (another backend, or
 * no ring here).  The loop watches the sleeper's fileno() (the ring's
 * descriptor), calls sleep() before it waits, woke() when that polled
 * readable, and rest() when none of its tasks waits any more.  Every method runs with the GIL held and never
 * blocks.  The object keeps a list of its sleepers, so that close() rests
 * those a loop left behind (a loop in another thread that did not answer
 * in time) before the page goes: a request left in flight on an unmapped
 * page would still swallow a wake-up meant for another process.
 */
#include "efd_module.h"

#include <errno.h>
#include <string.h>

struct efd_loopobj {
    PyObject_HEAD
    efd_loopsleep ls;
    eventfd_object *ev;         /* strong; NULL once closed */
    uint64_t epoch;             /* the process that made it */
    struct efd_loopobj *next, **pprev;   /* the object's list */
};
typedef struct efd_loopobj loop_object;

/* Whether loops can sleep on futex objects here (python -m efd): asked
 * once per module state. */
int
efd_loop_ring_probe(efd_state *st)
{
    if (st->loop_ring < 0)
        st->loop_ring = efd_ring_probe();
    return st->loop_ring;
}

static void
unlink_loop(loop_object *self)
{
    if (self->pprev != NULL) {
        *self->pprev = self->next;
        if (self->next != NULL)
            self->next->pprev = self->pprev;
        self->next = NULL;
        self->pprev = NULL;
    }
}

/* Rest and let go of the ring: in the process that made it only (a fork
 * child shares its parent's ring and must not cancel the parent's
 * requests; it closes its copy of the descriptor). */
static void
finish(loop_object *self, int pass_on)
{
    eventfd_object *ev = self->ev;
    if (ev != NULL && self->epoch == efd_process_epoch()) {
        efd_fx_loop_rest(&ev->impl, &self->ls, pass_on);
        if (!ev->closed && !self->ls.failed && self->ls.ring.fd >= 0
                && ev->spare_ring.fd < 0) {
            /* Kept for the object's next loop sleeper: a ring costs three
             * mappings and a descriptor to make. */
            ev->spare_ring = self->ls.ring;
            ev->spare_ring_epoch = self->epoch;
            self->ls.ring.fd = -1;
        }
        else
            efd_ring_close(&self->ls.ring);
    }
    else if (self->ls.ring.fd >= 0) {
        /* Only the descriptor: the mappings are the parent's too, and
         * unmapping this process's copy is all efd_ring_close() does. */
        efd_ring_close(&self->ls.ring);
    }
    unlink_loop(self);
    Py_CLEAR(self->ev);
}

void
efd_loops_close(eventfd_object *ev)
{
    while (ev->loops != NULL)
        finish(ev->loops, 1);
    if (ev->spare_ring.fd >= 0) {
        /* In a fork child, the mappings are this process's copies. */
        efd_ring_close(&ev->spare_ring);
    }
}

PyObject *
efd_loop_sleeper_new(eventfd_object *ev)
{
    efd_state *st = ev->state;
    loop_object *self;
    if (ev->impl.ops != &efd_backend_futex || ev->impl.cnt == NULL
            || efd_loop_ring_probe(st) != 0)
        Py_RETURN_NONE;
    self = PyObject_New(loop_object, st->LoopSleeper_type);
    if (self == NULL)
        return NULL;
    memset(&self->ls, 0, sizeof(self->ls));
    self->ev = NULL;
    self->next = NULL;
    self->pprev = NULL;
    self->epoch = efd_process_epoch();
    if (ev->spare_ring.fd >= 0 && ev->spare_ring_epoch != self->epoch)
        efd_ring_close(&ev->spare_ring);    /* the parent's */
    if (ev->spare_ring.fd >= 0) {
        uint64_t tag;
        int32_t res;
        self->ls.ring = ev->spare_ring;
        ev->spare_ring.fd = -1;
        while (efd_ring_next(&self->ls.ring, &tag, &res))
            ;                               /* the last sleeper's, late */
    }
    else if (efd_ring_open(&self->ls.ring) != 0) {
        /* Out of descriptors or memory, say: the old way. */
        self->ls.ring.fd = -1;
        Py_DECREF(self);
        Py_RETURN_NONE;
    }
    Py_INCREF(ev);
    self->ev = ev;
    self->next = ev->loops;
    if (ev->loops != NULL)
        ev->loops->pprev = &self->next;
    ev->loops = self;
    self->pprev = &ev->loops;
    return (PyObject *)self;
}

static int
check_open(loop_object *self)
{
    if (self->ev == NULL || self->ev->closed) {
        PyErr_SetString(PyExc_ValueError, "I/O operation on closed EventFD");
        return -1;
    }
    if (self->ls.ring.fd < 0) {
        /* Closed after a failure (a cancel io_uring refused): the loop
         * waits the old way from now on. */
        errno = EBADF;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    if (self->epoch != efd_process_epoch()) {
        PyErr_SetString(PyExc_RuntimeError,
                        "efd: a loop sleeper belongs to the process that "
                        "made it");
        return -1;
    }
    return 0;
}

static PyObject *
loop_fileno(loop_object *self, PyObject *Py_UNUSED(ignored))
{
    if (check_open(self) < 0)
        return NULL;
    return PyLong_FromLong(self->ls.ring.fd);
}

static PyObject *
loop_sleep(loop_object *self, PyObject *Py_UNUSED(ignored))
{
    int ready = 0, err;
    if (check_open(self) < 0)
        return NULL;
    err = efd_fx_loop_sleep(&self->ev->impl, &self->ls, &ready);
    if (err) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyBool_FromLong(ready);
}

static PyObject *
loop_woke(loop_object *self, PyObject *Py_UNUSED(ignored))
{
    if (check_open(self) < 0)
        return NULL;
    return PyLong_FromLong(efd_fx_loop_woke(&self->ev->impl, &self->ls));
}

static PyObject *
loop_rest(loop_object *self, PyObject *Py_UNUSED(ignored))
{
    if (self->ev != NULL && !self->ev->closed && self->ls.ring.fd >= 0
            && self->epoch == efd_process_epoch())
        efd_fx_loop_rest(&self->ev->impl, &self->ls, 1);
    Py_RETURN_NONE;
}

static PyObject *
loop_close(loop_object *self, PyObject *Py_UNUSED(ignored))
{
    finish(self, 1);
    Py_RETURN_NONE;
}

static PyObject *
loop_get_asleep(loop_object *self, void *Py_UNUSED(c))
{
    return PyBool_FromLong(self->ls.out != 0);
}

static void
loop_dealloc(loop_object *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    finish(self, 1);
    PyObject_Free(self);
    Py_DECREF(tp);
}

/* Made only by EventFD._loop_sleeper(). */
static PyObject *
loop_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    (void)args; (void)kwds;
    PyErr_Format(PyExc_TypeError, "cannot create '%s' instances "
                 "(EventFD._loop_sleeper() makes them)", type->tp_name);
    return NULL;
}

static PyMethodDef loop_methods[] = {
    {"fileno", (PyCFunction)loop_fileno, METH_NOARGS,
     "The ring's descriptor: readable when the sleep may be over."},
    {"sleep", (PyCFunction)loop_sleep, METH_NOARGS,
     "Sleep on the object's futex word through the ring; True if units\n"
     "are there now (take them; the sleep may stay in flight).  OSError\n"
     "if this loop cannot sleep this way: rest() and wait on fileno()."},
    {"woke", (PyCFunction)loop_woke, METH_NOARGS,
     "Read the ring's completions (the descriptor polled readable)."},
    {"rest", (PyCFunction)loop_rest, METH_NOARGS,
     "Nobody of this loop waits: cancel the sleep, pass a wake-up on."},
    {"close", (PyCFunction)loop_close, METH_NOARGS,
     "rest(), and close the ring."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef loop_getset[] = {
    {"asleep", (getter)loop_get_asleep, NULL,
     "Whether a sleep is in flight.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot loop_slots[] = {
    {Py_tp_new, loop_new},
    {Py_tp_dealloc, loop_dealloc},
    {Py_tp_methods, loop_methods},
    {Py_tp_getset, loop_getset},
    {Py_tp_doc, "An event loop's sleep on a futex EventFD (internal)."},
    {0, NULL},
};

PyType_Spec efd_loop_spec = {
    "efd._efd._LoopSleeper",
    sizeof(loop_object),
    0,
    Py_TPFLAGS_DEFAULT,
    loop_slots,
};
