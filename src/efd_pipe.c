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
#define _GNU_SOURCE 1
#include "efd.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#if defined(__linux__) && !defined(EFD_NO_MEMFD)
#  include <sys/syscall.h>
#  if defined(SYS_memfd_create)
#    define EFD_HAVE_MEMFD 1
#    ifndef MFD_CLOEXEC
#      define MFD_CLOEXEC 0x0001U
#    endif
#  endif
#endif

/* Robust mutexes (POSIX.1-2008): glibc and musl have them; where a system
 * lacks them, a death inside the lock would leave it held for good. */
#if defined(__linux__)
#  define EFD_ROBUST 1
#  ifndef RWF_NOWAIT
#    define RWF_NOWAIT 0x00000008
#  endif
#endif

#define EFD_SHM_MAGIC 0x65666472u   /* "efdr": the robust-mutex layout */

struct efd_shared {
    uint32_t magic;
    uint32_t semaphore;
    _Atomic uint64_t count;
    pthread_mutex_t lock;           /* process-shared, robust */
};

/* ---- the token --------------------------------------------------------- */

/* A read that never sleeps, even if another holder of the pipe cleared
 * O_NONBLOCK on it. */
static ssize_t
read_nowait(int fd, void *buf, size_t n)
{
#ifdef EFD_ROBUST
    struct iovec iov;
    ssize_t r;
    iov.iov_base = buf;
    iov.iov_len = n;
    r = preadv2(fd, &iov, 1, -1, RWF_NOWAIT);
    if (r >= 0 || (errno != EOPNOTSUPP && errno != ENOSYS && errno != EINVAL))
        return r;
    if (efd_ensure_nonblock(fd) != 0)
        return -1;
#endif
    return read(fd, buf, n);
}

static void
token_put(efd_impl *impl)
{
    char b = 1;
    ssize_t n;
    do {
        n = write(impl->wfd, &b, 1);
    } while (n < 0 && errno == EINTR);
}

static void
token_take(efd_impl *impl)
{
    char b;
    ssize_t n;
    do {
        n = read_nowait(impl->fd, &b, 1);
    } while (n < 0 && errno == EINTR);
}

/* Under the lock: make the pipe hold one byte iff the counter is > 0. */
static void
repair_locked(efd_impl *impl)
{
    char buf[64];
    (void)efd_ensure_nonblock(impl->wfd);
    while (read_nowait(impl->fd, buf, sizeof(buf)) > 0)
        ;
    if (atomic_load_explicit(&impl->shm->count, memory_order_acquire) > 0)
        token_put(impl);
}

/* ---- the lock ---------------------------------------------------------- */

/* Take the lock, waiting at most lock_ms for it: 0, EBUSY, or an errno. */
static int
shm_lock(efd_impl *impl, int lock_ms)
{
    pthread_mutex_t *m = &impl->shm->lock;
    int r = pthread_mutex_trylock(m);

    if (r == EBUSY && lock_ms > 0) {
        struct timespec ts;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 30)
        clock_gettime(CLOCK_MONOTONIC, &ts);
#else
        clock_gettime(CLOCK_REALTIME, &ts);
#endif
        ts.tv_sec += lock_ms / 1000;
        ts.tv_nsec += (long)(lock_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 30)
        r = pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &ts);
#else
        r = pthread_mutex_timedlock(m, &ts);
#endif
        if (r == ETIMEDOUT || r == EINTR)
            r = EBUSY;
    }
#ifdef EFD_ROBUST
    if (r == EOWNERDEAD) {
        /* Its owner died inside the locked section: the token may be
         * missing or stale.  Re-derive it, then mark the lock usable. */
        repair_locked(impl);
        pthread_mutex_consistent(m);
        r = 0;
    }
