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
 * in step and a crossing of zero costs nothing.  arm() sets a shared flag
 * (so every process sharing the object keeps it in step from then on) and
 * syncs.  After arming, whoever moves the count across zero syncs: it marks
 * the readiness `dirty` and, if the small robust lock is free, puts or
 * takes the token to match the count, looping while someone else marked it
 * dirty meanwhile; if the lock is busy its holder does the work after
 * unlocking.  Nobody ever waits for that lock.  Readiness can lag the
 * count for an instant; a reader that polls readable and finds nothing
 * asks for a sync (repair).
 *
 * Process death.  A count change is one atomic operation.  A process killed
 * between a crossing and its sync leaves readiness out of step until the
 * next crossing or repair; one killed holding the lock is detected by the
 * robust mutex (EOWNERDEAD) and the next locker re-derives the token.  A
 * sleeper that a release chose and that then died would leave the unit
 * unclaimed while others sleep: so sleepers never sleep longer than
 * EFD_RECHECK_MS before looking again.  A sleeper killed in its sleep
 * leaves its count behind, which only costs releasers a needless
 * FUTEX_WAKE.
 */
#include "efd.h"

#include <errno.h>
#include <limits.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#if defined(__linux__)
#  include <linux/futex.h>
#  include <sys/syscall.h>
#endif

#if defined(__linux__) && defined(SYS_futex)

#define EFD_FUTEX_MAGIC 0x65666478u   /* "efdx" */

struct efd_fshared {
    uint32_t magic;
    uint32_t semaphore;
    _Atomic uint64_t count;
    _Atomic uint32_t seq;           /* the futex word */
    _Atomic uint32_t sleepers;      /* readers in FUTEX_WAIT */
    _Atomic uint32_t watchers;      /* EFD_BLOCK_READY waiters in FUTEX_WAIT */
    _Atomic uint32_t armed;         /* readiness is kept in step */
    _Atomic uint32_t dirty;         /* readiness may lag: sync it */
    uint32_t token;                 /* under the lock: the channel is readable */
    pthread_mutex_t lock;           /* robust; guards `token` only */
};

static long
futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *ts)
{
    /* Not FUTEX_PRIVATE_FLAG: the word is shared between processes. */
    return syscall(SYS_futex, (uint32_t *)word, op, val, ts, NULL, 0);
}

/* ---- readiness --------------------------------------------------------- */

/* Under the lock: the channel holds a token iff the count is above zero.
 * After a death inside the lock the token's state is unknown: drain. */
static void
sync_locked(efd_impl *impl, int owner_died)
{
    struct efd_fshared *s = impl->fsh;
    int want;
    if (owner_died) {
        efd_chan_drain(impl->fd);
        s->token = 0;
    }
    want = atomic_load(&s->count) > 0;
    if (want && !s->token) {
        efd_chan_put(impl->fd, impl->wfd);
        s->token = 1;
    }
    else if (!want && s->token) {
        efd_chan_take(impl->fd, impl->wfd);   /* one read takes the token */
        s->token = 0;
    }
}

/* Bring readiness in step with the count, without ever waiting. */
static void
sync_token(efd_impl *impl)
{
    struct efd_fshared *s = impl->fsh;
    atomic_store(&s->dirty, 1);
    for (;;) {
        int died, r = efd_robust_lock(&s->lock, 0, &died);
        if (r != 0)
            return;     /* busy: its holder looks at `dirty` after unlocking */
        atomic_store(&s->dirty, 0);
        sync_locked(impl, died);
        if (died)
            efd_robust_recovered(&s->lock);
        pthread_mutex_unlock(&s->lock);
        if (!atomic_load(&s->dirty))
            return;
    }
}

/* The count just crossed zero (either way). */
static inline void
crossed(efd_impl *impl)
{
    if (atomic_load(&impl->fsh->armed))
        sync_token(impl);
}

static void
wake(struct efd_fshared *s, int n)
{
    atomic_fetch_add(&s->seq, 1);
    (void)futex(&s->seq, FUTEX_WAKE, (uint32_t)n, NULL);
}

/* ---- operations -------------------------------------------------------- */

static int
fx_try_read(efd_impl *impl, uint64_t *value, int lock_ms)
{
    _Atomic uint64_t *count = &impl->fsh->count;
    uint64_t c = atomic_load(count), take;

    (void)lock_ms;
    do {
        if (c == 0)
            return EAGAIN;
        take = impl->semaphore ? 1 : c;
    } while (!atomic_compare_exchange_weak(count, &c, c - take));
    if (c == take)
        crossed(impl);
    *value = take;
    return 0;
}

static int
fx_try_write(efd_impl *impl, uint64_t value, int lock_ms)
{
    struct efd_fshared *s = impl->fsh;
    uint64_t c;

    (void)lock_ms;
    if (value == 0)
        return 0;
    c = atomic_load(&s->count);
    do {
        if (c > EFD_MAX - value)
            return EAGAIN;
    } while (!atomic_compare_exchange_weak(&s->count, &c, c + value));
    if (c == 0)
        crossed(impl);
    if (atomic_load(&s->watchers) > 0)
        wake(s, INT_MAX);
    else if (atomic_load(&s->sleepers) > 0)
        wake(s, impl->semaphore && value < INT_MAX ? (int)value
                : impl->semaphore ? INT_MAX : 1);
    return 0;
}

