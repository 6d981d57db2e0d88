/*
 * explore.c -- an interleaving explorer (a small CHESS-style stateless
 * model checker) for the shared-memory protocols of the pipe and futex
 * backends (efd_shm.c, efd_futex.c).
 *
 * What it does.  Built with -DEFD_EXPLORE, the protocol code calls
 * efd_explore_point("name") at every step another actor could see (see
 * src/efd_explore.h), and its futex() calls efd_explore_futex().  Here the
 * actors of a scenario (scenarios.c: two or three pthreads, each running a
 * body that drives one efd object through the backend table) run under a
 * cooperative scheduler: exactly one runs at a time, and at each point it
 * hands control back to the main thread, which picks who runs next -- or,
 * with -k, that the running actor dies right there (pthread_exit() from
 * inside the point: the kernel's robust-list handling then marks the
 * robust lock it may hold owner-died, as a SIGKILL would).
 *
 * The search is stateless depth-first by re-execution with preemption
 * bounding: every schedule starts from a fresh object; the choices made at
 * each decision (the enabled actors, the choice, the preemptions so far)
 * are recorded, and the next schedule replays the longest prefix that
 * still has an untried alternative within the bound (-p, default 2), takes
 * it, and goes on with the default choice (keep running the same actor).
 * Switching away from an actor that could go on costs one preemption;
 * switching when it blocked, finished or died costs none.  At most one
 * death per schedule.
 *
 * The futex model.  FUTEX_WAIT returns EAGAIN if the word differs, else
 * blocks the actor on the word (FIFO).  It becomes runnable when a
 * FUTEX_WAKE picks it (returns 0) or -- only when nobody else can run
 * (quiescence) and the wait had a timeout -- by timing out (ETIMEDOUT):
 * that is the sleeper's 100 ms re-check, and a timeout that was needed
 * while units were there is recorded as a lost wake-up.  FUTEX_WAKE(n)
 * wakes up to n actors blocked on the word, oldest first.  Entering each
 * is a point of its own.
 *
 * The invariants, checked after every step, at every quiescence and after
 * every schedule: the count is conserved (initial + released - acquired,
 * give or take the in-flight operation of a dead actor); readiness of the
 * fd (poll) equals "count > 0" once everyone is done, where the scenario
 * keeps readiness in step (after a death: once one more operation by a
 * live process has run); no live reader or watcher sleeps in FUTEX_WAIT
 * with units there and nobody left to wake it (without a death); the page
 * counts at least as many sleepers (watchers) as actors actually asleep;
 * and no reader gives up while units are there.
 *
 * A loop's ring (efd_ring.c) is modelled too: a submitted FUTEX_WAIT is
 * checked and queued at once among the word's sleepers, a cancel takes it
 * off or finds it woken, its completions wait in the actor's ring, and a
 * dead actor's wait stays queued (the kernel keeps a killed process's
 * requests until it tears its ring down).  act_loop_acquire drives the
 * loop sleeper as efd/_aio.py does.
 *
 * What it does not cover: the kernel backends, the herd and the wait loop
 * itself (act_acquire mirrors its protocol), more than three actors, or
 * weak memory orders: the schedules are sequentially consistent
 * interleavings of the real code at the named points only.  (The kernel
 * counter's loop helpers, whose protocol is mostly the kernel's epoll, are
 * checked against a model of it instead: herd_model.py.)
 *
 * Usage: explore [-p BOUND] [-k] [-s SCENARIO] [-P] [-B] [-W] [-m MAX] [-l] [-v]
 *   -p N   preemption bound (default 2)
 *   -k     also explore a death of the running actor at every point
 *   -s S   run only scenario S (default: all)
 *   -P     channels are pipes, never eventfds (impl.chan_eventfd = 0)
 *   -B     the futex backend without its death bell (impl.bell = 0): its
 *          sleepers re-check every 100 ms instead
 *   -W     no holders' watcher (pidfds refused): sleepers re-check every
 *          100 ms while another actor holds units
 *   -m N   stop a scenario after N schedules (0: no limit)
 *   -l     list the scenarios
 *   -v     list the points each scenario reached
 * Exit status 1 if any invariant failed (the first failing schedule of
 * each scenario is printed as a trace), 2 on a usage or setup error.
 */
#define _GNU_SOURCE 1
#include "explore.h"
#include "efd_explore.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <signal.h>

int efd_explore_sleepers(efd_impl *impl, int kind);   /* efd_futex.c */

#define MAX_ACTORS 3
#define MAX_OPTS 8
#define MAX_DECISIONS 8192
#define MAX_STEPS 20000
#define MAX_TRACE 8192
#define MAX_NAMES 256
#define STUCK_SECONDS 30
#define NOVAL LLONG_MIN              /* a trace note without a number */

/* ---- state ------------------------------------------------------------- */

enum { ST_RUNNABLE, ST_BLOCKED, ST_DONE, ST_DEAD };

/* The thread that plays actor slot i, kept from one schedule to the next.
 * Only a death ends one (pthread_exit() at a point); an actor that finishes
 * its body waits for the next schedule.  A search runs hundreds of
 * thousands of schedules: with a thread or three made and ended for each,
 * the kernel's deferred freeing of their stacks (after an RCU grace period,
 * by a workqueue) fell minutes behind on a 2-CPU machine, and the whole
 * machine stalled with it -- other CI lanes' processes sat runnable and
 * unanswering for a minute (test_prefork_server's gunicorn). */
typedef struct {
    pthread_t thread;
    sem_t go;                       /* the scheduler lets it run */
    _Atomic long tid;               /* its kernel thread id (0: not yet) */
    int exists;                     /* started, not died */
    ex_actor *actor;                /* whom it plays in this schedule */
} ex_thread;

struct ex_actor {
    int id;
    char name;                      /* 'A', 'B', 'C' */
    ex_body body;
    ex_thread *th;                  /* its thread (threads[id]) */
    int state;
    int die;                        /* told to die at its next resume */
    /* the futex model */
    _Atomic uint32_t *word;         /* blocked on it */
    _Atomic uint32_t *more[5];      /* futex_waitv's other words, or NULL */
    int woke_on;                    /* futex_waitv: index of the word */
    /* its robust-list head (the kernel's ABI), which the futex backend's
     * death bell arms: at its death the model does what the kernel does
     * with list_op_pending (efd_futex.c) */
    struct robust_list_head head;
    int has_timeout, timed_out;
    unsigned long wait_order;       /* FIFO among the word's waiters */
    int kind;                       /* in block(): EFD_BLOCK_*, else -1 */
    /* the books */
    uint64_t released, acquired;
    uint64_t held;                  /* booked to its slot (efd_books.c) */
    int untimed;                    /* act_acquire_untimed() */
    int64_t inflight;               /* change an operation may be making */
    int gave_up;
    /* A loop's ring (efd_ring.c, modelled): the FUTEX_WAIT in flight,
     * queued on ring_word until a FUTEX_WAKE picks it or a cancel takes
     * it off -- and, as the kernel keeps a killed process's requests
     * until it tears its ring down, still queued after the actor died;
     * the requests submitted next; the completions not read yet. */
    _Atomic uint32_t *ring_word;
    unsigned long ring_order;
    uint64_t ring_tag;
    struct { int cancel; _Atomic uint32_t *word; uint32_t val;
             uint64_t tag, ctag; } ring_sq[4];
    int ring_nsq;
    struct { uint64_t tag; int32_t res; } ring_cq[8];
    int ring_ncq;
    int ring_waiting;               /* blocked in its loop, on the ring */
};

