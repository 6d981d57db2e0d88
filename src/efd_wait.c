/*
 * efd_wait.c -- the one wait loop, used by every call that can block, and
 * the bookkeeping that lets close() coexist with it.
 *
 *   1. Try the operation once, with the GIL held (no GIL round trip when it
 *      succeeds or when the caller does not want to wait).  Nothing done
 *      with the GIL held ever sleeps: kernel reads use RWF_NOWAIT, and no
 *      backend operation waits for anything (efd.h).
 *   2. Otherwise, with the GIL released, sleep until the deadline -- in
 *      poll() on the backend's readiness fd and this waiter's own wake
 *      channel, or in the backend's own block() (futex) -- and try again
 *      after each wake-up, still without the GIL.  A backend may ask for a
 *      re-try every slice_ms even without a wake-up (memory backends: a
 *      dead process may owe a wake-up; writes: nothing signals "room").
 *   3. EINTR, or any wake-up: take the GIL, run the signal handlers
 *      (PEP 475).  A handler that raises ends the wait with its exception
 *      and nothing consumed; a handler that returns lets the wait go on
 *      with what is left of the monotonic deadline.
 *   4. close() from another thread marks the object closed and writes every
 *      waiter's wake channel: each stops with ValueError, having consumed
 *      nothing.  Every thread that uses the descriptors without the GIL is
 *      counted in `users` (efd_enter/efd_leave), and the last of them to
 *      leave does the real close, so no descriptor number can be recycled
 *      under anybody's feet.
 *
 * Each waiter has a wake channel of its own (an eventfd, or a pipe where
 * eventfd is refused), so that waking them all -- close(), or
 * efd.Event.set() -- never depends on which of them drains a shared one first.
 * The object keeps one spare channel, so a lone waiter costs no extra
 * syscall.  State copied into a fork child (waiters, users, the spare) is
 * the parent's: the child forgets it and closes its copies of those fds,
 * but for the waits of the thread that forked (from a signal handler run
 * inside them), which go on as the child's (see forget_parent).
 */
#include "efd_module.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#define LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

static int64_t
monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Milliseconds left until `deadline`, rounded up so that we never wake
 * early; -1 for no deadline. */
static int
remaining_ms(int64_t deadline)
{
    int64_t left;
    if (deadline < 0)
        return -1;
    left = deadline - monotonic_ns();
    if (left <= 0)
        return 0;
    left = (left + 999999) / 1000000;
    return left > INT_MAX ? INT_MAX : (int)left;
}

uint32_t
efd_self_proc(eventfd_object *self)
{
    return self->impl.proc != NULL ? *self->impl.proc : 0;
}

/* ---- who is inside the object ------------------------------------------ */

/* Re-entry and fork (issue 17).  A wait takes the GIL between sleeps to run
 * signal handlers (PEP 475), so Python code can run on the waiting thread
 * while its record is linked: a handler may call the object again (a
 * nested wait, release()), close it, or fork.  The bookkeeping holds for
 * all three:
 *
 *   - A record belongs to its thread (`thread`, the interpreter's number
 *     for it, never reused) and is unlinked and freed by that thread's
 *     waiter_end() only.  Nested waits of one thread are records of their
 *     own, each counted in `users`.
 *   - close() from a handler only marks the object closed and pokes the
 *     records (`users` counts the interrupted wait): the wait ends with
 *     ValueError and, as the last user, closes the descriptors.
 *   - fork: the object's books are the parent's until check_fork() sees a
 *     new process.  Then forget_parent() frees the records of every thread
 *     but the one that forked (they do not exist here), and keeps that
 *     thread's -- its interrupted waits, nested or not, will resume here --
 *     relinked and counted, each with a wake channel of its own: the copy
 *     of the parent's is closed (the parent's waiter still polls it), and a
 *     herd sleeper becomes a channel sleeper (the herd is the parent's).
 *     Keyed on the forking thread (recorded by the fork hook), not on the
 *     thread that happens to call check_fork() first: a thread started in
 *     the child may touch the object before the forking thread's wait has
 *     resumed, and a pthread_t may be reused by it, a thread number not.
 *   - Every point of the wait loop after which Python code may have run
 *     (the handlers; an exception's allocation, which may run finalizers)
 *     calls check_fork(), and a wait that finds itself in a new process
 *     takes up its renewed record (kind, channel) before it sleeps again.
 *
 * So `users` counts exactly the live records and stretches of this
 * process, and waiter_end() only ever touches a live record. */

