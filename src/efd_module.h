/*
 * efd_module.h -- the Python side: module state, the EventFD object, the
 * errors every file raises, and the wait loop that every blocking call goes
 * through.
 */
#ifndef EFD_MODULE_H
#define EFD_MODULE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <sys/types.h>

#include "efd.h"

/* Per-interpreter state.  The probe answers are cached here: the probe runs
 * once per process (per interpreter), never per call, and only to choose a
 * backend automatically. */
typedef struct {
    PyTypeObject *EventFD_type;
    PyTypeObject *Semaphore_type;   /* efd_sync.c */
    PyTypeObject *Event_type;
    PyTypeObject *LoopSleeper_type; /* efd_loop.c */
    int probed;
    int err_plain;     /* errno of eventfd2(0, CLOEXEC|NONBLOCK); 0: works */
    int err_sem;       /* errno of the same with EFD_SEMAPHORE; 0: works */
    int nowait;        /* -1 not asked yet; else efd_kernel_nowait_works() */
    int bell;          /* -1 not asked yet; else efd_bell_probe() */
    /* This process among its ancestors: 1 at import, bumped in every fork
     * child (see efd_impl.proc). */
    volatile uint32_t proc;
    int herd;          /* -1 not asked yet; else EFD_HERD_* (efd_herd.c) */
    /* -1 not asked yet; else efd_ring_probe(): 0 if loops can sleep on
     * futex words through a ring here (efd_loop.c) */
    int loop_ring;
    /* The thread that runs Python's signal handlers (threading's main
     * thread; a fork child's only thread): the only waiter that must take
     * the GIL after a bare re-check, to run them. */
    unsigned long main_ident;
    /* The thread that forked this process (efd_thread_id(); 0 in a
     * process that was not made by fork): the only thread of the parent
     * that lives on here, so the only one whose waits are still ours. */
    uint64_t fork_thread;
    /* How many times this process has forked (os.register_at_fork's
     * after_in_parent): since then a child may hold the descriptions of
     * the kernel objects that existed (efd_impl.desc_forks). */
    volatile uint32_t forks;
    /* The idle helpers that objects of this interpreter keep for their
     * next loop sleeper (efd_loop.c): os.fork() stops them first. */
    struct efd_helper *parked;
} efd_state;

/* The intrusive lists of this module (an object's waiters and loop
 * sleepers, an interpreter's parked helpers): each node has a `next` and
 * a back pointer `pprev` to whatever points at it, so that it unlinks
 * itself without its list.  Changed with the GIL held only. */
#define EFD_LIST_PUSH(head, node, next, pprev) do {                     \
        (node)->next = (head);                                          \
        (node)->pprev = &(head);                                        \
        if ((head) != NULL)                                             \
            (head)->pprev = &(node)->next;                              \
        (head) = (node);                                                \
    } while (0)
/* Unlink `node` if it is on a list (pprev != NULL), and mark it off. */
#define EFD_LIST_UNLINK(node, next, pprev) do {                         \
        if ((node)->pprev != NULL) {                                    \
            *(node)->pprev = (node)->next;                              \
            if ((node)->next != NULL)                                   \
                (node)->next->pprev = (node)->pprev;                    \
            (node)->next = NULL;                                        \
            (node)->pprev = NULL;                                       \
        }                                                               \
    } while (0)

/* One thread waiting in efd_wait() with the GIL released.  The record is
 * linked into its object's list (with the GIL held) for as long as it
 * waits.  Each waiter polls a wake descriptor of its
 * own, so that close() and Event's notify can wake every waiter without one
 * of them draining a shared descriptor before another has seen it. */
typedef struct efd_waiter {
    struct efd_waiter *next;
    struct efd_waiter **pprev;
    int rfd, wfd;       /* the wake channel: one eventfd (rfd == wfd) or a pipe */
    int poked;          /* written since it was drained */
    int op;             /* what it waits for (EFD_OP_*) */
    int kind;           /* EFD_WAITER_* */
    int chosen;         /* HERD: a readiness event woke it (efd_herd.c) */
    int watching;       /* HERD: it keeps the herd's watch (efd_herd.c) */
    uint64_t thread;    /* the waiting thread (efd_thread_id()) */
} efd_waiter;

