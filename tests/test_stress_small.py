"""The stress run of tests/stress/stress.py, CI-sized, on every backend.

8 threads, 4 forked processes of 2 threads and 4 asyncio tasks share one
EventFD; about 5,000 operations per backend and mode (both modes), 20,000
under ``pytest --full``.  The
script checks conservation (released == taken + left, left == 0) and that no
worker hangs.  The long setting is run by hand::

    python tests/stress/stress.py --ops 1000000

``EFD_STRESS_OPS`` changes the size here.
"""
import os
import subprocess
import sys

from conftest import REPO, child_env, full_or

SCRIPT = os.path.join(REPO, "tests", "stress", "stress.py")
OPS = int(os.environ.get("EFD_STRESS_OPS") or full_or(5000, 20000))


def test_stress_small(backend):
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--backend", backend, "--ops", str(OPS),
         "--threads", "8", "--procs", "4", "--limit", "60"],
        env=child_env(), cwd=REPO, timeout=120,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        universal_newlines=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    assert len(lines) == 2, out                       # both modes ran
    assert all(ln.startswith("ok ") for ln in lines), out
    assert all(backend in ln and " left=0 " in ln for ln in lines), out
