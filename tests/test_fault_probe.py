"""The probe under every errno (issue 9, item 7; SPEC §5 "Probe").

Any errno from ``eventfd2`` other than EMFILE, ENFILE and ENOMEM selects the
next backend (EINVAL with EFD_SEMAPHORE only -> eventfd-readback; otherwise
-> pipe), and the backend chosen works fully, blocking waits included, and
``python -m efd`` says so.  EMFILE/ENFILE/ENOMEM raise and are never cached.
A forced backend needs no probe: under a filter that kills the process on
any eventfd call, ``backend="pipe"`` must still work.

Each scenario runs in a fresh interpreter that installs a seccomp filter
(tests/_faults.py) before it imports efd; the pytest process is never
filtered.
"""
import errno
import signal

import pytest

from conftest import BACKENDS, KERNEL_BACKENDS, backend_unavailable
from _faults import child_code, expect_ok, supported

pytestmark = [
    pytest.mark.skipif(not supported()[0], reason=supported()[1]),
    pytest.mark.skipif(bool(backend_unavailable("eventfd")),
                       reason="no kernel eventfd to refuse here"),
]

#: Blocking waits of every kind on `ev` (a semaphore) and `e` (an Event),
#: with a release/set from another thread; then `python -m efd`.
_WORKS = '''
    def blocking_waits(ev, e):
        r, dt = timed(ev.acquire, timeout=0.2)
        check(r is False and 0.19 <= dt < 0.2 + SLACK,
              "%s: acquire(timeout=0.2) gave %r after %.2f s"
              % (ev.backend, r, dt))
        for wait in (ev.acquire, lambda: ev.acquire(timeout=5), ev.read):
            t, box = in_thread(wait)
            time.sleep(0.05)
            ev.release()
            t.join(SLACK)
            check(box.get("result") in (True, 1),
                  "%s: a blocked waiter missed release(): %r"
                  % (ev.backend, box))
        r, dt = timed(e.wait, 0.1)
        check(r is False, "%s: Event.wait(0.1) gave %r" % (e._ev.backend, r))
        t, box = in_thread(e.wait, 5)
        time.sleep(0.05)
        e.set()
        t.join(SLACK)
        check(box.get("result") is True, "%s: Event.wait() missed set(): %r"
              % (e._ev.backend, box))
        e.clear()

    def self_check():
        import subprocess
        proc = subprocess.run([sys.executable, "-m", "efd"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True, timeout=60)
        check(proc.returncode == 0, "python -m efd failed (%d):\\n%s"
              % (proc.returncode, proc.stdout))
'''

_REFUSED = _WORKS + '''
    p = efd._efd._probe()
    check(p["eventfd2_errno"] == ERR, "probe: %r" % (p,))
    for sem in (False, True):
        with efd.EventFD(semaphore=sem) as ev:
            check(ev.backend == "pipe", "semaphore=%r: backend %r"
                  % (sem, ev.backend))
    ev = efd.EventFD(semaphore=True)
    e = efd.Event()
    blocking_waits(ev, e)
    sem = efd.Semaphore(0)
    blocking_waits(sem._ev, e)
    self_check()
    print("ok")
'''

REFUSALS = ["EACCES", "ENODEV", "EPERM", "ENOSYS", "EINVAL", "EIO"]


@pytest.mark.parametrize("name", REFUSALS)
def test_eventfd_refused_gives_a_working_pipe(name, run_py):
    """Issue 9 item 7: eventfd2 refused with this errno gives a fully working pipe backend."""
    err = getattr(errno, name)
    proc = run_py(child_code(_REFUSED, filters={"eventfd_errno": err},
                             ERR=err), timeout=60, check=False)
    expect_ok(proc)


_SEMAPHORE_REFUSED = _WORKS + '''
    p = efd._efd._probe()
    check(p["eventfd2_errno"] == 0 and p["eventfd2_semaphore_errno"] == ERR,
          "probe: %r" % (p,))
    with efd.EventFD() as ev:
        check(ev.backend == "eventfd", "plain: %r" % ev.backend)
    ev = efd.EventFD(semaphore=True)
    check(ev.backend == EXPECTED, "semaphore: %r, expected %r"
          % (ev.backend, EXPECTED))
    blocking_waits(ev, efd.Event())
    self_check()
    print("ok")
'''


@pytest.mark.parametrize("name,expected", [
    ("EINVAL", "eventfd-readback"),
    ("EPERM", "pipe"),
    ("EACCES", "pipe"),
    ("ENODEV", "pipe"),
])
def test_semaphore_refused(name, expected, run_py):
    """Issue 9 item 7: EFD_SEMAPHORE refused: EINVAL -> eventfd-readback, other errnos -> pipe."""
    err = getattr(errno, name)
    proc = run_py(child_code(_SEMAPHORE_REFUSED,
                             filters={"semaphore_errno": err},
                             ERR=err, EXPECTED=expected),
                  timeout=60, check=False)
    expect_ok(proc)


