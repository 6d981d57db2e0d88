/*
 * efd_pipe.c -- the emulation for systems without eventfd.
 *
 * The counter lives in a page of shared memory (C11 atomics), so that it is
 * one object for every process holding the descriptors.  A pipe carries
 * readiness: it holds exactly one byte (the "token") while the counter is
 * > 0, so its read end -- what fileno() returns -- polls readable exactly
 * then.  Only POSIX interfaces are used: pipe, poll, mmap, shm_open (or
 * Linux's memfd_create where present), kill and sched_yield.
 *
 * Concurrency.  The counter only crosses zero (0 -> n, or n -> 0) under a
 * small lock in the shared page, and whoever crosses it moves the token in
 * the same locked section; so, outside that section, "token present" and
 * "counter > 0" agree.  Every other change is one compare-and-swap with no
 * lock and no syscall: a semaphore acquire that leaves the counter above
 * zero, or a release onto a counter already above zero.
 *
 * The lock word holds the owner's pid (read from a cache the module keeps
 * current across fork(), so taking the lock costs no syscall).  The locked section is one
 * non-blocking pipe read or write, so the lock is short; a process killed
 * inside it would leave it held, so a waiter that finds the owner gone
 * (kill(pid, 0) == ESRCH) takes the lock over and re-derives the token from
 * the counter.
 */
#include "efd.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
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

#define EFD_SHM_MAGIC 0x65666470u   /* "efdp" */

struct efd_shared {
    _Atomic uint64_t count;
    _Atomic uint32_t lock;          /* 0, or the pid of the owner */
    uint32_t magic;
    uint32_t semaphore;
};

/* ---- the lock ---------------------------------------------------------- */

static void pipe_repair(efd_impl *impl);

static void
shm_lock(efd_impl *impl)
{
    efd_shared *s = impl->shm;
    uint32_t me = *impl->pid;
    unsigned int spins = 0;

    for (;;) {
        uint32_t owner = 0;
        if (atomic_compare_exchange_weak_explicit(
                &s->lock, &owner, me,
                memory_order_acquire, memory_order_relaxed))
            return;
        if (++spins < 100)
            continue;
        if (owner != 0 && spins % 256 == 0 && owner != me
                && kill((pid_t)owner, 0) < 0 && errno == ESRCH) {
            /* The owner died inside the locked section: take over. */
            if (atomic_compare_exchange_strong_explicit(
                    &s->lock, &owner, me,
                    memory_order_acquire, memory_order_relaxed)) {
                pipe_repair(impl);
                return;
            }
        }
        sched_yield();
    }
}

static void
shm_unlock(efd_impl *impl)
{
    atomic_store_explicit(&impl->shm->lock, 0, memory_order_release);
}

/* ---- the token --------------------------------------------------------- */

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
        n = read(impl->fd, &b, 1);
    } while (n < 0 && errno == EINTR);
}

/* Under the lock: make the pipe hold one byte iff the counter is > 0. */
static void
pipe_repair(efd_impl *impl)
{
    char buf[64];
    while (read(impl->fd, buf, sizeof(buf)) > 0)
        ;
    if (atomic_load_explicit(&impl->shm->count, memory_order_acquire) > 0)
        token_put(impl);
}

/* ---- operations -------------------------------------------------------- */

static int
pipe_try_read(efd_impl *impl, uint64_t *value)
{
    _Atomic uint64_t *count = &impl->shm->count;
    uint64_t c = atomic_load_explicit(count, memory_order_acquire);
    uint64_t take;

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

    shm_lock(impl);
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
pipe_try_write(efd_impl *impl, uint64_t value)
{
    _Atomic uint64_t *count = &impl->shm->count;
    uint64_t c;

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

    shm_lock(impl);
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
        ws->fd = impl->fd;
        ws->events = POLLIN;
        ws->slice_ms = 0;
    }
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
    atomic_store(&impl->shm->lock, 0);
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
    pipe_waitspec, pipe_peek, pipe_fds, pipe_close,
};
