/*
 * efd_futex.c -- the count in shared memory, waits on a process-shared
 * futex, and a readiness descriptor kept in step only once someone asks
 * for it.
 *
 * The mapping (a memfd, inherited and passed like the pipe backend's)
 * holds the count and a futex word, `seq`.  While nobody sleeps and nobody
 * has asked for fileno(), a release or an acquire is one compare-and-swap
 * on the count and nothing else: no system call.
 *
 * Sleeping.  A sleeper takes a ticket (seq), counts itself in `sleepers`
 * (`watchers` for Event.wait, which consumes nothing), looks at the count
 * once more, and FUTEX_WAITs on seq with that ticket.  A release adds to
 * the count and then looks at the two counters; if anyone sleeps it bumps
 * seq and FUTEX_WAKEs: as many sleepers as units in semaphore mode, one in
 * counter mode (a read takes everything), every watcher.  Both sides use
 * sequentially consistent atomics, so either the sleeper sees the units or
 * the releaser sees the sleeper: no lost wake-up.  A sleeper that leaves
 * without taking anything (timeout, close, signal) passes a wake-up it may
 * have been chosen for on (interrupt(impl, 0)).
 *
 * Readiness ("armed").  The object owns a channel (an eventfd, or a pipe
 * where eventfd is refused) that fileno() returns.  Until somebody calls
 * fileno() -- directly, or by waiting in an event loop -- nobody keeps it
 * in step, and a crossing of zero costs nothing.  The first fileno() arms
 * the shared page, so that every process sharing the object keeps the
 * channel in step from then on: that is the shared count of efd_shm.c,
 * whose protocol the pipe backend uses from the start.
 *
 * Process death.  A count change is one atomic operation; readiness after
 * a death is repaired as efd_shm.c says.  A sleeper that a release chose
 * and that then died would leave the unit unclaimed while others sleep, so
 * sleepers never sleep longer than EFD_RECHECK_MS before looking again.  A
 * sleeper killed in its sleep leaves its count behind; the first release
 * whose FUTEX_WAKE then finds nobody asleep clears it (see the epochs
 * below), so afterwards releases make no system call again.
 */
#include "efd.h"
#include "efd_explore.h"

#include <errno.h>
#include <limits.h>
#include <time.h>
#include <unistd.h>

#if defined(__linux__)
#  include <linux/futex.h>
#  include <sys/syscall.h>
#endif

#if defined(__linux__) && defined(SYS_futex)

#define EFD_FUTEX_MAGIC 0x65667803u   /* "ef", futex, layout 3 (efd_shm.c) */

static long
futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *ts)
{
    /* Not FUTEX_PRIVATE_FLAG: the word is shared between processes. */
#ifdef EFD_EXPLORE
    return efd_explore_futex(word, op, val, ts);
#else
    return syscall(SYS_futex, (uint32_t *)word, op, val, ts, NULL, 0);
#endif
}

int
efd_futex_probe(void)
{
    _Atomic uint32_t word = 0;
    return futex(&word, FUTEX_WAKE, 1, NULL) < 0 ? errno : 0;
}

/* Sleeper counts.  The low 32 bits count the sleepers, the high 32 bits
 * are an epoch.  A sleeper killed in its sleep cannot take itself off the
 * count; a waker whose FUTEX_WAKE found nobody asleep therefore starts a
 * new epoch with a count of 0 (if the word has not changed meanwhile), and
 * a sleeper leaving takes itself off only if its epoch is still current.
 * A live sleeper that counted itself but was not yet asleep when that
 * happened cannot sleep through it: the waker changed `seq` first, so its
 * FUTEX_WAIT returns at once, and it looks at the count again. */
static inline uint32_t
sleeping(uint64_t word)
{
    return (uint32_t)word;
}

static uint32_t
sleep_enter(_Atomic uint64_t *who)
{
    uint32_t epoch = (uint32_t)(atomic_fetch_add(who, 1) >> 32);
    EFD_POINT("sleep_enter: counted");
    return epoch;
}

static void
sleep_leave(_Atomic uint64_t *who, uint32_t epoch)
{
    uint64_t w = atomic_load(who);
    EFD_POINT("sleep_leave: read");
    while ((uint32_t)(w >> 32) == epoch && sleeping(w) > 0
           && !atomic_compare_exchange_weak(who, &w, w - 1))
        ;
    EFD_POINT("sleep_leave: done");
}

/* Wake up to n sleepers of `who` (seen as `word`); forget the counted ones
 * if none was actually asleep (they died in their sleep). */
