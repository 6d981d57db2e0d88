"""SPEC §1's table, in both modes, on every backend.

Each sequence of reads and writes is run operation by operation on an
EventFD and on a reference -- os.eventfd where it exists (Python 3.10+), and
a small Python model of the table everywhere -- comparing what each step
returns or raises, the count after it, and what select/poll/epoll report.
"""

import errno
import fcntl
import os
import random
import select
import selectors

import pytest

import efd

MAX = 2**64 - 2
HAVE_OS_EVENTFD = hasattr(os, "eventfd")
needs_os_eventfd = pytest.mark.skipif(
    not HAVE_OS_EVENTFD, reason="os.eventfd needs Python 3.10+")


# ---- running a sequence ----------------------------------------------------

def outcome(fn, *args):
    """('ok', result) or ('raise', exception type, errno)."""
    try:
        return ("ok", fn(*args))
    except OSError as e:
        return ("raise", type(e), e.errno)


def fdinfo_count(fd):
    with open("/proc/self/fdinfo/%d" % fd) as f:
        for line in f:
            if line.startswith("eventfd-count:"):
                return int(line.split()[1], 16)
    raise AssertionError("fd %d shows no eventfd-count" % fd)


def open_os_eventfd(initval, semaphore):
    """A non-blocking kernel eventfd holding initval (which may exceed the
    syscall's 32 bits: the rest is written after creation, as efd does)."""
    flags = os.EFD_CLOEXEC | os.EFD_NONBLOCK
    if semaphore:
        flags |= os.EFD_SEMAPHORE
    first = initval if initval < 2**32 else 0
    fd = os.eventfd(first, flags)
    if first != initval:
        os.eventfd_write(fd, initval)
    return fd


class Model:
    """SPEC §1's table for a non-blocking descriptor, in Python."""

    def __init__(self, initval, semaphore):
        self.count = initval
        self.semaphore = semaphore

    def read(self):
        if self.count == 0:
            raise BlockingIOError(errno.EAGAIN, "would block")
        take = 1 if self.semaphore else self.count
        self.count -= take
        return take

    def write(self, value):
        if value == 2**64 - 1:
            raise OSError(errno.EINVAL, "invalid")
        if self.count + value > MAX:
            raise BlockingIOError(errno.EAGAIN, "would block")
        self.count += value


# A "side" is what a sequence runs on: (read(), write(value), count()).

def efd_side(ev):
    return ev.read, ev.write, ev._peek


def os_side(fd):
    """os.eventfd_read/eventfd_write on a kernel eventfd."""
    return (lambda: os.eventfd_read(fd), lambda v: os.eventfd_write(fd, v),
            lambda: fdinfo_count(fd))


def model_side(model):
    return model.read, model.write, lambda: model.count


WRITE_VALUES = [0, 1, 1, 2, 3, 7, 2**32 - 1, 2**32, 2**63, MAX - 5, MAX - 1,
                MAX, 2**64 - 1]


def random_sequences(seed, n, length):
    rng = random.Random(seed)
    for _ in range(n):
        initval = rng.choice([0, 0, 1, 3, 2**32 - 1, 2**32 + 5, MAX - 2, MAX])
        ops = []
        for _ in range(length):
            if rng.random() < 0.45:
                ops.append(("read",))
            else:
                ops.append(("write", rng.choice(WRITE_VALUES)))
        yield initval, ops


def run_side(side, ops):
    """Each step's outcome and the count after it."""
    read, write, count = side
    trace = []
    for op in ops:
        fn = read if op[0] == "read" else write
        trace.append((op, outcome(fn, *op[1:]), count()))
    return trace


def assert_same_trace(mine, ref):
    assert len(mine) == len(ref)
    for i, (m, r) in enumerate(zip(mine, ref)):
        assert m == r, "step %d differs: efd %r, reference %r" % (i, m, r)


# ---- the table, stated directly ------------------------------------------------

