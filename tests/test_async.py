"""EventFD.acquire_async / read_async: asyncio and uvloop, every backend.

Every test runs on each backend (the ``make`` fixture) and on both event
loops (``aio``).  After each run the loop must have no reader left for the
object and the waiter registry must be empty.
"""
import asyncio
import math
import multiprocessing
import os
import random
import threading
import time

import pytest

import efd
from efd import _aio

from conftest import KERNEL_BACKENDS, PROMPT, full_or

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is in the test extras
    uvloop = None

LOOPS = ("asyncio", "uvloop")


def reader_registered(loop, fd):
    """Whether `loop` still watches `fd` for reading.

    asyncio's selector loops show their map; uvloop only tells through
    remove_reader()'s answer (which also removes it, so call this last)."""
    selector = getattr(loop, "_selector", None)
    if selector is not None:
        key = selector.get_map().get(fd)
        return key is not None and key.data[0] is not None
    return loop.remove_reader(fd)


def assert_nothing_left(loop, *evs):
    assert not any(k[0] in evs and k[1] is loop for k in _aio._registry), \
        _aio._registry
    for ev in evs:
        if not ev.closed:
            assert not reader_registered(loop, ev.fileno())


@pytest.fixture(params=LOOPS)
def aio(request):
    """aio(main, *args, limit=...) runs the coroutine function `main` in a
    fresh loop of the kind under test (asyncio.run or uvloop.run), bounded
    by `limit` seconds, and returns its result."""
    if request.param == "uvloop" and uvloop is None:
        pytest.skip("uvloop is not installed")

    def run(main, *args, limit=PROMPT * 6):
        async def bounded():
            return await asyncio.wait_for(main(*args), limit)
        if request.param == "uvloop":
            return uvloop.run(bounded())
        return asyncio.run(bounded())

    run.kind = request.param
    return run


async def until(predicate, limit=PROMPT):
    """Let the loop run until predicate() is true (fails after `limit`)."""
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.001)


def waiters_of(ev):
    return _aio._registry.get((ev, asyncio.get_running_loop()))


def queued(ev):
    """How many tasks of the running loop wait to consume from `ev`."""
    record = waiters_of(ev)
    return 0 if record is None else len(record.consumers)


# ---- the first try: no loop at all ----------------------------------------


def test_fast_path_needs_no_loop(make, semaphore):
    # With a unit there, the coroutines finish on their first step without
    # a running loop: the try comes before any loop lookup.
    ev = make(3, semaphore=semaphore)
    coro = ev.acquire_async()
    with pytest.raises(StopIteration) as info:
        coro.send(None)
    assert info.value.value is True
    ev.release(2)
    coro = ev.read_async()
    with pytest.raises(StopIteration) as info:
        coro.send(None)
    # semaphore: 3 - 1 + 2 = 4, read 1, 3 left; counter: 3 taken, 2 read.
    assert info.value.value == (1 if semaphore else 2)
    assert ev._peek() in ((3 if semaphore else 0), None)


def test_fast_path_values(make, semaphore, aio):
    async def main():
        ev = make(5, semaphore=semaphore)
        first = await ev.read_async()
        got = await ev.acquire_async(timeout=0)
        loop = asyncio.get_running_loop()
        assert_nothing_left(loop, ev)
        return first, got
    first, got = aio(main)
    if semaphore:
        assert (first, got) == (1, True)
    else:
        assert (first, got) == (5, False)


def test_timeout_zero_only_tries(make, aio):
    async def main():
        ev = make(0, semaphore=True)
        t0 = time.monotonic()
        assert await ev.acquire_async(0) is False
        assert await ev.acquire_async(0.0) is False
        assert time.monotonic() - t0 < PROMPT
        assert_nothing_left(asyncio.get_running_loop(), ev)
    aio(main)


@pytest.mark.parametrize("bad, exc", [
    (-1, ValueError), (-0.5, ValueError), (math.nan, ValueError),
    ("1", TypeError), (b"1", TypeError), ([], TypeError),
])
def test_bad_timeouts_like_acquire(make, bad, exc):
    ev = make(1, semaphore=True)
    with pytest.raises(exc) as sync_info:
        ev.acquire(True, bad)
    coro = ev.acquire_async(bad)
    with pytest.raises(exc) as async_info:
        coro.send(None)
    assert str(async_info.value) == str(sync_info.value)
    assert ev.acquire(False)        # nothing was taken by the failed calls


