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
 * a death is repaired as efd_shm.c says.  Two deaths would leave units
 * unclaimed while others sleep: a releaser killed between its add and its
 * FUTEX_WAKE, and a sleeper that a release chose (woke) killed before it
 * took the unit or passed the wake-up on.  The kernel tells the sleepers
 * of both, through the death bell (below), so they sleep without a time
 * limit; where the bell does not work, they look again every
 * EFD_RECHECK_MS instead.  A sleeper killed in its sleep leaves its count
 * behind; the first release whose FUTEX_WAKE then finds nobody asleep on
 * that word clears it (see the epochs below), so afterwards releases make
 * no system call again.
 */
#include "efd.h"

#include <stdlib.h>
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

#define EFD_FUTEX_MAGIC 0x65667808u   /* "ef", futex, layout 8 (efd.h) */
#define EFD_PIPE_FUTEX_MAGIC 0x65665008u  /* "ef", pipe on futexes, layout 8 */

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

/* ---- the death bell ----------------------------------------------------
 *
 * What the kernel does for glibc's robust mutexes, used for a semaphore.
 * Each thread has a robust list (set_robust_list: glibc registers one for
 * every thread), whose head has a `list_op_pending` slot: the lock
 * operation the thread is in the middle of.  When a thread dies -- killed
 * with its process, or exiting -- the kernel looks at that slot, and if
 * the futex word it names has no owner (its thread-id bits are 0), it
 * wakes one waiter on that word (Linux 5.x handle_futex_death(): "the
 * unlock path ... is killed before it can execute the futex() syscall to
 * wake up waiters", and "a woken up waiter is killed before it can
 * acquire"): exactly this backend's two deaths.
 *
 * So the page has a word that stays 0, the bell.  A releaser points its
 * thread's pending slot at it for as long as it may owe a wake-up (from
 * before its add, W1, to after its FUTEX_WAKE, W4), and restores the slot
 * after; a sleeper from before its sleep until its wait is over (it took,
 * or passed on: fx_unblock), since a wake-up may come to it at any time.
 * Sleepers wait on their word and the bell together (futex_waitv, Linux
 * 5.16).  The one sleeper the kernel wakes on the bell cannot know whom
 * the dead owed what, so it wakes everyone (interrupt(impl, 1)): each
 * looks at the count again.  A death costs one such round; a sleeper
 * killed while owing nothing rings too, harmlessly.
 *
 * Why nothing is missed.  The slot is armed, in program order, before the
 * step that creates the debt (the add; the sleep) and disarmed after the
 * step that pays it (the FUTEX_WAKE; the take or the pass-on), and a
 * killed thread stops between two instructions: at its death the slot is
 * armed exactly while it owes.  A sleeper asleep on the bell is woken by
 * the kernel's wake.  One about to sleep is not (the ring changes no
 * value, and wakes only those asleep), so a sleeper sleeps only while the
 * count is 0, checked by the kernel as it goes to sleep (bell_wait): the
 * dead owed a wake-up only for units that are there, and a sleeper that
 * finds them does not sleep.  The interleaving explorer found the gap
 * this closes (tests/explore, futex-sleeper-aba with deaths).
 *
 * Every process must ring for its deaths, or the others must look for
 * themselves: an object open in a process where the bell does not work
 * (an older kernel's container profile that refuses futex_waitv, say) is
 * counted in the page's `unbelled`, and while that count is not 0 every
 * sleeper looks again every EFD_RECHECK_MS, as without the bell.  Such a
 * process counts itself before its first operation on the object (at
 * open or adoption, and again in a fork child: unbelled_check) and wakes
 * every sleeper, so that none sleeps on without a limit; its close()
 * takes itself off.  A process whose probe said yes but that finds
 * otherwise later (a thread with no robust list it can get, futex_waitv
 * refused by a sandbox a fork child installed) demotes itself the same
 * way before it goes on (bell_demote).  A bell-less process killed with
 * the object open stays counted: the others keep re-checking, the safe
 * side.
 *
 * The slot is glibc's too: glibc sets it during a robust mutex's lock and
 * unlock, and clears it after.  Our windows hold no such mutex, and take
 * the slot only for steps of our own (a signal handler that locks a robust
 * mutex inside a sleeper's window would clear it: the window loses the
 * bell until the next sleep re-arms it).  The head is the kernel's ABI
 * (struct robust_list_head), read with get_robust_list; a thread without
 * one (a C library that registers none) goes without the bell: the probe
 * says so and the sleepers re-check.  The pointer to the thread's head is
 * kept per thread (it is the thread's for its whole life; a fork child's
 * thread gets the same address back from glibc).  A child made by a bare
 * clone system call has none (the kernel drops them, and no C library
 * code runs to register them again): its first operation in the new
 * process (efd_process_epoch() moved) finds that out and registers a head
 * of ours for the thread (robust_head). */

/* What bell_arm() did, for bell_restore(). */
struct bell_arming {
    struct robust_list_head *head;      /* NULL: nothing armed */
    struct robust_list *ours, *prev;    /* the bell's entry; what was there */
};

