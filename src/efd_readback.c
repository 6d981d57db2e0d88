/*
 * efd_readback.c -- semaphore semantics on a kernel without EFD_SEMAPHORE.
 *
 * The 2.6.30 commit that added EFD_SEMAPHORE (bcd0b235bf38) tells older
 * kernels' users how to get the same effect: read the whole counter c, keep
 * one, and write c - 1 back.  That is what this backend does, on a plain
 * (non-semaphore) eventfd.  Normal-mode reads are plain reads.
 *
 * The write-back must never lose a unit.  While a reader holds c - 1 units,
 * other writers may fill the counter; the write-back then fails with EAGAIN
 * (the sum would pass EFD_MAX), which the kernel's own semaphore mode would
 * have prevented by blocking those writers.  Waiting here for room could
 * wait forever (nobody may ever read again), so the units go into the
 * object's `held` count instead and the read returns at once.  Every later
 * operation on the object first tries to write them back ("flush"); a
 * semaphore read takes from them before it touches the kernel; peek()
 * counts them; close() flushes them, waiting a bounded time for room.
 * While the counter is that full it polls readable, so waiters in this
 * process still wake and take the held units.
 */
#include "efd.h"

#include <errno.h>
#include <unistd.h>
#ifdef EFD_HAVE_EVENTFD
#  include <sys/eventfd.h>
#endif

#ifdef EFD_HAVE_EVENTFD

/* Write the held units back if they fit now. */
static void
rb_flush(efd_impl *impl)
{
    uint64_t h = atomic_load_explicit(&impl->held, memory_order_acquire);
    if (h == 0)
        return;
    h = atomic_exchange_explicit(&impl->held, 0, memory_order_acq_rel);
    if (h != 0 && efd_kernel_write(impl->fd, h) != 0)
        atomic_fetch_add_explicit(&impl->held, h, memory_order_acq_rel);
}

static int
rb_open(efd_impl *impl, uint64_t initval, int semaphore, int cloexec)
{
    impl->semaphore = semaphore;
    atomic_store(&impl->held, 0);
    /* The whole point: never ask the kernel for EFD_SEMAPHORE. */
    return efd_kernel_open(initval, cloexec ? EFD_CLOEXEC : 0, &impl->fd);
}

static int
rb_try_read(efd_impl *impl, uint64_t *value)
{
    uint64_t c, h;
    int err;

    rb_flush(impl);
    if (impl->semaphore) {
        /* Units this object could not write back are taken first. */
        h = atomic_load_explicit(&impl->held, memory_order_acquire);
        while (h > 0) {
            if (atomic_compare_exchange_weak_explicit(
                    &impl->held, &h, h - 1,
                    memory_order_acq_rel, memory_order_acquire)) {
                *value = 1;
                return 0;
            }
        }
    }
    err = efd_kernel_read(impl->fd, &c);
    if (err)
        return err;
    if (!impl->semaphore || c == 1) {
        *value = c;
        return 0;
    }
    *value = 1;
    if (efd_kernel_write(impl->fd, c - 1) != 0)
        atomic_fetch_add_explicit(&impl->held, c - 1, memory_order_acq_rel);
    return 0;
}

static int
rb_try_write(efd_impl *impl, uint64_t value)
{
    rb_flush(impl);
    return efd_kernel_write(impl->fd, value);
}

static int
rb_peek(efd_impl *impl, uint64_t *value)
{
    int err = efd_ev_peek(impl, value);
    uint64_t h = atomic_load_explicit(&impl->held, memory_order_acquire);
    if (err == 0)
        *value = (h > UINT64_MAX - *value) ? UINT64_MAX : *value + h;
    return err;
}

static int
rb_adopt(efd_impl *impl, const int *fds, int nfds, int semaphore)
{
    atomic_store(&impl->held, 0);
    return efd_ev_adopt(impl, fds, nfds, semaphore);
}

/* Give the held units back before the descriptor goes: wait for room for
 * up to a second (readers elsewhere make room).  Only a counter kept above
 * 2**64 - 2 - held for all that time, by writers the kernel's semaphore
 * mode would have blocked, can make this give up. */
static void
rb_close(efd_impl *impl)
{
    int tries;
    for (tries = 0; tries < 1000; tries++) {
        rb_flush(impl);
        if (atomic_load(&impl->held) == 0)
            break;
        (void)poll(NULL, 0, 1);
    }
    efd_ev_close(impl);
}

const efd_backend efd_backend_readback = {
    "eventfd-readback", 1, rb_open, rb_adopt, rb_try_read, rb_try_write,
    efd_ev_waitspec, rb_peek, efd_ev_fds, rb_close,
};

#else

const efd_backend efd_backend_readback = {
    "eventfd-readback", 1, NULL, NULL, NULL, NULL,
    NULL, NULL, NULL, NULL,
};

#endif
