"""Async waiting when another thread closes the object, or the process forks
(issue 9, items 4 and 5).

* ``close()`` from another thread while a loop in a thread waits, with the
  descriptor kept open elsewhere (a ``dup`` or a forked child): the loop
  must drop its reader *before* the number is closed, or epoll keeps the
  registration and the loop spins at 100% CPU once the other holder makes
  the counter readable.
* A forked child inherits no registry: closing its copy must not remove the
  parent's reader from the epoll set the two processes share.

Each scenario runs in a child interpreter with a watchdog (``run_py``): a
hang or a spin fails with a traceback instead of stalling the run.
"""
import pytest

from conftest import backend_unavailable

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is in the test extras
    uvloop = None


@pytest.fixture(params=["asyncio", "uvloop"])
def loop_kind(request):
    if request.param == "uvloop" and uvloop is None:
        pytest.skip("uvloop is not installed")
    return request.param


_PRELUDE = """
import asyncio, os, sys, threading, time, warnings
import efd
from efd import _aio
LOOP = %r
def new_loop():
    if LOOP == "uvloop":
        import uvloop
        return uvloop.new_event_loop()
    return asyncio.new_event_loop()
def run(coro):
    loop = new_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()
def registered(ev):
    return any(k[0] is ev for k in _aio._registry)
def wait_for(predicate, limit=10):
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.001)
"""


@pytest.mark.parametrize("holder", ["dup", "fork"])
def test_close_from_another_thread_leaves_loop_idle(backend, loop_kind,
                                                    holder, run_py):
    # The loop thread waits; the main thread closes while another holder (a
    # dup, or a forked child) keeps the counter open, and that holder then
    # makes it readable.  The waiter gets ValueError and the loop thread
    # then sleeps half a second: its CPU time over that half second must
    # stay small (a stale epoll registration makes it spin all the time).
    code = _PRELUDE % loop_kind + """
ev = efd.EventFD(0, semaphore=True, backend=%(backend)r)
out = {}

def loop_thread():
    async def main():
        try:
            await ev.acquire_async(timeout=20)
        except ValueError as exc:
            out["error"] = exc
        out["waited"] = True
        t0 = time.thread_time()
        await asyncio.sleep(0.5)
        out["cpu"] = time.thread_time() - t0
    run(main())

if %(holder)r == "dup":
    fds = tuple(os.dup(fd) for fd in ev._fds())
    other = efd.EventFD._from_fds(fds, ev.backend, True, True)
    make_readable = lambda: other.release(3)
    child = None
else:
    go_r, go_w = os.pipe()
    child = os.fork()
    if child == 0:
        # Keep the inherited copy open; make it readable when told.
        os.read(go_r, 1)
        ev.release(3)
        time.sleep(2)
        os._exit(0)
    make_readable = lambda: os.write(go_w, b"x")

thread = threading.Thread(target=loop_thread)
thread.start()
wait_for(lambda: registered(ev))
time.sleep(0.05)
with warnings.catch_warnings():
    warnings.simplefilter("error")          # close() must not need its bound
    ev.close()
make_readable()
thread.join(15)
assert not thread.is_alive()
assert isinstance(out.get("error"), ValueError), out
assert "closed" in str(out["error"])
assert out["cpu"] < 0.15, "loop thread spun: %%.3f s of CPU in 0.5 s" %% out["cpu"]
assert not _aio._registry
if child:
    os.waitpid(child, 0)
print("ok", round(out["cpu"], 4))
""" % {"backend": backend, "holder": holder}
    proc = run_py(code, timeout=60)
    assert proc.stdout.startswith("ok"), proc.stdout + proc.stderr


def test_close_from_another_thread_many_loops(backend, run_py):
    # Several loops in several threads, consumers and watchers: every loop
    # drops its reader, every task gets ValueError, none is left behind.
    code = _PRELUDE % "asyncio" + """
ev = efd.EventFD(0, semaphore=True, backend=%(backend)r)
event = efd.Event(backend=%(backend)r)
results = []
lock = threading.Lock()

def loop_thread():
    async def main():
        tasks = [asyncio.ensure_future(ev.acquire_async()) for _ in range(5)]
        tasks += [asyncio.ensure_future(ev.read_async()) for _ in range(2)]
        tasks += [asyncio.ensure_future(event.wait_async(20)) for _ in range(3)]
        got = await asyncio.gather(*tasks, return_exceptions=True)
        with lock:
            results.extend(got)
    run(main())

threads = [threading.Thread(target=loop_thread) for _ in range(4)]
for t in threads:
    t.start()
wait_for(lambda: len([k for k in _aio._registry if k[0] in (ev, event._ev)]) == 8)
time.sleep(0.05)
t0 = time.monotonic()
ev.close()
event.close()
took = time.monotonic() - t0
for t in threads:
    t.join(15)
assert not any(t.is_alive() for t in threads)
assert len(results) == 40, results
assert all(isinstance(r, ValueError) for r in results), results
assert not _aio._registry
assert took < 2, took
print("ok")
""" % {"backend": backend}
    proc = run_py(code, timeout=60)
    assert proc.stdout.startswith("ok"), proc.stdout + proc.stderr


