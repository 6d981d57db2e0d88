/*
 * efd.h -- the small internal interface between the Python type and its
 * backends.
 *
 * A backend is a table of plain C functions that never touch Python objects
 * and may be called with or without the GIL.  Each returns 0 on success or a
 * positive errno value; EAGAIN means "not now: wait for readiness" (or, for
 * a write, for room).  No backend operation ever sleeps, and none ever
 * waits for a lock: the memory backends' one lock (efd_shm.c) is only ever
 * tried.  So the callers decide what waits, where, and with the GIL
 * released.  The Python layer (efd_object.c) owns argument checking and the
 * closed state; efd_wait.c holds the single wait loop that every blocking
 * call goes through; efd_backend.c chooses the backend.
 */
#ifndef EFD_H
#define EFD_H

#include <stdint.h>
#include <stddef.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>

#ifndef EFD_NO_EVENTFD
#  if defined(__linux__)
#    define EFD_HAVE_EVENTFD 1
#  endif
#endif

/* The largest value an eventfd counter can hold (SPEC §1). */
#define EFD_MAX UINT64_C(0xfffffffffffffffe)

/* The bounded re-check interval (SPEC §5): the longest anyone waits on a
 * descriptor whose wake-up a dead process may have owed it. */
#define EFD_RECHECK_MS 100

/* The shared page of the memory backends (pipe, futex): see efd_shm.c.
 * Its layout is part of each backend's magic number: change both together
 * (processes running different layouts must not share a page). */
/* Holder slots in the page (efd_books.c): one per live process that has
 * held units of the object (a `with` block, acquire(undo=True)); the page
 * is 32 KiB with them and their holders' names. */
#define EFD_HOLDERS 1984

struct efd_count {
    uint32_t magic;                 /* which backend made it */
    uint32_t semaphore;
    /* The count, and beside it the books' journal: the last booked change
     * (efd_books.c), so that one 16-byte compare-and-swap changes both.
     * Everything else changes the count alone. */
    _Alignas(16) _Atomic uint64_t count;
    _Atomic uint64_t journal;
    _Atomic uint32_t armed;         /* readiness is kept in step */
    _Atomic uint32_t dirty;         /* readiness may lag: sync it */
    /* EFD_SYNC_TOKEN: the channel holds the token; EFD_SYNC_LOCKED: someone
     * holds `lock` -- or died in it.  One word, written only by the
     * holder of `lock`, so that one load sees both together (efd_shm.c). */
    _Atomic uint32_t sync;
    /* futex backend: the futex words.  Readers (acquire) wait on `seq`;
     * watchers (Event.wait, readiness) and blocked writers on `wseq`, so
     * that a release's FUTEX_WAKE(n) for readers reaches readers only. */
    _Atomic uint32_t seq;
    _Atomic uint32_t wseq;
    /* Readers / watchers in FUTEX_WAIT: an epoch, a version and a count
     * packed in one word (see efd_futex.c). */
    _Atomic uint64_t sleepers;
    _Atomic uint64_t watchers;
    /* The lock that guards the channel and EFD_SYNC_TOKEN: 0 when free,
     * else its holder (a beacon, or thread numbers); `pidns` names the pid
     * namespace of the page maker.  See efd_shm.c: a word, not a pthread
     * mutex, since peers may scribble. */
    _Atomic uint64_t owner;
    uint64_t pidns;
    /* futex backend: the death bell, a futex word that stays 0.  Whoever
     * may owe sleepers a wake-up points its thread's robust-list pending
     * slot at it, and the kernel wakes one sleeper on it if that thread
     * dies (efd_futex.c). */
    _Atomic uint32_t bell;
    /* futex backend: objects open in processes where the bell does not
     * work (their deaths ring for nobody): while any is, everyone's
     * sleepers look again every EFD_RECHECK_MS (efd_futex.c). */
    _Atomic uint32_t unbelled;
    /* futex backend, the books' bell (efd_books.c): sleepers that slept
     * with no holder in another process to re-check for set `holdwait`
     * and wait on `holdseq` as well; a process that starts holding units
     * bumps it and wakes them, so that they take up re-checking. */
    _Atomic uint32_t holdseq;
    _Atomic uint32_t holdwait;
    /* A BoundedSemaphore's bound (0: none): a dead holder's units given
     * back never take the count past it (efd_books.c). */
    _Atomic uint64_t bound;
    /* The books: one past the highest holder slot ever claimed (slots are
     * taken lowest first, so a scan stops there; 0: nobody ever held),
     * and the units each slot's process holds (efd_books.c). */
    _Atomic uint32_t slots_used;
    _Atomic uint64_t books[EFD_HOLDERS];
    /* Who holds each slot, for a sleeper that asks the kernel to tell it
     * of that holder's death (efd_watch.c): its pid (low 32 bits) and the
     * low 32 bits of its start time (clock ticks since boot: a reused pid
     * does not match); 0 where unknown.  Written by the slot's claimer
     * after it took the slot's lock; only ever a hint (the lock, not this,
     * says who lives). */
    _Atomic uint64_t holder_id[EFD_HOLDERS];
};
#define EFD_SYNC_TOKEN 1u
#define EFD_SYNC_LOCKED 2u

