"""efd.aio: Semaphore, BoundedSemaphore, Lock and Event, behaviour beyond
CPython's own tests (tests/test_aio_locks_port.py runs those).

* trio's and anyio's promises for their Semaphore/Lock/Event (trio
  ``_tests/test_sync.py``, anyio ``tests/test_synchronization.py``), written
  from their documented semantics and run through anyio -- the thinnest
  adapter that reaches asyncio, uvloop and trio alike: every acquire/wait is
  a checkpoint (a cancelled scope cancels it, before anything is taken),
  FIFO fairness ``[1, 2, 3]`` repeated, set-then-cancel keeps the wake-up,
  no barging, statistics;
* plain asyncio's fast path (no forced yield), acquire_nowait and
  WouldBlock, the threading drop-ins' ``acquire(False)`` not barging ahead
  of queued tasks, the RuntimeWarning of a blocking call in a running loop,
  ``read_async(timeout=)``;
* across processes: loops in several processes sharing one semaphore, with
  cancellations, conserve every unit (fork and spawn).

Every test takes the ``backend`` fixture: it runs on each backend.
"""
import asyncio
import ctypes
import os
import multiprocessing
import threading
import time
import warnings

import pytest

import efd
import efd.aio
from efd import _aio

from conftest import PROMPT, backend_unavailable, full_or

anyio = pytest.importorskip("anyio")

try:
    import uvloop
except ImportError:  # pragma: no cover
    uvloop = None


def _has(module):
    try:
        __import__(module)
    except ImportError:
        return False
    return True


@pytest.fixture(params=["asyncio", "asyncio+uvloop", "trio"])
def arun(request):
    """arun(main) -> anyio.run on the library under test, bounded, with no
    wait record left behind."""
    name = request.param
    if name == "trio" and not _has("trio"):
        pytest.skip("trio is not installed")
    if name == "asyncio+uvloop" and uvloop is None:
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
    run.kind = name
    return run


@pytest.fixture(params=["asyncio", "uvloop"])
def aio(request):
    """aio(main) -> asyncio.run (or uvloop's loop), bounded."""
    if request.param == "uvloop" and uvloop is None:
        pytest.skip("uvloop is not installed")

    def run(main, *args):
        async def bounded():
            return await asyncio.wait_for(main(*args), PROMPT * 6)
        if request.param == "uvloop":
            loop = uvloop.new_event_loop()
            try:
                return loop.run_until_complete(bounded())
            finally:
                loop.close()
        return asyncio.run(bounded())
    return run


@pytest.fixture
def made(backend):
    """made(cls, *args) -> an efd.aio object on the backend under test,
    closed at teardown."""
    why = backend_unavailable(backend, semaphore=True)
    if why:
        pytest.skip(why)
    objs = []

    def factory(cls, *args):
        obj = cls(*args, backend=backend)
        objs.append(obj)
        return obj
    yield factory
    for obj in objs:
        obj.close()


async def wait_blocked():
    # Let every other task run until it blocks (trio's
    # wait_all_tasks_blocked, portably).
    for _ in range(10):
        await anyio.sleep(0)
    await anyio.sleep(0.02)
    for _ in range(10):
        await anyio.sleep(0)


# ---- API and basics ---------------------------------------------------------


def test_names_and_backend(made):
    sem = made(efd.aio.Semaphore, 2)
    assert type(sem).__module__ == "efd.aio"
    assert sem.value == 2 and not sem.locked()
    assert issubclass(efd.WouldBlock, Exception)
    assert efd.aio.WouldBlock is efd.WouldBlock
    with pytest.raises(TypeError):
        with sem:
            pass


def test_default_backend_is_futex_where_it_works():
    if backend_unavailable("futex"):
        pytest.skip("no futex backend here")
    # EFD_BACKEND (how the suite runs on one backend) wins, as for the
    # threading drop-ins.
    env = os.environ.get("EFD_BACKEND", "")
    want = env if env not in ("", "auto") else "futex"
    for obj in (efd.aio.Semaphore(), efd.aio.Lock(), efd.aio.Event()):
        try:
            assert obj.backend == want
        finally:
            obj.close()


