#!/usr/bin/env python3
"""Stress efd.EventFD: many threads, processes and asyncio tasks on one
counter; every unit must be accounted for and nobody may hang.

Usage (from the repository root)::

    python tests/stress/stress.py                 # CI-sized, every backend
    python tests/stress/stress.py --ops 1000000   # the long setting
    python tests/stress/stress.py --backend pipe --mode counter --seed 7

For each backend and mode, one EventFD is shared by ``--threads`` threads
in this process, ``--procs`` forked processes of ``--proc-threads`` threads
each, and (where ``EventFD.acquire_async`` exists) ``--tasks`` asyncio
tasks in one event-loop thread.  Each worker repeats: release a random
number of units (1..8), then take back at least that many, choosing at
random between the ways there are to take:

* semaphore mode: ``acquire()``, ``acquire(timeout=t)`` with t of 0.5 to
  10 ms, ``acquire(blocking=False)``; tasks: ``await acquire_async()``,
  ``await acquire_async(t)``, and an ``acquire_async()`` cancelled at once
  (a cancelled acquire must consume nothing);
* counter mode: a blocking ``read()`` and a non-blocking ``read()`` through
  a second object over the same counter; tasks: ``await read_async()``.
  A read may take more than the worker is owed (other workers' units): the
  worker gives the surplus back at once with ``release``.

Every worker counts what it released and what it took.  At the end the
counter is drained, and the run passes only if

    sum(released) == sum(taken) + drained        (conservation)

and every worker finished before ``--limit`` seconds (no lost wakeup, no
deadlock: since each worker only waits for units it is owed, the counter
holds at least what the waiters are owed whenever anyone waits, so a wait
that never ends is a lost wakeup).  A hang dumps every thread's traceback.

Operations (each release, each acquire/read attempt) per second are printed
per backend and mode.  Exit status: 0 if every run held, 1 otherwise.
"""
import argparse
import asyncio
import faulthandler
import multiprocessing
import os
import random
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

import efd  # noqa: E402  (after the path set-up, to test this checkout)

BACKENDS = ("eventfd", "eventfd-readback", "pipe", "futex")
MODES = ("semaphore", "counter")


class Tally:
    """What one worker did."""

    __slots__ = ("released", "taken", "ops", "timeouts", "would_block",
                 "cancelled")

    def __init__(self):
        self.released = self.taken = self.ops = 0
        self.timeouts = self.would_block = self.cancelled = 0

    def add(self, other):
        for name in self.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_tuple(self):
        return tuple(getattr(self, n) for n in self.__slots__)

    @classmethod
    def from_tuple(cls, values):
        t = cls()
        for name, v in zip(cls.__slots__, values):
            setattr(t, name, v)
        return t


# ---- workers ---------------------------------------------------------------
#
# A worker is a producer or a consumer.  Producers release their quota in
# chunks of 1..8 units, pausing now and then so that the counter often runs
# dry and consumers really wait.  Consumers take their quota.  The quotas
# balance (sum of production == sum of consumption), so every consumer
# finishes if and only if no unit is lost; a unit made twice shows up as a
# non-empty counter at the end.


def produce(ev, quota, rng, t):
    while t.released < quota:
        k = min(rng.randint(1, 8), quota - t.released)
        ev.release(k)
        t.released += k
        t.ops += 1
        if rng.random() < 0.2:
            time.sleep(rng.uniform(0, 0.0005))


def consume_sem(ev, quota, rng, t):
    while t.taken < quota:
        how = rng.random()
        if how < 0.4:
            got = ev.acquire()
            assert got is True, got
        elif how < 0.7:
            got = ev.acquire(timeout=rng.uniform(0.0005, 0.01))
            t.timeouts += not got
        else:
            got = ev.acquire(blocking=False)
            t.would_block += not got
        t.ops += 1
        t.taken += bool(got)


def settle(ev, t, got, owed):
    """Count one take of `got` units against `owed`; give back a surplus
    (a counter-mode read takes other consumers' units too).  Returns what
    is still owed."""
    t.ops += 1
    t.taken += got
    owed -= got
    if owed < 0:
        ev.release(-owed)
        t.released += -owed
        t.ops += 1
        owed = 0
    return owed


def consume_counter(ev, nb, quota, rng, t):
    """Read until the quota is met; a read may take other consumers' units:
    the surplus goes back at once."""
    owed = quota
    while owed > 0:
        if rng.random() < 0.5:
            got = ev.read()
        else:
            try:
                got = nb.read()
            except BlockingIOError:
                got = 0
                t.would_block += 1
        owed = settle(ev, t, got, owed)


