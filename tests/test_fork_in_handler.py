"""A signal handler that re-enters an object while its own thread waits in it
(issue 17): it forks, closes the object, or calls it again.

The main thread waits in an object; a SIGALRM handler runs inside that wait
(PEP 475) and

- forks: in the child the interrupted wait resumes and must end as a wait
  of the child's own (take the unit the child's handler released, or time
  out), touching nothing the parent still uses; the parent's wait ends as
  if nothing happened.  The child used to die of SIGSEGV as soon as its
  handler touched the object (the fork bookkeeping freed the record of the
  very wait it returned into);
- closes the object: the wait ends with ValueError("... closed ..."), and
  the descriptors are gone once it has (the last user closes them);
- waits in the object again (a nested acquire), or releases into it.

Each case runs in a child interpreter (run_py): a failure may be a crash.
Every wait is bounded, and every fork child arms a watchdog of its own (the
interpreter's watchdog thread does not survive fork), and is killed by its
parent if it outlives it.
"""

import pytest

PRELUDE = """
import os, signal, sys, threading, time
import efd
BACKEND = {backend!r}
forked = {{}}


def watchdog(limit=8.0):
    # A fork child's own time limit.  Not faulthandler's: arming it again
    # in a child whose parent had it armed waits for the parent's watchdog
    # thread, which did not come along.
    def end():
        time.sleep(limit)
        os._exit(9)
    threading.Thread(target=end, daemon=True).start()


def fork_on_alarm(in_child=None, in_parent=None, after=0.1):
    # Fork from a SIGALRM handler, `after` seconds from now: that is, from
    # inside whatever wait the main thread is in by then.
    def handler(signum, frame):
        pid = os.fork()
        if pid == 0:
            watchdog()
            forked["child"] = True
            if in_child is not None:
                in_child()
        else:
            forked["pid"] = pid
            if in_parent is not None:
                in_parent()
    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, after)


def outcome(call):
    # What a wait ended with: its result, or the exception it raised.
    try:
        return call()
    except Exception as e:
        return "%s: %s" % (type(e).__name__, e)


def exit_code(status):
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) \\
        else os.WEXITSTATUS(status)


def reap(pid, limit=9.0):
    # The child's exit status; killed if it outlives `limit` (a child stuck
    # where its own watchdog cannot end it).
    deadline = time.monotonic() + limit
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            return os.waitpid(pid, 0)[1]
        time.sleep(0.01)


def finish(result, expect):
    # The fork child reports its wait's outcome and exits (0: as expected);
    # the parent reports its own and the child's exit code.
    if forked.get("child"):
        print("child", repr(result), flush=True)
        os._exit(0 if result == expect else 3)
    assert "pid" in forked, "the handler never ran"
    status = reap(forked["pid"])
    print("parent", repr(result), exit_code(status), flush=True)
"""


def program(body, backend):
    return PRELUDE.format(backend=backend) + body


def lines(out):
    return out.stdout.split("\n")[:-1]


# ---- a fork from a handler: the resumed wait in the child ----------------

# The child's handler touches the object (`touch`), then releases two
# units: one for the child's resumed wait, one for the parent's.
CHILD_RELEASES = """
ev = efd.EventFD(0, semaphore=True, backend=BACKEND)

def in_child():
    {touch}
    ev.release(2)

fork_on_alarm(in_child)
t0 = time.monotonic()
r = outcome(lambda: ev.acquire(timeout=2.0))
finish(r, True)
assert time.monotonic() - t0 < 1.5, time.monotonic() - t0
assert ev.acquire(False) is False       # both units taken, once each
ev.close()
print("done")
"""

TOUCHES = {
    "release": "pass",
    "peek": "ev._peek()",
    "try-acquire": "assert ev.acquire(False) is False",
    "fileno": "ev.fileno()",
}


@pytest.mark.parametrize("touch", sorted(TOUCHES))
def test_child_handler_releases_and_its_wait_takes_the_unit(
        run_py, backend, touch):
    out = run_py(program(CHILD_RELEASES.format(touch=TOUCHES[touch]),
                         backend), timeout=30, check=False)
    assert lines(out) == ["child True", "parent True 0", "done"], (
        out.returncode, out.stdout, out.stderr)
    assert out.returncode == 0, out.stderr