def test_repr_follows_asyncio(made, aio):
    async def main():
        lock = made(efd.aio.Lock)
        assert repr(lock).startswith("<efd.aio.Lock object at 0x")
        assert repr(lock).endswith(" [unlocked]>")
        await lock.acquire()
        task = asyncio.ensure_future(lock.acquire())
        await asyncio.sleep(0)
        assert repr(lock).endswith(" [locked, waiters:1]>")
        lock.release()
        await task
        lock.release()
        sem = made(efd.aio.Semaphore, 2)
        assert repr(sem).endswith(" [unlocked, value:2]>")
        ev = made(efd.aio.Event)
        assert repr(ev).endswith(" [unset]>")
        ev.set()
        assert repr(ev).endswith(" [set]>")
        ev.close()
        assert repr(ev).endswith(" [closed]>")
    aio(main)


def test_bounded_and_lock_release_errors(made):
    bsem = made(efd.aio.BoundedSemaphore, 1)
    with pytest.raises(ValueError, match="released too many times"):
        bsem.release()
    lock = made(efd.aio.Lock)
    with pytest.raises(RuntimeError, match="Lock is not acquired"):
        lock.release()
    assert lock.value == 1 and bsem.value == 1


def test_closed_object_raises_value_error(made, aio):
    async def main():
        sem = made(efd.aio.Semaphore, 1)
        sem.close()
        sem.close()
        assert sem.closed
        for call in (sem.release, sem.acquire_nowait):
            with pytest.raises(ValueError):
                call()
        with pytest.raises(ValueError):
            await sem.acquire()
    aio(main)


# ---- plain asyncio: asyncio's own fast path ---------------------------------


def test_asyncio_fast_path_does_not_yield(made, aio):
    # asyncio.Semaphore.acquire() with a unit there returns without letting
    # another task run; efd.aio's does the same under plain asyncio.
    async def main():
        sem = made(efd.aio.Semaphore, 1)
        ev = made(efd.aio.Event)
        ev.set()
        ran = []
        asyncio.get_running_loop().call_soon(ran.append, 1)
        await sem.acquire()
        await ev.wait()
        assert ran == []
        sem.release()
    aio(main)


@pytest.mark.parametrize("signature", ["asyncio's", "keywords"])
def test_async_with_awaits_a_subclass_acquire(made, aio, signature):
    # asyncio's __aenter__ awaits self.acquire(): a subclass that overrides
    # it (with asyncio's signature, or passing keywords on) sees every
    # `async with`, uncontended (the one-call fast path) and contended.
    calls = []

    if signature == "asyncio's":
        class Counted(efd.aio.BoundedSemaphore):
            async def acquire(self):
                calls.append(1)
                return await super().acquire()
    else:
        class Counted(efd.aio.BoundedSemaphore):
            async def acquire(self, **kw):
                calls.append(1)
                return await super().acquire(**kw)

    async def main():
        sem = made(Counted, 1)
        async with sem:
            assert sem.value == 0
        assert calls == [1] and sem.value == 1
        async with sem:
            second = asyncio.ensure_future(sem.__aenter__())
            await asyncio.sleep(0.01)
            assert not second.done()
        await second
        assert calls == [1, 1, 1] and sem.value == 0
        await sem.__aexit__(None, None, None)
        assert sem.value == 1
    aio(main)


def test_acquire_nowait_and_no_barging(made, aio):
    async def main():
        sem = made(efd.aio.Semaphore, 1)
        sem.acquire_nowait()
        with pytest.raises(efd.WouldBlock):
            sem.acquire_nowait()
        task = asyncio.ensure_future(sem.acquire())
        await asyncio.sleep(0)
        assert sem.statistics().tasks_waiting == 1
        sem.release()
        # The unit is the queued task's: neither a newcomer's nowait nor
        # the threading drop-ins' non-blocking acquire takes it.
        with pytest.raises(efd.WouldBlock):
            sem.acquire_nowait()
        await task
        assert sem.locked() and sem.value == 0
        sem.release()
        assert sem.value == 1
    aio(main)


