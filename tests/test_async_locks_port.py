"""asyncio's own ``Lib/test/test_asyncio/test_locks.py``, ``SemaphoreTests``
and ``EventTests``, ported to efd.

Each test follows CPython's (3.13) as closely as the API allows, against
``efd.Semaphore`` and a semaphore-mode ``efd.EventFD`` (``sem`` fixture) or
``efd.Event``, on every backend and on both asyncio's loop and uvloop.  What
had to change, and why:

* asyncio's ``release()`` hands the unit to the first waiter's future on
  the spot; efd's units travel through the descriptor, and the loop sees
  them on its next poll.  Where CPython counts ``await asyncio.sleep(0)``
  steps before asserting that a task finished, the port waits (bounded)
  until it has; where CPython asserts that a task did *not* finish, the port
  first lets the loop run for a while (``settle``).  The orders asserted are
  CPython's, unchanged.
* ``sem._value``, ``sem._waiters`` and ``locked()`` are asyncio internals:
  the port reads the counter (``_peek``) and efd's own wait queue instead.
* ``repr`` follows ``threading`` (the drop-ins' model), not asyncio: those
  two tests are left out.
"""
import asyncio

import pytest

import efd
from efd import _aio

from conftest import PROMPT, backend_unavailable
from test_async import aio, until  # noqa: F401  (aio is a fixture)
from test_dropins import make_event as new_event  # noqa: F401  (fixture)


async def settle():
    """Let the loop run long enough to serve anything it would serve."""
    for _ in range(5):
        await asyncio.sleep(0)
    await asyncio.sleep(0.02)
    for _ in range(5):
        await asyncio.sleep(0)


def count(sem):
    """The units in the counter (asyncio's ``sem._value``)."""
    ev = sem if isinstance(sem, efd.EventFD) else sem._ev
    value = ev._peek()
    assert value is not None, "counter unreadable on this backend"
    return value


def queue_length(sem):
    """Tasks of the running loop queued for a unit (``len(sem._waiters)``
    counting only waiters not yet served)."""
    ev = sem if isinstance(sem, efd.EventFD) else sem._ev
    record = _aio._registry.get((ev, asyncio.get_running_loop()))
    return 0 if record is None else sum(
        not f.done() for f in record.consumers)


def nothing_queued(sem):
    ev = sem if isinstance(sem, efd.EventFD) else sem._ev
    return not any(k[0] is ev for k in _aio._registry)


@pytest.fixture(params=["Semaphore", "EventFD"])
def new_sem(request, backend):
    """new_sem(value=1) -> efd.Semaphore or semaphore-mode efd.EventFD on
    the backend under test, closed at teardown."""
    why = backend_unavailable(backend, semaphore=True)
    if why:
        pytest.skip(why)
    made = []

    def factory(value=1):
        if request.param == "Semaphore":
            sem = efd.Semaphore(value, backend=backend)
        else:
            sem = efd.EventFD(value, semaphore=True, backend=backend)
        made.append(sem)
        return sem

    yield factory
    for sem in made:
        sem.close()


# ---- SemaphoreTests ------------------------------------------------------


def test_initial_value_zero(new_sem, aio):
    async def main():
        sem = new_sem(0)
        assert count(sem) == 0
        assert await sem.acquire_async(timeout=0) is False     # "locked"
    aio(main)


def test_semaphore(new_sem, aio):
    async def main():
        sem = new_sem()
        assert count(sem) == 1
        with pytest.raises(TypeError, match="await"):
            await sem
        assert count(sem) == 1
    aio(main)


def test_semaphore_value():
    with pytest.raises(ValueError):
        efd.Semaphore(-1)
    with pytest.raises((ValueError, OverflowError)):
        efd.EventFD(-1, semaphore=True)


