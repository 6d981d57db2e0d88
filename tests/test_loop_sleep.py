"""Event loops sleeping on a futex object's word (src/efd_loop.c): through
a helper thread of efd's (efd_futex.c, "A loop's helper") where the death
bell works, else through a ring (src/efd_ring.c, "An event loop's sleep").

A loop that waits on a ``futex`` object sleeps on the readers' futex word
itself, so that a release wakes one sleeper -- thread or loop -- however
many loops wait.  Both ways are tested (the ``mode`` fixture sets
EFD_LOOP_SLEEP=ring for the ring).  What must hold:

* the record watches the sleeper's descriptor (the helper's door, the
  ring), not ``fileno()`` (which would make every release keep the
  readiness descriptor in step);
* a loop chosen by a release and killed before it took the unit does not
  lose it: not for other loops, and not for a thread that sleeps in
  ``acquire()`` with the death bell (no re-check of its own) -- the
  helper's sleep rings the bell; a process whose loops sleep through a
  ring has every waiter of the object re-check;
* a helper's loop does not re-check: idle, it wakes nobody;
* close() while a loop of another thread sleeps leaves no wait in flight
  (a later release in another process still reaches its waiters);
* where io_uring is refused (from the start, or after the ring was made)
  loops on a ring wait on ``fileno()`` instead, losing nothing;
* uvloop loops and trio runs are woken one per unit too, and a
  subinterpreter's loop sleeps on a sleeper of its own.

Every wait here is bounded; the children run under the conftest watchdog.
"""
import json
import textwrap

import pytest

import efd
from efd import _efd
from conftest import FORK_PROBE, full_or

_PROBE = _efd._probe()
#: Which ways loops can sleep here: a helper needs the death bell, a ring
#: the kernel's io_uring futex operations.
AVAILABLE = {"helper": bool(_PROBE["death_bell"]),
             "ring": bool(_PROBE["loop_ring"])}

pytestmark = pytest.mark.skipif(
    not any(AVAILABLE.values()),
    reason="loops cannot sleep on futex words here (python -m efd says why)")


@pytest.fixture(params=["helper", "ring"])
def mode(request, monkeypatch):
    """How loops sleep in this test and its children."""
    if not AVAILABLE[request.param]:
        pytest.skip("no %s sleep here (python -m efd)" % request.param)
    if request.param == "ring":
        monkeypatch.setenv("EFD_LOOP_SLEEP", "ring")
    else:
        monkeypatch.delenv("EFD_LOOP_SLEEP", raising=False)
    return request.param


@pytest.fixture
def ring(monkeypatch):
    """For the tests of the ring's own failures: loops sleep through it."""
    if not AVAILABLE["ring"]:
        pytest.skip("no ring sleep here (python -m efd)")
    monkeypatch.setenv("EFD_LOOP_SLEEP", "ring")


#: For the children: wait until `ev`'s record in the running loop sleeps
#: through its sleeper (a helper goes to sleep in its own thread, a moment
#: after the loop asked it to); the record.
UNTIL_ASLEEP = r"""
async def until_asleep(ev):
    import asyncio
    from efd import _aio
    loop = asyncio.get_running_loop()
    for _ in range(20000):
        rec = _aio._registry.get((ev, loop))
        if (rec is not None and rec.reading and rec.ring
                and rec.sleeper.asleep):
            return rec
        await asyncio.sleep(0.001)
    raise SystemExit("the loop never went to sleep")
"""


#: For the children: voluntary context switches of every thread of this
#: process.
SWITCHES = r"""
import os


def switches():
    total = 0
    for tid in os.listdir("/proc/self/task"):
        with open("/proc/self/task/%s/status" % tid) as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches:"):
                    total += int(line.split()[1])
    return total
"""


#: For the children: read the children's one-byte words, and start a loop
#: child (it reports "L" once its loop sleeps) and then a thread child (it
#: reports "T" before it sleeps in acquire()).
START_LOOP_THEN_THREAD = r"""
def read_one(limit):
    import select
    if not select.select([rep_r], [], [], limit)[0]:
        raise SystemExit("no word from the children within %s s" % limit)
    return os.read(rep_r, 1)


def start_loop_then_thread(loop_child, thread_child):
    loop_p = ctx.Process(target=loop_child)
    loop_p.start()
    assert read_one(20) == b"L"
    thread_p = ctx.Process(target=thread_child)
    thread_p.start()
    assert read_one(20) == b"T"
    return loop_p, thread_p
"""