def test_threading_dropin_does_not_barge(made, backend, aio):
    async def main():
        sem = efd.Semaphore(1, backend=backend)
        try:
            assert sem.acquire(False)
            task = asyncio.ensure_future(sem.acquire_async())
            await asyncio.sleep(0.01)
            sem.release()
            assert sem.acquire(False) is False      # the task's unit
            assert sem.acquire(timeout=0) is False
            assert await task is True
            sem.release()
            assert sem.acquire(False) is True
            sem.release()
        finally:
            sem.close()
    aio(main)


def test_cancel_after_hand_off_passes_the_unit_on(made, aio):
    async def main():
        sem = made(efd.aio.Semaphore, 0)
        first = asyncio.ensure_future(sem.acquire())
        second = asyncio.ensure_future(sem.acquire())
        await asyncio.sleep(0)
        sem.release()               # handed to `first` ...
        first.cancel()              # ... which is cancelled before resuming
        await asyncio.sleep(0)
        assert first.cancelled()
        assert await second is True  # the unit went on, not lost
        assert sem.value == 0
        sem.release()
        assert sem.value == 1
    aio(main)


def test_handoff_run_lets_the_count_see_a_unit(made, aio):
    # After HANDOFF_RUN hand-offs in a row a release goes through the
    # count (waiters of other processes get a chance); the queued task of
    # this loop still gets it, in order.
    async def main():
        sem = made(efd.aio.Semaphore, 1)
        order = []

        async def worker(i):
            for _ in range(3):
                async with sem:
                    order.append(i)
                    await asyncio.sleep(0)
        await asyncio.gather(*(worker(i) for i in range(
            efd.aio.HANDOFF_RUN)))
        assert order == list(range(efd.aio.HANDOFF_RUN)) * 3
        assert sem.value == 1
    aio(main)


def test_a_busy_loop_does_not_starve_another_loop(made, aio):
    # Tasks of one loop hand the unit round in-process without end; a task
    # of another loop (another thread here; another process alike) waits
    # on the same count: a run of hand-offs lasts HANDOFF_SPAN, then a
    # release goes through the count, and the other loop gets its turn.
    async def main():
        sem = made(efd.aio.Semaphore, 1)
        stop = threading.Event()
        got = []

        def other_loop():
            async def take():
                await sem.acquire()
                got.append(time.monotonic())
                stop.set()
                sem.release()
            asyncio.run(take())

        async def busy():
            while not stop.is_set():
                async with sem:
                    await asyncio.sleep(0)
        tasks = [asyncio.ensure_future(busy()) for _ in range(3)]
        await asyncio.sleep(0.01)           # the run of hand-offs is on
        start = time.monotonic()
        thread = threading.Thread(target=other_loop)
        thread.start()
        while not stop.is_set() and time.monotonic() - start < PROMPT * 4:
            await asyncio.sleep(0)
        starved = not got
        stop.set()                          # (ends the busy tasks)
        await asyncio.gather(*tasks)
        thread.join(PROMPT)
        assert not starved, "the busy loop kept every unit for %.1f s" % (
            time.monotonic() - start)
        assert got and sem.value == 1
    aio(main)


