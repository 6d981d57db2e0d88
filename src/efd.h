/*
 * efd.h -- the small internal interface between the Python type and its
 * backends.
 *
 * A backend is a table of plain C functions that never touch Python objects
 * and may be called with or without the GIL.  Each returns 0 on success or a
 * positive errno value; EAGAIN means "not now, wait for readiness".  The
 * Python layer (efd_object.c) owns argument checking, the closed state and the
 * single wait loop (efd_wait.c) that every blocking call goes through.
 */
#ifndef EFD_H
#define EFD_H

#include <stdint.h>
#include <poll.h>
#include <stdatomic.h>

#ifndef EFD_NO_EVENTFD
#  if defined(__linux__)
#    define EFD_HAVE_EVENTFD 1
#  endif
#endif

/* The largest value an eventfd counter can hold (SPEC §1). */
#define EFD_MAX UINT64_C(0xfffffffffffffffe)

typedef struct efd_shared efd_shared;     /* pipe backend's shared page */

/* What one EventFD holds, whatever the backend. */
typedef struct efd_impl {
    const struct efd_backend *ops;
    int fd;             /* readiness fd: the eventfd, or the pipe's read end */
    int wfd;            /* pipe backend: write end; otherwise -1 */
    int shmfd;          /* pipe backend: shared-memory fd; otherwise -1 */
    efd_shared *shm;    /* pipe backend: the mapping; otherwise NULL */
    int semaphore;      /* reads take 1 (semaphore) or everything */
    /* eventfd-readback: units a semaphore read took but could not write
     * back yet (the counter was full); see efd_readback.c. */
    _Atomic uint64_t held;
    /* This process's pid, kept current across fork() by the module (a
     * getpid() syscall per lock would double the pipe backend's cost). */
    const volatile uint32_t *pid;
} efd_impl;

/* How to wait for an operation to become possible. */
typedef struct efd_waitspec {
    int fd;             /* fd to poll */
    short events;       /* POLLIN or POLLOUT */
    int slice_ms;       /* > 0: no fd signals this; re-try every slice_ms */
} efd_waitspec;

typedef struct efd_backend {
    const char *name;
    /* 1 if every operation is a syscall (the kernel's counter); 0 if most
     * are not (the pipe backend's shared-memory fast paths). */
    int syscall_always;
    /* Create a fresh object holding `initval` (0 .. EFD_MAX). */
    int (*open)(efd_impl *impl, uint64_t initval, int semaphore, int cloexec);
    /* Adopt already-open descriptors (from_fd, unpickling in a child). */
    int (*adopt)(efd_impl *impl, const int *fds, int nfds, int semaphore);
    /* One non-blocking read: 1 in semaphore mode, everything otherwise. */
    int (*try_read)(efd_impl *impl, uint64_t *value);
    /* One non-blocking write of `value` (value <= EFD_MAX; 0 allowed). */
    int (*try_write)(efd_impl *impl, uint64_t value);
    /* Where to wait for a read (for_write == 0) or a write. */
    void (*waitspec)(efd_impl *impl, int for_write, efd_waitspec *ws);
    /* Current count without consuming it; ENOTSUP if unknown. */
    int (*peek)(efd_impl *impl, uint64_t *value);
    /* The descriptors that make up the object (for pickling); returns count. */
    int (*fds)(efd_impl *impl, int *out, int max);
    /* Release everything; leaves impl->fd == -1. */
    void (*close)(efd_impl *impl);
} efd_backend;

extern const efd_backend efd_backend_eventfd;
extern const efd_backend efd_backend_readback;
extern const efd_backend efd_backend_pipe;

/* Helpers shared by the eventfd-based backends (efd_eventfd.c). */
int efd_kernel_open(uint64_t initval, int flags, int *out_fd);
int efd_kernel_read(int fd, uint64_t *value);
int efd_kernel_write(int fd, uint64_t value);
int efd_kernel_fdinfo(int fd, uint64_t *count, int *semaphore);
int efd_fd_is_eventfd(int fd);

/* The native backend's operations, reused by eventfd-readback. */
int efd_ev_adopt(efd_impl *impl, const int *fds, int nfds, int semaphore);
int efd_ev_try_write(efd_impl *impl, uint64_t value);
void efd_ev_waitspec(efd_impl *impl, int for_write, efd_waitspec *ws);
int efd_ev_peek(efd_impl *impl, uint64_t *value);
int efd_ev_fds(efd_impl *impl, int *out, int max);
void efd_ev_close(efd_impl *impl);

/* Close an fd, retrying nothing (POSIX leaves the fd closed on EINTR). */
void efd_close_fd(int *fd);

#endif /* EFD_H */
