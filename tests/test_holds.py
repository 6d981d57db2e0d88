"""Robust holds (SPEC §6, issue 22): a unit held by a `with` block or taken
with ``undo=True`` comes back when its process dies holding it; a plain
``acquire()`` still consumes.

The books live in the shared page of the memory backends (``futex``,
``pipe``); the kernel counters keep none: there ``undo=True`` raises and a
`with` block consumes as before.  Every wait is bounded (PROMPT), and every
process that is killed is a fork child or a subprocess of the test.
"""

import asyncio
import json
import mmap
import os
import random
import signal
import struct
import subprocess
import sys
import textwrap
import time

import pytest

import efd
import efd.aio
from conftest import FORK_PROBE, PROMPT, REPO, full_or, sleeps_on_futex

BOOKED = ("futex", "pipe")


@pytest.fixture(autouse=True)
def _default_backend(monkeypatch):
    """The objects made here without ``backend=`` are the drop-ins'
    defaults (futex where it works, else pipe: both keep books), whatever
    EFD_BACKEND a CI lane forces on the rest of the suite; the tests that
    take the ``backend`` fixture name theirs."""
    monkeypatch.delenv("EFD_BACKEND", raising=False)


def _booked(backend):
    return backend in BOOKED and efd._efd._probe()["robust_holds"]