def test_read_normal_mode_takes_everything(make):
    ev = make(5, nonblocking=True)
    assert ev.read() == 5
    assert ev._peek() == 0
    ev.write(3)
    ev.write(4)
    assert ev.read() == 7
    with pytest.raises(BlockingIOError) as info:
        ev.read()
    assert info.value.errno == errno.EAGAIN
    assert ev._peek() == 0


def test_read_semaphore_mode_takes_one(make):
    ev = make(3, semaphore=True, nonblocking=True)
    assert [ev.read() for _ in range(3)] == [1, 1, 1]
    with pytest.raises(BlockingIOError) as info:
        ev.read()
    assert info.value.errno == errno.EAGAIN
    ev.write(2)
    assert ev.read() == 1
    assert ev._peek() == 1


def test_write_adds_and_zero_changes_nothing(make, semaphore):
    ev = make(0, semaphore=semaphore, nonblocking=True)
    ev.write(0)
    assert ev._peek() == 0
    with pytest.raises(BlockingIOError):
        ev.read()                 # a write of 0 does not make it readable
    ev.write()                    # value defaults to 1
    ev.write(41)
    assert ev._peek() == 42
    ev.write(0)
    assert ev._peek() == 42


def test_largest_count_and_past_it(make, semaphore):
    ev = make(0, semaphore=semaphore, nonblocking=True)
    ev.write(MAX)
    assert ev._peek() == MAX
    with pytest.raises(BlockingIOError) as info:
        ev.write(1)
    assert info.value.errno == errno.EAGAIN
    assert ev._peek() == MAX
    ev.write(0)                   # still allowed when full
    assert ev.read() == (1 if semaphore else MAX)
    ev.write(1)
    assert ev._peek() == (MAX if semaphore else 1)


def test_writing_all_ones_is_einval(make, semaphore):
    ev = make(5, semaphore=semaphore, nonblocking=True)
    with pytest.raises(OSError) as info:
        ev.write(2**64 - 1)
    assert type(info.value) is OSError
    assert info.value.errno == errno.EINVAL
    assert ev._peek() == 5


def test_blocking_object_past_max_is_not_einval(make):
    # A blocking object only raises for 2**64 - 1, whatever the count.
    ev = make(0)
    with pytest.raises(OSError) as info:
        ev.write(2**64 - 1)
    assert info.value.errno == errno.EINVAL


@pytest.mark.parametrize("initval", [0, 1, 2, 2**31, 2**32 - 1, 2**32, 2**32 + 1,
                                     2**48 + 12345, 2**63, MAX - 1, MAX])
def test_initval_full_range(make, semaphore, initval):
    ev = make(initval, semaphore=semaphore, nonblocking=True)
    assert ev._peek() == initval
    if initval == 0:
        with pytest.raises(BlockingIOError):
            ev.read()
    elif semaphore:
        assert ev.read() == 1
        assert ev._peek() == initval - 1
    else:
        assert ev.read() == initval
        assert ev._peek() == 0


def test_acquire_takes_what_one_read_takes(make, semaphore):
    ev = make(0, semaphore=semaphore)
    assert ev.acquire(blocking=False) is False
    ev.release(4)
    assert ev.acquire() is True
    assert ev._peek() == (3 if semaphore else 0)
    ev.release()
    assert ev.acquire(timeout=0) is True
    assert ev._peek() == (3 if semaphore else 0)


def test_nonblocking_describes_read_and_write_only(make, semaphore):
    ev = make(0, semaphore=semaphore, nonblocking=True)
    assert ev.nonblocking is True
    with pytest.raises(BlockingIOError):
        ev.read()
    # acquire() never raises BlockingIOError, and still honours its timeout.
    assert ev.acquire(blocking=False) is False
    assert ev.acquire(timeout=0.05) is False
    ev.release(MAX)
    with pytest.raises(BlockingIOError):
        ev.write(1)
    assert ev._peek() == MAX


