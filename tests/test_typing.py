"""The public API type-checks under ``mypy --strict`` and the typed example
that uses every public name runs."""
import os
import subprocess
import sys

import pytest

from conftest import REPO, child_env, kernel_eventfd_available

EXAMPLE = os.path.join(REPO, "tests", "typing", "uses_every_name.py")


def test_typed_example_runs():
    if not kernel_eventfd_available():
        pytest.skip("the example also uses efd.eventfd and from_fd, which "
                    "need a kernel eventfd")
    r = subprocess.run([sys.executable, EXAMPLE], env=child_env(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("True")


def test_mypy_strict_accepts_the_typed_example():
    pytest.importorskip("mypy")
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental",
         "--cache-dir", os.devnull, EXAMPLE],
        cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_strict_rejects_a_wrong_use(tmp_path):
    """The check has teeth: a wrong argument type is reported."""
    pytest.importorskip("mypy")
    bad = tmp_path / "bad.py"
    bad.write_text("import efd\n"
                   "ev = efd.EventFD(semaphore=True)\n"
                   "x: str = ev.acquire(timeout='soon')\n")
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental",
         "--cache-dir", os.devnull, str(bad)],
        cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    assert "bad.py:3" in r.stdout