@pytest.mark.parametrize("huge", [math.inf, 10**400, 1e300])
def test_huge_timeouts_mean_no_limit(make, aio, huge):
    async def main():
        ev = make(0, semaphore=True)
        loop = asyncio.get_running_loop()
        loop.call_later(0.02, ev.release)
        return await ev.acquire_async(huge)
    assert aio(main) is True


# ---- waiting ---------------------------------------------------------------


def test_wait_then_release(make, semaphore, aio):
    async def main():
        ev = make(0, semaphore=semaphore)
        loop = asyncio.get_running_loop()
        loop.call_later(0.02, ev.release, 3)
        got = await ev.read_async()
        loop.call_later(0.02, ev.release, 2)
        ok = await ev.acquire_async(timeout=PROMPT)
        assert_nothing_left(loop, ev)
        return got, ok, ev.acquire(False)
    got, ok, rest = aio(main)
    assert ok is True
    if semaphore:
        assert got == 1 and rest is True      # 3 + 2 - 1 - 1 = 3 left
    else:
        assert got == 3 and rest is False     # the acquire took both


def test_timeout_returns_false_and_cleans_up(make, aio):
    async def main():
        ev = make(0, semaphore=True)
        loop = asyncio.get_running_loop()
        t0 = time.monotonic()
        results = await asyncio.gather(
            *[ev.acquire_async(timeout=0.05) for _ in range(20)])
        took = time.monotonic() - t0
        assert_nothing_left(loop, ev)
        # A unit released later is still there: the timed-out tasks took
        # nothing.
        ev.release()
        return results, took, ev.acquire(False), ev.acquire(False)
    results, took, first, second = aio(main)
    assert results == [False] * 20
    assert 0.045 <= took < PROMPT
    assert (first, second) == (True, False)


def test_no_threads_used(make, aio):
    async def main():
        ev = make(0, semaphore=True)
        before = threading.active_count()
        tasks = [asyncio.ensure_future(ev.acquire_async()) for _ in range(50)]
        await until(lambda: queued(ev) == 50)
        during = threading.active_count()
        ev.release(50)
        assert all(await asyncio.gather(*tasks))
        return before, during
    before, during = aio(main)
    assert during == before


def test_thousand_waiters_fifo_one_registration(make, aio):
    n = 1000

    async def main():
        ev = make(0, semaphore=True)
        loop = asyncio.get_running_loop()
        served = []

        async def waiter(i):
            assert await ev.acquire_async(timeout=PROMPT * 4)
            served.append(i)

        tasks = [asyncio.ensure_future(waiter(i)) for i in range(n)]
        await until(lambda: queued(ev) == n)
        # One record, one reader, for all of them.
        assert [k for k in _aio._registry if k[0] is ev] == [(ev, loop)]
        for i in range(n):
            ev.release()
            await until(lambda: len(served) == i + 1)
        await asyncio.gather(*tasks)
        assert_nothing_left(loop, ev)
        return served, ev.acquire(False)
    served, left = aio(main)
    assert served == list(range(n))
    assert left is False


def test_release_many_serves_in_order(make, aio):
    async def main():
        ev = make(0, semaphore=True)
        served = []

        async def waiter(i):
            await ev.acquire_async()
            served.append(i)

        tasks = [asyncio.ensure_future(waiter(i)) for i in range(100)]
        await until(lambda: queued(ev) == 100)
        ev.release(60)
        await until(lambda: len(served) == 60)
        await asyncio.sleep(0.02)
        assert len(served) == 60            # no more than released
        ev.release(40)
        await asyncio.gather(*tasks)
        assert_nothing_left(asyncio.get_running_loop(), ev)
        return served
    assert aio(main) == list(range(100))


def test_spurious_readiness_keeps_waiting(make, semaphore, aio):
    # The reader callback running while the count is 0 (another holder took
    # the unit between readiness and our read) must leave the task waiting.
    async def main():
        ev = make(0, semaphore=semaphore)
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(ev.read_async())
        await until(lambda: waiters_of(ev) is not None)
        record = waiters_of(ev)
        record._ready()                     # readiness with nothing there
        await asyncio.sleep(0.01)
        assert not task.done()
        assert waiters_of(ev) is record and record.reading
        ev.release(2)
        got = await asyncio.wait_for(task, PROMPT)
        assert_nothing_left(loop, ev)
        return got
    assert aio(main) == (1 if semaphore else 2)