def test_a_busy_loop_does_not_starve_another_process(made, aio):
    # The same with the waiter in a fork child: the object was handed to
    # another process, so runs of hand-offs stay bounded (HANDOFF_RUN),
    # and the child's loop gets a unit while the parent's tasks keep the
    # semaphore busy.
    async def main():
        sem = made(efd.aio.Semaphore, 1)
        stop = [False]

        async def busy():
            while not stop[0]:
                async with sem:
                    await asyncio.sleep(0)
        tasks = [asyncio.ensure_future(busy()) for _ in range(3)]
        await asyncio.sleep(0.01)           # the run of hand-offs is on
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:                        # the child: a loop of its own
            status = 1
            try:
                os.close(r)

                async def take():
                    await asyncio.wait_for(sem.acquire(), PROMPT * 4)
                    sem.release()
                asyncio.run(take())
                os.write(w, b"1")
                status = 0
            finally:
                os._exit(status)
        os.close(w)
        os.set_blocking(r, False)
        start = time.monotonic()
        got = b""
        while not got and time.monotonic() - start < PROMPT * 5:
            try:
                got = os.read(r, 1)
            except BlockingIOError:
                pass
            await asyncio.sleep(0)
        stop[0] = True
        await asyncio.gather(*tasks)
        os.close(r)
        _, status = os.waitpid(pid, 0)
        assert got == b"1", "the child got no unit in %.1f s (status %r)" % (
            time.monotonic() - start, status)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        assert sem.value == 1
    aio(main)


def test_who_else_may_wait_decides_the_trips(make, backend):
    # The count trip after HANDOFF_RUN hand-offs is made only while
    # someone else may wait: EventFD._alone() says whether nobody but one
    # loop of this process can.  Fresh and private, it is alone; each way
    # of letting another process, thread or loop in says so.
    ev = make(1, semaphore=True)
    assert ev._alone()
    ev.fileno()
    # A memory backend's fileno() is readiness only (the count is in the
    # page); the kernel's counter is read through that very descriptor.
    assert ev._alone() == (backend in ("futex", "pipe"))
    assert not make(1, semaphore=True, cloexec=False)._alone()
    handed = make(1, semaphore=True)
    handed._token()                        # an in-process pickle
    assert not handed._alone()
    pickled = make(1, semaphore=True)
    pickled._fds()                         # pickling, a handle
    assert not pickled._alone()

    # A thread of this process blocked on it.
    blocked = make(0, semaphore=True)
    thread = threading.Thread(target=blocked.acquire, kwargs={"timeout": PROMPT * 4})
    thread.start()
    deadline = time.monotonic() + PROMPT
    while blocked._alone() and time.monotonic() < deadline:
        time.sleep(0.001)
    assert not blocked._alone()
    blocked.release()
    thread.join(PROMPT)
    assert blocked._alone()

    # A fork, Python's or one made in C (an extension, ctypes: no
    # os.register_at_fork hook runs): neither the parent nor the child is
    # alone.
    libc = ctypes.CDLL(None, use_errno=True)
    for fork in (os.fork, libc.fork):
        forked = make(1, semaphore=True)
        assert forked._alone()
        r, w = os.pipe()
        pid = fork()
        if pid == 0:
            try:
                os.write(w, b"0" if forked._alone() else b"1")
            finally:
                os._exit(0)
        assert pid > 0, ctypes.get_errno()
        os.close(w)
        assert os.read(r, 1) == b"1", fork
        os.close(r)
        os.waitpid(pid, 0)
        assert not forked._alone(), fork


def test_release_after_a_run_on_a_closed_object_names_its_class(
        made, aio, monkeypatch):
    # close() from another thread while tasks of this loop are queued (its
    # records are failed later, by the loop), then a release after a run
    # of HANDOFF_RUN hand-offs: the error names the class, as every other
    # release on a closed object does.  (close() waits CLOSE_WAIT for the
    # loop, blocked here on purpose, and warns.)
    monkeypatch.setattr(_aio, "CLOSE_WAIT", 0.01)
    for cls, args in ((efd.aio.Semaphore, (1,)), (efd.aio.Lock, ())):
        async def main():
            sem = made(cls, *args)
            await sem.acquire()
            waiters = [asyncio.ensure_future(sem.acquire())
                       for _ in range(efd.aio.HANDOFF_RUN + 2)]
            await asyncio.sleep(0)
            for _ in range(efd.aio.HANDOFF_RUN):
                sem.release()           # handed to the next task ...
                await asyncio.sleep(0)  # ... which now holds it
            closer = threading.Thread(target=sem.close)
            with pytest.warns(RuntimeWarning, match="did not stop watching"):
                closer.start()
                closer.join(PROMPT)
            with pytest.raises(ValueError,
                               match="closed %s" % cls.__name__):
                sem.release()
            await asyncio.gather(*waiters, return_exceptions=True)
        aio(main)