#endif
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
        token_take(impl);          /* the counter crossed to zero */
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
        token_put(impl);           /* the counter crossed from zero */
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
set_fd_flags(int fd, int cloexec, int nonblock)
{
    int fl = fcntl(fd, F_GETFD);
    if (fl < 0)
        return errno;
    fl = cloexec ? (fl | FD_CLOEXEC) : (fl & ~FD_CLOEXEC);
    if (fcntl(fd, F_SETFD, fl) < 0)
        return errno;
    if (nonblock) {
        fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
            return errno;
    }
    return 0;
}

/* An anonymous shared-memory file: memfd where present, else shm_open with
 * a name that is unlinked at once. */
static int
shm_create(int *out_fd)
{
    int fd = -1;
#ifdef EFD_HAVE_MEMFD
    fd = (int)syscall(SYS_memfd_create, "efd", MFD_CLOEXEC);
#endif
    if (fd < 0) {
        struct timespec ts;
        int attempt;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        for (attempt = 0; attempt < 100 && fd < 0; attempt++) {
            char name[64];
            snprintf(name, sizeof(name), "/efd-%ld-%lx-%d", (long)getpid(),
                     (unsigned long)ts.tv_nsec ^ (unsigned long)(uintptr_t)out_fd,
                     attempt);
            fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
            if (fd >= 0)
                shm_unlink(name);
            else if (errno != EEXIST)
                return errno;
        }
        if (fd < 0)
            return EEXIST;
    }
    *out_fd = fd;
    return 0;
}

static int
pipe_map(efd_impl *impl)
{
    void *p = mmap(NULL, sizeof(efd_shared), PROT_READ | PROT_WRITE,
                   MAP_SHARED, impl->shmfd, 0);
    if (p == MAP_FAILED)
        return errno;
    impl->shm = (efd_shared *)p;
    return 0;
}

static int
pipe_open(efd_impl *impl, uint64_t initval, int semaphore, int cloexec)
{
    int p[2] = {-1, -1};
    int err;
    pthread_mutexattr_t attr;

    impl->fd = impl->wfd = impl->shmfd = -1;
    impl->shm = NULL;
    impl->semaphore = semaphore;
    if (pipe(p) < 0)
        return errno;
    impl->fd = p[0];
    impl->wfd = p[1];
    if ((err = set_fd_flags(impl->fd, cloexec, 1))
            || (err = set_fd_flags(impl->wfd, cloexec, 1))
            || (err = shm_create(&impl->shmfd))
            || (err = set_fd_flags(impl->shmfd, cloexec, 0)))
        goto fail;
    if (ftruncate(impl->shmfd, (off_t)sizeof(efd_shared)) < 0) {
        err = errno;
        goto fail;
    }
    if ((err = pipe_map(impl)))
        goto fail;
    atomic_store(&impl->shm->count, initval);
    if ((err = pthread_mutexattr_init(&attr)))
        goto fail;
    err = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
#ifdef EFD_ROBUST
    if (!err)
        err = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
#endif
    if (!err)
        err = pthread_mutex_init(&impl->shm->lock, &attr);
    pthread_mutexattr_destroy(&attr);
    if (err)
        goto fail;
    impl->shm->magic = EFD_SHM_MAGIC;
    impl->shm->semaphore = (uint32_t)semaphore;
    if (initval > 0)
        token_put(impl);
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
    int err;

    if (nfds != 3)
        return EINVAL;
    errno = 0;
    impl->fd = impl->wfd = impl->shmfd = -1;
    impl->shm = NULL;
    if (fstat(fds[0], &st) < 0 || !S_ISFIFO(st.st_mode)
            || fstat(fds[1], &st) < 0 || !S_ISFIFO(st.st_mode)
            || fstat(fds[2], &st) < 0 || st.st_size < (off_t)sizeof(efd_shared))
        return errno ? errno : EINVAL;
    impl->fd = fds[0];
    impl->wfd = fds[1];
    impl->shmfd = fds[2];
    if ((err = pipe_map(impl)))
        goto fail;
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
    pipe_waitspec, pipe_peek, pipe_repair, NULL, pipe_fds, pipe_close,
};
