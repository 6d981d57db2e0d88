"""Hostile input and misuse: what every public callable does with bad input.

The tables below are the documentation.  Each row is a call, written as it
would be typed, and what it must do.  The names a row can use:

``ev``
    ``EventFD(5)`` on the backend under test (counter mode, blocking).
``sem``
    ``EventFD(5, semaphore=True)`` on the backend under test.
``nb``
    ``EventFD(5, nonblocking=True)`` on the backend under test.
``EventFD``
    ``efd.EventFD`` with ``backend=`` the backend under test (unless the
    row gives one).
``F``
    the module of the os.eventfd functions: ``efd``, and again ``os`` on
    Python 3.10+ (each such row must hold for both: efd's backport raises
    what the os module raises).
``rfd``
    a raw kernel eventfd (``EFD_NONBLOCK``) holding 5.
``Odd``, ``Idx``...
    the hostile integers defined below.

After every row that raises, each of ``ev``, ``sem``, ``nb`` and ``rfd``
still holds 5: bad input changes nothing.  A raising row also names what
was wrong (the third column is a substring of the message).
"""
import asyncio
import errno
import os
import socket
import sys
import tempfile
import threading
import time

import pytest

import efd
from conftest import PROMPT, backend_unavailable, kernel_eventfd_available

MAX = 2**64 - 2
NAN = float("nan")
INF = float("inf")


# ---- hostile integers ------------------------------------------------------


class Odd(int):
    """An int whose __index__ lies: Python uses the int value, not __index__."""

    def __index__(self):
        return 7


class IndexRaises(int):
    """An int whose __index__ raises: never called for an int subclass."""

    def __index__(self):
        raise RuntimeError("__index__ called")


class Idx:
    """Not an int, but has __index__ returning `v` (or raising `v`)."""

    def __init__(self, v):
        self.v = v

    def __index__(self):
        if isinstance(self.v, BaseException):
            raise self.v
        return self.v

    def __repr__(self):
        return "Idx(%r)" % (self.v,)


class BadBool:
    """An object whose truth value cannot be computed."""

    def __bool__(self):
        raise RuntimeError("no truth value")


class Boom(Exception):
    """Raised by hostile objects, to show it propagates untouched."""


# ---- the tables ------------------------------------------------------------

# EventFD(initval=0, *, semaphore=False, nonblocking=False, cloexec=True,
#         backend=None)
CONSTRUCTOR = [
    # call                                   raises          message has
    ("EventFD(-1)",                          ValueError,     "initval"),
    ("EventFD(-2**100)",                     ValueError,     "initval"),
    ("EventFD(2**64 - 1)",                   ValueError,     "initval"),
    ("EventFD(2**64)",                       OverflowError,  "initval"),
    ("EventFD(2**1000)",                     OverflowError,  "initval"),
    ("EventFD(1.0)",                         TypeError,      "initval"),
    ("EventFD(NAN)",                         TypeError,      "initval"),
    ("EventFD(INF)",                         TypeError,      "initval"),
    ("EventFD(None)",                        TypeError,      "initval"),
    ("EventFD('1')",                         TypeError,      "initval"),
    ("EventFD(b'1')",                        TypeError,      "initval"),
    ("EventFD(Idx(-1))",                     ValueError,     "initval"),
    ("EventFD(Idx(2**64))",                  OverflowError,  "initval"),
    ("EventFD(Idx(1.5))",                    TypeError,      "__index__"),
    ("EventFD(Idx(Boom('x')))",              Boom,           "x"),
    ("EventFD(0, True)",                     TypeError,      "positional"),
    ("EventFD(0, initval=1)",                TypeError,      "initval"),
    ("EventFD(semaphore=BadBool())",         RuntimeError,   "truth"),
    ("EventFD(nonblocking=BadBool())",       RuntimeError,   "truth"),
    ("EventFD(cloexec=BadBool())",           RuntimeError,   "truth"),
    ("EventFD(bogus=1)",                     TypeError,      "bogus"),
    ("EventFD(backend='nope')",              ValueError,     "backend"),
    ("EventFD(backend='')",                  ValueError,     "backend"),
    ("EventFD(backend=1)",                   TypeError,      "backend"),
    ("EventFD(backend=b'pipe')",             TypeError,      "backend"),
    ("EventFD(backend='pipe\\0junk')",       ValueError,     "backend"),
    ("EventFD(backend='\\udcff')",           UnicodeError,   "surrogate"),
    ("with_env('EFD_BACKEND', 'nope')",      ValueError,     "EFD_BACKEND"),
]

