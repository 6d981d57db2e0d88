"""Leak tests: every path, many times, and nothing grows.

Each scenario runs ``EFD_LEAK_ITERS`` times (default 4,000; 20,000 under
``pytest --full``; run 100,000 by hand with ``EFD_LEAK_ITERS=100000``) after
a warm-up, and then
the process must show no growth in

* open file descriptors (exactly none),
* Python objects tracked by the GC (``len(gc.get_objects())``) and memory
  blocks allocated by Python (``sys.getallocatedblocks()``): a leak of one
  object per iteration would be thousands; a few dozen is noise,
* resident and virtual memory (``/proc/self/statm``): a leak of one small
  malloc or one shared-memory mapping per iteration would be megabytes.
"""
import asyncio
import gc
import os
import sys
import warnings

import pytest

import efd
from conftest import (backend_unavailable, full_or, kernel_eventfd_available,
                      open_fd_count)
from test_hostile import Idx

ITERS = int(os.environ.get("EFD_LEAK_ITERS") or full_or(4000, 20000))
WARMUP = max(200, ITERS // 20)
MAX = 2**64 - 2
PAGE = os.sysconf("SC_PAGE_SIZE")
#: Allowed growth over the whole run: far below one unit per iteration.
OBJECT_SLACK = 200
BLOCK_SLACK = 2000
MEMORY_SLACK = 4 * 1024 * 1024
#: Under AddressSanitizer (tools/sanitize) or valgrind (tools/valgrind)
#: freed memory sits in a quarantine, so RSS grows by design: only
#: descriptors and Python's own counts are checked there (the tools
#: themselves report bad frees and overflows).
UNDER_ASAN = any(tool in os.environ.get("LD_PRELOAD", "")
                 for tool in ("asan", "vgpreload"))


def snapshot():
    gc.collect()
    gc.collect()
    with open("/proc/self/statm") as f:
        vsize, rss = (int(x) * PAGE for x in f.read().split()[:2])
    return {
        "fds": open_fd_count(),
        "objects": len(gc.get_objects()),
        "blocks": sys.getallocatedblocks(),
        "rss": rss,
        "vsize": vsize,
    }


def assert_no_growth(scenario, iters=ITERS):
    for _ in range(WARMUP):
        scenario()
    before = snapshot()
    for _ in range(iters):
        scenario()
    after = snapshot()
    grew = {k: after[k] - before[k] for k in before}
    assert grew["fds"] == 0, grew
    assert grew["objects"] < OBJECT_SLACK, grew
    assert grew["blocks"] < BLOCK_SLACK, grew
    if not UNDER_ASAN:
        assert grew["rss"] < MEMORY_SLACK, grew
        assert grew["vsize"] < MEMORY_SLACK, grew


def expect(exc, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc:
        return
    raise AssertionError("%s%r did not raise %s" % (fn, args, exc.__name__))


@pytest.fixture
def sem_ok(backend):
    why = backend_unavailable(backend, semaphore=True)
    if why:
        pytest.skip(why)
    return backend


def test_create_use_close(sem_ok):
    backend = sem_ok

    def scenario():
        ev = efd.EventFD(3, backend=backend)
        ev.release(2)
        assert ev.acquire() and not ev.acquire(timeout=0)
        ev.write(4)
        assert ev.read() == 4
        ev.fileno()
        ev._fds()
        repr(ev)
        ev.close()
        ev.close()
        with efd.EventFD(2, semaphore=True, backend=backend) as s:
            assert s.acquire(blocking=False) and s.read() == 1
            assert not s.acquire(timeout=0)   # through the wait loop
            assert s._peek() == 0

    assert_no_growth(scenario)


def test_every_error_path(sem_ok):
    backend = sem_ok
    ev = efd.EventFD(5, backend=backend)
    nb = efd.EventFD(0, nonblocking=True, backend=backend)
    full = efd.EventFD(MAX, nonblocking=True, backend=backend)
    closed = efd.EventFD(backend=backend)
    closed.close()
    r, w = os.pipe()
    gone = os.dup(r)
    os.close(gone)
    E = efd.EventFD

    def scenario():
        expect(ValueError, E, -1, backend=backend)
        expect(ValueError, E, 2**64 - 1, backend=backend)
        expect(OverflowError, E, 2**64, backend=backend)
        expect(TypeError, E, "1", backend=backend)
        expect(TypeError, E, 1.5, backend=backend)
        expect(RuntimeError, E, Idx(RuntimeError("x")), backend=backend)
        expect(TypeError, E, Idx("x"), backend=backend)
        expect(ValueError, E, backend="nope")
        expect(TypeError, E, backend=3)
        expect(TypeError, E, bogus=1)
        expect(ValueError, ev.write, -1)
        expect(OSError, ev.write, 2**64 - 1)
        expect(OverflowError, ev.write, 2**64)
        expect(TypeError, ev.write, None)
        expect(TypeError, ev.write, 1, 2)
        expect(BlockingIOError, full.write, 1)
        expect(BlockingIOError, nb.read)
        expect(ValueError, ev.release, 0)
        expect(ValueError, ev.release, MAX)
        expect(ValueError, ev.release, 2**70)
        expect(TypeError, ev.release, "1")
        expect(RuntimeError, ev.release, Idx(RuntimeError("x")))
        expect(ValueError, ev.acquire, timeout=-1)
        expect(ValueError, ev.acquire, timeout=float("nan"))
        expect(TypeError, ev.acquire, timeout="1")
        expect(ValueError, ev.acquire, False, 1)
        expect(TypeError, ev.acquire, nope=1)
        for method in (closed.read, closed.write, closed.acquire,
                       closed.release, closed.fileno, closed._peek):
            expect(ValueError, method)
        expect(ValueError, E.from_fd, -1)
        expect(ValueError, E.from_fd, r)
        expect(OSError, E.from_fd, gone)
        expect(TypeError, E.from_fd, "3")
        assert ev._peek() in (5, None)

    try:
        assert_no_growth(scenario)
    finally:
        for obj in (ev, nb, full):
            obj.close()
        os.close(r)
        os.close(w)


@pytest.mark.skipif(not kernel_eventfd_available(), reason="no kernel eventfd")
def test_raw_functions_and_from_fd():
    def scenario():
        fd = efd.eventfd(0, efd.EFD_CLOEXEC | efd.EFD_NONBLOCK)
        efd.eventfd_write(fd, 3)
        assert efd.eventfd_read(fd) == 3
        expect(BlockingIOError, efd.eventfd_read, fd)
        expect(OSError, efd.eventfd_write, fd, 2**64 - 1)
        expect(ValueError, efd.eventfd_write, fd, -1)
        expect(OverflowError, efd.eventfd, 2**32)
        expect(TypeError, efd.eventfd_read, None)
        ev = efd.EventFD.from_fd(fd)          # adopts (owns) fd
        ev.release(1)
        ev.close()
        sfd = efd.eventfd(1, efd.EFD_CLOEXEC | efd.EFD_SEMAPHORE)
        expect(ValueError, efd.EventFD.from_fd, sfd, semaphore=False)
        with efd.EventFD.from_fd(sfd) as s:   # the failure left sfd ours
            assert s.acquire(blocking=False)

    assert_no_growth(scenario)


def test_garbage_collected_while_open(sem_ok):
    backend = sem_ok

    def scenario():
        ev = efd.EventFD(1, backend=backend)
        ev.release(1)
        del ev   # closes, with a ResourceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        assert_no_growth(scenario)


@pytest.mark.skipif(not hasattr(efd.EventFD, "acquire_async"),
                    reason="no asyncio support")
def test_async_paths(sem_ok):
    backend = sem_ok
    ev = efd.EventFD(0, semaphore=True, backend=backend)
    loop = asyncio.new_event_loop()

    async def rounds():
        ev.release(2)
        assert await ev.acquire_async()
        assert await ev.acquire_async(0.5)
        assert not await ev.acquire_async(0)
        assert not await ev.acquire_async(0.0005)   # registers, times out
        task = asyncio.ensure_future(ev.acquire_async())
        await asyncio.sleep(0)
        task.cancel()                                # consumes nothing
        try:
            await task
        except asyncio.CancelledError:
            pass
        ev.release(1)
        assert await ev.read_async() == 1

    def scenario():
        loop.run_until_complete(rounds())

    try:
        # Each round waits ~1 ms for the timed-out acquire: fewer rounds.
        assert_no_growth(scenario, iters=max(250, ITERS // 40))
        assert ev._peek() in (0, None)
    finally:
        loop.close()
        ev.close()
