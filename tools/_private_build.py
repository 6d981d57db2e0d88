"""Shared by tools/sanitize and tools/valgrind: a private copy of the
working tree with the C extension built with special flags.

Never builds in the checkout itself: the copy holds the files git knows
about plus untracked, not-ignored ones (so uncommitted work is tested too),
and the extension is built there in place.  Tests then run from the copy
with PYTHONPATH pointing at it (it wins over an editable install, whose
finder comes after the path finder).
"""
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def copy_tree(prefix):
    """Copy the working tree into a new temporary directory; return it."""
    files = subprocess.run(
        ["git", "-C", REPO, "ls-files", "-z", "--cached", "--others",
         "--exclude-standard"],
        check=True, stdout=subprocess.PIPE).stdout.split(b"\0")
    dest = tempfile.mkdtemp(prefix=prefix)
    for name in files:
        if not name:
            continue
        rel = os.fsdecode(name)
        src = os.path.join(REPO, rel)
        if not os.path.isfile(src):
            continue   # deleted in the working tree
        dst = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(src, dst)
    return dest


def build(copy, python, flags):
    """Build efd._efd in place in `copy` with the EFD_* `flags` set."""
    env = dict(os.environ, **{f: "1" for f in flags})
    subprocess.run([python, "setup.py", "-q", "build_ext", "--inplace"],
                   cwd=copy, env=env, check=True,
                   stdout=subprocess.DEVNULL)


def check_import(copy, python, env):
    """Fail unless `python` in `env` imports efd._efd from the copy."""
    out = subprocess.run(
        [python, "-c", "import efd._efd as m; print(m.__file__)"],
        cwd=copy, env=env, check=True, stdout=subprocess.PIPE,
        universal_newlines=True).stdout.strip()
    if not out.startswith(copy + os.sep):
        sys.exit("efd._efd came from %s, not from the private build in %s"
                 % (out, copy))
    return out


def test_env(copy, extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = copy + (os.pathsep + env["PYTHONPATH"]
                                if env.get("PYTHONPATH") else "")
    env.pop("EFD_BACKEND", None)
    env.update(extra)
    return env
