"""Run every program in examples/ as its own process and check what it says.

Each example runs once per backend (EFD_BACKEND in its environment), with a
time limit, so an example that hangs fails instead of stalling the suite.
The checks are on the example's printed results, which the examples derive
from what actually happened (units counted, peaks measured), not on canned
text.
"""
import os
import re
import subprocess
import sys

import pytest

from conftest import KERNEL_BACKENDS, REPO, child_env, outside_the_tree

EXAMPLES = os.path.join(REPO, "examples")
LIMIT = 180     # seconds; spawn and forkserver start fresh interpreters


def run_example(name, backend, *args):
    proc = subprocess.run(
        [sys.executable, "-X", "faulthandler", os.path.join(EXAMPLES, name)]
        + list(args),
        env=child_env(backend), cwd=outside_the_tree(), timeout=LIMIT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        universal_newlines=True)
    if proc.returncode != 0:
        pytest.fail("%s exited with %d\n--- stdout\n%s\n--- stderr\n%s"
                    % (name, proc.returncode, proc.stdout, proc.stderr))
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "ResourceWarning" not in proc.stderr, proc.stderr
    return proc.stdout


def test_every_example_is_tested():
    tested = {"threads.py", "processes.py", "select_many.py",
              "pool_bounded.py", "asyncio_wakeup.py", "aio_limit.py",
              "handle_exec.py", "unix_socket.py", "interpreters.py",
              "robust_limit.py"}
    present = {n for n in os.listdir(EXAMPLES) if n.endswith(".py")}
    assert present == tested


def test_threads(backend):
    out = run_example("threads.py", backend)
    assert out == "released 3000 units; acquired 3000\n"


def test_processes(backend):
    out = run_example("processes.py", backend).splitlines()
    for method in ("fork", "spawn", "forkserver"):
        assert "multiprocessing/%s: 3 units, exit code 0" % method in out
    if backend not in KERNEL_BACKENDS:
        assert "subprocess + from_fd: skipped (needs a kernel eventfd)" in out
    else:
        assert "subprocess + from_fd: 2 units" in out
    # The child released 4; the parent tried 5 non-blocking acquires.
    assert "os.fork: 4 units" in out


def test_select_many(backend):
    out = run_example("select_many.py", backend)
    assert out == "orders: 10 alerts: 3\n"


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_pool_bounded(backend, method):
    out = run_example("pool_bounded.py", backend, method)
    m = re.fullmatch(
        r"%s: 12 tasks on 4 processes, at most (\d+) holding the resource "
        r"\(limit 2\)\n" % method, out)
    assert m, out
    assert 1 <= int(m.group(1)) <= 2


def test_asyncio_wakeup(backend):
    out = run_example("asyncio_wakeup.py", backend).splitlines()
    # Each job carries a megabyte: a payload bigger than a pipe holds
    # neither hangs the worker's put() nor the server.
    assert out[:-1] == ["client got: job %d -> %d (1048576 bytes)" % (i, i * i)
                        for i in range(5)]
    m = re.fullmatch(r"server woken (\d+) times; threads in this process: "
                     r"(\d+)", out[-1])
    assert m, out
    assert int(m.group(1)) == 6          # five jobs and the final "done"
    assert int(m.group(2)) == 1          # the loop waited without threads


def test_aio_limit(backend):
    out = run_example("aio_limit.py", backend)
    m = re.fullmatch(
        r"18 tasks in 3 processes, at most (\d+) holding a connection "
        r"\(limit 2\); units left: 2; exit codes \[0\]\n", out)
    assert m, out
    assert 1 <= int(m.group(1)) <= 2


def test_handle_exec(backend):
    out = run_example("handle_exec.py", backend).splitlines()
    assert out == ["worker: a Semaphore and an Event, took 5 jobs",
                   "parent: worker done: True, jobs left: False, "
                   "exit code 0"]


def test_unix_socket(backend):
    out = run_example("unix_socket.py", backend).splitlines()
    assert out == ["client: got a BoundedSemaphore (%s backend)" % backend,
                   "client: holding a unit",
                   "server: client exit code 0, 2 units back"]


def test_interpreters(backend):
    out = run_example("interpreters.py", backend).splitlines()
    try:
        from concurrent import interpreters  # noqa: F401
    except ImportError:
        assert out == ["needs CPython 3.14+ (concurrent.interpreters): "
                       "skipped"]
        return
    assert out == ["pool: %s" % [i * i for i in range(8)],
                   "call: the other interpreter released 3 (%s); "
                   "5 units here" % backend]


def test_robust_limit(backend):
    out = run_example("robust_limit.py", backend).splitlines()
    if backend in KERNEL_BACKENDS:
        assert out == ["robust holds: not on the %r backend" % backend]
        return
    assert out == ["held by two workers: value 0",
                   "after SIGKILL of both: value 2",
                   "later workers done: value 2",
                   "after a consumer exited: value 1"]
