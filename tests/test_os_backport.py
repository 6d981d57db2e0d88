"""efd.eventfd / eventfd_read / eventfd_write: the os.eventfd backport.

SPEC §5 "Pythons": the backport behaves as the running interpreter's ``os``
where it has ``os.eventfd`` (3.10+), and as 3.13's on 3.8 and 3.9.

On Python 3.10+ each input of a table goes to both the os function and
ours, on identically prepared descriptors; results, exception types and
messages, and the counter afterwards must agree, whatever this version's
``os`` says.  The differences between versions are then stated explicitly
(``test_unsigned_arguments_*``), and those tests run on 3.8/3.9 too:

* up to 3.13, ``initval`` and ``value`` must be ints ("an integer is
  required"); a negative one is "value must be positive";
* from 3.14, they take any object with ``__index__``; a negative one is
  "Cannot convert negative int", an overflow names the C type, and a
  non-integer gets PyNumber_Index's "... cannot be interpreted as an
  integer".

Where efd goes beyond os: ``eventfd_read``/``eventfd_write`` refuse an
``efd.EventFD`` whose descriptor is not a kernel eventfd (os would read the
pipe backend's readiness token).  (Behaviour under signals, where efd
deliberately differs, is in test_signals.py.)
"""

import errno
import fcntl
import os
import sys

import pytest

import efd
from conftest import kernel_eventfd_available

pytestmark = pytest.mark.skipif(not kernel_eventfd_available(),
                                reason="the backport needs a kernel eventfd")

HAVE_OS = hasattr(os, "eventfd")
needs_os = pytest.mark.skipif(not HAVE_OS, reason="os.eventfd needs 3.10+")
MAX = 2**64 - 2


class FileLike:
    def __init__(self, fd):
        self.fd = fd

    def fileno(self):
        return self.fd


class Index:
    """An integer-like object (has __index__ but is not an int)."""

    def __init__(self, value=3):
        self.value = value

    def __index__(self):
        return self.value

    def __repr__(self):
        return "Index(%r)" % (self.value,)


class LyingInt(int):
    """An int whose __index__ disagrees: the int value is the one used."""

    def __index__(self):
        return 7


def fd_flags(fd):
    return (fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC,
            fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK)


def count_of(fd):
    with open("/proc/self/fdinfo/%d" % fd) as f:
        for line in f:
            if line.startswith("eventfd-count:"):
                return int(line.split()[1], 16)
    return None


def semaphore_mode(fd):
    """1/0 from fdinfo, or None where the kernel does not show it."""
    with open("/proc/self/fdinfo/%d" % fd) as f:
        for line in f:
            if line.startswith("eventfd-semaphore:"):
                return int(line.split()[1])
    return None


def outcome(fn, *args, **kwargs):
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as e:
        return ("raise", type(e), str(e))


# ---- eventfd() -------------------------------------------------------------

EVENTFD_CASES = [
    ((0,), {}), ((1,), {}), ((2**32 - 1,), {}), ((True,), {}),
    ((-1,), {}), ((2**32,), {}), ((2**64,), {}), ((-(2**70),), {}),
    ((1.5,), {}), (("1",), {}), ((None,), {}), ((Index(),), {}),
    ((Index(-1),), {}), ((Index(2**32),), {}), ((Index("1"),), {}),
    ((LyingInt(3),), {}),
    ((0, 0), {}), ((7, efd.EFD_SEMAPHORE), {}),
    ((0, efd.EFD_NONBLOCK | efd.EFD_CLOEXEC | efd.EFD_SEMAPHORE), {}),
    ((0, True), {}), ((0, Index()), {}), ((0, 1.0), {}), ((0, "x"), {}),
    ((0, None), {}), ((0, -1), {}), ((0, 12345678), {}),
    ((0, 2**31), {}), ((0, -(2**31) - 1), {}), ((0, 2**64), {}),
    ((), {"initval": 5}), ((), {"initval": 5, "flags": efd.EFD_NONBLOCK}),
    ((5,), {"flags": 0}),
]


