/*
 * efd_pipe.c -- the emulation for systems without eventfd.
 *
 * The counter lives in a page of shared memory (C11 atomics), so that it is
 * one object for every process holding the descriptors.  A pipe carries
 * readiness: it holds exactly one byte (the "token") while the counter is
 * > 0, so its read end -- what fileno() returns -- polls readable exactly
 * then.  Only POSIX interfaces are used: pipe, poll, mmap, shm_open (or
 * Linux's memfd_create where present) and process-shared robust mutexes.
 *
 * Concurrency.  The counter only crosses zero (0 -> n, or n -> 0) under a
 * lock in the shared page, and whoever crosses it moves the token in the
 * same locked section; so, outside that section, "token present" and
 * "counter > 0" agree.  Every other change is one compare-and-swap with no
 * lock and no syscall: a semaphore acquire that leaves the counter above
 * zero, or a release onto a counter already above zero.
 *
 * Process death.  The lock is a process-shared robust mutex: if its owner
 * dies -- SIGKILL at any instant, reaped or left a zombie, in any pid
 * namespace -- the kernel marks it and the next process to lock it gets
 * EOWNERDEAD, re-derives the token from the counter (the repair), and
 * carries on.  A death outside the lock can only happen between atomic
 * operations, which leave nothing half done.  Until somebody locks again,
 * a token may be missing (count > 0) or stale (count == 0); waiters on the
 * read end therefore re-check the counter every EFD_RECHECK_MS, and a
 * waiter that polls readable but finds nothing repairs the token itself
 * (efd_wait.c), so neither costs more than that interval.  Only the units
 * in the dead process's hands are gone: the counter is never wrong.
 *
 * Nobody waits for the lock with the GIL held: every operation first only
 * tries it (lock_ms == 0, EBUSY if held) and the caller waits for it in
 * bounded slices with the GIL released, between checks for signals, for
 * close() and for its deadline.
 */
#include "efd.h"

#include <errno.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define EFD_SHM_MAGIC 0x65666472u   /* "efdr": the robust-mutex layout */

struct efd_shared {
    uint32_t magic;
    uint32_t semaphore;
    _Atomic uint64_t count;
    pthread_mutex_t lock;           /* process-shared, robust */
};

/* ---- the token --------------------------------------------------------- */

/* Under the lock: make the pipe hold one byte iff the counter is > 0. */
static void
repair_locked(efd_impl *impl)
{
    (void)efd_ensure_nonblock(impl->wfd);
    efd_chan_drain(impl->fd);
    if (atomic_load_explicit(&impl->shm->count, memory_order_acquire) > 0)
        efd_chan_put(impl->fd, impl->wfd);
}

/* ---- the lock ---------------------------------------------------------- */

/* Take the lock, waiting at most lock_ms for it: 0, EBUSY, or an errno. */
static int
shm_lock(efd_impl *impl, int lock_ms)
{
    int died, r = efd_robust_lock(&impl->shm->lock, lock_ms, &died);
    if (r == 0 && died) {
        /* Its owner died inside the locked section: the token may be
         * missing or stale.  Re-derive it, then mark the lock usable. */
        repair_locked(impl);
        efd_robust_recovered(&impl->shm->lock);
    }
    return r;
}

static void
shm_unlock(efd_impl *impl)
{
    pthread_mutex_unlock(&impl->shm->lock);
}

/* ---- operations -------------------------------------------------------- */

static int
pipe_try_read(efd_impl *impl, uint64_t *value, int lock_ms)
{
    _Atomic uint64_t *count = &impl->shm->count;
    uint64_t c = atomic_load_explicit(count, memory_order_acquire);
    uint64_t take;
    int err;

    /* Fast path: a semaphore read that leaves the counter above zero. */
    while (impl->semaphore && c >= 2) {
        if (atomic_compare_exchange_weak_explicit(
                count, &c, c - 1, memory_order_acq_rel, memory_order_acquire)) {
            *value = 1;
            return 0;
        }
    }
    if (c == 0)
        return EAGAIN;

    if ((err = shm_lock(impl, lock_ms)) != 0)
        return err;
    c = atomic_load_explicit(count, memory_order_acquire);
    do {
        if (c == 0) {
            shm_unlock(impl);
            return EAGAIN;
        }
        take = impl->semaphore ? 1 : c;
    } while (!atomic_compare_exchange_weak_explicit(
                 count, &c, c - take, memory_order_acq_rel, memory_order_acquire));
    if (c == take)
        efd_chan_take(impl->fd, impl->wfd);   /* crossed to zero */
    shm_unlock(impl);
    *value = take;
    return 0;
}