@pytest.mark.skipif(not _has("trio"), reason="trio is not installed")
def test_a_trio_guest_task_queues_as_a_trio_task(made):
    # trio in guest mode on an asyncio loop, in its thread, while tasks of
    # that loop are queued on the same semaphore: the trio task's acquire
    # is trio's (a checkpoint, trio's own way of waiting), never the
    # asyncio queue of the loop it happens to run on.
    import trio
    sem = made(efd.aio.Semaphore, 0)
    result = {}

    async def main():
        loop = asyncio.get_running_loop()
        waiters = [asyncio.ensure_future(sem.acquire()) for _ in range(2)]
        await asyncio.sleep(0.01)

        async def trio_main():
            with trio.fail_after(PROMPT * 2):
                async with trio.open_nursery() as nursery:
                    async def take():
                        await sem.acquire()
                        result["trio"] = "got"
                    nursery.start_soon(take)
                    await trio.sleep(0.05)
                    for _ in range(3):  # the two asyncio tasks', and its
                        sem.release()
        done = loop.create_future()

        def finished(outcome):
            if not done.done():
                done.set_result(outcome)
        trio.lowlevel.start_guest_run(
            trio_main, run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            done_callback=finished, host_uses_signal_set_wakeup_fd=True)
        (await asyncio.wait_for(done, PROMPT * 4)).unwrap()
        assert await asyncio.wait_for(asyncio.gather(*waiters),
                                      PROMPT * 2) == [True, True]
    asyncio.run(main())
    assert result == {"trio": "got"}
    assert sem.value == 0
    assert not _aio._registry


def test_two_loops_waiting_are_not_alone(made, backend):
    # Tasks of two loops (two threads) queued on one object: a hand-off
    # run in either must let the other in.
    sem = made(efd.aio.Semaphore, 0)
    queued = threading.Barrier(3)
    done = []

    def loop_thread():
        async def take():
            fut = asyncio.ensure_future(sem.acquire())
            await asyncio.sleep(0.01)
            queued.wait(PROMPT)
            await asyncio.wait_for(fut, PROMPT * 4)
            done.append(1)
        asyncio.run(take())
    threads = [threading.Thread(target=loop_thread) for _ in range(2)]
    for t in threads:
        t.start()
    queued.wait(PROMPT)
    assert not sem._ev._alone()
    sem.release()
    sem.release()
    for t in threads:
        t.join(PROMPT * 5)
    assert done == [1, 1]
    # Both records gone, alone again -- but on the kernel's counter, where
    # the loops were given its descriptor (fileno(): no herd helper here),
    # anyone may read it now.
    helped = efd._efd._probe()["kernel_loop_sleep"] == "helper"
    assert sem._ev._alone() == (backend in ("futex", "pipe") or helped)


def test_lock_released_twice_while_handed_over(made, aio):
    # A release hands the lock to the first queued task; a second release
    # before that task runs is an over-release (asyncio.Lock: unlocked
    # until then, RuntimeError) -- never a second holder.
    async def main():
        lock = made(efd.aio.Lock)
        holders = []

        async def waiter(i):
            await lock.acquire()
            holders.append(i)
        await lock.acquire()
        tasks = [asyncio.ensure_future(waiter(i)) for i in range(2)]
        await asyncio.sleep(0.01)           # both queued
        lock.release()                      # handed to waiter 0
        with pytest.raises(RuntimeError, match="Lock is not acquired"):
            lock.release()
        await asyncio.sleep(0.01)
        assert holders == [0]
        lock.release()                      # waiter 0's, to waiter 1
        await asyncio.sleep(0.01)
        assert holders == [0, 1]
        lock.release()
        await asyncio.gather(*tasks)
        assert not lock.locked()
    aio(main)


