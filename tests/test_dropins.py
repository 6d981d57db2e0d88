"""efd.Semaphore and efd.Event against threading.Semaphore / threading.Event,
on every backend, with threads, processes and event loops."""
import asyncio
import multiprocessing
import os
import contextlib
import pickle
import random
import re
import select
import sys
import threading
import textwrap
import time
import warnings

import pytest

import efd
from efd import _aio

from conftest import KERNEL_BACKENDS, PROMPT, backend_unavailable, full_or

#: threading.Semaphore.release(n) is new in Python 3.9.
RELEASE_N = sys.version_info >= (3, 9)

#: threading's classes have a repr of their own from Python 3.11.
NEW_REPR = sys.version_info >= (3, 11)

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is in the test extras
    uvloop = None


@pytest.fixture
def make_sem(backend):
    """make_sem(value=1, kind=efd.Semaphore) -> a semaphore of `kind` on the
    backend under test."""
    why = backend_unavailable(backend, semaphore=True)
    if why:
        pytest.skip(why)
    made = []

    def factory(value=1, kind=efd.Semaphore):
        sem = kind(value, backend=backend)
        made.append(sem)
        return sem

    yield factory
    for sem in made:
        sem.close()


@pytest.fixture
def make_event(backend):
    """make_event() -> efd.Event on the backend under test."""
    made = []

    def factory():
        event = efd.Event(backend=backend)
        made.append(event)
        return event

    yield factory
    for event in made:
        event.close()


@pytest.fixture(params=["asyncio", "uvloop"])
def aio(request):
    """aio(main) runs coroutine function `main` on the loop under test."""
    if request.param == "uvloop" and uvloop is None:
        pytest.skip("uvloop is not installed")

    def run(main, limit=PROMPT * 6):
        async def bounded():
            return await asyncio.wait_for(main(), limit)
        if request.param == "uvloop":
            return uvloop.run(bounded())
        return asyncio.run(bounded())

    return run


def readable(fd):
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


def outcome(fn, *args, **kwargs):
    """What a call did: ('ok', result) or (exception type, message)."""
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - comparing behaviours
        return (type(exc), str(exc))


# ---- Semaphore -------------------------------------------------------------


def test_semaphore_is_exported():
    assert "Semaphore" in efd.__all__ and "Event" in efd.__all__


SEMAPHORES = [(efd.Semaphore, threading.Semaphore),
              (efd.BoundedSemaphore, threading.BoundedSemaphore)]


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("kind, twin", SEMAPHORES,
                         ids=["Semaphore", "BoundedSemaphore"])
def test_semaphore_matches_threading(make_sem, seed, kind, twin):
    rng = random.Random(seed)
    start = rng.randint(0, 3)
    ours, theirs = make_sem(start, kind), twin(start)
    for _ in range(300):
        op = rng.choice(["try", "timeout0", "negative", "short", "release",
                         "with", "bad_release", "bad_mix"])
        if op == "try":
            calls = [(s.acquire, (False,), {}) for s in (ours, theirs)]
        elif op == "timeout0":
            calls = [(s.acquire, (), {"timeout": 0}) for s in (ours, theirs)]
        elif op == "negative":
            timeout = rng.choice([-1, -0.5, -1e300, -2**80])
            calls = [(s.acquire, (True, timeout), {}) for s in (ours, theirs)]
        elif op == "short":
            calls = [(s.acquire, (True, 0.001), {}) for s in (ours, theirs)]
        elif op == "release" and not RELEASE_N:
            calls = [(s.release, (), {}) for s in (ours, theirs)]
        elif op == "release":
            n = rng.randint(1, 3)
            calls = [(s.release, (n,), {}) for s in (ours, theirs)]
        elif op == "with":
            results = []
            for s in (ours, theirs):
                if s.acquire(False):
                    s.release()
                    with s as entered:
                        results.append(entered)
                else:
                    results.append(None)
            assert results[0] == results[1]
            continue
        elif op == "bad_release" and not RELEASE_N:
            continue
        elif op == "bad_release":
            n = rng.choice([0, -1])
            calls = [(s.release, (n,), {}) for s in (ours, theirs)]
        else:
            calls = [(s.acquire, (False, 1), {}) for s in (ours, theirs)]
        a, b = [outcome(fn, *args, **kw) for fn, args, kw in calls]
        assert a == b, (op, a, b)
    # Same count left.
    left = [0, 0]
    for i, s in enumerate((ours, theirs)):
        while s.acquire(False):
            left[i] += 1
    assert left[0] == left[1]