# ev.write(value=1): the write(2) syscall's rules.
WRITE = [
    ("ev.write(-1)",                         ValueError,     "value"),
    ("ev.write(2**64 - 1)",                  OSError,        "Invalid argument"),
    ("ev.write(2**64)",                      OverflowError,  "value"),
    ("ev.write(2**1000)",                    OverflowError,  "value"),
    ("ev.write(1.0)",                        TypeError,      "value"),
    ("ev.write(NAN)",                        TypeError,      "value"),
    ("ev.write(None)",                       TypeError,      "value"),
    ("ev.write('1')",                        TypeError,      "value"),
    ("ev.write(Idx(-1))",                    ValueError,     "value"),
    ("ev.write(Idx(2**64))",                 OverflowError,  "value"),
    ("ev.write(Idx('1'))",                   TypeError,      "__index__"),
    ("ev.write(Idx(Boom('x')))",             Boom,           "x"),
    ("ev.write(1, 2)",                       TypeError,      "positional"),
    ("ev.write(1, value=2)",                 TypeError,      "value"),
    ("ev.write(v=1)",                        TypeError,      "'v'"),
    ("nb.write(MAX)",                        BlockingIOError, ""),
    ("nb.write(MAX - 4)",                    BlockingIOError, ""),
]

# ev.read(): no arguments; non-blocking and empty is EAGAIN.
READ = [
    ("ev.read(1)",                           TypeError,      "argument"),
    ("ev.read(value=1)",                     TypeError,      "argument"),
    ("EventFD(nonblocking=True).read()",     BlockingIOError, ""),
    ("EventFD(nonblocking=True, semaphore=True).read()",
                                             BlockingIOError, ""),
]

# ev.acquire(blocking=True, timeout=None): threading.Semaphore's rules.
ACQUIRE = [
    ("ev.acquire(timeout=-1)",               ValueError,     "timeout"),
    ("ev.acquire(timeout=-0.001)",           ValueError,     "timeout"),
    ("ev.acquire(timeout=-INF)",             ValueError,     "timeout"),
    ("ev.acquire(timeout=-2**2000)",         ValueError,     "timeout"),
    ("ev.acquire(timeout=NAN)",              ValueError,     "timeout"),
    ("ev.acquire(timeout='1')",              TypeError,      "timeout"),
    ("ev.acquire(timeout=b'1')",             TypeError,      "timeout"),
    ("ev.acquire(timeout=[1])",              TypeError,      "timeout"),
    ("ev.acquire(timeout=1j)",               TypeError,      "timeout"),
    ("ev.acquire(False, 1)",                 ValueError,     "timeout"),
    ("ev.acquire(False, 0)",                 ValueError,     "timeout"),
    ("ev.acquire(blocking=False, timeout=INF)", ValueError,  "timeout"),
    ("ev.acquire(blocking=BadBool())",       RuntimeError,   "truth"),
    ("ev.acquire(True, 1, 2)",               TypeError,      "positional"),
    ("ev.acquire(True, blocking=True)",      TypeError,      "blocking"),
    ("ev.acquire(block=True)",               TypeError,      "'block'"),
]