/* What one EventFD holds, whatever the backend. */
typedef struct efd_impl {
    const struct efd_backend *ops;
    int fd;             /* readiness fd: the eventfd, or the pipe's read end */
    int wfd;            /* memory backends: the channel's write end (== fd
                         * for an eventfd channel); otherwise -1 */
    int shmfd;          /* memory backends: the shared page's fd; else -1 */
    struct efd_count *cnt;  /* memory backends: the mapping; else NULL */
    /* Memory backends: this process's beacon for the page lock
     * (efd_shm.c): a description of the page's file that holds an OFD lock
     * on byte `beacon` while the process lives; -1 until first needed. */
    _Atomic int beacon_fd;
    _Atomic uint32_t beacon;
    /* Memory backends, where there is no beacon: whether a lock holder's
     * thread numbers can be checked (this process shares the page maker's
     * pid namespace). */
    int owner_checkable;
    int semaphore;      /* reads take 1 (semaphore) or everything */
    /* May channels be eventfds?  Only where this process's probe found
     * eventfd working (a sandbox may kill a process that calls it). */
    int chan_eventfd;
    /* Kernel backends: 1 if reads use preadv2(RWF_NOWAIT), which never
     * sleeps even if someone cleared O_NONBLOCK on the shared description;
     * 0 if the kernel lacks it (reads then poll first). */
    int nowait;
    /* futex backend: 1 if this process's sleepers wait on the death bell
     * as well (futex_waitv and a robust list work here), so that they may
     * sleep without a time limit; 0 if they look again every
     * EFD_RECHECK_MS instead.  Atomic: another thread may demote the
     * object (a loop that sleeps through a ring, a thread with no robust
     * list) while a sleeper reads it; fx_block() reads it once. */
    _Atomic int bell;
    /* futex backend, where bell == 0: the process epoch in which this
     * object was counted in the page's `unbelled` (0: not counted). */
    uint64_t unbelled_epoch;
    /* Memory backends, the books (efd_books.c): this process's holder
     * slot (-1: none yet) and the process epoch it was taken in (a fork
     * child holds nothing of its parent's; the slot and its holder
     * description are the process's, shared by its objects of one page);
     * when this process last looked for dead holders. */
    int hslot;
    int holds_off;      /* EFD_HOLDS=off: no books kept for this object */
    uint64_t hslot_epoch;
    uint64_t holders_seen;  /* efd_books.c's holders_gen, last looked at */
    int claim_err;      /* why this process could not take a slot ... */
    uint64_t claim_epoch;   /* ... in this process epoch */
    _Atomic int64_t swept_ns;
    /* eventfd-readback: units a semaphore read took but could not write
     * back yet (the counter was full), and the process (`proc`) they belong
     * to: a fork child starts with none (its parent gives them back). */
    _Atomic uint64_t held;
    _Atomic uint32_t held_proc;
    /* Which process this is, as far as state copied by fork() goes: a
     * number the module bumps in every fork child, so that it differs from
     * every ancestor's (a pid would not: pids are reused).  Read without a
     * syscall. */
    const volatile uint32_t *proc;
    /* Kernel backends: whether the descriptor's open file description may
     * be in hands other than efd's of this process.  O_NONBLOCK lives on
     * the description, so while nobody else can reach it, nobody can have
     * cleared the flag, and a read may be a plain read() instead of
     * preadv2(RWF_NOWAIT) (a third cheaper).  It may be elsewhere once
     * fileno() or the descriptors were handed out (desc_shared), once this
     * process forked (a fork child has it: *forks moved, counted in the
     * parent by the module's fork hook), in a fork child (*proc moved),
     * and for a descriptor made inheritable or adopted (desc_shared from
     * the start).  See efd_attempt() (efd_wait.c). */
    int desc_shared;
    uint32_t desc_proc, desc_forks;
    const volatile uint32_t *forks;
} efd_impl;

