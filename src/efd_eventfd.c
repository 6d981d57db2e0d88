/*
 * efd_eventfd.c -- the native backend: the kernel does everything.
 *
 * The descriptor is always opened with EFD_NONBLOCK: a read or write is one
 * syscall that never sleeps, and the Python layer waits for readiness with
 * poll() (as socket objects with a timeout do).  Another holder of the same
 * open file description can clear O_NONBLOCK behind our back, so reads use
 * preadv2(RWF_NOWAIT) where the kernel has it (Linux 5.12+ for eventfd):
 * never a sleep in the kernel, whatever the description's flags say.  The
 * helpers at the top are shared with the eventfd-readback backend.
 */
#define _GNU_SOURCE 1
#include "efd.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#ifdef EFD_HAVE_EVENTFD
#  include <sys/eventfd.h>
#  ifndef RWF_NOWAIT
#    define RWF_NOWAIT 0x00000008
#  endif
#endif

int
efd_ensure_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return errno;
    if (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return errno;
    return 0;
}

void
efd_close_fd(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        *fd = -1;
        errno = saved;
    }
}

#ifdef EFD_HAVE_EVENTFD

int
efd_kernel_read(int fd, int nowait, uint64_t *value)
{
    ssize_t n;
    if (nowait) {
        struct iovec iov;
        iov.iov_base = value;
        iov.iov_len = sizeof(*value);
        n = preadv2(fd, &iov, 1, -1, RWF_NOWAIT);
    }
    else {
        /* No RWF_NOWAIT: look first, so that a descriptor someone made
         * blocking cannot put this read to sleep (a reader in another
         * process can still win the race in between: documented). */
        struct pollfd p;
        p.fd = fd;
        p.events = POLLIN;
        p.revents = 0;
        if (poll(&p, 1, 0) == 0)
            return EAGAIN;
        n = read(fd, value, sizeof(*value));
    }
    if (n == (ssize_t)sizeof(*value))
        return 0;
    return n < 0 ? errno : EIO;
}

/* A plain read(), for a descriptor whose O_NONBLOCK nobody else can have
 * cleared (efd_impl.desc_shared == 0). */
int
efd_kernel_read_plain(int fd, uint64_t *value)
{
    ssize_t n = read(fd, value, sizeof(*value));
    if (n == (ssize_t)sizeof(*value))
        return 0;
    return n < 0 ? errno : EIO;
}

int
efd_kernel_write(int fd, uint64_t value)
{
    ssize_t n;
    /* No RWF_NOWAIT for eventfd writes.  Someone sharing the description
     * may have cleared O_NONBLOCK, and then a write that does not fit would
     * sleep in the kernel, where neither a timeout nor close() reaches it.
     * A write of more than 1 makes sure the flag is set (one fcntl); a
     * write of 1 does not fit only into a counter at exactly 2**64 - 2,
     * and checking there would cost every release() a third more: write()
     * checks (efd_object.c), release(1) is the one case the docs leave
     * (the wait loop sets the flag again whenever it starts to wait). */
    if (value > 1) {
        int err = efd_ensure_nonblock(fd);
        if (err)
            return err;
    }
    n = write(fd, &value, sizeof(value));
    if (n == (ssize_t)sizeof(value))
        return 0;
    return n < 0 ? errno : EIO;
}

/* 1 if preadv2(RWF_NOWAIT) works on an eventfd here (asked once per
 * process by the module, on a scratch descriptor). */
int
efd_kernel_nowait_works(void)
{
    uint64_t v;
    struct iovec iov;
    int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), ok;
    if (fd < 0)
        return 0;
    iov.iov_base = &v;
    iov.iov_len = sizeof(v);
    ok = preadv2(fd, &iov, 1, -1, RWF_NOWAIT) < 0 && errno == EAGAIN;
    efd_close_fd(&fd);
    return ok;
}

/* Open a kernel eventfd holding `initval`, which may exceed the syscall's
 * 32-bit argument: the rest is written after creation.  `flags` are EFD_*;
 * EFD_NONBLOCK is always added. */
int
efd_kernel_open(uint64_t initval, int flags, int *out_fd)
{
    unsigned int first = initval <= UINT_MAX ? (unsigned int)initval : 0;
    int fd = eventfd(first, flags | EFD_NONBLOCK);
    if (fd < 0)
        return errno;
    if (first != initval) {
        int err = efd_kernel_write(fd, initval);
        if (err) {
            efd_close_fd(&fd);
            return err;
        }
    }
    *out_fd = fd;
    return 0;
}

/* Read /proc/self/fdinfo/FD.  Returns 0, or ENOENT/ENOTSUP when the kernel
 * does not say.  *semaphore is set to -1 when the kernel does not show it. */
