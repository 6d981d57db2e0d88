/*
 * efd_readback.c -- semaphore semantics on a kernel without EFD_SEMAPHORE.
 *
 * The 2.6.30 commit that added EFD_SEMAPHORE (bcd0b235bf38) tells older
 * kernels' users how to get the same effect: read the whole counter c, keep
 * one, and write c - 1 back.  That is what this backend does, on a plain
 * (non-semaphore) eventfd.  Normal-mode reads are plain reads.
 *
 * The write-back must never lose a unit.  While this reader holds c - 1
 * units, other writers may fill the counter, so writing them back can fail
 * with EAGAIN (the sum would pass EFD_MAX).  try_read then returns
 * EINPROGRESS with the held count in *value: the caller has its unit, and
 * calls finish() without the GIL with that count, which waits for room and
 * writes the units back.  The count lives on the caller's stack, never in
 * the object, so threads sharing an object cannot overwrite each other's.
 * finish() cannot be interrupted: the units belong to everyone.
 */
#include "efd.h"

#include <errno.h>
#include <unistd.h>
#ifdef EFD_HAVE_EVENTFD
#  include <sys/eventfd.h>
#endif

#ifdef EFD_HAVE_EVENTFD

static int
rb_open(efd_impl *impl, uint64_t initval, int semaphore, int cloexec)
{
    impl->semaphore = semaphore;
    /* The whole point: never ask the kernel for EFD_SEMAPHORE. */
    return efd_kernel_open(initval, cloexec ? EFD_CLOEXEC : 0, &impl->fd);
}

static int
rb_try_read(efd_impl *impl, uint64_t *value)
{
    uint64_t c;
    int err = efd_kernel_read(impl->fd, &c);
    if (err)
        return err;
    if (!impl->semaphore || c == 1) {
        *value = c;
        return 0;
    }
    err = efd_kernel_write(impl->fd, c - 1);
    if (err == 0) {
        *value = 1;
        return 0;
    }
    /* No room (EAGAIN), or worse: the caller keeps them and finishes. */
    *value = c - 1;
    return EINPROGRESS;
}

/* Write `held` units back, however long it takes for room to appear.
 * This only waits when the counter plus what we hold passes EFD_MAX, that
 * is, when every unit in the system cannot be stored at once; the units
 * then stay in our hands until readers make room, exactly as a blocked
 * writer's would.  POLLOUT cannot say "room for n", so sleep in slices. */
static void
rb_finish(efd_impl *impl, uint64_t held)
{
    while (held > 0) {
        int err = efd_kernel_write(impl->fd, held);
        if (err != EAGAIN)
            break;      /* written; or the descriptor itself is gone */
        (void)poll(NULL, 0, 1);
    }
}

static int
rb_adopt(efd_impl *impl, const int *fds, int nfds, int semaphore)
{
    return efd_ev_adopt(impl, fds, nfds, semaphore);
}

const efd_backend efd_backend_readback = {
    "eventfd-readback", 1, rb_open, rb_adopt, rb_try_read, efd_ev_try_write,
    rb_finish, efd_ev_waitspec, efd_ev_peek, efd_ev_fds, efd_ev_close,
};

#else

const efd_backend efd_backend_readback = {
    "eventfd-readback", 1, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL, NULL, NULL,
};

#endif
