/*
 * efd_wait.c -- the one wait loop, used by every call that can block.
 *
 *   1. Try the operation once, with the GIL held (no GIL round trip when it
 *      succeeds or when the caller does not want to wait).
 *   2. Otherwise, with the GIL released, poll() the backend's readiness fd
 *      and this object's wake fd until the deadline, and try again after
 *      each wake-up, still without the GIL.
 *   3. EINTR: take the GIL, run the signal handlers (PEP 475).  A handler
 *      that raises ends the wait with its exception and nothing consumed; a
 *      handler that returns lets the wait go on with what is left of the
 *      monotonic deadline.
 *   4. close() from another thread writes the wake fd: the waiter stops with
 *      ValueError, having consumed nothing.  The descriptors are closed by
 *      the last waiter to leave, so their numbers cannot be recycled under a
 *      waiter's feet.
 */
#include "efd_module.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <time.h>
#include <unistd.h>

#ifdef EFD_HAVE_EVENTFD
#  include <sys/eventfd.h>
#endif

#define LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)

static int64_t
monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* poll() timeout for what is left until `deadline`, rounded up so that we
 * never wake early; -1 for no deadline. */
static int
remaining_ms(int64_t deadline, int64_t now)
{
    int64_t left;
    if (deadline < 0)
        return -1;
    left = deadline - now;
    if (left <= 0)
        return 0;
    left = (left + 999999) / 1000000;
    return left > INT_MAX ? INT_MAX : (int)left;
}

/* This process's pid, from the module's fork-refreshed cache when the
 * object has one (no syscall). */
static pid_t
self_pid(eventfd_object *self)
{
    return self->impl.pid != NULL ? (pid_t)*self->impl.pid : getpid();
}

/* The wake fd exists per process: a child that inherited one from a fork
 * must not wake (or be woken by) its parent's waiters. */