@pytest.mark.skipif(uvloop is None, reason="uvloop is not installed")
def test_a_loop_moved_to_another_thread_is_not_taken_for_this_ones(made):
    # A uvloop loop whose tasks queued while it ran in this thread, then run
    # on in another: a release made here (no loop running) goes through the
    # count, never straight into the other thread's futures; an acquire in
    # a new loop here queues on its own loop's record.
    sem = made(efd.aio.Semaphore, 0)
    first = uvloop.new_event_loop()
    errors = []
    first.set_exception_handler(lambda loop, context: errors.append(context))
    got = []

    async def waiter(i):
        await sem.acquire()
        got.append(i)

    async def queue_them():
        for i in range(2):
            first.create_task(waiter(i))
        await asyncio.sleep(0.02)
    first.run_until_complete(queue_them())
    thread = threading.Thread(target=first.run_forever)
    thread.start()
    try:
        time.sleep(0.05)
        sem.release()                       # from this thread, no loop here
        deadline = time.monotonic() + PROMPT
        while not got and time.monotonic() < deadline:
            time.sleep(0.001)
        assert got == [0]

        async def other():
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(sem.acquire(), 0.1)
        second = asyncio.new_event_loop()
        try:
            second.run_until_complete(other())
        finally:
            second.close()
        sem.release()                       # for waiter 1
        while got != [0, 1] and time.monotonic() < deadline:
            time.sleep(0.001)
        assert got == [0, 1] and not errors
    finally:
        first.call_soon_threadsafe(first.stop)
        thread.join(PROMPT)
        first.close()


def test_a_fork_child_never_hands_to_its_parents_tasks(backend, run_py):
    # Forked while tasks of the parent's loop are queued: the child's copy
    # of those queues is the parent's past, not its own.  A release the
    # child makes in a loop of its own goes through the shared count, and
    # the parent's first queued task gets it.
    if backend_unavailable(backend, semaphore=True):
        pytest.skip(backend_unavailable(backend, semaphore=True))
    out = run_py("""
        import asyncio, os, efd.aio
        async def main():
            sem = efd.aio.Semaphore(1, backend=%(backend)r)
            other = efd.aio.Semaphore(0, backend=%(backend)r)
            await sem.acquire()
            tasks = [asyncio.ensure_future(sem.acquire()) for _ in range(2)]
            await asyncio.sleep(0.01)           # both queued
            pid = os.fork()
            if pid == 0:
                async def child():
                    waiting = asyncio.ensure_future(other.acquire())
                    await asyncio.sleep(0.01)   # a record of its own
                    sem.release()
                    other.release()
                    await waiting
                asyncio.run(child())
                os._exit(0)
            assert os.waitpid(pid, 0)[1] == 0
            done, _ = await asyncio.wait(tasks, timeout=%(limit)r,
                                         return_when=asyncio.FIRST_COMPLETED)
            print("parent's tasks served:", len(done))
            for t in tasks:
                t.cancel()
        asyncio.run(main())
    """ % {"backend": backend, "limit": PROMPT})
    assert "parent's tasks served: 1" in out.stdout


# ---- trio's and anyio's promises, on asyncio, uvloop and trio --------------


def test_cancelled_scope_cancels_before_taking(made, arun):
    async def main():
        sem = made(efd.aio.Semaphore, 1)
        lock = made(efd.aio.Lock)
        ev = made(efd.aio.Event)
        ev.set()
        for call in (sem.acquire, lock.acquire, ev.wait):
            with anyio.CancelScope() as scope:
                scope.cancel()
                await call()
                pytest.fail("%s did not checkpoint" % call)
            assert scope.cancelled_caught
        assert sem.value == 1 and lock.value == 1
    arun(main)