uint64_t
efd_thread_id(void)
{
#if PY_VERSION_HEX >= 0x03090000
    return PyThreadState_GetID(PyThreadState_Get());
#else
    return (uint64_t)PyThreadState_Get()->id;
#endif
}

/* A wake channel for a waiter of this object: 0 or an errno. */
static int
open_channel(eventfd_object *self, int *rfd, int *wfd)
{
    return efd_chan_open(rfd, wfd, self->impl.ops->syscall_always
                                   || self->impl.chan_eventfd, 1);
}

static void
link_waiter(eventfd_object *self, efd_waiter *w)
{
    EFD_LIST_PUSH(self->waiters, w, next, pprev);
    self->users++;
}

static void
unlink_waiter(efd_waiter *w)
{
    EFD_LIST_UNLINK(w, next, pprev);
}

/* A record of a parent's thread that does not exist here: close this
 * process's copy of its wake channel (the parent's stays open). */
static void
drop_waiter(efd_waiter *w)
{
    efd_chan_close(&w->rfd, &w->wfd);
    PyMem_RawFree(w);
}

/* A record of the thread that forked, whose wait will resume here: a wake
 * channel of its own, or none if none can be opened (it then looks every
 * EFD_NOCHAN_MS); a block() sleeper needs none.  What woke it in the
 * parent is gone with the parent's channel and herd: the wait looks before
 * it sleeps again (efd_wait: resumed_in_child). */
static void
renew_waiter(eventfd_object *self, efd_waiter *w)
{
    w->poked = 0;
    w->chosen = w->watching = 0;        /* the parent's herd's watch */
    if (w->kind == EFD_WAITER_BLOCK)
        return;
    efd_chan_close(&w->rfd, &w->wfd);    /* HERD, NOCHANNEL: nothing open */
    w->kind = EFD_WAITER_CHANNEL;
    if (open_channel(self, &w->rfd, &w->wfd) != 0) {
        w->rfd = w->wfd = -1;
        w->kind = EFD_WAITER_NOCHANNEL;
    }
}

/* The object was copied into this process by fork(): the waiters and users
 * it lists are the parent's.  Forget them, but for the interrupted waits
 * of the thread that forked (see above), and close this process's copies
 * of the parent's wake channels and herd (the parent's stay open). */
static void
forget_parent(eventfd_object *self, uint32_t me)
{
    efd_waiter *w = self->waiters, *next;
    uint64_t survivor = self->state->fork_thread;
    self->waiters = NULL;
    self->users = 0;
    self->users_proc = me;
    /* A spare can only be an ancestor's here: every path that makes one
     * has passed check_fork() in this process first. */
    if (self->spare_rfd >= 0)
        efd_chan_close(&self->spare_rfd, &self->spare_wfd);
    efd_herd_close(self);        /* the parent's instance, not ours */
    self->woken = self->rechecks = 0;
    for (; w != NULL; w = next) {
        next = w->next;
        if (w->thread != survivor) {
            drop_waiter(w);
            continue;
        }
        link_waiter(self, w);
        renew_waiter(self, w);
    }
}

static void
check_fork(eventfd_object *self)
{
    uint32_t me = efd_self_proc(self);
    if (self->users_proc != me)
        forget_parent(self, me);
}

void
efd_enter(eventfd_object *self)
{
    check_fork(self);
    self->users++;
}