def thread_worker(ev, nb, role, quota, seed):
    rng = random.Random(seed)
    t = Tally()
    if role == "producer":
        produce(ev, quota, rng, t)
    elif ev.semaphore:
        consume_sem(ev, quota, rng, t)
    else:
        consume_counter(ev, nb, quota, rng, t)
    return t


def run_thread_workers(ev, nb, jobs):
    """jobs: [(role, quota, seed)].  Returns (threads, tallies, errors),
    the last two filled in as the threads finish."""
    tallies, errors = [], []
    lock = threading.Lock()

    def body(role, quota, seed):
        try:
            r = thread_worker(ev, nb, role, quota, seed)
            with lock:
                tallies.append(r)
        except BaseException as e:   # reported by the caller
            with lock:
                errors.append(e)

    threads = [threading.Thread(target=body, args=job, daemon=True,
                                name="%s-%d" % (job[0], i))
               for i, job in enumerate(jobs)]
    for th in threads:
        th.start()
    return threads, tallies, errors


# ---- asyncio tasks (consumers) ---------------------------------------------


async def consume_async(ev, quota, rng):
    t = Tally()
    owed = quota
    while owed > 0:
        how = rng.random()
        if not ev.semaphore:
            got = await ev.read_async()
        elif how < 0.4:
            got = int(await ev.acquire_async())
        elif how < 0.7:
            got = int(await ev.acquire_async(rng.uniform(0.0005, 0.01)))
            t.timeouts += not got
        else:
            # Cancelled while (most likely) waiting: must consume nothing.
            task = asyncio.ensure_future(ev.acquire_async())
            await asyncio.sleep(0)
            task.cancel()
            try:
                got = int(await task)
            except asyncio.CancelledError:
                got = 0
                t.cancelled += 1
        owed = settle(ev, t, got, owed)
    return t


def run_async_workers(ev, jobs):
    tallies, errors = [], []

    async def main():
        results = await asyncio.gather(
            *[consume_async(ev, quota, random.Random(seed))
              for _, quota, seed in jobs],
            return_exceptions=True)
        for r in results:
            (errors if isinstance(r, BaseException) else tallies).append(r)

    def body():
        try:
            asyncio.run(main())
        except BaseException as e:
            errors.append(e)

    th = threading.Thread(target=body, daemon=True, name="asyncio")
    th.start()
    return [th], tallies, errors


# ---- processes -------------------------------------------------------------


def process_main(ev, nb, jobs, conn):
    """A forked worker process: run thread workers, send back the totals."""
    try:
        threads, tallies, errors = run_thread_workers(ev, nb, jobs)
        for th in threads:
            th.join()
        total = Tally()
        for t in tallies:
            total.add(t)
        conn.send((total.as_tuple(), [repr(e) for e in errors]))
    except BaseException as e:
        conn.send((Tally().as_tuple(), [repr(e)]))
    finally:
        conn.close()


