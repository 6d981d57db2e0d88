"""anyio's own Semaphore and Event tests, run against efd.aio.

anyio's wheel ships no tests; its sdist does.  This module fetches the sdist
of the *installed* anyio once (``pip download``, into
``~/.cache/efd-tests/``; ``EFD_ANYIO_TESTS`` may name the file instead),
loads ``tests/test_synchronization.py`` from it as it is, and runs its
``TestEvent`` and ``TestSemaphore`` with anyio's ``Event`` and
``Semaphore`` replaced -- on anyio's asyncio backend (plain and with
uvloop) and its trio backend, on every efd backend.

The replacements are as thin as trio's port's (tests/test_trio_port.py):
``Event`` is ``efd.aio.Event`` itself; ``Semaphore`` is the adapter of
tests/_ported.py (anyio's ``initial_value``/``max_value`` names, its
``WouldBlock``, and its reading of ``value``).

Not run, each for its reason (``SKIPPED``):

* ``test_fast_acquire`` and ``test_fast_acquire_outside_event_loop``:
  anyio's ``Semaphore(fast_acquire=True)`` opts out of the checkpoint on an
  uncontended acquire; efd.aio has no such option -- under anyio every
  acquire is a checkpoint, as anyio's own default is.
* ``test_cancelled_after_acquire`` on anyio's trio backend: it asserts
  ``tasks_waiting == 0`` straight after ``release()``, before the waiter
  ran -- anyio's trio semaphore hands the unit over inside ``release()``;
  under trio, efd's unit goes to the shared count and the waiter counts as
  waiting until it takes it (docs/asyncio.rst, "value").

The fetch belongs to the full run (``pytest --full``, as CI runs it); the
default run uses what an earlier full run fetched, and skips, saying so,
where nothing was.  Where the sdist cannot be fetched (no index reachable)
the tests skip, saying so.
"""
import fcntl
import os
import subprocess
import sys
import tarfile
from importlib.metadata import version as _dist_version

import pytest

import efd.aio

from _ported import PortedSemaphore, load_suite
import conftest
from conftest import backend_unavailable

anyio = pytest.importorskip("anyio")


CLASSES = ("TestEvent", "TestSemaphore")
NOT_RUN = {
    "test_fast_acquire": "anyio's fast_acquire=True skips the checkpoint; "
                         "efd.aio has no such option (every acquire under "
                         "anyio is a checkpoint, as anyio's default)",
    "test_fast_acquire_outside_event_loop": "as test_fast_acquire",
}
#: Not run on one anyio backend, for its reason.
NOT_RUN_ON = {
    ("trio", "test_cancelled_after_acquire"):
        "asserts tasks_waiting == 0 straight after release(), before the "
        "waiter runs: anyio's trio Semaphore hands the unit to the waiter "
        "inside release(); under trio efd's unit goes to the shared count "
        "and the waiter counts as waiting until it takes it (the value "
        "difference docs/asyncio.rst describes)",
}
MEMBER = "tests/test_synchronization.py"


def _cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "efd-tests")


def fetch_anyio_tests(version, fetch=True):
    """The path of anyio ``version``'s test_synchronization.py, fetched from
    its sdist into the cache if it is not there (and ``fetch``); raises
    OSError saying why it could not be.  Safe to call from several
    processes at once."""
    where = os.path.join(_cache_dir(), "anyio-%s" % version)
    path = os.path.join(where, "test_synchronization.py")
    if not fetch:
        if os.path.exists(path):
            return path
        raise OSError("not fetched in the default run (pytest --full "
                      "fetches anyio's sdist with pip download, once)")
    os.makedirs(where, exist_ok=True)
    with open(os.path.join(where, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(path):
            return path
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps",
             "--no-binary", ":all:", "-d", where, "anyio==%s" % version],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        sdists = [n for n in os.listdir(where) if n.endswith(".tar.gz")]
        if proc.returncode != 0 or not sdists:
            raise OSError("pip download anyio==%s failed: %s" % (
                version, proc.stdout.decode(errors="replace")[-500:]))
        with tarfile.open(os.path.join(where, sdists[0])) as tar:
            for member in tar.getmembers():
                if member.name.endswith("/" + MEMBER):
                    data = tar.extractfile(member).read()
                    break
            else:
                raise OSError("anyio %s's sdist has no %s" % (version, MEMBER))
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)
        return path