/* How a waiter sleeps: in poll() with its wake channel; in poll() without
 * one (none could be opened: out of descriptors), looking at the closed
 * flag and the generation every EFD_NOCHAN_MS; in the backend's block();
 * or (reads of the poll-based backends) in epoll_wait() on the process's
 * shared instance, the herd (efd_herd.c). */
enum { EFD_WAITER_CHANNEL, EFD_WAITER_NOCHANNEL, EFD_WAITER_BLOCK,
       EFD_WAITER_HERD };
#define EFD_NOCHAN_MS 50

typedef struct {
    PyObject_HEAD
    efd_impl impl;
    int closed;        /* set by close(); read without the GIL by waiters */
    int detached;      /* detach(): the final close leaves the fds open */
    int nonblocking;   /* describes read()/write(), not the descriptor */
    /* Threads inside this object with the GIL released (waiting, or in a
     * syscall on its descriptor).  close() leaves the descriptors to the
     * last of them, so no number can be recycled under anyone's feet. */
    int users;
    uint32_t users_proc;   /* the process they belong to (fork) */
    efd_waiter *waiters;  /* those of them that sleep in poll() */
    int spare_rfd, spare_wfd;  /* one wake channel kept for the next waiter */
    uint64_t generation;  /* bumped by efd.Event.set() in this process */
    /* This process's herd of readers (efd_herd.c): the epoll instance they
     * sleep in, the channel close() kicks, and whether the readiness fd is
     * registered exclusively (one wake-up per unit across processes). */
    int herd_ep, herd_krfd, herd_kwfd, herd_exclusive, herd_oneshot;
    /* The herd's watch: whether one of its sleepers keeps it (the one
     * that re-checks), and the channel a sleeper leaving the watch rings
     * to hand it to another (efd_herd.c, "The watch"). */
    int herd_watch, herd_wrfd, herd_wwfd;
    int herd_asleep;      /* sleepers in (or entering) epoll_wait */
    /* How often this process's waiters woke for an event, and for a bare
     * re-check (EventFD._wakeups()); updated without the GIL. */
    uint64_t woken, rechecks;
    /* Records of efd/_aio.py's waiting loops for this object (asyncio
     * tasks queued for its units): kept by _aio (EventFD._aio_records);
     * a non-blocking acquire of a drop-in asks _aio whether a unit is
     * meant for them only while this is above zero. */
    int aio_records;
    /* Whether a process other than this one may hold the object and so
     * take its units: its descriptors were adopted, made inheritable, or
     * handed out for pickling, a handle or detach() -- or, for the kernel
     * counter, which anyone with the descriptor can read, fileno().  (A
     * memory backend's fileno() hands out readiness only: its count is in
     * the page.)  A fork changes efd_reg_lineage() instead, from
     * `lineage`, its value when the object was made.  See eventfd_alone(). */
    int handed;
    uint64_t lineage;
    efd_state *state;     /* the module's (kept alive as impl.proc says) */
    /* This object's entry in the process's table of live objects
     * (efd_registry.c), NULL while it is not open (or was never listed). */
    struct efd_reg *reg;
    /* Made by loading an in-process pickle (another interpreter's call
     * argument, a queue's item): collected while open, it closes without a
     * ResourceWarning, as multiprocessing's objects do in a child. */
    int quiet;
    /* `with` blocks entered in the process of epoch blocks_epoch
     * (efd_process_epoch()) and not left yet: a fork child's __exit__ of
     * a block its parent entered releases nothing. */
    uint64_t blocks_epoch;
    int64_t blocks;
    /* The process epoch in which a `with` block warned that it could not
     * hold its unit (efd_can_hold()). */
    uint64_t hold_warned;
    /* efd_loop.c: the event loops' sleepers on this object (futex), which
     * close() rests before the page goes. */
    struct efd_loopobj *loops;
    efd_ring spare_ring;    /* a rested loop's ring, kept for the next */
    uint64_t spare_ring_epoch;
    /* A rested loop's helper, idle, kept for the next loop sleeper (a
     * thread costs more to make than the wait it serves); its process. */
    struct efd_helper *spare_helper;
    uint64_t spare_helper_epoch;
    /* Helpers being stopped right now, the GIL let go meanwhile (by
     * another thread's finish(), or a close()): close() waits for them
     * before the page can go.  Counted in the process epoch `..._epoch`:
     * a fork child has none of its parent's stopping threads. */
    int helpers_stopping;
    uint64_t helpers_stopping_epoch;
#if PY_VERSION_HEX < 0x03090000
    PyObject *module;  /* 3.8: keeps the state impl.proc points into alive */
#endif
    PyObject *weakreflist;
} eventfd_object;

