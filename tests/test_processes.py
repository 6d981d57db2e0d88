"""Across processes: fork(), multiprocessing (fork, spawn, forkserver),
subprocess pass_fds with EventFD.from_fd, cloexec both ways, and pickling
outside of process start.  Every child is waited for with a time limit.
"""

import multiprocessing
import os
import pickle
import select
import signal
import sys
import time

import pytest

import efd
from conftest import KERNEL_BACKENDS, kernel_eventfd_available

CHILD_LIMIT = 60


def wait_exitcode(pid, timeout=CHILD_LIMIT):
    """waitpid with a deadline: kill the child if it overstays."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            if os.WIFEXITED(status):
                return os.WEXITSTATUS(status)
            return -os.WTERMSIG(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("forked child did not finish in %s s" % timeout)
        time.sleep(0.005)


def fork_run(fn):
    """Run fn() in a forked child (no exec); its return value (0..255) is
    the exit code.  The child never returns into pytest."""
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            code = fn()
        except BaseException:
            import traceback
            traceback.print_exc()
        finally:
            os._exit(code)
    return pid


def test_fork_shares_the_counter(make, semaphore):
    ev = make(0, semaphore=semaphore)

    def child():
        if not ev.acquire(timeout=30):   # waits for the parent's release
            return 3
        ev.release(10)
        ev.close()                       # closes the child's copy only
        return 0

    pid = fork_run(child)
    time.sleep(0.1)
    ev.release(2)
    assert wait_exitcode(pid) == 0
    assert ev._peek() == 10 + (1 if semaphore else 0)
    assert ev.acquire(blocking=False)


def test_fork_child_takes_what_parent_gives(make, semaphore):
    ev = make(5, semaphore=semaphore)
    pid = fork_run(lambda: ev.read())
    assert wait_exitcode(pid) == (1 if semaphore else 5)
    assert ev._peek() == (4 if semaphore else 0)


# ---- multiprocessing -------------------------------------------------------

def mp_child(a, b, backend, semaphore):
    """Runs in the multiprocessing child: check what arrived, take one
    read's worth from `a`, report it through `b`."""
    assert a.backend == backend, (a.backend, backend)
    assert a.semaphore == semaphore and b.nonblocking
    value = a.read()
    b.write(value + 1000)
    a.close()
    b.close()


START_METHODS = [m for m in ("fork", "spawn", "forkserver")
                 if m in multiprocessing.get_all_start_methods()]


@pytest.mark.parametrize("method", START_METHODS)
def test_multiprocessing_argument(make, backend, semaphore, method):
    ctx = multiprocessing.get_context(method)
    a = make(5, semaphore=semaphore)
    b = make(0, nonblocking=True)
    p = ctx.Process(target=mp_child, args=(a, b, backend, semaphore))
    p.start()
    p.join(CHILD_LIMIT)
    if p.is_alive():
        p.kill()
        p.join(5)
        pytest.fail("multiprocessing child (%s) hung" % method)
    assert p.exitcode == 0
    assert b.read() == 1000 + (1 if semaphore else 5)
    assert a._peek() == (4 if semaphore else 0)
    # Still one counter after the child has gone.
    a.release()
    assert a.acquire(blocking=False)


def test_pickling_outside_process_start(make, run_py):
    # Outside a process start, a pickle is for this process only (another
    # interpreter, a queue's get): it holds no descriptor, and loads as a
    # second owner of the same count; in another process it raises.
    ev = make(1)
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        data = pickle.dumps(ev, protocol)
        with pickle.loads(data) as other:
            assert other is not ev and other.backend == ev.backend
            other.release()
        assert ev.acquire(blocking=False)
    ev.release()
    assert ev.acquire(blocking=False)        # unharmed
    code = ("import pickle, efd\n"
            "try:\n"
            "    pickle.loads(bytes.fromhex(%r))\n"
            "except RuntimeError as e:\n"
            "    print(e)\n" % pickle.dumps(ev).hex())
    proc = run_py(code)
    assert proc.stdout.startswith(
        "EventFD objects should only be shared between processes through "
        "inheritance"), proc.stdout


# ---- subprocess, pass_fds and from_fd --------------------------------------

def kernel_shows_semaphore_mode():
    fd = efd.eventfd(0)
    try:
        with open("/proc/self/fdinfo/%d" % fd) as f:
            return "eventfd-semaphore:" in f.read()
    finally:
        os.close(fd)


