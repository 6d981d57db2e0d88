"""Model-based test: a pure-Python model of SPEC §1 against the real thing.

``CounterModel`` is the eventfd counter as SPEC §1 describes it, written
without looking at efd's C code: a 64-bit unsigned count whose largest value
is ``2**64 - 2``, a read that takes everything (or 1, in semaphore mode),
non-blocking errors, and the argument errors of SPEC §3.  Each method returns
what the operation must return, or raises what it must raise, and says
whether a blocking call would wait (the state machine then does not make it).

A Hypothesis ``RuleBasedStateMachine`` drives a target with random sequences
of read / write / acquire (non-blocking and with short timeouts) / release
and checks every result, every exception and (through ``_peek()`` or
``/proc/self/fdinfo``) the counter after every step.  Targets:

* ``efd.EventFD`` on every backend (the ``backend`` fixture of conftest:
  only ``$EFD_BACKEND`` if it is set);
* the kernel itself through ``os.eventfd`` (Python 3.10+), so that the model
  is checked against Linux rather than against our reading of it;
* efd's ``os.eventfd`` backport (``efd.eventfd`` / ``eventfd_read`` /
  ``eventfd_write``), which must behave as the kernel target does.

Budget: ``EFD_MODEL_EXAMPLES`` (default 20, 40 under ``pytest --full``)
sequences of up to ``EFD_MODEL_STEPS`` (default 40) steps per target; raise
both for a long run, e.g. ``EFD_MODEL_EXAMPLES=2000 EFD_MODEL_STEPS=100``.
"""
import os
import sys
import time

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import efd
from conftest import full_or

MAX = 2**64 - 2
U64 = 2**64
EXAMPLES = int(os.environ.get("EFD_MODEL_EXAMPLES") or full_or(20, 40))
STEPS = int(os.environ.get("EFD_MODEL_STEPS", "40"))


class WouldBlock(Exception):
    """The model's answer for a blocking call that would wait forever."""


class CounterModel:
    """SPEC §1 (the kernel object) plus SPEC §3 (acquire/release)."""

    def __init__(self, initval, semaphore, nonblocking):
        self.count = initval
        self.semaphore = semaphore
        self.nonblocking = nonblocking

    # -- argument rules shared by write() and release() ------------------
    @staticmethod
    def check_int(value, name):
        # bool is an int subclass and is accepted like one (as os does).
        if not isinstance(value, int):
            raise TypeError(name)
        return int(value)

    def _take(self):
        return 1 if self.semaphore else self.count

    # -- the syscalls ----------------------------------------------------
    def read(self):
        if self.count == 0:
            if self.nonblocking:
                raise BlockingIOError
            raise WouldBlock
        taken = self._take()
        self.count -= taken
        return taken

    def write(self, value):
        value = self.check_int(value, "value")
        if value < 0:
            raise ValueError("value")
        if value >= U64:
            raise OverflowError("value")
        if value == U64 - 1:
            raise OSError("EINVAL")
        if self.count + value > MAX:
            if self.nonblocking:
                raise BlockingIOError
            raise WouldBlock
        self.count += value

    # -- the semaphore layer ---------------------------------------------
    def acquire(self):
        """acquire(blocking=False), or a timed acquire that runs out."""
        if self.count == 0:
            return False
        self.count -= self._take()
        return True

    def release(self, n):
        n = self.check_int(n, "n")
        if n < 1 or n > MAX or self.count + n > MAX:
            raise ValueError("n")
        self.count += n


# Values chosen to sit on every edge of SPEC §1 and §3, plus random ones.
EDGES = st.sampled_from(
    [0, 1, 2, MAX - 1, MAX, U64 - 1, U64, 2**100, -1, -(2**64), True, False]
)
WRITE_VALUES = st.one_of(
    st.integers(0, 5),
    EDGES,
    st.integers(0, U64 + 1),
    st.integers(-5, -1),
    st.integers(MAX - 5, MAX),
    st.sampled_from([1.0, 2.5, float("nan"), "1", b"1", None, [1]]),
)
INITVALS = st.one_of(
    st.integers(0, 5), st.integers(MAX - 5, MAX), st.integers(0, MAX)
)


