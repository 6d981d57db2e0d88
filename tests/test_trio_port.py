"""trio's own Semaphore and Event tests, run against efd.aio.

trio ships its test suite inside the package (``trio/_tests/``).  This
module loads ``trio/_tests/test_sync.py`` from the installed trio, as it
is, and runs its Semaphore and Event tests -- ``test_Event``,
``test_Semaphore``, ``test_Semaphore_bounded``, and the generic lock tests
(exclusion, FIFO fairness, ``acquire_nowait`` blocking ``acquire``) with
their ``Semaphore(1)`` factory -- with trio's ``Semaphore`` and ``Event``
replaced by an adapter, on every backend.

The adapter (tests/_ported.py, shared with anyio's port) only translates
what differs in name, not in behaviour:

* trio's ``Semaphore(initial_value, *, max_value=None)`` is an
  ``efd.aio.Semaphore``, or with ``max_value`` an ``efd.aio.BoundedSemaphore``
  of ``max_value`` with ``max_value - initial_value`` units taken (efd's
  bound is its initial value, as in asyncio);
* ``efd.WouldBlock`` is re-raised as ``trio.WouldBlock``;
* trio's ``value`` is what a new acquirer could take: trio hands a released
  unit straight to the first queued task, while efd's ``value`` is the
  shared count, where the unit waits for that task (and no new acquirer of
  this process may take it first): so the count less the tasks queued;
* trio's wording of two ``ValueError`` messages (efd uses asyncio's and
  threading's: "Semaphore released too many times");
* trio's ``Event.__bool__`` refusal (a trio API choice; efd.aio.Event is
  asyncio's, which has none).

Everything a test checks -- checkpoints on every acquire and wait (trio's
``assert_checkpoints``), FIFO order, that ``acquire_nowait`` never jumps
ahead of a queued task, ``statistics().tasks_waiting`` -- is efd's own.

Where the installed trio does not ship this file (or an older one whose
module does not load on this Python), the tests skip, saying so.
"""
import os

import pytest

import efd
import efd.aio

from _ported import PortedSemaphore, load_suite
from conftest import backend_unavailable

trio = pytest.importorskip("trio")

WANTED = ("test_Event", "test_Semaphore", "test_Semaphore_bounded")
GENERIC = ("test_generic_lock_exclusion", "test_generic_lock_fifo_fairness",
           "test_generic_lock_acquire_nowait_blocks_acquire")


def _load_trio_tests():
    path = os.path.join(os.path.dirname(trio.__file__), "_tests",
                        "test_sync.py")
    if not os.path.exists(path):
        return None, "trio %s does not ship _tests/test_sync.py" % (
            trio.__version__)
    # Its relative imports name trio's own modules.
    return load_suite(
        path, "trio %s's test_sync.py" % trio.__version__,
        [(r"^from \.\. import ", "from trio import "),
         (r"^from \.\.(\w)", r"from trio.\1")],
        WANTED + GENERIC)


TRIO_TESTS, WHY_NOT = _load_trio_tests()


class _TrioEvent:
    """trio.Event's names over an efd.aio.Event."""

    def __init__(self, backend=None):
        self._ev = efd.aio.Event(backend=backend)
        _made.append(self._ev)

    def __bool__(self):
        # Whatever the installed trio's Event does, word for word (it
        # raises in new trios, warns in 0.31-0.3x); it looks at no state.
        return trio.Event().__bool__()

    def is_set(self):
        return self._ev.is_set()

    def set(self):
        self._ev.set()

    async def wait(self):
        await self._ev.wait()

    def statistics(self):
        return self._ev.statistics()


_made = []


@pytest.fixture
def on_backend(backend):
    """trio's test module, its Semaphore and Event made on `backend`."""
    if TRIO_TESTS is None:
        pytest.skip(WHY_NOT)
    why = backend_unavailable(backend, semaphore=True)
    if why:
        pytest.skip(why)
    saved = {n: TRIO_TESTS[n] for n in ("Semaphore", "Event")}
    TRIO_TESTS["Semaphore"] = (
        lambda *a, **kw: PortedSemaphore(
            *a, backend=backend, would_block=trio.WouldBlock,
            too_many="semaphore released too many times", made=_made, **kw))
    TRIO_TESTS["Event"] = lambda: _TrioEvent(backend=backend)
    try:
        yield TRIO_TESTS
    finally:
        TRIO_TESTS.update(saved)
        while _made:
            _made.pop().close()


def _run(fn, *args):
    if not hasattr(fn, "__code__") or not (fn.__code__.co_flags & 0x80):
        return fn(*args)                    # a plain test function
    async def bounded():
        with trio.fail_after(30):
            await fn(*args)
    trio.run(bounded)


@pytest.mark.parametrize("name", WANTED)
def test_trio_test_sync(on_backend, name):
    _run(on_backend[name])


@pytest.mark.parametrize("name", GENERIC)
def test_trio_generic_lock_tests_with_a_semaphore(on_backend, name):
    # The generic lock tests' "Semaphore(1)" factory, which looks the name
    # up when called: the adapter's.
    _run(on_backend[name], lambda: on_backend["Semaphore"](1))
