/*
 * efd_books.c -- the books of robust holds (SPEC §6, "Robust holds").
 *
 * A unit taken by a `with` block on a semaphore drop-in, or by
 * acquire(undo=True), is *held* by the process that took it: if that
 * process dies before it gives the unit back, the unit returns to the
 * count.  This file keeps the books that make it so, for the memory
 * backends (futex, pipe), in the object's shared page (efd.h, struct
 * efd_count): one word per holder slot, saying how many units the slot's
 * process holds.
 *
 * Holders: who lives is the kernel's word, not ours.  A process owns
 * slot s while it holds an OFD write lock on byte HOLDER_BYTE0 + s of the
 * page's file, through a description of its own (the *holder
 * description*).  The kernel drops an OFD lock when the last descriptor of
 * its description closes -- when the process dies, however it dies.  So
 * "does slot s's holder live?" is one F_OFD_GETLK on that byte through the
 * object's shared description (which never locks): no pids are compared,
 * so neither their reuse nor pid namespaces can fool it, and a holder
 * whose death nobody noticed for a while is still found dead later.
 * The holder description is not close-on-exec, so that exec keeps the
 * holds until the process exits (SPEC); a fork child closes its copy, as
 * it closes the page lock's beacons (the table in efd_shm.c), and holds
 * nothing of its parent's.  A program that closes descriptors it did not
 * open (a daemon's sweep) gives its holds back early; one that passes the
 * descriptor on (os.system()'s shell) keeps them until that child exits.
 * Both are said in docs/processes.rst.
 *
 * The journal: one booked change is one step.  A booked change moves
 * units between the count and a slot's books -- a hold takes from the
 * count and adds to the books; a release by a holder adds to the count
 * and takes from its books; settling a dead holder's books gives them
 * back.  The two words cannot change in one ordinary compare-and-swap,
 * and a process may die between any two instructions, so the count has a
 * neighbour, `journal`, and a booked change swaps the pair (count,
 * journal) in one 16-byte compare-and-swap.  The journal holds the last
 * booked change: its slot, the sequence number it brings that slot to,
 * and what the slot's books hold after it -- an absolute value, not a
 * delta, so that applying it twice, or late, does no harm.  Each slot's
 * books carry the sequence number of the last change applied to them, and
 * a change is applied (books := its value) only over an older one.  The
 * truth about slot s is the journal's value if the journal names s, else
 * s's books.  A change on slot s:
 *
 *   J1  read the journal j;
 *   J2  if j names s, j's value and sequence number are s's truth: carry
 *       them on.  Otherwise help: apply j to its own slot's books (a
 *       compare-and-swap, unless someone has), then read s's books;
 *   J3  read the count c; decide (take, add, settle, or "nothing to do")
 *       from c and s's truth;
 *   J4  (settling a holder found dead) ask the kernel whether s's holder
 *       lives; if so, stop;
 *   J5  swap (c, j) for (c', j') where j' = (s, seq + 1, new value); on
 *       failure, start again at J1;
 *   J6  if s went from holding nothing to holding units, ring the books'
 *       bell for futex sleepers that sleep with no re-check
 *       (holders_appeared(), below).
 *
 * Nobody applies its own change: the next change of another slot does
 * (J2), or anyone who reads the books (efd_books_settle(), _held()).  So a
 * process taking and giving back units in a loop makes one 16-byte swap
 * per operation, and nothing else.
 *
 * Why it holds.  (1) Invariant: s's truth is the journal's value if it
 * names s, else s's books.  J5 replaces an entry naming t either by one
 * naming t again, carrying t's truth on (J2), or by one naming another
 * slot -- after J2 applied the entry to t's books; J5 fails if the
 * journal changed since J1.  Books move only forward (sequence numbers),
 * so a late helper cannot undo a newer value.  (2) The count and the
 * books change in one event: J5.  Whoever dies after J5 leaves the entry
 * in the journal, which is the truth; whoever dies before J5 changed
 * nothing.  (3) J3's decision is made from values that J5 checks: the
 * count is half of the swapped pair, and s's truth cannot change without
 * the journal changing (1).  (4) A settler cannot settle a live holder's
 * units: a new holder of slot s takes the byte's lock before its first
 * booked change, so a settler whose J4 found the byte free either swaps
 * before that change (and settles the dead predecessor's units,
 * correctly) or fails at J5 and, on the next round, finds the byte held.
 * A slot's new owner settles whatever its dead predecessor left before it
 * books anything of its own (claim(), below), so no units are left behind
 * a byte that looks alive.  Settled once, never twice: a second settler's
 * J5 fails, and its next round finds the truth at zero.
 *
 * Other changes of the count (plain acquire and release, another
 * process's) are 8-byte compare-and-swaps of the count alone, atomic with
 * respect to the 16-byte one on the same aligned pair.
 *
 * Limits: books hold at most 2**32 - 1 units per process (a counter-mode
 * undo read of more fails with EOVERFLOW), and sequence numbers are 23
 * bits: an ABA at J5 needs 2**23 booked changes of one slot, with the
 * count back at the same value, between one thread's J1 and its J5; a
 * helper stalled across 2**22 changes of one slot could apply a stale
 * value.  The interleaving explorer (tests/explore/, books-*) runs every
 * schedule of a few holders, settlers and sleepers with a death at each
 * point.
 */