def test_acquire(new_sem, aio):
    async def main():
        sem = new_sem(3)
        result = []

        assert await sem.acquire_async()
        assert await sem.acquire_async()
        assert count(sem) == 1

        async def c(tag):
            await sem.acquire_async()
            result.append(tag)
            return True

        t1 = asyncio.ensure_future(c(1))
        t2 = asyncio.ensure_future(c(2))
        t3 = asyncio.ensure_future(c(3))

        await asyncio.sleep(0)
        assert result == [1]
        assert count(sem) == 0
        await until(lambda: queue_length(sem) == 2)

        t4 = asyncio.ensure_future(c(4))

        sem.release()
        sem.release()

        await until(lambda: len(result) == 3)
        await settle()
        assert len(result) == 3
        assert count(sem) == 0
        assert queue_length(sem) == 1

        assert t1.done() and t1.result()
        race_tasks = [t2, t3, t4]
        done_tasks = [t for t in race_tasks if t.done() and t.result()]
        assert len(done_tasks) == 2
        # FIFO: the two that waited first are the two served.
        assert result == [1, 2, 3]

        # cleanup locked semaphore
        sem.release()
        await asyncio.gather(*race_tasks)
    aio(main)


def test_acquire_cancel(new_sem, aio):
    async def main():
        sem = new_sem()
        await sem.acquire_async()

        acquire = asyncio.ensure_future(sem.acquire_async())
        asyncio.get_running_loop().call_soon(acquire.cancel)
        with pytest.raises(asyncio.CancelledError):
            await acquire
        assert nothing_queued(sem)
        assert count(sem) == 0
    aio(main)


def test_acquire_cancel_before_awoken(new_sem, aio):
    async def main():
        sem = new_sem(0)

        t1 = asyncio.ensure_future(sem.acquire_async())
        t2 = asyncio.ensure_future(sem.acquire_async())
        t3 = asyncio.ensure_future(sem.acquire_async())
        t4 = asyncio.ensure_future(sem.acquire_async())

        await until(lambda: queue_length(sem) == 4)

        t1.cancel()
        t2.cancel()
        sem.release()

        await until(lambda: t3.done())
        await settle()
        num_done = sum(t.done() for t in [t3, t4])
        assert num_done == 1
        assert t3.done()
        assert not t4.done()

        t3.cancel()
        t4.cancel()
        await asyncio.gather(t1, t2, t3, t4, return_exceptions=True)
        assert count(sem) == 0          # t3 had the unit and kept it
    aio(main)


def test_acquire_hang(new_sem, aio):
    async def main():
        sem = new_sem(0)

        t1 = asyncio.ensure_future(sem.acquire_async())
        t2 = asyncio.ensure_future(sem.acquire_async())
        await until(lambda: queue_length(sem) == 2)

        t1.cancel()
        sem.release()
        await until(lambda: t2.done())
        assert count(sem) == 0          # "locked"
        assert t2.done() and t2.result() is True
    aio(main)


def test_acquire_no_hang(backend, aio):
    # `async with`: efd.Semaphore only.
    if backend_unavailable(backend, semaphore=True):
        pytest.skip(backend_unavailable(backend, semaphore=True))

    async def main():
        sem = efd.Semaphore(1, backend=backend)

        async def c1():
            async with sem:
                await asyncio.sleep(0)
            t2.cancel()

        async def c2():
            async with sem:
                assert False, "c2 must not get in"

        t1 = asyncio.ensure_future(c1())
        t2 = asyncio.ensure_future(c2())

        r1, r2 = await asyncio.gather(t1, t2, return_exceptions=True)
        assert r1 is None
        assert isinstance(r2, asyncio.CancelledError)

        assert await sem.acquire_async(timeout=1.0) is True
        sem.close()
    aio(main)


def test_release_not_acquired():
    bounded = getattr(efd, "BoundedSemaphore", None)
    if bounded is None:
        pytest.skip("efd.BoundedSemaphore is not in this build yet")
    sem = bounded()
    try:
        with pytest.raises(ValueError):
            sem.release()
    finally:
        sem.close()


def test_release_no_waiters(new_sem, aio):
    async def main():
        sem = new_sem()
        await sem.acquire_async()
        assert count(sem) == 0

        sem.release()
        assert count(sem) == 1
    aio(main)


def test_acquire_fifo_order(new_sem, aio):
    async def main():
        sem = new_sem(1)
        result = []

        async def coro(tag):
            await sem.acquire_async()
            result.append('%s_1' % tag)
            await asyncio.sleep(0.01)
            sem.release()

            await sem.acquire_async()
            result.append('%s_2' % tag)
            await asyncio.sleep(0.01)
            sem.release()

        await asyncio.gather(coro('c1'), coro('c2'), coro('c3'))
        assert result == ['c1_1', 'c2_1', 'c3_1', 'c1_2', 'c2_2', 'c3_2']
    aio(main)