/* What a block() sleeper waits for. */
enum { EFD_BLOCK_READ, EFD_BLOCK_READY, EFD_BLOCK_WRITE };

/* How to wait for an operation to become possible. */
typedef struct efd_waitspec {
    int fd;             /* fd to poll, or -1 */
    short events;       /* POLLIN or POLLOUT */
    int slice_ms;       /* > 0: re-try at least every slice_ms */
} efd_waitspec;

typedef struct efd_backend {
    const char *name;
    /* 1 if every operation is a syscall (the kernel's counter); 0 if most
     * are not (the pipe backend's shared-memory fast paths). */
    int syscall_always;
    /* Create a fresh object holding `initval` (0 .. EFD_MAX). */
    int (*open)(efd_impl *impl, uint64_t initval, int semaphore, int cloexec);
    /* Adopt already-open descriptors (from_fd, unpickling in a child). */
    int (*adopt)(efd_impl *impl, const int *fds, int nfds, int semaphore);
    /* One non-blocking read: 1 in semaphore mode, everything otherwise. */
    int (*try_read)(efd_impl *impl, uint64_t *value);
    /* One non-blocking write of `value` (value <= EFD_MAX; 0 allowed). */
    int (*try_write)(efd_impl *impl, uint64_t value);
    /* Optional (memory backends): the same, refusing (EAGAIN) to take the
     * count past `limit` in the same atomic step: BoundedSemaphore. */
    int (*try_write_limit)(efd_impl *impl, uint64_t value, uint64_t limit);
    /* Where to wait for a read (for_write == 0) or a write. */
    void (*waitspec)(efd_impl *impl, int for_write, efd_waitspec *ws);
    /* Current count without consuming it; ENOTSUP if unknown. */
    int (*peek)(efd_impl *impl, uint64_t *value);
    /* Optional (NULL: nothing to do).  The readiness fd polled readable but
     * a read found nothing: make readiness agree with the count again (a
     * process may have died between changing one and the other).  0, or
     * EBUSY: somebody is bringing it in step right now (a look at once
     * would find it stale still). */
    int (*repair)(efd_impl *impl);
    /* Optional: units this process holds outside the counter and will
     * give back (eventfd-readback); tries once to give them back first. */
    uint64_t (*pending)(efd_impl *impl);
    /* Optional: fileno() was asked for: from now on (in every process that
     * shares the object) keep the readiness fd in step with the count. */
    void (*arm)(efd_impl *impl);
    /* Optional, together (futex): a backend that sleeps in a way of its own
     * instead of poll().  ticket() is taken before the caller's last look
     * at the count and its own stop conditions; block() sleeps until the
     * count may have changed, interrupt() was called, or ms ran out (-1:
     * no limit), and returns 0, ETIMEDOUT if ms ran out first, or an
     * errno (EINTR).  ticket() and block() take the same kind
     * (EFD_BLOCK_READ, _READY or _WRITE).  A ticket taken before
     * a change guarantees block() does not sleep through it. */
    uint32_t (*ticket)(efd_impl *impl, int kind);
    int (*block)(efd_impl *impl, int kind, uint32_t ticket, int ms);
    /* all != 0: wake every sleeper (close(), Event.set()); all == 0: a
     * sleeper leaves without taking anything -- pass a wake-up it may have
     * been chosen for on to the next one, if units are there. */
    void (*interrupt)(efd_impl *impl, int all);
    /* Optional: wake the next exclusive watcher of the readiness fd
     * (EPOLLEXCLUSIVE: one process's herd, or one event loop) without
     * changing the count: a release's one wake-up is being handed on
     * (efd_herd.c).  Never waits.  Only a backend each of whose writes
     * wakes the fd's watchers may have it (the kernel counter): a memory
     * backend's release that finds the token there writes nothing, and an
     * exclusive watcher would sleep through it. */
    void (*nudge)(efd_impl *impl);
    /* The descriptors that make up the object (for pickling); returns count. */
    int (*fds)(efd_impl *impl, int *out, int max);
    /* Release everything; leaves impl->fd == -1.  Never waits. */
    void (*close)(efd_impl *impl);
    /* Optional (eventfd): try_read trusting the description's O_NONBLOCK
     * (a plain read()): only while no one else can have cleared it
     * (efd_impl.desc_shared), and only with the GIL held (efd_attempt). */
    int (*try_read_owned)(efd_impl *impl, uint64_t *value);
    /* Optional (futex): a block() sleeper's wait is over -- it took a
     * unit, gave up (after interrupt(impl, 0)) or failed -- and it owes
     * nobody a wake-up any more. */
    void (*unblock)(efd_impl *impl);
    /* Optional, together (the memory backends' books, efd_books.c):
     * try_read_hold() is try_read() booking what it takes to this process
     * (a `with` block, undo=True), so that it comes back if the process
     * dies holding it; settle() gives back the units of holder `slot`
     * (-1: of every holder found dead) and wakes sleepers for them, and
     * stores how many came back in *added. */
    int (*try_read_hold)(efd_impl *impl, uint64_t *value);
    int (*settle)(efd_impl *impl, int slot, uint64_t *added);
} efd_backend;

