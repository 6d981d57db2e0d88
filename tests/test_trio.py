"""The async methods under trio: ``acquire_async``, ``read_async``,
``Event.wait_async`` and ``async with sem``, on every backend.

They wait through :func:`trio.lowlevel.wait_readable`, serve the tasks of
one ``trio.run`` in arrival order, honour cancel scopes (``move_on_after``,
``CancelScope.cancel()``) without losing a unit, and never end a timeout
early.  Skipped cleanly where trio is not installed.
"""
import random
import threading
import time

import pytest

import efd
from efd import _aio

from conftest import PROMPT, backend_unavailable

trio = pytest.importorskip("trio")
import trio.testing  # noqa: E402


def run(main, *args, limit=PROMPT * 6):
    """trio.run(main, *args), bounded by `limit` seconds; checks that the
    run left no wait record behind."""
    async def bounded():
        with trio.fail_after(limit):
            return await main(*args)
    result = trio.run(bounded)
    left = [k for k in _aio._registry
            if isinstance(k[1], trio.lowlevel.TrioToken)]
    assert not left, left
    return result


@pytest.fixture
def new_sem(backend):
    """new_sem(value=0, kind="EventFD"|"Semaphore") on the backend under
    test, closed at teardown."""
    why = backend_unavailable(backend, semaphore=True)
    if why:
        pytest.skip(why)
    made = []

    def factory(value=0, kind="EventFD"):
        if kind == "Semaphore":
            sem = efd.Semaphore(value, backend=backend)
        else:
            sem = efd.EventFD(value, semaphore=True, backend=backend)
        made.append(sem)
        return sem

    yield factory
    for sem in made:
        sem.close()


def trio_queued(ev):
    record = _aio._registry.get((ev, trio.lowlevel.current_trio_token()))
    return 0 if record is None else record.consumers


async def until(predicate, limit=PROMPT):
    with trio.fail_after(limit):
        while not predicate():
            await trio.sleep(0.001)


def drain(ev):
    n = 0
    while ev.acquire(False):
        n += 1
    return n


def test_fast_path_and_wait(new_sem):
    async def main():
        ev = new_sem(2)
        assert await ev.acquire_async() is True            # no wait
        assert await ev.read_async() == 1
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_release_later, ev, 3, 0.02)
            assert await ev.acquire_async(timeout=PROMPT) is True
            assert await ev.read_async() == 1
        assert await ev.acquire_async(timeout=0.05) is True
        assert await ev.acquire_async(timeout=0.05) is False
        assert await ev.acquire_async(timeout=0) is False
    run(main)


async def _release_later(ev, n, delay):
    await trio.sleep(delay)
    ev.release(n)


def test_counter_mode_read_async(backend):
    async def main():
        ev = efd.EventFD(0, backend=backend)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_release_later, ev, 7, 0.02)
                assert await ev.read_async() == 7
        finally:
            ev.close()
    run(main)


def test_async_with_semaphore(new_sem):
    async def main():
        sem = new_sem(2, kind="Semaphore")
        inside = peak = 0

        async def job():
            nonlocal inside, peak
            async with sem:
                inside += 1
                peak = max(peak, inside)
                await trio.sleep(0.005)
                inside -= 1

        async with trio.open_nursery() as nursery:
            for _ in range(8):
                nursery.start_soon(job)
        return peak, drain(sem._ev)
    assert run(main) == (2, 2)


def test_fifo_and_no_barging(new_sem):
    async def main():
        ev = new_sem(0)
        served = []

        async def waiter(i):
            assert await ev.acquire_async(timeout=PROMPT)
            served.append(i)

        async with trio.open_nursery() as nursery:
            for i in range(20):
                nursery.start_soon(waiter, i)
                await until(lambda: trio_queued(ev) == i + 1)
            ev.release(5)
            # A newcomer finds units but queued tasks: it must not take one.
            assert await ev.acquire_async(timeout=0) is False
            ev.release(15)
        return served
    assert run(main) == list(range(20))