@pytest.mark.skipif(not kernel_eventfd_available(), reason="no kernel eventfd")
def test_pass_fds_and_from_fd(make, backend, semaphore, run_py):
    if backend not in KERNEL_BACKENDS:
        pytest.skip("from_fd adopts kernel eventfds; the %s backend's "
                    "objects travel with multiprocessing instead" % backend)
    ev = make(5, semaphore=semaphore)
    fd = ev.fileno()
    # A kernel fd in semaphore mode says so in fdinfo; the readback
    # backend's kernel fd is in normal mode, so its child must be told.
    explicit = backend == "eventfd-readback" and semaphore
    if semaphore and not explicit and not kernel_shows_semaphore_mode():
        explicit = True
    code = """
        import efd
        ev = efd.EventFD.from_fd({fd}{extra})
        print(ev.semaphore, ev.backend, ev.read())
        ev.write(100)
        ev.close()
    """.format(fd=fd, extra=", semaphore=True" if explicit else "")
    out = run_py(code, pass_fds=(fd,))
    sem, child_backend, value = out.stdout.split()
    assert sem == str(semaphore)
    # Normal mode needs no emulation: the child gets the native backend.
    assert child_backend == (backend if semaphore else "eventfd")
    assert int(value) == (1 if semaphore else 5)
    assert ev._peek() == (4 if semaphore else 0) + 100


# ---- close-on-exec -------------------------------------------------------------

def describe_fd(fd):
    """What a descriptor refers to, as comparable between processes: the
    /proc link and, for eventfds, the kernel's per-eventfd id."""
    try:
        target = os.readlink("/proc/self/fd/%d" % fd)
    except OSError:
        return None
    ident = ""
    try:
        with open("/proc/self/fdinfo/%d" % fd) as f:
            for line in f:
                if line.startswith("eventfd-id:"):
                    ident = line.split()[1]
    except OSError:
        pass
    return "%s %s" % (target, ident)


DESCRIBE_IN_CHILD = """
    import os, sys
    sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
    from test_processes import describe_fd
    for fd in {fds!r}:
        print(describe_fd(fd))
"""


@pytest.mark.parametrize("cloexec", [True, False], ids=["cloexec", "inheritable"])
def test_cloexec(make, run_py, cloexec):
    ev = make(1, cloexec=cloexec)
    fds = ev._fds()
    for fd in fds:
        assert os.get_inheritable(fd) is (not cloexec)
    mine = [describe_fd(fd) for fd in fds]
    out = run_py(DESCRIBE_IN_CHILD.format(fds=fds), close_fds=False)
    theirs = out.stdout.splitlines()
    assert len(theirs) == len(fds)
    for fd, m, t in zip(fds, mine, theirs):
        if cloexec:
            assert t != m, "fd %d (%s) leaked into the exec'd child" % (fd, m)
        else:
            assert t == m, "fd %d: child sees %r, parent %r" % (fd, t, m)


def test_inherited_fd_is_usable_after_exec(make, backend, run_py):
    if backend not in KERNEL_BACKENDS:
        pytest.skip("the %s backend's fileno() is for readiness only"
                    % backend)
    ev = make(3, cloexec=False)
    code = """
        import os
        assert os.read({fd}, 8) == (3).to_bytes(8, {order!r})
        os.write({fd}, (9).to_bytes(8, {order!r}))
    """.format(fd=ev.fileno(), order=sys.byteorder)
    run_py(code, close_fds=False)
    assert ev._peek() == 9


# ---- readiness across processes (the memory backends' "armed" channel) ----

def _arm(ev, armed):
    ev.fileno()                  # arms the futex backend, for every process
    armed.release()


def _release_later(ev, go, n):
    if go.acquire(timeout=30):
        ev.release(n)


def _select_until(ev, want, out):
    # Report whether select() on fileno() came to agree with `want` units.
    deadline = time.monotonic() + 10
    fd = ev.fileno()
    while time.monotonic() < deadline:
        readable = bool(select.select([fd], [], [], 0.05)[0])
        if readable == (want > 0):
            out.release()
            return
    out.release(2)               # "timed out": two units instead of one


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_readiness_follows_the_count_across_processes(make, backend,
                                                      semaphore, method):
    """Arm in one process, release in another, select() in a third: the
    descriptor is readable exactly while the count is above zero, on every
    backend (futex: once anyone has asked for fileno())."""
    ctx = multiprocessing.get_context(method)
    ev = make(0, semaphore=semaphore)
    armed, go, out = make(0, True), make(0, True), make(0, True)
    procs = [ctx.Process(target=_arm, args=(ev, armed))]
    procs[0].start()
    assert armed.acquire(timeout=30)
    procs.append(ctx.Process(target=_select_until, args=(ev, 3, out)))
    procs.append(ctx.Process(target=_release_later, args=(ev, go, 3)))
    for p in procs[1:]:
        p.start()
    go.release()
    assert out.acquire(timeout=30)
    assert not out.acquire(False), "select() never saw the released units"
    taken = 0
    while ev.acquire(False):
        taken += 1 if semaphore else 0
        if not semaphore:
            taken = 3
            break
    assert taken == 3
    # Empty again: a select() in a child sees it not readable.
    p = ctx.Process(target=_select_until, args=(ev, 0, out))
    p.start()
    assert out.acquire(timeout=30)
    assert not out.acquire(False), "select() still saw units after they went"
    for q in procs + [p]:
        q.join(30)
        assert q.exitcode == 0
