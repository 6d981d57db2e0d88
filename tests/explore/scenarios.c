/*
 * scenarios.c -- what the interleaving explorer runs: small groups of
 * actors (two or three) doing a few operations each on one fresh efd
 * object of the pipe or futex backend, semaphore mode.
 *
 * Each targets one part of the protocol that issue 17 found wanting:
 *   pipe-take-vs-give           row 2: the token sync in after_change()
 *   futex-armed-take-vs-give    row 2 on the futex backend once armed
 *   futex-sleeper-aba           row 3: the sleeper-count reset in wake()
 *   futex-watcher-vs-reader     row 4: watchers and readers share seq
 *   futex-two-readers-two-units one wake-up per unit, passed on
 *   pipe-futex-*                the pipe backend on futexes (its pipe
 *                               kept in step from the start)
 * plus a few that hold the protocol's plainer promises (give vs give,
 * take vs take), the books of robust holds (books-*: the journal of
 * efd_books.c, with holders dying at each point, and the holders'
 * watcher of efd_watch.c that wakes sleepers at a holder's death), and
 * event loops that
 * sleep on the futex word through a ring (loop-*).  Bodies use only the act_* helpers of explore.h.
 */
#include "explore.h"

/* ---- bodies ------------------------------------------------------------ */

static void
take_one(ex_actor *a)
{
    (void)act_try_read(a);
}

static void
give_one(ex_actor *a)
{
    (void)act_release(a, 1);
}

static void
give_two(ex_actor *a)
{
    (void)act_release(a, 2);
}

static void
acquire_one(ex_actor *a)
{
    (void)act_acquire(a);
}

static void
acquire_two(ex_actor *a)
{
    (void)act_acquire(a);
    (void)act_acquire(a);
}

static void
give_one_twice(ex_actor *a)
{
    (void)act_release(a, 1);
    (void)act_release(a, 1);
}

static void
watch(ex_actor *a)
{
    (void)act_watch(a);
}

/* ---- adversarial review (repro17) ------------------------------------ */

/* Another process closes its copy while sleepers sleep: interrupt(impl, 1)
 * bumps both words and wakes everybody. */
static void
close_elsewhere(ex_actor *a)
{
    act_impl(a)->ops->interrupt(act_impl(a), 1);
}

/* BoundedSemaphore.release(1) with bound 1 (try_write_limit). */
static void
give_one_bounded(ex_actor *a)
{
    efd_impl *impl = act_impl(a);
    (void)impl;
    (void)act_release_limit(a, 1, 1);
}

static void
give_one_then_watch(ex_actor *a)
{
    (void)act_release(a, 1);
    (void)act_watch(a);
}

/* ---- the books of robust holds (efd_books.c) -------------------------- */

/* A `with` block: a booked unit, given back by a release. */
static void
hold_then_release(ex_actor *a)
{
    if (act_hold(a) == 0)
        (void)act_release(a, 1);
}

static void
hold_one(ex_actor *a)
{
    (void)act_hold(a);
}

/* efd.aio's async with: read by the loop, booked as the task resumes. */
static void
read_then_book(ex_actor *a)
{
    if (act_book(a, 1) == 0)
        act_inside(a);
}

static void
acquire_untimed(ex_actor *a)
{
    (void)act_acquire_untimed(a);
}

/* A `with` block that stays a while: held over two more points, so that
 * a sleeper can fall asleep while it holds and the holder can die then. */
static void
hold_and_stay(ex_actor *a)
{
    if (act_hold(a) == 0) {
        act_inside(a);
        act_inside(a);
        (void)act_release(a, 1);
    }
}

static void
settle_dead(ex_actor *a)
{
    (void)act_settle(a);
}

/* ---- event loops sleeping on the futex word (efd_futex.c, "An event
 * loop's sleep") -------------------------------------------------------- */

static void
loop_acquire(ex_actor *a)
{
    (void)act_loop_acquire(a);
}

static void
helper_acquire(ex_actor *a)
{
    (void)act_helper_acquire(a);
}

static void
helper_rests(ex_actor *a)
{
    (void)act_helper_rests(a);
}

static void
helper_watch(ex_actor *a)
{
    (void)act_helper_watch(a);
}

/* ---- the table --------------------------------------------------------- */