# The child's handler leaves the object alone (or only looks at it); the
# parent's handler releases two units.  The child's wait resumes with the
# parent's per-process state unless it renews its own.
PARENT_RELEASES = """
ev = efd.EventFD(0, semaphore=True, backend=BACKEND)

def in_child():
    {touch}

fork_on_alarm(in_child, in_parent=lambda: ev.release(2))
r = outcome(lambda: ev.acquire(timeout=2.0))
finish(r, True)
assert ev.acquire(False) is False
ev.close()
print("done")
"""


@pytest.mark.parametrize("touch", ["pass", "ev._peek()"])
def test_child_handler_leaves_it_alone_and_its_wait_goes_on(
        run_py, backend, touch):
    out = run_py(program(PARENT_RELEASES.format(touch=touch), backend),
                 timeout=30, check=False)
    assert lines(out) == ["child True", "parent True 0", "done"], (
        out.returncode, out.stdout, out.stderr)


# Nothing is released: both waits run out of time, the child's as a wait
# of its own (its close() afterwards closes its copies, nothing else).
NOTHING_RELEASED = """
ev = efd.EventFD(0, semaphore=True, backend=BACKEND)
fork_on_alarm(lambda: ev.acquire(False))
t0 = time.monotonic()
r = outcome(lambda: ev.acquire(timeout=0.5))
elapsed = time.monotonic() - t0
if forked.get("child"):
    ev.close()
    assert ev.closed
finish(r, False)
assert 0.5 <= elapsed < 2.0, elapsed
assert ev.acquire(False) is False
ev.close()
print("done")
"""


def test_child_wait_times_out(run_py, backend):
    out = run_py(program(NOTHING_RELEASED, backend), timeout=30, check=False)
    assert lines(out) == ["child False", "parent False 0", "done"], (
        out.returncode, out.stdout, out.stderr)


# The same for the drop-ins' waits and for a blocking read().
DROPINS = {
    "Semaphore.acquire": (
        "obj = efd.Semaphore(0, backend=BACKEND)\n"
        "wait = lambda: obj.acquire(timeout=2.0)\n"
        "give = lambda: obj.release(2)\n"
        "expect = True\n"),
    "Event.wait": (
        "obj = efd.Event(backend=BACKEND)\n"
        "wait = lambda: obj.wait(2.0)\n"
        "give = obj.set\n"
        "expect = True\n"),
    "EventFD.read": (
        "obj = efd.EventFD(0, semaphore=True, backend=BACKEND)\n"
        "wait = obj.read\n"
        "give = lambda: obj.release(2)\n"
        "expect = 1\n"),
}

DROPIN = """
{setup}
fork_on_alarm(give)
r = outcome(wait)
finish(r, expect)
print("done")
"""


@pytest.mark.parametrize("kind", sorted(DROPINS))
def test_dropin_waits_resume_in_the_child(run_py, backend, kind):
    out = run_py(program(DROPIN.format(setup=DROPINS[kind]), backend),
                 timeout=30, check=False)
    expect = "1" if kind == "EventFD.read" else "True"
    assert lines(out) == ["child " + expect, "parent %s 0" % expect,
                          "done"], (out.returncode, out.stdout, out.stderr)


# Two waits of the one thread, one inside the other's handler, when the
# inner one's handler forks: both resume in the child.
NESTED_FORK = """
ev = efd.EventFD(0, semaphore=True, backend=BACKEND)
inner = []

def handler(signum, frame):
    if not inner:
        inner.append(None)
        inner[0] = outcome(lambda: ev.acquire(timeout=2.5))
        return
    signal.setitimer(signal.ITIMER_REAL, 0)
    pid = os.fork()
    if pid == 0:
        watchdog()
        forked["child"] = True
    else:
        forked["pid"] = pid
    ev.release(2)           # each process: one for each of its two waits

signal.signal(signal.SIGALRM, handler)
signal.setitimer(signal.ITIMER_REAL, 0.1, 0.1)
r = outcome(lambda: ev.acquire(timeout=2.5))
finish((inner[0], r), (True, True))
assert ev.acquire(False) is False
ev.close()
print("done")
"""