def test_semaphore_constructor_like_threading(backend):
    for bad in (-1, -10):
        with pytest.raises(ValueError) as ours:
            efd.Semaphore(bad, backend=backend)
        with pytest.raises(ValueError) as theirs:
            threading.Semaphore(bad)
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(TypeError):
        efd.Semaphore("1", backend=backend)
    with pytest.raises((ValueError, OverflowError)):
        efd.Semaphore(2**64, backend=backend)


@pytest.mark.parametrize("base", ["Semaphore", "BoundedSemaphore", "Event"])
def test_subclass_with_its_own_init(backend, base):
    # As with threading's classes: a subclass's constructor takes arguments
    # of its own, and its __init__ passes ours on with super().__init__().
    ours, theirs = getattr(efd, base), getattr(threading, base)
    made = []
    for cls in (ours, theirs):
        class Named(cls):
            def __init__(self, name, n):
                if base == "Event":
                    kw = {"backend": backend} if cls is ours else {}
                    super().__init__(**kw)
                else:
                    kw = {"backend": backend} if cls is ours else {}
                    super().__init__(n, **kw)
                self.name = name
        obj = Named("pool", 3)
        made.append(obj)
        assert obj.name == "pool"
        if base == "Event":
            assert not obj.is_set()
            obj.set()
            assert obj.wait(0)
        else:
            assert [obj.acquire(False) for _ in range(4)] == [True] * 3 + [False]
            for _ in range(3):          # release(n): 3.9+ in threading
                obj.release()
            if base == "BoundedSemaphore":
                with pytest.raises(ValueError, match="released too many times"):
                    obj.release()
    ev = made[0]
    assert ev.backend == backend
    if base != "Event":
        assert ev.value == 3
    # Its value errors are ours, and close what __new__ had opened.
    if base != "Event":
        class Bad(ours):
            def __init__(self):
                super().__init__(-1, backend=backend)
        with pytest.raises(ValueError, match="initial value must be >= 0"):
            Bad()
    ev.close()


def test_semaphore_default_value_is_one(make_sem):
    sem = make_sem()
    assert sem.acquire(False) is True
    assert sem.acquire(False) is False


def test_semaphore_with_block(make_sem):
    sem = make_sem(1)
    with sem as entered:
        assert entered is True
        assert sem.acquire(False) is False
    assert sem.acquire(False) is True
    sem.release()
    with pytest.raises(KeyError):
        with sem:
            raise KeyError("x")
    assert sem.acquire(False) is True       # released on the way out