# ev.release(n=1): n is one or more, and never passes 2**64 - 2.
RELEASE = [
    ("ev.release(0)",                        ValueError,     "n must be"),
    ("ev.release(-1)",                       ValueError,     "n must be"),
    ("ev.release(-2**100)",                  ValueError,     "n must be"),
    ("ev.release(False)",                    ValueError,     "n must be"),
    ("ev.release(MAX)",                      ValueError,     "maximum"),
    ("ev.release(MAX - 4)",                  ValueError,     "maximum"),
    ("ev.release(2**64 - 1)",                ValueError,     "2**64 - 2"),
    ("ev.release(2**64)",                    ValueError,     "2**64 - 2"),
    ("ev.release(2**1000)",                  ValueError,     "2**64 - 2"),
    ("ev.release(1.0)",                      TypeError,      "n must be"),
    ("ev.release(NAN)",                      TypeError,      "n must be"),
    ("ev.release(None)",                     TypeError,      "n must be"),
    ("ev.release('1')",                      TypeError,      "n must be"),
    ("ev.release(Idx(0))",                   ValueError,     "n must be"),
    ("ev.release(Idx(2**64))",               ValueError,     "2**64 - 2"),
    ("ev.release(Idx(None))",                TypeError,      "__index__"),
    ("ev.release(Idx(Boom('x')))",           Boom,           "x"),
    ("ev.release(1, 2)",                     TypeError,      "positional"),
    ("ev.release(count=1)",                  TypeError,      "'count'"),
]

# EventFD.from_fd(fd, *, semaphore=None, nonblocking=False): adopts kernel
# eventfds only.  On failure the caller still owns fd (it is not closed).
FROM_FD = [
    ("EventFD.from_fd(-1)",                  ValueError,     "fd"),
    ("EventFD.from_fd(-2**100)",             OverflowError,  "fd"),
    ("EventFD.from_fd(2**31)",               ValueError,     "fd"),
    ("EventFD.from_fd(2**64)",               OverflowError,  "fd"),
    ("EventFD.from_fd(1.0)",                 TypeError,      "fd"),
    ("EventFD.from_fd(None)",                TypeError,      "fd"),
    ("EventFD.from_fd('3')",                 TypeError,      "fd"),
    ("EventFD.from_fd(Idx(3))",              TypeError,      "fd"),
    ("EventFD.from_fd(pipe_fd)",             ValueError,     "not an eventfd"),
    ("EventFD.from_fd(file_fd)",             ValueError,     "not an eventfd"),
    ("EventFD.from_fd(socket_fd)",           ValueError,     "not an eventfd"),
    ("EventFD.from_fd(dev_null_fd)",         ValueError,     "not an eventfd"),
    ("EventFD.from_fd(closed_fd)",           OSError,        "Bad file"),
    ("EventFD.from_fd(sem_rfd, semaphore=False)", ValueError, "semaphore"),
    ("EventFD.from_fd(rfd, semaphore=BadBool())", RuntimeError, "truth"),
    ("EventFD.from_fd(rfd, nonblocking=BadBool())", RuntimeError, "truth"),
    ("EventFD.from_fd(rfd, True)",           TypeError,      "positional"),
    ("EventFD.from_fd(rfd, backend='pipe')", TypeError,      "backend"),
    ("EventFD.from_fd()",                    TypeError,      "fd"),
]