def test_fifo_order_2_under_trio(new_sem):
    # asyncio's test_acquire_fifo_order_2, with trio tasks.
    async def main():
        sem = new_sem(1)
        result = []

        async def c1():
            await sem.acquire_async()
            result.append(1)

        async def c2():
            await sem.acquire_async()
            result.append(2)
            sem.release()
            await sem.acquire_async()
            result.append(4)

        async def c3():
            await sem.acquire_async()
            result.append(3)

        async with trio.open_nursery() as nursery:
            # trio shuffles its run queue: start them one after the other.
            nursery.start_soon(c1)
            await until(lambda: result == [1])
            nursery.start_soon(c2)
            await until(lambda: trio_queued(sem) == 1)
            nursery.start_soon(c3)
            await until(lambda: trio_queued(sem) == 2)
            sem.release()
            sem.release()
        return result
    assert run(main) == [1, 2, 3, 4]


def test_no_starvation(new_sem):
    async def main():
        sem = new_sem(1)
        rounds = []
        stop = False

        async def hog():
            while not stop:
                await sem.acquire_async()
                rounds.append("hog")
                await trio.sleep(0)
                sem.release()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(hog)
            await until(lambda: len(rounds) >= 3)
            before = len(rounds)
            assert await sem.acquire_async(timeout=PROMPT)
            rounds.append("me")
            sem.release()
            stop = True
        assert rounds.index("me") - before <= 2
    run(main)


def test_move_on_after_consumes_nothing(new_sem):
    async def main():
        ev = new_sem(0)
        with trio.move_on_after(0.03) as scope:
            await ev.acquire_async()
        assert scope.cancelled_caught
        with trio.move_on_after(0.03) as scope:
            await ev.read_async()
        assert scope.cancelled_caught
        ev.release()
        return drain(ev)
    assert run(main) == 1


@pytest.mark.parametrize("kind", ["EventFD", "Semaphore"])
def test_cancelled_and_released_before_the_waiter_resumed(new_sem, kind):
    # A task queued for a unit, its scope cancelled and a unit released
    # while it sits in a shielded checkpoint on its way to the read (the
    # queue's lock): it must leave cancelled, taking nothing -- the unit
    # stays in the count (anyio's test_cancel_during_acquire, release
    # first, on its trio backend).
    async def main():
        sem = new_sem(1, kind)
        assert sem.acquire(False)
        took = []

        async def waiter(task_status=trio.TASK_STATUS_IGNORED):
            task_status.started()
            took.append(await sem.acquire_async())

        async with trio.open_nursery() as nursery:
            await nursery.start(waiter)
            nursery.cancel_scope.cancel()
            with trio.CancelScope(shield=True):
                sem.release()
                await trio.testing.wait_all_tasks_blocked()
        return took, drain(sem)
    assert run(main) == ([], 1)


