/*
 * efd_loop.c -- the Python face of an event loop's sleep on a futex object:
 * through a helper thread (efd_futex.c, "A loop's helper") where this
 * process rings the death bell, else through a ring (efd_futex.c, "An
 * event loop's sleep"; the ring is efd_ring.c).
 *
 * EventFD._loop_sleeper() makes one for a loop that is about to wait on
 * the object (efd/_aio.py keeps one per loop and object while its tasks
 * wait); None where the loop must wait the old way (another backend, or
 * neither the bell nor a ring here).  The loop watches the sleeper's
 * fileno() (the helper's door, or the ring's descriptor), calls sleep()
 * before it waits, woke() when that polled readable, and rest() when none
 * of its tasks waits any more; `rechecks` says whether it must also look
 * at the count every RECHECK seconds (through a ring only).  Every method
 * runs with the GIL held and never blocks, but close(), which waits for
 * the helper to leave -- with the GIL released, and the helper leaves at
 * once: its sleeps include the doorbell close() rings.  The object keeps a
 * list of its sleepers, so that close() ends those a loop left behind (a
 * loop in another thread that did not answer in time) before the page
 * goes: a helper or a request left on an unmapped page would still
 * swallow a wake-up meant for another process.  EFD_LOOP_SLEEP=ring in the
 * environment makes every loop sleep through a ring.
 */
#include "efd_module.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/syscall.h>

/* Helpers that may rest parked in one interpreter (trim_parked()). */
#define EFD_PARKED_MAX 32

