"""The descriptor changed by someone else, eventfd-readback's held units, and
the smaller items of issue 9 (items 6, 8 and group 9; SPEC §5).

* A descriptor whose O_NONBLOCK another holder cleared never freezes the
  process: timeouts hold, acquire(False) and release() return at once, and
  other threads keep running.
* eventfd-readback's "held" units (a semaphore read took the count c and
  could not write c - 1 back) are this process's alone: a fork()ed child
  neither sees nor writes them back, and close() neither drops them silently
  nor retries with the GIL held.  A seccomp filter that fails write() on the
  object's own descriptor with EAGAIN (a counter that stays full for it)
  makes such units exist deterministically.
* Keyword names with a NUL, huge Fraction timeouts, and from_fd() of a
  normal-mode eventfd as a semaphore.
"""
import shutil
import subprocess
import sys

import pytest
import efd

from conftest import (backend_unavailable, child_env, child_source,
                      sleeps_on_futex)
from _faults import child_code, expect_ok, supported

needs_seccomp = pytest.mark.skipif(not supported()[0], reason=supported()[1])


_BLOCKING = '''
    ev = efd.EventFD(0, semaphore=True, backend=BACKEND)
    for fd in ev._fds():
        os.set_blocking(fd, True)          # another holder's doing

    HEART = Heartbeat()
    r, dt = others_run("acquire(False)", ev.acquire, False)
    check(r is False and dt < SLACK, "acquire(False) gave %r after %.2f s"
          % (r, dt))
    r, dt = others_run("acquire(timeout=0.2)", lambda: ev.acquire(timeout=0.2))
    check(r is False and 0.19 <= dt < 0.2 + SLACK,
          "acquire(timeout=0.2) gave %r after %.2f s" % (r, dt))

    # Still a working semaphore.
    ev.release(2)
    r, dt = timed(lambda: [ev.acquire(timeout=1), ev.acquire(False)])
    check(r == [True, True] and dt < SLACK, "after release(2): %r" % (r,))
    t2, box = in_thread(ev.acquire, 5)
    time.sleep(0.05)
    ev.release()
    t2.join(SLACK)
    check(box.get("result") is True, "a waiter missed a release: %r" % box)

    # A release that would pass the maximum raises at once (never blocks).
    ev.release(MAX)
    def too_much():
        try:
            ev.release(5)
        except ValueError:
            return "ValueError"
    r, dt = others_run("release(5) on a full counter", too_much)
    check(r == "ValueError" and dt < SLACK,
          "release(5) past the maximum gave %r after %.2f s" % (r, dt))

    # A non-blocking object's write() and read() raise BlockingIOError.
    def bounded(what, fn):
        t, box = in_thread(fn)
        t.join(SLACK)
        check(not t.is_alive(), "%s on a descriptor made blocking: still "
                                "blocked after %.1f s" % (what, SLACK))
        check(isinstance(box.get("error"), BlockingIOError),
              "%s: %r, not BlockingIOError" % (what, box))
    nb = twin(ev, nonblocking=True)           # the counter is full
    for fd in nb._fds():                      # (adopting set O_NONBLOCK)
        os.set_blocking(fd, True)
    bounded("non-blocking write() on a full counter", nb.write)
    empty = efd.EventFD(0, nonblocking=True, backend=BACKEND)
    for fd in empty._fds():
        os.set_blocking(fd, True)
    bounded("non-blocking read() on an empty counter", empty.read)
    print("ok")
'''

_BLOCKING_EVENT = '''
    e = efd.Event(backend=BACKEND)
    for fd in e._ev._fds():
        os.set_blocking(fd, True)
    HEART = Heartbeat()
    r, dt = others_run("Event.wait(0.2)", e.wait, 0.2)
    check(r is False and dt < 0.2 + SLACK,
          "Event.wait(0.2) gave %r after %.2f s" % (r, dt))
    r, dt = others_run("is_set()", e.is_set)
    check(r is False and dt < SLACK, "is_set() gave %r" % r)
    e.set()
    r, dt = others_run("clear()", e.clear)
    check(dt < SLACK and not e.is_set(), "clear() took %.2f s" % dt)
    r, dt = others_run("clear() of a clear flag", e.clear)
    check(dt < SLACK, "clear() of a clear flag took %.2f s" % dt)
    r, dt = others_run("wait(0.1) after set()",
                       lambda: (e.set(), e.wait(0.1))[1])
    check(r is True and dt < SLACK, "set() then wait(0.1) gave %r" % r)
    print("ok")
'''


def test_descriptor_made_blocking(backend, run_py):
    """Issue 9 item 6: O_NONBLOCK cleared by another holder never freezes a call or the threads."""
    proc = run_py(child_code(_BLOCKING), backend=backend, timeout=30)
    assert "ok" in proc.stdout


