"""Signals while blocked (SPEC §4, PEP 475), each in a child interpreter.

- a handler that raises ends the wait with its exception, nothing consumed;
- a handler that returns lets the wait go on, and the timeout still ends on
  time (what is left of it, not restarted);
- Ctrl-C (SIGINT) interrupts a blocked acquire() with KeyboardInterrupt;
- efd.eventfd_read/eventfd_write retry EINTR, unlike os.eventfd_read.
"""

import os
import select
import signal
import time

import pytest

from conftest import kernel_eventfd_available

PRELUDE = """
import os, signal, sys, time
import efd
MAX = 2**64 - 2
BACKEND = {backend!r}
SEM = {semaphore!r}

def new(initval=0):
    ev = efd.EventFD(initval, semaphore=SEM)
    assert ev.backend == BACKEND, (ev.backend, BACKEND)
    return ev
"""


def child_code(body, backend, semaphore):
    return PRELUDE.format(backend=backend, semaphore=semaphore) + body


RAISING = """
class Boom(Exception):
    pass

def blocked(ev, method):
    if method == "acquire":
        return ev.acquire(timeout=20)
    if method == "read":
        return ev.read()
    return ev.write(1)

for method in ("acquire", "read", "write"):
    start = MAX if method == "write" else 0
    ev = new(start)

    def handler(signum, frame):
        if method != "write":
            ev.release(2)           # arrives with the exception: not taken
        raise Boom(method)

    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 0.2)
    t0 = time.monotonic()
    try:
        r = blocked(ev, method)
    except Boom:
        pass
    else:
        sys.exit("%s returned %r instead of raising" % (method, r))
    elapsed = time.monotonic() - t0
    assert 0.15 <= elapsed < 10, (method, elapsed)
    expect = MAX if method == "write" else 2
    assert ev._peek() == expect, (method, ev._peek())
    # The object is still usable after the interrupted wait.
    assert ev.acquire(timeout=5)
    ev.close()
print("ok")
"""


def test_raising_handler_ends_the_wait(run_py, backend, semaphore):
    out = run_py(child_code(RAISING, backend, semaphore), backend=backend)
    assert out.stdout.strip() == "ok"


RETURNING_TIMEOUT = """
calls = []
signal.signal(signal.SIGALRM, lambda signum, frame: calls.append(1))
ev = new()
signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)
t0 = time.monotonic()
r = ev.acquire(timeout=0.6)
elapsed = time.monotonic() - t0
signal.setitimer(signal.ITIMER_REAL, 0)
assert r is False, r
# Not restarted by each signal (that would never end), not cut short.
assert 0.6 <= elapsed < 3.0, elapsed
assert len(calls) >= 5, len(calls)
print("ok", len(calls))
"""


def test_returning_handler_keeps_the_deadline(run_py, backend, semaphore):
    out = run_py(child_code(RETURNING_TIMEOUT, backend, semaphore),
                 backend=backend)
    assert out.stdout.startswith("ok")


RETURNING_CONTINUES = """
for method in ("acquire", "read"):
    ev = new()
    calls = []

    def handler(signum, frame):
        calls.append(1)
        if len(calls) == 4:
            ev.release(3)            # the wait goes on, and now succeeds

    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)
    r = ev.acquire(timeout=20) if method == "acquire" else ev.read()
    signal.setitimer(signal.ITIMER_REAL, 0)
    assert len(calls) >= 4, calls
    if method == "acquire":
        assert r is True, r
    else:
        assert r == (1 if SEM else 3), r
    assert ev._peek() == (2 if SEM else 0), ev._peek()
    ev.close()
print("ok")
"""


def test_returning_handler_lets_the_wait_go_on(run_py, backend, semaphore):
    out = run_py(child_code(RETURNING_CONTINUES, backend, semaphore),
                 backend=backend)
    assert out.stdout.strip() == "ok"


CTRL_C = """
ev = new()
for method in ("acquire", "read"):
    print("ready", method, flush=True)
    try:
        ev.acquire() if method == "acquire" else ev.read()
    except KeyboardInterrupt:
        print("KeyboardInterrupt", ev._peek(), flush=True)
    else:
        print("returned", flush=True)
"""


class Lines:
    """Lines from a child's stdout, each waited for with a time limit
    (select on the raw descriptor, our own buffer)."""

    def __init__(self, proc):
        self.fd = proc.stdout.fileno()
        self.buf = b""

    def next(self, timeout):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.fd], [], [], max(0, left))
            assert ready, "child said nothing for %s s" % timeout
            chunk = os.read(self.fd, 4096)
            assert chunk, "child closed stdout; so far: %r" % self.buf
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode().strip()