def plan(args, mode, has_async):
    """Split the work: alternate producer/consumer thread roles in every
    process; asyncio tasks consume.  Returns (main_jobs, proc_jobs,
    async_jobs), each job (role, quota, seed), quotas balanced."""
    rng = random.Random(args.seed)
    slots = []   # (where, role)
    for i in range(args.threads):
        slots.append(("main", "producer" if i % 2 == 0 else "consumer"))
    for p in range(args.procs):
        for i in range(args.proc_threads):
            slots.append((p, "consumer" if (i + p) % 2 else "producer"))
    if has_async:
        slots += [("async", "consumer")] * args.tasks
    consumers = sum(1 for _, r in slots if r == "consumer")
    producers = len(slots) - consumers
    # Operations per unit: ~1.25 in semaphore mode (a release moves 4.5
    # units on average, an acquire one); ~0.35 in counter mode, where a
    # read takes whatever has accumulated.
    per_unit = 1.25 if mode == "semaphore" else 0.35
    units = max(consumers, int(args.ops / per_unit))
    cq = [units // consumers + (i < units % consumers) for i in range(consumers)]
    pq = [units // producers + (i < units % producers) for i in range(producers)]
    main_jobs, proc_jobs, async_jobs = [], [[] for _ in range(args.procs)], []
    for where, role in slots:
        job = (role, (pq if role == "producer" else cq).pop(),
               rng.randrange(2**32))
        if where == "main":
            main_jobs.append(job)
        elif where == "async":
            async_jobs.append(job)
        else:
            proc_jobs[where].append(job)
    return main_jobs, proc_jobs, async_jobs


def drain(ev, nb):
    """Take whatever is left; return how many units that was."""
    left = 0
    if ev.semaphore:
        while ev.acquire(blocking=False):
            left += 1
    else:
        try:
            left += nb.read()
        except BlockingIOError:
            pass
    return left


def one_run(backend, mode, args):
    """One backend, one mode.  Returns (ok, message)."""
    semaphore = mode == "semaphore"
    ev = efd.EventFD(0, semaphore=semaphore, backend=backend)
    nb = efd.EventFD._from_fds(tuple(os.dup(fd) for fd in ev._fds()),
                               backend, semaphore, True)
    has_async = (hasattr(ev, "acquire_async") and hasattr(ev, "read_async")
                 and args.tasks > 0)
    main_jobs, proc_jobs, async_jobs = plan(args, mode, has_async)
    ctx = multiprocessing.get_context("fork")
    procs = []
    t0 = time.monotonic()
    # Fork first, while this process has no extra threads.
    for jobs in proc_jobs:
        r, w = ctx.Pipe(duplex=False)
        p = ctx.Process(target=process_main, args=(ev, nb, jobs, w))
        p.start()
        w.close()
        procs.append((p, r))
    threads, tallies, errors = run_thread_workers(ev, nb, main_jobs)
    if async_jobs:
        th, at, ae = run_async_workers(ev, async_jobs)
        threads += th
    deadline = t0 + args.limit
    hung = []
    for th in threads:
        th.join(max(0.0, deadline - time.monotonic()))
        if th.is_alive():
            hung.append(th.name)
    for p, r in procs:
        if r.poll(max(0.0, deadline - time.monotonic())):
            vals, errs = r.recv()
            tallies.append(Tally.from_tuple(vals))
            errors.extend(errs)
        else:
            hung.append("process %d" % p.pid)
        p.join(max(0.1, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(5)
        elif p.exitcode != 0:
            errors.append("process %d exited with %s" % (p.pid, p.exitcode))
    elapsed = time.monotonic() - t0
    if async_jobs:
        tallies.extend(at)
        errors.extend(ae)
    if hung:
        faulthandler.dump_traceback(all_threads=True)
        return False, "%s/%s: HUNG after %.1f s: %s (counter now %r)" % (
            backend, mode, elapsed, ", ".join(hung), ev._peek())
    total = Tally()
    for t in tallies:
        total.add(t)
    left = drain(ev, nb)
    peek = ev._peek()
    ev.close()
    nb.close()
    line = ("%-16s %-9s threads=%d procs=%dx%d tasks=%d: %d ops in %.2f s "
            "= %.0f ops/s; released=%d taken=%d left=%d timeouts=%d "
            "would-block=%d cancelled=%d" % (
                backend, mode, args.threads, args.procs, args.proc_threads,
                len(async_jobs), total.ops, elapsed, total.ops / elapsed,
                total.released, total.taken, left, total.timeouts,
                total.would_block, total.cancelled))
    if errors:
        return False, line + "\n  ERRORS: %r" % (errors[:5],)
    if total.released != total.taken + left:
        return False, line + "\n  CONSERVATION VIOLATED: %d released, %d " \
            "taken + %d left" % (total.released, total.taken, left)
    if left or peek not in (0, None):
        return False, line + "\n  units left over (made twice?): %d, %r" % (
            left, peek)
    expected = len(main_jobs) + len(proc_jobs) + (1 if async_jobs else 0)
    got = len(tallies) - (len(at) - 1 if async_jobs else 0)
    if got != expected:
        return False, line + "\n  missing results from some workers"
    return True, line


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", action="append", choices=BACKENDS,
                    help="backend to run (repeatable; default: all, or "
                         "$EFD_BACKEND if set)")
    ap.add_argument("--mode", action="append", choices=MODES,
                    help="semaphore and/or counter (default: both)")
    ap.add_argument("--ops", type=int, default=100000,
                    help="operations per backend and mode (default 100000;"
                         " the long setting is 1000000)")
    ap.add_argument("--threads", type=int, default=8,
                    help="worker threads in this process (default 8)")
    ap.add_argument("--procs", type=int, default=4,
                    help="forked worker processes (default 4)")
    ap.add_argument("--proc-threads", type=int, default=2,
                    help="threads in each worker process (default 2)")
    ap.add_argument("--tasks", type=int, default=4,
                    help="asyncio tasks, if acquire_async exists (default 4)")
    ap.add_argument("--limit", type=float, default=600.0,
                    help="seconds before a run counts as hung (default 600)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    if not args.backend:
        env = os.environ.get("EFD_BACKEND", "")
        args.backend = [env] if env not in ("", "auto") else list(BACKENDS)
    if not args.mode:
        args.mode = list(MODES)
    return args


def main(argv=None):
    args = parse_args(argv)
    ok_all = True
    for backend in args.backend:
        for mode in args.mode:
            ok, line = one_run(backend, mode, args)
            print(("ok   " if ok else "FAIL ") + line, flush=True)
            ok_all &= ok
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
