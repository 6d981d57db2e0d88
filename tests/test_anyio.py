"""The async methods under anyio, on its asyncio backend (plain and with
uvloop) and its trio backend, on every efd backend: cancel scopes,
``move_on_after``/``fail_after``, task groups, ``async with sem`` and
``Event.wait_async``.  Skipped cleanly where anyio is not installed (and the
trio backend where trio is not).
"""
import threading
import time

import pytest

import efd
from efd import _aio

from conftest import PROMPT
from test_dropins import make_sem as new_sem  # noqa: F401  (fixture)

anyio = pytest.importorskip("anyio")


def _has(module):
    try:
        __import__(module)
    except ImportError:
        return False
    return True


@pytest.fixture(params=["asyncio", "asyncio+uvloop", "trio"])
def arun(request):
    """arun(main, *args) -> anyio.run on the anyio backend under test,
    bounded, checking that no wait record is left behind."""
    name = request.param
    if name == "trio" and not _has("trio"):
        pytest.skip("trio is not installed")
    if name == "asyncio+uvloop" and not _has("uvloop"):
        pytest.skip("uvloop is not installed")
    backend = "trio" if name == "trio" else "asyncio"
    options = {"use_uvloop": True} if name == "asyncio+uvloop" else {}

    def run(main, *args):
        async def bounded():
            with anyio.fail_after(PROMPT * 6):
                return await main(*args)
        result = anyio.run(bounded, backend=backend, backend_options=options)
        assert not _aio._registry, _aio._registry
        return result
    return run


async def until(predicate):
    with anyio.fail_after(PROMPT):
        while not predicate():
            await anyio.sleep(0.001)


def drain(sem):
    n = 0
    while sem.acquire(False):
        n += 1
    return n


def test_acquire_wait_and_timeouts(new_sem, arun):
    async def main():
        sem = new_sem(1)
        assert await sem.acquire_async() is True

        async def release_later():
            await anyio.sleep(0.02)
            sem.release(2)

        async with anyio.create_task_group() as tg:
            tg.start_soon(release_later)
            assert await sem.acquire_async(timeout=PROMPT) is True
        assert await sem.acquire_async(timeout=0.05) is True
        assert await sem.acquire_async(timeout=0.05) is False
    arun(main)


def test_move_on_after_consumes_nothing(new_sem, arun):
    async def main():
        sem = new_sem(0)
        with anyio.move_on_after(0.03) as scope:
            await sem.acquire_async()
        assert scope.cancelled_caught
        with pytest.raises(TimeoutError):
            with anyio.fail_after(0.03):
                await sem.acquire_async()
        sem.release()
        return drain(sem)
    assert arun(main) == 1


def test_cancel_scope_cancel_mid_wait(new_sem, arun):
    async def main():
        sem = new_sem(0)
        done = []

        async def waiter(scope_holder):
            with anyio.CancelScope() as scope:
                scope_holder.append(scope)
                await sem.acquire_async()
                done.append(True)

        holders = [[] for _ in range(6)]
        async with anyio.create_task_group() as tg:
            for h in holders:
                tg.start_soon(waiter, h)
            await until(lambda: all(holders))
            await anyio.sleep(0.01)
            for h in holders[::2]:
                h[0].cancel()
            sem.release(2)
            await until(lambda: len(done) == 2)
            await anyio.sleep(0.02)
            for h in holders:
                h[0].cancel()
        return len(done), drain(sem)
    # Two units, three survivors: two served, none lost, none left.
    assert arun(main) == (2, 0)


def test_task_group_fifo(new_sem, arun):
    async def main():
        sem = new_sem(0)
        served = []

        async def waiter(i):
            await sem.acquire_async()
            served.append(i)

        async with anyio.create_task_group() as tg:
            for i in range(10):
                tg.start_soon(waiter, i)
                # anyio (on trio) may start tasks in any order: one by one.
                await anyio.sleep(0.005)
            sem.release(10)
        return served
    assert arun(main) == list(range(10))


def test_async_with_limits(new_sem, arun):
    async def main():
        sem = new_sem(3)
        inside = peak = 0

        async def job():
            nonlocal inside, peak
            async with sem:
                inside += 1
                peak = max(peak, inside)
                await anyio.sleep(0.005)
                inside -= 1

        async with anyio.create_task_group() as tg:
            for _ in range(12):
                tg.start_soon(job)
        return peak, drain(sem)
    assert arun(main) == (3, 3)


def test_event_wait_async(backend, arun):
    async def main():
        event = efd.Event(backend=backend)
        results = []
        try:
            async def waiter():
                results.append(await event.wait_async(PROMPT))

            async with anyio.create_task_group() as tg:
                for _ in range(4):
                    tg.start_soon(waiter)
                await anyio.sleep(0.02)
                event.set()
                event.clear()
            assert await event.wait_async(0.02) is False
        finally:
            event.close()
        return results
    assert arun(main) == [True] * 4


def test_close_from_a_thread_wakes_waiters(new_sem, arun):
    async def main():
        sem = new_sem(0)
        errors = []

        async def waiter():
            try:
                await sem.acquire_async()
            except ValueError as exc:
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(waiter)
            await anyio.sleep(0.02)
            closer = threading.Thread(target=sem.close)
            closer.start()
            await anyio.to_thread.run_sync(closer.join, PROMPT)
        return errors
    errors = arun(main)
    assert len(errors) == 3 and all("closed" in str(e) for e in errors)


@pytest.mark.parametrize("kind", ["acquire_async", "Event.wait_async"])
def test_close_while_the_run_is_busy(new_sem, backend, kind, arun,
                                     monkeypatch):
    """close() from another thread while the run does not yield for longer
    than close() waits for it (CLOSE_WAIT): close() goes on without the
    run, closing the loop sleeper under the task asleep on it; once the
    run yields, the task ends with ValueError, on each anyio backend (on
    trio, the record tells trio of the descriptor it kept while the task
    waits: test_trio.py has the same for a bare trio.run)."""
    monkeypatch.setattr(_aio, "CLOSE_WAIT", 0.2)
    if kind == "acquire_async":
        ev = new_sem(0)
        wait, inner = ev.acquire_async, getattr(ev, "_ev", ev)
    else:
        ev = efd.Event(backend=backend)
        wait, inner = ev.wait_async, ev._ev
    errors, failures = [], []
    asleep, closed = threading.Event(), threading.Event()

    async def consume():
        try:
            await wait()
        except ValueError as exc:
            errors.append(exc)

    async def main():
        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await until(lambda: _aio.waiting(inner) == 1)
            await anyio.sleep(0.05)         # the task asleep
            asleep.set()
            closed.wait(PROMPT)             # busy: the run does not yield
            time.sleep(0.1)

    def in_thread():
        try:
            arun(main)
        except BaseException as exc:        # noqa: B902 (reported below)
            failures.append(exc)

    thread = threading.Thread(target=in_thread, daemon=True)
    thread.start()
    assert asleep.wait(PROMPT), failures
    with pytest.warns(RuntimeWarning):
        ev.close()
    closed.set()
    thread.join(PROMPT * 2)
    assert not thread.is_alive(), "the task still waits on a closed object"
    assert not failures, failures
    assert len(errors) == 1 and isinstance(errors[0], ValueError), errors
