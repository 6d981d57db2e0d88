"""Event loops sleeping on a futex object through a ring (src/efd_ring.c,
efd_futex.c "An event loop's sleep").

A loop that waits on a ``futex`` object sleeps on the readers' futex word
itself, through an io_uring FUTEX_WAIT, so that a release wakes one
sleeper -- thread or loop -- however many loops wait.  What must hold:

* the record watches the sleeper's ring, not ``fileno()`` (which would
  make every release keep the readiness descriptor in step);
* a loop chosen by a release and killed before it took the unit does not
  lose it: not for other loops, and not for a thread that sleeps in
  ``acquire()`` with the death bell (no re-check of its own) -- a process
  whose loops sleep this way has every waiter of the object re-check;
* close() while a loop of another thread sleeps leaves no wait in flight
  (a later release in another process still reaches its waiters).

Every wait here is bounded; the children run under the conftest watchdog.
"""
import json

import pytest

import efd
from efd import _efd

pytestmark = pytest.mark.skipif(
    not _efd._probe()["loop_ring"],
    reason="loops cannot sleep on futex words here (python -m efd says why)")


def test_loop_watches_the_ring_not_fileno(run_py):
    """One loop waiting: its record is in ring mode and watches the
    sleeper's ring, with a wait in flight; a release reaches it."""
    out = run_py(r"""
        import asyncio, json, efd
        from efd import _aio

        async def main():
            ev = efd.EventFD(0, semaphore=True, backend="futex")
            task = asyncio.ensure_future(ev.acquire_async(timeout=10))
            for _ in range(1000):
                await asyncio.sleep(0.001)
                rec = _aio._registry.get((ev, asyncio.get_running_loop()))
                if rec is not None and rec.reading:
                    break
            info = {"ring": rec.ring,
                    "fd_is_ring": rec.fd == rec.sleeper.fileno(),
                    "asleep": rec.sleeper.asleep}
            ev.release()
            info["got"] = await task
            info["left"] = ev._peek()
            ev.close()
            return info

        print(json.dumps(asyncio.run(main())))
    """, timeout=30)
    res = json.loads(out.stdout.split("\n")[-2])
    assert res["ring"] is True and res["asleep"] is True, res
    assert res["fd_is_ring"] is True, res
    assert res["got"] == 1 and res["left"] == 0, res


KILLED_CHOSEN_WITH_A_THREAD = r"""
import asyncio, json, os, signal, sys, time
import multiprocessing as mp
import efd
from efd import _aio

ctx = mp.get_context("fork")
ev = efd.EventFD(0, semaphore=True, backend="futex")
rep_r, rep_w = os.pipe()


def loop_child():
    # First in the futex word's line: a release picks this loop.
    async def main():
        task = asyncio.ensure_future(ev.acquire_async(timeout=60))
        loop = asyncio.get_running_loop()
        while True:
            rec = _aio._registry.get((ev, loop))
            if rec is not None and rec.sleeper and rec.sleeper.asleep:
                break
            await asyncio.sleep(0.001)
        os.write(rep_w, b"L")
        await task
        os.write(rep_w, b"x")           # never: it is killed first
    asyncio.run(main())


def thread_child():
    # Sleeps in acquire() with the death bell: no time limit of its own.
    os.write(rep_w, b"T")
    got = ev.acquire(timeout=30)
    os.write(rep_w, b"G" if got else b"n")


def read_one(limit):
    import select
    if not select.select([rep_r], [], [], limit)[0]:
        raise SystemExit("no word from the children within %s s" % limit)
    return os.read(rep_r, 1)


loop_p = ctx.Process(target=loop_child)
loop_p.start()
assert read_one(20) == b"L"
thread_p = ctx.Process(target=thread_child)
thread_p.start()
assert read_one(20) == b"T"
time.sleep(0.3)                     # the thread is asleep in acquire()
os.kill(loop_p.pid, signal.SIGSTOP) # chosen, it cannot take the unit
ev.release()
time.sleep(0.05)
os.kill(loop_p.pid, signal.SIGKILL) # killed while chosen
t0 = time.monotonic()
word = read_one(20)
delay = time.monotonic() - t0
loop_p.join(10)
thread_p.join(10)
print(json.dumps({"word": word.decode(), "delay": delay,
                  "loop": loop_p.exitcode, "thread": thread_p.exitcode,
                  "left": ev._peek()}))
"""


def test_loop_killed_while_chosen_a_thread_gets_the_unit(run_py):
    """A loop in one process sleeps first (so a release chooses it), a
    thread of another process sleeps in acquire() after it; the loop is
    stopped, the unit released, the loop killed: the thread gets the unit
    (its process re-checks since a loop sleeps on the object), within a
    few re-checks."""
    out = run_py(KILLED_CHOSEN_WITH_A_THREAD, timeout=60)
    res = json.loads(out.stdout.split("\n")[-2])
    assert res["word"] == "G", res
    assert res["loop"] == -9 and res["thread"] == 0, res
    assert res["left"] == 0, res
    assert res["delay"] < 5, res


def test_close_rests_a_sleeping_loop_of_another_thread():
    """close() from another thread while a loop sleeps on the ring: the
    wait is cancelled at once (no request stays on the futex word), the
    loop's task fails with ValueError, and a unit released afterwards by
    another process reaches that process's waiter."""
    import asyncio
    import multiprocessing as mp
    import os
    import select
    import threading
    import time

    ctx = mp.get_context("fork")
    ev = efd.EventFD(0, semaphore=True, backend="futex")
    r, w = os.pipe()
    go_r, go_w = os.pipe()

    def child():
        # Another process on the same page: waits, then releases on cue.
        os.write(w, b"T")
        os.read(go_r, 1)
        ev.release()
        got = ev.acquire(timeout=10)
        os.write(w, b"G" if got else b"n")
        os._exit(0)

    loop = asyncio.new_event_loop()
    result = {}

    def run_loop():
        async def main():
            try:
                result["got"] = await ev.acquire_async(timeout=30)
            except ValueError as exc:
                result["error"] = exc
        loop.run_until_complete(main())

    t = threading.Thread(target=run_loop)
    t.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        rec = next((rec for key, rec in list(efd._aio._registry.items())
                    if key[0] is ev), None)
        if rec is not None and rec.ring and rec.sleeper.asleep:
            break
        time.sleep(0.005)
    else:
        pytest.fail("the loop never slept on the ring")
    p = ctx.Process(target=child)
    p.start()
    try:
        assert select.select([r], [], [], 10)[0] and os.read(r, 1) == b"T"
        ev.close()
        t.join(10)
        assert not t.is_alive()
        assert isinstance(result.get("error"), ValueError), result
        # The child's release wakes a sleeper on the page's word: with this
        # process's request cancelled, nobody else takes it, so the
        # child's own acquire() finds it.
        os.write(go_w, b"g")
        assert select.select([r], [], [], 10)[0], "the child never answered"
        assert os.read(r, 1) == b"G"
    finally:
        p.join(10)
        if p.is_alive():
            p.kill()
        loop.close()
        for fd in (r, w, go_r, go_w):
            os.close(fd)