/* No deadline. */
#define EFD_FOREVER (-1.0)

/* What efd_wait() does once the object is ready:
 *   EFD_OP_READ     take (a read),
 *   EFD_OP_WRITE    add *value, waiting for room,
 *   EFD_OP_READY    nothing: wait until the count is above zero, or until
 *                   efd.Event.set() was called in this process
 *                   (efd.Event's wait). */
enum { EFD_OP_READ, EFD_OP_WRITE, EFD_OP_READY };
/* Or'ed into EFD_OP_READ: book what the read takes to this process, so
 * that it comes back if the process dies holding it (efd_books.c): a
 * `with` block, undo=True.  Only where the backend keeps books. */
#define EFD_OP_HOLD 0x100

/* One operation `op`; a read's result lands in *value.
 * blocking == 0: try once.  timeout < 0: no deadline.
 * Returns 1 if done, 0 if it would block or the time ran out,
 * -1 with an exception set (a signal handler raised, the object was closed
 * while waiting, or an OS error). */
int efd_wait(eventfd_object *self, int op, uint64_t *value,
             int blocking, double timeout);

/* One try of `op`, never waiting: 0, EAGAIN, or an errno.  Kernel writes
 * run without the GIL (inside efd_enter/efd_leave). */
int efd_attempt(eventfd_object *self, int op, uint64_t *value);

/* Enter / leave a stretch in which this thread uses the object's
 * descriptors with the GIL released (both called with the GIL held). */
void efd_enter(eventfd_object *self);
void efd_leave(eventfd_object *self);

/* Wake every waiter in efd_wait() whose op is `op` (-1: all). */
void efd_wake_waiters(eventfd_object *self, int op);

/* Whether the int v is below zero (without 3.14's deprecated
 * _PyLong_Sign). */
int efd_long_is_negative(PyObject *v);

/* An integer argument as uint64_t: TypeError for non-integers (floats
 * too), ValueError if negative, OverflowError past 64 bits; each message
 * names `what`. */
int efd_to_u64(PyObject *obj, const char *what, uint64_t *out);

/* A timeout argument: None -> EFD_FOREVER, else non-negative seconds
 * (inf, or a number too large for a double, -> EFD_FOREVER).  `rules`:
 *   EFD_TIMEOUT_STRICT     EventFD's: negative or NaN is ValueError;
 *   EFD_TIMEOUT_THREADING  the semaphores': not above zero -> 0 (only
 *                          try), NaN is ValueError (as _thread's locks);
 *   EFD_TIMEOUT_LOOK       Event.wait's: not above zero or NaN -> 0. */
enum { EFD_TIMEOUT_STRICT, EFD_TIMEOUT_THREADING, EFD_TIMEOUT_LOOK };
int efd_to_timeout_ex(PyObject *obj, int rules, double *out);
int efd_to_timeout(PyObject *obj, double *out);

/* acquire(blocking=True, timeout=None)'s arguments, with `rules` for the
 * timeout (a timeout with blocking=False is ValueError, as in threading). */
int efd_parse_acquire(PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames, int rules, int *blocking,
                      double *timeout, int *undo);