def test_release_adds_and_never_passes_max(make, semaphore):
    ev = make(0, semaphore=semaphore)
    ev.release()
    ev.release(9)
    assert ev._peek() == 10
    ev.release(MAX - 10)
    assert ev._peek() == MAX
    with pytest.raises(ValueError):
        ev.release(1)
    assert ev._peek() == MAX


def test_descriptor_is_nonblocking_for_raw_readers(make, semaphore):
    # The decision recorded in the brief: our descriptor is always
    # O_NONBLOCK, whatever `nonblocking` says.
    ev = make(0, semaphore=semaphore, nonblocking=False)
    assert fcntl.fcntl(ev.fileno(), fcntl.F_GETFL) & os.O_NONBLOCK


# ---- operation by operation against a reference ------------------------------------

FIXED_SEQUENCES = [
    (0, [("read",), ("write", 0), ("read",), ("write", 1), ("read",), ("read",)]),
    (5, [("read",), ("read",), ("write", 2), ("write", 3), ("read",)]),
    (0, [("write", MAX), ("write", 1), ("write", 0), ("read",), ("write", 1),
         ("write", 2**64 - 1), ("read",), ("read",)]),
    (MAX, [("write", 1), ("read",), ("write", MAX), ("read",), ("write", 2)]),
    (2**32 + 1, [("read",), ("write", 2**32), ("read",), ("read",)]),
    (1, [("write", 2**64 - 1), ("read",), ("write", 2**64 - 1), ("read",)]),
]


def all_sequences(seed):
    for seq in FIXED_SEQUENCES:
        yield seq
    for seq in random_sequences(seed, 40, 25):
        yield seq


def os_reference(initval, semaphore, ops):
    """The trace of `ops` on a fresh os.eventfd."""
    fd = open_os_eventfd(initval, semaphore)
    try:
        return run_side(os_side(fd), ops)
    finally:
        os.close(fd)


@needs_os_eventfd
def test_same_as_os_eventfd(make, semaphore):
    """The EventFD's methods against os.eventfd_read/eventfd_write on a
    kernel eventfd of the same mode, step by step."""
    for initval, ops in all_sequences(seed=1234 + semaphore):
        ev = make(initval, semaphore=semaphore, nonblocking=True)
        assert_same_trace(run_side(efd_side(ev), ops),
                          os_reference(initval, semaphore, ops))
        ev.close()


def test_same_as_model(make, semaphore):
    """The same comparison against a Python model of the table (runs on
    every Python, 3.8 included)."""
    for initval, ops in all_sequences(seed=99 + semaphore):
        ev = make(initval, semaphore=semaphore, nonblocking=True)
        ref = run_side(model_side(Model(initval, semaphore)), ops)
        assert_same_trace(run_side(efd_side(ev), ops), ref)
        ev.close()


@needs_os_eventfd
def test_raw_kernel_view_of_eventfd_backend(backend, make, semaphore):
    """On the native backend the descriptor IS a kernel eventfd of the
    requested mode: os.* on fileno() behaves exactly as on os.eventfd."""
    if backend != "eventfd":
        pytest.skip("only the native backend's descriptor is a raw eventfd")
    for initval, ops in all_sequences(seed=7 + semaphore):
        ev = make(initval, semaphore=semaphore, nonblocking=True)
        assert_same_trace(run_side(os_side(ev.fileno()), ops),
                          os_reference(initval, semaphore, ops))
        ev.close()


@needs_os_eventfd
def test_interleaved_methods_and_raw_access(backend, make):
    """Methods and raw os.* calls on fileno() act on one counter (native
    backend, semaphore mode shown by fdinfo)."""
    if backend != "eventfd":
        pytest.skip("only the native backend's descriptor is a raw eventfd")
    ev = make(2, semaphore=True)
    with open("/proc/self/fdinfo/%d" % ev.fileno()) as f:
        info = f.read()
    if "eventfd-semaphore:" in info:
        assert "eventfd-semaphore: 1" in info
    os.eventfd_write(ev.fileno(), 3)
    assert ev.read() == 1
    assert os.eventfd_read(ev.fileno()) == 1
    assert ev._peek() == 3
    assert ev.acquire(blocking=False)
    assert fdinfo_count(ev.fileno()) == 2


