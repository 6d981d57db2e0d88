/*
 * efd_pipe.c -- the emulation for systems without eventfd.
 *
 * The count lives in a page of shared memory, so that it is one object for
 * every process holding the descriptors, and a pipe carries readiness: it
 * holds one byte (the token) while the count is above zero, so its read end
 * -- what fileno() returns -- polls readable then.  Both are the shared
 * count of efd_shm.c, armed from the start: see there for the protocol
 * (lock-free count, a token brought in step by whoever crosses zero, a
 * lock nobody waits for, taken over from a dead holder) and for what a
 * process death can cost.
 *
 * Only POSIX interfaces are used: pipe, poll, mmap, shm_open (or Linux's
 * memfd_create where present), atomics, and kill() to ask whether a lock's
 * holder lives (on Linux: the holder's open-file-description lock, or
 * tgkill()).  Waiters poll the read end, and look at the count every
 * EFD_RECHECK_MS besides, since a token may go missing with a process that
 * died between changing the count and moving it.
 */
#include "efd.h"

#include <errno.h>
#include <sys/stat.h>

#define EFD_PIPE_MAGIC 0x65667008u      /* "ef", pipe, layout 8 (efd.h) */

static int
pipe_open(efd_impl *impl, uint64_t initval, int semaphore, int cloexec)
{
    /* A pipe, never an eventfd: this backend is for systems without one. */
    return efd_count_open(impl, initval, semaphore, cloexec, EFD_PIPE_MAGIC,
                          0, 1);
}

static int
pipe_adopt(efd_impl *impl, const int *fds, int nfds, int semaphore)
{
    struct stat st;
    int i;
    if (nfds != 3)
        return EINVAL;
    /* The channel is a pipe's two ends.  A closed descriptor is fstat's own
     * error (EBADF); one that is open but no FIFO is EINVAL, never errno,
     * which a successful fstat() leaves as whatever it was before. */
    for (i = 1; i < 3; i++) {
        if (fstat(fds[i], &st) < 0)
            return errno;
        if (!S_ISFIFO(st.st_mode))
            return EINVAL;
    }
    return efd_count_adopt(impl, fds, nfds, semaphore, EFD_PIPE_MAGIC);
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
         * count itself every EFD_RECHECK_MS as well. */
        ws->fd = impl->fd;
        ws->events = POLLIN;
        ws->slice_ms = EFD_RECHECK_MS;
    }
}

const efd_backend efd_backend_pipe = {
    "pipe", 0, pipe_open, pipe_adopt, efd_count_try_read, efd_count_try_write,
    efd_count_try_write_limit, pipe_waitspec, efd_count_peek, efd_count_repair, NULL, NULL, NULL, NULL,
    NULL, NULL, efd_count_fds, efd_count_close, NULL, NULL,
    efd_books_try_read, efd_books_settle,
};