struct efd_loopobj {
    PyObject_HEAD
    efd_loopsleep ls;
    /* The loop's helper thread (efd_futex.c, "A loop's helper"); NULL: the
     * loop sleeps through the ring `ls` instead. */
    efd_helper *helper;
    int helped;                 /* made with a helper (kind) */
    int herd;                   /* ... on the kernel counter (efd_herd.c) */
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

/* ---- the helper's life ----------------------------------------------- */

/* EFD_LOOP_SLEEP=ring in the environment: loops sleep through a ring even
 * where a helper could sleep for them (to compare the two, and to test
 * the ring). */
int
efd_loop_ring_wanted(void)
{
    const char *v = getenv("EFD_LOOP_SLEEP");
    return v != NULL && strcmp(v, "ring") == 0;
}

/* EFD_LOOP_SLEEP=fileno: loops on the kernel counter watch fileno()
 * themselves, as before herd helpers (efd/_aio.py registers it with
 * EPOLLEXCLUSIVE in asyncio's own epoll set where it can): the fallback,
 * kept measured and tested. */
int
efd_loop_fileno_wanted(void)
{
    const char *v = getenv("EFD_LOOP_SLEEP");
    return v != NULL && strcmp(v, "fileno") == 0;
}

/* Whether a loop on `ev` sleeps through a herd helper (efd_herd.c): the
 * kernel counter, where a release wakes one exclusive sleeper. */
int
efd_loop_herd(eventfd_object *ev)
{
    return (ev->impl.ops == &efd_backend_eventfd
            || ev->impl.ops == &efd_backend_readback)
           && efd_herd_wake_one(ev) && !efd_loop_fileno_wanted();
}

/* The loop's doorbell to its helper: after every change of `want`,
 * `answered` or `stop`. */
static void
helper_ring(efd_helper *h)
{
    atomic_fetch_add(&h->cmd, 1);
    if (h->herd)
        efd_chan_put(h->cmd_r, h->cmd_w);   /* its instance watches it */
    else
        (void)syscall(SYS_futex, (uint32_t *)&h->cmd, FUTEX_WAKE_PRIVATE, 1,
                      NULL, NULL, 0);
}

/* What a helper owns besides its thread: its door, and a herd helper's
 * instance and command channel. */
static void
helper_free(efd_helper *h)
{
    efd_chan_close(&h->door, &h->door_w);
    if (h->herd)
        efd_herd_helper_close(h);
    free(h);
}

/* A helper for a loop on `ev`, idle until the loop sleeps -- on the
 * kernel counter a herd helper (efd_herd.c) if `herd` --; NULL if none
 * can be made (no descriptor, no thread: the ring, or the old way). */
static efd_helper *
helper_start(eventfd_object *ev, int herd)
{
    efd_helper *h = calloc(1, sizeof(*h));
    pthread_attr_t attr;
    sigset_t all, old;
    size_t stack = 64 * 1024;
    int err;
    if (h == NULL)
        return NULL;
    h->impl = &ev->impl;
    h->herd = herd;
    h->ep = h->cmd_r = h->cmd_w = -1;
    if (efd_chan_open(&h->door, &h->door_w, ev->impl.chan_eventfd, 1) != 0) {
        free(h);
        return NULL;
    }
    if (herd && efd_herd_helper_open(h, ev->impl.chan_eventfd) != 0) {
        efd_chan_close(&h->door, &h->door_w);
        free(h);
        return NULL;
    }
    /* A small stack (it runs C only), and no signals: they are the
     * interpreter's to handle, in its own threads. */
    if (pthread_attr_init(&attr) != 0) {
        helper_free(h);
        return NULL;
    }
    if (stack < (size_t)PTHREAD_STACK_MIN)
        stack = (size_t)PTHREAD_STACK_MIN;
    (void)pthread_attr_setstacksize(&attr, stack);
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    err = pthread_create(&h->tid, &attr, herd ? efd_herd_helper_main
                                              : efd_fx_helper_main, h);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (err != 0) {
        helper_free(h);
        return NULL;
    }
    return h;
}

/* Whether a helper of `ev` is being stopped by a thread of this process
 * (a fork child inherits the count of its parent's, and none of them). */
static int
helpers_stopping(eventfd_object *ev)
{
    return ev->helpers_stopping > 0
           && ev->helpers_stopping_epoch == efd_process_epoch();
}

/* Stop the helper of an object `ev` and wait for it (it leaves at once:
 * its sleeps include its doorbell), in the process that made it; a fork
 * child has no such thread and only closes its copies of the door.  The
 * GIL is let go meanwhile: `ev` counts the helper as stopping, so that a
 * close() in another thread waits for it before the page goes. */
static void
helper_stop(eventfd_object *ev, efd_helper *h, int ours)
{
    if (ours) {
        atomic_store(&h->stop, 1);
        helper_ring(h);
        if (!helpers_stopping(ev)) {
            ev->helpers_stopping = 0;   /* a fork child's copy: not ours */
            ev->helpers_stopping_epoch = efd_process_epoch();
        }
        ev->helpers_stopping++;
        Py_BEGIN_ALLOW_THREADS
        pthread_join(h->tid, NULL);
        Py_END_ALLOW_THREADS
        ev->helpers_stopping--;
    }
    helper_free(h);
}

/* Nobody of the loop waits: every call is answered with "not taking",
 * and the helper passes on a wake-up it holds, and idles.  Rung only if
 * that changes anything: a helper rested quietly (below) and then kept
 * for the object's next sleeper (finish_helper) has been told all this
 * already, and makes no new call while nobody wants (it checks `want`
 * before it calls, and a loop that wanted rings here). */
static void
helper_rest(efd_helper *h)
{
    uint32_t calls = atomic_load(&h->calls);
    int changed = atomic_load(&h->want) != 0
                  || atomic_load(&h->answered) != calls;
    atomic_store(&h->want, 0);
    atomic_store(&h->answered, calls);
    if (changed)
        helper_ring(h);
}

/* rest() right after the loop took what a call offered, which is how a
 * loop whose task was served usually stops wanting (its task resumes,
 * and most often waits again at once): the helper is in helper_call(),
 * waiting for the answer to the call the loop saw (`seen_calls`) --
 * neither asleep on the counter nor among its sleepers, so it takes no
 * release's wake-up meanwhile.  It need not be woken to be told: the loop
 * passes on the wake-up the call may stand for itself (units left that
 * it will not take), and answers without ringing.  The helper finds out
 * at the loop's next sleep(), which rings it anyway -- one wake-up of the
 * helper per hand-off saved -- or, if none comes, when its wait for the
 * answer times out (EFD_RECHECK_MS after a call for units, once; a call
 * for readiness waits for the next command), and idles then.  0 if the
 * helper was not waiting so (the caller rests it the usual way).
 *
 * "Waiting so" is the helper's own word for it (`waiting`, set before it
 * rings the door, cleared when it stops waiting): a call the loop saw may
 * be one the helper made as the loop rested before, and left at once --
 * it is asleep on the counter by now, and must be rung.  A helper that
 * waits for the answer leaves only once the loop answered or stopped
 * wanting (or on stop), so what the loop reads here holds until it
 * answers.  (One schedule is left: the helper leaves such a stale call
 * and is preempted while the loop sleeps, wakes and rests quietly; it
 * then sleeps once for a loop that does not want -- and passes on the
 * wake-up a release gives it, or on the kernel counter leaves at its
 * next look: one hop, nothing lost.)  The pass-on is whatever the kind of
 * the call: `ready` says how the loop's last sleep() waited, not what the
 * open call was for (a watcher that arrived while the helper called for
 * units; adversary), and a pass-on where units are left is never wrong.
 * tests/explore/herd_model.py explores this rest against the herd
 * helper's steps; a loop that leaves out the pass-on is caught. */
static int
helper_rest_quietly(eventfd_object *ev, efd_helper *h)
{
    if ((int32_t)(h->seen_calls - atomic_load(&h->answered)) <= 0
            || atomic_load(&h->waiting) != h->seen_calls)
        return 0;                       /* no call of the loop's is open */
    atomic_store(&h->want, 0);
    atomic_store(&h->answered, h->seen_calls);
    if (!ev->closed)                    /* close() wakes everyone */
        (void)efd_pass_on(ev);
    return 1;
}

/* ---- parked helpers, and fork --------------------------------------- */

/* A helper that rests -- its sleeper's loop has no task waiting (rest()),
 * or its object keeps it for the next sleeper (finish()) -- is *parked*:
 * on its interpreter's list, with the one pointer that holds it (`ref`:
 * the sleeper's `helper` or the object's `spare_helper`), so that
 * os.fork() can stop every parked one first (efd_loops_before_fork).  A
 * fork child gets no copy of a thread anyway, and since 3.12 os.fork()
 * warns (DeprecationWarning) in a process that has threads besides the
 * one forking -- which a program that awaited acquire_async() and then
 * forks its workers, with no loop waiting any more, should not see.  A
 * sleeper whose helper was stopped takes one again when its loop next
 * waits (need_helper()).  The list is changed with the GIL held only. */
static void
park(efd_helper *h, eventfd_object *ev, efd_helper **ref, PyObject *holder,
     uint64_t epoch)
{
    efd_state *st = ev->state;
    if (h->park_pprev != NULL)
        return;                         /* parked already */
    h->owner = ev;
    h->park_ref = ref;
    h->park_holder = holder;
    h->park_epoch = epoch;
    EFD_LIST_PUSH(st->parked, h, park_next, park_pprev);
}

/* Off the list (where it is on it): about to work, or to be stopped. */
static void
unpark(efd_helper *h)
{
    EFD_LIST_UNLINK(h, park_next, park_pprev);
}

/* The object keeps `h`, rested, for its next loop sleeper. */
static void
keep_spare(eventfd_object *ev, efd_helper *h, uint64_t epoch)
{
    ev->spare_helper = h;
    ev->spare_helper_epoch = epoch;
    park(h, ev, &ev->spare_helper, (PyObject *)ev, epoch);
}

/* The object's spare helper, off the lists (it must have one). */
static efd_helper *
take_spare(eventfd_object *ev)
{
    efd_helper *h = ev->spare_helper;
    ev->spare_helper = NULL;
    unpark(h);
    return h;
}

/* Stop a parked helper `h` and clear the pointer that held it; the GIL
 * is let go meanwhile, its holder kept alive. */
static void
stop_parked(efd_helper *h)
{
    eventfd_object *ev = (eventfd_object *)h->owner;
    PyObject *holder = h->park_holder;
    Py_INCREF(holder);
    unpark(h);
    *h->park_ref = NULL;
    helper_stop(ev, h, h->park_epoch == efd_process_epoch());
    Py_DECREF(holder);
}

/* os.register_at_fork(before=...): stop this interpreter's parked
 * helpers; how many.  Each stop lets go of the GIL (helper_stop joins the thread),
 * so the list is taken from its head each time, the pointer that held
 * the helper cleared first, and its holder kept alive meanwhile.  Helpers
 * of loops that wait right now stay: those threads are needed (the child
 * gets no copy of them, and needs none). */
int
efd_loops_before_fork(efd_state *st)
{
    int stopped = 0;
    /* The ones parked now: a loop of another thread may park more while
     * a stop lets go of the GIL, and a fork must not wait for as long as
     * it keeps doing so.  Detached from the state, the list still
     * unlinks its entries (their first's back pointer is moved here). */
    efd_helper *parked = st->parked;
    st->parked = NULL;
    if (parked != NULL)
        parked->park_pprev = &parked;
    while (parked != NULL) {
        stop_parked(parked);
        stopped++;
    }
    return stopped;
}

/* At most EFD_PARKED_MAX helpers rest parked in an interpreter: each is a
 * thread and two or three descriptors, kept by every object a loop once
 * waited on for as long as it is open -- a program with a few hundred
 * objects awaited once each would otherwise run out of descriptors.
 * Beyond, the ones parked longest are stopped (a loop whose sleeper's
 * helper was stopped takes another when it next waits: need_helper()).
 * Called where a helper may just have been parked, from a method call
 * (stopping one lets go of the GIL). */
static void
trim_parked(efd_state *st)
{
    for (;;) {
        efd_helper *h = st->parked, *oldest = NULL;
        int n = 0;
        for (; h != NULL; h = h->park_next) {
            n++;
            oldest = h;                 /* pushed at the head: the tail */
        }
        if (n <= EFD_PARKED_MAX)
            return;
        stop_parked(oldest);
    }
}

/* finish() of a helper sleeper: its helper rests, kept by the object for
 * its next loop sleeper where it can be, else is stopped (it passes on a
 * wake-up it holds). */
static void
finish_helper(loop_object *self, eventfd_object *ev)
{
    efd_helper *h = self->helper;
    int ours = self->epoch == efd_process_epoch();
    if (h == NULL)
        return;                         /* a fork stopped it as it rested */
    self->helper = NULL;
    unpark(h);
    if (ours && ev != NULL && !ev->closed && ev->spare_helper == NULL
            && !atomic_load(&h->failed)) {
        helper_rest(h);
        keep_spare(ev, h, self->epoch);
    }
    else
        helper_stop(ev, h, ours);
}

/* Rest and let go of the helper (kept idle for the object's next sleeper
 * where it can be) or of the ring: in the process that made them only (a
 * fork child has no helper thread, and shares its parent's ring, whose
 * requests it must not cancel; it closes its copies of the descriptors). */
static void
finish(loop_object *self, int pass_on)
{
    eventfd_object *ev = self->ev;
    /* Off the object's list first: stopping a helper lets go of the GIL,
     * and nobody may find this sleeper meanwhile. */
    EFD_LIST_UNLINK(self, next, pprev);
    if (self->helped)
        finish_helper(self, ev);
    else if (ev != NULL && self->epoch == efd_process_epoch()) {
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
    Py_CLEAR(self->ev);
}

void
efd_loops_close(eventfd_object *ev)
{
    while (ev->loops != NULL) {
        /* Kept alive while its helper is stopped (the GIL is let go). */
        loop_object *l = ev->loops;
        Py_INCREF(l);
        finish(l, 1);
        Py_DECREF(l);
    }
    if (ev->spare_helper != NULL) {
        efd_helper *h = take_spare(ev);
        helper_stop(ev, h, ev->spare_helper_epoch == efd_process_epoch());
    }
    /* A helper that another thread's finish() is stopping, the GIL let
     * go, still uses the page: wait for it (it leaves at once). */
    while (helpers_stopping(ev)) {
        Py_BEGIN_ALLOW_THREADS
        (void)poll(NULL, 0, 1);
        Py_END_ALLOW_THREADS
    }
    if (ev->spare_ring.fd >= 0) {
        /* In a fork child, the mappings are this process's copies. */
        efd_ring_close(&ev->spare_ring);
    }
}

/* The object's idle helper, kept by the last sleeper, or a new one; NULL
 * if none can be had. */
static efd_helper *
take_helper(eventfd_object *ev, uint64_t epoch)
{
    efd_helper *h = ev->spare_helper;
    if (h != NULL) {
        take_spare(ev);
        if (ev->spare_helper_epoch == epoch) {
            /* Every call of the last sleeper's is answered. */
            efd_chan_drain(h->door);
            h->seen_calls = atomic_load(&h->calls);
            atomic_store(&h->answered, h->seen_calls);
            return h;
        }
        helper_stop(ev, h, 0);              /* the parent's */
    }
    return helper_start(ev, efd_loop_herd(ev));
}

/* The object's rested ring, kept by the last sleeper, or a new one in *r:
 * 0, or an errno. */
static int
take_ring(eventfd_object *ev, efd_ring *r, uint64_t epoch)
{
    uint64_t tag;
    int32_t res;
    if (ev->spare_ring.fd >= 0 && ev->spare_ring_epoch != epoch)
        efd_ring_close(&ev->spare_ring);    /* the parent's */
    if (ev->spare_ring.fd < 0)
        return efd_ring_open(r);
    *r = ev->spare_ring;
    ev->spare_ring.fd = -1;
    while (efd_ring_next(r, &tag, &res))
        ;                                   /* the last sleeper's, late */
    return 0;
}

PyObject *
efd_loop_sleeper_new(eventfd_object *ev)
{
    efd_state *st = ev->state;
    loop_object *self;
    /* On the kernel counter, a herd helper where a release wakes one
     * exclusive sleeper.  On a futex page, a helper where this process
     * rings the bell for the object; else a ring where the kernel has
     * one.  Else nothing (the old way). */
    int herd = efd_loop_herd(ev);
    int helper = herd || (ev->impl.bell && !efd_loop_ring_wanted());
    if (!herd && ((ev->impl.ops != &efd_backend_futex
                   && ev->impl.ops != &efd_backend_pipe_futex)
                  || ev->impl.cnt == NULL
                  || (!helper && efd_loop_ring_probe(st) != 0)))
        Py_RETURN_NONE;
    self = PyObject_New(loop_object, st->LoopSleeper_type);
    if (self == NULL)
        return NULL;
    memset(&self->ls, 0, sizeof(self->ls));
    self->ls.ring.fd = -1;
    self->helper = NULL;
    self->ev = NULL;
    self->next = NULL;
    self->pprev = NULL;
    self->epoch = efd_process_epoch();
    if (helper)
        self->helper = take_helper(ev, self->epoch);
    self->helped = self->helper != NULL;
    self->herd = herd;
    if (!self->helped && (herd || efd_loop_ring_probe(st) != 0
                          || take_ring(ev, &self->ls.ring, self->epoch) != 0)) {
        /* No thread, no ring (out of descriptors or memory, say): the old
         * way. */
        self->ls.ring.fd = -1;
        Py_DECREF(self);
        Py_RETURN_NONE;
    }
    Py_INCREF(ev);
    self->ev = ev;
    EFD_LIST_PUSH(ev->loops, self, next, pprev);
    return (PyObject *)self;
}

static int
check_open(loop_object *self)
{
    if (self->ev == NULL || self->ev->closed) {
        PyErr_SetString(PyExc_ValueError, "I/O operation on closed EventFD");
        return -1;
    }
    if (!self->helped && self->ls.ring.fd < 0) {
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

/* A helper sleeper's helper, working: taken off the parked list, or
 * taken again (the object's spare, or a new one) if a fork stopped it
 * while it rested.  -1 with OSError if none can be had (the loop waits
 * the old way then). */
static int
need_helper(loop_object *self)
{
    if (self->helper == NULL) {
        self->helper = take_helper(self->ev, self->epoch);
        if (self->helper == NULL) {
            errno = EAGAIN;
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
    }
    unpark(self->helper);
    return 0;
}

static PyObject *
loop_fileno(loop_object *self, PyObject *Py_UNUSED(ignored))
{
    if (check_open(self) < 0)
        return NULL;
    if (self->helped && need_helper(self) < 0)
        return NULL;
    return PyLong_FromLong(self->helped ? self->helper->door
                                        : self->ls.ring.fd);
}

/* sleep() with a helper: want units (or readiness), and answer the calls
 * woke() saw. */
static PyObject *
helper_sleep(loop_object *self, int ready)
{
    efd_helper *h = self->helper;
    int changed = 0, err = atomic_load(&h->failed);
    if (err) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if (ready && h->herd) {
        /* Every watcher must see every release: they watch fileno(). */
        PyErr_SetString(PyExc_ValueError,
                        "efd: a loop's helper on the kernel counter waits "
                        "for units only, not for readiness");
        return NULL;
    }
    if (atomic_load(&h->ready) != (uint32_t)ready) {
        atomic_store(&h->ready, (uint32_t)ready);
        changed = 1;
    }
    if (!atomic_load(&h->want)) {
        atomic_store(&h->want, 1);
        changed = 1;
    }
    if ((int32_t)(h->seen_calls - atomic_load(&h->answered)) > 0) {
        atomic_store(&h->answered, h->seen_calls);
        changed = 1;
    }
    if (changed)
        helper_ring(h);
    if (h->herd)
        return PyBool_FromLong(efd_ready_now(&self->ev->impl) == 0);
    return PyBool_FromLong(atomic_load(&self->ev->impl.cnt->count) > 0);
}

static PyObject *
loop_sleep(loop_object *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"ready", NULL};
    int ready = 0, for_ready = 0, err;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|p:sleep", kwlist,
                                     &for_ready))
        return NULL;
    if (check_open(self) < 0)
        return NULL;
    if (self->helped)
        return need_helper(self) < 0 ? NULL : helper_sleep(self, for_ready);
    if (for_ready) {
        /* A ring sleeps among the readers only: watchers wait on
         * fileno() (and re-check, as the ring's own sleep does). */
        PyErr_SetString(PyExc_ValueError,
                        "efd: a loop sleeping through a ring waits for "
                        "units only, not for readiness");
        return NULL;
    }
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
    if (self->helped) {
        /* The calls read here are the ones the next sleep() or rest()
         * answers: read after the door, so that none is answered before
         * the loop looked for it. */
        efd_helper *h = self->helper;
        uint32_t before;
        if (h == NULL)
            return PyLong_FromLong(0);  /* stopped while it rested */
        before = h->seen_calls;
        efd_chan_drain(h->door);
        h->seen_calls = atomic_load(&h->calls);
        return PyLong_FromLong(h->seen_calls != before
                               || atomic_load(&h->failed) != 0);
    }
    return PyLong_FromLong(efd_fx_loop_woke(&self->ev->impl, &self->ls));
}

static PyObject *
loop_rest(loop_object *self, PyObject *Py_UNUSED(ignored))
{
    if (self->helped) {
        /* Nobody waits: every call is answered with "not taking", and the
         * helper passes on a wake-up it holds; it rests, parked. */
        if (self->helper != NULL && self->ev != NULL
                && self->epoch == efd_process_epoch()) {
            if (!helper_rest_quietly(self->ev, self->helper))
                helper_rest(self->helper);
            park(self->helper, self->ev, &self->helper, (PyObject *)self,
                 self->epoch);
            trim_parked(self->ev->state);
        }
        Py_RETURN_NONE;
    }
    if (self->ev != NULL && !self->ev->closed && self->ls.ring.fd >= 0
            && self->epoch == efd_process_epoch())
        efd_fx_loop_rest(&self->ev->impl, &self->ls, 1);
    Py_RETURN_NONE;
}

static PyObject *
loop_close(loop_object *self, PyObject *Py_UNUSED(ignored))
{
    eventfd_object *ev = self->ev;
    Py_XINCREF(ev);
    finish(self, 1);
    if (ev != NULL) {
        trim_parked(ev->state);
        Py_DECREF(ev);
    }
    Py_RETURN_NONE;
}

static PyObject *
loop_get_asleep(loop_object *self, void *Py_UNUSED(c))
{
    if (self->helper != NULL)
        return PyBool_FromLong(atomic_load(&self->helper->asleep));
    return PyBool_FromLong(self->ls.out != 0);
}

static PyObject *
loop_get_rechecks(loop_object *self, void *Py_UNUSED(c))
{
    /* A ring's sleep needs the loop's re-check; a helper re-checks for
     * itself where it must, and calls the loop if units turned up. */
    return PyBool_FromLong(!self->helped);
}

static PyObject *
loop_get_kind(loop_object *self, void *Py_UNUSED(c))
{
    /* "herd": a helper on the kernel counter, for units only (watchers
     * wait on fileno(), as with a ring). */
    return PyUnicode_FromString(!self->helped ? "ring"
                                : self->herd ? "herd" : "helper");
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
    {"sleep", (PyCFunction)(void (*)(void))loop_sleep,
     METH_VARARGS | METH_KEYWORDS,
     "sleep(ready=False)\n--\n\n"
     "Sleep on the object's futex word (through the helper or the ring);\n"
     "True if units are there now (take them; the sleep may stay in\n"
     "flight).  ready=True (a helper only): wait for readiness, as\n"
     "Event.wait() does, rather than for units.  OSError if this loop\n"
     "cannot sleep this way: rest() and wait on fileno()."},
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
    {"rechecks", (getter)loop_get_rechecks, NULL,
     "Whether the loop must look at the count every RECHECK seconds.",
     NULL},
    {"kind", (getter)loop_get_kind, NULL,
     "'helper' (a thread of efd's sleeps for the loop) or 'ring'.", NULL},
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