# efd.eventfd / eventfd_read / eventfd_write: as os.* on 3.10+ (F is both),
# and as 3.13's os on 3.8/3.9.  CPython 3.14 changed os's unsigned
# converters (initval, value): a negative value is "Cannot convert negative
# int" (was "value must be positive"), an object with __index__ is accepted
# (was "an integer is required"), and a non-integer gets PyNumber_Index's
# "'float' object cannot be interpreted as an integer".
OS_314 = sys.version_info >= (3, 14)
NEGATIVE = "Cannot convert negative int" if OS_314 else "value must be positive"
RAW_FUNCTIONS = [
    ("F.eventfd(-1)",                        ValueError,     NEGATIVE),
    ("F.eventfd(-(2**70))",                  ValueError,     NEGATIVE),
    ("F.eventfd(2**32)",                     OverflowError,  "unsigned int"),
    ("F.eventfd(2**64)",                     OverflowError,  ""),
    ("F.eventfd(1.0)",                       TypeError,      "integer"),
    ("F.eventfd(None)",                      TypeError,      "integer"),
    ("F.eventfd('1')",                       TypeError,      "integer"),
    ("F.eventfd(0, -1)",                     OSError,        "Invalid argument"),
    ("F.eventfd(0, 2**31)",                  OverflowError,  ""),
    ("F.eventfd(0, 2**64 - 1)",              OverflowError,  ""),
    ("F.eventfd(0, 1.0)",                    TypeError,      "integer"),
    ("F.eventfd(0, None)",                   TypeError,      "integer"),
    ("F.eventfd()",                          TypeError,      "initval"),
    ("F.eventfd(0, 0, 0)",                   TypeError,      "argument"),
    ("F.eventfd_read(-1)",                   ValueError,     "negative"),
    ("F.eventfd_read(2**64 - 1)",            OverflowError,  ""),
    ("F.eventfd_read(1.0)",                  TypeError,      "fileno"),
    ("F.eventfd_read(None)",                 TypeError,      "fileno"),
    ("F.eventfd_read(closed_fd)",            OSError,        "Bad file"),
    ("F.eventfd_read(empty_rfd)",            BlockingIOError, ""),
    ("F.eventfd_read()",                     TypeError,      "fd"),
    ("F.eventfd_write(rfd, -1)",             ValueError,     NEGATIVE),
    ("F.eventfd_write(rfd, 2**64 - 1)",      OSError,        "Invalid argument"),
    ("F.eventfd_write(rfd, 2**64)",          OverflowError,  ""),
    ("F.eventfd_write(rfd, 2**1000)",        OverflowError,  ""),
    ("F.eventfd_write(rfd, 1.0)",            TypeError,      "integer"),
    ("F.eventfd_write(rfd, None)",           TypeError,      "integer"),
    ("F.eventfd_write(rfd, Idx('1'))",       TypeError,      "__index__"
                                                             if OS_314 else "integer"),
    ("F.eventfd_write(rfd, Idx(-1))",        (ValueError if OS_314 else TypeError),
                                                             NEGATIVE if OS_314 else "integer"),
    ("F.eventfd(Idx(2**32))",                (OverflowError if OS_314 else TypeError),
                                                             "unsigned int" if OS_314 else "integer"),
] + ([] if OS_314 else [
    # Accepted from 3.14 on (tests/test_os_backport.py checks the value).
    ("F.eventfd_write(rfd, Idx(1))",         TypeError,      "integer"),
    ("F.eventfd(Idx(1))",                    TypeError,      "integer"),
]) + [
    ("F.eventfd_write(rfd, MAX)",            BlockingIOError, ""),
    ("F.eventfd_write(-1, 1)",               ValueError,     "negative"),
    ("F.eventfd_write(closed_fd, 1)",        OSError,        "Bad file"),
    ("F.eventfd_write(rfd)",                 TypeError,      "value"),
]

# Every method of a closed object except close() (and the properties).
CLOSED = [
    ("closed.fileno()",                      ValueError,     "closed"),
    ("closed.read()",                        ValueError,     "closed"),
    ("closed.write()",                       ValueError,     "closed"),
    ("closed.write(1)",                      ValueError,     "closed"),
    ("closed.acquire()",                     ValueError,     "closed"),
    ("closed.acquire(False)",                ValueError,     "closed"),
    ("closed.acquire(timeout=0)",            ValueError,     "closed"),
    ("closed.acquire(timeout=None)",         ValueError,     "closed"),
    ("closed.release()",                     ValueError,     "closed"),
    ("closed.release(3)",                    ValueError,     "closed"),
    ("closed.__enter__()",                   ValueError,     "closed"),
    ("closed._peek()",                       ValueError,     "closed"),
    ("closed._fds()",                        ValueError,     "closed"),
    ("run(closed.acquire_async())",          ValueError,     "closed"),
    ("run(closed.acquire_async(0))",         ValueError,     "closed"),
    ("run(closed.read_async())",             ValueError,     "closed"),
]