def test_event_on_descriptor_made_blocking(backend, run_py):
    """Issue 9 item 6: Event.wait/clear on a descriptor made blocking keep their time."""
    proc = run_py(child_code(_BLOCKING_EVENT), backend=backend, timeout=30)
    assert "ok" in proc.stdout


_BLOCKING_ELSEWHERE = '''
    # The description made blocking by a holder efd's own process never
    # handed it to: a fork child (which reaches it through its copy of the
    # object), and a program that inherited it (cloexec=False).
    ev = efd.EventFD(0, semaphore=True, backend=BACKEND)
    assert ev.acquire(False) is False          # the owned fast path, warm
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        for fd in ev._fds():
            os.set_blocking(fd, True)           # the child's doing
        os.write(w, b"x")
        os._exit(0)
    os.read(r, 1)
    os.waitpid(pid, 0)
    HEART = Heartbeat()
    got, dt = others_run("acquire(False) after a child's change",
                         ev.acquire, False)
    check(got is False and dt < SLACK,
          "acquire(False) gave %r after %.2f s" % (got, dt))
    got, dt = others_run("acquire(timeout=0.2) after a child's change",
                         lambda: ev.acquire(timeout=0.2))
    check(got is False and 0.19 <= dt < 0.2 + SLACK,
          "acquire(timeout=0.2) gave %r after %.2f s" % (got, dt))

    inh = efd.EventFD(0, semaphore=True, backend=BACKEND, cloexec=False)
    code = ("import os, sys; os.set_blocking(int(sys.argv[1]), True)")
    subprocess.run([sys.executable, "-c", code, str(inh._fds()[0])],
                   pass_fds=[inh._fds()[0]], check=True)
    got, dt = others_run("acquire(False) on an inheritable descriptor",
                         inh.acquire, False)
    check(got is False and dt < SLACK,
          "acquire(False) gave %r after %.2f s" % (got, dt))
    print("ok")
'''


_FULL_CHANNEL = '''
    # A holder of the handle (the same open file description) makes the
    # readiness pipe's write end blocking and fills the pipe: a release
    # that puts the token must not sleep in write(), where it would hold
    # the GIL and the sync lock for ever (found by review: it did).
    ev = efd.EventFD(0, semaphore=True, backend=BACKEND)
    ev.fileno()                         # futex: keep the pipe in step now
    wfd = ev._fds()[-1]                 # the pipe's write end
    os.set_blocking(wfd, False)
    for size in (4096, 1):
        try:
            while True:
                os.write(wfd, b"z" * size)
        except BlockingIOError:
            pass
    os.set_blocking(wfd, True)          # another holder's doing
    HEART = Heartbeat()
    got, dt = others_run("release() onto a full pipe made blocking",
                         ev.release)
    check(dt < SLACK, "release() took %.2f s" % dt)
    check(ev.acquire(False) is True, "the released unit is not there")
    print("ok")
'''


def test_a_full_channel_made_blocking_never_freezes_a_release(backend,
                                                              run_py):
    """SPEC 5: a descriptor whose O_NONBLOCK someone else cleared never
    freezes the process -- also the memory backends' readiness pipe, which
    a peer holding the handle can fill."""
    if backend not in ("pipe", "futex"):
        pytest.skip("only the memory backends put a token in a pipe")
    proc = run_py(child_code(_FULL_CHANNEL), backend=backend, timeout=30)
    assert "ok" in proc.stdout


def test_descriptor_made_blocking_by_a_fork_child_or_an_heir(backend, run_py):
    """A plain read() is only used while no one else can reach the open file
    description: a fork child or a program that inherited the descriptor
    may clear O_NONBLOCK, and acquire(False) must still return at once."""
    if backend not in ("eventfd", "eventfd-readback"):
        pytest.skip("only a kernel eventfd's description is shared this way")
    proc = run_py(child_code("    import subprocess\n" + _BLOCKING_ELSEWHERE),
                  backend=backend, timeout=30)
    assert "ok" in proc.stdout