def test_semaphore_blocks_threads_until_released(make_sem):
    sem = make_sem(0)
    got = []
    threads = [threading.Thread(target=lambda: got.append(
        sem.acquire(timeout=PROMPT * 2))) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    assert got == []
    sem.release(4)
    for t in threads:
        t.join(PROMPT * 3)
    assert got == [True] * 4
    assert sem.acquire(False) is False


def test_semaphore_timeout(make_sem):
    sem = make_sem(0)
    t0 = time.monotonic()
    assert sem.acquire(timeout=0.05) is False
    assert 0.045 <= time.monotonic() - t0 < PROMPT


def test_semaphore_limits_concurrency_in_threads(make_sem):
    sem = make_sem(3)
    lock = threading.Lock()
    inside = [0]
    peak = [0]

    def work():
        for _ in range(50):
            with sem:
                with lock:
                    inside[0] += 1
                    peak[0] = max(peak[0], inside[0])
                time.sleep(0.0001)
                with lock:
                    inside[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(PROMPT * 6)
    assert not any(t.is_alive() for t in threads)
    assert 1 <= peak[0] <= 3
    assert [sem.acquire(False) for _ in range(4)] == [True] * 3 + [False]


def test_semaphore_fileno_readable_while_units_remain(make_sem):
    sem = make_sem(1)
    assert readable(sem.fileno())
    sem.acquire()
    assert not readable(sem.fileno())
    sem.release()
    assert readable(sem.fileno())


def test_semaphore_close(make_sem):
    sem = make_sem(1)
    assert sem.closed is False
    sem.close()
    sem.close()
    assert sem.closed is True
    if NEW_REPR:
        assert repr(sem).endswith(": closed>")
    for call in (sem.acquire, sem.release, sem.fileno, sem.__enter__):
        with pytest.raises(ValueError):
            call()


def test_semaphore_close_wakes_blocked_thread(make_sem):
    sem = make_sem(0)
    errors = []

    def waiter():
        try:
            sem.acquire(timeout=PROMPT * 4)
        except ValueError as exc:
            errors.append(exc)

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.05)
    t0 = time.monotonic()
    sem.close()
    t.join(PROMPT)
    assert not t.is_alive()
    assert time.monotonic() - t0 < PROMPT
    assert len(errors) == 1


def test_semaphore_async(make_sem, aio):
    async def main():
        sem = make_sem(2)
        inside = [0]
        peak = [0]
        order = []

        async def work(i):
            async with sem:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
                await asyncio.sleep(0.001)
                inside[0] -= 1
                order.append(i)

        await asyncio.gather(*[work(i) for i in range(40)])
        assert await sem.acquire_async(timeout=0.01) is True
        assert await sem.acquire_async(timeout=0.01) is True
        assert await sem.acquire_async(timeout=0.01) is False
        assert not _aio._registry
        return peak[0], sorted(order)
    peak, order = aio(main)
    assert peak == 2
    assert order == list(range(40))


def test_semaphore_pickle_outside_spawning_stays_in_the_process(
        make_sem, run_py):
    # In this process (another interpreter, a queue's get) a pickle loads as
    # a second owner of the same count; in another process it raises,
    # naming the class.
    sem = make_sem(1)
    other = pickle.loads(pickle.dumps(sem))
    try:
        assert type(other) is type(sem) and other._bound == sem._bound
        assert other.acquire(blocking=False)
        assert not sem.acquire(blocking=False)
        other.release()
    finally:
        other.close()
    assert sem.acquire(blocking=False)          # the source is unharmed
    proc = run_py("import pickle, efd\n"
                  "try:\n"
                  "    pickle.loads(bytes.fromhex(%r))\n"
                  "except RuntimeError as e:\n"
                  "    print(e)\n" % pickle.dumps(sem).hex())
    assert proc.stdout.startswith(
        "%s objects should only be shared between processes through "
        "inheritance" % type(sem).__name__), proc.stdout


def _sem_child(sem, n, out):
    # Take n units (released by the parent), then give back 2 * n.
    got = sum(sem.acquire(timeout=60) for _ in range(n))
    sem.release(2 * n)
    out.put(got)


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_semaphore_in_multiprocessing_children(make_sem, method):
    ctx = multiprocessing.get_context(method)
    sem = make_sem(0)
    out = ctx.Queue()
    procs = [ctx.Process(target=_sem_child, args=(sem, 5, out))
             for _ in range(3)]
    for p in procs:
        p.start()
    try:
        sem.release(15)
        answers = [out.get(timeout=PROMPT * 8) for _ in procs]
        got = sum(sem.acquire(timeout=PROMPT * 4) for _ in range(30))
    finally:
        for p in procs:
            p.join(PROMPT * 4)
            if p.is_alive():
                p.kill()
    assert answers == [5, 5, 5]
    assert got == 30
    assert sem.acquire(False) is False
    assert [p.exitcode for p in procs] == [0, 0, 0]


# ---- Event -----------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_event_matches_threading(make_event, seed):
    rng = random.Random(seed)
    ours, theirs = make_event(), threading.Event()
    for _ in range(300):
        op = rng.choice(["set", "clear", "is_set", "wait0", "waitneg",
                         "wait_short"])
        if op == "set":
            calls = [(e.set, ()) for e in (ours, theirs)]
        elif op == "clear":
            calls = [(e.clear, ()) for e in (ours, theirs)]
        elif op == "is_set":
            calls = [(e.is_set, ()) for e in (ours, theirs)]
        elif op == "wait0":
            calls = [(e.wait, (0,)) for e in (ours, theirs)]
        elif op == "waitneg":
            calls = [(e.wait, (-1,)) for e in (ours, theirs)]
        else:
            calls = [(e.wait, (0.001,)) for e in (ours, theirs)]
        a, b = [outcome(fn, *args) for fn, args in calls]
        assert a == b, (op, a, b)


@pytest.mark.parametrize("bad", ["1", b"1", [], object()])
def test_event_bad_timeout_type_like_threading(make_event, bad):
    event = make_event()
    with pytest.raises(TypeError):
        threading.Event().wait(bad)
    t0 = time.monotonic()
    with pytest.raises(TypeError):
        event.wait(bad)
    with pytest.raises(TypeError):
        event.wait_async(bad).send(None)
    assert time.monotonic() - t0 < PROMPT


def test_event_many_sets_do_not_pile_up(make_event):
    event = make_event()
    for _ in range(1000):
        event.set()
    assert event._ev._peek() in (1, None)
    event.clear()
    assert not event.is_set()
    assert event._ev._peek() in (0, None)


def test_event_wait_blocks_until_set_and_wakes_everyone(make_event):
    event = make_event()
    results = []
    threads = [threading.Thread(target=lambda: results.append(
        event.wait(PROMPT * 2))) for _ in range(5)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    assert results == []
    event.set()
    for t in threads:
        t.join(PROMPT * 3)
    assert results == [True] * 5
    assert event.is_set()                 # waiters did not consume it


def test_event_wait_timeout(make_event):
    event = make_event()
    t0 = time.monotonic()
    assert event.wait(0.05) is False
    assert 0.045 <= time.monotonic() - t0 < PROMPT
    assert event.wait(0) is False


def test_event_fileno_readable_while_set(make_event):
    event = make_event()
    assert not readable(event.fileno())
    event.set()
    assert readable(event.fileno())
    event.clear()
    assert not readable(event.fileno())


def test_event_close(make_event):
    event = make_event()
    event.close()
    event.close()
    assert event.closed
    if NEW_REPR:
        assert repr(event).endswith(": closed>")
    for call in (event.set, event.clear, event.is_set, event.wait,
                 event.fileno):
        with pytest.raises(ValueError):
            call()


def test_event_close_wakes_waiting_threads(make_event):
    event = make_event()
    fd = event.fileno()
    errors = []

    def waiter():
        try:
            event.wait(PROMPT * 4)
        except ValueError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=waiter) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    t0 = time.monotonic()
    event.close()
    for t in threads:
        t.join(PROMPT)
    assert not any(t.is_alive() for t in threads)
    assert time.monotonic() - t0 < PROMPT
    assert len(errors) == 3
    with pytest.raises(OSError):
        os.fstat(fd)        # the last waiter to leave closed it


def test_event_async(make_event, aio):
    async def main():
        event = make_event()
        loop = asyncio.get_running_loop()
        assert await event.wait_async(0) is False
        assert await event.wait_async(0.02) is False
        tasks = [asyncio.ensure_future(event.wait_async(PROMPT))
                 for _ in range(20)]
        await asyncio.sleep(0.02)
        assert not any(t.done() for t in tasks)
        loop.call_soon(event.set)
        results = await asyncio.gather(*tasks)
        assert event.is_set()                  # nobody consumed it
        assert await event.wait_async() is True
        assert not _aio._registry
        return results
    assert aio(main) == [True] * 20


def test_event_async_close_while_waiting(make_event, aio):
    async def main():
        event = make_event()
        tasks = [asyncio.ensure_future(event.wait_async()) for _ in range(3)]
        await asyncio.sleep(0.02)
        event.close()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert not _aio._registry
        return results
    results = aio(main)
    assert all(isinstance(r, ValueError) for r in results), results


def test_event_set_from_thread_wakes_loop(make_event, aio):
    async def main():
        event = make_event()
        timer = threading.Timer(0.02, event.set)
        timer.start()
        try:
            return await event.wait_async(PROMPT)
        finally:
            timer.join(PROMPT)
    assert aio(main) is True


def _event_waiter(event, out):
    out.put(event.wait(60))


def _event_clearer(event, out):
    event.clear()
    out.put(event.is_set())


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_event_wakes_every_process(make_event, method):
    # Like multiprocessing.Event, waiting looks at the flag: every waiter
    # that is waiting while the flag stays set wakes.
    ctx = multiprocessing.get_context(method)
    event = make_event()
    out = ctx.Queue()
    procs = [ctx.Process(target=_event_waiter, args=(event, out))
             for _ in range(4)]
    for p in procs:
        p.start()
    try:
        time.sleep(0.2)
        event.set()
        answers = [out.get(timeout=PROMPT * 8) for _ in procs]
        assert answers == [True] * 4
        clearer = ctx.Process(target=_event_clearer, args=(event, out))
        procs.append(clearer)
        clearer.start()
        assert out.get(timeout=PROMPT * 8) is False
    finally:
        for p in procs:
            p.join(PROMPT * 4)
            if p.is_alive():
                p.kill()
    assert not event.is_set()             # the child's clear() shows here
    assert [p.exitcode for p in procs] == [0] * 5


def test_event_pickle_outside_spawning_stays_in_the_process(make_event,
                                                           run_py):
    event = make_event()
    with contextlib.closing(pickle.loads(pickle.dumps(event))) as other:
        other.set()
        assert event.is_set()
    proc = run_py("import pickle, efd\n"
                  "try:\n"
                  "    pickle.loads(bytes.fromhex(%r))\n"
                  "except RuntimeError as e:\n"
                  "    print(e)\n" % pickle.dumps(event).hex())
    assert proc.stdout.startswith(
        "Event objects should only be shared between processes through "
        "inheritance"), proc.stdout


# ---- threading's details: timeouts, repr, isSet, names ---------------------


@pytest.mark.parametrize("timeout", [0, -0.0, -1, -0.5, -1e300, -2**80,
                                     float("-inf")])
@pytest.mark.parametrize("kind, twin", SEMAPHORES,
                         ids=["Semaphore", "BoundedSemaphore"])
def test_semaphore_timeout_not_above_zero_only_tries(make_sem, kind, twin,
                                                     timeout):
    # threading.Semaphore.acquire treats such a timeout as "try once";
    # EventFD.acquire itself keeps raising ValueError for it.
    for start in (0, 2):
        ours, theirs = make_sem(start, kind), twin(start)
        t0 = time.monotonic()
        got = [ours.acquire(timeout=timeout) for _ in range(3)]
        assert time.monotonic() - t0 < PROMPT
        assert got == [theirs.acquire(timeout=timeout) for _ in range(3)]
        assert got == [True] * start + [False] * (3 - start)
    if timeout != 0:
        with pytest.raises(ValueError, match="timeout"):
            ours._ev.acquire(timeout=timeout)


def test_semaphore_huge_or_infinite_timeout_waits(make_sem):
    sem = make_sem(0)
    for timeout in (float("inf"), 2**2000, 1e300):
        threading.Timer(0.05, sem.release).start()
        assert sem.acquire(timeout=timeout) is True


def test_semaphore_nan_timeout_is_refused(make_sem):
    # threading.Semaphore busy-waits for a unit on a NaN timeout; _thread's
    # locks raise ValueError, and so does efd, without taking anything.
    sem = make_sem(1)
    with pytest.raises(ValueError, match="NaN"):
        sem.acquire(timeout=float("nan"))
    assert sem.acquire(False) is True


def _outcome(call, *args):
    # What a call returns, or the type and message of what it raises.
    try:
        return call(*args)
    except Exception as exc:
        return (type(exc), str(exc))


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), -1e300])
def test_event_timeout_not_above_zero_only_looks(make_event, timeout):
    # As threading.Event of the running Python: only looks (and NaN, which
    # only looked before 3.14, raises ValueError there while the flag is
    # clear).
    event, theirs = make_event(), threading.Event()
    t0 = time.monotonic()
    expected = _outcome(theirs.wait, timeout)
    assert _outcome(event.wait, timeout) == expected
    if timeout == timeout or sys.version_info < (3, 14):
        assert expected is False
    event.set()
    theirs.set()
    assert event.wait(timeout) is theirs.wait(timeout) is True
    assert time.monotonic() - t0 < PROMPT