/* Robust holds (efd_books.c) from the Python side (efd_object.c).
 * efd_can_hold(): 1 if reads of this object can be booked here (claiming
 * this process's holder slot on first use), else 0; with `why` != 0, an
 * exception naming the reason instead of 0 (acquire(undo=True)).  The
 * block count: efd_block_enter() after a `with` block's unit was taken,
 * efd_block_exit() at its end, 1 if the block was entered in this process
 * (and its unit is to be released), 0 in a fork child that inherited it. */
int efd_can_hold(eventfd_object *self, int why);
void efd_block_enter(eventfd_object *self);
int efd_block_exit(eventfd_object *self);

/* release(n=1)'s argument: TypeError for a non-integer, ValueError below
 * one; *too_big when it does not fit in 64 bits (the caller words it). */
int efd_parse_release(PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames, uint64_t *n, int *too_big);

/* Release what the object holds now if nobody is inside it; otherwise
 * wake the waiters and leave the final close to the last of them. */
void efd_object_close(eventfd_object *self);

/* EFD_OP_READY's look: 0 if the count is above zero now, else EAGAIN or
 * an errno.  Never waits; callable without the GIL. */
int efd_ready_now(efd_impl *impl);

/* ---- one wake-up per unit (efd_herd.c) ---- */

enum { EFD_HERD_NONE, EFD_HERD_SHARED, EFD_HERD_EXCLUSIVE };
/* What the kernel offers: EFD_HERD_EXCLUSIVE (epoll with EPOLLEXCLUSIVE),
 * EFD_HERD_SHARED (epoll without it), EFD_HERD_NONE (no epoll). */
int efd_herd_probe(void);
/* Whether this object's waiters in different processes (and event loops
 * that register its fd with EPOLLEXCLUSIVE) wake one at a time. */
int efd_herd_wake_one(eventfd_object *self);
/* Make this process's herd for the object (GIL held): 0 or an errno. */
int efd_herd_open(eventfd_object *self);
/* Sleep in the herd up to ms (-1: no limit), without the GIL: as poll(),
 * with *revents the readiness fd's (0 if the kick, the watch's channel,
 * or nothing, woke it).  Sleeper w takes the watch if nobody keeps it,
 * and then sleeps at most EFD_RECHECK_MS, as it does always with
 * `slices` (the main thread). */
int efd_herd_sleep(eventfd_object *self, efd_waiter *w, int ms, int slices,
                   short *revents);
/* Sleeper w stops looking for now -- it leaves the wait, or it is the
 * main thread about to run Python code -- without the GIL (a keeper
 * blocked on it would keep the watch from everyone): if it kept the
 * watch, hand it on. */
void efd_herd_leave(eventfd_object *self, efd_waiter *w);
/* Wake the next exclusive watcher of the readiness fd, if it can be done
 * without changing the count (an eventfd: write 0). */
void efd_herd_nudge(efd_impl *impl);
/* A process that took a unit moves to the back of the line for the next
 * (exclusive registrations only). */
void efd_herd_rotate(eventfd_object *self);
/* One-shot registration (memory backends): a sleeper that was handed the
 * event and has looked at the count arms it for the next one. */
void efd_herd_rearm(eventfd_object *self);
/* close(): wake every sleeper of the herd. */
void efd_herd_kick(eventfd_object *self);
/* Close this process's herd (fork child: its copy of the parent's). */
void efd_herd_close(eventfd_object *self);
/* EventFD._pass_on(): if units are there, wake one more waiter (futex
 * sleeper, herd sleeper, exclusive event loop); 1 if there were units. */
int efd_pass_on(eventfd_object *self);

/* This process's number among its ancestors (efd_impl.proc). */
uint32_t efd_self_proc(eventfd_object *self);

/* The calling thread (GIL held), as the interpreter numbers its threads:
 * never reused by a later thread, and kept by the thread that forks. */
uint64_t efd_thread_id(void);

/* ---- the process's table of live objects (efd_registry.c) ---- */