def test_close_does_not_wait_for_ever_on_a_stuck_loop(backend, run_py):
    # A loop whose thread is stuck in synchronous code cannot drop its
    # reader: close() waits CLOSE_WAIT seconds for it, warns, and closes;
    # the stuck loop's waiter still gets ValueError once it runs again.
    code = _PRELUDE % "asyncio" + """
_aio.CLOSE_WAIT = 0.3
ev = efd.EventFD(0, semaphore=True, backend=%(backend)r)
stuck = threading.Event()
out = {}

def loop_thread():
    async def main():
        task = asyncio.ensure_future(ev.acquire_async())
        await asyncio.sleep(0.02)
        stuck.set()
        time.sleep(1.0)                      # blocks the loop
        try:
            await asyncio.wait_for(task, 5)
        except ValueError as exc:
            out["error"] = exc
    run(main())

thread = threading.Thread(target=loop_thread)
thread.start()
stuck.wait(10)
t0 = time.monotonic()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ev.close()
took = time.monotonic() - t0
thread.join(15)
assert not thread.is_alive()
assert 0.25 <= took < 0.9, took
assert any(issubclass(w.category, RuntimeWarning) and "did not stop" in str(w.message)
           for w in caught), [str(w.message) for w in caught]
assert isinstance(out.get("error"), ValueError), out
assert not _aio._registry
print("ok")
""" % {"backend": backend}
    proc = run_py(code, timeout=60)
    assert proc.stdout.startswith("ok"), proc.stdout + proc.stderr


def test_fork_child_does_not_disturb_parent_waiter(backend, loop_kind, run_py):
    # The parent has a waiter registered on a loop that is not running at
    # fork time; the child closes its inherited object.  The child must not
    # touch the (shared) epoll set: the parent's waiter still gets the
    # release.
    code = _PRELUDE % loop_kind + """
ev = efd.EventFD(0, semaphore=True, backend=%(backend)r)
loop = new_loop()
task = loop.create_task(ev.acquire_async(timeout=5))
loop.run_until_complete(asyncio.sleep(0.02))
assert registered(ev) and not task.done()
pid = os.fork()
if pid == 0:
    inherited = dict(_aio._registry)
    ev.close()
    os._exit(0 if not inherited else 3)
_, status = os.waitpid(pid, 0)
assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
ev.release()
assert loop.run_until_complete(asyncio.wait_for(task, 10)) is True
assert not registered(ev)
loop.close()
ev.close()
print("ok")
""" % {"backend": backend}
    proc = run_py(code, timeout=60)
    assert proc.stdout.startswith("ok"), proc.stdout + proc.stderr


def test_fork_child_can_wait_on_its_own(backend, loop_kind, run_py):
    # The child starts clean: it can run its own loop and wait on the same
    # counter, while the parent's registration stays untouched.
    code = _PRELUDE % loop_kind + """
ev = efd.EventFD(0, semaphore=True, backend=%(backend)r)
loop = new_loop()
task = loop.create_task(ev.acquire_async(timeout=10))
loop.run_until_complete(asyncio.sleep(0.02))
pid = os.fork()
if pid == 0:
    ok = not _aio._registry and run(ev.acquire_async(timeout=10))
    os._exit(0 if ok and not _aio._registry else 3)
ev.release(2)
_, status = os.waitpid(pid, 0)
assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
assert loop.run_until_complete(asyncio.wait_for(task, 10)) is True
loop.close()
ev.close()
print("ok")
""" % {"backend": backend}
    proc = run_py(code, timeout=60)
    assert proc.stdout.startswith("ok"), proc.stdout + proc.stderr


def test_closing_refuses_new_waits(backend, run_py):
    # While close() waits for a busy loop to drop its reader, a task of
    # another loop that starts waiting must be refused (it would register a
    # reader for a descriptor about to go), not left registered.
    if backend_unavailable(backend, semaphore=True):
        pytest.skip(backend_unavailable(backend, semaphore=True))
    code = _PRELUDE % "asyncio" + """
ev = efd.EventFD(0, semaphore=True, backend=%(backend)r)
out = {}
started = threading.Event()

def busy_loop_thread():
    async def main():
        first = asyncio.ensure_future(ev.acquire_async())
        await asyncio.sleep(0.02)
        started.set()
        time.sleep(0.5)          # close() waits for this loop meanwhile
        try:
            await first
        except ValueError as exc:
            out["first"] = exc
    run(main())

def latecomer_thread():
    time.sleep(0.15)             # close() is under way by now
    try:
        run(ev.acquire_async(timeout=5))
    except ValueError as exc:
        out["late"] = exc

busy = threading.Thread(target=busy_loop_thread)
busy.start()
started.wait(10)
late = threading.Thread(target=latecomer_thread)
late.start()
t0 = time.monotonic()
ev.close()
took = time.monotonic() - t0
busy.join(15)
late.join(15)
assert not busy.is_alive() and not late.is_alive()
assert 0.3 < took < 0.9, took             # waited for the busy loop
assert isinstance(out.get("late"), ValueError), out
assert isinstance(out.get("first"), ValueError), out
assert not _aio._registry
print("ok")
""" % {"backend": backend}
    proc = run_py(code, timeout=60)
    assert proc.stdout.startswith("ok"), proc.stdout + proc.stderr