def test_ctrl_c_interrupts_acquire(popen_py, backend):
    proc = popen_py(child_code(CTRL_C, backend, True), backend=backend,
                    limit=30)
    lines = Lines(proc)
    for method in ("acquire", "read"):
        assert lines.next(20) == "ready " + method
        time.sleep(0.3)             # let it block
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        assert lines.next(10) == "KeyboardInterrupt 0"
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err


BACKPORT_EINTR = """
fd = efd.eventfd(0)                  # a blocking descriptor
calls = []

def handler(signum, frame):
    calls.append(1)
    if len(calls) == 3:
        efd.eventfd_write(fd, 5)

signal.signal(signal.SIGALRM, handler)
signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)
value = efd.eventfd_read(fd)
signal.setitimer(signal.ITIMER_REAL, 0)
assert value == 5 and len(calls) >= 3, (value, calls)

# eventfd_write on a full counter waits through signals as well.
efd.eventfd_write(fd, MAX)
calls.clear()

def drain(signum, frame):
    calls.append(1)
    if len(calls) == 3:
        assert efd.eventfd_read(fd) == MAX

signal.signal(signal.SIGALRM, drain)
signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)
efd.eventfd_write(fd, 7)
signal.setitimer(signal.ITIMER_REAL, 0)
assert efd.eventfd_read(fd) == 7
assert len(calls) >= 3

# A raising handler still ends it.
class Boom(Exception):
    pass

def boom(signum, frame):
    raise Boom

signal.signal(signal.SIGALRM, boom)
signal.setitimer(signal.ITIMER_REAL, 0.1)
try:
    efd.eventfd_read(fd)
except Boom:
    pass
else:
    sys.exit("eventfd_read returned")

if hasattr(os, "eventfd_read"):
    # The standard library's version surfaces the signal instead.
    signal.signal(signal.SIGALRM, lambda signum, frame: None)
    signal.setitimer(signal.ITIMER_REAL, 0.1)
    try:
        os.eventfd_read(fd)
    except InterruptedError:
        print("os: InterruptedError")
    signal.setitimer(signal.ITIMER_REAL, 0)
print("ok")
"""


@pytest.mark.skipif(not kernel_eventfd_available(),
                    reason="efd.eventfd needs a kernel eventfd")
def test_backport_retries_eintr(run_py):
    out = run_py(child_code(BACKPORT_EINTR, "eventfd", False))
    lines = out.stdout.split()
    assert lines[-1] == "ok"
    if hasattr(os, "eventfd_read"):
        assert "InterruptedError" in out.stdout


_SET_DURING_HANDLER = '''
import signal, sys, threading, time
import efd

ROUNDS = 10

def once(ev):
    in_handler = threading.Event()
    toggled = threading.Event()
    t_set = []

    def handler(signum, frame):
        in_handler.set()
        toggled.wait(2)          # releases the GIL: the other thread runs

    def toggler():
        in_handler.wait(2)
        t_set.append(time.monotonic())
        ev.set(); ev.clear()
        toggled.set()

    signal.signal(signal.SIGUSR1, handler)
    th = threading.Thread(target=toggler)
    th.start()
    threading.Timer(0.05, lambda: signal.pthread_kill(
        threading.main_thread().ident, signal.SIGUSR1)).start()
    r = ev.wait(3)
    t1 = time.monotonic()
    th.join()
    return r, t1 - t_set[0]

ev = efd.Event(backend=BACKEND)
results = [once(ev) for _ in range(ROUNDS)]
ev.close()
assert all(r for r, _ in results), results
lat = sorted(dt for _, dt in results)
# Not a timing bound: the fault being caught makes every round wait for
# the 100 ms re-check; a shared machine may delay a few rounds.
assert lat[len(lat) // 2] < 0.05, lat
print("ok", ["%.1f" % (dt * 1e3) for dt in lat])
'''


def test_event_set_while_the_waiter_runs_a_handler(backend, run_py):
    """gh-57711 with a signal handler inside the wait: a set() (then clear())
    made while the waiter's handler runs wakes it at once, on every backend
    -- not at its next re-check (futex: the waiter was not counted, and its
    ticket predated the set)."""
    proc = run_py("BACKEND = %r\n" % backend + _SET_DURING_HANDLER, timeout=60)
    assert "ok" in proc.stdout