_RESOURCE = '''
    for attempt in range(2):
        for sem in (False, True):
            try:
                efd.EventFD(semaphore=sem)
            except OSError as exc:
                check(exc.errno == ERR, "semaphore=%r: %r" % (sem, exc))
            else:
                fail("EventFD(semaphore=%r) did not raise errno %d (a "
                     "passing shortage chose a fallback)" % (sem, ERR))
    # A forced backend needs no probe.
    with efd.EventFD(3, semaphore=True, backend="pipe") as ev:
        check(ev.acquire(False) and ev._peek() == 2, "pipe does not work")
    print("ok")
'''


@pytest.mark.parametrize("name", ["ENFILE", "ENOMEM", "EMFILE"])
def test_resource_shortage_raises(name, run_py):
    """Issue 9 item 7: EMFILE/ENFILE/ENOMEM raise every time; a forced pipe needs no probe."""
    err = getattr(errno, name)
    proc = run_py(child_code(_RESOURCE, filters={"eventfd_errno": err},
                             ERR=err), timeout=30, check=False)
    expect_ok(proc)


def test_emfile_is_not_cached(run_py):
    """Issue 9 item 7: EMFILE (RLIMIT_NOFILE) raises and is not cached: freed fds give eventfd."""
    code = child_code('''
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE,
                           (len(os.listdir("/proc/self/fd")) + 16, hard))
        spare = []
        try:
            while True:
                spare.append(os.open(os.devnull, os.O_RDONLY))
        except OSError as exc:
            check(exc.errno == errno.EMFILE, repr(exc))
        for sem in (False, True):
            try:
                efd.EventFD(semaphore=sem)
            except OSError as exc:
                check(exc.errno == errno.EMFILE, repr(exc))
            else:
                fail("EventFD(semaphore=%r) with no descriptor left" % sem)
        for fd in spare[:8]:
            os.close(fd)
        for sem in (False, True):
            with efd.EventFD(1, semaphore=sem) as ev:
                check(ev.backend == "eventfd", "after EMFILE: %r" % ev.backend)
                check(ev.acquire(timeout=1), "no unit")
        p = efd._efd._probe()
        check(p["eventfd2_errno"] == 0 and p["eventfd2_semaphore_errno"] == 0,
              "probe: %r" % (p,))
        print("ok")
    ''')
    proc = run_py(code, timeout=30)
    assert "ok" in proc.stdout


_FORCED = '''
    objs = [efd.EventFD(backend=FORCED),
            efd.EventFD(2, semaphore=True, backend=FORCED),
            efd.Semaphore(1, backend=FORCED)._ev,
            efd.Event(backend=FORCED)._ev]
    os.environ["EFD_BACKEND"] = FORCED
    objs.append(efd.EventFD(1, semaphore=True))
    for ev in objs:
        check(ev.backend == FORCED, ev.backend)
        ev.release(2)
        check(ev.acquire(False), "acquire(False)")
        check(readable(ev.fileno()) == (ev._peek() > 0),
              "fileno() readable %r with count %r"
              % (readable(ev.fileno()), ev._peek()))
    if WAITS:
        e = efd.Event(backend=FORCED)
        ev = objs[1]
        while ev.acquire(False):
            pass
        r, dt = timed(ev.acquire, timeout=0.1)
        check(r is False, "acquire(timeout=0.1) gave %r" % r)
        t, box = in_thread(ev.acquire, 5)
        time.sleep(0.05)
        ev.release()
        t.join(SLACK)
        check(box.get("result") is True, "missed release: %r" % box)
        check(e.wait(0.05) is False, "Event.wait")
    print("ok")
'''


@pytest.mark.parametrize("forced", [b for b in BACKENDS
                                    if b not in KERNEL_BACKENDS])
@pytest.mark.parametrize("waits", [False, True], ids=["calls", "blocking-waits"])
def test_forced_backend_never_calls_eventfd(forced, waits, run_py):
    """Issue 9 item 7: a forced memory backend never calls eventfd (a filter kills on it)."""
    proc = run_py(child_code(_FORCED, filters={"eventfd_kill": True},
                             WAITS=waits, FORCED=forced),
                  timeout=30, check=False)
    assert proc.returncode != -signal.SIGSYS, (
        "killed by the filter: eventfd2 was called\n" + proc.stderr)
    expect_ok(proc)