def describe_new_fd(result):
    """Replace a new descriptor by what it is (and close it)."""
    kind, value = result[0], result[1]
    if kind != "ok":
        return result
    try:
        return ("ok", fd_flags(value), count_of(value), semaphore_mode(value))
    finally:
        os.close(value)


@needs_os
@pytest.mark.parametrize("args,kwargs", EVENTFD_CASES,
                         ids=[repr(c) for c in EVENTFD_CASES])
def test_eventfd_same_as_os(args, kwargs):
    mine = describe_new_fd(outcome(efd.eventfd, *args, **kwargs))
    theirs = describe_new_fd(outcome(os.eventfd, *args, **kwargs))
    assert mine == theirs


# ---- eventfd_read() ----------------------------------------------------------------

def read_cases():
    """(name, make_arg(fd) -> argument, needs_closing) for eventfd_read."""
    return [
        ("int", lambda fd: fd),
        ("fileno()", lambda fd: FileLike(fd)),
        ("negative", lambda fd: -1),
        ("closed", lambda fd: closed_fd()),
        ("2**31", lambda fd: 2**31),
        ("2**63", lambda fd: 2**63),
        ("float", lambda fd: float(fd)),
        ("str", lambda fd: str(fd)),
        ("None", lambda fd: None),
        ("__index__", lambda fd: Index()),
        ("fileno-negative", lambda fd: FileLike(-1)),
        ("fileno-str", lambda fd: FileLike("x")),
    ]


def closed_fd():
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    return r


READ_CASES = read_cases()


@needs_os
@pytest.mark.parametrize("initval", [0, 3])
@pytest.mark.parametrize("semaphore", [False, True], ids=["counter", "semaphore"])
@pytest.mark.parametrize("name,make_arg", READ_CASES,
                         ids=[c[0] for c in READ_CASES])
def test_eventfd_read_same_as_os(name, make_arg, semaphore, initval):
    flags = efd.EFD_NONBLOCK | (efd.EFD_SEMAPHORE if semaphore else 0)
    results = []
    for fn in (efd.eventfd_read, os.eventfd_read):
        fd = os.eventfd(initval, flags)
        try:
            results.append((outcome(fn, make_arg(fd)), count_of(fd)))
        finally:
            os.close(fd)
    assert results[0] == results[1]


# ---- eventfd_write() ---------------------------------------------------------------

WRITE_VALUES = [0, 1, 5, True, False, 2**32, MAX - 3, MAX, 2**64 - 1, 2**64,
                -1, -(2**70), 1.5, "1", None, Index(), Index(0), Index(-1),
                Index(2**64), Index(1.0), LyingInt(3)]


@needs_os
@pytest.mark.parametrize("initval", [0, 3])
@pytest.mark.parametrize("value", WRITE_VALUES, ids=[repr(v) for v in WRITE_VALUES])
def test_eventfd_write_same_as_os(value, initval):
    results = []
    for fn in (efd.eventfd_write, os.eventfd_write):
        fd = os.eventfd(initval, efd.EFD_NONBLOCK)
        try:
            results.append((outcome(fn, fd, value), count_of(fd)))
        finally:
            os.close(fd)
    assert results[0] == results[1]


@needs_os
@pytest.mark.parametrize("name,make_arg", READ_CASES,
                         ids=[c[0] for c in READ_CASES])
def test_eventfd_write_fd_argument_same_as_os(name, make_arg):
    results = []
    for fn in (efd.eventfd_write, os.eventfd_write):
        fd = os.eventfd(0, efd.EFD_NONBLOCK)
        try:
            results.append((outcome(fn, make_arg(fd), 2), count_of(fd)))
        finally:
            os.close(fd)
    assert results[0] == results[1]


