"""close(), the closed state, `with`, garbage collection and repr.

close() from another thread while a thread waits in the object must wake
that thread promptly with ValueError, consume nothing, and never let the
waiter touch a recycled descriptor number (SPEC §4).  A second view of the
same counter (``make_twin``: duplicated descriptors) shows what the waiter
did or did not take.
"""

import gc
import threading
import time
import warnings

import pytest

import efd
from conftest import PROMPT, open_fd_count

MAX = 2**64 - 2


def wait_in_thread(fn):
    """Start fn() in a thread; return (thread, box) where box gets
    'result'/'error' and 'ended' (monotonic time)."""
    box = {}

    def run():
        try:
            box["result"] = fn()
        except BaseException as e:
            box["error"] = e
        box["ended"] = time.monotonic()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


def close_under(ev, fn):
    """Block fn() in a thread, close ev from this one; return the waiter's
    box and how long it took to wake after close()."""
    t, box = wait_in_thread(fn)
    time.sleep(0.2)
    assert t.is_alive(), "did not block: %r" % box
    closed_at = time.monotonic()
    ev.close()
    t.join(PROMPT)
    assert not t.is_alive(), "close() did not wake the waiter"
    return box, box["ended"] - closed_at


@pytest.mark.parametrize("method", ["acquire", "acquire-timeout", "read", "write"])
def test_close_wakes_a_blocked_waiter(make, make_twin, semaphore, method):
    start = MAX if method == "write" else 0
    ev = make(start, semaphore=semaphore)
    view = make_twin(ev)
    calls = {
        "acquire": lambda: ev.acquire(),
        "acquire-timeout": lambda: ev.acquire(timeout=60),
        "read": ev.read,
        "write": lambda: ev.write(3),
    }
    box, woke_after = close_under(ev, calls[method])
    assert isinstance(box.get("error"), ValueError), box
    assert "closed" in str(box["error"])
    assert woke_after < 2.0
    assert ev.closed
    # Nothing consumed, nothing added; the counter lives on in the twin.
    assert view._peek() == start


def test_close_racing_a_release_conserves_units(make, make_twin, semaphore):
    for _ in range(20):
        ev = make(0, semaphore=semaphore)
        view = make_twin(ev)
        t, box = wait_in_thread(lambda: ev.acquire(timeout=30))
        time.sleep(0.01)
        ev.release(2)
        ev.close()
        t.join(PROMPT)
        assert not t.is_alive()
        if "result" in box:
            assert box["result"] is True
            assert view._peek() == (1 if semaphore else 0)
        else:
            assert isinstance(box["error"], ValueError), box
            assert view._peek() == 2


def test_several_waiters_all_wake(make, semaphore):
    ev = make(0, semaphore=semaphore)
    waiters = [wait_in_thread(ev.acquire) for _ in range(3)]
    waiters.append(wait_in_thread(ev.read))
    time.sleep(0.2)
    ev.close()
    for t, box in waiters:
        t.join(PROMPT)
        assert not t.is_alive()
        assert isinstance(box.get("error"), ValueError), box


def test_no_recycled_descriptor_under_a_waiter(make, backend, semaphore):
    """After close(), new objects (likely to get the old numbers once they
    are free) must keep their units: the waiter never reads from them.
    And once the last waiter has left, the old descriptors are closed."""
    for _ in range(5):
        before = open_fd_count()
        ev = efd.EventFD(0, semaphore=semaphore, backend=backend)
        t, box = wait_in_thread(ev.acquire)
        time.sleep(0.05)
        ev.close()
        newcomers = [efd.EventFD(5, semaphore=semaphore, backend=backend)
                     for _ in range(4)]
        t.join(PROMPT)
        assert not t.is_alive()
        assert isinstance(box.get("error"), ValueError), box
        assert [n._peek() for n in newcomers] == [5] * 4
        for n in newcomers:
            n.close()
        assert open_fd_count() == before


CLOSED_CALLS = [
    ("fileno", lambda ev: ev.fileno()),
    ("read", lambda ev: ev.read()),
    ("write", lambda ev: ev.write(1)),
    ("write-default", lambda ev: ev.write()),
    ("acquire", lambda ev: ev.acquire()),
    ("acquire-nonblocking", lambda ev: ev.acquire(blocking=False)),
    ("acquire-timeout", lambda ev: ev.acquire(timeout=0)),
    ("release", lambda ev: ev.release()),
    ("release-n", lambda ev: ev.release(5)),
    ("enter", lambda ev: ev.__enter__()),
]


@pytest.mark.parametrize("name,call", CLOSED_CALLS, ids=[c[0] for c in CLOSED_CALLS])
def test_closed_object_raises(make, semaphore, name, call):
    ev = make(3, semaphore=semaphore)
    ev.close()
    assert ev.closed is True
    with pytest.raises(ValueError, match="closed"):
        call(ev)


def test_close_is_idempotent(make):
    ev = make(1)
    assert ev.closed is False
    nfds = len(ev._fds())
    before = open_fd_count()
    ev.close()
    after = open_fd_count()
    assert after == before - nfds
    ev.close()
    ev.close()
    assert ev.closed is True
    assert open_fd_count() == after


def test_with_closes(make):
    ev = make(2)
    with ev as inside:
        assert inside is ev
        assert ev.acquire(blocking=False)
    assert ev.closed
    ev2 = make(0)
    with pytest.raises(RuntimeError):
        with ev2:
            raise RuntimeError("inside")
    assert ev2.closed


def test_gc_of_open_object_warns_and_closes(backend):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gc.collect()            # garbage of earlier tests: not ours to count
    before = open_fd_count()
    ev = efd.EventFD(0, backend=backend)
    text = repr(ev)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del ev
        gc.collect()
    resource = [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert len(resource) == 1, caught
    assert "unclosed" in str(resource[0].message)
    assert text.split(" value=")[0] in str(resource[0].message)
    assert open_fd_count() == before


def test_gc_of_closed_object_is_silent(backend):
    ev = efd.EventFD(0, backend=backend)
    ev.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del ev
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_gc_in_a_reference_cycle(backend):
    before = open_fd_count()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        holder = [efd.EventFD(1, backend=backend)]
        holder.append(holder)
        del holder
        gc.collect()
    assert any(issubclass(w.category, ResourceWarning) for w in caught)
    assert open_fd_count() == before


def test_repr_open_and_closed(make, backend, semaphore):
    ev = make(7, semaphore=semaphore)
    r = repr(ev)
    assert r.startswith("<efd.EventFD")
    assert "fd=%d" % ev.fileno() in r
    assert ("semaphore" if semaphore else "counter") in r
    assert "value=7" in r
    assert backend in r
    assert "closed" not in r
    ev.acquire()
    assert "value=%d" % (6 if semaphore else 0) in repr(ev)
    ev.close()
    r = repr(ev)
    assert "closed" in r
    assert "fd=" not in r


def test_repr_shows_nonblocking(make):
    assert "nonblocking" in repr(make(0, nonblocking=True))
    assert "nonblocking" not in repr(make(0, nonblocking=False))