static int
pipe_try_write(efd_impl *impl, uint64_t value, int lock_ms)
{
    _Atomic uint64_t *count = &impl->shm->count;
    uint64_t c;
    int err;

    if (value == 0)
        return 0;
    c = atomic_load_explicit(count, memory_order_acquire);
    /* Fast path: adding to a counter that is already above zero. */
    while (c > 0) {
        if (c > EFD_MAX - value)
            return EAGAIN;
        if (atomic_compare_exchange_weak_explicit(
                count, &c, c + value, memory_order_acq_rel, memory_order_acquire))
            return 0;
    }

    if ((err = shm_lock(impl, lock_ms)) != 0)
        return err;
    c = atomic_load_explicit(count, memory_order_acquire);
    do {
        if (c > EFD_MAX - value) {
            shm_unlock(impl);
            return EAGAIN;
        }
    } while (!atomic_compare_exchange_weak_explicit(
                 count, &c, c + value, memory_order_acq_rel, memory_order_acquire));
    if (c == 0)
        efd_chan_put(impl->fd, impl->wfd);    /* crossed from zero */
    shm_unlock(impl);
    return 0;
}

static void
pipe_waitspec(efd_impl *impl, int for_write, efd_waitspec *ws)
{
    if (for_write) {
        /* Nothing signals "room for n more": re-try in short slices. */
        ws->fd = -1;
        ws->events = 0;
        ws->slice_ms = 5;
    }
    else {
        /* The token may be missing for a while after a death: look at the
         * counter itself every EFD_RECHECK_MS as well. */
        ws->fd = impl->fd;
        ws->events = POLLIN;
        ws->slice_ms = EFD_RECHECK_MS;
    }
}

/* The read end polled readable, yet a read found nothing: the token may be
 * stale (a process died between moving the counter to 0 and taking it). */
static int
pipe_repair(efd_impl *impl, int lock_ms)
{
    int err = shm_lock(impl, lock_ms);
    if (err)
        return err;
    repair_locked(impl);
    shm_unlock(impl);
    return 0;
}

static int
pipe_peek(efd_impl *impl, uint64_t *value)
{
    *value = atomic_load_explicit(&impl->shm->count, memory_order_acquire);
    return 0;
}

static int
pipe_fds(efd_impl *impl, int *out, int max)
{
    if (max < 3)
        return 0;
    out[0] = impl->fd;
    out[1] = impl->wfd;
    out[2] = impl->shmfd;
    return 3;
}

static void
pipe_close(efd_impl *impl)
{
    if (impl->shm != NULL) {
        munmap((void *)impl->shm, sizeof(efd_shared));
        impl->shm = NULL;
    }
    efd_close_fd(&impl->fd);
    efd_close_fd(&impl->wfd);
    efd_close_fd(&impl->shmfd);
}

/* ---- creation ---------------------------------------------------------- */

static int
pipe_open(efd_impl *impl, uint64_t initval, int semaphore, int cloexec)
{
    void *map = NULL;
    int err;

    impl->fd = impl->wfd = impl->shmfd = -1;
    impl->shm = NULL;
    impl->semaphore = semaphore;
    if ((err = efd_chan_open(&impl->fd, &impl->wfd, 0, cloexec)) != 0)
        return err;
    if ((err = efd_shm_new(sizeof(efd_shared), cloexec, &impl->shmfd, &map)))
        goto fail;
    impl->shm = (efd_shared *)map;
    atomic_store(&impl->shm->count, initval);
    if ((err = efd_robust_init(&impl->shm->lock)) != 0)
        goto fail;
    impl->shm->magic = EFD_SHM_MAGIC;
    impl->shm->semaphore = (uint32_t)semaphore;
    if (initval > 0)
        efd_chan_put(impl->fd, impl->wfd);
    return 0;
fail:
    pipe_close(impl);
    return err;
}

/* Adopt (read end, write end, shared memory), as made by pipe_open. */
static int
pipe_adopt(efd_impl *impl, const int *fds, int nfds, int semaphore)
{
    struct stat st;
    void *map = NULL;
    int err;

    if (nfds != 3)
        return EINVAL;
    errno = 0;
    impl->fd = impl->wfd = impl->shmfd = -1;
    impl->shm = NULL;
    if (fstat(fds[0], &st) < 0 || !S_ISFIFO(st.st_mode)
            || fstat(fds[1], &st) < 0 || !S_ISFIFO(st.st_mode))
        return errno ? errno : EINVAL;
    impl->fd = fds[0];
    impl->wfd = fds[1];
    impl->shmfd = fds[2];
    if ((err = efd_shm_adopt(impl->shmfd, sizeof(efd_shared), &map)))
        goto fail;
    impl->shm = (efd_shared *)map;
    if (impl->shm->magic != EFD_SHM_MAGIC) {
        err = EINVAL;
        goto fail;
    }
    impl->semaphore = semaphore >= 0 ? semaphore : (int)impl->shm->semaphore;
    return 0;
fail:
    if (impl->shm != NULL)
        munmap((void *)impl->shm, sizeof(efd_shared));
    impl->shm = NULL;
    impl->fd = impl->wfd = impl->shmfd = -1;   /* the caller still owns them */
    return err;
}

const efd_backend efd_backend_pipe = {
    "pipe", 0, pipe_open, pipe_adopt, pipe_try_read, pipe_try_write,
    pipe_waitspec, pipe_peek, pipe_repair, NULL, NULL, NULL, NULL, NULL,
    pipe_fds, pipe_close,
};