KEYWORD_CALLS = [
    ("eventfd", lambda fd: ((), {})),
    ("eventfd", lambda fd: ((0, 0, 0), {})),
    ("eventfd", lambda fd: ((0,), {"bogus": 1})),
    ("eventfd", lambda fd: ((0,), {"initval": 1})),
    ("eventfd_read", lambda fd: ((), {})),
    ("eventfd_read", lambda fd: ((fd, 1), {})),
    ("eventfd_read", lambda fd: ((), {"fd": fd})),
    ("eventfd_write", lambda fd: ((fd,), {})),
    ("eventfd_write", lambda fd: ((), {"fd": fd, "value": 4})),
    ("eventfd_write", lambda fd: ((fd,), {"value": 4, "bogus": 0})),
]


@needs_os
@pytest.mark.parametrize("name,make_args", KEYWORD_CALLS,
                         ids=["%s-%d" % (c[0], i) for i, c in enumerate(KEYWORD_CALLS)])
def test_keywords_and_arity_same_as_os(name, make_args):
    results = []
    for module in (efd, os):
        fd = os.eventfd(3, os.EFD_NONBLOCK)
        try:
            args, kwargs = make_args(fd)
            r = outcome(getattr(module, name), *args, **kwargs)
            if r[0] == "ok" and name == "eventfd":
                r = describe_new_fd(r)
            # Argument-parsing messages come from different machinery; the
            # exception types (and any results) must agree.
            results.append((r[:2] if r[0] == "raise" else r, count_of(fd)))
        finally:
            os.close(fd)
    assert results[0] == results[1]


@needs_os
def test_constants_equal_os():
    assert efd.EFD_CLOEXEC == os.EFD_CLOEXEC
    assert efd.EFD_NONBLOCK == os.EFD_NONBLOCK
    assert efd.EFD_SEMAPHORE == os.EFD_SEMAPHORE


# ---- on every Python (3.8 and 3.9 included) ---------------------------------------

def test_constants():
    assert efd.EFD_CLOEXEC == os.O_CLOEXEC
    assert efd.EFD_NONBLOCK == os.O_NONBLOCK
    assert efd.EFD_SEMAPHORE == 1


def test_default_flags_are_cloexec_only():
    fd = efd.eventfd(0)
    try:
        assert fd_flags(fd) == (fcntl.FD_CLOEXEC, 0)
        assert not os.get_inheritable(fd)
        assert semaphore_mode(fd) in (0, None)
    finally:
        os.close(fd)
    fd = efd.eventfd(0, 0)
    try:
        assert fd_flags(fd) == (0, 0)
    finally:
        os.close(fd)


def test_functions_follow_the_table():
    fd = efd.eventfd(5, efd.EFD_NONBLOCK)
    try:
        assert efd.eventfd_read(fd) == 5
        with pytest.raises(BlockingIOError):
            efd.eventfd_read(fd)
        efd.eventfd_write(fd, 0)
        efd.eventfd_write(fd, MAX)
        with pytest.raises(BlockingIOError):
            efd.eventfd_write(fd, 1)
        with pytest.raises(OSError) as info:
            efd.eventfd_write(fd, 2**64 - 1)
        assert info.value.errno == errno.EINVAL
        assert efd.eventfd_read(FileLike(fd)) == MAX
        efd.eventfd_write(FileLike(fd), 2)
        assert count_of(fd) == 2
    finally:
        os.close(fd)


def test_semaphore_flag():
    fd = efd.eventfd(2, efd.EFD_SEMAPHORE | efd.EFD_NONBLOCK)
    try:
        assert semaphore_mode(fd) in (1, None)
        assert [efd.eventfd_read(fd), efd.eventfd_read(fd)] == [1, 1]
        with pytest.raises(BlockingIOError):
            efd.eventfd_read(fd)
    finally:
        os.close(fd)