extern const efd_backend efd_backend_eventfd;
extern const efd_backend efd_backend_readback;
extern const efd_backend efd_backend_pipe;
extern const efd_backend efd_backend_futex;   /* .open == NULL if absent */
/* The pipe backend sleeping as the futex backend does (efd_pipe.c, "Where
 * futexes are"); .open == NULL if absent.  efd_pipe_backend(): the one a
 * new or adopted pipe object uses here. */
extern const efd_backend efd_backend_pipe_futex;
const efd_backend *efd_pipe_backend(void);
/* 0 if fds (page, pipe read end, pipe write end) can be a pipe object's,
 * else EINVAL or fstat()'s errno. */
int efd_pipe_check_fds(const int *fds, int nfds);
/* 0 if a process-shared futex works here, else an errno. */
int efd_futex_probe(void);
/* 1 if the futex backend's death bell works here (efd_futex.c), else 0. */
int efd_bell_probe(void);

/* A futex wait that an event loop can watch (efd_ring.c): an io_uring of
 * a few entries.  Every call returns 0 or an errno, and never sleeps. */
typedef struct efd_ring {
    int fd;                 /* -1: none */
    unsigned pending;       /* queued, not yet submitted */
    uint64_t tags;          /* the last tag its owner handed out: a ring
                             * used again keeps counting, so that a late
                             * completion is never taken for a new one */
    uint32_t *sq_head, *sq_tail, *sq_array, sq_mask;
    uint32_t *cq_head, *cq_tail, cq_mask;
    void *sqes, *cqes, *sq_map, *cq_map;
    size_t sq_len, cq_len, sqe_len;
} efd_ring;
int efd_ring_open(efd_ring *r);
void efd_ring_close(efd_ring *r);
/* Queue a FUTEX_WAIT on `word` (shared) for `val`, whose completion will
 * carry `tag`; queue a cancel of the request tagged `tag`. */