#define _GNU_SOURCE 1
#include "efd.h"
#include "efd_explore.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#if defined(EFD_EXPLORE)
/* The interleaving explorer's build (tests/explore/): the protocol as it
 * is, with the explorer's model of slots and holders' lives, and of the
 * 16-byte swap (its actors run one at a time, between points). */
#  define EFD_HAVE_BOOKS 1
#elif defined(F_OFD_SETLK) \
    && (defined(__x86_64__) || defined(__GCC_HAVE_SYNC_COMPARE_AND_SWAP_16))
#  define EFD_HAVE_BOOKS 1
#endif

/* The process's holder slots (efd_books.c, below) bump this whenever
 * they gain one: an object of this process made before it (a pickle
 * loaded before the first hold) looks again.  A fresh object starts with
 * the current value: no page of its own can be in the list. */
static _Atomic uint64_t holders_gen = 1;

/* No slot, no holder description, no sweep yet (open, adopt). */
void
efd_books_init(efd_impl *impl)
{
    impl->hslot = -1;
    impl->hslot_epoch = 0;
    impl->claim_err = 0;
    impl->claim_epoch = 0;
    impl->holders_seen = atomic_load(&holders_gen);
    atomic_store(&impl->swept_ns, 0);
}

/* J6: a slot went from holding nothing to holding units.  futex
 * sleepers that saw no holder in another process sleep with no re-check;
 * one of them may be owed this holder's units if it dies, so wake them
 * (they come back to re-checking).  They set `holdwait` before they look
 * at the books, and this reads it after J5's full barrier: one of the two
 * sees the other.  No system call unless someone set it. */
static void
holders_appeared(struct efd_count *c)
{
    if (!atomic_load(&c->holdwait) || !atomic_exchange(&c->holdwait, 0))
        return;
    EFD_POINT("books: holdwait taken");
    atomic_fetch_add(&c->holdseq, 1);
#ifdef EFD_EXPLORE
    (void)efd_explore_futex(&c->holdseq, FUTEX_WAKE, INT32_MAX, NULL);
#else
    (void)syscall(SYS_futex, &c->holdseq, FUTEX_WAKE, INT32_MAX, NULL,
                  NULL, 0);
#endif
}

/* The same bell, for a process that starts sleeping in event loops on the
 * object (efd_futex.c, "An event loop's sleep"): after it counted itself
 * in `unbelled`, the sleepers that saw nobody to re-check for take up
 * re-checking. */
void
efd_books_wake_unrechecked(struct efd_count *c)
{
    holders_appeared(c);
}

#ifdef EFD_HAVE_BOOKS

/* The holders' bytes in the page's file: past the beacons' (efd_shm.c). */
#define HOLDER_BYTE0 8192u

#define SEQ_MASK 0x7fffffu
#define HELD_MAX ((uint64_t)UINT32_MAX)
/* After a sweep that found nothing to settle, this process does not
 * sweep again on a failed read for this long (a caller spinning on a
 * non-blocking acquire would make a system call per holder each time). */
#define SWEEP_GAP_NS 10000000

/* The journal: slot + 1 (9 bits; 0: empty), sequence number (23 bits),
 * the slot's books after the change (32 bits). */