def test_initval_is_32_bit_as_in_os():
    with pytest.raises(OverflowError):
        efd.eventfd(2**32)
    with pytest.raises(ValueError):
        efd.eventfd(-1)
    fd = efd.eventfd(2**32 - 1)
    try:
        assert count_of(fd) == 2**32 - 1
    finally:
        os.close(fd)


def test_blocking_read_is_woken_by_a_writer():
    import threading
    fd = efd.eventfd(0)          # a blocking descriptor, as os makes it
    try:
        timer = threading.Timer(0.1, efd.eventfd_write, (fd, 9))
        timer.start()
        assert efd.eventfd_read(fd) == 9
        timer.join(5)
    finally:
        os.close(fd)


def test_bad_descriptor():
    with pytest.raises(OSError) as info:
        efd.eventfd_read(closed_fd())
    assert info.value.errno == errno.EBADF
    with pytest.raises(ValueError):
        efd.eventfd_write(-1, 1)


# ---- what changed between versions, stated explicitly (every Python) ------

#: CPython 3.14 changed the os module's unsigned converters.
OS_314 = sys.version_info >= (3, 14)


def test_unsigned_arguments_negative():
    message = ("Cannot convert negative int" if OS_314
               else "value must be positive")
    with pytest.raises(ValueError, match="^%s$" % message):
        efd.eventfd(-1)
    fd = efd.eventfd(4, efd.EFD_NONBLOCK)
    try:
        with pytest.raises(ValueError, match="^%s$" % message):
            efd.eventfd_write(fd, -(2**70))
        assert count_of(fd) == 4
    finally:
        os.close(fd)


def test_unsigned_arguments_non_integers():
    message = ("'float' object cannot be interpreted as an integer" if OS_314
               else "an integer is required")
    with pytest.raises(TypeError, match="^%s$" % message):
        efd.eventfd(1.0)
    fd = efd.eventfd(4, efd.EFD_NONBLOCK)
    try:
        with pytest.raises(TypeError, match="^%s$" % message):
            efd.eventfd_write(fd, 1.0)
        assert count_of(fd) == 4
    finally:
        os.close(fd)


def test_unsigned_arguments_index_objects():
    """__index__ is used from 3.14 on, refused before."""
    fd = efd.eventfd(4, efd.EFD_NONBLOCK)
    try:
        if OS_314:
            efd.eventfd_write(fd, Index(3))
            assert count_of(fd) == 7
            new = efd.eventfd(Index(9))
            try:
                assert count_of(new) == 9
            finally:
                os.close(new)
            with pytest.raises(ValueError, match="negative"):
                efd.eventfd_write(fd, Index(-1))
            with pytest.raises(TypeError, match="__index__"):
                efd.eventfd_write(fd, Index("1"))
        else:
            for bad in (Index(3), Index(-1), Index("1")):
                with pytest.raises(TypeError, match="^an integer is required$"):
                    efd.eventfd_write(fd, bad)
                with pytest.raises(TypeError, match="^an integer is required$"):
                    efd.eventfd(bad)
            assert count_of(fd) == 4
        # An int subclass is an int: its own value, never its __index__.
        efd.eventfd_write(fd, LyingInt(3))
        assert count_of(fd) == (10 if OS_314 else 7)
    finally:
        os.close(fd)


def test_unsigned_arguments_overflow():
    big_uint = "Python int too large for C unsigned int"      # every version
    huge_uint = ("Python int too large for C unsigned int" if OS_314
                 else "Python int too large to convert to C unsigned long")
    huge_ull = ("Python int too large for C unsigned long long" if OS_314
                else "int too big to convert")
    with pytest.raises(OverflowError, match="^%s$" % big_uint):
        efd.eventfd(2**32)
    with pytest.raises(OverflowError, match="^%s$" % huge_uint):
        efd.eventfd(2**64)
    fd = efd.eventfd(4, efd.EFD_NONBLOCK)
    try:
        with pytest.raises(OverflowError, match="^%s$" % huge_ull):
            efd.eventfd_write(fd, 2**64)
        assert count_of(fd) == 4
    finally:
        os.close(fd)