def test_loop_watches_the_ring_not_fileno(run_py, mode):
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
                # (A helper goes to sleep in its own thread, a moment
                # after the loop asked it to.)
                if rec is not None and rec.reading and rec.sleeper.asleep:
                    break
            info = {"ring": rec.ring,
                    "fd_is_ring": rec.fd == rec.sleeper.fileno(),
                    "asleep": rec.sleeper.asleep,
                    "kind": rec.sleeper.kind,
                    "rechecks": rec.sleeper.rechecks,
                    "timer": rec.recheck is not None}
            ev.release()
            info["got"] = await task
            info["left"] = ev._peek()
            ev.close()
            return info

        print(json.dumps(asyncio.run(main())))
    """, timeout=30)
    res = json.loads(out.stdout.split("\n")[-2])
    assert res["ring"] is True and res["asleep"] is True, res
    assert res["fd_is_ring"] is True and res["kind"] == mode, res
    # A helper sleeps with the death bell: its loop keeps no re-check.
    assert res["rechecks"] is (mode == "ring"), res
    assert res["timer"] is (mode == "ring"), res
    assert res["got"] == 1 and res["left"] == 0, res


def test_an_idle_loop_makes_no_wake_ups(run_py, mode):
    """A loop waits on a futex object and nothing is released for a
    second: with a helper, neither the loop's thread nor the helper wakes
    (the helper sleeps with the death bell); through a ring the loop looks
    every 100 ms."""
    out = run_py(UNTIL_ASLEEP + SWITCHES + textwrap.dedent(r"""
        import asyncio, json, os, time
        import efd
        from efd import _aio

        async def main():
            ev = efd.EventFD(0, semaphore=True, backend="futex")
            task = asyncio.ensure_future(ev.acquire_async(timeout=30))
            rec = await until_asleep(ev)
            kind = rec.sleeper.kind
            await asyncio.sleep(0.05)       # settled
            before, t0 = switches(), time.monotonic()
            # The loop sleeps in its selector meanwhile: only a wake-up
            # that efd causes ends the sleep early.
            await asyncio.sleep(1.0)
            woke = switches() - before
            ev.release()
            got = await task
            ev.close()
            return {"woke": woke, "got": got, "kind": kind}

        print(json.dumps(asyncio.run(main())))
    """), timeout=60)
    res = json.loads(out.stdout.split("\n")[-2])
    assert res["got"] is True and res["kind"] == mode, res
    if mode == "helper":
        # The one sleep of the loop's own asyncio.sleep() ends it.
        assert res["woke"] <= 2, res
    else:
        assert res["woke"] >= 5, res


def _herd_or_skip(backend):
    """Skip unless loops on `backend` sleep through a herd helper here."""
    probe = efd._efd._probe()
    if probe["eventfd2_errno"]:
        pytest.skip("no eventfd here: %s" % probe["eventfd2"])
    if probe["wake_one"] != "epoll-exclusive":
        pytest.skip("no EPOLLEXCLUSIVE here: every loop wakes (%s)"
                    % probe["wake_one"])
    ev = efd.EventFD(0, semaphore=True, backend=backend)
    try:
        kind = ev._loop_sleeper().kind
    finally:
        ev.close()
    assert kind == "herd", kind


@pytest.mark.parametrize("backend", ["eventfd", "eventfd-readback"])
def test_an_idle_loop_on_the_kernel_counter_is_not_woken(run_py, backend,
                                                         monkeypatch):
    """A loop waits on the kernel counter and nothing is released for a
    second: the loop's own thread is not woken (before its herd helper it
    looked every 100 ms); the helper looks in its stead, about ten times
    (a loop chosen and killed is told by no page here: docs/asyncio.rst)."""
    monkeypatch.delenv("EFD_LOOP_SLEEP", raising=False)
    _herd_or_skip(backend)
    out = run_py(UNTIL_ASLEEP + SWITCHES + textwrap.dedent(r"""
        import asyncio, json, os, time
        import efd

        def own():
            with open("/proc/thread-self/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        return int(line.split()[1])

        async def main():
            ev = efd.EventFD(0, semaphore=True, backend=%r)
            task = asyncio.ensure_future(ev.acquire_async(timeout=30))
            rec = await until_asleep(ev)
            kind = rec.sleeper.kind
            await asyncio.sleep(0.05)       # settled
            loop0, all0 = own(), switches()
            await asyncio.sleep(1.0)
            loop_woke, all_woke = own() - loop0, switches() - all0
            ev.release()
            got = await task
            ev.close()
            return {"loop": loop_woke, "helper": all_woke - loop_woke,
                    "got": got, "kind": kind}

        print(json.dumps(asyncio.run(main())))
    """ % backend), timeout=60)
    res = json.loads(out.stdout.split("\n")[-2])
    assert res["got"] is True and res["kind"] == "herd", res
    # The one sleep of the loop's own asyncio.sleep() ends it.
    assert res["loop"] <= 2, res
    assert 5 <= res["helper"] <= 15, res


# ---- Event.wait_async: a helper that sleeps for readiness ---------------------

_IDLE_WATCHER = r"""
import asyncio, json, os, sys, time
import efd
from efd import _aio

BACKEND, LIB = "@BACKEND@", "@LIB@"


def set_elsewhere(event):
    # Another process sets it: only the kernel's wake-up, through
    # whatever the loop sleeps on, can tell this one.
    pid = os.fork()
    if pid == 0:
        event.set()
        os._exit(0)
    return pid


async def asyncio_main(event):
    task = asyncio.ensure_future(event.wait_async(30))
    loop = asyncio.get_running_loop()
    for _ in range(5000):
        await asyncio.sleep(0.001)
        rec = _aio._registry.get((event._ev, loop))
        if (rec is not None and rec.reading and rec.ring
                and rec.sleeper.asleep):
            break
    else:
        rec = _aio._registry.get((event._ev, loop))
    info = {"on_sleeper": bool(rec.ring) and rec.fd == rec.sleeper.fileno(),
            "for_ready": rec.for_ready,
            "kind": rec.sleeper.kind if rec.sleeper else None,
            "timer": rec.recheck is not None}
    await asyncio.sleep(0.05)
    before = switches()
    await asyncio.sleep(1.0)
    info["woke"] = switches() - before
    pid = set_elsewhere(event)
    t0 = time.monotonic()
    info["got"] = await asyncio.wait_for(task, 10)
    info["dt"] = time.monotonic() - t0
    os.waitpid(pid, 0)
    return info


async def trio_main(event):
    import trio
    info = {}

    async def waiter():
        info["got"] = await event.wait_async(30)
        info["dt"] = time.monotonic() - t0[0]

    t0 = [0.0]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.sleep(0.3)
        rec = _aio._registry.get((event._ev,
                                  trio.lowlevel.current_trio_token()))
        info["kind"] = rec.sleeper.kind if rec.sleeper else None
        info["fd"] = rec.fd             # fileno(), once asked for
        before = switches()
        await trio.sleep(1.0)
        info["woke"] = switches() - before
        t0[0] = time.monotonic()
        pid = set_elsewhere(event)
    os.waitpid(pid, 0)
    return info


event = efd.Event(backend=BACKEND)
if LIB == "asyncio":
    res = asyncio.run(asyncio_main(event))
else:
    import trio
    res = trio.run(trio_main, event)
event.close()
print(json.dumps(res))
"""


def _sleeps_on_futex_or_skip(backend):
    from conftest import backend_unavailable, sleeps_on_futex
    why = backend_unavailable(backend)
    if why:
        pytest.skip(why)
    if not sleeps_on_futex(backend):
        pytest.skip("%s: waiters do not sleep on futex words here" % backend)


@pytest.mark.parametrize("lib", ["asyncio", "trio"])
@pytest.mark.parametrize("backend", ["futex", "pipe"])
def test_an_idle_event_wait_async_makes_no_wake_ups(run_py, mode, backend,
                                                    lib):
    """A task waits in Event.wait_async() and nothing happens for a
    second: with a helper, which sleeps as a blocked Event.wait() does,
    neither the loop's thread nor the helper wakes, and the loop watches
    the helper's door and never asks for fileno(); through a ring, watchers wait on
    fileno() and look every 100 ms.  A set() by another process then
    reaches the task."""
    _sleeps_on_futex_or_skip(backend)
    if lib == "trio":
        pytest.importorskip("trio")
    out = run_py(SWITCHES + _IDLE_WATCHER.replace("@BACKEND@", backend)
                 .replace("@LIB@", lib), timeout=60)
    res = json.loads(out.stdout.split("\n")[-2])
    assert res["got"] is True and res["dt"] < 5, res
    if mode == "helper":
        # The one sleep of the loop's own sleep() ends it.
        assert res["woke"] <= 2, res
        if lib == "asyncio":
            assert res["on_sleeper"] and res["for_ready"], res
            assert res["kind"] == "helper" and not res["timer"], res
        else:
            # The run never asked for fileno(), which would have made
            # every release keep the readiness descriptor in step.
            assert res["kind"] == "helper" and res["fd"] == -1, res
    else:
        assert res["woke"] >= 5, res


_KILLED_SETTER = r"""
import asyncio, json, os, select, signal, sys, time
sys.path.insert(0, %(tests)r)
import _seccomp
import efd
from efd import _aio

# No look of the loop's own can be what finds the set event: only the
# kernel's ring of the death bell (through the helper's sleep) can.
_aio.RECHECK = 3600.0
WAITERS = 3
event = efd.Event(backend=%(backend)r)
rep_r, rep_w = os.pipe()


def loop_child():
    async def main():
        task = asyncio.ensure_future(event.wait_async(10))
        loop = asyncio.get_running_loop()
        for _ in range(5000):
            await asyncio.sleep(0.001)
            rec = _aio._registry.get((event._ev, loop))
            if (rec is not None and rec.ring and rec.sleeper.asleep):
                break
        else:
            raise SystemExit("the helper never went to sleep")
        os.write(rep_w, b"L")
        t0 = time.monotonic()
        got = await task
        os.write(rep_w, b"%%d %%.3f\n" %% (got, time.monotonic() - t0))
    try:
        asyncio.run(main())
    finally:
        os._exit(0)


def read_some(n, limit):
    buf, end = b"", time.monotonic() + limit
    while len(buf) < n and time.monotonic() < end:
        if select.select([rep_r], [], [], 0.05)[0]:
            buf += os.read(rep_r, 4096)
    return buf


pids = []
for _ in range(WAITERS):
    pid = os.fork()
    if pid == 0:
        loop_child()
    pids.append(pid)
ready = read_some(WAITERS, 30)
if ready != b"L" * WAITERS:
    raise SystemExit("the loops did not all sleep: %%r" %% ready)
time.sleep(0.2)
setter = os.fork()
if setter == 0:
    _seccomp.install_filter("kill-at-shared-futex-wake")
    event.set()                     # killed at its FUTEX_WAKE
    os._exit(0)
_, status = os.waitpid(setter, 0)
lines = []
end = time.monotonic() + 15
buf = b""
while len(lines) < WAITERS and time.monotonic() < end:
    buf += read_some(1, 0.5)
    *lines, rest = buf.split(b"\n") if buf else [b""]
for pid in pids:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
print(json.dumps({"killed": os.WIFSIGNALED(status)
                  and os.WTERMSIG(status) == signal.SIGSYS,
                  "set": event.is_set(),
                  "results": [l.decode() for l in lines]}))
"""


@pytest.mark.parametrize("backend", ["futex", "pipe"])
def test_a_setter_killed_before_its_wake_up_reaches_every_loop(
        run_py, backend):
    """Three processes' loops wait in Event.wait_async() through their
    helpers; a setter is killed (seccomp) at its FUTEX_WAKE, after it set
    the count and before it woke anyone.  With the loops' own re-check
    pushed out of reach, every loop still returns True at once: a helper
    sleeps with the death bell, whose ring wakes them all."""
    _sleeps_on_futex_or_skip(backend)
    if not AVAILABLE["helper"]:
        pytest.skip("no death bell here: loops sleep through a ring")
    _needs_seccomp()
    import os
    tests = os.path.dirname(os.path.abspath(__file__))
    out = run_py(_KILLED_SETTER % {"tests": tests, "backend": backend},
                 timeout=60, env={"EFD_LOOP_SLEEP": ""})
    res = json.loads(out.stdout.split("\n")[-2])
    assert res["killed"] and res["set"], res
    assert len(res["results"]) == 3, res
    for line in res["results"]:
        got, dt = line.split()
        assert got == "1" and float(dt) < 5, res


_MIXED = r"""
import asyncio, json, os, time
import efd
from efd import _aio

ev = efd.EventFD(0, semaphore=True, backend=%(backend)r)


async def until(pred):
    for _ in range(5000):
        if pred():
            return True
        await asyncio.sleep(0.001)
    return False


def release_elsewhere(n):
    pid = os.fork()
    if pid == 0:
        ev.release(n)
        os._exit(0)
    os.waitpid(pid, 0)


async def main():
    loop = asyncio.get_running_loop()
    rec = lambda: _aio._registry.get((ev, loop))
    consumer = asyncio.ensure_future(ev.acquire_async(timeout=20))
    assert await until(lambda: rec() and rec().ring
                       and rec().sleeper.asleep)
    info = {"first": rec().for_ready}
    watcher = asyncio.ensure_future(_aio.wait(ev, 20, False))
    assert await until(lambda: rec().for_ready)
    info["with_watcher"] = rec().for_ready
    release_elsewhere(1)
    info["watcher"] = await asyncio.wait_for(watcher, 10)
    info["consumer"] = await asyncio.wait_for(consumer, 10)
    # A consumer alone again: the helper sleeps for units once more.
    consumer = asyncio.ensure_future(ev.acquire_async(timeout=20))
    assert await until(lambda: rec() and rec().sleeper.asleep)
    info["after"] = rec().for_ready
    # A watcher that times out leaves the consumer sleeping for units.
    watcher = asyncio.ensure_future(_aio.wait(ev, 0.05, False))
    info["timed_out"] = await watcher
    info["after_timeout"] = rec().for_ready
    release_elsewhere(1)
    info["consumer2"] = await asyncio.wait_for(consumer, 10)
    info["left"] = ev._peek()
    return info

print(json.dumps(asyncio.run(main())))
ev.close()
"""


@pytest.mark.parametrize("backend", ["futex", "pipe"])
def test_a_loops_watchers_and_consumers_share_the_helper(run_py, backend):
    """A consumer waits, and a watcher joins it in the same loop: the
    helper sleeps for readiness while the watcher waits, a release by
    another process serves both, and the helper sleeps for units again
    once only consumers wait -- after a watcher was served, and after one
    timed out."""
    _sleeps_on_futex_or_skip(backend)
    if not AVAILABLE["helper"]:
        pytest.skip("no death bell here: loops sleep through a ring")
    out = run_py(_MIXED % {"backend": backend}, timeout=60,
                 env={"EFD_LOOP_SLEEP": ""})
    res = json.loads(out.stdout.split("\n")[-2])
    assert res == {"first": False, "with_watcher": True, "watcher": True,
                   "consumer": 1, "after": False, "timed_out": None,
                   "after_timeout": False, "consumer2": 1, "left": 0}, res


_BUSY_LOOP_CHOSEN = r"""
import asyncio, json, os, select, sys, time
import multiprocessing as mp
import efd

ctx = mp.get_context("fork")
ev = efd.EventFD(0, semaphore=True, backend="futex")
rep_r, rep_w = os.pipe()
%(until_asleep)s

def loop_child():
    # First in the word's line: a release picks this loop -- whose thread
    # then blocks for 3 s in plain synchronous code.
    async def main():
        task = asyncio.ensure_future(ev.acquire_async(timeout=30))
        await until_asleep(ev)
        os.write(rep_w, b"L")
        time.sleep(3.3)     # the loop does not run; the release comes
        got = await task
        os.write(rep_w, b"X" if got else b"x")
    asyncio.run(main())


def thread_child():
    os.write(rep_w, b"T")
    got = ev.acquire(timeout=20)
    os.write(rep_w, b"G" if got else b"n")


%(start_both)s

loop_p, thread_p = start_loop_then_thread(loop_child, thread_child)
time.sleep(0.1)                     # the thread is asleep in acquire()
ev.release()
t0 = time.monotonic()
word = read_one(20)
delay = time.monotonic() - t0
ev.release()                        # for the loop, once it runs again
last = read_one(20)
loop_p.join(20)
thread_p.join(20)
print(json.dumps({"word": word.decode(), "delay": delay,
                  "last": last.decode(), "left": ev._peek(),
                  "codes": [loop_p.exitcode, thread_p.exitcode]}))
"""


def test_a_loop_chosen_while_busy_does_not_hold_the_unit(run_py, mode):
    """A release chooses a loop whose thread is then busy for 3 s in
    synchronous code: the unit goes on to a thread of another process
    sleeping in acquire() -- passed on by the helper after 100 ms, or
    found by the thread's own re-check on a ring -- not after the 3 s;
    the loop takes the next unit when it runs again."""
    out = run_py(_BUSY_LOOP_CHOSEN % {"until_asleep": UNTIL_ASLEEP,
                                      "start_both": START_LOOP_THEN_THREAD},
                 timeout=90)
    res = json.loads(out.stdout.split("\n")[-2])
    assert res["word"] == "G" and res["last"] == "X", res
    assert res["left"] == 0 and res["codes"] == [0, 0], res
    assert res["delay"] < 2.5, res


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
    # The exit status: how often it looked again on its own (0 if only
    # the bell and releases woke it).
    sys.exit(min(ev._wakeups()[1], 100))


""" + START_LOOP_THEN_THREAD + r"""

loop_p, thread_p = start_loop_then_thread(loop_child, thread_child)
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


def test_loop_killed_while_chosen_a_thread_gets_the_unit(run_py, mode):
    """A loop in one process sleeps first (so a release chooses it), a
    thread of another process sleeps in acquire() after it; the loop is
    stopped, the unit released, the loop killed: the thread gets the unit
    -- woken by the bell its helper armed, or, on a ring, by its own
    re-check (a process whose loops sleep through a ring makes every
    waiter re-check)."""
    out = run_py(KILLED_CHOSEN_WITH_A_THREAD, timeout=60)
    res = json.loads(out.stdout.split("\n")[-2])
    assert res["word"] == "G", res
    assert res["loop"] == -9, res
    if mode == "helper":
        # The helper's sleep rang the bell: the thread, asleep with no
        # limit, never looked on its own.
        assert res["thread"] == 0, res
    assert res["left"] == 0, res
    assert res["delay"] < 5, res


def test_close_rests_a_sleeping_loop_of_another_thread(mode):
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


#: An LD_PRELOAD shim: after futex_waitv returns, the calling thread naps
#: SLOW_WAITV_MS: a helper woken from its sleep touches the page late.
_SLOW_WAITV_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>
long syscall(long n, ...) {
    static long (*real)(long, ...);
    va_list ap; long a[6]; int i, saved, ms;
    if (!real) real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
    va_start(ap, n);
    for (i = 0; i < 6; i++) a[i] = va_arg(ap, long);
    va_end(ap);
    long r = real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
    /* futex_waitv; or, with SLOW_FUTEX_WAIT_MS, FUTEX_WAIT (an idle
     * helper's sleep) */
    if ((n == 449 && getenv("SLOW_WAITV_MS"))
            || (n == 202 && (a[1] & 127) == 0
                && getenv("SLOW_FUTEX_WAIT_MS"))) {
        struct timespec ts;
        saved = errno;
        ms = atoi(getenv(n == 449 ? "SLOW_WAITV_MS" : "SLOW_FUTEX_WAIT_MS"));
        ts.tv_sec = ms / 1000;
        ts.tv_nsec = (ms % 1000) * 1000000L;
        nanosleep(&ts, NULL);
        errno = saved;
    }
    return r;
}
"""


@pytest.fixture
def slow_waitv(tmp_path):
    """The environment for a child whose woken futex_waitv returns 200 ms
    late (the _SLOW_WAITV_C shim, built here): a helper woken from its
    sleep touches the page that much later."""
    import platform
    import shutil
    import subprocess
    if not AVAILABLE["helper"]:
        pytest.skip("no helper sleep here (python -m efd)")
    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("futex_waitv's number is 449 on x86_64 and aarch64")
    cc = next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
    if cc is None:
        pytest.skip("no C compiler for the shim")
    src, lib = tmp_path / "slow.c", tmp_path / "slow.so"
    src.write_text(_SLOW_WAITV_C)
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(lib), str(src),
                    "-ldl"], check=True, timeout=120)
    return {"LD_PRELOAD": str(lib), "SLOW_WAITV_MS": "200"}


