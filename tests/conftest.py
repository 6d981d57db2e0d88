"""Shared fixtures for the efd test-suite.

One mechanism runs the behaviour tests on every backend: a test that takes
the ``backend`` fixture (or ``make``, which depends on it) runs once per
backend, with ids ``[eventfd]``, ``[eventfd-readback]`` and ``[pipe]``.
Setting ``EFD_BACKEND`` in the environment restricts that to one backend
(and, since EventFD reads the variable at construction, it is also the
backend of every object made without ``backend=``).  A backend that cannot
work on this machine is skipped with the probe's answer as the reason.

Code that can hang, crash or change process-wide state runs in a child
interpreter: the ``run_py`` fixture (``run_py(code, ...)``) starts
``sys.executable -c code`` with this checkout importable and a watchdog that
dumps tracebacks and exits if the child outlives its time.
"""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

import efd
from efd import _efd

BACKENDS = ("eventfd", "eventfd-readback", "pipe", "futex")
#: The backends whose descriptor is a kernel eventfd (from_fd, detach, raw
#: reads); the others keep the count in shared memory.
KERNEL_BACKENDS = ("eventfd", "eventfd-readback")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: The full-run switch: ``pytest --full`` (or ``EFD_FULL=1`` in the
#: environment, which child processes inherit).  The default run is a
#: contributor's inner loop: every behaviour, at a small size.  With the
#: switch, the long campaigns (fault storms, many-waiter curves, the
#: interleaving explorer's deeper bounds, external suites at full size) run
#: at full size; CI runs it.
FULL = os.environ.get("EFD_FULL", "") not in ("", "0")


def pytest_addoption(parser, pluginmanager):
    parser.addoption("--full", action="store_true", default=False,
                     help="run the long campaigns at full size (as CI does); "
                          "same as EFD_FULL=1")
    # pyproject.toml's addopts runs the suite on pytest-xdist workers
    # (--numprocesses=4: the tests mostly wait on children, sleeps and
    # timeouts).  Where xdist is not loaded (-p no:xdist, to debug in one
    # process; or not installed), accept that option and ignore it, so that
    # addopts still parses.  -n 0 also runs everything in this process.
    # Under xdist, --full reaches the workers both as an option and through
    # EFD_FULL.
    if not pluginmanager.has_plugin("xdist"):
        parser.addoption("--numprocesses", dest="numprocesses", default=None,
                         help="(pytest-xdist is not loaded: ignored)")


def pytest_configure(config):
    global FULL
    if config.getoption("--full"):
        FULL = True
        os.environ["EFD_FULL"] = "1"     # children see it too


def _default_interrupt_signals():
    """Give SIGINT and SIGQUIT their usual dispositions if the run
    inherited them ignored -- as a command started with ``&`` by a
    non-interactive shell (a script, ``nohup``, a CI runner) does.  The
    child processes would inherit the ignoring too: a child Python then has
    no KeyboardInterrupt, and every Ctrl-C test fails (SIGINT sent and
    nothing happens).  A disposition the run set itself is left alone."""
    for sig, handler in ((signal.SIGINT, signal.default_int_handler),
                         (signal.SIGQUIT, signal.SIG_DFL)):
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, handler)


_default_interrupt_signals()


def full_or(small, full):
    """`full` under the full-run switch, else `small` (rounds, sizes)."""
    return full if FULL else small


#: Time limit for anything a test waits on that should finish "at once".
#: Generous: the machine is small and shared.
PROMPT = 5.0


def sleeps_on_futex(backend):
    """Whether `backend`'s blocked waiters sleep on futex words in the
    shared page (futex; pipe where futexes are: python -m efd), rather
    than in poll() on the descriptor, in a herd that keeps a watch."""
    import efd
    probe = efd._efd._probe()
    if backend == "futex":
        return True
    return backend == "pipe" and probe["pipe_sleeps"] == "futex"

#: For run_py() code: fork_probe() forks a child that exits at once with
#: the number of its threads, and returns that number and the messages of
#: the "multi-threaded" DeprecationWarnings os.fork() gave (3.12 and later
#: warn when the forking process has threads besides the one forking).
FORK_PROBE = r"""
def fork_probe():
    import os, warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pid = os.fork()
        if pid == 0:
            os._exit(len(os.listdir("/proc/self/task")))
        _, status = os.waitpid(pid, 0)
    return status >> 8, [str(w.message) for w in caught
                         if "multi-threaded" in str(w.message)]
"""


def _selected_backends():
    env = os.environ.get("EFD_BACKEND", "")
    if env in ("", "auto"):
        return BACKENDS
    if env not in BACKENDS:
        raise pytest.UsageError(
            "EFD_BACKEND=%r: expected one of %s" % (env, ", ".join(BACKENDS)))
    return (env,)


def backend_unavailable(name, semaphore=False):
    """Why `name` cannot work here (a skip reason), or None if it can."""
    probe = _efd._probe()
    if name in ("eventfd", "eventfd-readback") and probe["eventfd2_errno"]:
        return "%s backend: eventfd2() fails here: %s" % (name, probe["eventfd2"])
    if name == "futex" and probe["futex_errno"]:
        return "futex backend: not available here: %s" % (probe["futex"],)
    if name == "eventfd" and semaphore and probe["eventfd2_semaphore_errno"]:
        return "eventfd backend: EFD_SEMAPHORE refused here: %s" % (
            probe["eventfd2_semaphore"],)
    return None


