"""CPython's own tests of threading's semaphores and event, run against the
drop-ins.

``Lib/test/lock_tests.py``, as shipped with the running Python (it differs
from version to version), holds the mixins that ``test_threading`` runs
against ``threading.Semaphore``, ``threading.BoundedSemaphore`` and
``threading.Event``.  Here ``SemaphoreTests``, ``BoundedSemaphoreTests`` and
``EventTests`` run whole against ``efd.Semaphore``, ``efd.BoundedSemaphore``
and ``efd.Event``, once per backend: the generated classes are named
``<mixin>_<backend>`` (``SemaphoreTests_pipe``, ...), and ``EFD_BACKEND``
restricts them as it restricts the ``backend`` fixture.

Only the tests of threading.Event's private attributes are skipped, with the
reason.  ``test_set_and_clear`` (gh-57711: a waiter blocked when ``set()`` is
called returns True even if ``clear()`` follows at once) also runs
:data:`ROUNDS` times in a row in one test, to catch a one-in-ten failure.

Every object a test makes is closed at tearDown (a test that drops one on
purpose, as ``test_acquire_destroy`` does, lets garbage collection close it,
which warns: those ResourceWarnings are expected here and filtered).
"""
import sys
import unittest
import weakref

import pytest

import efd

from conftest import _selected_backends, backend_unavailable, full_or

try:
    from test import lock_tests
except ImportError:  # pragma: no cover - e.g. Debian's python3 has no test/
    pytest.skip("this Python ships without Lib/test/lock_tests.py "
                "(its test package is not installed)",
                allow_module_level=True)

#: How many times test_set_and_clear_rounds repeats lock_tests' own
#: test_set_and_clear: a one-in-ten failure survives 40 rounds (--full) with
#: probability 0.9**40, about 1.5%; the default run's 5 let it by 59% of the time.
ROUNDS = full_or(5, 40)

PRIVATE = ("tests threading.Event's private _cond and %s(), which efd.Event "
           "does not have: it keeps its flag in a descriptor, not behind a "
           "condition variable")

#: lock_tests' tests of CPython private attributes, with why each is skipped.
SKIPPED = {
    "EventTests": {
        "test_at_fork_reinit": PRIVATE % "_at_fork_reinit",              # 3.9+
        "test_reset_internal_locks": PRIVATE % "_reset_internal_locks",  # 3.8
    },
}


class _OnBackend:
    """Mixed in before a lock_tests class: makes its ``semtype`` or
    ``eventtype`` build the efd drop-in on this class's backend."""

    #: The efd class under test, its backend, and whether it needs a
    #: semaphore-mode counter (set on each generated class).
    kind = None
    backend = None
    semaphore = False

    @classmethod
    def setUpClass(cls):
        why = backend_unavailable(cls.backend, semaphore=cls.semaphore)
        if why:
            raise unittest.SkipTest(why)
        super().setUpClass()

    def setUp(self):
        super().setUp()
        made = self._made = weakref.WeakSet()

        def make(*args, **kwargs):
            obj = self.kind(*args, backend=self.backend, **kwargs)
            made.add(obj)
            return obj

        # Instance attributes, so that self.semtype(...) is not a method call.
        self.semtype = self.eventtype = make

    def tearDown(self):
        # Closing also wakes any thread a failed test left waiting.
        for obj in list(self._made):
            obj.close()
        super().tearDown()


def _skip(reason):
    @unittest.skip(reason)
    def skipped(self):
        pass  # pragma: no cover - never runs
    return skipped


def _set_and_clear_rounds(self):
    """lock_tests' test_set_and_clear (gh-57711), ROUNDS times in a row."""
    for i in range(ROUNDS):
        try:
            self.test_set_and_clear()
        except AssertionError as exc:
            raise AssertionError("round %d of %d: %s" % (i + 1, ROUNDS, exc))


def _generate():
    cases = [
        (lock_tests.SemaphoreTests, efd.Semaphore, True),
        (lock_tests.BoundedSemaphoreTests, efd.BoundedSemaphore, True),
        (lock_tests.EventTests, efd.Event, False),
    ]
    for mixin, kind, semaphore in cases:
        for backend in _selected_backends():
            name = "%s_%s" % (mixin.__name__, backend.replace("-", "_"))
            ns = {
                "kind": kind,
                "backend": backend,
                "semaphore": semaphore,
                "__module__": __name__,
                "__qualname__": name,
                "__doc__": "lock_tests.%s against efd.%s, backend %r."
                           % (mixin.__name__, kind.__name__, backend),
                "pytestmark": [pytest.mark.filterwarnings(
                    "ignore:unclosed:ResourceWarning")],
            }
            for test, reason in SKIPPED.get(mixin.__name__, {}).items():
                if hasattr(mixin, test):
                    ns[test] = _skip(reason)
            if hasattr(mixin, "test_set_and_clear"):
                ns["test_set_and_clear_rounds"] = _set_and_clear_rounds
            globals()[name] = type(name, (_OnBackend, mixin), ns)


_generate()


def test_every_backend_and_class_is_generated():
    """The classes above exist for every selected backend (a typo in the
    generation would otherwise run nothing and pass)."""
    names = {n for n, v in globals().items()
             if isinstance(v, type) and issubclass(v, _OnBackend)
             and v is not _OnBackend}
    expected = {"%s_%s" % (m, b.replace("-", "_"))
                for m in ("SemaphoreTests", "BoundedSemaphoreTests",
                          "EventTests")
                for b in _selected_backends()}
    assert names == expected
    for name in names:
        cls = globals()[name]
        tests = [t for t in dir(cls) if t.startswith("test_")]
        assert len(tests) >= 5, (name, tests)
        if name.startswith("EventTests"):
            assert "test_set_and_clear_rounds" in tests
    assert sys.modules[lock_tests.__name__] is lock_tests