@pytest.fixture
def slow_idle_stop(slow_waitv):
    """The same shim, slowing an idle helper's FUTEX_WAIT instead: stopping
    a resting helper takes 200 ms."""
    return {"LD_PRELOAD": slow_waitv["LD_PRELOAD"],
            "SLOW_FUTEX_WAIT_MS": "200"}


def test_close_waits_for_a_helper_another_thread_is_stopping(run_py,
                                                             slow_waitv):
    """One thread ends a loop sleeper whose helper sleeps on the page (the
    object's spare slot taken, so the helper is stopped, and that thread
    lets go of the GIL while it waits for it) while another closes the
    object: close() waits for that helper before the page goes.  A shim
    makes the woken helper touch the page 200 ms late, so that the close
    lands in between (it crashed there; found by the adversary)."""
    out = run_py(r"""
        import threading, time
        import efd

        for it in range(%d):
            ev = efd.EventFD(0, semaphore=True, backend="futex")
            s1, s2 = ev._loop_sleeper(), ev._loop_sleeper()
            assert s1.kind == s2.kind == "helper"
            s1.close()              # its helper becomes the spare
            s2.sleep()              # s2's helper sleeps on the page
            while not s2.asleep:
                time.sleep(0.0005)
            time.sleep(0.05)
            go = threading.Barrier(2)

            def finish():
                go.wait()
                s2.close()          # the helper wakes, naps 200 ms

            def close():
                go.wait()
                time.sleep(0.05)
                ev.close()          # meanwhile
            ts = [threading.Thread(target=finish),
                  threading.Thread(target=close)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(30)
                assert not t.is_alive()
        print("ok")
    """ % full_or(3, 10), timeout=120, env=slow_waitv)
    assert out.stdout.strip().endswith("ok")