# Hostile but valid: accepted, with the value Python itself would use.
# (call, result, ev's count afterwards)
ACCEPTED = [
    ("ev.write(True)",                       None,  6),
    ("ev.write(False)",                      None,  5),
    ("ev.write(0)",                          None,  5),
    ("ev.write(Odd(3))",                     None,  8),   # the int value
    ("ev.write(IndexRaises(3))",             None,  8),
    ("ev.write(Idx(3))",                     None,  8),   # __index__
    ("ev.write(MAX - 5)",                    None,  MAX),
    ("ev.release(True)",                     None,  6),
    ("ev.release(Odd(3))",                   None,  8),
    ("ev.release(Idx(3))",                   None,  8),
    ("ev.release(MAX - 5)",                  None,  MAX),
    ("ev.acquire(blocking=0)",               True,  0),
    ("ev.acquire(timeout=0)",                True,  0),
    ("ev.acquire(timeout=INF)",              True,  0),
    ("ev.acquire(timeout=2**2000)",          True,  0),
    ("ev.acquire(timeout=1e308)",            True,  0),
    ("ev.acquire(timeout=5e-324)",           True,  0),
    ("ev.acquire(timeout=Odd(1))",           True,  0),
    ("ev.acquire(True, None)",               True,  0),
    ("ev.acquire(False, None)",              True,  0),
    ("EventFD(Odd(3))._peek()",              3,     5),
    ("EventFD(Idx(3))._peek()",              3,     5),
    ("EventFD(True)._peek()",                1,     5),
    ("EventFD(MAX)._peek()",                 MAX,   5),
    ("EventFD(backend=None).closed",         False, 5),
    ("EventFD(cloexec=0).closed",            False, 5),
    ("empty.acquire(timeout=0)",             False, 5),
    ("empty.acquire(False)",                 False, 5),
    ("empty.acquire(timeout=5e-324)",        False, 5),
    ("closed.close()",                       None,  5),
    ("closed.closed",                        True,  5),
]


def _rows(table):
    return [pytest.param(*row, id=row[0]) for row in table]


# ---- the world a row runs in ---------------------------------------------


def fdinfo_count(fd):
    with open("/proc/self/fdinfo/%d" % fd) as f:
        for line in f:
            if line.startswith("eventfd-count:"):
                return int(line.split(":", 1)[1], 16)
    raise AssertionError("fd %d is not an eventfd" % fd)


class World:
    """The objects a row may name, made fresh for each row."""

    def __init__(self, backend):
        self.backend = backend
        self.owned = []      # closed at the end
        self.raw = []        # raw fds, closed at the end
        self.made = []       # objects a row created

    def make(self, *args, **kwargs):
        kwargs.setdefault("backend", self.backend)
        ev = efd.EventFD(*args, **kwargs)
        self.made.append(ev)
        return ev

    def namespace(self, F=efd):
        ns = dict(globals())
        w = self

        class BoundEventFD:
            """efd.EventFD with the backend under test by default."""

            def __new__(cls, *args, **kwargs):
                return w.make(*args, **kwargs)

            @staticmethod
            def from_fd(*args, **kwargs):
                ev = efd.EventFD.from_fd(*args, **kwargs)
                w.made.append(ev)
                return ev

        self.ev = self.make(5)
        self.sem = self.make(5, semaphore=True)
        self.nb = self.make(5, nonblocking=True)
        self.empty = self.make(0)
        self.closed = self.make(5)
        self.closed.close()
        ns.update(ev=self.ev, sem=self.sem, nb=self.nb, empty=self.empty,
                  closed=self.closed, EventFD=BoundEventFD, F=F,
                  with_env=self.with_env, run=run)
        if kernel_eventfd_available():
            self.rfd = self.fd(efd.eventfd(5, efd.EFD_NONBLOCK | efd.EFD_CLOEXEC))
            ns["rfd"] = self.rfd
            ns["sem_rfd"] = self.fd(efd.eventfd(
                5, efd.EFD_NONBLOCK | efd.EFD_CLOEXEC | efd.EFD_SEMAPHORE))
            ns["empty_rfd"] = self.fd(efd.eventfd(
                0, efd.EFD_NONBLOCK | efd.EFD_CLOEXEC))
        r, wr = os.pipe()
        ns["pipe_fd"] = self.fd(r)
        self.fd(wr)
        tmp = tempfile.TemporaryFile()
        self.owned.append(tmp)
        ns["file_fd"] = tmp.fileno()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.owned.append(s)
        ns["socket_fd"] = s.fileno()
        ns["dev_null_fd"] = self.fd(os.open(os.devnull, os.O_RDONLY))
        closed_fd = os.open(os.devnull, os.O_RDONLY)
        os.close(closed_fd)
        ns["closed_fd"] = closed_fd
        return ns

    def fd(self, fd):
        self.raw.append(fd)
        return fd

    def with_env(self, name, value):
        old = os.environ.get(name)
        os.environ[name] = value
        try:
            ev = efd.EventFD()
            self.made.append(ev)
            return ev
        finally:
            if old is None:
                del os.environ[name]
            else:
                os.environ[name] = old

    def unchanged(self):
        """Every pre-made counter still holds 5; raw fds still open."""
        for name in ("ev", "sem", "nb"):
            seen = getattr(self, name)._peek()
            assert seen in (5, None), "%s now holds %r" % (name, seen)
        if hasattr(self, "rfd"):
            assert fdinfo_count(self.rfd) == 5
        for fd in self.raw:
            os.fstat(fd)   # a failed from_fd() must not close the fd

    def close(self):
        for ev in self.made:
            ev.close()
        for obj in self.owned:
            obj.close()
        for fd in self.raw:
            try:
                os.close(fd)
            except OSError:
                pass   # adopted (and closed) by a successful from_fd()


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, PROMPT))


