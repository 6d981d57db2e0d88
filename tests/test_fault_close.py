"""close() from another thread (issue 9, items 1 and 8; SPEC §4, §5).

No syscall on an object's descriptor may run after close() could have let
the number be reused, and a method that loses the race to close() raises
ValueError("... closed ..."), never OSError(EBADF).  A thread waiting in
the object -- including one waiting for the pipe backend's lock, held by a
stopped process -- wakes promptly with ValueError.

The race runs pinned to one CPU, where a thread that drops the GIL around
its syscall is easily preempted between the two: there, close() and an
os.open() of a scratch file reuse the number before the syscall runs.
"""
import pytest

from _faults import child_code
from conftest import full_or
from test_fault_kill import STOP

#: Tries per (backend, operation), default run and --full.
TRIES = full_or(60, 300)
#: Rounds of the stopped-holder close test per backend.
STOP_ROUNDS = full_or(6, 20)

_RACE = '''
    import tempfile
    cpu = sorted(os.sched_getaffinity(0))[0]
    os.sched_setaffinity(0, {cpu})
    sys.setswitchinterval(0.0002)
    rng = random.Random(SEED)
    scratch = tempfile.NamedTemporaryFile(delete=False)
    scratch.close()

    def setup():
        """(object to close, one call of the operation under test)."""
        if OP == "release":
            ev = efd.EventFD(0, backend=BACKEND)
            return ev, ev.release
        if OP == "Semaphore.release":
            sem = efd.Semaphore(0, backend=BACKEND)
            return sem, sem.release
        if OP == "with-Semaphore":
            sem = efd.Semaphore(1, backend=BACKEND)
            def use():
                with sem:
                    pass
            return sem, use
        if OP == "acquire":
            ev = efd.EventFD(0, semaphore=True, backend=BACKEND)
            return ev, lambda: ev.acquire(timeout=0.0002)
        if OP == "read":
            ev = efd.EventFD(MAX, semaphore=True, backend=BACKEND)
            return ev, ev.read
        if OP == "write":
            ev = efd.EventFD(0, backend=BACKEND)
            return ev, ev.write
        raise AssertionError(OP)

    leaked, ebadf, other = 0, [], []
    for i in range(TRIES):
        obj, op = setup()
        started = threading.Event()
        errors = []
        def loop():
            started.set()
            try:
                while True:
                    op()
            except ValueError as exc:
                if "closed" not in str(exc):
                    errors.append(exc)
            except BaseException as exc:
                errors.append(exc)
        t = threading.Thread(target=loop, daemon=True)
        t.start()
        check(started.wait(10), "the looping thread did not start")
        time.sleep(rng.uniform(0, 0.0005))
        obj.close()
        fd = os.open(scratch.name, os.O_WRONLY | os.O_TRUNC)
        t.join(10)
        check(not t.is_alive(), "try %d: the thread did not stop after "
                                "close()" % i)
        if os.fstat(fd).st_size:
            leaked += 1
        os.close(fd)
        for exc in errors:
            (ebadf if isinstance(exc, OSError) and exc.errno == errno.EBADF
             else other).append(exc)
    os.unlink(scratch.name)
    print("tries %d leaked %d ebadf %d other %d"
          % (TRIES, leaked, len(ebadf), len(other)))
    check(not leaked and not ebadf and not other,
          "%s racing close(), %d tries: %d wrote into a file that reused the "
          "number, %d raised OSError(EBADF), other errors: %r"
          % (OP, TRIES, leaked, len(ebadf), other[:3]))
'''


@pytest.mark.parametrize("op", ["release", "Semaphore.release",
                                "with-Semaphore", "acquire", "read", "write"])
def test_operation_racing_close(backend, op, run_py):
    """Issue 9 item 1: an operation racing close() never hits a reused fd; the loser gets ValueError."""
    code = child_code(_RACE, OP=op, TRIES=TRIES, SEED=1)
    proc = run_py(code, backend=backend, timeout=60)
    assert "tries %d" % TRIES in proc.stdout


_WAITERS = '''
    def make(initval=0, semaphore=False):
        return efd.EventFD(initval, semaphore=semaphore, backend=BACKEND)

    cases = []
    ev = make(); cases.append(("acquire()", ev, ev.acquire))
    ev = make(); cases.append(("acquire(timeout=30)", ev,
                               lambda ev=ev: ev.acquire(timeout=30)))
    ev = make(semaphore=True); cases.append(("read()", ev, ev.read))
    ev = make(MAX); cases.append(("write() on a full counter", ev, ev.write))
    sem = efd.Semaphore(0, backend=BACKEND)
    cases.append(("Semaphore.acquire()", sem, sem.acquire))
    e = efd.Event(backend=BACKEND)
    cases.append(("Event.wait()", e, e.wait))

    waiting = [(name, obj) + in_thread(fn) for name, obj, fn in cases]
    time.sleep(0.2)
    for name, obj, t, box in waiting:
        check(t.is_alive(), "%s did not block: %r" % (name, box))
        closed = time.monotonic()
        obj.close()
        t.join(SLACK)
        check(not t.is_alive(), "%s: close() did not wake the waiter" % name)
        err = box.get("error")
        check(isinstance(err, ValueError) and "closed" in str(err),
              "%s: the waiter got %r, not ValueError(closed)" % (name, box))
        check(box["ended"] - closed < SLACK,
              "%s woke %.2f s after close()" % (name, box["ended"] - closed))
    print("woken", len(waiting))
'''


def test_close_wakes_waiters(backend, run_py):
    """Issue 9 'Close': close() from another thread wakes every kind of waiter with ValueError."""
    proc = run_py(child_code(_WAITERS), backend=backend, timeout=30)
    assert "woken 6" in proc.stdout


def test_close_wakes_a_waiter_behind_a_stopped_process(backend, run_py):
    """Issue 9 items 2 and 'Close': close() wakes a waiter behind a SIGSTOPped lock holder."""
    code = child_code(STOP, ROUNDS=STOP_ROUNDS, SEED=8, CHECKS=("close",))
    proc = run_py(code, backend=backend, timeout=40)
    assert "rounds %d" % STOP_ROUNDS in proc.stdout