def test_thief_thread_conservation(make, make_twin, aio):
    # A thread steals units through another handle while tasks wait on the
    # same counter: readiness is often spurious; nothing is lost or doubled.
    total = 3000

    async def main():
        ev = make(0, semaphore=True)
        twin = make_twin(ev)
        loop = asyncio.get_running_loop()
        stop = threading.Event()
        stolen = [0]

        def thief():
            while not stop.is_set():
                if twin.acquire(False):
                    stolen[0] += 1
                else:
                    time.sleep(0)

        served = [0]

        async def consumer():
            while True:
                if not await ev.acquire_async(timeout=0.2):
                    return
                served[0] += 1

        thread = threading.Thread(target=thief)
        thread.start()
        try:
            tasks = [asyncio.ensure_future(consumer()) for _ in range(8)]
            for _ in range(total // 10):
                ev.release(10)
                await asyncio.sleep(0)
            await asyncio.gather(*tasks)
        finally:
            stop.set()
            thread.join(PROMPT)
        assert not thread.is_alive()
        rest = 0
        while ev.acquire(False):
            rest += 1
        assert_nothing_left(loop, ev)
        return served[0], stolen[0], rest
    served, stolen, rest = aio(main)
    assert served + stolen + rest == total


# ---- cancellation ----------------------------------------------------------


def test_cancel_after_being_served_hands_unit_on(make, make_twin, aio):
    async def main():
        ev = make(0, semaphore=True)
        twin = make_twin(ev)
        loop = asyncio.get_running_loop()
        first = asyncio.ensure_future(ev.acquire_async())
        second = asyncio.ensure_future(ev.acquire_async())
        await until(lambda: queued(ev) == 2)
        ev.release()
        waiters_of(ev)._ready()    # serve `first` now, before it resumes
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        # The unit went straight to the next waiter in line, not back to the
        # counter where another process could have taken it.
        assert twin.acquire(False) is False
        assert await asyncio.wait_for(second, PROMPT) is True
        assert ev.acquire(False) is False
        assert_nothing_left(loop, ev)
    aio(main)


def test_cancel_after_being_served_gives_value_back(make, semaphore, aio):
    async def main():
        ev = make(0, semaphore=semaphore)
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(ev.read_async())
        await until(lambda: waiters_of(ev) is not None)
        ev.release(7)
        waiters_of(ev)._ready()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert_nothing_left(loop, ev)
        left = 0
        while True:
            value = ev._try_read()
            if value is None:
                return left
            left += value
    assert aio(main) == 7


def test_external_timeout_consumes_nothing(make, aio):
    async def main():
        ev = make(0, semaphore=True)
        loop = asyncio.get_running_loop()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(ev.acquire_async(), 0.03)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(ev.read_async(), 0.03)
        assert_nothing_left(loop, ev)
        ev.release()
        return ev.acquire(False), ev.acquire(False)
    assert aio(main) == (True, False)


@pytest.mark.timeout(120)
def test_cancellation_storm_is_exact(make, aio):
    n = 400
    rng = random.Random(4)

    async def main():
        ev = make(0, semaphore=True)
        loop = asyncio.get_running_loop()
        taken = []

        async def waiter(i):
            if i % 2:
                value = await ev.read_async()
            else:
                await ev.acquire_async()
                value = None
            taken.append(value)

        tasks = [asyncio.ensure_future(waiter(i)) for i in range(n)]
        victims = rng.sample(tasks, n // 2)
        released = 0
        # Units arrive in small batches while victims are cancelled at
        # random moments: before, between and right after deliveries.
        while victims or released < n:
            action = rng.random()
            if action < 0.5 and released < n:
                k = rng.randint(1, 3)
                ev.release(k)
                released += k
            elif victims:
                victims.pop().cancel()
            for _ in range(rng.randint(0, 2)):
                await asyncio.sleep(0)
        await asyncio.gather(*tasks, return_exceptions=True)
        # Waiters still pending (more survivors than units) end by timeout.
        survivors = [t for t in tasks if not t.done()]
        assert not survivors
        assert_nothing_left(loop, ev)
        left = 0
        while True:
            value = ev._try_read()
            if value is None:
                break
            left += value
        return released, taken, left, tasks

    released, taken, left, tasks = aio(main)
    # Every completed waiter took exactly one unit; the rest is still there.
    assert all(v in (None, 1) for v in taken)
    assert len(taken) + left == released
    cancelled = sum(t.cancelled() for t in tasks)
    assert 0 < cancelled <= n // 2
    assert len(taken) + cancelled == n


@pytest.mark.timeout(120)
def test_cancellation_storm_counter_mode_exact(make, aio):
    # In counter mode only read_async says how much it took: use it alone so
    # the books balance exactly.
    n = 300
    rng = random.Random(7)

    async def main():
        ev = make(0)
        loop = asyncio.get_running_loop()
        taken = []

        async def waiter():
            taken.append(await ev.read_async())

        tasks = [asyncio.ensure_future(waiter()) for _ in range(n)]
        victims = rng.sample(tasks, n // 2)
        released = 0
        while victims:
            if rng.random() < 0.5:
                k = rng.randint(1, 5)
                ev.release(k)
                released += k
            else:
                victims.pop().cancel()
            for _ in range(rng.randint(0, 2)):
                await asyncio.sleep(0)
        # Feed the survivors one at a time until all are done.
        while not all(t.done() for t in tasks):
            ev.release()
            released += 1
            await asyncio.sleep(0)
        await asyncio.gather(*tasks, return_exceptions=True)
        assert_nothing_left(loop, ev)
        left = ev._try_read() or 0
        return released, taken, left

    released, taken, left = aio(main)
    assert sum(taken) + left == released


# ---- many loops, many processes -------------------------------------------


def test_two_loops_in_two_threads(make, aio):
    k = 50
    ev = make(0, semaphore=True)
    results = {}
    loops = {}
    ready = threading.Barrier(3, timeout=PROMPT * 2)

    def run_loop(name):
        async def main():
            loops[name] = asyncio.get_running_loop()
            tasks = [asyncio.ensure_future(ev.acquire_async(PROMPT * 4))
                     for _ in range(k)]
            await until(lambda: queued(ev) == k)
            await asyncio.get_running_loop().run_in_executor(None, ready.wait)
            got = await asyncio.gather(*tasks)
            assert_nothing_left(asyncio.get_running_loop(), ev)
            return got
        results[name] = aio(main)

    threads = [threading.Thread(target=run_loop, args=(n,)) for n in "ab"]
    for t in threads:
        t.start()
    ready.wait()
    assert len({k for k in _aio._registry if k[0] is ev}) == 2
    for _ in range(2 * k):
        ev.release()
        time.sleep(0.0005)
    for t in threads:
        t.join(PROMPT * 6)
    assert not any(t.is_alive() for t in threads)
    assert results["a"] == [True] * k and results["b"] == [True] * k
    assert ev.acquire(False) is False
    assert not _aio._registry


def _produce(ev, n, delay):
    for _ in range(n):
        ev.release()
        time.sleep(delay)


def _consume_async(ev, n, out):
    async def main():
        got = await asyncio.gather(
            *[ev.acquire_async(timeout=60) for _ in range(n)])
        out.put((sum(got), len(_aio._registry)))
    asyncio.run(main())


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_producer_process_async_consumers(make, aio, method):
    n = 200
    ev = make(0, semaphore=True)
    ctx = multiprocessing.get_context(method)

    async def main():
        procs = [ctx.Process(target=_produce, args=(ev, n // 2, 0.0005))
                 for _ in range(2)]
        for p in procs:
            p.start()
        try:
            got = await asyncio.gather(
                *[ev.acquire_async(timeout=PROMPT * 8) for _ in range(n)])
        finally:
            for p in procs:
                p.join(PROMPT * 4)
        assert [p.exitcode for p in procs] == [0, 0]
        assert_nothing_left(asyncio.get_running_loop(), ev)
        return got
    assert aio(main, limit=PROMPT * 12) == [True] * n
    assert ev.acquire(False) is False


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_async_consumer_processes(make, method):
    n = 60
    ev = make(0, semaphore=True)
    ctx = multiprocessing.get_context(method)
    out = ctx.Queue()
    procs = [ctx.Process(target=_consume_async, args=(ev, n // 3, out))
             for _ in range(3)]
    for p in procs:
        p.start()
    try:
        for _ in range(n):
            ev.release()
            time.sleep(0.001)
        answers = [out.get(timeout=PROMPT * 8) for _ in procs]
    finally:
        for p in procs:
            p.join(PROMPT * 4)
            if p.is_alive():
                p.kill()
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert sorted(answers) == [(n // 3, 0)] * 3
    assert ev.acquire(False) is False


# ---- closing, and loops that cannot watch descriptors ---------------------


def test_close_while_waiting_in_the_loop(make, aio):
    async def main():
        ev = make(0, semaphore=True)
        loop = asyncio.get_running_loop()
        fd = ev.fileno()
        tasks = [asyncio.ensure_future(ev.acquire_async()) for _ in range(5)]
        tasks.append(asyncio.ensure_future(ev.read_async()))
        tasks.append(asyncio.ensure_future(ev.acquire_async(timeout=PROMPT)))
        await until(lambda: queued(ev) == 7)
        t0 = time.monotonic()
        loop.call_soon(ev.close)
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert time.monotonic() - t0 < PROMPT
        assert not reader_registered(loop, fd)
        assert not _aio._registry
        return results
    results = aio(main)
    assert all(isinstance(r, ValueError) and "closed" in str(r)
               for r in results), results


def test_close_from_another_thread(make, aio):
    async def main():
        ev = make(0, semaphore=True)
        loop = asyncio.get_running_loop()
        tasks = [asyncio.ensure_future(ev.acquire_async()) for _ in range(3)]
        await until(lambda: waiters_of(ev) is not None)
        closer = threading.Timer(0.02, ev.close)
        closer.start()
        t0 = time.monotonic()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        took = time.monotonic() - t0
        closer.join(PROMPT)
        assert not _aio._registry
        return results, took
    results, took = aio(main)
    assert took < PROMPT
    assert all(isinstance(r, ValueError) for r in results), results


def test_with_block_close_wakes_waiters(make, aio):
    async def main():
        ev = make(0, semaphore=True)
        with ev:
            task = asyncio.ensure_future(ev.acquire_async())
            await until(lambda: waiters_of(ev) is not None)
        with pytest.raises(ValueError):
            await asyncio.wait_for(task, PROMPT)
        assert not _aio._registry
    aio(main)


def test_closed_object_raises(make, aio):
    async def main():
        ev = make(1, semaphore=True)
        ev.close()
        with pytest.raises(ValueError):
            await ev.acquire_async()
        with pytest.raises(ValueError):
            await ev.read_async()
        with pytest.raises(ValueError):
            await ev.acquire_async(timeout=1)
    aio(main)


class _NoReaderLoop(asyncio.SelectorEventLoop):
    # Like the Windows proactor loop: no add_reader.
    def add_reader(self, fd, callback, *args):
        raise NotImplementedError


def test_loop_without_add_reader_says_so(make):
    ev = make(0, semaphore=True)
    loop = _NoReaderLoop()
    try:
        with pytest.raises(NotImplementedError) as info:
            loop.run_until_complete(ev.acquire_async())
        assert "_NoReaderLoop" in str(info.value)
        assert "add_reader" in str(info.value)
        assert isinstance(info.value, RuntimeError)
        # The fast path does not need a reader at all.
        ev.release()
        assert loop.run_until_complete(ev.acquire_async()) is True
    finally:
        loop.close()
    assert not _aio._registry


def test_registry_drains_after_loop_ends_with_waiters(make, aio):
    # asyncio.run cancels tasks still waiting when main() returns.
    async def main():
        ev = make(0, semaphore=True)
        for _ in range(10):
            asyncio.ensure_future(ev.acquire_async())
        await asyncio.sleep(0.01)
        assert waiters_of(ev) is not None
        return ev
    ev = aio(main)
    assert not _aio._registry
    ev.release()
    assert ev.acquire(False) is True
    assert ev.acquire(False) is False


# ---- timeouts never end early ----------------------------------------------


@pytest.mark.parametrize("what", ["acquire_async", "Event.wait_async"])
def test_timeout_never_ends_early(backend, aio, what):
    # uvloop rounds timers to whole milliseconds and fired up to 0.7 ms
    # early in a few percent of waits; the deadline is monotonic and a timer
    # that fires before it is armed again for the rest.
    rng = random.Random(11)
    timeouts = [rng.uniform(0.0005, 0.004) for _ in range(full_or(100, 300))]

    async def main():
        if what == "acquire_async":
            obj = efd.EventFD(0, semaphore=True, backend=backend)
            wait = obj.acquire_async
        else:
            obj = efd.Event(backend=backend)
            wait = obj.wait_async
        early = []
        try:
            for timeout in timeouts:
                t0 = time.monotonic()
                got = await wait(timeout)
                took = time.monotonic() - t0
                assert got is False
                if took < timeout:
                    early.append((timeout, took))
        finally:
            obj.close()
        return early
    assert aio(main) == []


def test_detach_ends_waits_and_drops_readers(backend, aio):
    if backend not in KERNEL_BACKENDS:
        pytest.skip("only a kernel eventfd can be detached")

    async def main():
        ev = efd.EventFD(0, semaphore=True, backend=backend)
        loop = asyncio.get_running_loop()
        tasks = [asyncio.ensure_future(ev.acquire_async()) for _ in range(3)]
        await until(lambda: queued(ev) == 3)
        fd = ev.detach()
        try:
            results = await asyncio.wait_for(
                asyncio.gather(*tasks, return_exceptions=True), PROMPT)
            assert all(isinstance(r, ValueError) for r in results), results
            assert not _aio._registry
            assert not reader_registered(loop, fd)
        finally:
            os.close(fd)
    aio(main)
