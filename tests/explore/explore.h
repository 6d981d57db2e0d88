/*
 * explore.h -- the interleaving explorer's interface between its engine
 * (explore.c: scheduler, futex model, search, invariants) and its
 * scenarios (scenarios.c: who does what to one efd object).
 *
 * An actor is a pthread that runs one scenario body.  Exactly one actor
 * runs at a time; each EFD_POINT of the protocol code hands control back
 * to the engine, which decides who runs next.  Bodies drive the protocol
 * only through the backend table (efd.h) with the act_* helpers below,
 * which keep the books the invariants need (units released, acquired, in
 * flight; timeouts; give-ups).
 */
#ifndef EFD_EXPLORE_TEST_H
#define EFD_EXPLORE_TEST_H

#include "efd.h"

/* The one place that calls ops->ticket: it will become ticket(impl, kind). */
#define EX_TICKET(impl, kind) ((impl)->ops->ticket((impl), (kind)))

/* How many 100 ms re-checks a blocking acquire or wait sits through with
 * nothing there before it gives up (as a caller's deadline would). */
#define EX_MAX_TIMEOUTS 2

typedef struct ex_actor ex_actor;
typedef void (*ex_body)(ex_actor *self);

typedef struct ex_scenario {
    const char *name;
    const char *what;               /* one line: what it exercises */
    const efd_backend *backend;
    uint64_t initval;
    int arm;                        /* call ops->arm before the actors run */
    int nactors;                    /* 2 or 3 */
    ex_body bodies[3];              /* actors A, B, C */
    int counter;                    /* 1: counter mode (reads take all) */
} ex_scenario;

extern const ex_scenario ex_scenarios[];
extern const int ex_nscenarios;

/* ---- what a body may call (explore.c) ---------------------------------- */

efd_impl *act_impl(ex_actor *a);
/* One try_read (semaphore mode: 1 unit).  Returns 0 or an errno. */
int act_try_read(ex_actor *a);
/* One try_read_hold (efd_books.c): a unit booked to the actor's slot. */
int act_hold(ex_actor *a);
/* settle(-1): give back the books of holders found dead. */
int act_settle(ex_actor *a);
/* One try_write(n) (settling the actor's own books first). */
int act_release(ex_actor *a, uint64_t n);
/* One try_write_limit(n, limit) (BoundedSemaphore). */
int act_release_limit(ex_actor *a, uint64_t n, uint64_t limit);
/* A blocking acquire as efd_wait() runs it on a block() backend:
 * loop { ticket; try_read; block(READ, ticket, 100 ms) }, giving up after
 * EX_MAX_TIMEOUTS re-checks in a row with nothing taken, and then passing
 * a wake-up on with interrupt(impl, 0).  Returns 0 if it took a unit. */
int act_acquire(ex_actor *a);
/* The same with no time limit of the caller's (it times out only where
 * block() itself looks again: no death bell, a holder elsewhere). */
int act_acquire_untimed(ex_actor *a);
/* A plain try_read, then the unit booked (efd.aio's `async with`: the
 * loop's reader took it, the task books it when it resumes). */
int act_book(ex_actor *a, uint64_t n);
/* A point where the actor holds what it took (it may die there). */
void act_inside(ex_actor *a);
/* Event.wait(): loop { ticket; peek > 0?; block(READY, ticket, 100 ms) }. */
int act_watch(ex_actor *a);
/* acquire_async() on a futex object, as efd/_aio.py's record drives its
 * loop sleeper (efd_futex.c, "An event loop's sleep"): sleep; if units,
 * try_read; else wait for the ring (or the loop's 100 ms re-check), woke,
 * try_read; again; at the end rest (passing a wake-up on).  Gives up
 * after EX_MAX_TIMEOUTS re-checks with nothing taken. */
int act_loop_acquire(ex_actor *a);
/* acquire_async() on a futex object through a loop's helper (efd_futex.c,
 * "A loop's helper"), its page steps as efd_fx_helper_main() takes them:
 * loop { ticket; count 0? block(READ, ticket, no limit: the bell);
 * count 0? unblock, again; else the loop is called and answers: try_read;
 * unblock }.  The helper and its loop are one actor: they die together.
 * Gives up after EX_MAX_TIMEOUTS re-checks (where block() looks again by
 * itself), passing a wake-up on as rest() makes the helper do. */
int act_helper_acquire(ex_actor *a);
/* A loop's helper whose loop rests after its sleep (the task cancelled):
 * pass a wake-up on, then unblock (helper_leave()). */
int act_helper_rests(ex_actor *a);
/* Event.wait_async() on a futex object through a loop's helper that
 * sleeps for readiness (efd_fx_helper_main() with `ready`): loop {
 * ticket(READY); count 0? block(READY, ticket, no limit: the bell);
 * unblock at once (a watcher owes nobody); count above 0? the loop is
 * called and sees it: done }.  Gives up after EX_MAX_TIMEOUTS re-checks. */
int act_helper_watch(ex_actor *a);

#endif /* EFD_EXPLORE_TEST_H */
