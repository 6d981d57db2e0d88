/*
 * efd_shm.c -- what the backends that keep their count in memory share
 * (pipe, futex): an anonymous shared-memory file, a process-shared robust
 * mutex, and a "channel" -- a descriptor that is made readable by writing
 * to it and drained by reading, which serves as a readiness token (pipe,
 * futex) and as a waiter's wake-up (efd_wait.c).
 */
#define _GNU_SOURCE 1
#include "efd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifdef EFD_HAVE_EVENTFD
#  include <sys/eventfd.h>
#endif

#if defined(__linux__) && !defined(EFD_NO_MEMFD)
#  include <sys/syscall.h>
#  if defined(SYS_memfd_create)
#    define EFD_HAVE_MEMFD 1
#    ifndef MFD_CLOEXEC
#      define MFD_CLOEXEC 0x0001U
#    endif
#  endif
#endif

#if defined(__linux__)
#  ifndef RWF_NOWAIT
#    define RWF_NOWAIT 0x00000008
#  endif
#endif

int
efd_set_fd_flags(int fd, int cloexec, int nonblock)
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

/* ---- shared memory ----------------------------------------------------- */

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

int
efd_shm_new(size_t size, int cloexec, int *out_fd, void **out_map)
{
    int fd = -1, err;
    void *p;
    if ((err = shm_create(&fd)) != 0)
        return err;
    if ((err = efd_set_fd_flags(fd, cloexec, 0)) != 0)
        goto fail;
    if (ftruncate(fd, (off_t)size) < 0) {
        err = errno;
        goto fail;
    }
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        err = errno;
        goto fail;
    }
    *out_fd = fd;
    *out_map = p;
    return 0;
fail:
    efd_close_fd(&fd);
    return err;
}

int
efd_shm_adopt(int fd, size_t size, void **out_map)
{
    struct stat st;
    void *p;
    if (fstat(fd, &st) < 0)
        return errno;
    if (!S_ISREG(st.st_mode) || st.st_size < (off_t)size)
        return EINVAL;
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return errno;
    *out_map = p;
    return 0;
}

/* ---- robust mutex ------------------------------------------------------ */

int
efd_robust_init(pthread_mutex_t *m)
{
    pthread_mutexattr_t attr;
    int err = pthread_mutexattr_init(&attr);
    if (err)
        return err;
    err = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
#ifdef EFD_ROBUST
    if (!err)
        err = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
#endif
    if (!err)
        err = pthread_mutex_init(m, &attr);
    pthread_mutexattr_destroy(&attr);
    return err;
}

int
efd_robust_lock(pthread_mutex_t *m, int lock_ms, int *owner_died)
{
    int r = pthread_mutex_trylock(m);

    *owner_died = 0;
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
        *owner_died = 1;
        r = 0;
    }
#endif
    return r;
}

void
efd_robust_recovered(pthread_mutex_t *m)
{
#ifdef EFD_ROBUST
    pthread_mutex_consistent(m);
#else
    (void)m;
#endif
}

/* ---- channels ---------------------------------------------------------- */

int
efd_chan_open(int *rfd, int *wfd, int allow_eventfd, int cloexec)
{
    int p[2], i, err;
#ifdef EFD_HAVE_EVENTFD
    if (allow_eventfd) {
        int fd = eventfd(0, (cloexec ? EFD_CLOEXEC : 0) | EFD_NONBLOCK);
        if (fd >= 0) {
            *rfd = *wfd = fd;
            return 0;
        }
        /* Out of descriptors or memory is an error; anything else (a
         * sandbox that refuses eventfd, whatever it answers) means: use a
         * pipe. */
        if (errno == EMFILE || errno == ENFILE || errno == ENOMEM)
            return errno;
    }
#else
    (void)allow_eventfd;
#endif
    if (pipe(p) < 0)
        return errno;
    for (i = 0; i < 2; i++) {
        if ((err = efd_set_fd_flags(p[i], cloexec, 1)) != 0) {
            efd_close_fd(&p[0]);
            efd_close_fd(&p[1]);
            return err;
        }
    }
    *rfd = p[0];
    *wfd = p[1];
    return 0;
}

void
efd_chan_close(int *rfd, int *wfd)
{
    if (*wfd != *rfd)
        efd_close_fd(wfd);
    efd_close_fd(rfd);
    *wfd = -1;
}

void
efd_chan_put(int rfd, int wfd)
{
    ssize_t n;
    if (rfd == wfd) {
        uint64_t one = 1;
        do {
            n = write(wfd, &one, sizeof(one));
        } while (n < 0 && errno == EINTR);
    }
    else {
        char b = 1;
        do {
            n = write(wfd, &b, 1);
        } while (n < 0 && errno == EINTR);
    }
}

/* A read that never sleeps, even if another holder of the descriptor
 * cleared O_NONBLOCK on it. */
static ssize_t
read_nowait(int fd, void *buf, size_t n)
{
#if defined(__linux__)
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

void
efd_chan_take(int rfd, int wfd)
{
    /* An eventfd channel (normal mode) hands over everything in one read;
     * a pipe token is one byte. */
    char buf[8];
    ssize_t n;
    do {
        n = read_nowait(rfd, buf, rfd == wfd ? 8 : 1);
    } while (n < 0 && errno == EINTR);
}

void
efd_chan_drain(int rfd)
{
    char buf[64];
    ssize_t n;
    do {
        n = read_nowait(rfd, buf, sizeof(buf));
    } while (n > 0 || (n < 0 && errno == EINTR));
}