def test_a_fork_child_does_not_wait_for_its_parents_stopping_helper(
        run_py, slow_waitv):
    """A process forks while one of its threads waits, the GIL let go, for
    a helper it is stopping: the child's close() does not wait for that
    helper (the child has no such thread; it waited for ever)."""
    out = run_py(r"""
        import os, threading, time
        import efd

        ev = efd.EventFD(0, semaphore=True, backend="futex")
        s1, s2 = ev._loop_sleeper(), ev._loop_sleeper()
        s1.close()                  # its helper becomes the spare
        s2.sleep()
        while not s2.asleep:
            time.sleep(0.0005)
        time.sleep(0.05)
        t = threading.Thread(target=s2.close)   # stops s2's helper
        t.start()
        time.sleep(0.05)            # the helper naps 200 ms meanwhile
        pid = os.fork()
        if pid == 0:
            ev.close()
            os._exit(0)
        t.join(30)
        ev.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                print("child", status)
                break
            time.sleep(0.01)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            print("child hung in close()")
    """, timeout=60, env=slow_waitv)
    assert out.stdout.strip() == "child 0", out.stdout


#: For the fork tests' children: `threads()` counts this process's threads,
#: and `base` is the count with the watchdog's thread gone (it would make
#: os.fork() warn by itself).
ALONE = r"""
import faulthandler, json, os, time
import efd

def threads():
    return len(os.listdir("/proc/self/task"))

faulthandler.cancel_dump_traceback_later()
deadline = time.monotonic() + 5
while threads() > 1 and time.monotonic() < deadline:
    time.sleep(0.01)
base = threads()
"""


def test_a_fork_stops_the_idle_helpers_first(run_py):
    """An object keeps its last loop's helper thread idle for the next
    wait; os.fork() stops it first.  So a program that awaited
    acquire_async() and then forks its workers (no loop waiting any more)
    forks with no thread of efd's, and from 3.12 os.fork() does not warn
    that it is multi-threaded; the next wait makes a helper again."""
    if not AVAILABLE["helper"]:
        pytest.skip("no helper sleep here (python -m efd)")
    out = run_py(ALONE + FORK_PROBE + textwrap.dedent(r"""
        import asyncio, warnings
        sem = efd.Semaphore(0)

        async def wait_once():
            asyncio.get_running_loop().call_later(0.05, sem.release)
            await asyncio.wait_for(sem.acquire_async(), 10)

        asyncio.run(wait_once())
        kept = threads() - base
        child, warned = fork_probe()
        after = threads() - base
        asyncio.run(wait_once())
        again = threads() - base
        sem.close()
        print(json.dumps({
            "kept": kept, "after": after, "again": again,
            "child": child, "warned": warned}))
    """), timeout=60)
    got = json.loads(out.stdout)
    assert got["kept"] == 1, got        # the idle helper, kept
    assert got["after"] == 0, got       # stopped before the fork
    assert got["child"] == 1, got       # the child: its one thread
    assert got["warned"] == [], got
    assert got["again"] == 1, got       # a new one for the next wait


@pytest.mark.parametrize("kind", ["Semaphore", "Event"])
def test_loops_closed_with_tasks_waiting_leave_no_helpers(run_py, kind):
    """Ten loops, one after another, each closed while a task of it waits
    (loop.close() with the task pending, as without asyncio.run): such a
    task can never run, and the next loop's first wait drops its record,
    so that its helper rests and, once nobody refers to the task, goes --
    left wanting, each stayed as a thread of its own (ten threads), kept
    alive by the registry, and took a release's wake-up for nobody.  The
    units released afterwards are all there."""
    if not AVAILABLE["helper"]:
        pytest.skip("no helper sleep here (python -m efd)")
    out = run_py(ALONE + textwrap.dedent(r"""
        import asyncio, gc, warnings
        warnings.simplefilter("ignore")     # "Task was destroyed ..."
        KIND = %r
        obj = efd.Semaphore(0) if KIND == "Semaphore" else efd.Event()
        wait = obj.acquire_async if KIND == "Semaphore" else obj.wait_async
        for _ in range(10):
            loop = asyncio.new_event_loop()
            task = loop.create_task(wait())
            loop.run_until_complete(asyncio.sleep(0.05))
            loop.close()
            del task, loop      # nothing of ours keeps them
            gc.collect()
        most = threads() - base

        async def last():
            asyncio.get_running_loop().call_later(
                0.05, obj.release if KIND == "Semaphore" else obj.set)
            return await asyncio.wait_for(wait(), 10)

        got = asyncio.run(last())
        after = threads() - base
        if KIND == "Semaphore":
            obj.release(3)
            left = obj.value
        else:
            left = obj.is_set()
        obj.close()
        print(json.dumps({"most": most, "after": after, "got": got,
                          "left": left}))
    """ % kind), timeout=60)
    got = json.loads(out.stdout.split("\n")[-2])
    # The last closed loop's helper (its record dropped only when the next
    # loop waits) and one resting, parked for the next wait.
    assert got["most"] <= 2 and got["after"] <= 2, got
    assert got["got"] in (1, True), got
    assert got["left"] in (3, True), got