@pytest.fixture
def world(backend):
    why = backend_unavailable(backend, semaphore=True)
    if why:
        pytest.skip(why)
    w = World(backend)
    yield w
    w.close()


def check_raises(call, ns, exc, message):
    needs = [n for n in ("rfd", "sem_rfd", "empty_rfd") if n in call]
    if any(n not in ns for n in needs):
        pytest.skip("needs a kernel eventfd")
    if "_async(" in call and not hasattr(efd.EventFD, "acquire_async"):
        pytest.skip("no asyncio support yet")
    with pytest.raises(exc) as info:
        eval(call, ns)
    assert message in str(info.value), (
        "%s: %r does not mention %r" % (call, info.value, message))
    if exc is OSError and "Invalid argument" in message:
        assert info.value.errno == errno.EINVAL
    if exc is OSError and "Bad file" in message:
        assert info.value.errno == errno.EBADF


@pytest.mark.parametrize(
    "call, exc, message",
    _rows(CONSTRUCTOR + WRITE + READ + ACQUIRE + RELEASE + FROM_FD + CLOSED))
def test_bad_input_raises_and_changes_nothing(world, call, exc, message):
    ns = world.namespace()
    check_raises(call, ns, exc, message)
    world.unchanged()


@pytest.mark.skipif(not kernel_eventfd_available(), reason="no kernel eventfd")
@pytest.mark.parametrize("call, exc, message", _rows(RAW_FUNCTIONS))
@pytest.mark.parametrize("module", ["efd", "os"])
def test_raw_functions_raise_as_os_does(world, module, call, exc, message):
    if module == "os" and not hasattr(os, "eventfd"):
        pytest.skip("os.eventfd needs Python 3.10+")
    ns = world.namespace(F=efd if module == "efd" else os)
    check_raises(call, ns, exc, message)
    world.unchanged()


@pytest.mark.parametrize("call, result, count", _rows(ACCEPTED))
def test_hostile_but_valid_input_is_accepted(world, call, result, count):
    ns = world.namespace()
    assert eval(call, ns) == result
    assert world.ev._peek() in (count, None)


# ---- efd.Semaphore, efd.BoundedSemaphore and efd.Event: threading's rules -