#if !defined(SYS_futex_waitv) && (defined(__x86_64__) || defined(__aarch64__))
#  define SYS_futex_waitv 449
#endif

#if defined(SYS_futex_waitv) && defined(SYS_get_robust_list) && defined(SYS_set_robust_list)

/* struct futex_waitv (Linux 5.16), spelled out for older headers. */
struct bell_waitv {
    uint64_t val;
    uint64_t uaddr;
    uint32_t flags;
    uint32_t reserved;
};
#define BELL_SIZE_U32 0x02              /* FUTEX2_SIZE_U32; shared */
#define BELL_PRIVATE 0x80               /* FUTEX2_PRIVATE */

#ifndef EFD_EXPLORE
/* A loop's helper (below): its own doorbell, in its sleeps as well, so
 * that the loop can end one at once; NULL in every other thread. */
static __thread _Atomic uint32_t *bell_extra;
static __thread uint32_t bell_extra_val;
/* Per thread: its head, and the process epoch it was found in. */
static __thread struct robust_list_head *bell_head;
static __thread uint64_t bell_epoch;
/* A head of our own, for a thread the C library registered none for. */
static __thread struct robust_list_head bell_own;
#endif

/* This thread's robust-list head, or NULL.  Cached per thread, and asked
 * of the kernel again in a new process (a fork child's thread may have
 * none: the kernel drops the lists of a child made by a bare clone system
 * call, and only the C library's fork registers them again).  A thread
 * with none gets one of ours: nobody else uses its list (the C library
 * would have registered it), and the kernel then rings for its death
 * too. */
static struct robust_list_head *
robust_head(void)
{
#ifdef EFD_EXPLORE
    return efd_explore_robust_head();
#else
    uint64_t epoch = efd_process_epoch();
    if (bell_head == NULL || bell_epoch != epoch) {
        struct robust_list_head *head = NULL;
        size_t len = 0;
        if (syscall(SYS_get_robust_list, 0, &head, &len) != 0
                || len != sizeof(*head))
            head = NULL;
        if (head == NULL) {
            bell_own.list.next = &bell_own.list;
            bell_own.futex_offset = 0;
            bell_own.list_op_pending = NULL;
            if (syscall(SYS_set_robust_list, &bell_own,
                        sizeof(bell_own)) == 0)
                head = &bell_own;
        }
        bell_head = head;
        bell_epoch = epoch;
    }
    return bell_head;
#endif
}

/* Point this thread's pending slot at the page's bell, noting in *a what
 * was there (a->head NULL: the thread has no robust list, nothing armed). */
static void
bell_arm(struct efd_count *c, struct bell_arming *a)
{
    struct robust_list_head *head = robust_head();
    a->head = head;
    if (head == NULL)
        return;
    /* The kernel reads the word at entry + futex_offset. */
    a->ours = (struct robust_list *)((char *)&c->bell - head->futex_offset);
    a->prev = head->list_op_pending;
    head->list_op_pending = a->ours;
    atomic_signal_fence(memory_order_seq_cst);
    EFD_POINT("bell: armed");
}

/* Put back what bell_arm() found, if the slot still holds ours. */
static void
bell_restore(const struct bell_arming *a)
{
    if (a->head == NULL)
        return;
    atomic_signal_fence(memory_order_seq_cst);
    if (a->head->list_op_pending == a->ours)
        a->head->list_op_pending = a->prev;
    EFD_POINT("bell: disarmed");
}

/* S5 with the bell: sleep on `word` (ticket t) and the bell, provided
 * the count's two halves are still 0; 0 woken on the word, 1 woken by the
 * bell, -1 with errno (EAGAIN: a value moved; ETIMEDOUT; EINTR).  ms < 0:
 * no time limit.  The count is in the comparison because the kernel's
 * ring changes no value: a releaser that added (W1) after this sleeper's
 * last look (S4) and died before its wake-up rings while the sleeper is
 * not asleep yet -- the ring wakes nobody, and the ticket has not moved
 * (W3 never came).  The units it added have: the sleep does not start. */