# ---- only a kernel eventfd; short reads ---------------------------------------

KERNEL_COUNTERS = ("eventfd", "eventfd-readback")


def test_eventfd_object_needs_a_kernel_counter(backend):
    """An EventFD over a kernel eventfd is a file-like fd argument as any
    other; one of any other backend is refused, naming the backend, and
    nothing is consumed (its descriptor only signals readiness)."""
    import select
    ev = efd.EventFD(3, backend=backend, nonblocking=True)
    try:
        if backend in KERNEL_COUNTERS:
            assert efd.eventfd_read(ev) == 3
            efd.eventfd_write(ev, 2)
            assert ev.read() == 2
        else:
            for call, method in ((lambda: efd.eventfd_read(ev), "read()"),
                                 (lambda: efd.eventfd_write(ev, 1), "write()"),
                                 (lambda: efd.eventfd_read(fd=ev), "read()")):
                with pytest.raises(ValueError) as info:
                    call()
                message = str(info.value)
                assert "'%s' backend" % backend in message, message
                assert "argument 'fd'" in message, message
                assert "not a kernel eventfd" in message, message
                assert method in message, message
            assert select.select([ev], [], [], 0)[0] == [ev]
            assert ev.read() == 3
    finally:
        ev.close()
    # A closed object gets the usual "closed" error, whatever its backend.
    with pytest.raises(ValueError, match="closed"):
        efd.eventfd_read(ev)
    with pytest.raises(ValueError, match="closed"):
        efd.eventfd_write(ev, 1)


def test_raw_descriptor_of_any_kind_is_accepted_as_os_does():
    """A raw fd is not checked: os reads whatever it is given."""
    r, w = os.pipe()
    try:
        efd.eventfd_write(w, 5)            # eight bytes into the pipe
        assert os.read(r, 100) == (5).to_bytes(8, sys.byteorder)
        os.write(w, (6).to_bytes(8, sys.byteorder) + b"rest")
        assert efd.eventfd_read(r) == 6    # reads exactly eight bytes
        assert os.read(r, 100) == b"rest"
    finally:
        os.close(r)
        os.close(w)


def short_read_outcomes(fn):
    """fn on a pipe holding 3 bytes, then on a pipe at its end."""
    results = []
    r, w = os.pipe()
    try:
        os.write(w, b"abc")
        results.append(outcome(fn, r))
        os.write(w, b"x" * 8)      # the 3 bytes are gone: 8 more read whole
        results.append(outcome(fn, r))
        os.close(w)
        w = -1
        results.append(outcome(fn, r))
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
    return results


def test_short_read_raises():
    """Fewer than 8 bytes: OSError with errno 0, as os.eventfd_read raises
    (glibc's eventfd_read returns -1 without setting errno)."""
    short, whole, eof = short_read_outcomes(efd.eventfd_read)
    expected = ("raise", OSError, "[Errno 0] Error")
    assert short == expected
    assert whole == ("ok", int.from_bytes(b"x" * 8, sys.byteorder))
    assert eof == expected
    r, w = os.pipe()
    try:
        os.write(w, b"abc")
        with pytest.raises(OSError) as info:
            efd.eventfd_read(r)
        assert type(info.value) is OSError and info.value.errno == 0
    finally:
        os.close(r)
        os.close(w)


@needs_os
def test_short_read_same_as_os():
    mine = short_read_outcomes(efd.eventfd_read)
    theirs = short_read_outcomes(os.eventfd_read)
    # os's errno is whatever the thread's errno was (glibc leaves it alone
    # after a short read); efd makes it 0.  Types and results must agree.
    assert [r[:2] for r in mine] == [r[:2] for r in theirs]
    assert mine[1] == theirs[1]