def _threading_repr(obj, theirs):
    # threading's repr of `theirs`, as it would read for `obj`.
    return repr(theirs).replace(
        "threading.", "efd.").replace(hex(id(theirs)), hex(id(obj)))


def test_repr_is_threadings(make_sem, make_event):
    pairs = [(make_sem(3), threading.Semaphore(3)),
             (make_sem(3, efd.BoundedSemaphore),
              threading.BoundedSemaphore(3)),
             (make_event(), threading.Event())]
    for ours, theirs in pairs:
        assert repr(ours) == _threading_repr(ours, theirs)
        if isinstance(ours, efd.Event):
            ours.set(), theirs.set()
        else:
            ours.acquire(), theirs.acquire()
        assert repr(ours) == _threading_repr(ours, theirs)
        if not isinstance(ours, efd.Event):
            ours.release(), theirs.release()
        assert repr(ours) == _threading_repr(ours, theirs)
    if NEW_REPR:
        assert re.fullmatch(r"<efd\.Semaphore at 0x[0-9a-f]+: value=3>",
                            repr(pairs[0][0]))


def test_public_classes_live_in_efd():
    # What users see in reprs, tracebacks and pickles is the public name.
    for cls in (efd.EventFD, efd.Semaphore, efd.BoundedSemaphore, efd.Event):
        assert cls.__module__ == "efd"
        assert getattr(efd, cls.__qualname__) is cls