def test_a_fork_stops_a_resting_sleepers_helper_and_it_comes_back(run_py):
    """A loop's sleeper whose tasks stopped waiting keeps its helper,
    resting (a record left in garbage by a task cancelled as asyncio.run()
    ended holds it so): os.fork() stops that one too, and the sleeper
    takes a helper again when its loop waits again -- and is woken by a
    release through it."""
    if not AVAILABLE["helper"]:
        pytest.skip("no helper sleep here (python -m efd)")
    out = run_py(ALONE + textwrap.dedent(r"""
        import select
        ev = efd.EventFD(0, semaphore=True, backend="futex")
        s = ev._loop_sleeper()
        s.fileno()
        s.sleep()
        s.rest()                    # resting, its helper kept
        resting = threads() - base
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        after = threads() - base
        fd = s.fileno()             # a helper again
        ready = s.sleep()
        ev.release()
        woken = bool(select.select([fd], [], [], 10)[0])
        s.woke()
        got = ev.acquire(False)
        s.close()
        ev.close()
        print(json.dumps({"resting": resting, "after": after,
                          "ready": ready, "woken": woken, "got": got}))
    """), timeout=60)
    got = json.loads(out.stdout)
    assert got == {"resting": 1, "after": 0, "ready": False, "woken": True,
                   "got": True}, got


def test_a_fork_does_not_wait_for_helpers_parked_while_it_stops_others(
        run_py, slow_idle_stop):
    """The fork hook stops the helpers parked when it starts: a loop of
    another thread that parks helpers while the hook lets go of the GIL
    does not keep the fork waiting (it did: seconds)."""
    out = run_py(r"""
        import asyncio, threading, time
        import efd
        from efd import _efd

        async def once(s):
            asyncio.get_running_loop().call_later(0.001, s.release)
            await asyncio.wait_for(s.acquire_async(), 10)

        parked = [efd.Semaphore(0) for _ in range(3)]
        for s in parked:
            asyncio.run(once(s))            # three helpers, parked
        stop = False
        cycles = [0]

        def churn():        # parks and takes again, ten objects in turn
            sems = [efd.Semaphore(0) for _ in range(10)]

            async def main():
                while not stop:
                    for s in sems:
                        await once(s)   # about 200 ms each (the shim)
                        cycles[0] += 1
            asyncio.run(main())

        t = threading.Thread(target=churn)
        t.start()
        while cycles[0] < 10:           # every one of the ten parked
            time.sleep(0.01)
        before = cycles[0]
        stopped = _efd._before_fork()       # each stop: 200 ms (the shim)
        during = cycles[0] - before
        stop = True
        t.join(30)
        print(stopped, during)
    """, timeout=60, env=slow_idle_stop)
    stopped, during = map(int, out.stdout.split())
    assert during >= 1, out.stdout      # the churn parked meanwhile
    # Three, and the churn's ten at most: those parked at the start.
    assert stopped <= 13, out.stdout


# ---- io_uring refused (Docker's default seccomp profile) ------------------

def _needs_seccomp():
    import _seccomp
    ok, why = _seccomp.supported()
    if not ok:
        pytest.skip(why)


_REFUSED_FROM_THE_START = r"""
import asyncio, json, os, sys, threading, time
sys.path.insert(0, %(tests)r)
import _seccomp
_seccomp.install_filter("no-io-uring")
import efd
from efd import _aio

probe = efd._efd._probe()
ev = efd.EventFD(0, semaphore=True, backend="futex")


async def main():
    task = asyncio.ensure_future(ev.acquire_async(timeout=20))
    loop = asyncio.get_running_loop()
    for _ in range(2000):
        rec = _aio._registry.get((ev, loop))
        if rec is not None and rec.reading:
            break
        await asyncio.sleep(0.001)
    info = {"ring": rec.ring, "fd_is_fileno": rec.fd == ev.fileno()}
    threading.Timer(0.2, ev.release).start()
    t0 = time.monotonic()
    info["got"] = await task
    info["dt"] = time.monotonic() - t0
    info["left"] = ev._peek()
    return info


info = asyncio.run(main())
info["loop_ring"] = probe["loop_ring"]
info["errno"] = probe["loop_ring_errno"]
ev.close()
print(json.dumps(info))
"""


def test_io_uring_refused_loops_wait_on_the_descriptor(run_py, ring):
    """Under a profile that refuses io_uring (EPERM, as Docker's default
    does), the probe says so and a loop on a futex object waits on
    fileno(), getting a release from another thread."""
    _needs_seccomp()
    import errno
    import os
    tests = os.path.dirname(os.path.abspath(__file__))
    out = run_py(_REFUSED_FROM_THE_START % {"tests": tests}, timeout=60)
    res = json.loads(out.stdout.split("\n")[-2])
    assert res["loop_ring"] is False and res["errno"] == errno.EPERM, res
    assert res["ring"] is False and res["fd_is_fileno"] is True, res
    assert res["got"] is True and res["left"] == 0, res
    assert res["dt"] < 10, res


_REFUSED_MID_WAIT = r"""
import asyncio, json, os, sys, threading, time
sys.path.insert(0, %(tests)r)
import _seccomp
import efd
from efd import _aio

ev = efd.EventFD(0, semaphore=True, backend="futex")


async def asleep(loop):
    for _ in range(2000):
        rec = _aio._registry.get((ev, loop))
        if rec is not None and rec.reading and (not rec.ring
                                                or rec.sleeper.asleep):
            return rec
        await asyncio.sleep(0.001)
    raise SystemExit("the loop never went to sleep")


async def main():
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(ev.acquire_async(timeout=20))
    rec = await asleep(loop)
    info = {"ring_before": rec.ring}
    # The ring works: a release reaches the loop through it.
    ev.release()
    info["first"] = await task
    # From here on io_uring_enter is refused: the next sleep's submission
    # fails, and the loop must go on waiting the old way, mid-wait.
    _seccomp.install_filter("no-io-uring")
    task = asyncio.ensure_future(ev.acquire_async(timeout=20))
    rec = await asleep(loop)
    info["ring_after"] = rec.ring
    info["fd_is_fileno"] = rec.fd == ev.fileno()
    threading.Timer(0.2, ev.release).start()
    t0 = time.monotonic()
    info["second"] = await task
    info["dt"] = time.monotonic() - t0
    # Two waits more, served by releases from a thread: nothing of the
    # failed submission is left to take a wake-up.
    for i in range(2):
        task = asyncio.ensure_future(ev.acquire_async(timeout=20))
        await asleep(loop)
        threading.Timer(0.05, ev.release).start()
        info["more%%d" %% i] = await task
    info["left"] = ev._peek()
    # And a thread asleep in acquire() hears the next release.
    threading.Timer(0.2, ev.release).start()
    info["thread"] = await loop.run_in_executor(None, ev.acquire, True, 10)
    info["left_after"] = ev._peek()
    return info


info = asyncio.run(main())
ev.close()
print(json.dumps(info))
"""