def test_every_acquire_is_a_schedule_point(made, arun):
    # trio's test_generic_lock_fairness: [1, 2, 3] repeated, never [1, 1, 1].
    async def main():
        for sem in (made(efd.aio.Semaphore, 1), made(efd.aio.Lock)):
            record = []

            async def loopy(name):
                for _ in range(5):
                    async with sem:
                        record.append(name)
            async with anyio.create_task_group() as tg:
                for name in (1, 2, 3):
                    tg.start_soon(loopy, name)
            for i in range(5):
                assert record[3 * i:3 * i + 3] == record[:3], record
            assert sorted(record[:3]) == [1, 2, 3]
    arun(main)


def test_set_then_cancel_keeps_the_wake_up(made, arun):
    # anyio's test_event_wait_before_set_before_cancel; trio.Event's rule.
    async def main():
        ev = made(efd.aio.Event)
        woke = []

        async def setter():
            await wait_blocked()
            ev.set()
            tg.cancel_scope.cancel()
        async with anyio.create_task_group() as tg:
            tg.start_soon(setter)
            await ev.wait()
            woke.append(True)
        assert woke == [True]
    arun(main)


def test_cancel_then_set_does_not_wake(made, arun):
    # anyio's test_event_cancel.
    async def main():
        ev = made(efd.aio.Event)
        done = []

        async def task():
            await ev.wait()
            done.append(True)
        async with anyio.create_task_group() as tg:
            tg.start_soon(task)
            tg.cancel_scope.cancel()
            ev.set()
        assert done == []
    arun(main)


def test_statistics(made, arun):
    async def main():
        sem = made(efd.aio.Semaphore, 0)
        lock = made(efd.aio.Lock)
        ev = made(efd.aio.Event)
        assert sem.statistics().tasks_waiting == 0
        await lock.acquire()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sem.acquire)
            tg.start_soon(lock.acquire)
            tg.start_soon(ev.wait)
            tg.start_soon(ev.wait)
            await wait_blocked()
            assert sem.statistics().tasks_waiting == 1
            assert lock.statistics() == (True, None, 1)
            assert ev.statistics().tasks_waiting == 2
            sem.release()
            lock.release()
            ev.set()
        assert sem.statistics().tasks_waiting == 0
        lock.release()
    arun(main)


def test_fifo_and_no_barging_under_every_library(made, arun):
    async def main():
        sem = made(efd.aio.Semaphore, 0)
        order = []

        async def taker(i):
            await sem.acquire()
            order.append(i)
        async with anyio.create_task_group() as tg:
            for i in range(4):
                tg.start_soon(taker, i)
                await wait_blocked()
            for _ in range(4):
                sem.release()
                with pytest.raises(efd.WouldBlock):
                    sem.acquire_nowait()
                await wait_blocked()
        assert order == [0, 1, 2, 3]
        assert sem.value == 0
    arun(main)


def test_move_on_after_takes_nothing(made, arun):
    async def main():
        sem = made(efd.aio.Semaphore, 0)
        with anyio.move_on_after(0.05):
            await sem.acquire()
        sem.release()
        assert sem.value == 1
        sem.acquire_nowait()
    arun(main)


# ---- the old async methods gain the same semantics -------------------------


def test_old_methods_checkpoint(backend, arun):
    async def main():
        sem = efd.Semaphore(1, backend=backend)
        ev = efd.Event(backend=backend)
        raw = efd.EventFD(1, semaphore=True, backend=backend)
        try:
            ev.set()
            for call in (sem.acquire_async, ev.wait_async, raw.read_async):
                with anyio.CancelScope() as scope:
                    scope.cancel()
                    await call()
                    pytest.fail("%s did not checkpoint" % call)
            assert sem.acquire(False) and raw.acquire(False)
        finally:
            sem.close(), ev.close(), raw.close()
    arun(main)