def test_event_isset_is_threadings(make_event):
    event, theirs = make_event(), threading.Event()
    with warnings.catch_warnings(record=True) as ours_w:
        warnings.simplefilter("always")
        assert event.isSet() is False
        event.set()
        assert event.isSet() is True
    with warnings.catch_warnings(record=True) as theirs_w:
        warnings.simplefilter("always")
        theirs.isSet()
        theirs.isSet()
    assert [(w.category, str(w.message)) for w in ours_w] == \
        [(w.category, str(w.message)) for w in theirs_w]
    assert len(ours_w) == (2 if sys.version_info >= (3, 10) else 0)
    for w in ours_w:
        assert w.filename == __file__        # blames the caller


SPEC_NAMES = {
    "EventFD", "Semaphore", "BoundedSemaphore", "Event",
    "eventfd", "eventfd_read", "eventfd_write",
    "EFD_CLOEXEC", "EFD_NONBLOCK", "EFD_SEMAPHORE",
    "MAX",          # documented in docs/api.rst
    "WouldBlock",   # SPEC 6: efd.aio's acquire_nowait() raises it
    "aio",          # SPEC 6: the async drop-ins, a submodule
    "Handle", "from_handle", "send_handle", "recv_handle",   # SPEC §6
}


def test_namespace_is_the_public_api():
    assert set(efd.__all__) == SPEC_NAMES
    assert len(efd.__all__) == len(SPEC_NAMES)
    others = {name for name in dir(efd)
              if name not in SPEC_NAMES and not name.startswith("__")}
    # Apart from the public names and dunders, only submodules.
    assert others <= {"_aio", "_efd", "_sync", "_selfcheck", "_handles"}, others
    for name in others:
        assert getattr(efd, name).__name__ == "efd." + name
    for leaked in ("Optional", "_CEventFD"):
        assert not hasattr(efd, leaked)
    star = {}
    exec("from efd import *", star)
    assert set(star) - {"__builtins__"} == SPEC_NAMES