def test_descriptor_closed_behind_waiters_back(backend, run_py):
    """os.close(fileno()) under sleeping waiters: each that sleeps on the
    descriptor ends with EBADF within a bound, not at its timeout.  The
    futex backend's sleepers, where its death bell works, sleep on the
    shared page and never look at the descriptor (SPEC 6, idle cost: no
    periodic looks): closing it does not end their wait, and they take the
    units released after."""
    bell = sleeps_on_futex(backend) and efd._efd._probe()["death_bell"]
    proc = run_py(child_code('''
        import threading
        ev = efd.EventFD(0, semaphore=True, backend=BACKEND)
        fd = ev.fileno()
        results = []
        def waiter():
            t0 = time.monotonic()
            try:
                results.append((ev.acquire(timeout=20), time.monotonic() - t0))
            except OSError as exc:
                results.append((exc.errno, time.monotonic() - t0))
        threads = [threading.Thread(target=waiter) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.3)                 # all four asleep
        os.close(fd)                    # someone else's doing
        if BELL:
            time.sleep(0.3)
            check(not results, "a waiter ended: %r" % results)
            ev.release(4)
        for t in threads:
            t.join(20 + SLACK)
        check(len(results) == 4, "waiters left: %r" % results)
        for r, dt in results:
            if BELL:
                check(r is True and dt < 0.6 + SLACK,
                      "a waiter ended with %r after %.2f s" % (r, dt))
            else:
                check(r == errno.EBADF and dt < 0.3 + SLACK,
                      "a waiter ended with %r after %.2f s" % (r, dt))
        if BELL:
            check(ev._peek() == 0, "count %r left" % ev._peek())
        print("ok")
    '''.replace("BELL", repr(bell))), backend=backend, timeout=60)
    assert "ok" in proc.stdout


# --- eventfd-readback's held units -------------------------------------------

_HELD = '''
    import _faults, warnings
    ev = efd.EventFD(3, semaphore=True, backend="eventfd-readback")
    view = twin(ev)                  # another descriptor, still writable
    _faults.install(write_fd=ev.fileno())

    # The semaphore read takes 3 and cannot write 2 back: 2 held units.
    check(ev.acquire(False) is True, "no unit at all")
    check(view._peek() == 0, "kernel count %r, expected 0" % view._peek())
    check(ev._peek() == 2, "ev._peek() = %r: the held units are not counted"
          % ev._peek())

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        # The child must not own the parent's held units: nothing to take,
        # nothing to write back.
        try:
            took = [ev.acquire(False) for _ in range(3)]
            peek = ev._peek()
            ev.close()
            os.write(w, ("%s %s" % (sum(took), peek)).encode())
        finally:
            os._exit(0)
    os.close(w)
    ready = select.select([r], [], [], 10)[0]
    check(ready, "the forked child did not answer")
    answer = os.read(r, 100).decode()
    os.waitpid(pid, 0)
    took, peek = answer.split()
    check(took == "0" and peek == "0",
          "a fork()ed child took %s unit(s) of its parent's held ones and "
          "counted %s (duplicated units)" % (took, peek))
    check(view._peek() == 0, "kernel count %r after the child" % view._peek())
    check([ev.acquire(False), ev.acquire(False), ev.acquire(False)]
          == [True, True, False], "the parent lost its held units")
    print("ok")
'''

_HELD_CLOSE = '''
    import _faults, warnings
    ev = efd.EventFD(3, semaphore=True, backend="eventfd-readback")
    view = twin(ev)
    _faults.install(write_fd=ev.fileno())
    check(ev.acquire(False) is True and ev._peek() == 2, "no held units")

    HEART = Heartbeat()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        HEART.reset()
        _, dt = timed(ev.close)
        gap = HEART.gap
    check(dt < 5, "close() took %.2f s" % dt)
    check(gap < 0.2, "close() kept every other thread stopped for %.2f s "
                     "(retrying the write-back with the GIL held)" % gap)
    reached = view._peek()
    check(reached == 2 or caught,
          "close() dropped 2 held units silently (kernel count %r, no "
          "warning)" % reached)
    print("ok", dt, gap, reached, [str(w.message) for w in caught])
'''


@needs_seccomp
@pytest.mark.skipif(bool(backend_unavailable("eventfd-readback")),
                    reason="no kernel eventfd here")
def test_readback_held_units_and_fork(run_py):
    """Issue 9 item 8: a fork()ed child neither takes nor writes back readback's held units."""
    proc = run_py(child_code(_HELD), timeout=30, check=False)
    expect_ok(proc)


@needs_seccomp
@pytest.mark.skipif(bool(backend_unavailable("eventfd-readback")),
                    reason="no kernel eventfd here")
def test_readback_close_with_held_units(run_py):
    """Issue 9 item 8: close() with held units keeps the GIL free and never drops them silently."""
    proc = run_py(child_code(_HELD_CLOSE), timeout=30, check=False)
    expect_ok(proc)


# --- group 9 -------------------------------------------------------------------