int efd_ring_wait(efd_ring *r, _Atomic uint32_t *word, uint32_t val,
                  uint64_t tag);
int efd_ring_cancel(efd_ring *r, uint64_t tag, uint64_t cancel_tag);
int efd_ring_submit(efd_ring *r);
/* The next completion: 1 and its tag and result, or 0 if none. */
int efd_ring_next(efd_ring *r, uint64_t *tag, int32_t *res);
/* 0 if a ring's FUTEX_WAIT works here, else why not (an errno). */
int efd_ring_probe(void);

/* An event loop's sleep on a futex object (efd_futex.c, "An event loop's
 * sleep"): the loop watches ring.fd, and is one more sleeper on the
 * readers' futex word. */
typedef struct efd_loopsleep {
    efd_ring ring;
    uint64_t out;               /* the tag of the wait in flight; 0: none */
    int counted;                /* counted in `sleepers` (S3 .. S6) */
    uint32_t epoch;             /* ... in this epoch */
    int failed;                 /* an errno: it cannot sleep again */
} efd_loopsleep;
/* A loop's helper (efd_futex.c, "A loop's helper"): a thread of efd's
 * that sleeps on the readers' futex word for one event loop, as a blocked
 * acquire() does -- the death bell armed -- and rings the loop's door (an
 * eventfd the loop watches) when units may be there.  It owes sleepers the
 * wake-up it was chosen for until the loop answers (it took, or will not
 * take: then the helper passes it on).  While the loop's tasks wait for
 * readiness (Event.wait_async), it sleeps as a blocked Event.wait() does
 * instead, owing nobody.  The loop talks to it through `cmd`, a
 * process-private futex word it bumps on every change.
 *
 * On the kernel counter (eventfd, eventfd-readback) a helper is `herd`:
 * it sleeps in an epoll instance of its own, where the counter is
 * registered with EPOLLEXCLUSIVE (efd_herd.c, "A loop's helper on the
 * kernel counter"), for units only; `cmd` is then also written to the
 * channel cmd_r/cmd_w, which that instance watches. */
typedef struct efd_helper {
    efd_impl *impl;
    int door, door_w;           /* a channel (efd_chan_open): readable when
                                 * the loop should look */
    _Atomic uint32_t cmd;       /* bumped by the loop: want, answered, stop */
    _Atomic uint32_t want;      /* the loop has tasks waiting for units */
    _Atomic uint32_t ready;     /* ... and for readiness (watchers): sleep
                                 * as a watcher, which sees every release */
    _Atomic uint32_t stop;      /* leave (close, or the sleeper is gone) */
    _Atomic uint32_t calls;     /* times the helper rang the door */
    _Atomic uint32_t answered;  /* the last call the loop answered */
    _Atomic uint32_t waiting;   /* the call helper_call() waits on the
                                 * answer to, while it does; 0 */
    _Atomic uint32_t asleep;    /* on its way into, or in, its sleep */
    _Atomic int failed;         /* why it cannot sleep here (an errno), 0 */
    uint32_t seen_calls;        /* the loop's: calls seen at its last woke() */
    int herd;                   /* on the kernel counter (efd_herd.c) */
    int ep, cmd_r, cmd_w;       /* herd: its epoll instance, its command
                                 * channel; -1 otherwise */
    pthread_t tid;
    /* Parked (resting): on its interpreter's list, which a fork empties
     * first (efd_loop.c, "parked helpers"): its object (an
     * eventfd_object), the pointer that holds it and the Python object
     * that pointer is in, and the process that parked it. */
    struct efd_helper *park_next, **park_pprev;
    void *owner;
    struct efd_helper **park_ref;
    void *park_holder;
    uint64_t park_epoch;
} efd_helper;
void *efd_fx_helper_main(void *helper);
/* Whether the loop still wants its helper to sleep for it. */
static inline int
efd_helper_wanted(efd_helper *h)
{
    return atomic_load(&h->want) && !atomic_load(&h->stop);
}
/* A herd helper's epoll instance and command channel (0, or an errno),
 * its thread, and the closing of what the first made. */