def test_io_uring_refused_mid_wait_the_loop_falls_back(run_py, ring):
    """A ring that worked is refused later (a filter installed after the
    probe: a sandboxing library, a fork child's profile): the loop's next
    sleep cannot be submitted, and it goes on waiting on fileno() with no
    unit and no sleeper count lost."""
    _needs_seccomp()
    import os
    tests = os.path.dirname(os.path.abspath(__file__))
    out = run_py(_REFUSED_MID_WAIT % {"tests": tests}, timeout=60)
    res = json.loads(out.stdout.split("\n")[-2])
    assert res["ring_before"] is True and res["first"] is True, res
    assert res["ring_after"] is False and res["fd_is_fileno"] is True, res
    assert res["second"] is True and res["dt"] < 10, res
    assert res["more0"] is True and res["more1"] is True, res
    assert res["left"] == 0, res
    assert res["thread"] is True and res["left_after"] == 0, res


_REFUSED_WITH_A_COPY_OF_THE_RING = r"""
import asyncio, json, os, select, signal, sys, time
import multiprocessing as mp
sys.path.insert(0, %(tests)r)
import _seccomp
import efd
from efd import _aio

ctx = mp.get_context("fork")
ev = efd.EventFD(0, semaphore=True, backend="futex")
r, w = os.pipe()
g_r, g_w = os.pipe()


%(until_asleep)s

def loop_proc():
    async def main():
        task = asyncio.ensure_future(ev.acquire_async(timeout=60))
        await until_asleep(ev)
        # A fork child now holds a copy of the ring's descriptor: closing
        # ours will not tear the ring down.
        g = os.fork()
        if g == 0:
            time.sleep(60)
            os._exit(0)
        os.write(g_w, str(g).encode() + b"\n")
        # io_uring refused from here on: the cancel of the sleep cannot
        # be submitted.
        _seccomp.install_filter("no-io-uring")
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        ev.close()
        os.write(w, b"A")
        await asyncio.sleep(60)
    asyncio.run(main())


def thread_proc():
    # Sleeps with the death bell and no re-check: nobody left on the
    # object lacks the bell.
    os.write(w, b"T")
    got = ev.acquire(timeout=20)
    os.write(w, b"G" if got else b"n")
    os._exit(0)


def read1(limit):
    if not select.select([r], [], [], limit)[0]:
        raise SystemExit("no word within %%s s" %% limit)
    return os.read(r, 1)


a = ctx.Process(target=loop_proc)
a.start()
t = None
grandchild = None
try:
    assert read1(20) == b"A"
    grandchild = int(os.read(g_r, 32).split()[0])
    t = ctx.Process(target=thread_proc)
    t.start()
    assert read1(20) == b"T"
    time.sleep(0.3)
    ev.release()
    t0 = time.monotonic()
    word = read1(25)
    print(json.dumps({"word": word.decode(), "delay": time.monotonic() - t0,
                      "left": ev._peek()}))
finally:
    for p in (t, a):
        if p is not None:
            p.kill()
            p.join(10)
    if grandchild:
        try:
            os.kill(grandchild, signal.SIGKILL)
        except ProcessLookupError:
            pass
"""


def test_a_refused_cancel_leaves_no_wait_on_the_word(run_py, ring):
    """A loop asleep on the ring; its process forks (the child holds a
    copy of the ring), then gets io_uring refused, and the loop's task is
    cancelled and the object closed: the cancel cannot be submitted and
    closing the ring does not tear it down.  A thread of another process
    that sleeps with the death bell still gets the next release at once
    (the orphaned wait, left on the futex word, would take it)."""
    _needs_seccomp()
    import os
    tests = os.path.dirname(os.path.abspath(__file__))
    out = run_py(_REFUSED_WITH_A_COPY_OF_THE_RING
                 % {"tests": tests, "until_asleep": UNTIL_ASLEEP}, timeout=90)
    res = json.loads(out.stdout.split("\n")[-2])
    assert res["word"] == "G" and res["left"] == 0, res
    assert res["delay"] < 3, res


def test_a_sleeper_whose_ring_is_gone_says_so_and_the_object_lives(run_py, ring):
    """After a cancel io_uring refused, the sleeper's ring is closed: its
    fileno() raises OSError (EBADF), not the closed object's ValueError,
    and the object's next loop wait goes the old way and is served."""
    _needs_seccomp()
    import os
    tests = os.path.dirname(os.path.abspath(__file__))
    out = run_py(r"""
import asyncio, errno, json, sys, threading
sys.path.insert(0, %r)
import _seccomp
import efd

ev = efd.EventFD(0, semaphore=True, backend="futex")
sleeper = ev._loop_sleeper()
assert sleeper is not None
assert sleeper.sleep() is False and sleeper.asleep
_seccomp.install_filter("no-io-uring")
sleeper.rest()                      # the cancel cannot be submitted
try:
    sleeper.fileno()
    gone = None
except OSError as exc:
    gone = exc.errno
except ValueError:
    gone = "ValueError"


async def main():
    threading.Timer(0.1, ev.release).start()
    return await ev.acquire_async(timeout=10)

got = asyncio.run(main())
print(json.dumps({"gone": gone, "closed": ev.closed, "got": got,
                  "left": ev._peek()}))
""" % tests, timeout=60)
    res = json.loads(out.stdout.split("\n")[-2])
    import errno
    assert res["gone"] == errno.EBADF and res["closed"] is False, res
    assert res["got"] is True and res["left"] == 0, res


# ---- one wake-up per unit under uvloop and trio ------------------------------

#: The hand-out both tests run: WAITERS forked processes wait on one futex
#: object in their loops (`child`, defined by each test's code, reports
#: "W" when asleep, "G" per unit taken, and at the end "R<got>,<wakes>;",
#: or "R<got>,<wakes>,<ready>,<note>;" with the sleeps that found units at
#: once and a word on how its sleeps went), and UNITS units are released
#: one at a time.  Prints what they reported, summed.
_HAND_OUT = r"""
import json, os, select, time
import multiprocessing as mp
import efd
from efd import _aio

ctx = mp.get_context("fork")
ev = efd.EventFD(0, semaphore=True, backend="@BACKEND@")
WAITERS, UNITS = 4, 8
rep_r, rep_w = os.pipe()

%s

def read(n, limit=20):
    buf = b""
    deadline = time.monotonic() + limit
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([rep_r], [], [], left)[0]:
            raise SystemExit("children silent: %%r" %% buf)
        buf += os.read(rep_r, n - len(buf))
    return buf


procs = [ctx.Process(target=child, args=(i,)) for i in range(WAITERS)]
for p in procs:
    p.start()
assert read(WAITERS).count(b"W") == WAITERS
for u in range(UNITS):
    ev.release()
    word = read(2)                       # the winner took it, sleeps again
    assert sorted(word) == sorted(b"GW"), word
    time.sleep(0.03)
reports = b""
while reports.count(b";") < WAITERS:
    reports += read(1, 30)
for p in procs:
    p.join(10)
got = wakes = ready = 0
notes = []
for rep in reports.decode().strip(";").split(";"):
    g, w, *more = rep[1:].split(",")
    got += int(g)
    wakes += int(w)
    if more:
        ready += int(more[0])
        notes += more[1:]
print(json.dumps({"got": got, "wakes": wakes, "ready": ready,
                  "left": ev._peek(), "codes": [p.exitcode for p in procs],
                  "notes": notes}))
"""


def _hand_out(run_py, child, backend="futex"):
    """The hand-out's report (see _HAND_OUT), once every unit was taken."""
    out = run_py((_HAND_OUT % child).replace("@BACKEND@", backend),
                 timeout=90)
    res = json.loads(out.stdout.split("\n")[-2])
    assert res["got"] == 8 and res["left"] == 0, res
    assert res["codes"] == [0, 0, 0, 0], res
    return res