def test_acquire_fifo_order_2(new_sem, aio):
    async def main():
        sem = new_sem(1)
        result = []

        async def c1(result):
            await sem.acquire_async()
            result.append(1)
            return True

        async def c2(result):
            await sem.acquire_async()
            result.append(2)
            sem.release()
            await sem.acquire_async()
            result.append(4)
            return True

        async def c3(result):
            await sem.acquire_async()
            result.append(3)
            return True

        t1 = asyncio.ensure_future(c1(result))
        t2 = asyncio.ensure_future(c2(result))
        t3 = asyncio.ensure_future(c3(result))

        await asyncio.sleep(0)

        sem.release()
        sem.release()

        tasks = [t1, t2, t3]
        await asyncio.gather(*tasks)
        assert result == [1, 2, 3, 4]
    aio(main)


def test_acquire_fifo_order_3(new_sem, aio):
    async def main():
        sem = new_sem(0)
        result = []

        async def c(tag):
            await sem.acquire_async()
            result.append(tag)
            return True

        t1 = asyncio.ensure_future(c(1))
        t2 = asyncio.ensure_future(c(2))
        t3 = asyncio.ensure_future(c(3))

        await asyncio.sleep(0)

        t1.cancel()

        await asyncio.sleep(0)

        sem.release()
        sem.release()

        tasks = [t1, t2, t3]
        await asyncio.gather(*tasks, return_exceptions=True)
        assert result == [2, 3]
    aio(main)


def test_acquire_fifo_order_4(new_sem, aio):
    # A successful acquire wakes up several tasks that were waiting in the
    # queue under FIFO rules.
    async def main():
        sem = new_sem(0)
        result = []
        t4 = None

        async def c1(result):
            # First task immediately waits for the semaphore.  It will be
            # awoken by c2.
            assert count(sem) == 0
            await sem.acquire_async()
            # Create a fourth task.  It should run after c3, not c2.
            nonlocal t4
            t4 = asyncio.ensure_future(c4(result))
            result.append(1)
            return True

        async def c2(result):
            # The second task begins by releasing the semaphore three
            # times, for c1, c2, and c3.
            sem.release()
            sem.release()
            sem.release()
            assert count(sem) == 3
            # Units are there, but c1 waits first: c2 must queue.
            await sem.acquire_async()
            result.append(2)
            return True

        async def c3(result):
            await sem.acquire_async()
            result.append(3)
            return True

        async def c4(result):
            result.append(4)
            return True

        t1 = asyncio.ensure_future(c1(result))
        t2 = asyncio.ensure_future(c2(result))
        t3 = asyncio.ensure_future(c3(result))

        await asyncio.sleep(0)
        # Three tasks are in the queue, none served yet.
        assert count(sem) == 3
        assert queue_length(sem) == 3

        await until(lambda: t4 is not None)
        tasks = [t1, t2, t3, t4]
        await asyncio.gather(*tasks)
        assert result == [1, 2, 3, 4]
        assert count(sem) == 0
    aio(main)


# ---- beyond CPython's list: the properties those tests stand for ----------


def test_no_starvation_by_a_reacquiring_task(new_sem, aio):
    # The report behind gh-90155: a task that releases and re-acquires in a
    # loop must not keep a queued task out.
    async def main():
        sem = new_sem(1)
        rounds = []
        stop = False

        async def hog():
            while not stop:
                await sem.acquire_async()
                rounds.append("hog")
                await asyncio.sleep(0)
                sem.release()

        async def waiter():
            await sem.acquire_async()
            rounds.append("waiter")
            sem.release()

        hog_task = asyncio.ensure_future(hog())
        await until(lambda: len(rounds) >= 3)
        before = len(rounds)
        await asyncio.wait_for(waiter(), PROMPT)
        # The waiter queued behind at most the hog's current hold and the
        # hog's own re-acquisition that was already queued.
        assert rounds.index("waiter") - before <= 2
        stop = True
        await asyncio.wait_for(hog_task, PROMPT)
    aio(main)