# `s` is Semaphore(5), `b` BoundedSemaphore(5) (at its bound), `e` an unset
# Event, all on the backend under test.  A timeout that is not above zero is
# not an error here (the drop-ins only try once, as threading does): see
# test_dropins.py.  Messages name the argument the user passed.
DROPINS = [
    ("efd.Semaphore(-1)",                    ValueError,     "value"),
    ("efd.Semaphore(-2**100)",               ValueError,     "value"),
    ("efd.Semaphore('1')",                   TypeError,      "value"),
    ("efd.Semaphore(1.5)",                   TypeError,      "value"),
    ("efd.Semaphore(None)",                  TypeError,      "value"),
    ("efd.Semaphore(2**64 - 1)",             ValueError,     "value"),
    ("efd.Semaphore(2**64)",                 OverflowError,  "value"),
    ("efd.Semaphore(Idx(1.5))",              TypeError,      "__index__"),
    ("efd.Semaphore(Idx(Boom('x')))",        Boom,           "x"),
    ("efd.Semaphore(value=-1)",              ValueError,     "value"),
    ("efd.Semaphore(initval=1)",             TypeError,      "initval"),
    ("efd.Semaphore(1, backend='nope')",     ValueError,     "backend"),
    ("efd.BoundedSemaphore(-1)",             ValueError,     "value"),
    ("efd.BoundedSemaphore(1.5)",            TypeError,      "value"),
    ("efd.BoundedSemaphore(2**64)",          OverflowError,  "value"),
    ("s.release(0)",                         ValueError,     "n must be"),
    ("s.release(-1)",                        ValueError,     "n must be"),
    ("s.release(1.0)",                       TypeError,      "n must be"),
    ("s.release(MAX)",                       ValueError,     "maximum"),
    ("s.acquire(False, 1)",                  ValueError,     "timeout"),
    ("s.acquire(False, -1)",                 ValueError,     "timeout"),
    ("s.acquire(timeout=NAN)",               ValueError,     "timeout"),
    ("s.acquire(timeout='1')",               TypeError,      "timeout"),
    ("s.acquire(timeout=1j)",                TypeError,      "timeout"),
    ("s.acquire(blocking=BadBool())",        RuntimeError,   "truth"),
    ("b.release()",                          ValueError,     "too many times"),
    ("b.release(2)",                         ValueError,     "too many times"),
    ("b.release(2**64)",                     ValueError,     "too many times"),
    ("b.release(0)",                         ValueError,     "n must be"),
    ("b.release(1.0)",                       TypeError,      "n must be"),
    ("b.release(Idx(Boom('x')))",            Boom,           "x"),
    ("e.wait('1')",                          TypeError,      "timeout"),
    ("e.wait(1j)",                           TypeError,      "timeout"),
]


@pytest.mark.skipif(not hasattr(efd, "Semaphore"), reason="no efd.Semaphore")
@pytest.mark.parametrize("call, exc, message", _rows(DROPINS))
def test_dropins_reject_bad_input(backend, call, exc, message):
    s = efd.Semaphore(5, backend=backend)
    b = efd.BoundedSemaphore(5, backend=backend)
    e = efd.Event(backend=backend)
    try:
        with pytest.raises(exc) as info:
            made = eval(call, dict(globals(), s=s, b=b, e=e))
            made.close()   # only reached if nothing was raised
        assert message in str(info.value)
        assert s._ev._peek() in (5, None)
        assert b._ev._peek() in (5, None)
        assert not e.is_set()
    finally:
        s.close()
        b.close()
        e.close()


# ---- close() from another thread while a thread waits ----------------------

BLOCKING_CALLS = [
    # (what the waiter calls, initial count, semaphore)
    ("read()", 0),
    ("write(MAX)", 5),                   # would pass 2**64 - 2: waits
    ("acquire()", 0),
    ("acquire(timeout=60)", 0),
    ("acquire(True, 1e9)", 0),
]


def _waiter(ev, call, outcome):
    try:
        outcome.append(eval("ev." + call, {"ev": ev, "MAX": MAX}))
    except BaseException as e:   # reported to the main thread
        outcome.append(e)


@pytest.mark.parametrize("call, initval", BLOCKING_CALLS)
@pytest.mark.parametrize("semaphore", [False, True],
                         ids=["counter", "semaphore"])
def test_close_mid_wait_wakes_the_waiter(backend, call, initval, semaphore):
    why = backend_unavailable(backend, semaphore)
    if why:
        pytest.skip(why)
    ev = efd.EventFD(initval, semaphore=semaphore, backend=backend)
    fds = ev._fds()
    # A second view of the same counter, to check nothing was consumed.
    view = efd.EventFD._from_fds(tuple(os.dup(fd) for fd in fds), backend,
                                 semaphore, True)
    outcome = []
    t = threading.Thread(target=_waiter, args=(ev, call, outcome), daemon=True)
    t.start()
    time.sleep(0.2)                      # time to enter the wait
    assert t.is_alive() and not outcome, "the call did not wait: %r" % outcome
    t0 = time.monotonic()
    ev.close()
    t.join(PROMPT)
    woke_in = time.monotonic() - t0
    try:
        assert not t.is_alive(), "close() did not wake the waiter"
        assert woke_in < PROMPT
        assert len(outcome) == 1 and isinstance(outcome[0], ValueError), outcome
        assert "closed" in str(outcome[0])
        assert view._peek() in (initval, None), "the waiter consumed something"
        for fd in fds:   # the last waiter really closed the descriptors
            with pytest.raises(OSError):
                os.fstat(fd)
    finally:
        view.close()