# ---- targets --------------------------------------------------------------


class EventFDTarget:
    """efd.EventFD on one backend; acquire/release are available."""

    has_semaphore_layer = True

    def __init__(self, backend, initval, semaphore, nonblocking):
        self.obj = efd.EventFD(initval, semaphore=semaphore,
                               nonblocking=nonblocking, backend=backend)
        assert self.obj.backend == backend

    def read(self):
        return self.obj.read()

    def write(self, value):
        return self.obj.write(value)

    def acquire(self, timeout):
        if timeout is None:
            return self.obj.acquire(blocking=False)
        return self.obj.acquire(timeout=timeout)

    def release(self, n):
        return self.obj.release(n)

    def peek(self):
        return self.obj._peek()

    def close(self):
        self.obj.close()


def fdinfo_count(fd):
    """eventfd-count from /proc/self/fdinfo (what the kernel holds)."""
    with open("/proc/self/fdinfo/%d" % fd) as f:
        for line in f:
            if line.startswith("eventfd-count:"):
                return int(line.split(":", 1)[1].strip(), 16)
    raise AssertionError("fd %d shows no eventfd-count" % fd)


class RawTarget:
    """A raw kernel eventfd through os.* (or efd's backport of them).

    The kernel limits initval to an unsigned int, so larger initial values
    are reached by a write after creation.  No acquire/release here: those
    are efd's, not the kernel's.
    """

    has_semaphore_layer = False

    def __init__(self, mod, initval, semaphore, nonblocking):
        self.mod = mod
        flags = mod.EFD_CLOEXEC
        if semaphore:
            flags |= mod.EFD_SEMAPHORE
        if nonblocking:
            flags |= mod.EFD_NONBLOCK
        self.fd = mod.eventfd(min(initval, 2**32 - 1), flags)
        if initval > 2**32 - 1:
            mod.eventfd_write(self.fd, initval - (2**32 - 1))

    def read(self):
        return self.mod.eventfd_read(self.fd)

    def write(self, value):
        return self.mod.eventfd_write(self.fd, value)

    def peek(self):
        return fdinfo_count(self.fd)

    def close(self):
        os.close(self.fd)


def efd_target(backend):
    return lambda *a: EventFDTarget(backend, *a)


def raw_target(mod):
    return lambda *a: RawTarget(mod, *a)


# ---- the state machine ------------------------------------------------------


def expect(model_call, real_call):
    """Run the model, then the real call; demand the same outcome."""
    try:
        want = model_call()
    except WouldBlock:
        raise
    except Exception as e:  # the model's verdict: this exception type
        want_exc = type(e)
    else:
        want_exc = None
    try:
        got = real_call()
    except Exception as e:
        if want_exc is None:
            raise AssertionError("model returned %r but target raised %r"
                                 % (want, e))
        assert isinstance(e, want_exc), (
            "model raises %s, target raised %r" % (want_exc.__name__, e))
        if want_exc is OSError:
            assert e.errno == 22, e  # EINVAL
        return None
    assert want_exc is None, (
        "model raises %s, target returned %r" % (want_exc.__name__, got))
    assert got == want, "model returned %r, target %r" % (want, got)
    return got