enum { OPT_RUN, OPT_DIE, OPT_TIMEOUT };
typedef struct {
    unsigned char kind, actor, cost;
} ex_opt;

typedef struct {
    int nopts, chosen, pre;         /* pre: preemptions before it */
    const char *where;              /* replay check */
    ex_opt opts[MAX_OPTS];
} ex_decision;

enum { TR_POINT, TR_NOTE, TR_SCHED, TR_VIOLATION };

/* The invariants, for the per-scenario tally. */
enum { V_UNCOUNTED, V_LOST, V_CONSERVED, V_GAVE_UP, V_READINESS, V_KINDS };
static const char *const v_names[V_KINDS] = {
    "sleeper missing from count", "lost wake-up", "count not conserved",
    "gave up with units there", "readiness out of step",
};
typedef struct {
    signed char actor;              /* -1: the scheduler */
    char kind;
    const char *text;
    long long v;
} ex_trace;

/* One schedule's run. */
static struct {
    const ex_scenario *sc;
    efd_impl impl;
    ex_actor actors[MAX_ACTORS];
    int n, cur, pre, died, steps, ndec;
    unsigned long wait_clock;
    sem_t sched;
    char violation[512];            /* the first one, "" if none */
    char vmsg[V_KINDS][256];        /* each kind's message, once */
    unsigned vseen;                 /* kinds seen in this schedule */
    int ntrace;
    ex_trace trace[MAX_TRACE];
} R;

/* The search and the scenario's totals. */
static struct {
    int bound, kill, pipe_chan, show_points, no_bell, no_watch;
    long max_schedules;
    ex_decision dec[MAX_DECISIONS];
    int nreplay;
    long schedules, deaths, timeouts, lost, violations, vkinds[V_KINDS];
    long threads;                   /* actor threads started (ex_thread) */
    const char *names[MAX_NAMES];   /* distinct point names seen */
    int nnames;
    /* The first failing schedule of each kind of violation. */
    struct ex_failure {
        int have;
        char msg[256];
        char vmsg[V_KINDS][256];
        int ntrace;
        ex_trace trace[MAX_TRACE];
    } first[V_KINDS];
} S;

static __thread ex_actor *self_actor;
static ex_thread threads[MAX_ACTORS];
static const volatile uint32_t proc_zero = 0;

/* ---- small helpers ----------------------------------------------------- */

static void
die_setup(const char *what, int err)
{
    fprintf(stderr, "explore: %s: %s\n", what, strerror(err));
    exit(2);
}

static void
trace_add(int actor, int kind, const char *text, long long v)
{
    if (R.ntrace < MAX_TRACE) {
        ex_trace *t = &R.trace[R.ntrace++];
        t->actor = (signed char)actor;
        t->kind = (char)kind;
        t->text = text;
        t->v = v;
    }
}

static void
note(ex_actor *a, const char *text, long long v)
{
    trace_add(a ? a->id : -1, TR_NOTE, text, v);
}

/* Remember a point name (distinct by text; pointers are looked at first). */
static void
name_seen(const char *name)
{
    int i;
    for (i = 0; i < S.nnames; i++)
        if (S.names[i] == name)
            return;
    for (i = 0; i < S.nnames; i++)
        if (strcmp(S.names[i], name) == 0)
            return;
    if (S.nnames < MAX_NAMES)
        S.names[S.nnames++] = name;
}

static int
distinct_names(void)
{
    int i, j, n = 0;
    for (i = 0; i < S.nnames; i++) {
        for (j = 0; j < i; j++)
            if (strcmp(S.names[i], S.names[j]) == 0)
                break;
        n += j == i;
    }
    return n;
}

/* Record that invariant `kind` failed (once per kind and schedule). */
static void
violation(int kind, const char *fmt, ...)
{
    va_list ap;
    if (R.vseen & (1u << kind))
        return;
    R.vseen |= 1u << kind;
    va_start(ap, fmt);
    vsnprintf(R.vmsg[kind], sizeof(R.vmsg[kind]), fmt, ap);
    va_end(ap);
    if (R.violation[0] == '\0')
        snprintf(R.violation, sizeof(R.violation), "%s", R.vmsg[kind]);
    trace_add(-1, TR_VIOLATION, NULL, kind);
}

static uint64_t
count_now(void)
{
    uint64_t v = 0;
    (void)R.impl.ops->peek(&R.impl, &v);
    return v;
}