static inline int j_slot(uint64_t j) { return (int)(j >> 55) - 1; }
static inline uint32_t j_seq(uint64_t j) { return (uint32_t)(j >> 32) & SEQ_MASK; }
static inline uint64_t j_held(uint64_t j) { return (uint32_t)j; }
static inline uint64_t
j_make(int slot, uint32_t seq, uint64_t held)
{
    return ((uint64_t)(slot + 1) << 55) | ((uint64_t)(seq & SEQ_MASK) << 32)
           | (uint32_t)held;
}
/* A slot's books: units held (41 bits, at most HELD_MAX used) and the
 * sequence number of the change they come from (23 bits). */
static inline uint64_t b_held(uint64_t b) { return b >> 23; }
static inline uint32_t b_seq(uint64_t b) { return (uint32_t)b & SEQ_MASK; }
static inline uint64_t
b_make(uint64_t held, uint32_t seq)
{
    return (held << 23) | (seq & SEQ_MASK);
}
/* Whether sequence number a comes after b (modulo 2**23). */
static inline int
seq_after(uint32_t a, uint32_t b)
{
    uint32_t d = (a - b) & SEQ_MASK;
    return d != 0 && d < (SEQ_MASK >> 1);
}

/* J5: swap the pair at `pair` (the count, then the journal) from
 * (*count, *journal) to (ncount, njournal).  On failure the two hold what
 * was there. */
static inline int
cas16(_Atomic uint64_t *pair, uint64_t *count, uint64_t *journal,
      uint64_t ncount, uint64_t njournal)
{
#if defined(EFD_EXPLORE)
    _Atomic uint64_t *journal_p = pair + 1;
    if (atomic_load(pair) == *count && atomic_load(journal_p) == *journal) {
        atomic_store(pair, ncount);
        atomic_store(journal_p, njournal);
        return 1;
    }
    *count = atomic_load(pair);
    *journal = atomic_load(journal_p);
    return 0;
#elif defined(__x86_64__)
    unsigned char ok;
    __asm__ __volatile__("lock cmpxchg16b %1\n\tsetz %0"
                         : "=q"(ok),
                           "+m"(*(volatile unsigned __int128 *)pair),
                           "+a"(*count), "+d"(*journal)
                         : "b"(ncount), "c"(njournal)
                         : "memory", "cc");
    return ok;
#else
#  if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#    define PAIR(lo_addr, hi_addr) \
        (((unsigned __int128)(hi_addr) << 64) | (lo_addr))
#    define FIRST(v) ((uint64_t)(v))
#    define SECOND(v) ((uint64_t)((v) >> 64))
#  else
#    define PAIR(lo_addr, hi_addr) \
        (((unsigned __int128)(lo_addr) << 64) | (hi_addr))
#    define FIRST(v) ((uint64_t)((v) >> 64))
#    define SECOND(v) ((uint64_t)(v))
#  endif
    unsigned __int128 want = PAIR(*count, *journal);
    unsigned __int128 seen = __sync_val_compare_and_swap(
        (unsigned __int128 *)pair, want, PAIR(ncount, njournal));
    if (seen == want)
        return 1;
    *count = FIRST(seen);
    *journal = SECOND(seen);
    return 0;
#endif
}

/* J2: apply entry j to its slot's books, unless they are as new. */
static void
apply(struct efd_count *c, uint64_t j)
{
    int s = j_slot(j);
    uint64_t b;
    if (s < 0 || s >= EFD_HOLDERS)
        return;                         /* empty (or a peer's scribble) */
    b = atomic_load(&c->books[s]);
    while (seq_after(j_seq(j), b_seq(b))) {
        if (atomic_compare_exchange_weak(&c->books[s], &b,
                                         b_make(j_held(j), j_seq(j))))
            break;
    }
}

/* How many slots a scan looks at: those ever claimed (a peer's scribble
 * cannot send it past the table). */
static inline int
slots_used(struct efd_count *c)
{
    uint32_t n = atomic_load_explicit(&c->slots_used, memory_order_acquire);
    return n < EFD_HOLDERS ? (int)n : EFD_HOLDERS;
}

/* Slot s's truth (1, above): what it holds, and its sequence number. */
static uint64_t
truth(struct efd_count *c, int s, uint32_t *seq)
{
    uint64_t j = atomic_load(&c->journal), b;
    if (j_slot(j) == s) {
        if (seq != NULL)
            *seq = j_seq(j);
        return j_held(j);
    }
    b = atomic_load(&c->books[s]);
    if (seq != NULL)
        *seq = b_seq(b);
    return b_held(b);
}

/* J4: whether slot s's holder lives, as far as the kernel can tell
 * (anything but "no lock there" counts as alive: never settle wrongly). */