int
efd_kernel_fdinfo(int fd, uint64_t *count, int *semaphore)
{
    char path[64], line[256];
    int found = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
    f = fopen(path, "re");
    if (f == NULL)
        return errno ? errno : ENOENT;
    if (semaphore)
        *semaphore = -1;
    while (fgets(line, sizeof(line), f)) {
        unsigned long long v;
        int s;
        if (sscanf(line, "eventfd-count: %llx", &v) == 1) {
            if (count)
                *count = v;
            found = 1;
        }
        else if (semaphore && sscanf(line, "eventfd-semaphore: %d", &s) == 1)
            *semaphore = s != 0;
    }
    fclose(f);
    return found ? 0 : ENOTSUP;
}

/* 1 if fd is an eventfd, 0 if it is something else, or a negative errno. */
int
efd_fd_is_eventfd(int fd)
{
    char path[64], target[64];
    ssize_t n;

    if (fcntl(fd, F_GETFD) < 0)
        return -errno;
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    n = readlink(path, target, sizeof(target) - 1);
    if (n < 0) {
        /* No /proc: fall back to asking fdinfo, which also needs /proc. */
        return -ENOTSUP;
    }
    target[n] = '\0';
    return strcmp(target, "anon_inode:[eventfd]") == 0;
}

static int
ev_open(efd_impl *impl, uint64_t initval, int semaphore, int cloexec)
{
    int flags = (cloexec ? EFD_CLOEXEC : 0) | (semaphore ? EFD_SEMAPHORE : 0);
    impl->semaphore = semaphore;
    return efd_kernel_open(initval, flags, &impl->fd);
}

/* Adopt an eventfd whose mode matches `semaphore` (checked by the caller). */
int
efd_ev_adopt(efd_impl *impl, const int *fds, int nfds, int semaphore)
{
    int fl;
    if (nfds != 1)
        return EINVAL;
    fl = fcntl(fds[0], F_GETFL);
    if (fl < 0)
        return errno;
    /* efd waits with poll(); the descriptor must never sleep in read(). */
    if (!(fl & O_NONBLOCK) && fcntl(fds[0], F_SETFL, fl | O_NONBLOCK) < 0)
        return errno;
    impl->fd = fds[0];
    impl->semaphore = semaphore;
    return 0;
}

static int
ev_try_read(efd_impl *impl, uint64_t *value)
{
    return efd_kernel_read(impl->fd, impl->nowait, value);
}

static int
ev_try_read_owned(efd_impl *impl, uint64_t *value)
{
    return efd_kernel_read_plain(impl->fd, value);
}

int
efd_ev_try_write(efd_impl *impl, uint64_t value)
{
    return efd_kernel_write(impl->fd, value);
}

void
efd_ev_waitspec(efd_impl *impl, int for_write, efd_waitspec *ws)
{
    ws->fd = impl->fd;
    ws->events = for_write ? POLLOUT : POLLIN;
    ws->slice_ms = 0;
}

int
efd_ev_peek(efd_impl *impl, uint64_t *value)
{
    return efd_kernel_fdinfo(impl->fd, value, NULL);
}

int
efd_ev_fds(efd_impl *impl, int *out, int max)
{
    if (max < 1)
        return 0;
    out[0] = impl->fd;
    return 1;
}

/* A write of 0 never sleeps (there is always room for nothing) and wakes
 * the counter's watchers: the next exclusive one of them (efd_herd.c). */
void
efd_ev_nudge(efd_impl *impl)
{
    (void)efd_kernel_write(impl->fd, 0);
}

void
efd_ev_close(efd_impl *impl)
{
    efd_close_fd(&impl->fd);
}

const efd_backend efd_backend_eventfd = {
    "eventfd", 1, ev_open, efd_ev_adopt, ev_try_read, efd_ev_try_write, NULL,
    efd_ev_waitspec, efd_ev_peek, NULL, NULL, NULL, NULL, NULL, NULL,
    efd_ev_nudge, efd_ev_fds, efd_ev_close, ev_try_read_owned, NULL,
    NULL, NULL,
};

#else  /* !EFD_HAVE_EVENTFD: keep the symbols so the module links. */

int efd_kernel_read(int fd, int nowait, uint64_t *value)
{ (void)fd; (void)nowait; (void)value; return ENOSYS; }
int efd_kernel_nowait_works(void) { return 0; }
int efd_kernel_write(int fd, uint64_t value) { (void)fd; (void)value; return ENOSYS; }
int efd_kernel_open(uint64_t initval, int flags, int *out_fd)
{ (void)initval; (void)flags; (void)out_fd; return ENOSYS; }
int efd_kernel_fdinfo(int fd, uint64_t *count, int *semaphore)
{ (void)fd; (void)count; (void)semaphore; return ENOSYS; }
int efd_fd_is_eventfd(int fd)
{
    return fcntl(fd, F_GETFD) < 0 ? -errno : 0;   /* valid, not an eventfd */
}

const efd_backend efd_backend_eventfd = { "eventfd", 1, NULL, NULL, NULL, NULL,
                                          NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                          NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                          NULL, NULL };

#endif /* EFD_HAVE_EVENTFD */