def test_no_barging_with_units_there(new_sem, aio):
    # A newcomer that finds units while an earlier task is queued (served
    # or not) joins the queue: timeout=0 then gives up rather than barge.
    async def main():
        sem = new_sem(0)
        first = asyncio.ensure_future(sem.acquire_async())
        await until(lambda: queue_length(sem) == 1)
        sem.release()
        assert await sem.acquire_async(timeout=0) is False
        assert await first is True
        assert nothing_queued(sem)
        sem.release()
        assert await sem.acquire_async(timeout=0) is True
    aio(main)


@pytest.mark.parametrize("step", range(6))
def test_cancellation_at_every_point_loses_nothing(new_sem, aio, step):
    # Three queued tasks; two units; the first task is cancelled after
    # `step` loop iterations past the release (before its unit was read,
    # right after, after it resumed...).  The units must end with the
    # survivors or in the counter, never lost, never doubled.
    async def main():
        sem = new_sem(0)
        tasks = [asyncio.ensure_future(sem.acquire_async()) for _ in range(3)]
        await until(lambda: queue_length(sem) == 3)
        sem.release(2)
        for _ in range(step):
            await asyncio.sleep(0)
        tasks[0].cancel()
        await settle()
        done = [t for t in tasks if t.done() and not t.cancelled()]
        taken = sum(t.result() for t in done)
        left = count(sem)
        assert taken + left == 2, (step, taken, left)
        if tasks[0].cancelled():
            # Its unit, if it had one, went to the next in line.
            assert tasks[1].done() and tasks[2].done() and left == 0
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert nothing_queued(sem)
    aio(main)


# ---- EventTests ------------------------------------------------------------


def test_event_wait(new_event, aio):
    async def main():
        ev = new_event()
        assert not ev.is_set()

        result = []

        async def c(tag):
            if await ev.wait_async():
                result.append(tag)

        t1 = asyncio.ensure_future(c(1))
        t2 = asyncio.ensure_future(c(2))

        await asyncio.sleep(0)
        assert result == []

        t3 = asyncio.ensure_future(c(3))

        ev.set()
        await asyncio.sleep(0)
        assert result == [3, 1, 2]

        for t in (t1, t2, t3):
            assert t.done() and t.result() is None
    aio(main)


def test_event_wait_on_set(new_event, aio):
    async def main():
        ev = new_event()
        ev.set()
        assert await ev.wait_async() is True
    aio(main)


def test_event_wait_cancel(new_event, aio):
    async def main():
        ev = new_event()

        wait = asyncio.ensure_future(ev.wait_async())
        asyncio.get_running_loop().call_soon(wait.cancel)
        with pytest.raises(asyncio.CancelledError):
            await wait
        assert nothing_queued(ev)
    aio(main)


def test_event_clear(new_event, aio):
    async def main():
        ev = new_event()
        assert not ev.is_set()

        ev.set()
        assert ev.is_set()

        ev.clear()
        assert not ev.is_set()
    aio(main)


def test_event_clear_with_waiters(new_event, aio):
    async def main():
        ev = new_event()
        result = []

        async def c1(result):
            if await ev.wait_async():
                result.append(1)
            return True

        t = asyncio.ensure_future(c1(result))
        await asyncio.sleep(0)
        assert result == []

        ev.set()
        ev.clear()
        assert not ev.is_set()

        ev.set()
        ev.set()
        await asyncio.sleep(0)
        assert result == [1]
        assert t.done() and t.result() is True
        await settle()
        assert nothing_queued(ev)
    aio(main)


def test_event_set_then_clear_wakes_every_waiter(new_event, aio):
    # gh-57711's asyncio side, many waiters: set(); clear() at once, each
    # waiter present at the set() returns True.
    async def main():
        ev = new_event()
        tasks = [asyncio.ensure_future(ev.wait_async(PROMPT))
                 for _ in range(20)]
        await asyncio.sleep(0)
        ev.set()
        ev.clear()
        assert await asyncio.gather(*tasks) == [True] * 20
        assert nothing_queued(ev)
    aio(main)