def _child(body):
    """Fork; run body() in the child (then _exit(0)); return the pid and
    the read end of a pipe the child writes one byte to when it holds."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            body(w)
        finally:
            os._exit(0)
    os.close(w)
    return pid, r


def _wait_ready(r):
    import select
    ready, _, _ = select.select([r], [], [], PROMPT)
    assert ready, "the child did not report holding in time"
    assert os.read(r, 1) == b"x"
    os.close(r)


def _kill(pid):
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def _kill_all(*pids):
    """SIGKILL and reap each child not None and not gone already."""
    for pid in pids:
        if pid is not None:
            try:
                _kill(pid)
            except (ProcessLookupError, ChildProcessError):
                pass


def _undo_holder(sem):
    """A child that takes a unit with undo=True and holds it for good:
    its pid, once it holds."""
    holder, r = _child(lambda w: (sem.acquire(undo=True), _hold_forever(w)))
    _wait_ready(r)
    return holder


def _hold_forever(w):
    os.write(w, b"x")
    time.sleep(60)


# ---- the books in one process -------------------------------------------------

def test_undo_is_booked_and_a_release_settles_it(backend):
    ev = efd.EventFD(3, semaphore=True, backend=backend)
    if not _booked(backend):
        with pytest.raises(ValueError, match="keeps no books"):
            ev.acquire(undo=True)
        assert ev.value == 3            # nothing taken
        ev.close()
        return
    assert ev.acquire(undo=True) and ev.acquire(undo=True)
    assert (ev._held(), ev.value) == (2, 1)
    ev.release()
    assert (ev._held(), ev.value) == (1, 2)
    ev.release(3)                       # settles what is left, adds all
    assert (ev._held(), ev.value) == (0, 5)
    assert ev.acquire(blocking=False, undo=True)
    assert ev._held() == 1
    ev.close()


def test_undo_is_keyword_only_and_checked(backend):
    ev = efd.EventFD(1, semaphore=True, backend=backend)
    with pytest.raises(TypeError):
        ev.acquire(True, None, True)
    with pytest.raises(TypeError, match="unexpected keyword"):
        ev.acquire(undos=True)
    assert ev.value == 1
    ev.close()


def test_a_counter_mode_undo_read_books_the_whole_count():
    ev = efd.EventFD(7, backend="futex")
    assert ev.acquire(undo=True)
    assert (ev._held(), ev.value) == (7, 0)
    ev.release(7)
    assert (ev._held(), ev.value) == (0, 7)
    ev.close()


@pytest.mark.parametrize("cls", ["Semaphore", "BoundedSemaphore"])
def test_a_with_block_holds_its_unit(backend, cls):
    sem = getattr(efd, cls)(2, backend=backend)
    with sem:
        assert sem._ev._held() == (1 if _booked(backend) else 0)
        assert sem.value == 1
    assert sem._ev._held() == 0
    assert sem.value == 2
    sem.close()


def test_plain_acquire_is_not_booked():
    sem = efd.Semaphore(2)
    sem.acquire()
    assert sem._ev._held() == 0
    sem.release()
    sem.close()


def test_async_with_holds_its_unit(backend):
    async def main():
        for sem in (efd.Semaphore(1, backend=backend),
                    efd.aio.Semaphore(1, backend=backend),
                    efd.aio.Lock(backend=backend)):
            async with sem:
                assert sem._ev._held() == (1 if _booked(backend) else 0)
                assert sem.value == 0
            assert (sem._ev._held(), sem.value) == (0, 1)
            sem.close()
    asyncio.run(asyncio.wait_for(main(), PROMPT))


def test_acquire_async_undo_when_contended():
    ev = efd.EventFD(0, semaphore=True, backend="futex")

    async def main():
        async def later():
            await asyncio.sleep(0.05)
            ev.release()
        task = asyncio.ensure_future(later())
        assert await ev.acquire_async(timeout=PROMPT, undo=True)
        await task
    asyncio.run(main())
    assert (ev._held(), ev.value) == (1, 0)
    ev.release()
    assert (ev._held(), ev.value) == (0, 1)
    ev.close()


def test_close_gives_back_what_this_process_holds():
    sem = efd.Semaphore(1)

    def body(w):
        sem.acquire(undo=True)
        sem.close()                     # the holds go back now
        _hold_forever(w)

    pid, r = _child(body)
    _wait_ready(r)
    assert sem.value == 1               # back while the child still lives
    _kill(pid)
    sem.close()


# ---- a holder that dies -------------------------------------------------------

@pytest.mark.parametrize("how", ["with", "undo", "async with", "aio async with",
                                 "acquire_async undo"])
def test_a_killed_holders_unit_comes_back(backend, how):
    if how == "aio async with":
        sem = efd.aio.BoundedSemaphore(1, backend=backend)
    else:
        sem = efd.BoundedSemaphore(1, backend=backend)

    def body(w):
        if how == "with":
            with sem:
                _hold_forever(w)
        elif how == "undo":
            sem.acquire(undo=_booked(backend))
            _hold_forever(w)
        else:
            async def main():
                if how in ("async with", "aio async with"):
                    async with sem:
                        _hold_forever(w)
                else:
                    await sem.acquire_async(undo=_booked(backend))
                    _hold_forever(w)
            asyncio.run(main())

    pid, r = _child(body)
    _wait_ready(r)
    assert sem.value == 0
    _kill(pid)
    ev = sem._ev
    if _booked(backend):
        # A waiter gets it: the dead holder's books are settled by whoever
        # looks (here, the first try of this acquire or its re-check).
        assert ev.acquire(timeout=PROMPT)
        ev.release()
        assert sem.value == 1
    else:
        # The kernel counters keep no books: consumed, as before.
        assert not ev.acquire(timeout=0.3)
    sem.close()


@pytest.mark.parametrize("how", ["acquire_async undo", "async with",
                                 "aio async with", "trio acquire_async undo",
                                 "trio aio async with"])
@pytest.mark.parametrize("backend_name", BOOKED)
def test_a_loop_killed_after_its_reader_took_the_unit_gives_it_back(
        backend_name, how):
    """A task holds what it waits for (``undo=True``, ``async with``): the
    loop's reader -- or, under trio, the task itself -- books the unit in
    the same step as it takes it, so a process killed right after the take,
    before the task resumes, gives it back.  (It was booked when the task
    resumed: a death in between lost it.)"""
    if not _booked(backend_name):
        pytest.skip("no books here (python -m efd)")
    trio_run = how.startswith("trio")
    if trio_run:
        trio = pytest.importorskip("trio")
    aio = "aio" in how.split()
    sem = (efd.aio.Semaphore if aio else efd.Semaphore)(0,
                                                        backend=backend_name)

    def die_after(take):
        # The death this test is about: right after a take that got a unit.
        def taken(*args):
            value = take(*args)
            if value:
                os.kill(os.getpid(), signal.SIGKILL)
            return value
        return taken

    def body(w):
        from efd import _aio
        if trio_run:
            efd.EventFD._try_read = die_after(efd.EventFD._try_read)
            efd.EventFD._try_read_hold = die_after(
                efd.EventFD._try_read_hold)
        else:
            ready = _aio._Waiters._ready

            def served_then_die(self):
                ready(self)
                if self.served:         # a task has its unit, not resumed
                    os.kill(os.getpid(), signal.SIGKILL)
            _aio._Waiters._ready = served_then_die

        async def hold():
            if "async with" in how:
                async with sem:
                    pass
            else:
                await sem.acquire_async(undo=True)

        async def main_asyncio():
            task = asyncio.ensure_future(hold())
            await asyncio.sleep(0.2)
            os.write(w, b"x")
            await asyncio.wait_for(task, PROMPT)

        async def main_trio():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(hold)
                await trio.sleep(0.2)
                os.write(w, b"x")
        if trio_run:
            trio.run(main_trio)
        else:
            asyncio.run(main_asyncio())

    pid, r = _child(body)
    _wait_ready(r)                      # its task waits
    sem.release()
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert sem.value == 1               # booked, so settled: not lost
    sem.close()


@pytest.mark.parametrize("how", ["reader", "aio reader", "aio hand-off"])
@pytest.mark.parametrize("backend_name", BOOKED)
def test_a_unit_passed_on_to_a_holder_is_booked_before_it_is_theirs(
        backend_name, how):
    """A plain task is served a unit (by the loop's reader, or an efd.aio
    release handing it over) and cancelled before it resumes: the unit
    goes on to the next queued task, a holder (``async with``), booked
    before it is the holder's -- so a death before the holder resumes
    gives it back.  (It was booked only when the holder resumed.)"""
    if not _booked(backend_name):
        pytest.skip("no books here (python -m efd)")
    aio = how.startswith("aio")
    sem = (efd.aio.BoundedSemaphore if aio else efd.BoundedSemaphore)(
        1, backend=backend_name)
    ev = sem._ev
    assert ev.acquire(False)            # count 0; the unit is plainly ours

    def body(w):
        from efd import _aio
        plain_task = []
        ready = _aio._Waiters._ready

        def serve_then_cancel(self):    # the reader serves it: cancel it
            ready(self)
            if self.served and plain_task:
                plain_task[0].cancel()
        _aio._Waiters._ready = serve_then_cancel

        async def plain():
            try:
                await (sem.acquire() if aio else sem.acquire_async())
            except asyncio.CancelledError:
                # Its unit went on to the holder, which has not resumed.
                os.kill(os.getpid(), signal.SIGKILL)

        async def holder():
            async with sem:
                pass

        async def main():
            plain_task.append(asyncio.ensure_future(plain()))
            await asyncio.sleep(0.05)
            asyncio.ensure_future(holder())
            await asyncio.sleep(0.05)
            os.write(w, b"x")
            if how == "aio hand-off":
                sem.release()           # straight to the plain task
                plain_task[0].cancel()
            else:
                ev.release()            # into the count: the reader serves
            await asyncio.sleep(PROMPT)
        asyncio.run(main())

    pid, r = _child(body)
    _wait_ready(r)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert sem.value == 1
    sem.close()


@pytest.mark.parametrize("backend_name", BOOKED)
def test_a_sleeping_waiter_in_another_process_gets_the_unit(backend_name):
    """The waiter is blocked before the holder dies (nobody looks at the
    books just then): its re-check settles them and takes the unit."""
    sem = efd.Semaphore(1, backend=backend_name)
    holder = _undo_holder(sem)
    r2, w2 = os.pipe()
    waiter = os.fork()
    if waiter == 0:
        try:
            ok = sem.acquire(timeout=PROMPT)
            os.write(w2, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(w2)
    time.sleep(0.2)                     # the waiter is asleep by now
    _kill(holder)
    got = os.read(r2, 1)
    os.waitpid(waiter, 0)
    os.close(r2)
    assert got == b"1"
    sem.close()


def test_plain_consumption_is_not_given_back():
    sem = efd.Semaphore(2)
    pid, r = _child(lambda w: (sem.acquire(), sem.acquire(undo=True),
                               _hold_forever(w)))
    _wait_ready(r)
    _kill(pid)
    assert sem.acquire(timeout=PROMPT)  # the undo unit came back ...
    assert not sem.acquire(timeout=0.3)  # ... the consumed one did not
    sem.close()


def test_a_settlement_is_clamped_to_the_bound():
    sem = efd.BoundedSemaphore(1)
    r, w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            sem.acquire(undo=True)
            os.write(w, b"x")
            os.read(go_r, 1)
            time.sleep(60)
        finally:
            os._exit(0)
    os.close(w)
    _wait_ready(r)
    # Another process (here: the parent) releases the unit the child took:
    # a hand-off the books cannot see; the child still "holds" it.
    sem.release()
    _kill(pid)
    assert sem.value == 1               # not 2: clamped to the bound
    sem.close()


def test_a_fork_child_inherits_no_holds_and_its_exit_releases_nothing():
    sem = efd.Semaphore(1)
    with sem:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                held = sem._ev._held()
                sem.__exit__(None, None, None)   # the inherited block
                code = 0 if held == 0 and sem.value == 0 else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        assert sem.value == 0
    assert sem.value == 1
    sem.close()


def _execd_holder(sem, tmp_path):
    """A child that takes a unit with undo=True and then execs a program
    that lives 1 s: its pid, once the program runs (still holding)."""
    flag = tmp_path / "started"
    pid = os.fork()
    if pid == 0:
        try:
            sem.acquire(undo=True)
            os.execv(sys.executable, [sys.executable, "-c",
                     "import pathlib, time; pathlib.Path(%r).touch(); "
                     "time.sleep(1.0)" % str(flag)])
        finally:
            os._exit(1)
    deadline = time.monotonic() + PROMPT
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    if not flag.exists():
        _kill_all(pid)
        raise AssertionError("the exec'd program did not start in time")
    return pid


def test_exec_keeps_the_holds_until_the_program_exits(tmp_path):
    sem = efd.Semaphore(1)
    pid = _execd_holder(sem, tmp_path)
    assert sem.value == 0               # the exec'd program still holds it
    os.waitpid(pid, 0)
    assert sem.acquire(timeout=PROMPT)  # it exited: the unit is back
    sem.release()
    sem.close()


def test_a_waiter_is_told_when_an_execd_holder_exits(tmp_path):
    """exec keeps the pid, the holds and the holder description: a waiter
    that sleeps while the exec'd program holds is woken when that program
    exits (futex: its pidfd says so), without looking before."""
    if not _told():
        pytest.skip("no death bell or no pidfds here (python -m efd)")
    sem = efd.Semaphore(1, backend="futex")
    pid = _execd_holder(sem, tmp_path)
    try:
        looks = sum(sem._ev._wakeups())
        assert sem.acquire(timeout=PROMPT)  # asleep until the program exits
        looks = sum(sem._ev._wakeups()) - looks
    finally:
        _kill_all(pid)
    assert looks <= 1, looks            # the wake-up at its exit, no more
    sem.release()
    sem.close()


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_spawned_holder_killed(method):
    """A spawn or forkserver child (the object crosses by pickling) holds
    and is killed."""
    import multiprocessing
    ctx = multiprocessing.get_context(method)
    sem = efd.Semaphore(1)
    started = ctx.Event()
    p = ctx.Process(target=_spawn_holder, args=(sem, started))
    p.start()
    assert started.wait(PROMPT * 4)
    assert sem.value == 0
    os.kill(p.pid, signal.SIGKILL)
    p.join(PROMPT)
    assert sem.acquire(timeout=PROMPT)
    sem.release()
    sem.close()


def _spawn_holder(sem, started):
    sem.acquire(undo=True)
    started.set()
    time.sleep(60)


def test_random_kills_of_many_holders_conserve_the_limit():
    limit, workers, killed = 4, full_or(8, 24), full_or(4, 12)
    rounds = full_or(1, 3)
    for _ in range(rounds):
        sem = efd.BoundedSemaphore(limit)
        rng = random.Random()
        pids = []
        for _ in range(workers):
            pid = os.fork()
            if pid == 0:
                try:
                    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
                    while True:
                        with sem:
                            time.sleep(rng.uniform(0, 0.002))
                finally:
                    os._exit(0)
            pids.append(pid)
        time.sleep(0.05)
        victims = rng.sample(pids, killed)
        for pid in victims:
            time.sleep(rng.uniform(0.002, 0.02))
            os.kill(pid, signal.SIGKILL)
        for pid in pids:
            if pid not in victims:
                os.kill(pid, signal.SIGTERM)
        for pid in pids:
            os.waitpid(pid, 0)
        got = 0
        while got < limit and sem.acquire(timeout=PROMPT):
            got += 1
        assert got == limit, "lost %d of %d units" % (limit - got, limit)
        assert not sem.acquire(blocking=False)
        sem.close()


def test_the_probe_reports_robust_holds():
    out = subprocess.run([sys.executable, "-m", "efd"], capture_output=True,
                         text=True, timeout=60, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert "robust holds" in out.stdout
    if sys.platform.startswith("linux"):
        assert efd._efd._probe()["robust_holds"] is True


def test_the_probe_says_whether_holders_deaths_are_told():
    """`python -m efd` says whether the kernel tells waiters that a holder
    died (pidfds), and says the fallback where pidfd_open is refused."""
    import _seccomp
    ok, why = _seccomp.supported()
    if not ok:
        pytest.skip(why)
    if not _told():
        pytest.skip("no death bell or no pidfds here (python -m efd)")
    out = subprocess.run([sys.executable, "-m", "efd"], capture_output=True,
                         text=True, timeout=60, cwd=REPO)
    assert "the kernel tells a waiter that a holder died" in out.stdout
    code = ("import runpy, sys; sys.argv = ['efd']; "
            "runpy.run_module('efd', run_name='__main__')")
    got = _seccomp.run_in_filtered_child("no-pidfd", code, cwd=REPO)
    assert got.returncode == 0, got.stderr
    assert "no pidfds here" in got.stdout, got.stdout
    assert "the kernel tells" not in got.stdout, got.stdout


def test_objects_of_one_page_in_one_process_share_the_books():
    """The books are per process: a copy of the object in this process
    (loaded from a pickle, as another interpreter's would be) settles what
    the original took, and closing one copy keeps the holds of the other."""
    import pickle
    ev1 = efd.EventFD(2, semaphore=True, backend="futex")
    assert ev1.acquire(undo=True)
    ev2 = pickle.loads(pickle.dumps(ev1))
    assert ev2._held() == 1
    ev2.release()
    assert (ev1._held(), ev1.value) == (0, 2)
    assert ev2.acquire(undo=True)
    ev2.close()                         # ev1 still open: still held
    assert (ev1._held(), ev1.value) == (1, 1)
    ev1.close()


@pytest.mark.parametrize("library", ["asyncio", "trio"])
@pytest.mark.parametrize("backend_name", BOOKED)
def test_an_event_loop_waiter_gets_a_dead_holders_unit(library, backend_name):
    """Nobody tells a loop of a holder's death: its re-check settles the
    books (fails without it: the waiter waits until its deadline)."""
    if library == "trio":
        trio = pytest.importorskip("trio")
    sem = efd.aio.Semaphore(1, backend=backend_name)
    pid, r = _child(lambda w: (sem._ev.acquire(undo=True), _hold_forever(w)))
    _wait_ready(r)

    async def waiter():
        async with sem:
            return sem._ev._held()

    if library == "asyncio":
        async def main():
            task = asyncio.ensure_future(waiter())
            await asyncio.sleep(0.2)    # queued, its loop watching
            _kill(pid)
            return await asyncio.wait_for(task, PROMPT)
        held_inside = asyncio.run(main())
    else:
        async def main():
            result = []

            async def run():
                result.append(await waiter())
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run)
                await trio.sleep(0.2)
                _kill(pid)
                with trio.fail_after(PROMPT):
                    while not result:
                        await trio.sleep(0.01)
            return result[0]
        held_inside = trio.run(main)
    assert held_inside == 1
    assert (sem._ev._held(), sem.value) == (0, 1)
    sem.close()


def test_a_sleeper_is_told_of_a_hold_booked_after_it_slept():
    """futex: W sleeps while no other process holds anything; A's loop
    task then books the unit its reader took, and A is killed.  W gets the
    unit long before its deadline: the books' bell wakes a sleeper that
    slept with no re-check, and since loops sleep on the futex word (a
    process whose loops do makes every waiter re-check: efd_futex.c, "An
    event loop's sleep"), W's re-check finds it too.  (The explorer's
    books-holder-vs-sleeper scenario checks the books' bell alone.)"""
    sem = efd.aio.Semaphore(1)
    ev = sem._ev
    if ev.backend != "futex":
        sem.close()
        pytest.skip("the books' bell is the futex backend's")
    assert ev.acquire()
    booked_r, booked_w = os.pipe()
    a = os.fork()
    if a == 0:
        try:
            from efd import _aio
            ready = _aio._Waiters._ready

            def ready_then_stall(record):
                # The reader took the unit for the task; the loop stalls
                # before the task resumes, so that the task books it only
                # later, while W sleeps.
                ready(record)
                if record.served:
                    time.sleep(0.5)
            _aio._Waiters._ready = ready_then_stall

            async def main():
                async with sem:
                    os.write(booked_w, b"x")
                    await asyncio.sleep(60)
            asyncio.run(main())
        finally:
            os._exit(0)
    time.sleep(0.3)                     # A's task queued, its loop watching
    ev.release()                        # A's loop: read, then stall 0.5 s
    time.sleep(0.15)
    res_r, res_w = os.pipe()
    w = os.fork()
    if w == 0:
        try:
            t0 = time.monotonic()
            ok = ev.acquire(timeout=PROMPT * 2)
            os.write(res_w, b"%d %.3f" % (ok, time.monotonic() - t0))
        finally:
            os._exit(0)
    try:
        _wait_ready(booked_r)           # A booked it (W asleep by now)
        _kill(a)
        a = None
        ok, waited = os.read(res_r, 64).split()
    finally:
        _kill_all(a, w)                 # whatever failed
    assert ok == b"1"
    assert float(waited) < PROMPT, "W got the unit only at its deadline"
    sem.close()


def test_a_copy_made_before_the_first_hold_shares_the_books_too():
    """The copy exists before the process takes its slot (adversary F3):
    released through the copy, the unit is settled; killed afterwards, the
    process leaves the count whole (no unit given back twice)."""
    import pickle
    sem = efd.Semaphore(1)

    def body(w):
        copy = pickle.loads(pickle.dumps(sem))
        sem.acquire(undo=True)
        copy.release()
        if copy._ev._held() != 0:
            os._exit(3)
        _hold_forever(w)

    pid, r = _child(body)
    _wait_ready(r)
    _kill(pid)
    assert sem.value == 1
    sem.close()


def test_a_process_that_cannot_take_a_slot_says_so():
    """No holder description can be made (here: out of descriptors): a
    `with` block warns once and consumes as before the books; undo=True
    raises, naming why; nothing is taken by the refusal."""
    import resource
    import warnings
    sem = efd.Semaphore(2)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            lowest_free = os.dup(0)
            os.close(lowest_free)
            resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, hard))
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                with sem:
                    held = sem._ev._held()
                with sem:
                    pass
            try:
                sem.acquire(undo=True)
                raised = ""
            except OSError as exc:
                raised = str(exc)
            ok = (held == 0 and len(caught) == 1
                  and "not held" in str(caught[0].message)
                  and issubclass(caught[0].category, RuntimeWarning)
                  and "Too many open files" in raised
                  and sem.value == 2)
            os.write(w, b"ok" if ok else repr(
                (held, [str(c.message) for c in caught], raised,
                 sem.value)).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    got = os.read(r, 4096)
    os.waitpid(pid, 0)
    assert got == b"ok", got
    sem.close()


@pytest.mark.parametrize("cls", ["Semaphore", "BoundedSemaphore", "Lock"])
def test_efd_aio_value_and_locked_count_a_dead_holders_unit(cls):
    """efd.aio's value and locked() settle first, as EventFD.value does."""
    sem = getattr(efd.aio, cls)() if cls == "Lock" else \
        getattr(efd.aio, cls)(1)

    def body(w):
        async def main():
            async with sem:
                _hold_forever(w)
        asyncio.run(main())

    pid, r = _child(body)
    _wait_ready(r)
    _kill(pid)
    assert (sem.value, sem.locked()) == (1, False)
    sem.close()


@pytest.mark.parametrize("cls,error", [
    ("BoundedSemaphore", "ValueError: BoundedSemaphore released too many"),
    ("Lock", "RuntimeError: Lock is not acquired.")])
def test_efd_aio_block_exit_past_the_bound_names_the_class(cls, error):
    """A held block's exit goes through the count; past the bound (another
    process released the unit meanwhile) it raises as release() does."""
    sem = getattr(efd.aio, cls)() if cls == "Lock" else \
        getattr(efd.aio, cls)(1)

    async def main():
        try:
            async with sem:
                pid = os.fork()         # another process releases the unit
                if pid == 0:
                    try:
                        sem._ev.release()
                    finally:
                        os._exit(0)
                os.waitpid(pid, 0)
                assert sem._ev._held() == 1
        except (ValueError, RuntimeError) as exc:
            return "%s: %s" % (type(exc).__name__, exc)
        return "no error"
    got = asyncio.run(main())
    assert got.startswith(error), got
    assert sem.value == 1
    sem.close()


# ---- holders elsewhere: an exec'd program, another interpreter ----------------

_PROGRAM_HOLDER = r"""
import os, sys, time
import efd
sem = efd.from_handle(os.environ["EFD_HOLD"])
with sem:
    print("holding", sem.value, flush=True)
    time.sleep(60)
"""


def _kill_program_holding(code, sem, expect):
    """Run `code` as a separate program given `sem` by its handle (the
    environment's EFD_HOLD), wait for its line `expect`, and SIGKILL it."""
    import select
    h = sem.handle()
    proc = subprocess.Popen([sys.executable, "-c", code],
                            env=dict(os.environ, PYTHONPATH=REPO,
                                     EFD_HOLD=str(h)),
                            pass_fds=h.fds, stdout=subprocess.PIPE,
                            universal_newlines=True)
    try:
        assert select.select([proc.stdout], [], [], PROMPT)[0]
        assert proc.stdout.readline().strip() == expect
    finally:
        proc.kill()
        proc.wait(PROMPT)
        proc.stdout.close()


@pytest.mark.parametrize("backend_name", BOOKED)
def test_a_program_that_adopted_the_handle_is_killed_holding(backend_name):
    """A separate program (no fork: it adopted the object from its handle)
    holds a unit in a `with` block and is SIGKILLed: the unit comes back
    and reaches a waiter here."""
    sem = efd.BoundedSemaphore(1, backend=backend_name)
    try:
        _kill_program_holding(_PROGRAM_HOLDER, sem, "holding 0")
        assert sem.acquire(timeout=PROMPT)
        sem.release()
        assert sem.value == 1
    finally:
        sem.close()


_INTERPRETERS_HOLD = r"""
import os, sys, time
import efd
from concurrent import interpreters

sem = efd.from_handle(os.environ["EFD_HOLD"])
interp = interpreters.create()
queue = interpreters.create_queue()
queue.put(sem)
interp.prepare_main(queue=queue)
# Another interpreter holds one unit, this one the other: the holds are
# the process's, whichever interpreter took them.
interp.exec("s = queue.get(); s.__enter__()")
sem.acquire(undo=True)
print("holding", sem.value, flush=True)
time.sleep(60)
"""


def test_units_held_in_two_interpreters_come_back_when_the_process_dies():
    """One interpreter holds a unit in a `with` block, another took one
    with undo=True; the process is killed: both units come back, each
    once (the bound is not passed)."""
    try:
        from concurrent import interpreters  # noqa: F401
    except ImportError:
        pytest.skip("no concurrent.interpreters (CPython 3.14+)")
    sem = efd.BoundedSemaphore(2)
    try:
        _kill_program_holding(_INTERPRETERS_HOLD, sem, "holding 0")
        assert sem.acquire(timeout=PROMPT) and sem.acquire(timeout=PROMPT)
        assert sem.value == 0
        sem.release(2)
        with pytest.raises(ValueError):
            sem.release()                # both came back, once each
    finally:
        sem.close()


# ---- a holder's death is told, not polled for (efd_watch.c) ------------------

def _told():
    probe = efd._efd._probe()
    return probe["death_bell"] and probe["holder_deaths_told"]


def _switches(tid):
    with open("/proc/self/task/%d/status" % tid) as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches"):
                return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches for thread %d" % tid)


def _read_line(fd, timeout):
    import select
    data = b""
    deadline = time.monotonic() + timeout
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(left, 0))
        assert ready, "the waiter said nothing in %.1f s" % timeout
        chunk = os.read(fd, 4096)
        assert chunk, "the waiter died before it said %r" % data
        data += chunk
    return data.decode()


IDLE = 1.5      # seconds a waiter sleeps while another process holds


def _waiter_while_held(sem, seccomp_mode=None):
    """Fork a waiter whose thread blocks in sem.acquire() while another
    process holds the unit.  It says (one JSON line) how often that thread
    looked and was switched in IDLE seconds, then (another line) whether
    it got the unit and when (time.monotonic(), one clock for all
    processes here).  Returns (pid, read end)."""
    import threading
    res_r, res_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(res_r)
            if seccomp_mode is not None:
                import _seccomp
                _seccomp.install_filter(seccomp_mode)
            box = {}
            started = threading.Event()

            def wait():
                box["tid"] = threading.get_native_id()
                started.set()
                box["ok"] = sem.acquire(timeout=PROMPT * 3)
                box["at"] = time.monotonic()
            t = threading.Thread(target=wait)
            t.start()
            started.wait()
            time.sleep(0.3)                 # asleep by now
            looks0, sw0 = sum(sem._ev._wakeups()), _switches(box["tid"])
            time.sleep(IDLE)
            looks1, sw1 = sum(sem._ev._wakeups()), _switches(box["tid"])
            os.write(res_w, (json.dumps({"looks": looks1 - looks0,
                                         "switches": sw1 - sw0}) + "\n")
                     .encode())
            t.join(PROMPT * 4)
            os.write(res_w, (json.dumps({"ok": box.get("ok"),
                                         "at": box.get("at")}) + "\n")
                     .encode())
        finally:
            os._exit(0)
    os.close(res_w)
    return pid, res_r


def _kill_holder_under_waiter(holder, waiter, res):
    """The waiter's first line (how it slept while the holder held), the
    time the holder was SIGKILLed, and the waiter's second line (whether
    and when it got the unit).  No child outlives it."""
    try:
        idle = json.loads(_read_line(res, PROMPT))
        killed_at = time.monotonic()
        _kill(holder)
        holder = None
        got = json.loads(_read_line(res, PROMPT * 4))
    finally:
        _kill_all(holder, waiter)
        os.close(res)
    return idle, killed_at, got


def _hold_in_block(sem):
    def body(w):
        with sem:
            _hold_forever(w)
    return body


@pytest.mark.parametrize("name", ["futex", "pipe"])
def test_a_waiter_does_not_look_while_another_process_holds(name):
    """futex (and pipe, where its waiters sleep on futex words): while
    another process holds the unit, a blocked waiter sleeps with no
    re-check (the kernel will say when the holder dies: a pidfd,
    efd_watch.c); SIGKILL the holder and the waiter is woken and takes the
    unit at once."""
    if not _told() or not sleeps_on_futex(name):
        pytest.skip("no death bell or no pidfds here, or %s waiters "
                    "sleep in poll() (python -m efd)" % name)
    sem = efd.Semaphore(1, backend=name)
    holder, r = _child(_hold_in_block(sem))
    _wait_ready(r)
    waiter, res = _waiter_while_held(sem)
    idle, killed_at, got = _kill_holder_under_waiter(holder, waiter, res)
    # Before: one look every 100 ms, 15 in IDLE seconds.
    assert idle["looks"] == 0, idle
    assert idle["switches"] <= 1, idle
    assert got["ok"] is True, got
    assert got["at"] - killed_at < PROMPT, got
    assert sem.value == 0 and sem._ev._held() == 0
    sem.close()


def _churn_holders(sem, deaths):
    """Fork a process that forks one short-lived holder after another,
    until it is killed (at most for a minute): each takes a unit of sem
    with undo=True, keeps it 30 ms and exits holding it (its unit comes
    back when somebody settles).  `deaths` is a shared mmap of 8 bytes:
    the count of holders that died holding, so far -- a test measures
    over a number of deaths, not a span of time that a loaded machine
    may spend in forks.  Returns its pid."""
    import struct
    pid = os.fork()
    if pid == 0:
        try:
            n = 0
            deadline = time.monotonic() + 60.0
            while time.monotonic() < deadline:
                holder = os.fork()
                if holder == 0:
                    code = 1
                    try:
                        if sem.acquire(timeout=1.0, undo=True):
                            time.sleep(0.03)
                            code = 0
                    finally:
                        os._exit(code)  # holding, if 0
                _, status = os.waitpid(holder, 0)
                if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
                    n += 1
                    deaths[:8] = struct.pack("=Q", n)
        finally:
            os._exit(0)
    return pid


def test_a_holders_death_wakes_only_the_sleepers_that_wait_on_it():
    """futex: each sleeper has a word of its own, which the watcher moves
    only at the death of a holder that sleeper waits on.  In one process,
    thread A waits on `y`, whose holder lives, while thread B waits on
    `x`, whose short-lived holders die holding about twenty times a
    second: B is told of each death, A sleeps on, not woken once (with
    one word per process, A woke at every one of B's holders' deaths)."""
    import threading
    if not _told():
        pytest.skip("no death bell or no pidfds here (python -m efd)")
    y = efd.Semaphore(1, backend="futex")
    x = efd.Semaphore(1, backend="pipe" if sleeps_on_futex("pipe")
                      else "futex")     # one watcher for both backends
    holder, r = _child(_hold_in_block(y))
    _wait_ready(r)
    churn = waiter = None
    deaths = mmap.mmap(-1, 8)
    res_r, res_w = os.pipe()
    try:
        churn = _churn_holders(x, deaths)
        waiter = os.fork()
        if waiter == 0:
            try:
                box = {"b": 0}
                started = threading.Event()
                stop = threading.Event()

                def died():
                    return struct.unpack("=Q", deaths[:8])[0]

                def on_y():
                    box["tid"] = threading.get_native_id()
                    started.set()
                    box["y"] = y.acquire(timeout=PROMPT * 6)

                def on_x():
                    while not stop.is_set():
                        if x.acquire(timeout=0.5):
                            box["b"] += 1
                            x.release()
                            time.sleep(0.01)    # a holder's turn
                a = threading.Thread(target=on_y)
                b = threading.Thread(target=on_x)
                a.start()
                b.start()
                started.wait()
                time.sleep(0.3)                 # asleep by now
                ya, xa, sw = (sum(y._ev._wakeups()), sum(x._ev._wakeups()),
                              _switches(box["tid"]))
                b0, d0, t0 = box["b"], died(), time.monotonic()
                # At least IDLE seconds and 20 of x's holders' deaths
                # (about 30 in IDLE on an idle machine), within PROMPT * 4.
                while (time.monotonic() - t0 < IDLE or died() - d0 < 20) \
                        and time.monotonic() - t0 < PROMPT * 4:
                    time.sleep(0.05)
                out = {"y_looks": sum(y._ev._wakeups()) - ya,
                       "x_looks": sum(x._ev._wakeups()) - xa,
                       "a_switches": _switches(box["tid"]) - sw,
                       "b_took": box["b"] - b0,
                       "deaths": died() - d0,
                       "seconds": round(time.monotonic() - t0, 2)}
                stop.set()
                os.write(res_w, (json.dumps(out) + "\n").encode())
            finally:
                os._exit(0)
        res = json.loads(_read_line(res_r, PROMPT * 6))
    finally:
        _kill_all(waiter, churn, holder)
        os.close(res_r)
        os.close(res_w)
        deaths.close()
    # The churn made its deaths (a machine too loaded to fork 20 holders
    # in PROMPT * 4 seconds says so here, not as a lost wake-up) ...
    assert res["deaths"] >= 20, res
    # B was told of the holders' deaths (their units came back to it) ...
    assert res["b_took"] >= 5 and res["x_looks"] >= 5, res
    # ... and A, on y, slept through them all.
    assert res["y_looks"] == 0, res
    assert res["a_switches"] <= 1, res
    y.close()
    x.close()


def test_without_pidfds_a_waiter_looks_for_a_dead_holder():
    """Where pidfd_open is refused (seccomp here; a kernel before 5.3),
    the waiter looks again every 100 ms while another process holds, and
    so still finds the dead holder's unit."""
    import _seccomp
    ok, why = _seccomp.supported()
    if not ok:
        pytest.skip(why)
    if not _told():
        pytest.skip("no death bell or no pidfds here (python -m efd)")
    sem = efd.Semaphore(1, backend="futex")
    holder, r = _child(_hold_in_block(sem))
    _wait_ready(r)
    waiter, res = _waiter_while_held(sem, "no-pidfd")
    idle, _, got = _kill_holder_under_waiter(holder, waiter, res)
    assert idle["looks"] >= 5, idle     # about 15: every 100 ms
    assert got["ok"] is True, got
    sem.close()


def _spawn_keeping_descriptors(argv):
    """Start a program that keeps every inheritable descriptor, the
    holder description included (os.system()'s way: posix_spawn, a
    vfork-like clone that runs no fork handlers); its pid.  Not
    subprocess: before Python 3.10 it forks, and efd's fork handler then
    closes the holder description in the child before the exec, as in
    any fork child (a fork child holds nothing of its parent's)."""
    import shutil
    return os.posix_spawn(shutil.which(argv[0]), argv, os.environ)


def test_a_holder_description_kept_by_a_child_is_looked_for_after_exit():
    """The holder dies while a child it started without closing
    descriptors keeps its holder description (docs/processes.rst): the
    pidfd says the holder died, but its lock lives on, so the waiter looks
    again every 100 ms and gets the unit once that child exits -- not at
    its own deadline."""
    if not _told():
        pytest.skip("no death bell or no pidfds here (python -m efd)")
    sem = efd.Semaphore(1, backend="futex")

    def body(w):
        with sem:
            # A child that inherits every descriptor, the holder
            # description included, and lives 1.5 s.
            _spawn_keeping_descriptors(["sleep", "1.5"])
            _hold_forever(w)
    holder, r = _child(body)
    _wait_ready(r)
    waiter, res = _waiter_while_held(sem)
    _, killed_at, got = _kill_holder_under_waiter(holder, waiter, res)
    assert got["ok"] is True, got
    assert got["at"] - killed_at < PROMPT, got
    sem.close()


def test_a_fork_stops_the_holders_watcher_first(run_py):
    """The watcher is a thread (efd_watch.c), kept after the wait that
    started it; os.fork() stops it first when no sleeper relies on it, so
    a program that waited while another process held units and then
    forks forks with one thread (from 3.12 os.fork() would warn that it
    is multi-threaded), and the next such wait starts it again."""
    if not _told():
        pytest.skip("no death bell or no pidfds here (python -m efd)")
    out = run_py(FORK_PROBE + textwrap.dedent(r"""
        import json, os, signal, threading, time, warnings
        import efd

        def threads():
            return len(os.listdir("/proc/self/task"))

        import faulthandler
        faulthandler.cancel_dump_traceback_later()
        # The watchdog's thread leaves in its own time (on a loaded machine
        # after base was counted: kept 0, after -1).
        deadline = time.monotonic() + 5
        while threads() > 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        sem = efd.Semaphore(1, backend="futex")
        r, w = os.pipe()
        base = threads()

        def wait_while_held():
            # A child holds the unit for 1 s; this waits for it meanwhile
            # (the watcher watches the child).
            holder = os.fork()
            if holder == 0:
                with sem:
                    os.write(w, b"x")
                    time.sleep(1)
                os._exit(0)
            os.read(r, 1)
            assert sem.acquire(timeout=10)
            sem.release()
            os.waitpid(holder, 0)
        wait_while_held()
        kept = threads() - base
        child, warned = fork_probe()
        after = threads() - base
        wait_while_held()                   # again
        again = threads() - base
        print(json.dumps({
            "kept": kept, "after": after, "again": again,
            "child": child, "warned": warned}))
    """), timeout=60)
    got = json.loads(out.stdout)
    assert got["kept"] == 1, got        # the watcher, kept
    assert got["after"] == 0, got       # stopped before the fork
    assert got["child"] == 1, got
    assert got["warned"] == [], got
    assert got["again"] == 1, got       # started again by the next wait


def test_a_waiter_keeps_few_pidfds_of_holders_that_live_on(run_py):
    """A waiter's process keeps a pidfd per holder its sleepers rely on,
    and at most 32 more for holders nobody waits on now (efd_watch.c,
    WATCH_IDLE): sixty long-lived processes that each held the unit once
    while it waited leave it with no more than that, not sixty (the
    adversary's pidfd_hoard: EMFILE under a soft limit of 256)."""
    if not _told():
        pytest.skip("no death bell or no pidfds here (python -m efd)")
    out = run_py(r"""
        import json, os, signal, time
        import efd

        def pidfds():
            n = 0
            for fd in os.listdir("/proc/self/fd"):
                try:
                    if os.readlink("/proc/self/fd/" + fd) == \
                            "anon_inode:[pidfd]":
                        n += 1
                except OSError:
                    pass
            return n

        sem = efd.BoundedSemaphore(1, backend="futex")
        r, w = os.pipe()
        go_r, go_w = os.pipe()
        holders = []
        # All forked first (a fork stops an idle watcher, and closes its
        # pidfds), then each holds in turn.
        for i in range(60):
            pid = os.fork()
            if pid == 0:
                os.read(go_r, 1)            # its turn
                with sem:
                    os.write(w, b"h")
                    time.sleep(0.05)
                time.sleep(60)              # lives on, holds nothing
                os._exit(0)
            holders.append(pid)
        for pid in holders:
            os.write(go_w, b"g")
            assert os.read(r, 1) == b"h"
            assert sem.acquire(timeout=10)  # asleep while it holds
            sem.release()
        kept = pidfds()
        for pid in holders:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        print(json.dumps({"kept": kept}))
    """, timeout=60)
    kept = json.loads(out.stdout)["kept"]
    assert kept <= 32, kept
    assert kept >= 16, kept             # most were watched, then let go


def test_a_dead_holder_whose_lock_lives_on_in_a_child_is_looked_for_calmly():
    """A killed holder that nobody has reaped yet (a zombie) whose holder
    description lives on in a child it started: its pidfd is readable at
    once, so watching it would wake the waiter over and over (the
    adversary saw 58,000 wake-ups a second).  It is not watched: the
    waiter looks every 100 ms until the child exits."""
    if not _told():
        pytest.skip("no death bell or no pidfds here (python -m efd)")
    sem = efd.BoundedSemaphore(2, backend="futex")
    k, r = _child(_hold_in_block(sem))  # a live holder, watched (slot 0)
    _wait_ready(r)
    cr, cw = os.pipe()
    h = os.fork()
    if h == 0:
        try:
            with sem:
                child = _spawn_keeping_descriptors(["sleep", "30"])
                os.write(cw, b"%d\n" % child)
                time.sleep(60)
        finally:
            os._exit(0)
    os.close(cw)
    sleeper = int(_read_line(cr, PROMPT))
    os.close(cr)
    res_r, res_w = os.pipe()
    waiter = None
    try:
        os.kill(h, signal.SIGKILL)      # not reaped: a zombie
        time.sleep(0.05)
        waiter = os.fork()
        if waiter == 0:
            try:
                looks = sum(sem._ev._wakeups())
                got = sem.acquire(timeout=1.5)
                looks = sum(sem._ev._wakeups()) - looks
                os.write(res_w, (json.dumps({"got": got, "looks": looks})
                                 + "\n").encode())
            finally:
                os._exit(0)
        res = json.loads(_read_line(res_r, PROMPT))
    finally:
        _kill_all(k, h, waiter, sleeper)
        os.close(res_r)
        os.close(res_w)
    assert res["got"] is False, res     # the child keeps H's unit
    assert res["looks"] <= 40, res      # about 15: every 100 ms


def test_a_waiter_in_another_pid_namespace_is_not_fooled_by_its_own_pid():
    """The waiter is in a child pid namespace (as root: unshare) whose
    /proc is still the parent's, and its own pid there is the holder's pid
    (forced with ns_last_pid): a pidfd opened for the holder's pid would
    name the waiter itself.  Pids are compared only within the object
    maker's namespace, so the waiter looks every 100 ms instead, and gets
    the unit soon after the holder is killed (before: at its deadline)."""
    import ctypes
    if os.geteuid() != 0:
        pytest.skip("needs root (unshare(CLONE_NEWPID), ns_last_pid)")
    if not _told():
        pytest.skip("no death bell or no pidfds here (python -m efd)")
    libc = ctypes.CDLL(None, use_errno=True)
    sem = efd.BoundedSemaphore(1, backend="futex")
    holder = _undo_holder(sem)
    res_r, res_w = os.pipe()
    mid = os.fork()
    if mid == 0:
        try:
            if libc.unshare(0x20000000) != 0:          # CLONE_NEWPID
                os.write(res_w, b'{"skip": "unshare refused"}\n')
                os._exit(0)
            init = os.fork()                # pid 1 of the new namespace
            if init == 0:
                with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                    f.write(str(holder - 1))
                waiter = os.fork()          # its pid there: the holder's
                if waiter == 0:
                    t0 = time.monotonic()
                    got = sem.acquire(timeout=PROMPT)
                    os.write(res_w, (json.dumps({
                        "pid": os.getpid(), "got": got,
                        "at": time.monotonic()}) + "\n").encode())
                    os._exit(0)
                os.waitpid(waiter, 0)
                os._exit(0)
            os.waitpid(init, 0)
        finally:
            os._exit(0)
    try:
        time.sleep(0.5)                     # the waiter is asleep by now
        killed_at = time.monotonic()
        _kill(holder)
        holder = None
        res = json.loads(_read_line(res_r, PROMPT * 2))
    finally:
        _kill_all(holder)
        os.waitpid(mid, 0)
        os.close(res_r)
        os.close(res_w)
    if "skip" in res:
        pytest.skip(res["skip"])
    assert res["got"] is True, res
    assert res["at"] - killed_at < 1.0, res     # a look, not the deadline