def kernel_eventfd_available():
    return _efd._probe()["eventfd2_errno"] == 0


@pytest.fixture(params=_selected_backends())
def backend(request):
    """The name of the backend under test; skipped if it cannot work here."""
    why = backend_unavailable(request.param)
    if why:
        pytest.skip(why)
    return request.param


@pytest.fixture(params=[False, True], ids=["counter", "semaphore"])
def semaphore(request):
    """Both modes of the counter."""
    return request.param


@pytest.fixture
def make(backend):
    """make(initval=0, semaphore=False, nonblocking=False, cloexec=True)
    -> an EventFD on the backend under test, closed at teardown."""
    made = []

    def factory(initval=0, semaphore=False, nonblocking=False, cloexec=True):
        why = backend_unavailable(backend, semaphore)
        if why:
            pytest.skip(why)
        ev = efd.EventFD(initval, semaphore=semaphore, nonblocking=nonblocking,
                         cloexec=cloexec, backend=backend)
        made.append(ev)
        return ev

    yield factory
    for ev in made:
        ev.close()


def twin(ev, nonblocking=True):
    """A second EventFD over the same counter as `ev` (duplicated fds), to
    look at the counter from outside while `ev` is busy or closed."""
    fds = tuple(os.dup(fd) for fd in ev._fds())
    try:
        return efd.EventFD._from_fds(fds, ev.backend, ev.semaphore, nonblocking)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


@pytest.fixture
def make_twin():
    """make_twin(ev) -> a second view of ev's counter, closed at teardown."""
    made = []

    def factory(ev, nonblocking=True):
        t = twin(ev, nonblocking)
        made.append(t)
        return t

    yield factory
    for t in made:
        t.close()


def open_fd_count():
    """Descriptors open in this process right now."""
    return len(os.listdir("/proc/self/fd"))


#: True when the efd under test is this checkout's own (an editable install
#: or an in-place build); False when it is an installed package (a wheel, or
#: ``pip install .``), which children must import too.
EFD_FROM_REPO = os.path.dirname(
    os.path.dirname(os.path.abspath(efd.__file__))) == REPO


def child_env(backend=None, extra=None):
    """The environment for a child interpreter: the efd under test
    importable (the checkout goes first on PYTHONPATH only when that is
    where efd comes from), EFD_BACKEND set to `backend` (unset if None),
    faulthandler on, and `extra` on top."""
    env = dict(os.environ)
    if EFD_FROM_REPO:
        env["PYTHONPATH"] = REPO + (
            os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("EFD_BACKEND", None)
    if backend is not None:
        env["EFD_BACKEND"] = backend
    env.setdefault("PYTHONFAULTHANDLER", "1")
    if extra:
        env.update(extra)
    return env


def outside_the_tree():
    """A directory outside the source tree, to run a user's program from:
    as a user runs an example or a doc block after ``pip install``, where
    the checkout's ``efd/`` (without its compiled module, after a plain
    ``pip install .``) is not the efd that imports."""
    global _OUTSIDE
    if _OUTSIDE is None:
        import atexit
        import shutil
        import tempfile
        _OUTSIDE = tempfile.mkdtemp(prefix="efd-user-")
        atexit.register(shutil.rmtree, _OUTSIDE, True)
    return _OUTSIDE


_OUTSIDE = None

_WATCHDOG = (
    "import faulthandler as _fh, sys as _sys\n"
    "_fh.dump_traceback_later({limit}, exit=True, file=_sys.stderr)\n"
)


def child_source(code, limit):
    """`code` dedented, behind a watchdog that ends the child after `limit`
    seconds with a traceback of every thread (so a hang fails, not stalls)."""
    return _WATCHDOG.format(limit=limit) + textwrap.dedent(code)


@pytest.fixture
def run_py():
    """run_py(code, backend=None, timeout=60, check=True, **popen_kwargs)
    -> CompletedProcess (text, output captured).

    Runs `code` in a fresh interpreter with this checkout importable and
    EFD_BACKEND set to `backend` (unset if None).  With check=True a
    non-zero exit fails the test, showing the child's output."""

    def run(code, backend=None, timeout=60, check=True, env=None, **kwargs):
        proc = subprocess.run(
            [sys.executable, "-c", child_source(code, max(1, timeout - 5))],
            env=child_env(backend, env), cwd=REPO, timeout=timeout,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            universal_newlines=True, **kwargs)
        if check and proc.returncode != 0:
            pytest.fail("child exited with %d\n--- stdout\n%s\n--- stderr\n%s"
                        % (proc.returncode, proc.stdout, proc.stderr))
        return proc

    return run


@pytest.fixture
def popen_py():
    """popen_py(code, backend=None, limit=60, **popen_kwargs) -> Popen with
    text stdout/stderr pipes; killed at teardown if still running."""
    procs = []

    def start(code, backend=None, limit=60, env=None, **kwargs):
        proc = subprocess.Popen(
            [sys.executable, "-c", child_source(code, limit)],
            env=child_env(backend, env), cwd=REPO,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            universal_newlines=True, **kwargs)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=PROMPT * 2)