/* List an open object (GIL held); never fails (unlisted on ENOMEM). */
void efd_reg_add(eventfd_object *self);
/* Take it off, before anything of it is closed or given away; `collected`:
 * it is being garbage-collected, not closed (pending pickles keep it). */
void efd_reg_remove(eventfd_object *self, int collected);
/* A pickle of it is being made: its token (0: not listed). */
uint64_t efd_reg_dump(eventfd_object *self);
/* This process's nonce (a new one in every fork child). */
uint64_t efd_reg_nonce(void);
/* A number that every fork() made through the C library changes, in the
 * parent and in the child (see efd_registry.c). */
uint64_t efd_reg_lineage(void);
/* 1 if fd is (a number for) a descriptor that a listed object owns. */
int efd_reg_owned(int fd);
/* Duplicate the descriptors of the object listed as `token` (close-on-
 * exec), if `nonce` is this process's: 0, ESRCH (another process's
 * nonce), ENOENT (no such object: closed), or dup's errno. */
int efd_reg_dup(uint64_t nonce, uint64_t token, int *fds, int *nfds,
                const efd_backend **ops, int *semaphore, int *nonblocking);

/* ---- errors (efd_errors.c) ---- */

/* The "closed" error every method raises after close(). */
PyObject *efd_err_closed(void);

/* OSError for a backend errno. */
PyObject *efd_err_errno(int err);

/* ValueError: release(n) would pass the maximum count. */
PyObject *efd_err_past_max(uint64_t n);

/* METH_FASTCALL | METH_KEYWORDS argument parsing: fill out[0..n) from the
 * positional args and keywords by the names in `names` (NULL-terminated;
 * the first `npos` may be given by position).  Unset slots stay NULL; the
 * caller checks required ones.  Messages follow CPython's. */
int efd_parse_args(const char *fname, const char *const *names, int npos,
                   PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                   PyObject **out);

/* ---- backend choice (efd_backend.c) ---- */

/* Run the probe chain (once per process); -1 with an exception for an
 * errno that says nothing about support (EMFILE, ENFILE, ENOMEM). */
int efd_probe(efd_state *st);

/* The backend for EventFD(): `arg` (a str, or NULL/None for $EFD_BACKEND,
 * else the probe); NULL with an exception if it is unknown. */
const efd_backend *efd_choose_backend(efd_state *st, PyObject *arg,
                                      int semaphore);

/* The backend called `name`, or NULL. */
const efd_backend *efd_backend_by_name(const char *name);

/* An OSError saying that backend `name` cannot work here; NULL. */
PyObject *efd_err_unavailable(const char *name, int err, int semaphore);

/* Whether kernel reads may use RWF_NOWAIT (asked once per process). */
int efd_state_nowait(efd_state *st);
/* Whether the futex backend's death bell works here (asked once). */
int efd_state_bell(efd_state *st);

/* ---- the type (efd_object.c) ---- */

extern PyType_Spec efd_eventfd_spec;
extern PyType_Spec efd_semaphore_spec;   /* efd_sync.c */
extern PyType_Spec efd_event_spec;
extern PyType_Spec efd_loop_spec;       /* efd_loop.c */
/* An event loop's sleeper for `ev` (EventFD._loop_sleeper()), or None. */
PyObject *efd_loop_sleeper_new(eventfd_object *ev);
/* close(): rest every loop sleeper of the object. */
void efd_loops_close(eventfd_object *ev);
int efd_loops_before_fork(efd_state *st);
/* 0 if loops can sleep on futex objects through a ring, else an errno. */
int efd_loop_ring_probe(efd_state *st);
/* Whether EFD_LOOP_SLEEP=ring asks loops to sleep through a ring even
 * where a helper could. */
int efd_loop_ring_wanted(void);
int efd_loop_fileno_wanted(void);
int efd_loop_herd(eventfd_object *ev);
efd_state *efd_state_from_type(PyTypeObject *type);

#endif /* EFD_MODULE_H */