static int
fd_readable(int fd)
{
    struct pollfd p = { fd, POLLIN, 0 };
    return poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

static int
open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;
    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* ---- the actors' side of the hand-over --------------------------------- */

static void
sched_wait(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += STUCK_SECONDS;
    while (sem_timedwait(&R.sched, &ts) < 0) {
        if (errno == EINTR)
            continue;
        fprintf(stderr, "explore: an actor ran %d s without reaching a "
                "point (a loop with no EFD_POINT?)\n", STUCK_SECONDS);
        abort();
    }
}

/* Hand control to the scheduler; come back when it says so -- or die. */
static void
yield_to_scheduler(ex_actor *a)
{
    sem_post(&R.sched);
    while (sem_wait(&a->th->go) < 0)
        ;
    if (a->die) {
        a->state = ST_DEAD;
        a->th->exists = 0;
        sem_post(&R.sched);
        pthread_exit(NULL);
    }
}

void
efd_explore_point(const char *name)
{
    ex_actor *a = self_actor;
    if (a == NULL)
        return;                     /* the main thread: set-up, checks */
    name_seen(name);
    trace_add(a->id, TR_POINT, name, 0);
    yield_to_scheduler(a);
}

/* An actor's thread: plays its slot's actor in schedule after schedule,
 * until it dies at a point.  The scheduler names the actor (th->actor)
 * before the first go of each schedule. */
static void *
actor_main(void *arg)
{
    ex_thread *th = arg;
    th->tid = syscall(SYS_gettid);
    for (;;) {
        ex_actor *a;
        while (sem_wait(&th->go) < 0)
            ;
        a = th->actor;
        self_actor = a;
        a->body(a);
        self_actor = NULL;
        a->state = ST_DONE;
        trace_add(a->id, TR_NOTE, "done", NOVAL);
        sem_post(&R.sched);
    }
    return NULL;
}

/* ---- who lives ------------------------------------------------------- */

/* The page lock asks whether its holder lives: an actor that died at a
 * point is gone at once (the kernel reaps a killed thread in its own time,
 * which a replay could not reproduce); anyone else lives. */
int
efd_explore_alive(long tgid, long tid)
{
    int i;
    if (tgid != (long)getpid())
        return tgid > 0 && tid > 0 && kill((pid_t)tgid, 0) == 0;
    for (i = 0; i < R.n; i++)
        if (R.actors[i].th->tid == tid)
            return R.actors[i].state != ST_DEAD;
    return 1;
}

/* The books (efd_books.c): actor i holds slot i; the scheduler none.  A
 * holder lives until it dies at a point, as the kernel's OFD lock says. */
int
efd_explore_own_slot(void)
{
    return self_actor != NULL ? self_actor->id : -1;
}

int
efd_explore_holder_alive(int slot)
{
    return slot >= 0 && slot < R.n && R.actors[slot].state != ST_DEAD;
}

/* The holders' watcher (efd_watch.c): a sleeper enters (its own word),
 * asks for slot s's holder to be watched, sleeps, and leaves; the kernel
 * (pidfd) and the watcher thread move the word of each sleeper that
 * refers to a holder when that holder dies, and wake it.  Modelled as one
 * step at the death (model_watch_death): nothing the protocol can see
 * lies between the two -- the holder's lock goes at its death, and the
 * sleepers sleep on their words from before they look at the locks.  A
 * sleeper's references go at its enter and leave, as the watcher's list
 * forgets them: only the sleepers that asked are told.  -W: no pidfds
 * here (every watch says ENOSYS). */
static _Atomic uint32_t model_word[MAX_ACTORS];
static int model_refers[MAX_ACTORS][MAX_ACTORS];    /* [holder][sleeper] */

static void
model_forget_refs(int sleeper)
{
    int h;
    for (h = 0; h < MAX_ACTORS; h++)
        model_refers[h][sleeper] = 0;
}

int
efd_explore_watch(int slot)
{
    if (S.no_watch)
        return ENOSYS;
    if (!efd_explore_holder_alive(slot))
        return ESRCH;
    model_refers[slot][self_actor->id] = 1;
    return 0;
}

_Atomic uint32_t *
efd_explore_watch_enter(void)
{
    model_forget_refs(self_actor->id);
    return &model_word[self_actor->id];
}

void
efd_explore_watch_leave(void)
{
    model_forget_refs(self_actor->id);
}

/* ---- the futex model --------------------------------------------------- */

/* Which of its words a blocked actor waits on `word` as (0: the first,
 * 1.. futex_waitv's others), or -1. */
static int
waits_on(const ex_actor *b, _Atomic uint32_t *word)
{
    int i;
    if (b->word == word)
        return 0;
    for (i = 0; i < 5; i++)
        if (b->more[i] == word)
            return i + 1;
    return -1;
}

/* A completion in actor b's ring; a loop blocked on it wakes. */
static void
ring_complete(ex_actor *b, uint64_t tag, int32_t res)
{
    if (b->ring_ncq >= 8) {
        fprintf(stderr, "explore: a ring's completion queue overflowed\n");
        abort();
    }
    b->ring_cq[b->ring_ncq].tag = tag;
    b->ring_cq[b->ring_ncq].res = res;
    b->ring_ncq++;
    if (b->state == ST_BLOCKED && b->ring_waiting) {
        b->state = ST_RUNNABLE;
        b->timed_out = 0;
    }
}

/* Wake up to n actors blocked on word -- or rings' waits queued on it,
 * a dead actor's included -- oldest first. */
static long
model_wake(_Atomic uint32_t *word, uint32_t n)
{
    long woken = 0;
    while ((uint32_t)woken < n) {
        ex_actor *best = NULL, *ring = NULL;
        int i;
        for (i = 0; i < R.n; i++) {
            ex_actor *b = &R.actors[i];
            if (b->state == ST_BLOCKED && waits_on(b, word) >= 0
                    && (best == NULL || b->wait_order < best->wait_order))
                best = b;
        }
        for (i = 0; i < R.n; i++) {
            ex_actor *b = &R.actors[i];
            if (b->ring_word == word
                    && (ring == NULL || b->ring_order < ring->ring_order))
                ring = b;
        }
        if (ring != NULL && (best == NULL
                             || ring->ring_order < best->wait_order)) {
            ring->ring_word = NULL;
            trace_add(ring->id, TR_NOTE, ring->state == ST_DEAD
                      ? "ring: its FUTEX_WAIT woken (the actor is dead)"
                      : "ring: its FUTEX_WAIT woken", NOVAL);
            ring_complete(ring, ring->ring_tag, 0);
            woken++;
            continue;
        }
        if (best == NULL)
            break;
        best->state = ST_RUNNABLE;
        best->timed_out = 0;
        best->woke_on = waits_on(best, word);
        trace_add(best->id, TR_NOTE, "futex: woken by FUTEX_WAKE", NOVAL);
        woken++;
    }
    return woken;
}

/* The actor sleeps (FIFO among the sleepers) until a wake-up makes it
 * runnable or, at quiescence, its timeout (if it has one) comes. */
static void
sleep_actor(ex_actor *a, int has_timeout, const char *what)
{
    a->has_timeout = has_timeout;
    a->timed_out = 0;
    a->wait_order = ++R.wait_clock;
    a->state = ST_BLOCKED;
    note(a, what, NOVAL);
    yield_to_scheduler(a);
}

static long
model_wait(ex_actor *a, _Atomic uint32_t *word, uint32_t val,
           const struct timespec *timeout)
{
    efd_explore_point("futex: FUTEX_WAIT");
    if (atomic_load(word) != val) {
        note(a, "futex: EAGAIN (word moved)", NOVAL);
        errno = EAGAIN;
        return -1;
    }
    a->word = word;
    sleep_actor(a, timeout != NULL, "futex: asleep");
    a->word = NULL;
    if (a->timed_out) {
        errno = ETIMEDOUT;
        return -1;
    }
    return 0;
}

/* futex_waitv on up to 5 words (the futex backend's death bell): the
 * values are checked and the actor queued on all of them in one step, as
 * the kernel does. */
long
efd_explore_futex_waitv(_Atomic uint32_t *const *words, const uint32_t *vals,
                        int n, int has_timeout)
{
    ex_actor *a = self_actor;
    int i;
    if (a == NULL || n < 1 || n > 6) {
        fprintf(stderr, "explore: futex_waitv outside an actor or with %d "
                "words\n", n);
        abort();
    }
    efd_explore_point("futex: FUTEX_WAITV");
    for (i = 0; i < n; i++)
        if (atomic_load(words[i]) != vals[i]) {
            note(a, "futex_waitv: EAGAIN (word moved), index", i);
            errno = EAGAIN;
            return -1;
        }
    a->word = words[0];
    for (i = 0; i < 5; i++)
        a->more[i] = i + 1 < n ? words[i + 1] : NULL;
    a->woke_on = 0;
    sleep_actor(a, has_timeout, "futex_waitv: asleep");
    a->word = a->more[0] = a->more[1] = a->more[2] = a->more[3] = NULL;
    a->more[4] = NULL;
    if (a->timed_out) {
        errno = ETIMEDOUT;
        return -1;
    }
    return a->woke_on;
}

/* ---- the ring model (what efd_ring.c does, as far as the protocol sees:
 * a submitted FUTEX_WAIT is checked and queued at once; a cancel takes a
 * queued one off, or finds it completed; completions wait to be read) */

int
efd_ring_open(efd_ring *r)
{
    memset(r, 0, sizeof(*r));
    r->fd = 0;
    return 0;
}

void
efd_ring_close(efd_ring *r)
{
    ex_actor *a = self_actor;
    r->fd = -1;
    if (a != NULL) {
        a->ring_word = NULL;        /* a closed ring's waits are gone */
        a->ring_nsq = a->ring_ncq = 0;
    }
}

/* Queue one submission in the actor's ring (submitted by efd_ring_submit). */
static int
ring_queue(int cancel, _Atomic uint32_t *word, uint32_t val, uint64_t tag,
           uint64_t ctag)
{
    ex_actor *a = self_actor;
    if (a == NULL || a->ring_nsq >= 4)
        abort();
    a->ring_sq[a->ring_nsq].cancel = cancel;
    a->ring_sq[a->ring_nsq].word = word;
    a->ring_sq[a->ring_nsq].val = val;
    a->ring_sq[a->ring_nsq].tag = tag;
    a->ring_sq[a->ring_nsq].ctag = ctag;
    a->ring_nsq++;
    return 0;
}

int
efd_ring_wait(efd_ring *r, _Atomic uint32_t *word, uint32_t val,
              uint64_t tag)
{
    (void)r;
    return ring_queue(0, word, val, tag, 0);
}

int
efd_ring_cancel(efd_ring *r, uint64_t tag, uint64_t cancel_tag)
{
    (void)r;
    return ring_queue(1, NULL, 0, tag, cancel_tag);
}

int
efd_ring_submit(efd_ring *r)
{
    ex_actor *a = self_actor;
    int i;
    (void)r;
    if (a == NULL)
        abort();                    /* only actors have rings */
    for (i = 0; i < a->ring_nsq; i++) {
        if (!a->ring_sq[i].cancel) {
            efd_explore_point("ring: FUTEX_WAIT submitted");
            if (atomic_load(a->ring_sq[i].word) != a->ring_sq[i].val) {
                note(a, "ring: FUTEX_WAIT EAGAIN (word moved)", NOVAL);
                ring_complete(a, a->ring_sq[i].tag, -EAGAIN);
                continue;
            }
            a->ring_word = a->ring_sq[i].word;
            a->ring_tag = a->ring_sq[i].tag;
            a->ring_order = ++R.wait_clock;
            note(a, "ring: FUTEX_WAIT queued", NOVAL);
        }
        else {
            efd_explore_point("ring: cancel submitted");
            if (a->ring_word != NULL && a->ring_tag == a->ring_sq[i].tag) {
                a->ring_word = NULL;
                note(a, "ring: cancelled the queued wait", NOVAL);
                ring_complete(a, a->ring_sq[i].tag, -ECANCELED);
                ring_complete(a, a->ring_sq[i].ctag, 0);
            }
            else {
                note(a, "ring: nothing to cancel (it completed)", NOVAL);
                ring_complete(a, a->ring_sq[i].ctag, -ENOENT);
            }
        }
    }
    a->ring_nsq = 0;
    return 0;
}

int
efd_ring_next(efd_ring *r, uint64_t *tag, int32_t *res)
{
    ex_actor *a = self_actor;
    (void)r;
    if (a == NULL || a->ring_ncq == 0)
        return 0;
    *tag = a->ring_cq[0].tag;
    *res = a->ring_cq[0].res;
    memmove(&a->ring_cq[0], &a->ring_cq[1],
            (size_t)(a->ring_ncq - 1) * sizeof(a->ring_cq[0]));
    a->ring_ncq--;
    return 1;
}

int
efd_ring_probe(void)
{
    return 0;
}

struct robust_list_head *
efd_explore_robust_head(void)
{
    return self_actor != NULL ? &self_actor->head : NULL;
}

/* What the kernel does when a thread dies with its robust list's pending
 * slot set (handle_futex_death): if the word it names has no owner, wake
 * one waiter on it. */
static void
model_robust_death(ex_actor *a)
{
    _Atomic uint32_t *word;
    if (a->head.list_op_pending == NULL)
        return;
    word = (_Atomic uint32_t *)(void *)((char *)a->head.list_op_pending
                                        + a->head.futex_offset);
    if ((atomic_load(word) & FUTEX_TID_MASK) == 0) {
        long n = model_wake(word, 1);
        trace_add(a->id, TR_NOTE, "kernel: its pending robust op rings "
                  "the bell; woke", n);
    }
}

/* A watched holder died: its pidfd is readable, the watcher moves the
 * words of the sleepers that refer to it and wakes them (efd_watch.c). */
static void
model_watch_death(ex_actor *a)
{
    long n = 0;
    int s, told = 0;
    for (s = 0; s < MAX_ACTORS; s++) {
        if (!model_refers[a->id][s])
            continue;
        atomic_fetch_add(&model_word[s], 1);
        n += model_wake(&model_word[s], INT32_MAX);
        told = 1;
    }
    if (told)
        trace_add(a->id, TR_NOTE, "kernel: its pidfd is readable; the "
                  "watcher woke", n);
}

long
efd_explore_futex(_Atomic uint32_t *word, int op, uint32_t val,
                  const struct timespec *timeout)
{
    ex_actor *a = self_actor;
    long n;
    switch (op & FUTEX_CMD_MASK) {
    case FUTEX_WAIT:
        if (a == NULL) {
            fprintf(stderr, "explore: FUTEX_WAIT outside an actor\n");
            abort();
        }
        return model_wait(a, word, val, timeout);
    case FUTEX_WAKE:
        if (a != NULL)
            efd_explore_point("futex: FUTEX_WAKE");
        n = model_wake(word, val);
        note(a, "futex: FUTEX_WAKE woke", n);
        return n;
    default:
        fprintf(stderr, "explore: futex op %d is not modelled\n", op);
        abort();
    }
}

/* ---- what bodies call -------------------------------------------------- */

efd_impl *
act_impl(ex_actor *a)
{
    (void)a;
    return &R.impl;
}

/* A read that found nothing settles the books of holders found dead and
 * tries once more, as efd_wait()'s attempt() does. */
static int
read_or_settle(int hold, uint64_t *v)
{
    efd_impl *impl = &R.impl;
    uint64_t added = 0;
    int err = hold ? impl->ops->try_read_hold(impl, v)
                   : impl->ops->try_read(impl, v);
    if (err != EAGAIN || impl->ops->settle == NULL
            || !efd_books_sweep_due(impl)
            || impl->ops->settle(impl, -1, &added) != 0 || added == 0)
        return err;
    return hold ? impl->ops->try_read_hold(impl, v)
                : impl->ops->try_read(impl, v);
}

int
act_try_read(ex_actor *a)
{
    uint64_t v = 0;
    int err;
    note(a, "> try_read", NOVAL);
    /* counter mode: a read dead in flight may have taken anything */
    a->inflight = R.sc->counter ? INT64_MIN : -1;
    err = read_or_settle(0, &v);
    a->inflight = 0;
    if (err == 0)
        a->acquired += v;
    note(a, err ? "< try_read: EAGAIN" : "< try_read: took",
         err ? NOVAL : (long long)v);
    return err;
}

int
act_hold(ex_actor *a)
{
    uint64_t v = 0;
    int err;
    note(a, "> try_read_hold", NOVAL);
    /* Exact: a booked read dead anywhere is undone by the settlement. */
    a->inflight = 0;
    err = read_or_settle(1, &v);
    if (err == 0) {
        a->acquired += v;
        a->held += v;
    }
    note(a, err ? "< try_read_hold: EAGAIN" : "< try_read_hold: took",
         err ? NOVAL : (long long)v);
    return err;
}

int
act_settle(ex_actor *a)
{
    uint64_t added = 0;
    int err;
    note(a, "> settle(dead holders)", NOVAL);
    a->inflight = 0;
    err = R.impl.ops->settle(&R.impl, -1, &added);
    note(a, "< settle: gave back", (long long)added);
    return err;
}

/* A release settles the releaser's books first (efd_books.c): the part
 * that is booked is exact after a death (the settlement gives back what
 * the release did not); the rest may or may not have been added. */
static uint64_t
books_part(ex_actor *a, uint64_t n)
{
    return a->held < n ? a->held : n;
}

int
act_release(ex_actor *a, uint64_t n)
{
    int err;
    note(a, "> try_write", (long long)n);
    a->inflight = (int64_t)(n - books_part(a, n));
    err = R.impl.ops->try_write(&R.impl, n);
    a->inflight = 0;
    if (err == 0) {
        a->released += n;
        a->held -= books_part(a, n);
    }
    note(a, err ? "< try_write: failed" : "< try_write: added", (long long)n);
    return err;
}

int
act_release_limit(ex_actor *a, uint64_t n, uint64_t limit)
{
    int err;
    note(a, "> try_write_limit", (long long)n);
    a->inflight = (int64_t)(n - books_part(a, n));
    err = R.impl.ops->try_write_limit(&R.impl, n, limit);
    a->inflight = 0;
    if (err == 0) {
        a->released += n;
        a->held -= books_part(a, n);
    }
    note(a, err ? "< try_write_limit: refused" : "< try_write_limit: added",
         (long long)n);
    return err;
}

/* The wait is over (what efd_wait() does last): it owes nobody now. */
static void
act_unblock(ex_actor *a)
{
    if (R.impl.ops->unblock != NULL) {
        note(a, "> unblock", NOVAL);
        R.impl.ops->unblock(&R.impl);
    }
}

/* One sleep in block(); counts a timeout.  Returns its error.  An
 * untimed actor passes no time limit of its own (a caller without a
 * deadline): it times out only where block() looks again by itself. */
static int
act_block(ex_actor *a, int kind, uint32_t ticket, int *timeouts)
{
    int err;
    note(a, kind == EFD_BLOCK_READ ? "> block(READ), ticket"
                                   : "> block(READY), ticket", ticket);
    a->kind = kind;
    err = R.impl.ops->block(&R.impl, kind, ticket,
                            a->untimed ? -1 : EFD_RECHECK_MS);
    a->kind = -1;
    if (err == ETIMEDOUT)
        ++*timeouts;
    note(a, err == ETIMEDOUT ? "< block: timed out (re-check)"
            : err ? "< block: error" : "< block: back",
         NOVAL);
    return err;
}

int
act_acquire(ex_actor *a)
{
    efd_impl *impl = &R.impl;
    int timeouts = 0;
    note(a, "> acquire (blocking)", NOVAL);
    for (;;) {
        uint32_t t = EX_TICKET(impl, EFD_BLOCK_READ);
        int err;
        if (act_try_read(a) == 0) {
            act_unblock(a);
            note(a, "< acquire: took a unit", NOVAL);
            return 0;
        }
        if (timeouts >= EX_MAX_TIMEOUTS)
            break;
        err = act_block(a, EFD_BLOCK_READ, t, &timeouts);
        if (err && err != ETIMEDOUT)
            break;
    }
    /* Leaving without a unit: pass on a wake-up we may have been chosen
     * for (what efd_wait() does). */
    note(a, "> interrupt(0): pass a wake-up on", NOVAL);
    impl->ops->interrupt(impl, 0);
    act_unblock(a);
    a->gave_up++;
    note(a, "< acquire: gave up", NOVAL);
    return EAGAIN;
}

int
act_acquire_untimed(ex_actor *a)
{
    int r;
    a->untimed = 1;
    r = act_acquire(a);
    a->untimed = 0;
    return r;
}

/* A loop's helper chosen by a release whose loop then rests (its task
 * cancelled): it passes the wake-up on and only then disarms
 * (helper_leave()).  Returns EAGAIN. */
int
act_helper_rests(ex_actor *a)
{
    efd_impl *impl = &R.impl;
    int timeouts = 0;
    uint32_t t = EX_TICKET(impl, EFD_BLOCK_READ);
    a->untimed = 1;
    note(a, "> acquire_async (a loop's helper; the task is cancelled)", NOVAL);
    if (atomic_load(&impl->cnt->count) == 0)
        (void)act_block(a, EFD_BLOCK_READ, t, &timeouts);
    a->untimed = 0;
    EFD_POINT("helper: the loop rests");
    note(a, "> interrupt(0): pass a wake-up on", NOVAL);
    impl->ops->interrupt(impl, 0);
    act_unblock(a);
    /* Cancelled, not given up: no waiter any more (gave_up stays 0). */
    note(a, "< acquire_async: cancelled", NOVAL);
    return EAGAIN;
}

/* One sleep of a loop's helper (efd_fx_helper_main()): a ticket of
 * `kind`'s, and block() with it if the count is 0.  Its error, or 0. */
static int
helper_sleep(ex_actor *a, int kind, int *timeouts)
{
    efd_impl *impl = &R.impl;
    uint32_t t = EX_TICKET(impl, kind);
    if (atomic_load(&impl->cnt->count) != 0)
        return 0;
    return act_block(a, kind, t, timeouts);
}

int
act_helper_acquire(ex_actor *a)
{
    efd_impl *impl = &R.impl;
    int timeouts = 0, took = 0;
    a->untimed = 1;                 /* the helper sleeps with no limit */
    note(a, "> acquire_async (a loop's helper)", NOVAL);
    for (;;) {
        int err = helper_sleep(a, EFD_BLOCK_READ, &timeouts);
        if (err && err != ETIMEDOUT)
            break;
        if (atomic_load(&impl->cnt->count) == 0) {
            act_unblock(a);         /* nothing: sleep again */
            if (timeouts >= EX_MAX_TIMEOUTS)
                break;
            continue;
        }
        note(a, "helper: called the loop", NOVAL);
        EFD_POINT("helper: called, the loop not yet answered");
        took = act_try_read(a) == 0;                    /* the loop */
        act_unblock(a);             /* answered */
        if (took)
            break;
        if (timeouts >= EX_MAX_TIMEOUTS)
            break;
    }
    a->untimed = 0;
    if (!took) {
        note(a, "> interrupt(0): pass a wake-up on", NOVAL);
        impl->ops->interrupt(impl, 0);
        a->gave_up++;
        note(a, "< acquire_async: gave up", NOVAL);
        return EAGAIN;
    }
    note(a, "< acquire_async: took a unit", NOVAL);
    return 0;
}

int
act_helper_watch(ex_actor *a)
{
    efd_impl *impl = &R.impl;
    int timeouts = 0;
    a->untimed = 1;                 /* the helper sleeps with no limit */
    note(a, "> Event.wait_async (a loop's helper, for readiness)", NOVAL);
    for (;;) {
        int err = helper_sleep(a, EFD_BLOCK_READY, &timeouts);
        act_unblock(a);             /* a watcher owes nobody */
        if (err && err != ETIMEDOUT)
            break;
        if (atomic_load(&impl->cnt->count) > 0) {
            note(a, "helper: called the loop; it sees the count", NOVAL);
            a->untimed = 0;
            note(a, "< Event.wait_async: ready", NOVAL);
            return 0;
        }
        if (timeouts >= EX_MAX_TIMEOUTS)
            break;
    }
    a->untimed = 0;
    a->gave_up++;
    note(a, "< Event.wait_async: gave up", NOVAL);
    return EAGAIN;
}

/* The loop waits in epoll_wait for its ring, with its 100 ms re-check
 * timer: back when a completion is there, or timed out (at quiescence). */
static void
loop_wait_ring(ex_actor *a)
{
    if (a->ring_ncq > 0)
        return;
    a->ring_waiting = 1;
    sleep_actor(a, 1, "loop: asleep in epoll_wait on its ring");
    a->ring_waiting = 0;
}

int
act_loop_acquire(ex_actor *a)
{
    efd_impl *impl = &R.impl;
    efd_loopsleep ls;
    int timeouts = 0, ready = 0, err, took = 0;
    memset(&ls, 0, sizeof(ls));
    (void)efd_ring_open(&ls.ring);
    note(a, "> acquire_async (a loop's task)", NOVAL);
    for (;;) {
        err = efd_fx_loop_sleep(impl, &ls, &ready);        /* watch() */
        if (err) {
            note(a, "< loop sleep failed", err);
            break;
        }
        if (!ready) {
            loop_wait_ring(a);
            if (a->timed_out) {
                timeouts++;
                note(a, "loop: its re-check", NOVAL);
            }
            (void)efd_fx_loop_woke(impl, &ls);              /* _ready() */
        }
        if (act_try_read(a) == 0) {
            took = 1;
            break;
        }
        if (timeouts >= EX_MAX_TIMEOUTS)
            break;
    }
    /* Nobody of the loop waits: unwatch() rests the sleeper. */
    note(a, "> loop: rest", NOVAL);
    efd_fx_loop_rest(impl, &ls, 1);
    efd_ring_close(&ls.ring);
    if (!took) {
        a->gave_up++;
        note(a, "< acquire_async: gave up", NOVAL);
        return EAGAIN;
    }
    note(a, "< acquire_async: took a unit", NOVAL);
    return 0;
}

int
act_book(ex_actor *a, uint64_t n)
{
    uint64_t v = 0;
    int err;
    note(a, "> try_read then book (a loop's task resuming)", NOVAL);
    a->inflight = -1;           /* the plain read: a death may take it */
    err = R.impl.ops->try_read(&R.impl, &v);
    a->inflight = 0;
    if (err != 0) {
        note(a, "< try_read: EAGAIN", NOVAL);
        return err;
    }
    a->acquired += v;
    EFD_POINT("act: read, not booked yet");
    /* A death inside the booking: booked (the settlement gives it back)
     * or not (consumed). */
    a->inflight = (int64_t)n;
    err = efd_books_book(&R.impl, n);
    a->inflight = 0;
    if (err == 0)
        a->held += n;
    note(a, err ? "< book: failed" : "< book: booked", (long long)n);
    return err;
}

void
act_inside(ex_actor *a)
{
    note(a, "inside its block", NOVAL);
    EFD_POINT("holder: inside its block");
}

int
act_watch(ex_actor *a)
{
    efd_impl *impl = &R.impl;
    int timeouts = 0;
    note(a, "> wait for ready (blocking)", NOVAL);
    for (;;) {
        uint32_t t = EX_TICKET(impl, EFD_BLOCK_READY);
        uint64_t v = 0;
        int err;
        (void)impl->ops->peek(impl, &v);
        if (v > 0) {
            act_unblock(a);
            note(a, "< wait: ready, count", (long long)v);
            return 0;
        }
        if (timeouts >= EX_MAX_TIMEOUTS)
            break;
        err = act_block(a, EFD_BLOCK_READY, t, &timeouts);
        if (err && err != ETIMEDOUT)
            break;
    }
    act_unblock(a);
    note(a, "< wait: gave up", NOVAL);
    return EAGAIN;
}

/* ---- invariants -------------------------------------------------------- */

/* Every step: the page counts everyone actually asleep in FUTEX_WAIT. */
static void
check_counted(void)
{
    int asleep[2] = { 0, 0 }, i;
    if (R.impl.ops->block == NULL)
        return;
    for (i = 0; i < R.n; i++) {
        ex_actor *a = &R.actors[i];
        if (a->state == ST_BLOCKED && a->kind >= 0)
            asleep[a->kind == EFD_BLOCK_READY]++;
        /* A live loop's wait on `seq` is a reader asleep. */
        if (a->state != ST_DEAD && R.impl.cnt != NULL
                && a->ring_word == &R.impl.cnt->seq)
            asleep[0]++;
    }
    if (asleep[0] > efd_explore_sleepers(&R.impl, EFD_BLOCK_READ))
        violation(V_UNCOUNTED, "a live sleeper is missing from the count: %d reader(s) "
                  "asleep in FUTEX_WAIT, the page counts %d sleepers",
                  asleep[0], efd_explore_sleepers(&R.impl, EFD_BLOCK_READ));
    if (asleep[1] > efd_explore_sleepers(&R.impl, EFD_BLOCK_READY))
        violation(V_UNCOUNTED, "a live watcher is missing from the count: %d asleep, "
                  "the page counts %d watchers",
                  asleep[1], efd_explore_sleepers(&R.impl, EFD_BLOCK_READY));
}

/* Nobody can run: whoever sleeps with units there was owed a wake-up. */
static void
check_quiet(void)
{
    uint64_t count = count_now();
    int i;
    if (count == 0)
        return;
    for (i = 0; i < R.n; i++) {
        ex_actor *a = &R.actors[i];
        if (a->state != ST_BLOCKED)
            continue;
        S.lost++;
        /* Without the death bell a death may cost a re-check; with it,
         * the kernel rings for the dead, and nothing may. */
        if (R.died < 0 || R.impl.bell)
            violation(V_LOST, "lost wake-up: %c sleeps in FUTEX_WAIT (%s) with "
                      "count %llu and nobody left to wake it (only its "
                      "%d ms re-check, or its own deadline, frees it)%s",
                      a->name,
                      a->kind == EFD_BLOCK_READY ? "watcher" : "reader",
                      (unsigned long long)count, EFD_RECHECK_MS,
                      R.died >= 0 ? " after a death" : "");
    }
}

/* Everyone is done or dead. */
static void
check_end(void)
{
    const ex_scenario *sc = R.sc;
    uint64_t count = count_now(), expected = sc->initval, added = 0;
    int64_t slack = 0;
    int i, readiness = sc->arm || sc->backend == &efd_backend_pipe;

    for (i = 0; i < R.n; i++)
        if (R.actors[i].gave_up && R.actors[i].state == ST_DONE && count > 0)
            violation(V_GAVE_UP, "%c gave up waiting, yet %llu unit(s) are there",
                      R.actors[i].name, (unsigned long long)count);
    /* The next process to look settles what the dead held (efd_books.c):
     * then the count must be as if their last operation, whatever point
     * it died at, had been done whole or not at all. */
    if (R.impl.ops->settle != NULL && R.died >= 0) {
        note(NULL, "next operation (main): settle", NOVAL);
        (void)R.impl.ops->settle(&R.impl, -1, &added);
        count = count_now();
    }
    for (i = 0; i < R.n; i++) {
        expected += R.actors[i].released - R.actors[i].acquired;
        if (R.actors[i].state == ST_DEAD) {
            slack = R.actors[i].inflight;
            expected += R.actors[i].held;
        }
    }
    if (slack == INT64_MIN ? count > expected
        : count != expected && (slack == 0 || count != expected + (uint64_t)slack))
        violation(V_CONSERVED, "count not conserved: %llu, expected %llu%s",
                  (unsigned long long)count, (unsigned long long)expected,
                  slack ? " (or that plus the dead actor's unit)" : "");
    if (!readiness)
        return;
    if (R.died >= 0) {
        /* One more operation by a live process brings readiness back. */
        uint64_t v;
        if (count == 0) {
            note(NULL, "next operation (main): try_read", NOVAL);
            (void)R.impl.ops->try_read(&R.impl, &v);
        }
        else if (R.impl.ops->repair != NULL) {
            note(NULL, "next operation (main): repair", NOVAL);
            (void)R.impl.ops->repair(&R.impl);
        }
    }
    if (fd_readable(R.impl.fd) != (count > 0))
        violation(V_READINESS, "readiness out of step with everyone quiet: fd %s, "
                  "count %llu", fd_readable(R.impl.fd) ? "readable"
                  : "not readable", (unsigned long long)count);
}

/* ---- one schedule ------------------------------------------------------ */

static int
enabled(int i)
{
    return R.actors[i].state == ST_RUNNABLE;
}

/* The choices at this step; option 0 is the default (no preemption). */
static int
options(ex_opt *o)
{
    int n = 0, i, cur = R.cur;
    int cur_on = cur >= 0 && enabled(cur);
    if (cur_on)
        o[n++] = (ex_opt){ OPT_RUN, (unsigned char)cur, 0 };
    for (i = 0; i < R.n; i++)
        if (i != cur && enabled(i))
            o[n++] = (ex_opt){ OPT_RUN, (unsigned char)i, (unsigned char)cur_on };
    if (cur_on && S.kill && R.died < 0 && R.steps > 0)
        o[n++] = (ex_opt){ OPT_DIE, (unsigned char)cur, 0 };
    if (n == 0) {
        for (i = 0; i < R.n; i++)
            if (R.actors[i].state == ST_BLOCKED && R.actors[i].has_timeout)
                o[n++] = (ex_opt){ OPT_TIMEOUT, (unsigned char)i, 0 };
    }
    return n;
}

/* Pick an option: replay the recorded prefix, else take the default. */
static int
decide(const ex_opt *o, int n, const char *where)
{
    ex_decision *d;
    if (n == 1)
        return 0;
    if (R.ndec >= MAX_DECISIONS) {
        fprintf(stderr, "explore: more than %d decisions in a schedule\n",
                MAX_DECISIONS);
        exit(2);
    }
    d = &S.dec[R.ndec];
    if (R.ndec < S.nreplay) {
        if (d->nopts != n || d->where != where) {
            fprintf(stderr, "explore: replay diverged at decision %d (%s): "
                    "the code is not deterministic under the schedule\n",
                    R.ndec, where ? where : "start");
            exit(2);
        }
    }
    else {
        d->nopts = n;
        d->chosen = 0;
        d->where = where;
    }
    d->pre = R.pre;
    memcpy(d->opts, o, (size_t)n * sizeof(*o));
    R.ndec++;
    return d->chosen;
}

/* A dead actor's thread has ended: reap it (the next schedule starts a
 * new one for the slot).  A finished one waits for the next schedule. */
static void
join_if_gone(ex_actor *a)
{
    if (a->state == ST_DEAD) {
        pthread_join(a->th->thread, NULL);
        sem_destroy(&a->th->go);
    }
}

static void
apply(const ex_opt *o)
{
    ex_actor *a = &R.actors[o->actor];
    R.pre += o->cost;
    switch (o->kind) {
    case OPT_RUN:
        if (o->cost)
            trace_add(a->id, TR_SCHED, "preempts", 0);
        R.cur = a->id;
        sem_post(&a->th->go);
        sched_wait();
        join_if_gone(a);
        break;
    case OPT_DIE:
        trace_add(a->id, TR_SCHED, "dies here", 0);
        R.died = a->id;
        a->die = 1;
        sem_post(&a->th->go);
        sched_wait();
        join_if_gone(a);
        model_robust_death(a);
        model_watch_death(a);
        S.deaths++;
        break;
    case OPT_TIMEOUT:
        trace_add(a->id, TR_SCHED, "times out (100 ms re-check)", 0);
        a->state = ST_RUNNABLE;
        a->timed_out = 1;
        S.timeouts++;
        break;
    }
}

static const char *
current_point(void)
{
    int i;
    for (i = R.ntrace - 1; i >= 0; i--)
        if (R.trace[i].kind == TR_POINT)
            return R.trace[i].text;
    return NULL;
}

static void
open_object(const ex_scenario *sc)
{
    int err;
    memset(model_word, 0, sizeof(model_word));
    memset(model_refers, 0, sizeof(model_refers));
    memset(&R.impl, 0, sizeof(R.impl));
    R.impl.ops = sc->backend;
    R.impl.chan_eventfd = !S.pipe_chan;
    R.impl.bell = !S.no_bell;
    R.impl.nowait = 1;
    R.impl.proc = &proc_zero;
    R.impl.fd = R.impl.wfd = R.impl.shmfd = -1;
    if ((err = sc->backend->open(&R.impl, sc->initval, !sc->counter, 1)) != 0)
        die_setup("open", err);
    /* The books: actor i holds slot i, as if each had claimed it. */
    atomic_store(&R.impl.cnt->slots_used, (uint32_t)sc->nactors);
    if (sc->arm && R.impl.ops->arm != NULL)
        R.impl.ops->arm(&R.impl);
}

static void
start_actors(const ex_scenario *sc)
{
    int i, err;
    R.n = sc->nactors;
    for (i = 0; i < R.n; i++) {
        ex_actor *a = &R.actors[i];
        ex_thread *th = &threads[i];
        memset(a, 0, sizeof(*a));
        a->th = th;
        a->id = i;
        a->name = (char)('A' + i);
        a->body = sc->bodies[i];
        a->kind = -1;
        a->state = ST_RUNNABLE;
        a->head.list.next = &a->head.list;
        a->head.futex_offset = -24;     /* glibc's, on x86-64 */
        th->actor = a;
        if (th->exists)
            continue;               /* waits on th->go, from the last one */
        sem_init(&th->go, 0, 0);
        if ((err = pthread_create(&th->thread, NULL, actor_main, th)) != 0)
            die_setup("pthread_create", err);
        th->exists = 1;
        S.threads++;
    }
}

/* Everyone left is an untimed sleeper (act_acquire_untimed) and nobody
 * can run: fine if nothing is there and nothing is owed -- a caller with
 * no deadline waits for a release that never comes.  A dead actor's held
 * units are owed (the books give them back): then it is a lost wake-up.
 * Either way the sleepers' own deadlines are then taken to have come (a
 * time-out), so that the schedule ends. */
static int
untimed_waits_forever(void)
{
    uint64_t owed = 0;
    int i;
    for (i = 0; i < R.n; i++) {
        ex_actor *a = &R.actors[i];
        if (a->state == ST_BLOCKED && !a->untimed)
            return 0;
        if (a->state == ST_DEAD)
            owed += a->held;
    }
    if (count_now() > 0 || owed > 0) {
        violation(V_LOST, "lost wake-up: an untimed sleeper sleeps with "
                  "count %llu and %llu unit(s) of a dead holder owed, and "
                  "nobody left to wake it",
                  (unsigned long long)count_now(), (unsigned long long)owed);
    }
    for (i = 0; i < R.n; i++)
        if (R.actors[i].state == ST_BLOCKED) {
            note(&R.actors[i], "its deadline: waits forever otherwise",
                 NOVAL);
            R.actors[i].state = ST_RUNNABLE;
            R.actors[i].timed_out = 1;
            R.actors[i].untimed = 0;    /* from now on, re-checks */
        }
    return 1;
}

/* Run one schedule from a fresh object to the end; check; close. */
static void
run_schedule(const ex_scenario *sc)
{
    R.sc = sc;
    R.cur = R.died = -1;
    R.pre = R.steps = R.ndec = R.ntrace = 0;
    R.wait_clock = 0;
    R.violation[0] = '\0';
    R.vseen = 0;
    open_object(sc);
    R.ntrace = 0;                   /* the open's own probe is no news */
    start_actors(sc);
    for (;;) {
        ex_opt o[MAX_OPTS];
        int n, c, i, any_runnable = 0, any_blocked = 0;
        check_counted();
        for (i = 0; i < R.n; i++) {
            any_runnable |= enabled(i);
            any_blocked |= R.actors[i].state == ST_BLOCKED;
        }
        if (!any_runnable && !any_blocked)
            break;
        if (!any_runnable)
            check_quiet();
        n = options(o);
        if (n == 0 && untimed_waits_forever())
            continue;               /* their deadline came, in effect */
        if (n == 0) {
            fprintf(stderr, "explore: %s: actors blocked without a "
                    "timeout and nobody to wake them\n", sc->name);
            exit(2);
        }
        if (++R.steps > MAX_STEPS) {
            fprintf(stderr, "explore: %s: a schedule ran %d steps "
                    "(livelock?)\n", sc->name, MAX_STEPS);
            exit(2);
        }
        c = decide(o, n, R.cur >= 0 && any_runnable ? current_point() : NULL);
        apply(&o[c]);
    }
    check_end();
    R.impl.ops->close(&R.impl);
}

/* ---- the search -------------------------------------------------------- */

/* Set up the next schedule: the deepest decision with an untried option
 * within the preemption bound.  0 when the space is exhausted. */
static int
backtrack(void)
{
    int d, j;
    for (d = R.ndec - 1; d >= 0; d--) {
        ex_decision *x = &S.dec[d];
        for (j = x->chosen + 1; j < x->nopts; j++)
            if (x->pre + x->opts[j].cost <= S.bound) {
                x->chosen = j;
                S.nreplay = d + 1;
                return 1;
            }
    }
    return 0;
}

/* Count a failing schedule; keep it if it is the first of some kind. */
static void
keep_failure(void)
{
    int k, kept = 0;
    S.violations++;
    for (k = 0; k < V_KINDS; k++) {
        struct ex_failure *f = &S.first[k];
        if (!((R.vseen >> k) & 1))
            continue;
        S.vkinds[k]++;
        if (f->have || kept)
            continue;
        /* one copy per schedule: under the first kind it is new for */
        kept = f->have = 1;
        snprintf(f->msg, sizeof(f->msg), "%s", R.vmsg[k]);
        memcpy(f->vmsg, R.vmsg, sizeof(f->vmsg));
        f->ntrace = R.ntrace;
        memcpy(f->trace, R.trace, (size_t)R.ntrace * sizeof(ex_trace));
    }
}

static void
print_trace(const struct ex_failure *f)
{
    const ex_trace *t = f->trace;
    int i, n = f->ntrace;
    for (i = 0; i < n; i++) {
        char who = t[i].actor >= 0 ? (char)('A' + t[i].actor) : '*';
        switch (t[i].kind) {
        case TR_POINT:
            printf("    %c: %s\n", who, t[i].text);
            break;
        case TR_NOTE:
            if (t[i].v != NOVAL)
                printf("    %c:   %s %lld\n", who, t[i].text, t[i].v);
            else
                printf("    %c:   %s\n", who, t[i].text);
            break;
        case TR_VIOLATION:          /* noticed here */
            printf("  !! %s\n", f->vmsg[t[i].v]);
            break;
        default:
            printf("  -- %c %s\n", who, t[i].text);
        }
    }
}

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Explore one scenario; print its line.  Returns 1 if anything failed. */
static int
explore(const ex_scenario *sc)
{
    double t0 = now_s();
    int fds0, fds1, truncated = 0, i;

    memset(&S.schedules, 0, sizeof(S) - offsetof(__typeof__(S), schedules));
    S.nreplay = 0;
    if (sc->backend->open == NULL) {
        printf("%-28s skipped: backend %s absent here\n", sc->name,
               sc->backend->name);
        return 0;
    }
    fds0 = open_fds();
    for (;;) {
        run_schedule(sc);
        S.schedules++;
        if (R.violation[0])
            keep_failure();
        if (!backtrack())
            break;
        if (S.max_schedules && S.schedules >= S.max_schedules) {
            truncated = 1;
            break;
        }
    }
    fds1 = open_fds();
    printf("%-28s points %d, actors %d, schedules %ld%s, deaths %ld, "
           "threads %ld, timeouts %ld, %.2f s, violations %ld (bound %d%s)\n",
           sc->name, distinct_names(), sc->nactors, S.schedules,
           truncated ? " (truncated by -m)" : "", S.deaths, S.threads,
           S.timeouts,
           now_s() - t0, S.violations, S.bound, S.kill ? ", deaths" : "");
    for (i = 0; i < V_KINDS; i++)
        if (S.vkinds[i])
            printf("  %ld schedule(s): %s\n", S.vkinds[i], v_names[i]);
    if (S.show_points)
        for (i = 0; i < S.nnames; i++)
            printf("  point: %s\n", S.names[i]);
    if (fds1 != fds0)
        printf("  !! descriptors leaked: %d open before, %d after\n",
               fds0, fds1);
    for (i = 0; i < V_KINDS; i++)
        if (S.first[i].have) {
            printf("  first failing schedule for \"%s\" (%s):\n",
                   v_names[i], S.first[i].msg);
            print_trace(&S.first[i]);
        }
    fflush(stdout);
    return S.violations > 0 || fds1 != fds0;
}

/* One actor runs at a time anyway: keep all on one CPU, where each
 * hand-over is a cheap switch rather than a cross-CPU wake-up (3x). */
static void
pin_to_one_cpu(void)
{
    cpu_set_t set;
    int cpu = sched_getcpu();
    if (cpu < 0)
        return;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void)sched_setaffinity(0, sizeof(set), &set);
}