# ---- BoundedSemaphore ------------------------------------------------------


def test_bounded_semaphore_is_a_semaphore(make_sem):
    sem = make_sem(2, efd.BoundedSemaphore)
    assert isinstance(sem, efd.Semaphore)
    assert "BoundedSemaphore" in efd.__all__


def test_bounded_semaphore_refuses_to_pass_its_bound(make_sem):
    sem = make_sem(3, efd.BoundedSemaphore)
    with pytest.raises(ValueError, match="^Semaphore released too many times$"):
        sem.release()
    assert [sem.acquire(False) for _ in range(4)] == [True] * 3 + [False]
    sem.release(2)
    with pytest.raises(ValueError, match="too many times"):
        sem.release(2)                   # 2 + 2 > 3: nothing added
    sem.release()
    with pytest.raises(ValueError, match="too many times"):
        sem.release()
    assert [sem.acquire(False) for _ in range(4)] == [True] * 3 + [False]
    zero = make_sem(0, efd.BoundedSemaphore)
    with pytest.raises(ValueError, match="too many times"):
        zero.release()


@pytest.mark.parametrize("n", [2**64 - 2, 2**64 - 3, 4])
def test_bounded_semaphore_huge_bound_release_does_not_wrap(make_sem, n):
    # Near the top of the range, count + n passes 2**64: the bound check
    # must not wrap around (issue 17 row 6).  Every backend answers as
    # threading does, and the count is left as it was.
    top = 2**64 - 2
    sem = make_sem(top, efd.BoundedSemaphore)
    theirs = threading.BoundedSemaphore(top)
    for _ in range(3):
        assert sem.acquire(False) is True
        assert theirs.acquire(False) is True
    expected = (ValueError, "Semaphore released too many times")
    if sys.version_info >= (3, 9):       # release(n) came in 3.9
        assert outcome(theirs.release, n) == expected
    assert outcome(sem.release, n) == expected
    assert sem._ev._peek() == top - 3
    sem.release(3)                       # exactly back to the bound
    assert sem._ev._peek() == top
    assert outcome(sem.release) == expected