int efd_herd_helper_open(efd_helper *h, int allow_eventfd);
void *efd_herd_helper_main(void *helper);
void efd_herd_helper_close(efd_helper *h);

/* 0 and *ready = 1: units are there, take them; 0 and *ready = 0: asleep
 * (the ring polls readable when it wakes); an errno: this loop cannot wait
 * this way -- rest, and wait on the readiness descriptor. */
int efd_fx_loop_sleep(efd_impl *impl, efd_loopsleep *ls, int *ready);
int efd_fx_loop_woke(efd_impl *impl, efd_loopsleep *ls);
void efd_fx_loop_rest(efd_impl *impl, efd_loopsleep *ls, int pass_on);

/* Helpers shared by the eventfd-based backends (efd_eventfd.c). */
int efd_kernel_open(uint64_t initval, int flags, int *out_fd);
int efd_kernel_read(int fd, int nowait, uint64_t *value);
int efd_kernel_read_plain(int fd, uint64_t *value);
int efd_kernel_write(int fd, uint64_t value);
int efd_kernel_fdinfo(int fd, uint64_t *count, int *semaphore);
int efd_kernel_nowait_works(void);
int efd_fd_is_eventfd(int fd);

/* The native backend's operations, reused by eventfd-readback. */
int efd_ev_adopt(efd_impl *impl, const int *fds, int nfds, int semaphore);
int efd_ev_try_write(efd_impl *impl, uint64_t value);
void efd_ev_waitspec(efd_impl *impl, int for_write, efd_waitspec *ws);
int efd_ev_peek(efd_impl *impl, uint64_t *value);
int efd_ev_fds(efd_impl *impl, int *out, int max);
void efd_ev_close(efd_impl *impl);
void efd_ev_nudge(efd_impl *impl);

/* Channels (efd_shm.c): a descriptor made readable by put and emptied by
 * take/drain -- an eventfd (rfd == wfd) where allowed and possible, else a
 * non-blocking pipe.  None of them ever sleeps.  The memory backends' token
 * and the wait loop's per-waiter wake-ups are channels. */
int efd_set_fd_flags(int fd, int cloexec, int nonblock);
/* Whether this process can make pages sealed against resizing (memfd). */
int efd_shm_can_seal(void);
int efd_chan_open(int *rfd, int *wfd, int allow_eventfd, int cloexec);
void efd_chan_close(int *rfd, int *wfd);
void efd_chan_put(int rfd, int wfd);
void efd_chan_take(int rfd, int wfd);
void efd_chan_drain(int rfd);

/* The count in shared memory (efd_shm.c), what the pipe and futex backends
 * share.  `magic` tells the backends' pages apart; `channel_eventfd` allows
 * an eventfd for the readiness channel; `armed` keeps readiness in step
 * from the start (pipe) instead of from the first arm() (futex).  Adopt
 * says EPROTO for an efd page of another magic (another backend's kind,
 * another layout), EINVAL for descriptors that are no such page. */
int efd_count_open(efd_impl *impl, uint64_t initval, int semaphore,
                   int cloexec, uint32_t magic, int channel_eventfd,
                   int armed);