def test_cancellation_storm_is_exact(new_sem):
    # Waiters cancelled at random moments while units trickle in: every
    # unit is either taken by a task that then finished, or still there.
    n = 200
    rng = random.Random(5)

    async def main():
        ev = new_sem(0)
        taken = []
        scopes = []

        async def waiter(i):
            with trio.CancelScope() as scope:
                scopes.append(scope)
                if i % 2:
                    taken.append(await ev.read_async())
                else:
                    assert await ev.acquire_async()
                    taken.append(1)

        released = 0
        async with trio.open_nursery() as nursery:
            for i in range(n):
                nursery.start_soon(waiter, i)
            await until(lambda: len(scopes) == n)
            victims = rng.sample(scopes, n // 2)
            while victims or released < n:
                if rng.random() < 0.5 and released < n:
                    k = rng.randint(1, 3)
                    ev.release(k)
                    released += k
                elif victims:
                    victims.pop().cancel()
                for _ in range(rng.randint(0, 2)):
                    await trio.sleep(0)
            # Survivors beyond the units end by cancellation too.
            await trio.sleep(0.05)
            for scope in scopes:
                scope.cancel()
        return released, taken, drain(ev)
    released, taken, left = run(main)
    assert all(v == 1 for v in taken)
    assert len(taken) + left == released


def test_timeout_never_ends_early(backend):
    rng = random.Random(3)
    timeouts = [rng.uniform(0.0005, 0.004) for _ in range(150)]

    async def main():
        ev = efd.EventFD(0, semaphore=True, backend=backend)
        event = efd.Event(backend=backend)
        early = []
        try:
            for timeout in timeouts:
                for wait in (ev.acquire_async, event.wait_async):
                    t0 = time.monotonic()
                    assert await wait(timeout) is False
                    took = time.monotonic() - t0
                    if took < timeout:
                        early.append((timeout, took))
        finally:
            ev.close()
            event.close()
        return early
    assert run(main) == []


@pytest.mark.parametrize("timeout", [1e-9, 1e-7, 1e-5])
def test_a_timeout_of_a_few_nanoseconds_runs_out_instead_of_raising(
        backend, timeout):
    # A span so short that it is over before the wait begins: each wait
    # returns False, none raises trio's "`seconds` must be non-negative"
    # (efd asked trio for the time left, which can be less than nothing).
    async def main():
        ev = efd.EventFD(0, semaphore=True, backend=backend)
        event = efd.Event(backend=backend)
        results = []
        try:
            for _ in range(300):
                results.append(await ev.acquire_async(timeout))
                results.append(await event.wait_async(timeout))
            ev.release()
            results.append(await ev.acquire_async(timeout))
        finally:
            ev.close()
            event.close()
        return results
    assert run(main) == [False] * 600 + [True]


async def _wait_while(event, n, action):
    # n tasks wait on `event` while `action()` (a coroutine function) runs;
    # returns what each wait returned.
    results = []

    async def waiter():
        results.append(await event.wait_async(PROMPT))

    async with trio.open_nursery() as nursery:
        for _ in range(n):
            nursery.start_soon(waiter)
        await trio.sleep(0.02)
        await action()
    return results


def test_event_wait_async(backend):
    async def main():
        event = efd.Event(backend=backend)
        try:
            async def set_it():
                event.set()
            results = await _wait_while(event, 5, set_it)
            assert event.is_set()           # waiters take nothing
            assert await event.wait_async() is True
            event.clear()
            assert await event.wait_async(0.02) is False
            with trio.move_on_after(0.02) as scope:
                await event.wait_async()
            assert scope.cancelled_caught
        finally:
            event.close()
        return results
    assert run(main) == [True] * 5


@pytest.mark.parametrize("where", ["run", "thread"])
def test_event_set_then_clear_wakes_every_waiter(backend, where):
    # gh-57711: set(); clear() at once, from the run itself or from another
    # thread: every task waiting at the set() returns True.
    async def main():
        event = efd.Event(backend=backend)

        def set_and_clear():
            event.set()
            event.clear()

        async def action():
            if where == "run":
                set_and_clear()
            else:
                await trio.to_thread.run_sync(set_and_clear)
        try:
            return await _wait_while(event, 5, action)
        finally:
            event.close()
    assert run(main) == [True] * 5


def test_close_in_the_run_wakes_waiters(new_sem):
    async def main():
        ev = new_sem(0)
        event = efd.Event(backend=ev.backend)
        errors = []

        async def consume():
            try:
                await ev.acquire_async()
            except ValueError as exc:
                errors.append(exc)

        async def watch():
            try:
                await event.wait_async()
            except ValueError as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(consume)
                nursery.start_soon(watch)
            await until(lambda: trio_queued(ev) == 3)
            await trio.sleep(0.01)
            ev.close()
            event.close()
        return errors
    errors = run(main)
    assert len(errors) == 6
    assert all("closed" in str(e) for e in errors)


def trio_users(ev):
    record = _aio._registry.get((ev, trio.lowlevel.current_trio_token()))
    return 0 if record is None else record.users


def _closing_waiter(new_sem, backend, kind):
    """For the close() tests: the object (a semaphore, or an efd.Event),
    the EventFD whose record the run keeps, a task function that waits on
    it (acquire_async or Event.wait_async) and notes the ValueError it
    ends with, and the list of those errors."""
    if kind == "acquire_async":
        ev = new_sem(0)
        wait, inner = ev.acquire_async, ev
    else:
        ev = efd.Event(backend=backend)
        wait, inner = ev.wait_async, ev._ev
    errors = []

    async def consume():
        try:
            await wait()
        except ValueError as exc:
            errors.append(exc)
    return ev, inner, consume, errors


@pytest.mark.parametrize("kind", ["acquire_async", "Event.wait_async"])
def test_close_from_another_thread(new_sem, backend, kind):
    """close() from another thread ends every task's wait with ValueError:
    the one at the head of the run's queue and those queued behind it,
    which take the queue's lock after the record failed (a watcher that
    then went to sleep through the loop's helper hung for good)."""
    ev, inner, consume, errors = _closing_waiter(new_sem, backend, kind)
    registered = threading.Event()

    async def main():
        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(consume)
            await until(lambda: trio_users(inner) == 3)
            await trio.sleep(0.05)      # the head task asleep
            registered.set()

    thread = threading.Thread(target=run, args=(main,), daemon=True)
    thread.start()
    assert registered.wait(PROMPT)
    ev.close()
    thread.join(PROMPT)
    assert not thread.is_alive()
    assert len(errors) == 3 and all(isinstance(e, ValueError) for e in errors)
    assert not _aio._registry


@pytest.mark.parametrize("kind", ["acquire_async", "Event.wait_async"])
def test_close_while_the_run_is_busy(new_sem, backend, kind, monkeypatch):
    """close() from another thread while the run does not yield for longer
    than close() waits for it (CLOSE_WAIT): close() goes on without the
    run, closing the loop sleeper's descriptor under the task asleep on
    it; once the run yields, that task still ends with ValueError.  (The
    record told trio of the sleeper's descriptor through the closed
    sleeper, which refused: the task waited for ever.)"""
    monkeypatch.setattr(_aio, "CLOSE_WAIT", 0.2)
    ev, inner, consume, errors = _closing_waiter(new_sem, backend, kind)
    asleep, closed = threading.Event(), threading.Event()

    async def main():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            await until(lambda: trio_users(inner) == 1)
            await trio.sleep(0.05)      # the task asleep
            asleep.set()
            closed.wait(PROMPT)         # busy: the run does not yield
            time.sleep(0.1)

    thread = threading.Thread(target=run, args=(main,), daemon=True)
    thread.start()
    assert asleep.wait(PROMPT)
    with pytest.warns(RuntimeWarning):
        ev.close()
    closed.set()
    thread.join(PROMPT)
    assert not thread.is_alive(), "the task still waits on a closed object"
    assert len(errors) == 1 and isinstance(errors[0], ValueError), errors


def test_closed_object_raises(new_sem):
    async def main():
        ev = new_sem(1)
        ev.close()
        with pytest.raises(ValueError):
            await ev.acquire_async()
        with pytest.raises(ValueError):
            await ev.read_async()
    run(main)


def test_no_threads_used(new_sem):
    async def main():
        ev = new_sem(0)
        before = threading.active_count()
        during = []

        async def waiter():
            await ev.acquire_async()

        async with trio.open_nursery() as nursery:
            for _ in range(20):
                nursery.start_soon(waiter)
            await until(lambda: trio_queued(ev) == 20)
            during.append(threading.active_count())
            ev.release(20)
        return before, during[0]
    before, during = run(main)
    assert before == during


def test_trio_and_asyncio_loops_share_a_counter(new_sem):
    # A trio run in one thread and an asyncio loop in another wait on the
    # same counter; every unit is served exactly once.
    import asyncio
    ev = new_sem(0)
    k = 30
    got = {}

    async def trio_main():
        count = 0

        async def waiter():
            nonlocal count
            if await ev.acquire_async(timeout=PROMPT * 2):
                count += 1

        async with trio.open_nursery() as nursery:
            for _ in range(k):
                nursery.start_soon(waiter)
        got["trio"] = count

    async def asyncio_main():
        results = await asyncio.gather(
            *[ev.acquire_async(timeout=PROMPT * 2) for _ in range(k)])
        got["asyncio"] = sum(results)

    threads = [threading.Thread(target=run, args=(trio_main,)),
               threading.Thread(target=asyncio.run, args=(asyncio_main(),))]
    for t in threads:
        t.start()
    time.sleep(0.05)
    for _ in range(2 * k):
        ev.release()
        time.sleep(0.0005)
    for t in threads:
        t.join(PROMPT * 4)
    assert not any(t.is_alive() for t in threads)
    assert got == {"trio": k, "asyncio": k}
    assert ev.acquire(False) is False
    assert not _aio._registry