def test_bounded_semaphore_with_block_and_exit_check(make_sem):
    sem = make_sem(1, efd.BoundedSemaphore)
    with sem:
        assert sem.acquire(False) is False
    # __exit__ releases through the bound check, as threading's does.
    with pytest.raises(ValueError, match="too many times"):
        with sem:
            sem.release()
    assert sem.acquire(False) is True


def test_bounded_semaphore_exact_under_threads(make_sem):
    # Threads that each take a unit and give it back, while others release
    # units they never took: a release is refused exactly when it would
    # take the count past the bound (a worker's own release can be refused
    # when a bogus one got in first: threading's BoundedSemaphore behaves
    # the same), the count never passes the bound, and no unit is made or
    # lost: at the end, count == bound + accepted bogus - refused workers.
    bound = 4
    sem = make_sem(bound, efd.BoundedSemaphore)
    stop = threading.Event()
    bogus_accepted = []
    worker_refused = []
    peaks = []

    def worker():
        while not stop.is_set():
            if sem.acquire(timeout=PROMPT):
                try:
                    sem.release()
                except ValueError:
                    worker_refused.append(1)

    def bogus():
        while not stop.is_set():
            value = sem._ev._peek()
            if value is not None:
                peaks.append(value)
            try:
                sem.release()
            except ValueError:
                pass
            else:
                bogus_accepted.append(1)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    threads += [threading.Thread(target=bogus) for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join(PROMPT * 2)
    assert not any(t.is_alive() for t in threads)
    if sem._ev.backend != "eventfd-readback":
        # (readback: see the BoundedSemaphore docstring.)
        assert max(peaks) <= bound
    final = bound + len(bogus_accepted) - len(worker_refused)
    assert 0 <= final <= bound
    assert [sem.acquire(False) for _ in range(final + 1)] == \
        [True] * final + [False]


def test_bounded_semaphore_needs_the_count(make_sem, backend, run_py):
    # On the kernel counters a bounded release reads the count from
    # /proc/self/fdinfo; where it cannot, it says so (OSError) and adds
    # nothing.  Shown in a child whose fdinfo directory is hidden by a bind
    # mount (root only); the memory backends need no /proc at all.
    code = """
        import os, subprocess, sys, efd
        sem = efd.BoundedSemaphore(1, backend=%r)
        sem.acquire()
        if subprocess.call(["mount", "--bind", "/var/empty" if os.path.isdir(
                "/var/empty") else "/tmp", "/proc/%%d/fdinfo" %% os.getpid()],
                stderr=subprocess.DEVNULL) != 0:
            print("skip"); sys.exit(0)
        try:
            sem.release()
        except OSError as exc:
            assert "cannot read the count" in str(exc), exc
            print("refused")
        else:
            print("released")
    """ % backend
    if os.geteuid() != 0:
        pytest.skip("hiding /proc/self/fdinfo needs root")
    out = run_py("import os\nos.unshare(os.CLONE_NEWNS) if hasattr(os, 'unshare') else None\n"
                 + textwrap.dedent(code), timeout=30).stdout.split()
    if out == ["skip"]:
        pytest.skip("cannot bind-mount over /proc/self/fdinfo here")
    assert out == (["refused"] if backend in KERNEL_BACKENDS else ["released"])


def _bounded_child(sem, out):
    # The child sees the same count and the same bound.
    try:
        sem.release()
        out.put("accepted")
    except ValueError as exc:
        out.put(str(exc))
    out.put(repr(sem).endswith("value=2/2>") if NEW_REPR else True)
    got = sem.acquire(timeout=60)
    sem.release()
    out.put(got)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_bounded_semaphore_in_multiprocessing_children(make_sem, method):
    ctx = multiprocessing.get_context(method)
    sem = make_sem(2, efd.BoundedSemaphore)
    out = ctx.Queue()
    p = ctx.Process(target=_bounded_child, args=(sem, out))
    p.start()
    try:
        answers = [out.get(timeout=PROMPT * 8) for _ in range(3)]
    finally:
        p.join(PROMPT * 4)
        if p.is_alive():
            p.kill()
    assert answers == ["Semaphore released too many times", True, True]
    assert p.exitcode == 0
    with pytest.raises(ValueError, match="too many times"):
        sem.release()


def test_bounded_semaphore_fork_while_a_thread_waits(make_sem, run_py,
                                                    backend):
    # A fork while another thread is blocked in acquire() leaves the child a
    # usable semaphore with the same bound, and the parent's waiter works.
    run_py("""
        import os, threading, time, efd
        sem = efd.BoundedSemaphore(1, backend=%r)
        sem.acquire()
        got = []
        t = threading.Thread(target=lambda: got.append(sem.acquire(timeout=10)))
        t.start()
        time.sleep(0.2)
        pid = os.fork()
        if pid == 0:
            # The child's release is the unit the parent's waiter gets.
            ok = sem.acquire(False) is False
            sem.release()
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        assert status == 0, status
        t.join(10)
        assert got == [True], got
        assert sem.acquire(False) is False
        sem.release()
        try:
            sem.release()
        except ValueError:
            pass
        else:
            raise AssertionError("released past the bound after the fork")
        print("ok")
    """ % backend, timeout=30)


# ---- gh-57711: set() wakes every thread waiting at that moment ---------------


def test_event_set_then_clear_wakes_every_waiter(make_event):
    # What lock_tests' test_set_and_clear checks (tests/test_lock_tests.py
    # runs it too), with more waiters, each round started together.
    event = make_event()
    for _ in range(full_or(5, 20)):
        results = []
        ready = threading.Barrier(9)

        def waiter():
            ready.wait(PROMPT)
            results.append(event.wait(PROMPT * 2))

        threads = [threading.Thread(target=waiter) for _ in range(8)]
        for t in threads:
            t.start()
        ready.wait(PROMPT)
        time.sleep(0.1)                  # time for all of them to block
        event.set()
        event.clear()
        for t in threads:
            t.join(PROMPT * 3)
        assert not any(t.is_alive() for t in threads)
        assert results == [True] * 8


def test_event_set_before_wait_then_clear_is_not_seen(make_event):
    # The generation only wakes threads waiting when set() runs: a wait()
    # that starts after set(); clear() waits for the next set().
    event = make_event()
    event.set()
    event.clear()
    t0 = time.monotonic()
    assert event.wait(0.05) is False
    assert time.monotonic() - t0 >= 0.045


def test_event_set_then_clear_wakes_waiting_tasks(make_event, aio):
    # set() also resolves the tasks of this process waiting in wait_async,
    # from the loop's thread or from another one, clear() or not.
    async def main():
        event = make_event()
        results = []
        for setter in ("loop", "thread"):
            tasks = [asyncio.ensure_future(event.wait_async(PROMPT))
                     for _ in range(5)]
            await asyncio.sleep(0.05)
            assert not any(t.done() for t in tasks)
            if setter == "loop":
                event.set()
                event.clear()
            else:
                t = threading.Thread(target=lambda: (event.set(),
                                                     event.clear()))
                t.start()
                t.join(PROMPT)
            results.append(await asyncio.gather(*tasks))
            assert not event.is_set()
        return results
    assert aio(main) == [[True] * 5] * 2