_UVLOOP_CHILD = r"""
import asyncio
import uvloop


def child(i):
    # Count the reader's runs: a loop woken for a unit another loop took
    # runs it and finds nothing.
    runs = [0]
    ready = _aio._Waiters._ready

    def counted(self):
        runs[0] += 1
        ready(self)
    _aio._Waiters._ready = counted

    async def main():
        loop = asyncio.get_running_loop()
        got = 0
        while True:
            task = asyncio.ensure_future(ev.acquire_async(timeout=5))
            while True:
                rec = _aio._registry.get((ev, loop))
                if rec is not None and rec.ring and rec.sleeper.asleep:
                    break
                if task.done():
                    break
                await asyncio.sleep(0.001)
            os.write(rep_w, b"W")           # asleep (again)
            if not await task:
                break                       # the 5 s ran out: all handed
            got += 1
            os.write(rep_w, b"G")
        return got
    got = uvloop.run(main()) if hasattr(uvloop, "run") else (
        uvloop.install() or asyncio.run(main()))
    os.write(rep_w, ("R%d,%d;" % (got, runs[0])).encode())
    os._exit(0)
"""


def test_uvloop_loops_are_woken_one_per_unit(run_py, mode):
    """Four processes' uvloop loops wait on one futex object; eight units
    released one at a time reach them one wake-up each (a herd would run
    every loop's reader: 32 runs), and none is lost."""
    pytest.importorskip("uvloop")
    # One run per unit, plus at most one re-check per unit that happened
    # to find it before its chosen loop took it.
    res = _hand_out(run_py, _UVLOOP_CHILD)
    assert 8 <= res["wakes"] <= 16, json.dumps(res)


_TRIO_CHILD = r"""
import trio


class Counting:
    # The run's loop sleeper, counting the wake-ups its ring brought, and
    # for the report how its sleeps went: sleeps that found units at once,
    # that failed (errno), and looks that found no wake-up (re-checks).
    def __init__(self, sleeper):
        self.sleeper = sleeper
        self.wakes = self.ready = self.idle = 0
        self.errors = []

    def __getattr__(self, name):
        return getattr(self.sleeper, name)

    def sleep(self):
        try:
            ready = self.sleeper.sleep()
        except OSError as exc:
            self.errors.append(exc.errno)
            raise
        self.ready += bool(ready)
        return ready

    def woke(self):
        n = self.sleeper.woke()
        self.wakes += bool(n)
        self.idle += not n
        return n


def child(i):
    made = []
    original = _aio._TrioWaiters._sleeper

    def counted(self):
        if self.sleeper is None:
            real = self.ev._loop_sleeper()
            self.sleeper = Counting(real) if real else False
            if real:
                made.append(self.sleeper)
        return original(self)
    _aio._TrioWaiters._sleeper = counted

    async def main():
        got = 0
        while True:
            async with trio.open_nursery() as nursery:
                result = []

                async def take():
                    result.append(await ev.acquire_async(timeout=5))
                nursery.start_soon(take)
                for _ in range(5000):
                    if made and made[-1].asleep:
                        break
                    await trio.sleep(0.001)
                os.write(rep_w, b"W")
            if not result[0]:
                return got
            got += 1
            os.write(rep_w, b"G")

    got = trio.run(main)
    wakes = sum(s.wakes for s in made)
    note = "sleepers %d ready %d idle %d errors %s" % (
        len(made), sum(s.ready for s in made), sum(s.idle for s in made),
        "/".join(str(e) for s in made for e in s.errors) or "none")
    os.write(rep_w, ("R%d,%d,%d,%s;" % (
        got, wakes, sum(s.ready for s in made), note)).encode())
    os._exit(0)
"""


def test_trio_runs_are_woken_one_per_unit(run_py, mode):
    """Four processes' trio.run wait on one futex object: their consumer
    sleeps on the futex word through a ring, so eight units released one
    at a time wake one run each (the readiness descriptor would wake all
    four every time), and none is lost."""
    pytest.importorskip("trio")
    res = _hand_out(run_py, _TRIO_CHILD)
    # Each unit is taken after one wake-up, or by a sleep that found it
    # there at once and so needed none (a run not asleep yet when the unit
    # came).  A herd would be 32 wake-ups.
    assert 8 <= res["wakes"] + res["ready"], json.dumps(res)
    assert res["wakes"] <= 12, json.dumps(res)


@pytest.mark.parametrize("backend", ["futex", "eventfd"])
def test_at_most_32_helpers_rest_parked(run_py, backend, monkeypatch):
    """A helper that rests stays parked with its object, a thread and two
    or three descriptors, for the object's next wait: 100 objects awaited
    once each and kept open keep at most 32 (before, 100: a program with a
    few hundred such objects ran out of descriptors), and the first of
    them, whose helper went, is awaited again as well."""
    monkeypatch.delenv("EFD_LOOP_SLEEP", raising=False)
    if backend == "eventfd":
        _herd_or_skip(backend)
    out = run_py(textwrap.dedent(r"""
        import asyncio, json, os
        import efd

        def threads():
            return len(os.listdir("/proc/self/task"))

        async def once(ev):
            task = asyncio.ensure_future(ev.acquire_async(timeout=30))
            await asyncio.sleep(0.002)      # asleep through its helper
            ev.release()
            return await task

        async def main():
            t0 = threads()
            evs = [efd.EventFD(0, semaphore=True, backend=%r)
                   for _ in range(100)]
            kinds, got = set(), 0
            for ev in evs:
                got += await once(ev)
                kinds.add(ev._loop_sleeper().kind)
            kept = threads() - t0
            again = await once(evs[0])
            for ev in evs:
                ev.close()
            return {"got": got, "kept": kept, "again": again,
                    "kinds": sorted(kinds), "after": threads() - t0}

        print(json.dumps(asyncio.run(main())))
    """ % backend), timeout=90)
    res = json.loads(out.stdout.split("\n")[-2])
    assert res["got"] == 100 and res["again"] is True, res
    assert res["kinds"] in (["helper"], ["herd"], ["ring"]), res
    assert res["kept"] <= 32 + 1, res      # + a sleeper's own, just made
    assert res["after"] <= 1, res


# ---- the kernel counter: a herd helper per loop (efd_herd.c) ---------------

@pytest.mark.parametrize("backend", ["eventfd", "eventfd-readback"])
def test_uvloop_loops_on_the_kernel_counter_are_woken_one_per_unit(
        run_py, backend, monkeypatch):
    """As above, on the kernel counter: each uvloop loop sleeps through a
    helper asleep in an epoll instance of its own where the counter is
    registered with EPOLLEXCLUSIVE, so a release runs one loop's reader
    (uvloop's own registration of fileno() would run all four: 32), with
    no reach into the loop's internals."""
    pytest.importorskip("uvloop")
    monkeypatch.delenv("EFD_LOOP_SLEEP", raising=False)
    _herd_or_skip(backend)
    res = _hand_out(run_py, _UVLOOP_CHILD, backend)
    assert 8 <= res["wakes"] <= 16, json.dumps(res)


@pytest.mark.parametrize("backend", ["eventfd", "eventfd-readback"])
def test_trio_runs_on_the_kernel_counter_are_woken_one_per_unit(
        run_py, backend, monkeypatch):
    """As above, trio on the kernel counter: one run woken per unit (trio's
    wait_readable() on fileno() would wake all four every time)."""
    pytest.importorskip("trio")
    monkeypatch.delenv("EFD_LOOP_SLEEP", raising=False)
    _herd_or_skip(backend)
    res = _hand_out(run_py, _TRIO_CHILD, backend)
    assert 8 <= res["wakes"] + res["ready"], json.dumps(res)
    assert res["wakes"] <= 12, json.dumps(res)


# ---- interpreters (CPython 3.14+) --------------------------------------------

