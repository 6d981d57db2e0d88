"""Creation and destruction: no descriptor leaks, from_fd ownership and
errors, backend selection (keyword, EFD_BACKEND, probe) and read-only
properties."""

import errno
import fcntl
import gc
import os
import socket
import tempfile
import threading
import time
import warnings

import pytest

import efd
from conftest import BACKENDS, KERNEL_BACKENDS, backend_unavailable, kernel_eventfd_available, open_fd_count

needs_kernel = pytest.mark.skipif(not kernel_eventfd_available(),
                                  reason="needs a kernel eventfd")
CYCLES = 2000


def test_no_fd_leak_create_close(backend, semaphore):
    if backend_unavailable(backend, semaphore):
        pytest.skip(backend_unavailable(backend, semaphore))
    gc.collect()
    before = open_fd_count()
    for i in range(CYCLES):
        ev = efd.EventFD(i, semaphore=semaphore, backend=backend)
        ev.release()
        assert ev.acquire(blocking=False)
        ev.close()
    assert open_fd_count() == before


def test_no_fd_leak_after_waiting(backend):
    # A wait makes the object's wake descriptor: it must go with close().
    before = open_fd_count()
    for _ in range(100):
        ev = efd.EventFD(backend=backend)
        assert ev.acquire(timeout=0.001) is False
        ev.close()
    for _ in range(100):
        with efd.EventFD(backend=backend) as ev:
            assert ev.acquire(timeout=0.001) is False
    assert open_fd_count() == before


def test_no_fd_leak_when_garbage_collected(backend):
    before = open_fd_count()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        for _ in range(500):
            ev = efd.EventFD(1, backend=backend)
            assert ev.acquire(timeout=0.5)
            del ev
        gc.collect()
    assert open_fd_count() == before