#define BELL_WORDS 6
static long
bell_wait(struct efd_count *c, _Atomic uint32_t *word, uint32_t t, int ms,
          int with_hold, uint32_t hold, _Atomic uint32_t *deaths,
          uint32_t dval)
{
    /* The books' bell is for sleepers that do not re-check: one that looks
     * again every EFD_RECHECK_MS anyway need not be woken for it. */
    int n = with_hold ? 5 : 4;
    _Atomic uint32_t *words[BELL_WORDS];
    uint32_t vals[BELL_WORDS] = { t, 0, 0, 0, hold, dval };
    words[0] = word;
    words[1] = &c->bell;
    words[2] = (_Atomic uint32_t *)(void *)&c->count;        /* halves */
    words[3] = (_Atomic uint32_t *)(void *)&c->count + 1;
    /* The books' bell: a process starting to hold units (efd_books.c). */
    words[4] = &c->holdseq;
    /* The watcher's word (efd_watch.c, this sleeper's own, private to
     * this process): a holder in another process it relies on died. */
    if (deaths != NULL) {
        words[n] = deaths;
        vals[n] = dval;
        n++;
    }
#ifdef EFD_EXPLORE
    return efd_explore_futex_waitv(words, vals, n, ms >= 0);
#else
    struct bell_waitv w[BELL_WORDS + 1];
    struct timespec ts, *deadline = NULL;
    int i;
    for (i = 0; i < n; i++) {
        w[i].val = vals[i];
        w[i].uaddr = (uintptr_t)words[i];
        w[i].flags = words[i] == deaths ? BELL_SIZE_U32 | BELL_PRIVATE
                                        : BELL_SIZE_U32;
        w[i].reserved = 0;
    }
    if (bell_extra != NULL) {
        w[n].val = bell_extra_val;
        w[n].uaddr = (uintptr_t)bell_extra;
        w[n].flags = BELL_SIZE_U32 | BELL_PRIVATE;
        w[n].reserved = 0;
        n++;
    }
    if (ms >= 0) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += ms / 1000;
        ts.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        deadline = &ts;
    }
    return syscall(SYS_futex_waitv, w, n, 0, deadline, CLOCK_MONOTONIC);
#endif
}

int
efd_bell_probe(void)
{
#ifdef EFD_EXPLORE
    return 1;
#else
    /* A value that differs: futex_waitv answers EAGAIN where it exists.
     * (A page's worth of zeros on the heap: the books make it large.) */
    struct efd_count *probe;
    int ok;
    if (robust_head() == NULL
            || (probe = calloc(1, sizeof(*probe))) == NULL)
        return 0;
    atomic_store(&probe->seq, 1);
    ok = bell_wait(probe, &probe->seq, 0, 0, 1, 0, NULL, 0) < 0
         && errno == EAGAIN;
    free(probe);
    return ok;
#endif
}

#else  /* no futex_waitv or robust lists in these headers */

static void
bell_arm(struct efd_count *c, struct bell_arming *a)
{
    (void)c;
    a->head = NULL;
}
static void
bell_restore(const struct bell_arming *a)
{
    (void)a;
}
static struct robust_list_head *
robust_head(void)
{
    return NULL;
}
static long
bell_wait(struct efd_count *c, _Atomic uint32_t *word, uint32_t t, int ms,
          int with_hold, uint32_t hold, _Atomic uint32_t *deaths,
          uint32_t dval)
{
    (void)c; (void)word; (void)t; (void)ms; (void)with_hold; (void)hold;
    (void)deaths; (void)dval;
    errno = ENOSYS;
    return -1;
}
int efd_bell_probe(void) { return 0; }

#endif

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

static void fx_interrupt(efd_impl *impl, int all);

/* A process without the bell: count this object in `unbelled` once per
 * process (a fork child counts its copy again), and wake every sleeper so
 * that each takes up re-checking (a sleeper that read `unbelled` before
 * the add has a ticket older than the words' bump). */
/* Count this object in `unbelled` unless this process did already; 1 if
 * it counted it now. */
static int
unbelled_count(efd_impl *impl)
{
    uint64_t epoch;
    if (impl->cnt == NULL
            || impl->unbelled_epoch == (epoch = efd_process_epoch()))
        return 0;
    impl->unbelled_epoch = epoch;
    atomic_fetch_add(&impl->cnt->unbelled, 1);
    return 1;
}

static void
unbelled_check(efd_impl *impl)
{
    if (!impl->bell && unbelled_count(impl))
        fx_interrupt(impl, 1);
}

/* This process found it cannot ring for this object after all (a thread
 * with no robust list it can get; futex_waitv refused -- a sandbox
 * installed after the probe, in a fork child): go on without the bell,
 * counted in `unbelled`, before anything it does could leave a debt. */
static void
bell_demote(efd_impl *impl)
{
    impl->bell = 0;
    unbelled_check(impl);
}

/* From before an add until after its wake-ups, this thread may owe
 * sleepers one: the bell rings if it dies meanwhile (or, without the bell
 * here, this process is counted in `unbelled`).  bell_restore() after. */
static void
owe_wakeups(efd_impl *impl, struct bell_arming *arming)
{
    if (impl->bell) {
        bell_arm(impl->cnt, arming);
        if (arming->head == NULL)
            bell_demote(impl);
    }
    else
        unbelled_check(impl);
}

/* After `value` units were added (sequentially consistent): a sleeper that
 * counted itself before the add is seen here; one that counts itself
 * after it sees the units. */
static void
wake_for(efd_impl *impl, uint64_t value)
{
    wake_after_add(impl->cnt, !impl->semaphore ? 1
                   : value < INT_MAX ? (int)value : INT_MAX);
}