def test_fork_inside_a_nested_wait(run_py, backend):
    out = run_py(program(NESTED_FORK, backend), timeout=30, check=False)
    assert lines(out) == ["child (True, True)", "parent (True, True) 0",
                          "done"], (out.returncode, out.stdout, out.stderr)


# ---- close() from a handler ----------------------------------------------

CLOSE_IN_HANDLER = """
def fds():
    return len(os.listdir("/proc/self/fd"))

before = fds()
ev = efd.EventFD(0, semaphore=True, backend=BACKEND)
signal.signal(signal.SIGALRM, lambda signum, frame: ev.close())
signal.setitimer(signal.ITIMER_REAL, 0.1)
t0 = time.monotonic()
r = outcome(lambda: ev.acquire(timeout=2.0))
elapsed = time.monotonic() - t0
assert "ValueError" in r and "closed" in r, r
assert elapsed < 1.0, elapsed
assert ev.closed
assert fds() == before, (fds(), before)     # the last user closed them
assert "ValueError" in outcome(lambda: ev.acquire(False))
print("ok")
"""


def test_handler_closes_the_object_mid_wait(run_py, backend):
    out = run_py(program(CLOSE_IN_HANDLER, backend), timeout=30, check=False)
    assert out.stdout == "ok\n", (out.returncode, out.stdout, out.stderr)


# The child's handler closes the object: the child's wait ends with
# ValueError, the parent's goes on (its handler releases a unit).
CHILD_CLOSES = """
ev = efd.EventFD(0, semaphore=True, backend=BACKEND)
fork_on_alarm(ev.close, in_parent=lambda: ev.release(1))
r = outcome(lambda: ev.acquire(timeout=2.0))
if forked.get("child"):
    ok = "ValueError" in r and "closed" in r and ev.closed
    r = "closed" if ok else r
finish(r, "closed")
print("done")
"""


def test_child_handler_closes_the_object(run_py, backend):
    out = run_py(program(CHILD_CLOSES, backend), timeout=30, check=False)
    assert lines(out) == ["child 'closed'", "parent True 0", "done"], (
        out.returncode, out.stdout, out.stderr)


# The parent's handler closes the object after forking: its wait ends at
# once, with its own wake-up (the child's wait, asleep meanwhile, must not
# share -- and drain -- the parent's wake channel); the child's goes on.
PARENT_CLOSES = """
obj = efd.Event(backend=BACKEND)

def in_parent():
    time.sleep(0.3)                 # the child's wait is asleep again
    obj.close()

fork_on_alarm(in_parent=in_parent)
t0 = time.monotonic()
r = outcome(lambda: obj.wait(1.5))
elapsed = time.monotonic() - t0
if not forked.get("child") and "closed" in str(r):
    r = "closed" if elapsed < 1.0 else "closed late: %.2f s" % elapsed
finish(r, False)
print("done")
"""


def test_parent_handler_closes_the_object(run_py, backend):
    out = run_py(program(PARENT_CLOSES, backend), timeout=30, check=False)
    assert lines(out) == ["child False", "parent 'closed' 0", "done"], (
        out.returncode, out.stdout, out.stderr)


# ---- re-entry without fork ------------------------------------------------

NESTED_ACQUIRE = """
ev = efd.EventFD(0, semaphore=True, backend=BACKEND)
inner = []

def handler(signum, frame):
    inner.append(outcome(lambda: ev.acquire(timeout=0.2)))   # nothing yet
    ev.release(2)
    inner.append(outcome(lambda: ev.acquire(timeout=1.0)))   # takes one

signal.signal(signal.SIGALRM, handler)
signal.setitimer(signal.ITIMER_REAL, 0.1)
r = outcome(lambda: ev.acquire(timeout=2.0))
assert inner == [False, True], inner
assert r is True, r                     # the other unit
assert ev.acquire(False) is False
before = len(os.listdir("/proc/self/fd"))
ev.close()
assert len(os.listdir("/proc/self/fd")) < before
print("ok")
"""


def test_nested_acquire_in_a_handler(run_py, backend):
    out = run_py(program(NESTED_ACQUIRE, backend), timeout=30, check=False)
    assert out.stdout == "ok\n", (out.returncode, out.stdout, out.stderr)