class EventFDMachine(RuleBasedStateMachine):
    make_target = None   # set per target by machine_for()

    def __init__(self):
        super().__init__()
        self.model = None
        self.target = None

    @initialize(initval=INITVALS, semaphore=st.booleans(),
                nonblocking=st.booleans())
    def create(self, initval, semaphore, nonblocking):
        self.model = CounterModel(initval, semaphore, nonblocking)
        self.target = type(self).make_target(initval, semaphore, nonblocking)

    def teardown(self):
        if self.target is not None:
            self.target.close()

    def _would_block(self, model_call):
        """True if the model says a blocking call would wait; the state is
        left unchanged (the model raises before changing anything)."""
        saved = self.model.count
        try:
            model_call()
        except WouldBlock:
            return True
        except Exception:
            pass
        self.model.count = saved
        return False

    @rule()
    def read(self):
        if self._would_block(self.model.read):
            return
        expect(self.model.read, self.target.read)

    @rule(value=WRITE_VALUES)
    def write(self, value):
        if self._would_block(lambda: self.model.write(value)):
            return
        expect(lambda: self.model.write(value),
               lambda: self.target.write(value))

    @precondition(lambda self: self.target.has_semaphore_layer)
    @rule()
    def acquire_nonblocking(self):
        expect(self.model.acquire, lambda: self.target.acquire(None))

    @precondition(lambda self: self.target.has_semaphore_layer)
    @rule(timeout=st.sampled_from([0, 0.001, 0.005, 0.02]))
    def acquire_timed(self, timeout):
        empty = self.model.count == 0
        t0 = time.monotonic()
        expect(self.model.acquire, lambda: self.target.acquire(timeout))
        elapsed = time.monotonic() - t0
        if empty:
            # Ran out: not early (1 ms of clock slack), not absurdly late.
            assert elapsed >= timeout - 0.001, (timeout, elapsed)
            assert elapsed < timeout + 2.0, (timeout, elapsed)

    @precondition(lambda self: self.target.has_semaphore_layer)
    @rule(n=WRITE_VALUES)
    def release(self, n):
        expect(lambda: self.model.release(n),
               lambda: self.target.release(n))

    @invariant()
    def counter_matches(self):
        if self.target is None:
            return
        seen = self.target.peek()
        if seen is not None:
            assert seen == self.model.count, (seen, self.model.count)


def machine_for(make_target, name):
    cls = type("Machine_" + name, (EventFDMachine,),
               {"make_target": staticmethod(make_target)})
    return cls


SETTINGS = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


def test_eventfd_matches_model(backend):
    # `backend` (conftest): every backend, or only the one $EFD_BACKEND names.
    run_state_machine_as_test(machine_for(efd_target(backend), backend),
                              settings=SETTINGS)


@pytest.mark.skipif(not hasattr(os, "eventfd"), reason="needs Python 3.10+")
def test_kernel_matches_model():
    """The model is checked against Linux itself."""
    run_state_machine_as_test(machine_for(raw_target(os), "os"),
                              settings=SETTINGS)


@pytest.mark.skipif(not efd._efd.HAVE_EVENTFD, reason="built without eventfd")
def test_backport_matches_model():
    """efd.eventfd/eventfd_read/eventfd_write behave as the kernel model."""
    run_state_machine_as_test(machine_for(raw_target(efd), "backport"),
                              settings=SETTINGS)


# ---- the model itself: a few fixed facts it must state -------------------


def test_model_states_the_spec():
    m = CounterModel(MAX, semaphore=False, nonblocking=True)
    with pytest.raises(BlockingIOError):
        m.write(1)
    m.write(0)
    with pytest.raises(OSError):
        m.write(U64 - 1)
    with pytest.raises(OverflowError):
        m.write(U64)
    with pytest.raises(ValueError):
        m.release(1)
    assert m.read() == MAX
    with pytest.raises(BlockingIOError):
        m.read()
    assert m.acquire() is False
    s = CounterModel(3, semaphore=True, nonblocking=False)
    assert [s.read(), s.read(), s.acquire(), s.acquire()] == [1, 1, True, False]
    with pytest.raises(WouldBlock):
        s.read()
    with pytest.raises(TypeError):
        s.write(1.0)
    with pytest.raises(ValueError):
        s.release(0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