static int
fx_try_write_limit(efd_impl *impl, uint64_t value, uint64_t limit)
{
    struct bell_arming arming = { NULL, NULL, NULL };
    int err;
    owe_wakeups(impl, &arming);
    err = efd_count_try_write_limit(impl, value, limit);        /* W1 */
    if (err == 0 && value > 0)
        wake_for(impl, value);
    bell_restore(&arming);
    return err;
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
    ws->slice_ms = for_write ? 5 : impl->bell ? 0 : EFD_RECHECK_MS;
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

/* S5 and S6 of a reader or watcher where the bell works: no time limit
 * but the caller's.  The slot stays armed after the sleep, until the wait
 * is over (fx_unblock): a wake-up that came to this sleeper is owed until
 * it takes the unit or passes it on. */
static int
block_on_bell(efd_impl *impl, int kind, uint32_t ticket, int ms,
              _Atomic uint64_t *who, uint32_t epoch, int rechecks,
              uint32_t hold, _Atomic uint32_t *deaths, uint32_t dval)
{
    struct efd_count *c = impl->cnt;
    struct bell_arming arming;
    long woke;
    int err = 0;
    /* A thread that has no robust list and can get none cannot ring. */
    bell_arm(c, &arming);
    if (arming.head == NULL) {
        sleep_leave(who, epoch);
        bell_demote(impl);
        return 0;                       /* look again, without the bell */
    }
    woke = bell_wait(c, word_of(c, kind), ticket, ms,           /* S5 */
                     !rechecks, hold, deaths, dval);
    if (woke < 0 && (errno == ENOSYS || errno == EPERM)) {
        bell_restore(&arming);
        sleep_leave(who, epoch);
        bell_demote(impl);
        return 0;
    }
    if (woke < 0 && errno != EAGAIN)
        err = errno;
    EFD_POINT("block: back");
    sleep_leave(who, epoch);                                    /* S6 */
    if (woke == 1) {
        /* The bell: someone died who may have owed a wake-up, to anyone.
         * Everyone looks again. */
        EFD_POINT("block: the bell rang");
        impl->ops->interrupt(impl, 1);
    }
    return err;
}

/* The holders' watcher (efd_watch.c); the explorer's model of it. */
#ifdef EFD_EXPLORE
#  define watch_enter() efd_explore_watch_enter()
#  define watch_leave() efd_explore_watch_leave()
#else
#  define watch_enter() efd_watch_enter()
#  define watch_leave() efd_watch_leave()
#endif

/* Hand the holders in other processes to the watcher (efd_watch.c): the
 * word to sleep on (this sleeper's own), its value read before the look
 * in *dval (a watched holder that dies after the look moves it), and the
 * watcher kept until watch_leave(); or NULL: look every EFD_RECHECK_MS --
 * *now set if a holder was found dead and settled (look at the count at
 * once). */
static _Atomic uint32_t *
watch_holders(efd_impl *impl, uint32_t *dval, int *now)
{
    _Atomic uint32_t *deaths;
    int r;
    deaths = watch_enter();
    *dval = atomic_load(deaths);
    if ((r = efd_books_watched(impl)) == 1)
        return deaths;
    watch_leave();
    *now = r < 0;
    return NULL;
}

static int
fx_block(efd_impl *impl, int kind, uint32_t ticket, int ms)
{
    struct efd_count *c = impl->cnt;
    _Atomic uint64_t *who = NULL;
    _Atomic uint32_t *deaths = NULL;
    uint32_t epoch = 0, hold = 0, dval = 0;
    struct timespec ts;
    int err = 0, rechecks = 1, bell = 0;

    if (kind == EFD_BLOCK_WRITE) {
        /* Nothing signals "room for n more": look again every 5 ms. */
        if (ms < 0 || ms > 5)
            ms = 5;
    }
    else {
        unbelled_check(impl);
        /* The books' bell, before the look at the books below: a process
         * that starts holding units after that look finds `holdwait` set,
         * and moves `holdseq` (efd_books.c). */
        hold = atomic_load(&c->holdseq);
        atomic_store(&c->holdwait, 1);
        atomic_thread_fence(memory_order_seq_cst);
        EFD_POINT("block: holdwait set");
        /* Without the bell here or in any process that has the object
         * open, look again every EFD_RECHECK_MS (after the ticket: see
         * unbelled_check).  Read once: another thread may demote the
         * object meanwhile, and this sleep must be one kind or the other
         * throughout (a demotion wakes the sleepers that do not re-check:
         * the next sleep reads it again). */
        bell = atomic_load(&impl->bell);
        rechecks = !bell || atomic_load(&c->unbelled) > 0;
        /* While another process holds units, whose death no bell rings
         * for (efd_books.c): sleep on the watcher's word where it can
         * watch them all; else look again every EFD_RECHECK_MS, and the
         * look settles them. */
        if (!rechecks && efd_books_foreign(impl)) {
            int now = 0;
            deaths = watch_holders(impl, &dval, &now);
            if (now)
                return 0;                   /* one was dead: look again */
            rechecks = deaths == NULL;
        }
        if (rechecks && (ms < 0 || ms > EFD_RECHECK_MS))
            ms = EFD_RECHECK_MS;
        who = kind == EFD_BLOCK_READY ? &c->watchers : &c->sleepers;
        epoch = sleep_enter(who);                               /* S3 */
        if (atomic_load(&c->count) > 0) {                       /* S4 */
            sleep_leave(who, epoch);
            if (deaths != NULL)
                watch_leave();
            return 0;
        }
        EFD_POINT("block: count 0");
        if (bell) {
            err = block_on_bell(impl, kind, ticket, ms, who, epoch,
                                rechecks, hold, deaths, dval);
            if (deaths != NULL)
                watch_leave();
            return err;
        }
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

/* The wait is over: this sleeper owes nobody a wake-up any more. */
static void
fx_unblock(efd_impl *impl)
{
    struct bell_arming a;
    if (!impl->bell || (a.head = robust_head()) == NULL)
        return;
    a.ours = (struct robust_list *)((char *)&impl->cnt->bell
                                    - a.head->futex_offset);
    a.prev = NULL;
    bell_restore(&a);
}

/* ---- An event loop's sleep ---------------------------------------------
 *
 * A loop cannot sleep in futex(); it sleeps in epoll_wait() and watches a
 * descriptor.  Through a ring (efd_ring.c) it waits on the readers' futex
 * word itself, as one more sleeper that the kernel queues beside the
 * threads: a release's FUTEX_WAKE(n) picks n sleepers, threads and loops
 * alike, so one unit wakes one loop however many loops watch.  The loop's
 * steps are a reader's (S1 .. S6 above), spread over callbacks:
 *
 *   sleep   S1 ticket; S3 count itself in `sleepers`; S4 look: units ->
 *           take them now.  Then S5: a FUTEX_WAIT on `seq` with the
 *           ticket, submitted to the ring (a single wait: cancelled
 *           atomically, efd_ring.c).  After it is queued, S4 once more:
 *           units that came meanwhile are taken now.
 *   woke    the ring polled readable: the completion ends the sleep (S6);
 *           the caller takes what it finds and sleeps again if its tasks
 *           still wait.
 *   rest    nobody of this loop waits any more: cancel the wait, S6, and
 *           pass on a wake-up this loop may have been chosen for
 *           (interrupt(impl, 0)), as a reader that leaves does.
 *
 * Where this process rings the death bell, loops sleep through a helper
 * thread instead ("A loop's helper", below); the ring is for where it does
 * not (or EFD_LOOP_SLEEP=ring).
 *
 * Deaths: no bell for loops.  A loop chosen by a release and killed before
 * it took the unit owes a wake-up, and the bell (above) would have the
 * kernel ring for it -- but a ring's requests outlive the robust-list walk
 * of a process killed: the kernel cancels them only when it tears the
 * ring down, after the walk, so the dead loop's own request on the bell
 * can be the one sleeper its ring wakes (tests/test_async_wake_one.py,
 * a loop killed while chosen, found exactly that), and its request on
 * `seq` can take a release's wake-up to the grave.  So a process whose
 * loops sleep this way is counted as one whose deaths ring for nobody
 * (loop_demote(): `unbelled`), and everyone -- its loops, and every
 * process's sleepers -- looks at the count every EFD_RECHECK_MS while the
 * object is open there, as without the bell.  A dead process's request
 * that took a wake-up leaves units that the next look finds.  The
 * interleaving explorer runs these steps against threads, releases and a
 * death at each point (tests/explore, loop-*), its ring modelled as the
 * kernel keeps it: a dead loop's wait stays queued. */

/* Tags: a number, and in the low bit whether it is a cancel's own. */
static uint64_t
ls_tag(efd_loopsleep *ls, int cancel)
{
    ls->ring.tags++;
    return (ls->ring.tags << 1) | (uint64_t)(cancel != 0);
}

/* Before this process's first loop sleep on the object can make it owe
 * anyone: count it in `unbelled` (once per process, as unbelled_check()
 * does), and wake the sleepers that sleep without a re-check.  Those wait
 * on the books' bell too, and set `holdwait` before they read `unbelled`:
 * they see the count, or this sees them.  The sleepers that re-check
 * already -- every loop's -- are left asleep: N processes starting to wait
 * in loops cost N wake-ups, not N * N. */
static void
loop_demote(efd_impl *impl)
{
    impl->bell = 0;
    if (unbelled_count(impl))
        efd_books_wake_unrechecked(impl->cnt);
}

/* Read every completion; the wait's own ends it (a late one of a wait
 * cancelled meanwhile is ignored).  Returns how many were read. */
static int
ls_reap(efd_impl *impl, efd_loopsleep *ls)
{
    uint64_t tag;
    int32_t res;
    int n = 0;
    while (efd_ring_next(&ls->ring, &tag, &res)) {
        n++;
        if (ls->out == 0 || tag != ls->out)
            continue;
        ls->out = 0;
        if (res < 0 && res != -EAGAIN && res != -EINTR
                && res != -ECANCELED)
            ls->failed = -res;
        if (ls->counted)                                        /* S6 */
            sleep_leave(&impl->cnt->sleepers, ls->epoch);
        ls->counted = 0;
    }
    return n;
}

int
efd_fx_loop_sleep(efd_impl *impl, efd_loopsleep *ls, int *ready)
{
    struct efd_count *c = impl->cnt;
    uint32_t t;
    int err;
    *ready = 0;
    if (c == NULL || ls->ring.fd < 0)
        return EBADF;
    (void)ls_reap(impl, ls);
    if (ls->failed)
        return ls->failed;
    loop_demote(impl);
    if (ls->out == 0) {
        t = atomic_load(&c->seq);                               /* S1 */
        if (atomic_load(&c->count) > 0) {
            *ready = 1;
            return 0;
        }
        ls->epoch = sleep_enter(&c->sleepers);                  /* S3 */
        ls->counted = 1;
        if (atomic_load(&c->count) > 0) {                       /* S4 */
            sleep_leave(&c->sleepers, ls->epoch);
            ls->counted = 0;
            *ready = 1;
            return 0;
        }
        ls->out = ls_tag(ls, 0);
        if ((err = efd_ring_wait(&ls->ring, &c->seq, t, ls->out)) != 0
                || (err = efd_ring_submit(&ls->ring)) != 0) {   /* S5 */
            /* It may be in flight: the caller rests (cancels it) and
             * waits the old way. */
            ls->failed = err;
            return err;
        }
        EFD_POINT("loop: asleep");
    }
    *ready = atomic_load(&c->count) > 0;                        /* S4' */
    return 0;
}

int
efd_fx_loop_woke(efd_impl *impl, efd_loopsleep *ls)
{
    if (impl->cnt == NULL || ls->ring.fd < 0)
        return 0;
    return ls_reap(impl, ls);
}

void
efd_fx_loop_rest(efd_impl *impl, efd_loopsleep *ls, int pass_on)
{
    struct efd_count *c = impl->cnt;
    int orphaned = 0;
    if (c == NULL || ls->ring.fd < 0)
        return;
    (void)ls_reap(impl, ls);
    if (ls->out != 0) {
        /* Submitted, the cancel has taken the wait off the futex word's
         * queue -- or found it woken already, its completion on the way
         * (and ignored: its tag is gone). */
        if (efd_ring_cancel(&ls->ring, ls->out, ls_tag(ls, 1)) != 0
                || efd_ring_submit(&ls->ring) != 0) {
            /* The cancel cannot go out (io_uring refused since the sleep
             * began).  Closing the ring does not take the wait off the
             * word in time: its teardown is the kernel's deferred work,
             * and none comes while a fork child holds a copy of the
             * descriptor.  Until then the wait would take a release's
             * wake-up from a live sleeper.  So every sleeper is woken
             * below: that ends the orphaned wait too, and the others look
             * again.  This sleeper cannot sleep again. */
            efd_ring_close(&ls->ring);
            ls->failed = EIO;
            orphaned = 1;
        }
        ls->out = 0;
    }
    if (ls->counted)                                            /* S6 */
        sleep_leave(&c->sleepers, ls->epoch);
    ls->counted = 0;
    if (pass_on || orphaned)
        fx_interrupt(impl, orphaned);
}

/* ---- A loop's helper --------------------------------------------------
 *
 * A loop's sleep through a ring (above) cannot use the death bell, so
 * loops, and every waiter of an object they sleep on, re-check.  Where the
 * bell works, a loop's sleep is instead a thread of efd's, the helper,
 * that sleeps as a blocked acquire() does -- one more reader on `seq`,
 * with the bell armed (block_on_bell) -- and rings the loop's door (an
 * eventfd the loop watches) when units may be there.  For the shared
 * page it is exactly a reader whose take comes late: S1 ticket, S3 .. S5
 * its sleep, S6; then it owes the wake-up it may have been chosen for
 * until the loop answers -- took the units, or will not (then the helper
 * passes the wake-up on, interrupt(impl, 0), as a reader leaving without
 * a unit does).  Its slot stays armed all that time, so that if the
 * process dies -- helper, loop and all -- before the loop answered, the
 * kernel rings the bell, as for a blocked acquire() killed after its
 * wake-up.  A helper's sleep is a thread's futex_waitv, which the thread
 * leaves before its robust list is walked: nothing of it outlives the
 * process, unlike a ring's request.  So nobody re-checks on its account:
 * a loop sleeps, and costs, nothing while idle.
 *
 * A loop whose tasks wait for readiness (Event.wait_async: a watcher,
 * which takes nothing) has its helper sleep as a blocked Event.wait()
 * does: one more watcher on `wseq`, with the bell.  A release wakes every
 * watcher, and one killed between its add and that wake-up rings the
 * bell, whose sleeper wakes them all (block_on_bell), so the helper
 * misses no set() and owes nobody anything: it disarms as soon as it is
 * awake, calls the loop if the count is above 0, and waits for the answer
 * without a limit (the units are not its to pass on).  Such a loop's
 * consumers, if it has any, are served by the same calls (every release
 * wakes it); once its watchers are gone it sleeps for units again.  So
 * an idle Event.wait_async() costs nothing either, and leaves fileno()
 * unasked: releases keep making no system call.
 *
 * The loop and its helper talk through process memory only: `want`
 * (tasks wait), `ready` (for readiness: sleep as a watcher), `calls`
 * (doors rung) and `answered` (the last call the
 * loop answered), and `cmd`, a private futex word the loop bumps after
 * every change, which the helper sleeps on beside the page's words (the
 * thread-local bell_extra).  A call is answered only by a loop that saw
 * it (woke() read `calls`), so an answer never runs ahead of the look it
 * stands for.  A rest() that answers a call the loop saw does not bump
 * `cmd` (efd_loop.c, helper_rest_quietly): the helper waits for that
 * answer in helper_call(), counted nowhere a release looks, so the loop
 * passes on the wake-up the call stood for itself, and the helper -- its
 * bell still armed meanwhile, which a death only makes ring for nothing
 * -- finds out at the loop's next sleep(), or when its wait for the
 * answer ends.  The helper takes no lock, never touches Python, and blocks
 * every signal (efd_loop.c makes it so). */

#ifndef EFD_EXPLORE
/* Sleep on the helper's doorbell word; ms < 0: no limit.  0, or ETIMEDOUT
 * once ms passed. */
static int
helper_wait(_Atomic uint32_t *word, uint32_t val, int ms)
{
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    if (syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, val,
                ms >= 0 ? &ts : NULL, NULL, 0) < 0 && errno == ETIMEDOUT)
        return ETIMEDOUT;
    return 0;
}

/* The helper may have been chosen and the loop will not take: the
 * wake-up goes on, if units are there (as a reader that leaves) -- and
 * only then is the bell disarmed, so that a death between the two still
 * rings (efd_wait.c leaves in the same order).  A watcher's sleep was
 * nobody's choice: it only disarms. */
static void
helper_leave(efd_impl *impl, int kind)
{
    if (kind == EFD_BLOCK_READ)
        fx_interrupt(impl, 0);
    fx_unblock(impl);
}

/* Call the loop (ring its door) and wait until it answered, or stops
 * wanting.  A call for units is owed to the sleepers: if the loop does not
 * answer within EFD_RECHECK_MS, the wake-up goes on (once; see the
 * caller).  A call for readiness owes nobody: no limit.  Returns the
 * latest `cmd` seen. */
static uint32_t
helper_call(efd_helper *h, int kind, uint32_t seen)
{
    efd_impl *impl = h->impl;
    uint32_t call = atomic_fetch_add(&h->calls, 1) + 1;
    int passed = kind != EFD_BLOCK_READ;
    atomic_store(&h->waiting, call);    /* before the door: see rest() */
    efd_chan_put(h->door, h->door_w);
    EFD_POINT("helper: called");
    while (efd_helper_wanted(h)
           && (int32_t)(atomic_load(&h->answered) - call) < 0) {
        if (helper_wait(&h->cmd, seen, passed ? -1 : EFD_RECHECK_MS)
                == ETIMEDOUT && !passed) {
            fx_interrupt(impl, 0);
            passed = 1;
        }
        seen = atomic_load(&h->cmd);
    }
    atomic_store(&h->waiting, 0);
    return seen;
}

void *
efd_fx_helper_main(void *arg)
{
    efd_helper *h = arg;
    efd_impl *impl = h->impl;
    struct efd_count *c = impl->cnt;
    uint32_t seen = atomic_load(&h->cmd);

    while (!atomic_load(&h->stop)) {
        uint32_t t;
        int kind;
        if (!atomic_load(&h->want)) {
            helper_wait(&h->cmd, seen, -1);     /* idle: nobody waits */
            seen = atomic_load(&h->cmd);
            continue;
        }
        /* Read once per sleep: the loop may change it meanwhile (and
         * rings: the sleep ends, and the next one is of the new kind). */
        kind = atomic_load(&h->ready) ? EFD_BLOCK_READY : EFD_BLOCK_READ;
        t = fx_ticket(impl, kind);                              /* S1 */
        if (atomic_load(&c->count) == 0) {
            int err;
            atomic_store(&h->asleep, 1);
            bell_extra = &h->cmd;
            bell_extra_val = seen;
            err = fx_block(impl, kind, t, -1);                  /* S3 .. S6 */
            bell_extra = NULL;
            atomic_store(&h->asleep, 0);
            if (!impl->bell || (err != 0 && err != EINTR
                                && err != ETIMEDOUT)) {
                /* This thread cannot sleep with the bell after all (it
                 * was demoted), or the sleep failed: the loop must wait
                 * the other way.  Ring so that it finds out. */
                helper_leave(impl, kind);
                atomic_store(&h->failed, err ? err : ENOTSUP);
                efd_chan_put(h->door, h->door_w);
                break;
            }
        }
        seen = atomic_load(&h->cmd);
        if (kind == EFD_BLOCK_READY)
            fx_unblock(impl);           /* a watcher owes nobody */
        if (!efd_helper_wanted(h)) {
            helper_leave(impl, kind);
            continue;
        }
        if (atomic_load(&c->count) == 0) {
            /* Nothing to call the loop for: another took it (or the
             * event was cleared again), a re-check ran out (a process
             * without the bell, a holder elsewhere: give back what dead
             * holders held), the books' bell, or the loop changed what
             * it waits for. */
            fx_unblock(impl);
            (void)efd_books_sweep(impl);
            continue;
        }
        /* Units may be there: call the loop, and (for units) owe them
         * until it answers this call or stops wanting (efd_loop.c's
         * rest).  A loop that does not answer within EFD_RECHECK_MS --
         * busy in a long callback, or stopped for good with its tasks
         * waiting -- must not hold the units from everyone else: the
         * wake-up goes on then (once), as SPEC §5 bounds what a waiter
         * that does not come may cost the others.  The loop may still
         * answer and take. */
        seen = helper_call(h, kind, seen);
        if (efd_helper_wanted(h))
            fx_unblock(impl);   /* answered: it took, or sleeps again */
        else
            helper_leave(impl, kind);
    }
    return NULL;
}
#else
void *efd_fx_helper_main(void *arg) { (void)arg; return NULL; }
#endif

/* A new page of `magic`'s, its channel kept in step from the start if
 * `armed` (the pipe backend) or from the first fileno(). */
static int
open_page(efd_impl *impl, uint64_t initval, int semaphore, int cloexec,
          uint32_t magic, int armed)
{
    /* A sandbox may refuse futex(): find out now, not in a wait. */
    int err = efd_futex_probe();
    if (err)
        return err;
    impl->unbelled_epoch = 0;
    err = efd_count_open(impl, initval, semaphore, cloexec, magic, 0, armed);
    if (err == 0)
        unbelled_check(impl);
    return err;
}

static int
adopt_page(efd_impl *impl, const int *fds, int nfds, int semaphore,
           uint32_t magic)
{
    /* The channel is always a pipe's two ends (so efd_chan_put() never
     * writes to a shared eventfd, which a peer could leave full). */
    int err = efd_pipe_check_fds(fds, nfds);
    if (err != 0)
        return err;
    impl->unbelled_epoch = 0;
    err = efd_count_adopt(impl, fds, nfds, semaphore, magic);
    if (err == 0)
        unbelled_check(impl);
    return err;
}

static int
fx_open(efd_impl *impl, uint64_t initval, int semaphore, int cloexec)
{
    return open_page(impl, initval, semaphore, cloexec, EFD_FUTEX_MAGIC, 0);
}

static int
fx_adopt(efd_impl *impl, const int *fds, int nfds, int semaphore)
{
    return adopt_page(impl, fds, nfds, semaphore, EFD_FUTEX_MAGIC);
}

/* The pipe backend where Linux's futexes are there (efd_pipe.c, "Where
 * futexes are"): this backend's protocol, its channel -- the pipe --
 * kept in step from the start.  A page of its own magic, so that a
 * process that would sleep in poll() on it (a build without Linux's
 * facilities, sharing the page) is refused rather than left unwoken. */
static int
fxp_open(efd_impl *impl, uint64_t initval, int semaphore, int cloexec)
{
    return open_page(impl, initval, semaphore, cloexec, EFD_PIPE_FUTEX_MAGIC,
                     1);
}

static int
fxp_adopt(efd_impl *impl, const int *fds, int nfds, int semaphore)
{
    return adopt_page(impl, fds, nfds, semaphore, EFD_PIPE_FUTEX_MAGIC);
}

static void
fx_close(efd_impl *impl)
{
    /* Counted in `unbelled` by this process: take it off. */
    if (impl->cnt != NULL && impl->unbelled_epoch != 0
            && impl->unbelled_epoch == efd_process_epoch())
        atomic_fetch_sub(&impl->cnt->unbelled, 1);
    impl->unbelled_epoch = 0;
    efd_count_close(impl);
}

/* A holder's units given back (efd_books.c): an add like a release's, so
 * the same debt and the same wake-ups. */
static int
fx_settle(efd_impl *impl, int slot, uint64_t *added)
{
    struct bell_arming arming = { NULL, NULL, NULL };
    int err;
    owe_wakeups(impl, &arming);
    err = efd_books_settle(impl, slot, added);
    if (*added > 0)
        wake_for(impl, *added);
    bell_restore(&arming);
    return err;
}

const efd_backend efd_backend_futex = {
    "futex", 0, fx_open, fx_adopt, efd_count_try_read, fx_try_write,
    fx_try_write_limit, fx_waitspec, efd_count_peek, efd_count_repair, NULL, efd_count_arm,
    fx_ticket, fx_block, fx_interrupt, NULL, efd_count_fds, fx_close,
    NULL, fx_unblock, efd_books_try_read, fx_settle,
};

const efd_backend efd_backend_pipe_futex = {
    "pipe", 0, fxp_open, fxp_adopt, efd_count_try_read, fx_try_write,
    fx_try_write_limit, fx_waitspec, efd_count_peek, efd_count_repair, NULL, efd_count_arm,
    fx_ticket, fx_block, fx_interrupt, NULL, efd_count_fds, fx_close,
    NULL, fx_unblock, efd_books_try_read, fx_settle,
};

#else  /* no futex here */

int
efd_futex_probe(void)
{
    return ENOSYS;
}

int
efd_bell_probe(void)
{
    return 0;
}

const efd_backend efd_backend_futex = {
    "futex", 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
};
const efd_backend efd_backend_pipe_futex = {
    "pipe", 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
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