const ex_scenario ex_scenarios[] = {
    { "pipe-take-vs-give",
      "row 2: pipe, count 1; A try_read, B try_write(1); readiness in step",
      &efd_backend_pipe, 1, 0, 2, { take_one, give_one, NULL }, 0 },
    { "pipe-give-vs-take-empty",
      "pipe, count 0; A try_write(1), B try_read; readiness in step",
      &efd_backend_pipe, 0, 0, 2, { give_one, take_one, NULL }, 0 },
    { "pipe-take-vs-take",
      "pipe, count 1; A and B try_read; one gets it, readiness in step",
      &efd_backend_pipe, 1, 0, 2, { take_one, take_one, NULL }, 0 },
    { "pipe-take-vs-two-gives",
      "row 2, three actors: pipe, count 1; A try_read, B and C "
      "try_write(1); readiness in step",
      &efd_backend_pipe, 1, 0, 3, { take_one, give_one, give_one }, 0 },
    { "futex-armed-take-vs-give",
      "row 2 on futex after arm: count 1; A try_read, B try_write(1)",
      &efd_backend_futex, 1, 1, 2, { take_one, give_one, NULL }, 0 },
    { "futex-sleeper-aba",
      "row 3: futex, count 0; A two blocking acquires, B two releases of 1",
      &efd_backend_futex, 0, 0, 2, { acquire_two, give_one_twice, NULL }, 0 },
    { "futex-watcher-vs-reader",
      "row 4: futex, count 0; A watcher (ready), B blocking acquire, "
      "C release(1)",
      &efd_backend_futex, 0, 0, 3, { watch, acquire_one, give_one }, 0 },
    { "futex-watcher-vs-reader-2",
      "row 4, longer: futex, count 0; A watcher, B two blocking acquires, "
      "C two releases of 1",
      &efd_backend_futex, 0, 0, 3, { watch, acquire_two, give_one_twice }, 0 },
    { "futex-two-readers-two-units",
      "futex, count 0; A and B blocking acquires, C release(2)",
      &efd_backend_futex, 0, 0, 3, { acquire_one, acquire_one, give_two }, 0 },
    /* repro17: counter mode, two readers, two releases of 1: every unit
     * must reach a reader without a re-check */
    { "futex-counter-two-readers",
      "counter mode: futex, count 0; A and B blocking acquires, C two "
      "releases of 1",
      &efd_backend_futex, 0, 0, 3, { acquire_one, acquire_one,
                                     give_one_twice }, 1 },
    { "futex-close-elsewhere",
      "futex, count 0; A blocking acquire, B interrupt(all) (a close in "
      "another process), C release(1)",
      &efd_backend_futex, 0, 0, 3, { acquire_one, close_elsewhere, give_one }, 0 },
    { "futex-armed-bounded",
      "futex armed, count 0 bound 1; A blocking acquire, B and C "
      "try_write_limit(1, 1)",
      &efd_backend_futex, 0, 1, 3, { acquire_one, give_one_bounded,
                                     give_one_bounded }, 0 },
    { "futex-armed-three",
      "futex armed, count 0; A blocking acquire, B release(1) then watch, "
      "C try_read",
      &efd_backend_futex, 0, 1, 3, { acquire_one, give_one_then_watch,
                                     take_one }, 0 },
    { "books-hold-vs-hold",
      "books: futex, count 1; A holds then releases, B holds; a death "
      "anywhere is undone whole by the settlement",
      &efd_backend_futex, 1, 0, 2, { hold_then_release, hold_one, NULL }, 0 },
    { "books-settler-vs-holders",
      "books: futex, count 2; A holds then releases, B settles dead "
      "holders, C holds; a live holder is never settled, a dead one once",
      &efd_backend_futex, 2, 0, 3, { hold_then_release, settle_dead,
                                     hold_one }, 0 },
    { "books-holder-vs-sleeper",
      "books: futex, count 1; A holds then releases, B blocking acquire "
      "(its re-check settles a dead A's unit and takes it)",
      &efd_backend_futex, 1, 0, 2, { hold_then_release, acquire_one, NULL }, 0 },
    { "books-book-vs-untimed-sleeper",
      "books: futex, count 1; A reads then books (a loop's async with), "
      "B blocking acquire with no deadline: if A dies holding, B is woken "
      "to re-check (the books' bell) and takes the unit",
      &efd_backend_futex, 1, 0, 2, { read_then_book, acquire_untimed, NULL },
      0 },
    { "books-holder-dies-under-untimed-sleeper",
      "books: futex, count 1; A holds (a `with` block that stays a while) "
      "then releases, B blocking acquire with no deadline: B sleeps with no "
      "re-check while A holds (the watcher watches A); if A dies holding, "
      "the watcher's word wakes B, which settles A's unit and takes it",
      &efd_backend_futex, 1, 0, 2, { hold_and_stay, acquire_untimed, NULL },
      0 },
    { "books-pipe-hold-vs-give",
      "books: pipe, count 1; A holds then releases, B try_read; "
      "readiness in step after the settlement",
      &efd_backend_pipe, 1, 0, 2, { hold_then_release, take_one, NULL }, 0 },
    /* The pipe backend where futexes are: the futex protocol, its pipe
     * kept in step from the start (efd_pipe.c, efd_backend_pipe_futex). */
    { "pipe-futex-sleeper-vs-give",
      "pipe on futexes, count 0; A blocking acquire, B release(1), C "
      "try_read: one of A and C gets it, readiness in step",
      &efd_backend_pipe_futex, 0, 1, 3, { acquire_one, give_one, take_one },
      0 },
    { "books-pipe-futex-holder-dies-under-untimed-sleeper",
      "books: pipe on futexes, count 1; A holds (a `with` block that stays "
      "a while) then releases, B blocking acquire with no deadline: the "
      "watcher's word wakes B if A dies holding; readiness in step",
      &efd_backend_pipe_futex, 1, 1, 2, { hold_and_stay, acquire_untimed,
                                          NULL }, 0 },
    { "loop-vs-give",
      "loops: futex, count 0; A a loop's acquire_async (its ring's wait "
      "on seq), B release(1): the loop gets it without a re-check",
      &efd_backend_futex, 0, 0, 2, { loop_acquire, give_one, NULL }, 0 },
    { "loop-and-thread-vs-give",
      "loops: futex, count 0; A a loop, B a blocking acquire, C release(1): "
      "one of them gets it; a loop killed after the release chose it "
      "leaves it to B's re-check",
      &efd_backend_futex, 0, 0, 3, { loop_acquire, acquire_one, give_one },
      0 },
    { "loop-vs-untimed-thread",
      "loops: futex, count 0; A a loop, B an acquire with no deadline "
      "(asleep on the bell, no re-check of its own), C release(1): a "
      "loop sleeping on the object makes B re-check (unbelled, the books' "
      "bell), so a dead A cannot strand the unit",
      &efd_backend_futex, 0, 0, 3, { loop_acquire, acquire_untimed,
                                     give_one }, 0 },
    { "loop-two-loops-two-units",
      "loops: futex, count 0; A and B loops, C release(2): one wake-up "
      "each, both served",
      &efd_backend_futex, 0, 0, 3, { loop_acquire, loop_acquire, give_two },
      0 },
    { "helper-vs-untimed-thread",
      "loops: futex, count 0; A a loop's helper, B an acquire with no "
      "deadline (both asleep on the bell, no re-check), C release(1): a "
      "helper killed after the release chose it rings the bell for B",
      &efd_backend_futex, 0, 0, 3, { helper_acquire, acquire_untimed,
                                     give_one }, 0 },
    { "helper-rests-vs-untimed-thread",
      "loops: futex, count 0; A a loop's helper whose task is cancelled "
      "after its sleep, B an acquire with no deadline, C release(1): A "
      "passes the wake-up on before it disarms, so a death between the "
      "two still rings for B",
      &efd_backend_futex, 0, 0, 3, { helper_rests, acquire_untimed,
                                     give_one }, 0 },
    { "helper-two-loops-two-units",
      "loops: futex, count 0; A and B loops' helpers, C release(2): one "
      "wake-up each, both served; a death of either leaves the other its "
      "unit",
      &efd_backend_futex, 0, 0, 3, { helper_acquire, helper_acquire,
                                     give_two }, 0 },
    { "helper-watchers-vs-set",
      "loops: futex, count 0; A and B loops' helpers sleeping for "
      "readiness (Event.wait_async), C release(1): both see it; a C "
      "killed between its add and its wake-up rings the bell, whose "
      "sleeper wakes the other",
      &efd_backend_futex, 0, 0, 3, { helper_watch, helper_watch, give_one },
      0 },
    { "helper-watcher-and-untimed-thread",
      "loops: futex, count 0; A a loop's helper sleeping for readiness, B "
      "an acquire with no deadline, C release(1): B takes the unit, A is "
      "woken with it (and may find it gone); a death anywhere strands "
      "neither",
      &efd_backend_futex, 0, 0, 3, { helper_watch, acquire_untimed,
                                     give_one }, 0 },
    { "pipe-counter-take-vs-give",
      "counter mode: pipe, count 1; A try_read, B try_write(1), C try_write(1)",
      &efd_backend_pipe, 1, 0, 3, { take_one, give_one, give_one }, 1 },
};

const int ex_nscenarios = (int)(sizeof(ex_scenarios) / sizeof(ex_scenarios[0]));