def _load():
    path = os.environ.get("EFD_ANYIO_TESTS")
    if not path:
        try:
            # The fetch (a pip download) is the full run's; the default run
            # uses what an earlier full run fetched.
            path = fetch_anyio_tests(_dist_version("anyio"),
                                     fetch=conftest.FULL)
        except (OSError, subprocess.SubprocessError) as exc:
            return None, "anyio's tests could not be fetched: %s" % exc
    # Its one relative import: the backends anyio's conftest parametrizes
    # asyncio-only tests with; this module chooses the backends itself.
    return load_suite(path, "anyio's test_synchronization.py",
                      [(r"^from \.conftest import .*$", "asyncio_params = []")],
                      CLASSES)


ANYIO_TESTS, WHY_NOT = _load()


def _cases():
    """(class, test, kwargs, asyncio_only) for every test of CLASSES, its
    own parametrizations expanded."""
    if ANYIO_TESTS is None:
        return [pytest.param(None, None, {}, False, id="anyio-tests")]
    out = []
    for cls_name in CLASSES:
        cls = ANYIO_TESTS[cls_name]
        for name in sorted(vars(cls)):
            if not name.startswith("test_"):
                continue
            fn = getattr(cls, name)
            marks = getattr(fn, "pytestmark", [])
            asyncio_only = False
            expanded = [{}]
            for mark in marks:
                if mark.name != "parametrize":
                    continue
                argnames, argvalues = mark.args[0], mark.args[1]
                if argnames == "anyio_backend":
                    asyncio_only = True
                    continue
                expanded = [dict(kw, **{argnames: getattr(v, "values", (v,))[0]})
                            for kw in expanded for v in argvalues]
            for kw in expanded:
                tag = ",".join("%s=%s" % kv for kv in sorted(kw.items()))
                out.append(pytest.param(
                    cls_name, name, kw, asyncio_only,
                    id="%s.%s%s" % (cls_name, name, "[%s]" % tag if tag else "")))
    return out


@pytest.fixture(params=["asyncio", "asyncio+uvloop", "trio"])
def anyio_backend(request):
    """(anyio backend name, its options)."""
    name = request.param
    if name == "trio":
        pytest.importorskip("trio")
        return "trio", {}
    if name == "asyncio+uvloop":
        uvloop = pytest.importorskip("uvloop")
        return "asyncio", {"loop_factory": uvloop.new_event_loop}
    return "asyncio", {}


@pytest.mark.parametrize("cls_name, name, kwargs, asyncio_only", _cases())
def test_anyio_test_synchronization(backend, anyio_backend, cls_name, name,
                                    kwargs, asyncio_only):
    if ANYIO_TESTS is None:
        pytest.skip(WHY_NOT)
    if name in NOT_RUN:
        pytest.skip(NOT_RUN[name])
    lib, options = anyio_backend
    if (lib, name) in NOT_RUN_ON:
        pytest.skip(NOT_RUN_ON[lib, name])
    if asyncio_only and lib != "asyncio":
        pytest.skip("anyio runs it on its asyncio backends only")
    why = backend_unavailable(backend, semaphore=True)
    if why:
        pytest.skip(why)
    made = []
    saved = {n: ANYIO_TESTS[n] for n in ("Semaphore", "Event")}
    ANYIO_TESTS["Semaphore"] = (
        lambda *a, **kw: PortedSemaphore(
            *a, backend=backend, would_block=anyio.WouldBlock, made=made,
            **kw))

    def event():
        ev = efd.aio.Event(backend=backend)
        made.append(ev)
        return ev
    ANYIO_TESTS["Event"] = event
    try:
        method = getattr(ANYIO_TESTS[cls_name](), name)
        if not (method.__code__.co_flags & 0x80):   # a plain function
            method(anyio_backend_name=lib, anyio_backend_options=options,
                   **kwargs)
            return

        async def bounded():
            with anyio.fail_after(30):
                await method(**kwargs)
        anyio.run(bounded, backend=lib, backend_options=options)
    finally:
        ANYIO_TESTS.update(saved)
        for obj in made:
            obj.close()