# ---- readiness ---------------------------------------------------------------------

def readiness(fd):
    """(readable, writable) by select, poll and a selectors selector."""
    r, w, _ = select.select([fd], [fd], [], 0)
    by_select = (fd in r, fd in w)
    p = select.poll()
    p.register(fd, select.POLLIN | select.POLLOUT)
    ev = dict(p.poll(0)).get(fd, 0)
    by_poll = (bool(ev & select.POLLIN), bool(ev & select.POLLOUT))
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ | selectors.EVENT_WRITE)
        mask = 0
        for key, m in sel.select(0):
            mask |= m
    by_selector = (bool(mask & selectors.EVENT_READ),
                   bool(mask & selectors.EVENT_WRITE))
    return by_select, by_poll, by_selector


def test_readiness_follows_count(backend, make, semaphore):
    """Readable iff the count is > 0 (every backend, one thread: no lag is
    allowed); writable iff count < 2**64 - 2 (kernel backends only: the
    pipe and futex backends' fileno() signals readiness to read only)."""
    ev = make(0, semaphore=semaphore, nonblocking=True)
    rng = random.Random(5 + semaphore)
    values = [0, 1, 2, 5, 2**40, MAX - 3, MAX]
    for step in range(80):
        if rng.random() < 0.5:
            outcome(ev.read)
        else:
            outcome(ev.write, rng.choice(values))
        count = ev._peek()
        for readable, writable in readiness(ev.fileno()):
            assert readable == (count > 0), (step, count)
            if backend not in ("pipe", "futex"):
                assert writable == (count < MAX), (step, count)


def test_readiness_after_acquire_release(make, semaphore):
    ev = make(0, semaphore=semaphore)
    fd = ev.fileno()
    assert select.select([fd], [], [], 0)[0] == []
    ev.release(2)
    assert select.select([fd], [], [], 0)[0] == [fd]
    assert ev.acquire(timeout=1)
    assert (select.select([fd], [], [], 0)[0] == [fd]) == semaphore
    if semaphore:
        assert ev.acquire(blocking=False)
    assert select.select([fd], [], [], 0)[0] == []


def test_selector_wakes_on_release(make):
    ev = make(0)
    with selectors.DefaultSelector() as sel:
        sel.register(ev, selectors.EVENT_READ)   # objects with fileno()
        assert sel.select(0) == []
        ev.release()
        events = sel.select(1.0)
        assert len(events) == 1 and events[0][0].fileobj is ev
        assert ev.acquire(blocking=False)
        assert sel.select(0) == []


# ---- value: the count now (SPEC §6 clarifications) -------------------------


def test_value_is_the_count_without_consuming(make, semaphore):
    ev = make(5, semaphore=semaphore)
    assert ev.value == 5
    assert ev.value == 5                      # reading it takes nothing
    ev.release(3)
    assert ev.value == 8
    assert ev.acquire(False)
    assert ev.value == (7 if semaphore else 0)
    with pytest.raises(AttributeError):
        ev.value = 1                          # read-only
    ev.close()
    with pytest.raises(ValueError, match="closed"):
        ev.value


def test_dropins_value(backend):
    sem = efd.BoundedSemaphore(3, backend=backend)
    ev = efd.Event(backend=backend)
    try:
        assert sem.value == 3
        assert sem.acquire(False) and sem.acquire(False)
        assert sem.value == 1
        sem.release()
        assert sem.value == 2
        assert ev.value == 0
        ev.set()
        ev.set()
        assert ev.value == 1
        ev.clear()
        assert ev.value == 0
    finally:
        sem.close(), ev.close()
    for obj in (sem, ev):
        with pytest.raises(ValueError, match="closed %s" % type(obj).__name__):
            obj.value