static void
usage(void)
{
    fprintf(stderr, "usage: explore [-p BOUND] [-k] [-s SCENARIO] [-P] [-B] "
            "[-m MAX] [-l] [-v]\n");
    exit(2);
}

int
main(int argc, char **argv)
{
    const char *only = NULL;
    int opt, i, failed = 0, ran = 0;

    S.bound = 2;
    while ((opt = getopt(argc, argv, "p:ks:PBWm:lv")) != -1) {
        switch (opt) {
        case 'p': S.bound = atoi(optarg); break;
        case 'k': S.kill = 1; break;
        case 's': only = optarg; break;
        case 'P': S.pipe_chan = 1; break;
        case 'B': S.no_bell = 1; break;
        case 'W': S.no_watch = 1; break;
        case 'm': S.max_schedules = atol(optarg); break;
        case 'v': S.show_points = 1; break;
        case 'l':
            for (i = 0; i < ex_nscenarios; i++)
                printf("%-28s %s\n", ex_scenarios[i].name,
                       ex_scenarios[i].what);
            return 0;
        default: usage();
        }
    }
    if (optind != argc)
        usage();
    pin_to_one_cpu();
    if (sem_init(&R.sched, 0, 0) < 0)
        die_setup("sem_init", errno);
    for (i = 0; i < ex_nscenarios; i++) {
        if (only != NULL && strcmp(only, ex_scenarios[i].name) != 0)
            continue;
        ran++;
        failed |= explore(&ex_scenarios[i]);
    }
    if (ran == 0) {
        fprintf(stderr, "explore: no scenario named %s (-l lists them)\n",
                only);
        return 2;
    }
    return failed;
}