static int
holder_alive(efd_impl *impl, int s)
{
#ifdef EFD_EXPLORE
    (void)impl;
    return efd_explore_holder_alive(s);
#else
    return efd_lock_byte(impl->shmfd, F_OFD_GETLK, F_WRLCK,
                         HOLDER_BYTE0 + (uint32_t)s) != 0;
#endif
}

enum { BK_TAKE, BK_ADD, BK_BOOK, BK_SETTLE, BK_SETTLE_DEAD };

/* One booked change on slot s (the protocol above).  BK_TAKE: take 1
 * (semaphore) or everything, into the books (EAGAIN: nothing there).
 * BK_ADD: add `value` (EAGAIN: past `limit`), out of the books as far as
 * they go.  BK_BOOK: book `value` units this process took already (the
 * count stays).  BK_SETTLE: give back the books, as far as the bound
 * leaves room (the rest is dropped, as SysV clamps), and zero them;
 * BK_SETTLE_DEAD: the same if the holder is found dead (EBUSY if it
 * lives).  *moved: units taken or added; *now: the count after. */
static int
booked(efd_impl *impl, int s, int kind, uint64_t value, uint64_t limit,
       uint64_t *moved, uint64_t *now)
{
    struct efd_count *c = impl->cnt;
    for (;;) {
        uint64_t j, held, cnt, next, newheld, bound, room;
        uint32_t seq;
        j = atomic_load(&c->journal);                           /* J1 */
        EFD_POINT("books: journal read");
        if (j_slot(j) == s) {                                   /* J2 */
            held = j_held(j);
            seq = j_seq(j);
        }
        else {
            uint64_t b;
            apply(c, j);
            EFD_POINT("books: helped");
            b = atomic_load(&c->books[s]);
            held = b_held(b);
            seq = b_seq(b);
        }
        cnt = atomic_load(&c->count);                           /* J3 */
        EFD_POINT("books: read");
        switch (kind) {
        case BK_TAKE:
            if (cnt == 0) {
                *now = 0;
                return EAGAIN;
            }
            *moved = impl->semaphore ? 1 : cnt;
            if (*moved > HELD_MAX - held)
                return EOVERFLOW;
            next = cnt - *moved;
            newheld = held + *moved;
            break;
        case BK_BOOK:
            if (value > HELD_MAX - held)
                return EOVERFLOW;
            *moved = value;
            next = cnt;
            newheld = held + value;
            break;
        case BK_ADD:
            if (value > limit || cnt > limit - value)
                return EAGAIN;
            *moved = value;
            next = cnt + value;
            newheld = held > value ? held - value : 0;
            break;
        default:
            *moved = 0;
            *now = cnt;
            if (held == 0)
                return 0;
            if (kind == BK_SETTLE_DEAD && holder_alive(impl, s))  /* J4 */
                return EBUSY;
            EFD_POINT("books: holder dead");
            bound = atomic_load(&c->bound);
            if (bound == 0 || bound > EFD_MAX)
                bound = EFD_MAX;
            room = cnt < bound ? bound - cnt : 0;
            *moved = held < room ? held : room;
            next = cnt + *moved;
            newheld = 0;
            break;
        }
        if (cas16(&c->count, &cnt, &j, next,                    /* J5 */
                  j_make(s, seq + 1, newheld))) {
            EFD_POINT("books: swapped");
            if (held == 0 && newheld > 0)
                holders_appeared(c);                            /* J6 */
            *now = next;
            return 0;
        }
        EFD_POINT("books: swap failed");
    }
}

#ifndef EFD_EXPLORE
/* The books are per process, so every object of this process over one
 * page (two interpreters' copies, a handle loaded twice) shares one slot:
 * a process-wide list of the slots this process holds, by page, with the
 * holder description and how many objects use it.  Entries are never
 * moved (the beacons' table points at `fd`).  Claims are rare and short:
 * one mutex, whose fork handlers leave it unlocked -- and the list empty
 * -- in a child (which holds nothing of its parent's). */