static void
wake(struct efd_count *c, _Atomic uint64_t *who, uint64_t word, int n)
{
    long woken;
    atomic_fetch_add(&c->seq, 1);
    EFD_POINT("wake: seq++");
    woken = futex(&c->seq, FUTEX_WAKE, (uint32_t)n, NULL);
    EFD_POINT("wake: woken");
    if (woken == 0) {
        uint64_t fresh = ((word >> 32) + 1) << 32;
        (void)atomic_compare_exchange_strong(who, &word, fresh);
        EFD_POINT("wake: reset");
    }
}

static int
fx_try_write_limit(efd_impl *impl, uint64_t value, uint64_t limit)
{
    struct efd_count *c = impl->cnt;
    uint64_t w;
    int err = efd_count_try_write_limit(impl, value, limit);
    if (err || value == 0)
        return err;
    EFD_POINT("fx_write: added");
    /* After the count (sequentially consistent): a sleeper that counted
     * itself before our add is seen here; one that counts itself after it
     * sees the units. */
    w = atomic_load(&c->watchers);
    EFD_POINT("fx_write: watchers read");
    if (sleeping(w) > 0)
        wake(c, &c->watchers, w, INT_MAX);
    else if (sleeping(w = atomic_load(&c->sleepers)) > 0
             && (EFD_POINT("fx_write: sleepers read"), 1))
        wake(c, &c->sleepers, w, !impl->semaphore ? 1
             : value < INT_MAX ? (int)value : INT_MAX);
    return 0;
}

static int
fx_try_write(efd_impl *impl, uint64_t value)
{
    return fx_try_write_limit(impl, value, EFD_MAX);
}

static void
fx_waitspec(efd_impl *impl, int for_write, efd_waitspec *ws)
{
    ws->fd = for_write ? -1 : impl->fd;
    ws->events = for_write ? 0 : POLLIN;
    ws->slice_ms = for_write ? 5 : EFD_RECHECK_MS;
}

static uint32_t
fx_ticket(efd_impl *impl)
{
    uint32_t t = atomic_load(&impl->cnt->seq);
    EFD_POINT("ticket");
    return t;
}

static int
fx_block(efd_impl *impl, int kind, uint32_t ticket, int ms)
{
    struct efd_count *c = impl->cnt;
    _Atomic uint64_t *who = NULL;
    uint32_t epoch = 0;
    struct timespec ts;
    int err = 0;

    if (kind == EFD_BLOCK_WRITE) {
        /* Nothing signals "room for n more": look again every 5 ms. */
        if (ms < 0 || ms > 5)
            ms = 5;
    }
    else {
        if (ms < 0 || ms > EFD_RECHECK_MS)
            ms = EFD_RECHECK_MS;
        who = kind == EFD_BLOCK_READY ? &c->watchers : &c->sleepers;
        epoch = sleep_enter(who);
        if (atomic_load(&c->count) > 0) {
            sleep_leave(who, epoch);
            return 0;
        }
        EFD_POINT("block: count 0");
    }
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    if (futex(&c->seq, FUTEX_WAIT, ticket, &ts) < 0 && errno != EAGAIN)
        err = errno;
    EFD_POINT("block: back");
    if (who != NULL)
        sleep_leave(who, epoch);
    return err;
}

static void
fx_interrupt(efd_impl *impl, int all)
{
    struct efd_count *c = impl->cnt;
    uint64_t w;
    if (all) {
        atomic_fetch_add(&c->seq, 1);
        (void)futex(&c->seq, FUTEX_WAKE, INT_MAX, NULL);
    }
    else if (atomic_load(&c->count) > 0) {
        if (sleeping(w = atomic_load(&c->watchers)) > 0)
            wake(c, &c->watchers, w, INT_MAX);
        else if (sleeping(w = atomic_load(&c->sleepers)) > 0)
            wake(c, &c->sleepers, w, 1);
    }
}

static int
fx_open(efd_impl *impl, uint64_t initval, int semaphore, int cloexec)
{
    /* A sandbox may refuse futex(): find out now, not in a wait. */
    int err = efd_futex_probe();
    if (err)
        return err;
    return efd_count_open(impl, initval, semaphore, cloexec, EFD_FUTEX_MAGIC,
                          0, 0);
}

static int
fx_adopt(efd_impl *impl, const int *fds, int nfds, int semaphore)
{
    return efd_count_adopt(impl, fds, nfds, semaphore, EFD_FUTEX_MAGIC);
}

const efd_backend efd_backend_futex = {
    "futex", 0, fx_open, fx_adopt, efd_count_try_read, fx_try_write,
    fx_try_write_limit, fx_waitspec, efd_count_peek, efd_count_repair, NULL, efd_count_arm,
    fx_ticket, fx_block, fx_interrupt, NULL, efd_count_fds, efd_count_close,
};

#else  /* no futex here */

int
efd_futex_probe(void)
{
    return ENOSYS;
}

const efd_backend efd_backend_futex = {
    "futex", 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL, NULL, NULL, NULL, NULL,
};

#endif