@needs_kernel
def test_no_fd_leak_from_fd():
    before = open_fd_count()
    for _ in range(CYCLES // 4):
        ev = efd.EventFD.from_fd(efd.eventfd(1))
        assert ev.read() == 1
        ev.close()
    assert open_fd_count() == before


def test_no_fd_leak_failed_construction():
    before = open_fd_count()
    for _ in range(200):
        with pytest.raises(ValueError):
            efd.EventFD(2**64 - 1)
        with pytest.raises(ValueError):
            efd.EventFD(backend="no-such-backend")
    assert open_fd_count() == before


# ---- from_fd -----------------------------------------------------------------------

def is_open(fd):
    try:
        os.fstat(fd)
    except OSError as e:
        assert e.errno == errno.EBADF
        return False
    return True


@needs_kernel
def test_from_fd_owns_the_descriptor():
    fd = efd.eventfd(3)
    ev = efd.EventFD.from_fd(fd)
    assert ev.fileno() == fd
    assert ev.semaphore is False and ev.backend == "eventfd"
    assert ev.nonblocking is False
    assert ev.read() == 3
    ev.close()
    assert not is_open(fd)


@needs_kernel
def test_from_fd_owns_it_through_gc():
    fd = efd.eventfd(0)
    ev = efd.EventFD.from_fd(fd)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        del ev
        gc.collect()
    assert not is_open(fd)


@needs_kernel
def test_from_fd_detects_semaphore_mode():
    fd = efd.eventfd(2, efd.EFD_SEMAPHORE)
    with open("/proc/self/fdinfo/%d" % fd) as f:
        shown = "eventfd-semaphore:" in f.read()
    if not shown:
        os.close(fd)
        pytest.skip("this kernel does not show eventfd-semaphore in fdinfo")
    with efd.EventFD.from_fd(fd) as ev:
        assert ev.semaphore is True and ev.backend == "eventfd"
        assert ev.read() == 1


@needs_kernel
def test_from_fd_semaphore_on_normal_mode_fd_emulates():
    fd = efd.eventfd(3)
    with efd.EventFD.from_fd(fd, semaphore=True) as ev:
        assert ev.semaphore is True
        assert ev.backend == "eventfd-readback"
        assert [ev.read(), ev.read()] == [1, 1]
        assert ev._peek() == 1


@needs_kernel
def test_from_fd_nonblocking_and_o_nonblock():
    fd = efd.eventfd(0)
    assert not fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK
    with efd.EventFD.from_fd(fd, nonblocking=True) as ev:
        assert ev.nonblocking is True
        assert fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK
        with pytest.raises(BlockingIOError):
            ev.read()


@needs_kernel
def test_from_fd_semaphore_false_on_semaphore_fd():
    fd = efd.eventfd(1, efd.EFD_SEMAPHORE)
    try:
        with open("/proc/self/fdinfo/%d" % fd) as f:
            if "eventfd-semaphore:" not in f.read():
                pytest.skip("this kernel does not show eventfd-semaphore")
        with pytest.raises(ValueError, match="semaphore"):
            efd.EventFD.from_fd(fd, semaphore=False)
        assert is_open(fd)                  # not adopted: still the caller's
    finally:
        os.close(fd)


@pytest.mark.parametrize("what", ["pipe", "devnull"])
def test_from_fd_not_an_eventfd(what):
    if what == "pipe":
        fd, other = os.pipe()
    else:
        fd, other = os.open(os.devnull, os.O_RDONLY), None
    try:
        with pytest.raises(ValueError, match="not an eventfd"):
            efd.EventFD.from_fd(fd)
        assert is_open(fd)
    finally:
        os.close(fd)
        if other is not None:
            os.close(other)


def test_from_fd_negative_and_closed():
    with pytest.raises(ValueError):
        efd.EventFD.from_fd(-1)
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    with pytest.raises(OSError) as info:
        efd.EventFD.from_fd(r)
    assert info.value.errno == errno.EBADF


# ---- _from_fds / _rebuild: descriptors that are not what the backend says ------

def open_fds():
    return set(os.listdir("/proc/self/fd"))


def _stranger(what):
    """(fd, cleanup) for an open descriptor that is not a pipe's end."""
    if what == "file":
        f = tempfile.TemporaryFile()
        return f.fileno(), f.close
    if what == "socket":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        return s.fileno(), s.close
    if not kernel_eventfd_available():
        pytest.skip("needs a kernel eventfd")
    fd = efd.eventfd(0)
    return fd, lambda: os.close(fd)


def _stale_errno():
    # Leave errno at EAGAIN in C, as a failed non-blocking read does: a
    # check that reports errno after a call that succeeded would say so.
    r, w = os.pipe()
    os.set_blocking(r, False)
    try:
        os.read(r, 1)
    except BlockingIOError:
        pass
    finally:
        os.close(r)
        os.close(w)


def _pipe_fds_with(slot, fd):
    """Duplicates of a live pipe-backend object's (page, read end, write
    end), with `slot` replaced by a duplicate of `fd`: ours to close."""
    with efd.EventFD(1, backend="pipe") as ev:
        fds = [os.dup(x) for x in ev._fds()]
    os.close(fds[slot])
    fds[slot] = os.dup(fd)
    return tuple(fds)


@pytest.mark.parametrize("slot", [1, 2], ids=["read-end", "write-end"])
@pytest.mark.parametrize("what", ["file", "socket", "eventfd"])
def test_from_fds_pipe_refuses_a_non_fifo_channel(what, slot):
    # Issue 17 row 7: the pipe backend's channel must be a pipe.  Anything
    # else is a ValueError that names the backend, not an OSError carrying
    # whatever errno was left over; nothing is adopted, nothing closed.
    fd, cleanup = _stranger(what)
    try:
        before = open_fds()
        fds = _pipe_fds_with(slot, fd)
        _stale_errno()
        with pytest.raises(ValueError) as info:
            efd.EventFD._from_fds(fds, "pipe", False, False)
        assert "'pipe'" in str(info.value)
        assert "not what" in str(info.value)
        assert all(is_open(x) for x in fds)          # still the caller's
        for x in fds:
            os.close(x)
        assert open_fds() == before
    finally:
        cleanup()


def test_from_fds_pipe_closed_channel_is_ebadf():
    # A closed descriptor keeps its own error (EBADF), as from_fd's does.
    before = open_fds()
    with efd.EventFD(backend="pipe") as ev:
        page, rd = (os.dup(x) for x in ev._fds()[:2])
    r, w = os.pipe()
    os.close(r)
    os.close(w)                          # r: a number nothing holds now
    with pytest.raises(OSError) as info:
        efd.EventFD._from_fds((page, rd, r), "pipe", False, False)
    assert info.value.errno == errno.EBADF
    assert is_open(page) and is_open(rd)
    os.close(page)
    os.close(rd)
    assert open_fds() == before


class _Dup:
    """Stands in for multiprocessing's DupFd: detach() hands over an fd."""

    def __init__(self, fd=None, error=None):
        self.fd, self.error = fd, error

    def detach(self):
        if self.error is not None:
            raise self.error
        return self.fd


@pytest.mark.parametrize("what", ["file", "socket", "eventfd"])
def test_rebuild_that_fails_leaks_no_descriptor(what):
    fd, cleanup = _stranger(what)
    try:
        before = open_fds()
        fds = _pipe_fds_with(1, fd)
        with pytest.raises(ValueError, match="'pipe'"):
            efd.EventFD._rebuild([_Dup(x) for x in fds], "pipe", False, False)
        assert not any(is_open(x) for x in fds)
        assert open_fds() == before
        # A descriptor that cannot be detached: the ones already detached
        # are closed too.
        with efd.EventFD(backend="pipe") as ev:
            fds = [os.dup(x) for x in ev._fds()]
        with pytest.raises(EOFError):
            efd.EventFD._rebuild([_Dup(fds[0]), _Dup(fds[1]),
                                  _Dup(error=EOFError())], "pipe", False, False)
        assert not any(is_open(x) for x in fds[:2])
        os.close(fds[2])
        assert open_fds() == before
    finally:
        cleanup()


def test_rebuild_that_succeeds_owns_the_descriptors():
    with efd.EventFD(2, backend="pipe") as ev:
        fds = [os.dup(x) for x in ev._fds()]
        with efd.EventFD._rebuild([_Dup(x) for x in fds], "pipe", False,
                                  False) as view:
            assert view.read() == 2
            assert all(is_open(x) for x in fds)
    assert not any(is_open(x) for x in fds)


# ---- backend selection ----------------------------------------------------------

@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("semaphore", [False, True], ids=["counter", "semaphore"])
def test_backend_keyword(name, semaphore, monkeypatch):
    monkeypatch.delenv("EFD_BACKEND", raising=False)
    if backend_unavailable(name, semaphore):
        pytest.skip(backend_unavailable(name, semaphore))
    with efd.EventFD(2, semaphore=semaphore, backend=name) as ev:
        assert ev.backend == name
        assert ev.semaphore is semaphore
        assert ev.read() == (1 if semaphore else 2)


@pytest.mark.parametrize("name", BACKENDS)
def test_backend_from_environment_at_construction(name, monkeypatch):
    if backend_unavailable(name, True):
        pytest.skip(backend_unavailable(name, True))
    monkeypatch.setenv("EFD_BACKEND", name)
    with efd.EventFD(semaphore=True) as ev:
        assert ev.backend == name
    # Read at each construction, not once at import.
    other = [b for b in BACKENDS if b != name and not backend_unavailable(b, True)]
    if other:
        monkeypatch.setenv("EFD_BACKEND", other[0])
        with efd.EventFD(semaphore=True) as ev:
            assert ev.backend == other[0]


def test_keyword_wins_over_environment(monkeypatch):
    monkeypatch.setenv("EFD_BACKEND", "pipe")
    with efd.EventFD() as ev:
        assert ev.backend == "pipe"
    if not backend_unavailable("eventfd-readback"):
        with efd.EventFD(backend="eventfd-readback") as ev:
            assert ev.backend == "eventfd-readback"


def expected_auto(semaphore):
    probe = efd._efd._probe()
    if probe["eventfd2_errno"]:
        return "pipe"
    if not semaphore or probe["eventfd2_semaphore_errno"] == 0:
        return "eventfd"
    if probe["eventfd2_semaphore_errno"] == errno.EINVAL:
        return "eventfd-readback"
    return "pipe"


@pytest.mark.parametrize("value", [None, "", "auto"])
@pytest.mark.parametrize("semaphore", [False, True], ids=["counter", "semaphore"])
def test_automatic_choice(value, semaphore, monkeypatch):
    if value is None:
        monkeypatch.delenv("EFD_BACKEND", raising=False)
    else:
        monkeypatch.setenv("EFD_BACKEND", value)
    with efd.EventFD(semaphore=semaphore) as ev:
        assert ev.backend == expected_auto(semaphore)
    with efd.EventFD(semaphore=semaphore, backend=None) as ev:
        assert ev.backend == expected_auto(semaphore)


def test_unknown_backend_is_valueerror(monkeypatch):
    monkeypatch.delenv("EFD_BACKEND", raising=False)
    with pytest.raises(ValueError, match="backend"):
        efd.EventFD(backend="kqueue")
    with pytest.raises(ValueError, match="backend"):
        efd.EventFD(backend="EVENTFD")
    monkeypatch.setenv("EFD_BACKEND", "kqueue")
    with pytest.raises(ValueError, match="EFD_BACKEND"):
        efd.EventFD()


def test_probe_is_cached_and_plausible():
    first = efd._efd._probe()
    assert efd._efd._probe() == first
    assert first["eventfd2_errno"] == 0 or first["eventfd2"] != "ok"
    if first["eventfd2_errno"]:
        assert first["eventfd2_semaphore_errno"]


@pytest.mark.parametrize("attr", ["backend", "semaphore", "nonblocking", "closed"])
def test_properties_are_read_only(make, attr):
    ev = make(0)
    before = getattr(ev, attr)
    with pytest.raises(AttributeError):
        setattr(ev, attr, before)
    with pytest.raises(AttributeError):
        delattr(ev, attr)
    assert getattr(ev, attr) == before


def test_properties_report_construction(make, backend, semaphore):
    ev = make(0, semaphore=semaphore, nonblocking=True)
    assert (ev.backend, ev.semaphore, ev.nonblocking, ev.closed) == (
        backend, semaphore, True, False)
    ev.close()
    assert (ev.backend, ev.semaphore, ev.nonblocking, ev.closed) == (
        backend, semaphore, True, True)


def test_fileno_is_a_live_descriptor(make):
    ev = make(0)
    fd = ev.fileno()
    assert isinstance(fd, int) and fd >= 0
    assert is_open(fd)
    assert fd in ev._fds()


# ---- detach() -------------------------------------------------------------

def test_detach_gives_up_the_descriptor(make, backend, semaphore):
    """detach() returns the live descriptor, closes the object, and leaves
    the descriptor open and owned by the caller (as socket.detach)."""
    if backend not in KERNEL_BACKENDS:
        pytest.skip("only kernel eventfds can be detached")
    ev = make(5, semaphore=semaphore)
    fd = ev.fileno()
    assert ev.detach() == fd
    assert ev.closed
    with pytest.raises(ValueError, match="closed"):
        ev.fileno()
    ev.close()                              # idempotent, and closes nothing
    assert fcntl.fcntl(fd, fcntl.F_GETFD) >= 0
    adopted = efd.EventFD.from_fd(fd, semaphore=semaphore)
    assert adopted.read() == (1 if semaphore else 5)
    adopted.close()


def test_detach_on_memory_backends_refuses_and_changes_nothing(make, backend):
    """A pipe or futex object's count is not in its descriptor: ValueError, and the
    object stays open and usable."""
    if backend in KERNEL_BACKENDS:
        pytest.skip("the memory backends only")
    ev = make(2, semaphore=True)
    with pytest.raises(ValueError, match="kernel eventfd"):
        ev.detach()
    assert not ev.closed
    assert ev.acquire(False) and ev.acquire(False) and not ev.acquire(False)


def test_detach_closed_object_raises(make):
    ev = make()
    ev.close()
    with pytest.raises(ValueError, match="closed"):
        ev.detach()


def test_detach_while_a_thread_waits(make, backend):
    """The waiter wakes with ValueError; the caller gets a descriptor over
    the same counter that stays valid after the waiter is gone."""
    if backend not in KERNEL_BACKENDS:
        pytest.skip("only kernel eventfds can be detached")
    ev = make(0, semaphore=True)
    errors = []

    def waiter():
        try:
            ev.acquire(timeout=30)
        except ValueError as exc:
            errors.append(str(exc))

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.1)                         # let it block in poll()
    fd = ev.detach()
    t.join(timeout=5)
    assert not t.is_alive()
    assert errors and "closed" in errors[0]
    efd.eventfd_write(fd, 3)
    assert efd.eventfd_read(fd) in (1, 3)   # semaphore or readback fd
    os.close(fd)


def test_detach_leaves_no_fd_behind(backend):
    if backend not in KERNEL_BACKENDS:
        pytest.skip("only kernel eventfds can be detached")
    before = open_fd_count()
    ev = efd.EventFD(backend=backend)
    fd = ev.detach()
    os.close(fd)
    assert open_fd_count() == before