struct holder {
    struct holder *next;
    dev_t dev;
    ino_t ino;
    int slot;
    int refs;
    _Atomic int fd;
    uint64_t epoch;
};
static struct holder *holders;
static pthread_mutex_t claim_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t claim_once = PTHREAD_ONCE_INIT;
static void claim_prepare(void) { pthread_mutex_lock(&claim_lock); }
static void claim_parent(void) { pthread_mutex_unlock(&claim_lock); }
static void
claim_child(void)
{
    holders = NULL;             /* the parent's (their fds: efd_shm.c) */
    pthread_mutex_unlock(&claim_lock);
}
static void
claim_init(void)
{
    /* The beacons' handlers first (efd_process_epoch() installs them), so
     * that a fork takes claim_lock before their mutex, as claim() does. */
    (void)efd_process_epoch();
    (void)pthread_atfork(claim_prepare, claim_parent, claim_child);
}

/* This process's entry for the page of `impl` (the claim lock held), or
 * NULL.  Entries of another epoch (a raw clone child's copies) are
 * dropped. */
static struct holder *
holder_find(efd_impl *impl, const struct stat *st, uint64_t epoch)
{
    struct holder **pp = &holders, *h;
    while ((h = *pp) != NULL) {
        if (h->epoch != epoch) {
            *pp = h->next;          /* not ours: forget (its fd is gone) */
            continue;
        }
        if (h->dev == st->st_dev && h->ino == st->st_ino)
            return h;
        pp = &h->next;
    }
    (void)impl;
    return NULL;
}
#endif

static inline int
own_slot(efd_impl *impl)
{
#ifdef EFD_EXPLORE
    (void)impl;
    return efd_explore_own_slot();
#endif
    uint64_t e = __atomic_load_n(&impl->hslot_epoch, __ATOMIC_ACQUIRE);
    int s = __atomic_load_n(&impl->hslot, __ATOMIC_RELAXED);
    return s >= 0 && e == efd_process_epoch() ? s : -1;
}

/* This process's slot, taken on its first hold: the holder description
 * (made once per process and object), a free byte locked through it, and
 * the books a dead predecessor of the slot left settled before anything
 * of ours goes in.  0, or an errno (EUSERS: every slot is held). */
#ifdef EFD_EXPLORE
static int
claim(efd_impl *impl)
{
    return own_slot(impl) >= 0 ? 0 : EUSERS;
}
#else
static int
claim(efd_impl *impl)
{
    char path[64];
    struct stat st;
    struct holder *h;
    uint64_t added, epoch;
    uint32_t k, used;
    int fd, s = -1, err = 0;

    pthread_once(&claim_once, claim_init);
    efd_beacon_check_inherited();       /* a raw fork child's copies */
    pthread_mutex_lock(&claim_lock);
    epoch = efd_process_epoch();
    if (own_slot(impl) >= 0) {
        pthread_mutex_unlock(&claim_lock);
        return 0;                       /* another thread's claim */
    }
    if (impl->claim_err != 0 && impl->claim_epoch == epoch) {
        /* Failed before in this process (no /proc, every slot taken):
         * not a system call per `with` block to learn it again. */
        err = impl->claim_err;
        pthread_mutex_unlock(&claim_lock);
        return err;
    }
    if (fstat(impl->shmfd, &st) < 0) {
        err = errno;
        goto out;
    }
    if ((h = holder_find(impl, &st, epoch)) != NULL) {
        h->refs++;                      /* another object of this page */
        s = h->slot;
        goto mine;
    }
    if ((h = calloc(1, sizeof(*h))) == NULL) {
        err = ENOMEM;
        goto out;
    }
    snprintf(path, sizeof(path), "/proc/self/fd/%d", impl->shmfd);
    /* Not close-on-exec: exec keeps the holds (above). */
    if ((fd = open(path, O_RDWR)) < 0) {
        err = errno;
        free(h);
        goto out;
    }
    if ((err = efd_beacon_register(fd, &h->fd)) != 0) {
        close(fd);
        free(h);
        goto out;
    }
    /* Lowest free slot first, so that scans (slots_used) stay short. */
    err = EUSERS;
    for (k = 0; k < EFD_HOLDERS; k++) {
        int r = efd_lock_byte(fd, F_OFD_SETLK, F_WRLCK, HOLDER_BYTE0 + k);
        if (r == EAGAIN || r == EACCES)
            continue;                   /* another live holder's */
        err = r;
        if (r == 0)
            s = (int)k;
        break;
    }
    if (s < 0) {
        efd_beacon_forget(&h->fd);
        free(h);
        goto out;
    }
    /* Our name, for sleepers that ask the kernel to tell them of our
     * death (efd_watch.c): after the lock, so that whoever finds the
     * byte free never trusts it. */
    atomic_store(&impl->cnt->holder_id[s],
                 efd_watch_pidns() == impl->cnt->pidns
                 && impl->cnt->pidns != 0 ? efd_watch_self_id() : 0);
    used = atomic_load(&impl->cnt->slots_used);
    while (used < (uint32_t)s + 1
           && !atomic_compare_exchange_weak(&impl->cnt->slots_used, &used,
                                            (uint32_t)s + 1))
        ;
    /* Whatever a dead predecessor left in the slot goes back first (it
     * is dead: we hold its byte now). */
    if ((err = impl->ops->settle(impl, s, &added)) != 0) {
        efd_beacon_forget(&h->fd);      /* the lock goes with it */
        free(h);
        goto out;
    }
    h->dev = st.st_dev;
    h->ino = st.st_ino;
    h->slot = s;
    h->refs = 1;
    h->epoch = epoch;
    h->next = holders;
    holders = h;
    atomic_fetch_add(&holders_gen, 1);
mine:
    __atomic_store_n(&impl->hslot, s, __ATOMIC_RELAXED);
    __atomic_store_n(&impl->hslot_epoch, epoch, __ATOMIC_RELEASE);
out:
    if (err != 0) {
        impl->claim_err = err;
        impl->claim_epoch = epoch;
    }
    pthread_mutex_unlock(&claim_lock);
    return err;
}
#endif

