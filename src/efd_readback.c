/*
 * efd_readback.c -- semaphore semantics on a kernel without EFD_SEMAPHORE.
 *
 * The 2.6.30 commit that added EFD_SEMAPHORE (bcd0b235bf38) tells older
 * kernels' users how to get the same effect: read the whole counter c, keep
 * one, and write c - 1 back.  That is what this backend does, on a plain
 * (non-semaphore) eventfd.  Normal-mode reads are plain reads.  It is also
 * right on a semaphore-mode eventfd (a read there returns 1, and there is
 * nothing to write back), which is why from_fd() uses it when it cannot
 * tell which mode an inherited descriptor is in.
 *
 * The write-back must never lose a unit.  While a reader holds c - 1 units,
 * other writers may fill the counter; the write-back then fails with EAGAIN
 * (the sum would pass EFD_MAX), which the kernel's own semaphore mode would
 * have prevented by blocking those writers.  Waiting here for room could
 * wait forever (nobody may ever read again), so the units go into the
 * object's `held` count instead and the read returns at once.  Every later
 * operation on the object first tries to write them back ("flush"); a
 * semaphore read takes from them before it touches the kernel; peek()
 * counts them; close() gives them back (efd_object.c waits a bounded time
 * for room, without the GIL, and warns if it cannot).
 *
 * Held units belong to the process that took them: a fork child starts with
 * none, or parent and child would both give the same units back.
 *
 * What a death costs: a process killed between its read and its write-back
 * takes the c - 1 units it was about to give back with it (they were in its
 * hands), as well as any held units.
 */
#include "efd.h"

#include <errno.h>
#include <unistd.h>
#ifdef EFD_HAVE_EVENTFD
#  include <sys/eventfd.h>
#endif

#ifdef EFD_HAVE_EVENTFD

/* Forget held units copied from a parent by fork(): they are the parent's. */
static void
rb_own(efd_impl *impl)
{
    uint32_t me = *impl->proc;
    uint32_t was = atomic_load_explicit(&impl->held_proc, memory_order_acquire);
    if (was != me && atomic_compare_exchange_strong_explicit(
            &impl->held_proc, &was, me,
            memory_order_acq_rel, memory_order_acquire))
        atomic_store_explicit(&impl->held, 0, memory_order_release);
}

/* Write the held units back if they fit now. */
static void
rb_flush(efd_impl *impl)
{
    uint64_t h;
    rb_own(impl);
    h = atomic_load_explicit(&impl->held, memory_order_acquire);
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
    atomic_store(&impl->held_proc, *impl->proc);
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
    err = efd_kernel_read(impl->fd, impl->nowait, &c);
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
    uint64_t h;
    rb_own(impl);
    h = atomic_load_explicit(&impl->held, memory_order_acquire);
    if (err == 0)
        *value = (h > UINT64_MAX - *value) ? UINT64_MAX : *value + h;
    return err;
}

static uint64_t
rb_pending(efd_impl *impl)
{
    rb_flush(impl);
    return atomic_load_explicit(&impl->held, memory_order_acquire);
}

static int
rb_adopt(efd_impl *impl, const int *fds, int nfds, int semaphore)
{
    atomic_store(&impl->held, 0);
    atomic_store(&impl->held_proc, *impl->proc);
    return efd_ev_adopt(impl, fds, nfds, semaphore);
}

const efd_backend efd_backend_readback = {
    "eventfd-readback", 1, rb_open, rb_adopt, rb_try_read, rb_try_write, NULL,
    efd_ev_waitspec, rb_peek, NULL, rb_pending, NULL, NULL, NULL, NULL,
    efd_ev_nudge, efd_ev_fds, efd_ev_close, NULL, NULL, NULL, NULL,
};

#else

const efd_backend efd_backend_readback = {
    "eventfd-readback", 1, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL,
};

#endif