static void
fx_waitspec(efd_impl *impl, int for_write, efd_waitspec *ws)
{
    ws->fd = for_write ? -1 : impl->fd;
    ws->events = for_write ? 0 : POLLIN;
    ws->slice_ms = for_write ? 5 : EFD_RECHECK_MS;
}

static int
fx_peek(efd_impl *impl, uint64_t *value)
{
    *value = atomic_load(&impl->fsh->count);
    return 0;
}

static int
fx_repair(efd_impl *impl, int lock_ms)
{
    (void)lock_ms;
    if (atomic_load(&impl->fsh->armed))
        sync_token(impl);
    return 0;
}

static void
fx_arm(efd_impl *impl)
{
    struct efd_fshared *s = impl->fsh;
    if (!atomic_load(&s->armed)) {
        atomic_store(&s->armed, 1);
        sync_token(impl);
    }
}

static uint32_t
fx_ticket(efd_impl *impl)
{
    return atomic_load(&impl->fsh->seq);
}

static int
fx_block(efd_impl *impl, int kind, uint32_t ticket, int ms)
{
    struct efd_fshared *s = impl->fsh;
    _Atomic uint32_t *who = NULL;
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
        who = kind == EFD_BLOCK_READY ? &s->watchers : &s->sleepers;
        atomic_fetch_add(who, 1);
        if (atomic_load(&s->count) > 0) {
            atomic_fetch_sub(who, 1);
            return 0;
        }
    }
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    if (futex(&s->seq, FUTEX_WAIT, ticket, &ts) < 0
            && errno != EAGAIN && errno != ETIMEDOUT)
        err = errno;
    if (who != NULL)
        atomic_fetch_sub(who, 1);
    return err;
}

static void
fx_interrupt(efd_impl *impl, int all)
{
    struct efd_fshared *s = impl->fsh;
    if (all)
        wake(s, INT_MAX);
    else if (atomic_load(&s->count) > 0) {
        if (atomic_load(&s->watchers) > 0)
            wake(s, INT_MAX);
        else if (atomic_load(&s->sleepers) > 0)
            wake(s, 1);
    }
}

static int
fx_fds(efd_impl *impl, int *out, int max)
{
    int n = impl->wfd != impl->fd ? 3 : 2;
    if (max < n)
        return 0;
    out[0] = impl->shmfd;
    out[1] = impl->fd;
    if (n == 3)
        out[2] = impl->wfd;
    return n;
}

static void
fx_close(efd_impl *impl)
{
    if (impl->fsh != NULL) {
        munmap((void *)impl->fsh, sizeof(struct efd_fshared));
        impl->fsh = NULL;
    }
    efd_chan_close(&impl->fd, &impl->wfd);
    efd_close_fd(&impl->shmfd);
}

/* ---- creation ---------------------------------------------------------- */

int
efd_futex_probe(void)
{
    _Atomic uint32_t word = 0;
    return futex(&word, FUTEX_WAKE, 1, NULL) < 0 ? errno : 0;
}

static int
fx_open(efd_impl *impl, uint64_t initval, int semaphore, int cloexec)
{
    void *map = NULL;
    int err;

    impl->fd = impl->wfd = impl->shmfd = -1;
    impl->fsh = NULL;
    impl->semaphore = semaphore;
    /* A sandbox may refuse futex(): find out now, not in a wait. */
    if ((err = efd_futex_probe()) != 0)
        return err;
    if ((err = efd_shm_new(sizeof(struct efd_fshared), cloexec,
                           &impl->shmfd, &map)))
        return err;
    impl->fsh = (struct efd_fshared *)map;
    atomic_store(&impl->fsh->count, initval);
    if ((err = efd_robust_init(&impl->fsh->lock)))
        goto fail;
    if ((err = efd_chan_open(&impl->fd, &impl->wfd, 1, cloexec)))
        goto fail;
    impl->fsh->semaphore = (uint32_t)semaphore;
    impl->fsh->magic = EFD_FUTEX_MAGIC;
    return 0;
fail:
    fx_close(impl);
    return err;
}

/* Adopt (shared memory, readiness fd[, its write end]), from fx_fds(). */
static int
fx_adopt(efd_impl *impl, const int *fds, int nfds, int semaphore)
{
    void *map = NULL;
    int err;

    impl->fd = impl->wfd = impl->shmfd = -1;
    impl->fsh = NULL;
    if (nfds != 2 && nfds != 3)
        return EINVAL;
    if ((err = efd_shm_adopt(fds[0], sizeof(struct efd_fshared), &map)))
        return err;
    if (((struct efd_fshared *)map)->magic != EFD_FUTEX_MAGIC) {
        munmap(map, sizeof(struct efd_fshared));
        return EINVAL;
    }
    impl->fsh = (struct efd_fshared *)map;
    impl->shmfd = fds[0];
    impl->fd = fds[1];
    impl->wfd = nfds == 3 ? fds[2] : fds[1];
    impl->semaphore = semaphore >= 0 ? semaphore : (int)impl->fsh->semaphore;
    return 0;
}

const efd_backend efd_backend_futex = {
    "futex", 0, fx_open, fx_adopt, fx_try_read, fx_try_write,
    fx_waitspec, fx_peek, fx_repair, NULL, fx_arm, fx_ticket, fx_block,
    fx_interrupt, fx_fds, fx_close,
};

#else  /* no futex here */

int
efd_futex_probe(void)
{
    return ENOSYS;
}

const efd_backend efd_backend_futex = {
    "futex", 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL, NULL, NULL,
};

#endif