@pytest.mark.skipif(not hasattr(efd.EventFD, "acquire_async"),
                    reason="no asyncio support yet")
@pytest.mark.parametrize("method", ["acquire_async()", "acquire_async(60)",
                                    "read_async()"])
def test_close_mid_async_wait_wakes_the_task(backend, method):
    ev = efd.EventFD(0, backend=backend)
    view = efd.EventFD._from_fds(tuple(os.dup(fd) for fd in ev._fds()),
                                 backend, False, True)
    outcome = []
    started = threading.Event()

    async def main():
        loop = asyncio.get_running_loop()
        loop.call_soon(started.set)
        try:
            outcome.append(await eval("ev." + method, {"ev": ev}))
        except BaseException as e:
            outcome.append(e)

    t = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
    t.start()
    assert started.wait(PROMPT)
    time.sleep(0.1)
    ev.close()
    t.join(PROMPT)
    try:
        assert not t.is_alive(), "close() did not wake the task"
        assert len(outcome) == 1 and isinstance(outcome[0], ValueError), outcome
        view.release(1)
        assert view._peek() in (1, None)
    finally:
        view.close()


# ---- fork while another thread is blocked in acquire ----------------------

FORK_CHILD = r"""
import os, sys, threading, time
import efd

ev = efd.EventFD(0, semaphore=True, backend=%(backend)r)
got = []
t = threading.Thread(target=lambda: got.append(ev.acquire(timeout=30)),
                     daemon=True)
t.start()
time.sleep(0.2)                       # t is now blocked in acquire()
assert t.is_alive()
pid = os.fork()
if pid == 0:
    # Child: only this thread exists.  The object works, and close() neither
    # hangs (the parent's waiter is not ours) nor disturbs the parent.
    code = 0
    try:
        if %(child_uses)r:
            ev.release(3)
            if not ev.acquire(timeout=10):
                code = 2
            w = []
            tw = threading.Thread(target=lambda: w.append(ev.acquire(timeout=10)))
            tw.start()
            time.sleep(0.1)
            ev.release(1)
            tw.join(10)
            if w != [True]:
                code = 3
        ev.close()
        if not ev.closed:
            code = 4
    except BaseException as e:
        sys.stderr.write("child: %%r\n" %% (e,))
        code = 5
    os._exit(code)
_, status = os.waitpid(pid, 0)
assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
if %(child_uses)r:
    # The child released 4 and took 2; our waiter may have taken one of them.
    t.join(10)
    assert got == [True], got
    assert ev._peek() in (1, None), ev._peek()
    assert ev.acquire(timeout=5)
else:
    # The child's close() must not have woken or broken our waiter.
    time.sleep(0.2)
    assert t.is_alive() and not got, got
    ev.release(1)
    t.join(10)
    assert got == [True], got
# Our waiter machinery still works after the fork.
got2 = []
t2 = threading.Thread(target=lambda: got2.append(ev.acquire(timeout=10)))
t2.start()
time.sleep(0.1)
ev.release(1)
t2.join(10)
assert got2 == [True], got2
assert ev._peek() in (0, None)
ev.close()
print("ok")
"""


@pytest.mark.parametrize("child_uses", [True, False],
                         ids=["child-uses", "child-closes"])
def test_fork_while_a_thread_waits(backend, run_py, child_uses):
    why = backend_unavailable(backend, semaphore=True)
    if why:
        pytest.skip(why)
    proc = run_py(FORK_CHILD % {"backend": backend, "child_uses": child_uses},
                  timeout=60)
    assert proc.stdout.strip() == "ok"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
