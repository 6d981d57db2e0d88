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
 *
 * Where futexes are.  That is the way of systems without Linux's
 * facilities.  On Linux -- where this backend is chosen when a sandbox
 * refuses eventfd, or asked for -- its waiters sleep as the futex
 * backend's do instead (efd_backend_pipe_futex, efd_futex.c): one woken
 * per unit, none on a timer, the kernel telling them of a death that owed
 * them a wake-up (the death bell) or held units (the holders' watcher).
 * Polling the pipe, every waiting process woke for each unit (2,768
 * waiter runs per hand-off among 1,000 processes), and one per process
 * looked ten times a second.  Such a page has a magic of its own: a
 * process that would poll the pipe (a build without Linux's facilities)
 * cannot adopt it, and so cannot release without waking its sleepers.
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

int
efd_pipe_check_fds(const int *fds, int nfds)
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
    return 0;
}

static int
pipe_adopt(efd_impl *impl, const int *fds, int nfds, int semaphore)
{
    int err = efd_pipe_check_fds(fds, nfds);
    if (err != 0)
        return err;
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

/* Where futexes are (Linux, with its facilities built in), the pipe
 * backend sleeps as the futex backend does, its pipe kept in step from the
 * start (efd_futex.c, efd_backend_pipe_futex); the POSIX way above is for
 * the systems without them (and the build that stands for them,
 * EFD_NO_EVENTFD). */
const efd_backend *
efd_pipe_backend(void)
{
#ifdef EFD_HAVE_EVENTFD
    if (efd_backend_pipe_futex.open != NULL && efd_futex_probe() == 0)
        return &efd_backend_pipe_futex;
#endif
    return &efd_backend_pipe;
}

const efd_backend efd_backend_pipe = {
    "pipe", 0, pipe_open, pipe_adopt, efd_count_try_read, efd_count_try_write,
    efd_count_try_write_limit, pipe_waitspec, efd_count_peek, efd_count_repair, NULL, NULL, NULL, NULL,
    NULL, NULL, efd_count_fds, efd_count_close, NULL, NULL,
    efd_books_try_read, efd_books_settle,
};
