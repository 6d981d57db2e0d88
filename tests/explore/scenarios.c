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
 * plus a few that hold the protocol's plainer promises (give vs give,
 * take vs take).  Bodies use only the act_* helpers of explore.h.
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

/* ---- the table --------------------------------------------------------- */

const ex_scenario ex_scenarios[] = {
    { "pipe-take-vs-give",
      "row 2: pipe, count 1; A try_read, B try_write(1); readiness in step",
      &efd_backend_pipe, 1, 0, 2, { take_one, give_one, NULL } },
    { "pipe-give-vs-take-empty",
      "pipe, count 0; A try_write(1), B try_read; readiness in step",
      &efd_backend_pipe, 0, 0, 2, { give_one, take_one, NULL } },
    { "pipe-take-vs-take",
      "pipe, count 1; A and B try_read; one gets it, readiness in step",
      &efd_backend_pipe, 1, 0, 2, { take_one, take_one, NULL } },
    { "pipe-take-vs-two-gives",
      "row 2, three actors: pipe, count 1; A try_read, B and C "
      "try_write(1); readiness in step",
      &efd_backend_pipe, 1, 0, 3, { take_one, give_one, give_one } },
    { "futex-armed-take-vs-give",
      "row 2 on futex after arm: count 1; A try_read, B try_write(1)",
      &efd_backend_futex, 1, 1, 2, { take_one, give_one, NULL } },
    { "futex-sleeper-aba",
      "row 3: futex, count 0; A two blocking acquires, B two releases of 1",
      &efd_backend_futex, 0, 0, 2, { acquire_two, give_one_twice, NULL } },
    { "futex-watcher-vs-reader",
      "row 4: futex, count 0; A watcher (ready), B blocking acquire, "
      "C release(1)",
      &efd_backend_futex, 0, 0, 3, { watch, acquire_one, give_one } },
    { "futex-watcher-vs-reader-2",
      "row 4, longer: futex, count 0; A watcher, B two blocking acquires, "
      "C two releases of 1",
      &efd_backend_futex, 0, 0, 3, { watch, acquire_two, give_one_twice } },
    { "futex-two-readers-two-units",
      "futex, count 0; A and B blocking acquires, C release(2)",
      &efd_backend_futex, 0, 0, 3, { acquire_one, acquire_one, give_two } },
};

const int ex_nscenarios = (int)(sizeof(ex_scenarios) / sizeof(ex_scenarios[0]));