void
efd_leave(eventfd_object *self)
{
    /* Never below zero, whatever a caller got wrong: a negative count
     * would keep close() from ever closing. */
    if (self->users > 0 && --self->users == 0 && self->closed)
        efd_object_close(self);
}

/* Waiter records live on the heap, not on the waiting thread's stack: a
 * fork child walks its parent's list to close its copies of their wake
 * channels, and the child's C library may already have handed the parent
 * thread's (copied) stack to a new thread. */
static efd_waiter *
waiter_start(eventfd_object *self, int op)
{
    efd_waiter *w;
    int err;
    check_fork(self);
    w = (efd_waiter *)PyMem_RawMalloc(sizeof(efd_waiter));
    if (w == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    w->kind = EFD_WAITER_CHANNEL;
    w->chosen = w->watching = 0;
    if (self->impl.ops->block != NULL) {
        w->rfd = w->wfd = -1;           /* it sleeps in block(), not poll() */
        w->kind = EFD_WAITER_BLOCK;
    }
    else if (op == EFD_OP_READ && efd_herd_open(self) == 0) {
        w->rfd = w->wfd = -1;           /* close() kicks the herd */
        w->kind = EFD_WAITER_HERD;
    }
    else if (self->spare_rfd >= 0) {
        w->rfd = self->spare_rfd;
        w->wfd = self->spare_wfd;
        self->spare_rfd = self->spare_wfd = -1;
    }
    else if ((err = open_channel(self, &w->rfd, &w->wfd)) != 0) {
        if (err != EMFILE && err != ENFILE && err != ENOMEM) {
            PyMem_RawFree(w);
            efd_err_errno(err);
            return NULL;
        }
        /* Out of descriptors: wait anyway, as threading.Semaphore would,
         * looking at close() and Event.set() in short slices. */
        w->rfd = w->wfd = -1;
        w->kind = EFD_WAITER_NOCHANNEL;
    }
    w->poked = 0;
    w->op = op;
    w->thread = efd_thread_id();
    link_waiter(self, w);
    return w;
}

static void
waiter_end(eventfd_object *self, efd_waiter *w)
{
    check_fork(self);                   /* w survives it: it is ours */
    unlink_waiter(w);
    if (w->kind == EFD_WAITER_CHANNEL) {
        if (LOAD(&w->poked))
            efd_chan_drain(w->rfd);
        if (self->spare_rfd < 0 && !self->closed) {
            self->spare_rfd = w->rfd;       /* kept for the next waiter */
            self->spare_wfd = w->wfd;
        }
        else
            efd_chan_close(&w->rfd, &w->wfd);
    }
    PyMem_RawFree(w);
    efd_leave(self);
}

void
efd_wake_waiters(eventfd_object *self, int op)
{
    efd_waiter *w;
    int sleepers = 0, kick = 0;
    check_fork(self);
    for (w = self->waiters; w != NULL; w = w->next) {
        if (op >= 0 && w->op != op)
            continue;
        if (w->kind == EFD_WAITER_BLOCK)
            sleepers = 1;
        else if (w->kind == EFD_WAITER_HERD)
            kick = 1;
        else if (w->kind == EFD_WAITER_CHANNEL) {
            STORE(&w->poked, 1);
            efd_chan_put(w->rfd, w->wfd);
        }
    }
    /* Sleepers in block() share one wake-up word with every process:
     * wake them all; those of other processes look and sleep again. */
    if (sleepers)
        self->impl.ops->interrupt(&self->impl, 1);
    /* The kick stays readable (level-triggered): every sleeper of the herd
     * wakes, one after another.  Only close() wakes readers. */
    if (kick)
        efd_herd_kick(self);
}

/* Units this process holds outside the counter (eventfd-readback) go back
 * before the descriptor does: wait up to a second for room, without the
 * GIL, and say so if they cannot. */
static void
give_back_pending(eventfd_object *self)
{
    efd_impl *impl = &self->impl;
    PyObject *type, *value, *tb;
    uint64_t left;
    int i;
    if (impl->ops == NULL || impl->ops->pending == NULL || impl->fd < 0)
        return;
    left = impl->ops->pending(impl);
    if (left == 0)
        return;
    PyErr_Fetch(&type, &value, &tb);     /* a waiter's error, if we are it */
    self->users++;
    Py_BEGIN_ALLOW_THREADS
    for (i = 0; i < 1000 && left > 0; i++) {
        (void)poll(NULL, 0, 1);
        left = impl->ops->pending(impl);
    }
    Py_END_ALLOW_THREADS
    self->users--;
    if (left > 0 && PyErr_WarnFormat(
            PyExc_RuntimeWarning, 1,
            "efd: closing an eventfd-readback object lost %llu unit(s) that "
            "a semaphore read took and could not write back (the counter "
            "stayed full for a second)", (unsigned long long)left) < 0)
        PyErr_WriteUnraisable((PyObject *)self);
    PyErr_Restore(type, value, tb);
}

void
efd_object_close(eventfd_object *self)
{
    check_fork(self);
    STORE(&self->closed, 1);
    /* Before the page can go: no loop's request may stay in flight on it
     * (efd_loop.c). */
    efd_loops_close(self);
    if (self->users > 0) {
        efd_wake_waiters(self, -1);      /* the last one out closes */
        return;
    }
    if (self->impl.ops != NULL) {
        if (self->detached)
            self->impl.fd = -1;          /* detach(): the caller owns it */
        else {
            give_back_pending(self);
            if (self->impl.ops->close != NULL)
                self->impl.ops->close(&self->impl);
        }
    }
    self->impl.fd = -1;
    if (self->spare_rfd >= 0)
        efd_chan_close(&self->spare_rfd, &self->spare_wfd);
    efd_herd_close(self);
}

/* ---- the loop ---------------------------------------------------------- */

/* EFD_OP_READY: is the count above zero right now?  The memory backends
 * know their count (their token may lag after a death); the kernel
 * backends ask poll(). */
int
efd_ready_now(efd_impl *impl)
{
    uint64_t v;
    struct pollfd p;
    if (!impl->ops->syscall_always && impl->ops->peek(impl, &v) == 0)
        return v > 0 ? 0 : EAGAIN;
    p.fd = impl->fd;
    p.events = POLLIN;
    p.revents = 0;
    if (poll(&p, 1, 0) < 0)
        return errno;
    return (p.revents & POLLIN) ? 0 : EAGAIN;
}

/* A read found nothing: if another process holds units, give back those
 * of holders that died (efd_books.c) and try once more -- so that a dead
 * holder's unit reaches whoever looks next, at the latest a re-check
 * later. */
static int
read_after_settling(efd_impl *impl, int op, uint64_t *value)
{
    if (efd_books_sweep(impl) == 0)
        return EAGAIN;
    return (op & EFD_OP_HOLD) ? impl->ops->try_read_hold(impl, value)
                              : impl->ops->try_read(impl, value);
}

static int
attempt(efd_impl *impl, int op, uint64_t *value)
{
    int err;
    switch (op) {
    case EFD_OP_READ:
    case EFD_OP_READ | EFD_OP_HOLD:
        err = (op & EFD_OP_HOLD) ? impl->ops->try_read_hold(impl, value)
                                 : impl->ops->try_read(impl, value);
        return err == EAGAIN ? read_after_settling(impl, op, value) : err;
    case EFD_OP_WRITE:
        return impl->ops->try_write(impl, *value);
    default:
        return efd_ready_now(impl);
    }
}

/* Whether only efd's own code in this process can reach the kernel
 * descriptor's open file description, so that nobody can have cleared its
 * O_NONBLOCK, and a plain read() cannot sleep (efd_impl.desc_shared).  To
 * clear the flag one needs the description: through fileno() or the
 * descriptors handed out (desc_shared is set), an inheritable descriptor
 * or an adopted one (set from the start), or a fork (the parent's
 * *forks moved; in the child, *proc).  The fork hooks run before any other
 * Python code after a fork, and this is asked with the GIL held -- never
 * from the GIL-free part of the wait loop, where a fileno() and a flag
 * cleared by another thread could slip in between the look and the read:
 * there reads keep RWF_NOWAIT. */
static int
desc_owned(efd_impl *impl)
{
    return !impl->desc_shared && *impl->proc == impl->desc_proc
           && *impl->forks == impl->desc_forks;
}

int
efd_attempt(eventfd_object *self, int op, uint64_t *value)
{
    efd_impl *impl = &self->impl;
    int err;
    if (op == EFD_OP_READ && impl->ops->try_read_owned != NULL
            && desc_owned(impl))
        return impl->ops->try_read_owned(impl, value);
    if (op != EFD_OP_WRITE
            || (!impl->ops->syscall_always && self->waiters == NULL))
        return attempt(impl, op, value);
    /* Writes on the kernel backends run without the GIL: a write to a full
     * counter whose O_NONBLOCK someone cleared would sleep in the kernel,
     * and a thread of this process that the write wakes can then take the
     * GIL at once (a cross-thread ping-pong costs half as much).  The
     * memory backends' writes never sleep, and drop the GIL only when a
     * thread of this process waits, for that hand-off. */
    efd_enter(self);
    Py_BEGIN_ALLOW_THREADS
    err = attempt(impl, op, value);
    Py_END_ALLOW_THREADS
    efd_leave(self);
    return err;
}

static int
fail(int err)
{
    efd_err_errno(err);
    return -1;
}

/* Whether fd is no longer open: closed behind efd's back (os.close on
 * fileno()), which epoll and a futex sleep do not report as poll() does
 * (POLLNVAL). */
static int
fd_closed(int fd)
{
    return fd >= 0 && fcntl(fd, F_GETFD) < 0 && errno == EBADF;
}

/* What a block() backend's sleeper waits for, for op. */
static int
block_kind(int op)
{
    return op == EFD_OP_READY ? EFD_BLOCK_READY
         : op == EFD_OP_READ ? EFD_BLOCK_READ : EFD_BLOCK_WRITE;
}

/* A bare re-check (a slice ran out, nothing there) needs the GIL only to
 * run signal handlers, which only the main thread runs: the others sleep
 * again at once, so that a thousand idle readers do not queue for the GIL
 * ten times a second each. */
static int
quiet_rechecks(eventfd_object *self, int op)
{
    return op == EFD_OP_READ
           && PyThread_get_thread_ident() != self->state->main_ident;
}

/* One sleep: in the backend's block(), in the herd, or in poll() on the
 * readiness fd (pfd[0]) and the waiter's wake channel (pfd[1]).  `quiet`:
 * quiet_rechecks() of this wait (not the main thread's).  Returns > 0
 * woken by an event, 0 the time ran out, -1 with *err (EINTR...). */
static int
sleep_once(eventfd_object *self, efd_waiter *w, int op, struct pollfd *pfd,
           int ms, uint32_t ticket, int backoff, int quiet, int *err)
{
    efd_impl *impl = &self->impl;
    int n;
    *err = 0;
    if (backoff) {
        /* The readiness fd said "ready", the count said no, and somebody
         * holds the token's lock: a memory backend's token that its mover
         * is about to take.  Polling it again would spin until the mover
         * runs (on a busy machine, for long; for ever if it is stopped):
         * yield to it the first time, then sleep, longer as it goes on,
         * watching only for close().  While this one waiter backs off, the
         * one-shot event stays disarmed: the process's other readers sleep
         * on rather than take turns at the stale token. */
        struct pollfd kick;
        struct timespec ts;
        if (backoff == 1) {
            sched_yield();
            return 0;
        }
        /* 100 us twice, then 1, 2, 4 ... ms up to the re-check interval
         * (a holder stopped that long is as good as dead: SPEC 5). */
        long us = backoff <= 3 ? 100
                : backoff >= 11 ? EFD_RECHECK_MS * 1000L
                : 1000L << (backoff - 4);
        if (us > EFD_RECHECK_MS * 1000L)
            us = EFD_RECHECK_MS * 1000L;
        if (ms >= 0 && us > ms * 1000L)
            us = ms * 1000L;
        ts.tv_sec = us / 1000000;
        ts.tv_nsec = (us % 1000000) * 1000L;
        kick.fd = w->kind == EFD_WAITER_HERD ? self->herd_krfd : w->rfd;
        kick.events = POLLIN;
        kick.revents = 0;
        n = ppoll(&kick, 1, &ts, NULL);
        if (n < 0)
            *err = errno;
        else if (n > 0 && w->kind != EFD_WAITER_HERD)
            pfd[1].revents = kick.revents;
        return n;
    }
    if (w->kind == EFD_WAITER_BLOCK) {
        *err = impl->ops->block(impl, block_kind(op), ticket, ms);
        if (*err == ETIMEDOUT) {
            *err = 0;
            if (!fd_closed(pfd[0].fd))
                return 0;
            pfd[0].revents = POLLNVAL;  /* as poll() would say */
        }
        return *err == 0 ? 1 : -1;
    }
    if (w->kind == EFD_WAITER_HERD) {
        /* The main thread sleeps in slices whether it keeps the watch or
         * not: a signal another thread caught wakes nobody, and only the
         * main thread runs the handler. */
        n = efd_herd_sleep(self, w, ms, !quiet,
                           &pfd[0].revents);
        if (pfd[0].revents & POLLIN)
            w->chosen = 1;
        /* epoll forgets a descriptor closed behind our back (os.close on
         * fileno()) without a word: look, as poll() would (POLLNVAL) --
         * at a re-check, and when handed the watch (a keeper that found
         * it closed leaves, and the next must find out too: the memory
         * backends' attempt() never touches the descriptor). */
        if (n >= 0 && !(pfd[0].revents & POLLIN) && fd_closed(pfd[0].fd)) {
            pfd[0].revents = POLLNVAL;
            n = 1;
        }
    }
    else
        n = poll(pfd, 2, ms);
    if (n < 0)
        *err = errno;
    return n;
}

/* Python code may have run on this thread since *proc was read (signal
 * handlers; finalizers): if it forked, bring the object's books into this
 * process (check_fork renews our record) and say so once.  The caller then
 * drops what it knew of the parent's wake-ups. */
static int
resumed_in_child(eventfd_object *self, uint32_t *proc)
{
    check_fork(self);
    if (self->users_proc == *proc)
        return 0;
    *proc = self->users_proc;
    return 1;
}

int
efd_wait(eventfd_object *self, int op, uint64_t *value,
         int blocking, double timeout)
{
    efd_impl *impl = &self->impl;
    int64_t deadline = -1;
    uint64_t generation = LOAD(&self->generation);
    int err, result, pollout_lies = 0, first, quiet, rearm = 0;
    int busy = 0, backoff = 0, looked = 0, hold = op & EFD_OP_HOLD;
    uint32_t ticket = 0, proc;
    efd_waiter *w;

    op &= ~EFD_OP_HOLD;
    err = efd_attempt(self, op | hold, value);
    if (err == 0)
        return 1;
    if (err != EAGAIN && err != EINTR)
        return fail(err);
    if (!blocking)
        return 0;
    if (LOAD(&self->closed)) {
        efd_err_closed();
        return -1;
    }

    if (timeout >= 0) {
        /* Huge timeouts saturate to "no deadline" rather than overflow. */
        double ns = timeout * 1e9;
        if (ns < 9.0e18) {
            deadline = monotonic_ns() + (int64_t)ceil(ns);
            if (deadline < 0)
                deadline = -1;
        }
    }
    if ((w = waiter_start(self, op)) == NULL)
        return -1;
    proc = self->users_proc;
    /* See efd_eventfd.c: a release(1) does not look at O_NONBLOCK, so a
     * wait puts it back -- unless nobody but efd's code here can have
     * cleared it (one fcntl fewer per sleep of a private object). */
    if (impl->ops->syscall_always && !desc_owned(impl))
        (void)efd_ensure_nonblock(impl->fd);
    /* block() backends: the first pass only takes a ticket and looks (the
     * close and count checks above came before any ticket). */
    first = impl->ops->block != NULL;
    quiet = quiet_rechecks(self, op);

    for (;;) {
        efd_waitspec ws;
        struct pollfd pfd[2];
        int ms, n, saved_errno = 0, closed;

        impl->ops->waitspec(impl, op == EFD_OP_WRITE, &ws);
        if (pollout_lies) {
            /* POLLOUT says "room for 1", not "room for value": once it has
             * failed us, re-try in slices instead of spinning. */
            ws.fd = -1;
            ws.slice_ms = 5;
        }
        if (w->kind == EFD_WAITER_NOCHANNEL
                && (ws.slice_ms <= 0 || ws.slice_ms > EFD_NOCHAN_MS))
            ws.slice_ms = EFD_NOCHAN_MS;
        /* The herd hands one wake-up to one waiter: if that one dies
         * before it takes the unit, someone must look for itself -- the
         * sleeper that keeps the herd's watch (efd_herd_sleep). */
        pfd[0].fd = ws.fd;
        pfd[0].events = ws.events;
        pfd[1].fd = w->rfd;
        pfd[1].events = POLLIN;

        Py_BEGIN_ALLOW_THREADS
        for (;;) {
            int leaving;
            pfd[0].revents = pfd[1].revents = 0;
            ms = remaining_ms(deadline);
            /* (The herd's sleepers: how long, efd_herd_sleep says.) */
            if (w->kind != EFD_WAITER_HERD && ws.slice_ms > 0
                    && (ms < 0 || ms > ws.slice_ms))
                ms = ws.slice_ms;
            if (first)
                n = 1;                  /* look before the first sleep */
            else
                n = sleep_once(self, w, op, pfd, ms, ticket, backoff, quiet,
                               &saved_errno);
            backoff = 0;
            if (self->herd_oneshot && w->kind == EFD_WAITER_HERD
                    && (pfd[0].revents & POLLIN))
                rearm = 1;              /* the one-shot event came to us */
            if (impl->ops->ticket != NULL)
                ticket = impl->ops->ticket(impl, block_kind(op));
                                        /* before every look */
            closed = LOAD(&self->closed);
            /* A sleep that a signal cut short is a look too: under a
             * storm of signals faster than the re-check interval, a wait
             * that only looked after a wake-up or a timeout would never
             * look again (a one-shot herd event held back by a back-off,
             * and the token never re-checked). */
            looked = n >= 0 || saved_errno == EINTR;
            if (looked && !closed) {
                err = attempt(impl, op | hold, value);
                /* Readable, yet nothing there: the readiness may be stale
                 * (memory backends: a process died before its sync). */
                if (err == EAGAIN && impl->ops->repair != NULL
                        && ((pfd[0].revents & POLLIN) || busy)) {
                    if (impl->ops->repair(impl) == EBUSY)
                        backoff = ++busy;   /* longer each time in a row */
                    else
                        busy = 0;
                }
                else if (err != EAGAIN)
                    busy = 0;
            }
            if (n > 0 && !first)
                __atomic_add_fetch(&self->woken, 1, __ATOMIC_RELAXED);
            else if (n == 0)
                __atomic_add_fetch(&self->rechecks, 1, __ATOMIC_RELAXED);
            first = 0;
            /* A waiter backing off keeps the disarmed one-shot event (and
             * looks again itself) until the token is sorted out. */
            if (rearm && !busy) {
                efd_herd_rearm(self);
                rearm = 0;
            }
            leaving = n < 0 || closed || err != EAGAIN
                      || (pfd[0].revents & POLLNVAL) || pfd[1].revents
                      || (deadline >= 0 && monotonic_ns() >= deadline);
            /* A wake-up that came to us goes on now, without waiting for
             * the GIL (another thread of ours may hold it for long).  So
             * does one the watch found: a re-check that took a unit and
             * sees more (a dead waiter's, that no event announces) wakes
             * the next waiter, in whatever process, for them. */
            if (w->chosen && self->herd_exclusive
                    && (err == 0 || leaving)) {
                if (err == 0)
                    efd_herd_rotate(self);
                (void)efd_pass_on(self);
                w->chosen = 0;
            }
            else if (n == 0 && err == 0 && w->watching
                     && self->herd_exclusive)
                (void)efd_pass_on(self);
            /* Woken for nothing, or a bare re-check: sleep again (only the
             * main thread needs the GIL, to run signal handlers). */
            if (!quiet || leaving) {
                /* Whoever goes for the GIL -- to leave, or the main thread
                 * to run Python code (signal handlers, which may take long,
                 * or a wait on this object again) -- hands the herd's
                 * watch on first: another thread may hold the GIL for
                 * long, and the other sleepers look without it.  (One
                 * that sleeps again takes it back if it is still free.) */
                if (w->kind == EFD_WAITER_HERD)
                    efd_herd_leave(self, w);
                break;
            }
        }
        Py_END_ALLOW_THREADS

        if (looked && !closed) {
            if (err == 0) {
                result = 1;             /* signals run after we return */
                break;
            }
            if (err != EAGAIN && err != EINTR) {
                result = fail(err);
                break;
            }
            if (op == EFD_OP_WRITE && (pfd[0].revents & POLLOUT))
                pollout_lies = 1;
        }
        if (n > 0 && (pfd[1].revents & POLLIN)) {
            /* Drain first, then look at what the poke announced: whoever
             * pokes changes the state before writing. */
            STORE(&w->poked, 0);
            efd_chan_drain(w->rfd);
        }
        if (LOAD(&self->closed)) {
            efd_err_closed();
            result = -1;
            break;
        }
        if (op == EFD_OP_READY && LOAD(&self->generation) != generation) {
            result = 1;                 /* Event.set() in this process */
            break;
        }
        if (n < 0 && saved_errno != EINTR) {
            result = fail(saved_errno);
            break;
        }
        /* PEP 475: run the handlers of signals that arrived (EINTR, or a
         * signal caught while another thread was in the interpreter). */
        if (PyErr_CheckSignals() < 0) {
            result = -1;
            break;
        }
        if (resumed_in_child(self, &proc)) {
            /* A handler forked: go on as this process's wait, with the
             * renewed record; look before sleeping (a wake-up written to
             * the parent's channel or herd is not ours to see). */
            first = 1;
            rearm = busy = backoff = 0;
            quiet = quiet_rechecks(self, op);
        }
        if (deadline >= 0 && monotonic_ns() >= deadline) {
            result = 0;
            break;
        }
        if (n > 0 && (pfd[0].revents & POLLNVAL)) {
            /* Closed behind our back (os.close on fileno()): not by us,
             * since we are counted in `users`. */
            result = fail(EBADF);
            break;
        }
    }

    if (resumed_in_child(self, &proc))
        rearm = 0;                      /* the parent's herd, not ours */
    if (rearm)
        efd_herd_rearm(self);
    /* Still a user: the descriptors are open even if close() was called,
     * and other processes may share them and wait. */
    if (self->herd_exclusive && (w->chosen || self->closed))
        (void)efd_pass_on(self);        /* closed, or a handler raised */
    else if (!self->closed && result != 1 && op == EFD_OP_READ
             && impl->ops->interrupt != NULL)
        impl->ops->interrupt(impl, 0);  /* pass on a futex wake-up */
    if (w->kind == EFD_WAITER_BLOCK && impl->ops->unblock != NULL)
        impl->ops->unblock(impl);       /* owes nobody now (the bell) */
    waiter_end(self, w);
    return result;
}