@pytest.mark.parametrize("call", [
    "ev.acquire(**{'timeout\\0': 0})",
    "ev.acquire(**{'blocking\\0': False})",
    "ev.release(**{'n\\0': 1})",
    "ev.write(**{'value\\0': 1})",
    "ev._wait_readable(**{'timeout\\0': 0})",
    "efd.eventfd(**{'initval\\0': 0})",
])
def test_keyword_with_nul_is_rejected(call, run_py):
    """Issue 9 item 9: a keyword name with a NUL is an unexpected keyword (no read past it)."""
    code = """
        import efd
        ev = efd.EventFD(1)
        try:
            %s
        except TypeError as exc:
            assert "unexpected keyword" in str(exc), exc
            print("TypeError")
        else:
            raise AssertionError("accepted: %s")
    """ % (call, call.replace("'", ""))
    proc = run_py(code, timeout=30)
    assert "TypeError" in proc.stdout


def test_huge_fraction_timeout_means_no_limit(backend, run_py):
    """Issue 9 item 9: timeout Fraction(10**400) waits without limit; Fraction(-10**400) is negative."""
    code = child_code('''
        from fractions import Fraction
        ev = efd.EventFD(0, semaphore=True, backend=BACKEND)
        t, box = in_thread(lambda: ev.acquire(timeout=Fraction(10**400)))
        time.sleep(0.2)
        check(t.is_alive(), "acquire(timeout=Fraction(10**400)) did not "
                            "wait: %r" % box)
        ev.release()
        t.join(SLACK)
        check(box.get("result") is True, "then got %r" % box)
        try:
            ev.acquire(timeout=Fraction(-10**400))
        except ValueError as exc:
            check("non-negative" in str(exc), repr(exc))
        else:
            fail("Fraction(-10**400) accepted")
        print("ok")
    ''')
    proc = run_py(code, backend=backend, timeout=30)
    assert "ok" in proc.stdout


@pytest.mark.skipif(bool(backend_unavailable("eventfd")),
                    reason="no kernel eventfd here")
def test_from_fd_normal_mode_as_semaphore(run_py):
    """Issue 9 item 9: from_fd(semaphore=True) of a normal-mode eventfd uses eventfd-readback."""
    code = """
        import efd, os
        fd = efd.eventfd(5)
        ev = efd.EventFD.from_fd(fd, semaphore=True)
        assert ev.backend == "eventfd-readback", ev.backend
        assert ev.read() == 1 and ev._peek() == 4, ev._peek()
        ev.close()
        print("ok")
    """
    assert "ok" in run_py(code, timeout=30).stdout


_NO_SEMAPHORE_LINE = '''
import ctypes, os, sys, tempfile
sys.path.insert(0, %(repo)r)
import efd
fd = efd.eventfd(5, efd.EFD_CLOEXEC)
with open("/proc/self/fdinfo/%%d" %% fd) as f:
    info = f.read()
# This process's fdinfo directory, replaced by one whose entry for fd lacks
# the eventfd-semaphore line (as kernels before 4.x print it).
fake = tempfile.mkdtemp()
with open(os.path.join(fake, str(fd)), "w") as f:
    f.write("".join(line + "\\n" for line in info.splitlines()
                    if not line.startswith("eventfd-semaphore")))
libc = ctypes.CDLL(None, use_errno=True)
target = "/proc/%%d/fdinfo" %% os.getpid()
MS_BIND = 4096
if libc.mount(fake.encode(), target.encode(), None, MS_BIND, None) != 0:
    sys.stderr.write("cannot bind-mount over fdinfo: %%s\\n"
                     %% os.strerror(ctypes.get_errno()))
    sys.exit(77)
with open("/proc/self/fdinfo/%%d" %% fd) as f:
    shown = f.read()
assert "eventfd-count" in shown and "eventfd-semaphore" not in shown, shown
ev = efd.EventFD.from_fd(fd, semaphore=True)
assert ev.backend == "eventfd-readback", ev.backend
assert ev.read() == 1, "read() took the whole count"
assert ev.read() == 1
print("ok")
'''


@pytest.mark.skipif(bool(backend_unavailable("eventfd")),
                    reason="no kernel eventfd here")
@pytest.mark.skipif(shutil.which("unshare") is None, reason="no unshare(1)")
def test_from_fd_semaphore_without_fdinfo_mode():
    """Issue 9 item 9: from_fd(semaphore=True), fdinfo silent on the mode (faked), uses readback."""
    from conftest import REPO
    code = child_source(_NO_SEMAPHORE_LINE % {"repo": REPO}, 25)
    try:
        proc = subprocess.run(
            ["unshare", "-Urm", sys.executable, "-c", code],
            env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            universal_newlines=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("the child hung")
    if proc.returncode == 77 or (proc.returncode != 0
                                 and proc.stderr.startswith("unshare")):
        pytest.skip("no user namespace here: %s" % proc.stderr.strip()[-200:])
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr
