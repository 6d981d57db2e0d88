/*
 * efd_futex.c -- the count in shared memory, waits on process-shared
 * futexes, and a readiness descriptor kept in step only once someone asks
 * for it.
 *
 * The mapping (a memfd, inherited and passed like the pipe backend's)
 * holds the count and two futex words: `seq`, which readers (acquire) wait
 * on, and `wseq`, which watchers (Event.wait and other readiness waits,
 * which consume nothing) and blocked writers wait on.  While nobody sleeps
 * and nobody has asked for fileno(), a release or an acquire is one
 * compare-and-swap on the count and nothing else: no system call.
 *
 * Sleeping.  A sleeper takes a ticket (its word's value), counts itself in
 * `sleepers` (readers) or `watchers`, looks at the count once more, and
 * FUTEX_WAITs on its word with that ticket.  A release adds to the count
 * and then looks at the two counters: if watchers sleep, it bumps `wseq`
 * and wakes them all; if readers sleep, it bumps `seq` and wakes as many as
 * it added units in semaphore mode, one in counter mode (a read takes
 * everything).  Both sides use sequentially consistent atomics, so either
 * the sleeper sees the units or the releaser sees the sleeper: no lost
 * wake-up.  Readers and watchers wait on different words so that a
 * FUTEX_WAKE(n) meant for readers can only reach readers: a watcher woken
 * in a reader's place would consume nothing and pass nothing on (issue 17,
 * row 4).  A reader that leaves without taking anything (timeout, close,
 * signal) passes a wake-up it may have been chosen for on (interrupt(impl,
 * 0)).
 *
 * Readiness ("armed").  The object owns a channel -- a pipe, so that
 * from_fd() in any process can tell it from a user's eventfd and refuse
 * half an object -- that fileno() returns.
 * Until somebody calls fileno() -- directly, or by waiting in an event
 * loop -- nobody keeps it in step, and a crossing of zero costs nothing.
 * The first fileno() arms the shared page, so that every process sharing
 * the object keeps the channel in step from then on: that is the shared
 * count of efd_shm.c, whose protocol the pipe backend uses from the start.
 *
 * Process death.  A count change is one atomic operation; readiness after
 * a death is repaired as efd_shm.c says.  A sleeper that a release chose
 * and that then died would leave the unit unclaimed while others sleep, so
 * sleepers never sleep longer than EFD_RECHECK_MS before looking again.  A
 * sleeper killed in its sleep leaves its count behind; the first release
 * whose FUTEX_WAKE then finds nobody asleep on that word clears it (see
 * the epochs below), so afterwards releases make no system call again.
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

#define EFD_FUTEX_MAGIC 0x65667805u   /* "ef", futex, layout 5 (efd.h) */

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

/* Sleeper counts.  One 64-bit word per kind of sleeper:
 *
 *   bits 44..63  epoch    bumped when a waker forgets the counted sleepers
 *   bits 24..43  version  bumped by every sleeper that counts itself in
 *   bits  0..23  count    sleepers counted in this epoch
 *
 * A sleeper killed in its sleep cannot take itself off the count.  So a
 * waker whose FUTEX_WAKE found nobody asleep on the word forgets the
 * counted ones -- the dead, and the live that counted themselves but were
 * not asleep yet -- by starting a new epoch with a count of 0, provided
 * that the word is still the one it read before it woke anybody.  A
 * sleeper leaving takes itself off only if its epoch is still current.
 *
 * Why that is safe, step by step.  The waker W:
 *   W1  CAS on count (the units)
 *   W2  w = load(sleepers)               count(w) > 0, so:
 *   W3  fetch_add(word, 1)               (seq or wseq)
 *   W4  FUTEX_WAKE(word, n) -> woken
 *   W5  woken == 0: CAS(sleepers, w, epoch(w) + 1 | version(w) | 0)
 * The sleeper S:
 *   S1  t = load(word)                   (the ticket)
 *   S2  look at the count and the stop conditions
 *   S3  fetch_add-like CAS: count + 1, version + 1 (its epoch e)
 *   S4  load count: > 0 -> leave (S6)
 *   S5  FUTEX_WAIT(word, t)
 *   S6  CAS: count - 1, if the epoch is still e and the count > 0
 * If W5 succeeds, the word is exactly w: nobody counted themselves in after
 * W2 (each S3 changes the version) and nobody left (each S6 changes the
 * count).  So the sleepers W5 forgets are those counted at W2; none of them
 * was asleep at W4.  A live one among them did its S1 before its S3, so
 * before W2 < W3: its ticket is stale, its S5 returns at once, its S6 sees
 * the new epoch and leaves the count alone, and it looks at the count
 * again before sleeping anew -- counted again in the new epoch.  A sleeper
 * that counted itself after W2 changed the version, and W5 fails.
 * The old code had no version: one sleeper leaving (S6) and another
 * counting itself in (S3) between W2 and W5 gave back the very word that
 * W2 read, and W5 forgot the newcomer, who slept for real with a stale
 * count of 0 -- the next release saw no sleeper and woke nobody (issue
 * 17, row 3).  The version and the epoch are 20 bits: the same word comes
 * back only after 2**20 sleepers count themselves in within one W2..W5, or
 * 2**20 forgettings within one sleeper's S3..S6 -- each of those windows
 * is a few instructions and one system call long. */
#define SL_COUNT_MASK UINT64_C(0xffffff)
#define SL_VERSION_ONE (UINT64_C(1) << 24)
#define SL_VERSION_MASK (UINT64_C(0xfffff) << 24)
#define SL_EPOCH_SHIFT 44

static inline uint32_t
sleeping(uint64_t word)
{
    return (uint32_t)(word & SL_COUNT_MASK);
}

static inline uint32_t
epoch_of(uint64_t word)
{
    return (uint32_t)(word >> SL_EPOCH_SHIFT);
}

/* S3: count this sleeper in; returns its epoch. */
static uint32_t
sleep_enter(_Atomic uint64_t *who)
{
    uint64_t w = atomic_load(who), next;
    do {
        next = (w & ~(SL_VERSION_MASK | SL_COUNT_MASK))
               | ((w + SL_VERSION_ONE) & SL_VERSION_MASK)
               | ((w + 1) & SL_COUNT_MASK);
    } while (!atomic_compare_exchange_weak(who, &w, next));
    EFD_POINT("sleep_enter: counted");
    return epoch_of(next);
}

/* S6: take this sleeper off, if its epoch is still the current one. */
static void
sleep_leave(_Atomic uint64_t *who, uint32_t epoch)
{
    uint64_t w = atomic_load(who);
    EFD_POINT("sleep_leave: read");
    while (epoch_of(w) == epoch && sleeping(w) > 0
           && !atomic_compare_exchange_weak(who, &w, w - 1))
        ;
    EFD_POINT("sleep_leave: done");
}

/* W3..W5: wake up to n sleepers of `who` (seen as `word` at W2), waiting
 * on `fword`; forget the counted ones if none was actually asleep. */
static void
wake(_Atomic uint32_t *fword, _Atomic uint64_t *who, uint64_t word, int n)
{
    long woken;
    atomic_fetch_add(fword, 1);                                 /* W3 */
    EFD_POINT("wake: word bumped");
    woken = futex(fword, FUTEX_WAKE, (uint32_t)n, NULL);        /* W4 */
    EFD_POINT("wake: woken");
    if (woken == 0) {                                           /* W5 */
        uint64_t fresh = ((uint64_t)(epoch_of(word) + 1) << SL_EPOCH_SHIFT)
                         | (word & SL_VERSION_MASK);
        (void)atomic_compare_exchange_strong(who, &word, fresh);
        EFD_POINT("wake: forgotten");
    }
}

/* W2..: after `value` units were added (W1), wake the watchers (all of
 * them: they consume nothing) and up to `readers` readers. */
static void
wake_after_add(struct efd_count *c, int readers)
{
    uint64_t w = atomic_load(&c->watchers);                     /* W2 */
    EFD_POINT("release: watchers read");
    if (sleeping(w) > 0)
        wake(&c->wseq, &c->watchers, w, INT_MAX);
    w = atomic_load(&c->sleepers);                              /* W2 */
    EFD_POINT("release: sleepers read");
    if (sleeping(w) > 0)
        wake(&c->seq, &c->sleepers, w, readers);
}

static int
fx_try_write_limit(efd_impl *impl, uint64_t value, uint64_t limit)
{
    int err = efd_count_try_write_limit(impl, value, limit);   /* W1 */
    if (err || value == 0)
        return err;
    /* After the count (sequentially consistent): a sleeper that counted
     * itself before our add is seen here; one that counts itself after it
     * sees the units. */
    wake_after_add(impl->cnt, !impl->semaphore ? 1
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

/* The futex word a sleeper of `kind` waits on: readers have theirs;
 * watchers and writers share the other. */
static _Atomic uint32_t *
word_of(struct efd_count *c, int kind)
{
    return kind == EFD_BLOCK_READ ? &c->seq : &c->wseq;
}

static uint32_t
fx_ticket(efd_impl *impl, int kind)
{
    uint32_t t = atomic_load(word_of(impl->cnt, kind));         /* S1 */
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
        epoch = sleep_enter(who);                               /* S3 */
        if (atomic_load(&c->count) > 0) {                       /* S4 */
            sleep_leave(who, epoch);
            return 0;
        }
        EFD_POINT("block: count 0");
    }
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    if (futex(word_of(c, kind), FUTEX_WAIT, ticket, &ts) < 0    /* S5 */
            && errno != EAGAIN)
        err = errno;
    EFD_POINT("block: back");
    if (who != NULL)
        sleep_leave(who, epoch);                                /* S6 */
    return err;
}

static void
fx_interrupt(efd_impl *impl, int all)
{
    struct efd_count *c = impl->cnt;
    uint64_t w;
    if (all) {
        /* close(), Event.set(): everyone, on both words. */
        atomic_fetch_add(&c->wseq, 1);
        atomic_fetch_add(&c->seq, 1);
        (void)futex(&c->wseq, FUTEX_WAKE, INT_MAX, NULL);
        (void)futex(&c->seq, FUTEX_WAKE, INT_MAX, NULL);
    }
    else if (atomic_load(&c->count) > 0
             && sleeping(w = atomic_load(&c->sleepers)) > 0) {
        /* A reader leaves without taking: the wake-up it may have been
         * chosen for goes to the next reader (watchers were all woken by
         * the release itself). */
        EFD_POINT("pass on: sleepers read");
        wake(&c->seq, &c->sleepers, w, 1);
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
    NULL,
};

#else  /* no futex here */

int
efd_futex_probe(void)
{
    return ENOSYS;
}

const efd_backend efd_backend_futex = {
    "futex", 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL,
};

#endif

#ifdef EFD_EXPLORE
/* Test hook for the interleaving explorer (tests/explore/): how many
 * sleepers of `kind` (EFD_BLOCK_READ, EFD_BLOCK_READY) the shared page
 * counts now, whatever their epoch.  Not in release builds. */
int efd_explore_sleepers(efd_impl *impl, int kind);

int
efd_explore_sleepers(efd_impl *impl, int kind)
{
    struct efd_count *c = impl->cnt;
    if (c == NULL || kind == EFD_BLOCK_WRITE)
        return 0;
    return (int)(atomic_load(kind == EFD_BLOCK_READY ? &c->watchers
                                                     : &c->sleepers)
                 & UINT64_C(0xffffff));
}
#endif