static int
ensure_wake(eventfd_object *self, pid_t me)
{
    if (self->wake_rfd >= 0 && self->wake_pid == me)
        return 0;
    if (self->wake_rfd >= 0) {
        if (self->wake_wfd != self->wake_rfd)
            efd_close_fd(&self->wake_wfd);
        efd_close_fd(&self->wake_rfd);
        self->wake_wfd = -1;
    }
#ifdef EFD_HAVE_EVENTFD
    self->wake_rfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (self->wake_rfd >= 0) {
        self->wake_wfd = self->wake_rfd;
        self->wake_pid = me;
        return 0;
    }
    if (errno != ENOSYS && errno != EPERM && errno != EINVAL) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
#endif
    {
        int p[2], i;
        if (pipe(p) < 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        for (i = 0; i < 2; i++) {
            int fl = fcntl(p[i], F_GETFL);
            (void)fcntl(p[i], F_SETFD, FD_CLOEXEC);
            (void)fcntl(p[i], F_SETFL, fl | O_NONBLOCK);
        }
        self->wake_rfd = p[0];
        self->wake_wfd = p[1];
        self->wake_pid = me;
    }
    return 0;
}

static void
close_wake(eventfd_object *self)
{
    if (self->wake_wfd != self->wake_rfd)
        efd_close_fd(&self->wake_wfd);
    efd_close_fd(&self->wake_rfd);
    self->wake_wfd = -1;
}

static void
poke_wake(eventfd_object *self)
{
    if (self->wake_wfd >= 0 && self->wake_pid == self_pid(self)) {
#ifdef EFD_HAVE_EVENTFD
        if (self->wake_wfd == self->wake_rfd) {
            uint64_t one = 1;
            (void)!write(self->wake_wfd, &one, sizeof(one));
            return;
        }
#endif
        {
            char b = 1;
            (void)!write(self->wake_wfd, &b, 1);
        }
    }
}

void
efd_object_close(eventfd_object *self)
{
    if (self->users > 0 && self->users_pid != self_pid(self))
        self->users = 0;                 /* those waiters live in a parent */
    __atomic_store_n(&self->closed, 1, __ATOMIC_RELEASE);
    if (self->users > 0) {
        poke_wake(self);                 /* the last waiter closes */
        return;
    }
    if (self->impl.ops != NULL && self->impl.ops->close != NULL)
        self->impl.ops->close(&self->impl);
    self->impl.fd = -1;
    close_wake(self);
}

static int
attempt(efd_impl *impl, int op, uint64_t *value)
{
    if (op == EFD_OP_READ)
        return impl->ops->try_read(impl, value);
    if (op == EFD_OP_WRITE)
        return impl->ops->try_write(impl, *value);
    {
        /* EFD_OP_READY: does the readiness fd poll readable right now? */
        efd_waitspec ws;
        struct pollfd p;
        impl->ops->waitspec(impl, 0, &ws);
        p.fd = ws.fd;
        p.events = POLLIN;
        p.revents = 0;
        if (poll(&p, 1, 0) < 0)
            return errno;
        return (p.revents & POLLIN) ? 0 : EAGAIN;
    }
}

int
efd_wait(eventfd_object *self, int op, uint64_t *value,
         int blocking, double timeout)
{
    efd_impl *impl = &self->impl;
    int64_t deadline = -1;
    int err, result, pollout_lies = 0;
    pid_t me;

    /* First try with the GIL held: no GIL round trip when it succeeds. */
    err = attempt(impl, op, value);
    if (err == 0)
        return 1;
    if (err != EAGAIN && err != EINTR) {
        efd_err_errno(err);
        return -1;
    }
    if (!blocking)
        return 0;

    if (timeout >= 0) {
        /* Huge timeouts saturate to "no deadline" rather than overflow. */
        double ns = timeout * 1e9;
        if (ns < 9.0e18) {
            deadline = monotonic_ns() + (int64_t)ceil(ns);
            if (deadline < 0)
                deadline = -1;
        }
    }
    me = self_pid(self);
    if (ensure_wake(self, me) < 0)
        return -1;
    if (self->users > 0 && self->users_pid != me)
        self->users = 0;             /* those waiters live in a parent */
    self->users++;
    self->users_pid = me;

    for (;;) {
        efd_waitspec ws;
        struct pollfd pfd[2];
        int ms, n, saved_errno = 0, closed = 0;

        ms = remaining_ms(deadline, deadline >= 0 ? monotonic_ns() : 0);
        impl->ops->waitspec(impl, op == EFD_OP_WRITE, &ws);
        if (pollout_lies) {
            /* POLLOUT says "room for 1", not "room for value": when it has
             * already failed us, re-try in slices instead of spinning. */
            ws.fd = -1;
            ws.slice_ms = 5;
        }
        if (ws.slice_ms > 0 && (ms < 0 || ms > ws.slice_ms))
            ms = ws.slice_ms;
        pfd[0].fd = ws.fd;
        pfd[0].events = ws.events;
        pfd[0].revents = 0;
        pfd[1].fd = self->wake_rfd;
        pfd[1].events = POLLIN;
        pfd[1].revents = 0;

        Py_BEGIN_ALLOW_THREADS
        n = poll(pfd, 2, ms);
        if (n < 0)
            saved_errno = errno;
        closed = LOAD(&self->closed);
        if (n >= 0 && !closed)
            err = attempt(impl, op, value);
        Py_END_ALLOW_THREADS

        if (n >= 0 && !closed) {
            if (err == 0) {
                result = 1;
                break;
            }
            if (err != EAGAIN && err != EINTR) {
                efd_err_errno(err);
                result = -1;
                break;
            }
            if (op == EFD_OP_WRITE && (pfd[0].revents & POLLOUT))
                pollout_lies = 1;
        }
        if (closed) {
            efd_err_closed();
            result = -1;
            break;
        }
        if (n < 0 && saved_errno != EINTR) {
            efd_err_errno(saved_errno);
            result = -1;
            break;
        }
        /* PEP 475: run the handlers of signals that arrived (EINTR, or a
         * signal caught while another thread was in the interpreter). */
        if (PyErr_CheckSignals() < 0) {
            result = -1;
            break;
        }
        if (deadline >= 0 && monotonic_ns() >= deadline) {
            result = 0;
            break;
        }
        if (n > 0 && (pfd[1].revents & POLLIN)) {
            /* Not closed, yet woken: drain, so a stray wake cannot spin. */
            char buf[8];
            (void)!read(self->wake_rfd, buf, sizeof(buf));
        }
        if (n > 0 && (pfd[0].revents & (POLLNVAL | POLLERR))) {
            efd_err_errno(EBADF);
            result = -1;
            break;
        }
    }

    if (--self->users == 0 && self->closed)
        efd_object_close(self);
    return result;
}