int
efd_books_available(void)
{
    return 1;
}

/* Whether the books work in this process: a holder description can be
 * made (/proc/self/fd) and its OFD lock is seen through another one. */
int
efd_books_probe(void)
{
#ifdef EFD_EXPLORE
    return 0;
#else
    char path[64];
    int fd, holder, ok;
    if (efd_shm_scratch(&fd) != 0)      /* as a page is made here */
        return 0;
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    if ((holder = open(path, O_RDWR | O_CLOEXEC)) < 0) {
        close(fd);
        return 0;
    }
    ok = efd_lock_byte(holder, F_OFD_SETLK, F_WRLCK, HOLDER_BYTE0) == 0
         && efd_lock_byte(fd, F_OFD_GETLK, F_WRLCK, HOLDER_BYTE0) == EBUSY;
    close(holder);
    close(fd);
    return ok;
#endif
}


int
efd_books_claim(efd_impl *impl)
{
    return own_slot(impl) >= 0 ? 0 : claim(impl);
}

/* A page adopted (unpickled in this process, a handle loaded twice): if
 * this process holds a slot of it already, this object shares it, so that
 * its releases settle what the other took. */
void
efd_books_adopted(efd_impl *impl)
{
#ifndef EFD_EXPLORE
    struct holder *h;
    struct stat st;
    uint64_t epoch;
    pthread_once(&claim_once, claim_init);
    pthread_mutex_lock(&claim_lock);
    epoch = efd_process_epoch();
    impl->holders_seen = atomic_load(&holders_gen);
    if (own_slot(impl) < 0 && fstat(impl->shmfd, &st) == 0
            && (h = holder_find(impl, &st, epoch)) != NULL) {
        h->refs++;
        __atomic_store_n(&impl->hslot, h->slot, __ATOMIC_RELAXED);
        __atomic_store_n(&impl->hslot_epoch, epoch, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&claim_lock);
#else
    (void)impl;
#endif
}

/* An object with no slot of its own: has this process taken one for its
 * page since the object last looked?  One load while nothing changed. */
static int
slot_joined(efd_impl *impl)
{
#ifndef EFD_EXPLORE
    if (atomic_load(&holders_gen) == impl->holders_seen)
        return 0;
    efd_books_adopted(impl);
#endif
    return own_slot(impl) >= 0;
}

int
efd_books_try_read(efd_impl *impl, uint64_t *value)
{
    uint64_t now = 0;
    int s, err;
    if ((s = own_slot(impl)) < 0) {
        if ((err = claim(impl)) != 0)
            return err;
        s = own_slot(impl);
    }
    err = booked(impl, s, BK_TAKE, 0, 0, value, &now);
    if (err == 0 || err == EAGAIN)
        /* As a plain read does, after a change or on finding nothing. */
        efd_count_changed(impl, now);
    return err;
}

int
efd_books_own_held(efd_impl *impl)
{
    int s;
#ifndef EFD_EXPLORE
    if (__atomic_load_n(&impl->hslot, __ATOMIC_RELAXED) < 0
            && !slot_joined(impl))
        return 0;                       /* held nothing, ever: two loads */
#endif
    s = own_slot(impl);
    return s >= 0 && truth(impl->cnt, s, NULL) > 0;
}

int
efd_books_write(efd_impl *impl, uint64_t value, uint64_t limit,
                uint64_t *now)
{
    uint64_t moved;
    int s = own_slot(impl);
    if (s < 0) {                        /* settled meanwhile: plain */
        *now = 0;
        return ENOENT;
    }
    return booked(impl, s, BK_ADD, value, limit, &moved, now);
}

/* Book `value` units that a plain read took for this process (an event
 * loop's reader, for a task that asked for undo): 0 or an errno. */
int
efd_books_book(efd_impl *impl, uint64_t value)
{
    uint64_t moved, now;
    int s, err;
    if ((s = own_slot(impl)) < 0) {
        if ((err = claim(impl)) != 0)
            return err;
        s = own_slot(impl);
    }
    return booked(impl, s, BK_BOOK, value, 0, &moved, &now);
}

uint64_t
efd_books_held(efd_impl *impl)
{
    int s = impl->cnt != NULL ? own_slot(impl) : -1;
    if (s < 0 && impl->cnt != NULL && slot_joined(impl))
        s = own_slot(impl);
    return s < 0 ? 0 : truth(impl->cnt, s, NULL);
}

/* Whether another process's slot holds units (so that a sleeper must look
 * again now and then: their holder may die, and nobody rings for it). */
int
efd_books_foreign(efd_impl *impl)
{
    struct efd_count *c = impl->cnt;
    uint64_t j;
    int s, mine, n = slots_used(c);
    if (n == 0)
        return 0;                       /* nobody ever held: one load */
    j = atomic_load(&c->journal);
    mine = own_slot(impl);
    if (j_slot(j) >= 0 && j_slot(j) != mine && j_held(j) > 0)
        return 1;
    for (s = 0; s < n; s++)
        if (s != mine && s != j_slot(j)
                && atomic_load_explicit(&c->books[s],
                                        memory_order_relaxed) >> 23)
            return 1;
    return 0;
}

/* Whether the kernel will tell this process of the death of every other
 * process that holds units here (efd_watch.c), so that a sleeper need not
 * look again on their account: 1 yes (all watched), 0 no (look again
 * every EFD_RECHECK_MS), -1 a holder was found dead and its books were
 * settled just now (look at the count again before sleeping).  Called
 * between efd_watch_enter() and _leave(), after the caller read the
 * watcher's word: a watched holder that dies after this look moves it.
 * A holder whose pidfd said it died while its lock is still held (its
 * holder description lives on in a child) is not watched any more.  One
 * F_OFD_GETLK per holder with units, per sleep. */
int
efd_books_watched(efd_impl *impl)
{
    struct efd_count *c = impl->cnt;
    uint64_t added;
    int s, r, mine, n = slots_used(c);
#ifndef EFD_EXPLORE
    /* Pids mean the same to holders and to this sleeper only in one pid
     * namespace: the page maker's (efd_watch.c, "Which process"). */
    int same_ns = c->pidns != 0 && efd_watch_pidns() == c->pidns;
#endif
    mine = own_slot(impl);
    for (s = 0; s < n; s++) {
        if (s == mine || truth(c, s, NULL) == 0)
            continue;
#ifdef EFD_EXPLORE
        r = efd_explore_watch(s);
#else
        r = same_ns ? efd_watch_process(atomic_load(&c->holder_id[s]))
                    : ESRCH;
#endif
        EFD_POINT("books: a holder watched?");
        /* Whatever the watcher said, the lock says whether the holder
         * lives now.  Dead: settle now (its pidfd may not have been read
         * yet -- or may name another process that got its pid and its
         * start time within one clock tick).  Alive and watched: its
         * death moves the word from now on (the pidfd was opened before
         * this look; the process it names was the holder then). */
        if (!holder_alive(impl, s)) {
            (void)impl->ops->settle(impl, -1, &added);
            return -1;
        }
        if (r != 0) {
            EFD_POINT("books: a holder not watched");
            return 0;
        }
        EFD_POINT("books: a live holder watched");
    }
    return 1;
}

int
efd_books_sweep_due(efd_impl *impl)
{
    struct timespec ts;
    int64_t now, last;
    if (!efd_books_foreign(impl))
        return 0;
#ifdef EFD_EXPLORE
    return 1;                   /* no clocks in the model */
#endif
    clock_gettime(CLOCK_MONOTONIC, &ts);
    now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    last = atomic_load_explicit(&impl->swept_ns, memory_order_relaxed);
    return last == 0 || now - last >= SWEEP_GAP_NS || now < last;
}

/* Give back the units of slot `slot` (this process's own, or one it just
 * took over), or (slot < 0) of every other slot whose holder is dead. */
int
efd_books_settle(efd_impl *impl, int slot, uint64_t *added)
{
    struct timespec ts;
    uint64_t moved, now;
    int s, err, mine;
    *added = 0;
    if (slot >= 0) {
        if ((err = booked(impl, slot, BK_SETTLE, 0, 0, &moved, &now)))
            return err;
        *added = moved;
        if (moved > 0)
            efd_count_changed(impl, now);
        return 0;
    }
    mine = own_slot(impl);
    for (s = 0; s < slots_used(impl->cnt); s++) {
        if (s == mine || truth(impl->cnt, s, NULL) == 0)
            continue;
        if (booked(impl, s, BK_SETTLE_DEAD, 0, 0, &moved, &now) != 0)
            continue;                   /* alive */
        *added += moved;
        if (moved > 0)
            efd_count_changed(impl, now);
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    atomic_store_explicit(&impl->swept_ns,
                          (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec,
                          memory_order_relaxed);
    return 0;
}

/* close(): what this process holds goes back now (not when a sweeper
 * finds the byte free), and the holder description goes. */
void
efd_books_close(efd_impl *impl)
{
#ifndef EFD_EXPLORE
    struct holder **pp, *h;
    struct stat st;
    uint64_t added;
    int s;
    if (impl->cnt == NULL || (s = own_slot(impl)) < 0) {
        impl->hslot = -1;
        return;
    }
    pthread_mutex_lock(&claim_lock);
    for (pp = &holders; (h = *pp) != NULL; pp = &h->next)
        if (h->slot == s && fstat(impl->shmfd, &st) == 0
                && h->dev == st.st_dev && h->ino == st.st_ino)
            break;
    if (h != NULL && --h->refs == 0) {
        /* The process's last object of this page: what it holds goes
         * back now, and its holder description goes. */
        (void)impl->ops->settle(impl, s, &added);
        *pp = h->next;
        efd_beacon_forget(&h->fd);
        free(h);
    }
    impl->hslot = -1;
    pthread_mutex_unlock(&claim_lock);
#else
    impl->hslot = -1;
#endif
}

#else  /* no books here */

int efd_books_available(void) { return 0; }
int efd_books_probe(void) { return 0; }
int efd_books_claim(efd_impl *impl) { (void)impl; return ENOTSUP; }
void efd_books_adopted(efd_impl *impl) { (void)impl; }
int
efd_books_try_read(efd_impl *impl, uint64_t *value)
{
    (void)impl; (void)value;
    return ENOTSUP;
}
int efd_books_own_held(efd_impl *impl) { (void)impl; return 0; }
int
efd_books_write(efd_impl *impl, uint64_t value, uint64_t limit,
                uint64_t *now)
{
    (void)impl; (void)value; (void)limit; (void)now;
    return ENOTSUP;
}
uint64_t efd_books_held(efd_impl *impl) { (void)impl; return 0; }
int
efd_books_book(efd_impl *impl, uint64_t value)
{
    (void)impl; (void)value;
    return ENOTSUP;
}
int efd_books_foreign(efd_impl *impl) { (void)impl; return 0; }
int efd_books_watched(efd_impl *impl) { (void)impl; return 1; }
int efd_books_sweep_due(efd_impl *impl) { (void)impl; return 0; }
int
efd_books_settle(efd_impl *impl, int slot, uint64_t *added)
{
    (void)impl; (void)slot;
    *added = 0;
    return 0;
}
void efd_books_close(efd_impl *impl) { (void)impl; }

#endif

/* A re-check's look at the books (a blocked thread's, an event loop's, a
 * loop's helper's): give back the units of holders found dead, if this
 * process has not looked for them in the last few ms.  How many came
 * back. */
uint64_t
efd_books_sweep(efd_impl *impl)
{
    uint64_t added = 0;
    if (impl->ops->settle == NULL || !efd_books_sweep_due(impl)
            || impl->ops->settle(impl, -1, &added) != 0)
        return 0;
    return added;
}