int efd_count_adopt(efd_impl *impl, const int *fds, int nfds, int semaphore,
                    uint32_t magic);
int efd_count_try_read(efd_impl *impl, uint64_t *value);
int efd_count_try_write(efd_impl *impl, uint64_t value);
int efd_count_try_write_limit(efd_impl *impl, uint64_t value, uint64_t limit);
int efd_count_peek(efd_impl *impl, uint64_t *value);
int efd_count_repair(efd_impl *impl);
void efd_count_arm(efd_impl *impl);
int efd_count_fds(efd_impl *impl, int *out, int max);
void efd_count_close(efd_impl *impl);

/* The books of robust holds (efd_books.c). */
int efd_books_available(void);
int efd_books_probe(void);
void efd_books_init(efd_impl *impl);
int efd_books_claim(efd_impl *impl);
void efd_books_adopted(efd_impl *impl);
int efd_books_try_read(efd_impl *impl, uint64_t *value);
int efd_books_write(efd_impl *impl, uint64_t value, uint64_t limit,
                    uint64_t *now);
int efd_books_settle(efd_impl *impl, int slot, uint64_t *added);
int efd_books_own_held(efd_impl *impl);
int efd_books_foreign(efd_impl *impl);
int efd_books_sweep_due(efd_impl *impl);
uint64_t efd_books_sweep(efd_impl *impl);
uint64_t efd_books_held(efd_impl *impl);
int efd_books_book(efd_impl *impl, uint64_t value);
void efd_books_close(efd_impl *impl);
void efd_books_wake_unrechecked(struct efd_count *c);
int efd_books_watched(efd_impl *impl);
void efd_count_changed(efd_impl *impl, uint64_t now);

/* What the books need of the page's beacons (efd_shm.c): an OFD lock
 * operation on one byte of the page's file (0, EBUSY: GETLK found it held
 * through another description, or an errno), the table of descriptions
 * that a fork child closes (register, forget), and its check for a child
 * made without the fork handlers. */
int efd_lock_byte(int fd, int cmd, short type, uint32_t byte);
int efd_shm_scratch(int *out_fd);
int efd_beacon_register(int fd, _Atomic int *field);
void efd_beacon_forget(_Atomic int *field);
void efd_beacon_check_inherited(void);

/* The holders' watcher (efd_watch.c): one thread per process that the
 * kernel wakes, through pidfds, when a process a sleeper waits on dies.
 * efd_watch_enter()/_leave(): a sleeper relies on the watcher (from
 * before its first efd_watch_process() to after its sleep); enter returns
 * the sleeper's own process-private futex word, which moves when a
 * process it was told to watch (since enter) dies.
 * efd_watch_process(id): watch the process `id` names (efd_watch_self_id:
 * pid and start time): 0 watched, ESRCH gone (or not that process), else
 * an errno (cannot watch: no pidfds here).  efd_watch_before_fork(): stop
 * the thread if no sleeper relies on it (os.fork() then makes no
 * multi-threaded child, and does not warn).  efd_watch_probe(): 1 if
 * pidfds work here. */
_Atomic uint32_t *efd_watch_enter(void);
void efd_watch_leave(void);
int efd_watch_process(uint64_t id);
uint64_t efd_watch_self_id(void);
uint64_t efd_watch_pidns(void);
int efd_watch_probe(void);
int efd_watch_before_fork(void);

/* A number that is this process's and another in every child, however it
 * was made (a bare clone included): one load where the kernel has
 * MADV_WIPEONFORK, else getpid() (efd_shm.c). */
uint64_t efd_process_epoch(void);

/* Close an fd, retrying nothing (POSIX leaves the fd closed on EINTR). */
void efd_close_fd(int *fd);

/* Make sure fd has O_NONBLOCK (someone sharing the open file description
 * may have cleared it).  Returns 0 or an errno. */
int efd_ensure_nonblock(int fd);

#endif /* EFD_H */