def _subinterpreters_loop(run_py, backend):
    """A loop in another interpreter waits on a Semaphore on `backend`
    (passed through a queue), and a release from the main interpreter's
    thread reaches it; then the interpreter's object is closed, and the
    main one's is used again.  What the loop's record watched, and how."""
    try:
        from concurrent import interpreters  # noqa: F401
    except ImportError:
        pytest.skip("no concurrent.interpreters (CPython 3.14+)")
    out = run_py(r"""
import json, os, select, threading
import efd
from concurrent import interpreters

sem = efd.Semaphore(0, backend=%r)
interp = interpreters.create()
queue = interpreters.create_queue()
queue.put(sem)
# The release comes once the loop sleeps (the interpreter says so through
# a pipe): a release on a timer could come first on a loaded machine, and
# the task would take the unit without sleeping at all.
sleeping_r, sleeping_w = os.pipe()
interp.prepare_main(queue=queue, sleeping_w=sleeping_w)

def release_once_asleep():
    select.select([sleeping_r], [], [], 30)
    sem.release()

threading.Thread(target=release_once_asleep).start()
interp.exec('''
import asyncio, os, efd
from efd import _aio
s = queue.get()

async def main():
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(s.acquire_async(timeout=20))
    ring = kind = None
    while not task.done():
        rec = _aio._registry.get((s._ev, loop))
        if rec is not None and rec.reading:
            ring = rec.ring
            kind = rec.sleeper.kind if rec.sleeper else None
            break
        await asyncio.sleep(0.001)
    os.write(sleeping_w, b"x")
    return ring, kind, await task

ring, kind, got = asyncio.run(main())
s.close()
queue.put((ring, kind, got))
''')
ring, kind, got = queue.get(timeout=10)
interp.close()
sem.release()
again = sem.acquire(timeout=5)
sem.close()
print(json.dumps({"ring": ring, "kind": kind, "got": got, "again": again}))
""" % backend, timeout=90)
    return json.loads(out.stdout.split("\n")[-2])


def test_a_subinterpreters_loop_sleeps_on_the_ring(run_py, mode):
    """A loop in another interpreter of the process waits on a futex
    object: it sleeps on the futex word through a sleeper of that
    interpreter's own (a helper, or a ring), and a release from the main
    interpreter's thread reaches it; closing the interpreter's object
    leaves the main one's working."""
    res = _subinterpreters_loop(run_py, "futex")
    assert res["got"] is True and res["again"] is True, res
    assert res["ring"] is _efd._probe()["loop_ring"], res


@pytest.mark.parametrize("backend", ["eventfd", "eventfd-readback"])
def test_a_subinterpreters_loop_on_the_kernel_counter(run_py, backend,
                                                      monkeypatch):
    """The same on the kernel counter: the interpreter's loop sleeps
    through a herd helper of that interpreter's own (efd_herd.c), which
    its close() stops while the main interpreter's object lives on."""
    monkeypatch.delenv("EFD_LOOP_SLEEP", raising=False)
    _herd_or_skip(backend)
    res = _subinterpreters_loop(run_py, backend)
    assert res["got"] is True and res["again"] is True, res
    assert res["ring"] is True and res["kind"] == "herd", res


@pytest.mark.parametrize("backend", ["futex", "eventfd", "eventfd-readback"])
def test_a_served_loop_rests_without_waking_its_helper(run_py, backend,
                                                       monkeypatch):
    """A loop's task waits, is handed a unit, and nobody of the loop waits
    any more: the loop rests.  Its helper woke for the release and went to
    wait for the loop's answer to its call; the rest() answers it without
    waking it (efd_loop.c, helper_rest_quietly), so the helper wakes once
    per such hand-off, not twice.  Twenty-one rounds, the median counted
    (a loaded machine can stretch one round past the helper's 100 ms wait
    for the answer).  Then a second loop waits as well: a release(2) of
    which this loop takes one unit leaves the other for it, passed on by
    this loop at its rest()."""
    monkeypatch.delenv("EFD_LOOP_SLEEP", raising=False)
    if backend == "futex":
        if not AVAILABLE["helper"]:
            pytest.skip("no death bell here: loops sleep through a ring")
    else:
        _herd_or_skip(backend)
    out = run_py(UNTIL_ASLEEP + textwrap.dedent(r"""
        import asyncio, json, os, statistics, threading
        import efd

        def helpers():
            # Voluntary switches of every thread but this one (the
            # loop's): the helper's, the only other thread.
            me, total = threading.get_native_id(), 0
            for tid in os.listdir("/proc/self/task"):
                if int(tid) == me:
                    continue
                with open("/proc/self/task/%%s/status" %% tid) as f:
                    for line in f:
                        if line.startswith("voluntary_ctxt_switches:"):
                            total += int(line.split()[1])
            return total

        async def other_loop(ev, box):
            box["got"] = await ev.acquire_async(timeout=30)

        async def main():
            ev = efd.EventFD(0, semaphore=True, backend=%r)
            rounds = []
            for _ in range(21):
                task = asyncio.ensure_future(ev.acquire_async(timeout=30))
                await until_asleep(ev)
                before = helpers()
                ev.release()
                assert await task
                await asyncio.sleep(0.005)  # a helper woken by rest() sleeps
                rounds.append(helpers() - before)
            box = {}
            o = threading.Thread(target=asyncio.run,
                                 args=(other_loop(ev, box),))
            o.start()
            await asyncio.sleep(0.2)        # the other loop's helper sleeps
            ev.release(2)
            assert await ev.acquire_async(timeout=10)
            o.join(30)
            ev.close()
            return {"rounds": rounds, "median": statistics.median(rounds),
                    "other_got": box.get("got")}

        print(json.dumps(asyncio.run(main())))
    """ % backend), timeout=120)
    res = json.loads(out.stdout.split("\n")[-2])
    assert res["other_got"] is True, res
    # Woken by the release, then asleep waiting for the answer: 1.  Woken
    # by rest() as well, and asleep again: 2.
    assert res["median"] <= 1, res


def test_a_quiet_rest_passes_on_a_call_for_units(run_py, monkeypatch):
    """A loop's helper sleeps for units on a futex object and a release
    chooses it; in the same turn of the loop, a readiness watcher starts
    (its sleep() asks the helper for readiness from now on) and the
    consumer is cancelled.  The loop rests right after it saw the call,
    which was for units: the wake-up goes on at once to a thread of
    another process blocked in acquire() -- not after the helper's 100 ms
    wait for an answer (adversary: 18 of 20 rounds at 100 ms when the
    pass-on went by how the loop's last sleep() waited).  Median of nine
    rounds."""
    monkeypatch.delenv("EFD_LOOP_SLEEP", raising=False)
    if not AVAILABLE["helper"]:
        pytest.skip("no death bell here: loops sleep through a ring")
    out = run_py(UNTIL_ASLEEP + textwrap.dedent(r"""
        import asyncio, json, os, statistics, time
        import efd
        from efd import _aio

        ev = efd.EventFD(0, semaphore=True, backend="futex")
        go_r, go_w = os.pipe()
        got_r, got_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            while os.read(go_r, 1) == b"w":
                got = ev.acquire(timeout=5)
                os.write(got_w, b"%d %.6f\n" % (got, time.monotonic()))
            os._exit(0)

        async def main():
            loop = asyncio.get_running_loop()
            answers = os.fdopen(got_r)
            delays = []
            for _ in range(9):
                consumer = asyncio.ensure_future(ev.acquire_async(timeout=10))
                await until_asleep(ev)
                os.write(go_w, b"w")        # the thread sleeps after the helper
                await asyncio.sleep(0.05)
                watcher = asyncio.ensure_future(_aio.wait(ev, 1.0, False))
                t0 = time.monotonic()
                ev.release()                # chooses the helper
                consumer.cancel()
                try:
                    await consumer
                except asyncio.CancelledError:
                    pass
                await watcher
                got, at = (await loop.run_in_executor(
                    None, answers.readline)).split()
                assert got == "1", "the other process's thread got nothing"
                delays.append((float(at) - t0) * 1000)
                await asyncio.sleep(0.15)   # the helper idles again
            return delays

        delays = asyncio.run(main())
        os.write(go_w, b"q")
        os.waitpid(pid, 0)
        ev.close()
        print(json.dumps({"median_ms": statistics.median(delays),
                          "delays_ms": delays}))
    """), timeout=120)
    res = json.loads(out.stdout.split("\n")[-2])
    assert res["median_ms"] < 50, res