def test_read_async_timeout(backend, aio):
    async def main():
        ev = efd.EventFD(0, backend=backend)
        try:
            with pytest.raises(TimeoutError):
                await ev.read_async(timeout=0)
            with pytest.raises(TimeoutError):
                await ev.read_async(timeout=0.02)
            ev.write(3)
            assert await ev.read_async(timeout=1) == 3
            with pytest.raises(ValueError):
                await ev.read_async(timeout=-1)
        finally:
            ev.close()
    aio(main)


# ---- blocking drop-ins in a running loop -----------------------------------


def test_blocking_call_in_a_running_loop_warns(backend, arun):
    async def main():
        sem = efd.Semaphore(1, backend=backend)
        ev = efd.Event(backend=backend)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                assert sem.acquire()          # would not block: no warning
                ev.set()
                assert ev.wait()
                ev.clear()
                assert sem.acquire(timeout=0) is False   # only tries
                assert sem.acquire(False) is False
                assert ev.wait(0) is False               # only looks
            # Would block: the warning names the async method.
            with pytest.warns(RuntimeWarning, match="acquire_async"):
                assert sem.acquire(timeout=0.01) is False
            with pytest.warns(RuntimeWarning, match="wait_async"):
                assert ev.wait(0.01) is False
            # The warning comes before anything is taken: made an error, it
            # leaves the count as it was.
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                with pytest.raises(RuntimeWarning):
                    sem.acquire()
                with pytest.raises(RuntimeWarning):
                    ev.wait()
                # `with sem:` too, naming `async with`.
                with pytest.raises(RuntimeWarning, match="async with sem"):
                    with sem:
                        pytest.fail("entered the block")  # pragma: no cover
            sem.release()
            assert sem.acquire(False)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                sem.release()
                with sem:                     # would not block: no warning
                    pass
        finally:
            sem.close(), ev.close()
    arun(main)


def test_no_warning_outside_a_loop(backend):
    sem = efd.Semaphore(0, backend=backend)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert sem.acquire(timeout=0.01) is False
    finally:
        sem.close()


# ---- across processes --------------------------------------------------------


def _process_worker(sem, rounds, seed):
    import random

    async def one(rng):
        for _ in range(rounds):
            try:
                async with asyncio.timeout(rng.choice((0.0005, 0.002, 1))):
                    async with sem:
                        await asyncio.sleep(rng.choice((0, 0, 0.0005)))
            except TimeoutError:
                pass

    async def main():
        rng = random.Random(seed)
        await asyncio.gather(*(one(random.Random(rng.random()))
                               for _ in range(4)))
    asyncio.run(main())


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_processes_conserve_units_under_cancellation(made, method):
    if not hasattr(asyncio, "timeout"):
        pytest.skip("asyncio.timeout needs Python 3.11")
    sem = made(efd.aio.Semaphore, 2)
    ctx = multiprocessing.get_context(method)
    rounds = full_or(20, 400)
    procs = [ctx.Process(target=_process_worker, args=(sem, rounds, seed))
             for seed in range(3)]
    for proc in procs:
        proc.start()
    _process_worker(sem, rounds, 99)
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    assert sem.value == 2


def test_tasks_of_a_closed_loop_hold_nothing(backend):
    """A loop closed while its tasks were queued on the object: its tasks
    can never run, so a non-blocking acquire takes the unit, and close()
    works (it used to raise 'Event loop is closed' and stay open)."""
    sem = efd.Semaphore(0, backend=backend)
    loop = asyncio.new_event_loop()
    try:
        task = loop.create_task(sem.acquire_async())
        loop.run_until_complete(asyncio.sleep(0.05))    # the task queues
        assert not task.done()
    finally:
        loop.close()
    try:
        sem.release()
        assert sem.acquire(False) is True
        assert sem.value == 0
    finally:
        sem.close()
    assert sem.closed
