"""Blocking, non-blocking and timeouts (SPEC §3-§4), on every backend.

Every wait is bounded: threads are joined with a timeout and blocking calls
are given one, so a lost wakeup fails a test instead of hanging the run.
Time bounds are generous on the upper side (the machine is shared); lower
bounds are exact, since a timeout must never end early.
"""

import threading
import time

import pytest

from conftest import PROMPT

MAX = 2**64 - 2


class Waiter(threading.Thread):
    """Run fn() in a thread; keep its result or exception and when it ended."""

    def __init__(self, fn, *args, **kwargs):
        super().__init__(daemon=True)
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.result = self.error = self.ended = None
        self.started_at = None

    def run(self):
        self.started_at = time.monotonic()
        try:
            self.result = self.fn(*self.args, **self.kwargs)
        except BaseException as e:      # reported to the test
            self.error = e
        self.ended = time.monotonic()

    def finish(self, timeout=PROMPT):
        self.join(timeout)
        assert not self.is_alive(), "the waiter did not wake up"
        if self.error is not None:
            raise self.error
        return self.result


def start(fn, *args, **kwargs):
    w = Waiter(fn, *args, **kwargs)
    w.start()
    return w


def settle(waiter, seconds=0.2):
    """Give the waiter time to block, and check that it did."""
    time.sleep(seconds)
    assert waiter.is_alive(), "returned %r / raised %r without waiting" % (
        waiter.result, waiter.error)


def test_acquire_blocks_until_another_thread_releases(make, semaphore):
    ev = make(0, semaphore=semaphore)
    w = start(ev.acquire, timeout=30)
    settle(w)
    ev.release(3)
    assert w.finish() is True
    assert ev._peek() == (2 if semaphore else 0)


def test_acquire_without_timeout_is_woken(make, semaphore):
    ev = make(0, semaphore=semaphore)
    w = start(ev.acquire)
    settle(w)
    ev.release()
    assert w.finish() is True


def test_infinite_timeout_means_no_limit(make):
    ev = make(0)
    w = start(ev.acquire, timeout=float("inf"))
    settle(w)
    ev.release()
    assert w.finish() is True


def test_read_blocks_until_another_thread_writes(make, semaphore):
    ev = make(0, semaphore=semaphore)
    w = start(ev.read)
    settle(w)
    ev.write(7)
    assert w.finish() == (1 if semaphore else 7)
    assert ev._peek() == (6 if semaphore else 0)


def test_gil_released_while_waiting(make):
    ev = make(0)
    progress = []
    stop = threading.Event()

    def worker():
        n = 0
        while not stop.is_set():
            n += 1
            if n % 1000 == 0:
                progress.append(n)

    w = start(ev.acquire, timeout=30)
    settle(w, 0.05)
    other = threading.Thread(target=worker, daemon=True)
    other.start()
    # Pure-Python work in this thread and in `other` while `w` waits: had
    # the waiter kept the GIL, neither could run until it timed out.
    t0 = time.monotonic()
    busy = 0
    while time.monotonic() - t0 < 0.3:
        busy += 1
    seen = len(progress)
    stop.set()
    other.join(PROMPT)
    assert w.is_alive()
    assert time.monotonic() - t0 < PROMPT
    assert busy > 1000 and seen > 10
    ev.release()
    assert w.finish() is True


@pytest.mark.parametrize("timeout", [0.05, 0.2])
def test_acquire_timeout_returns_false_on_time(make, semaphore, timeout):
    ev = make(0, semaphore=semaphore)
    t0 = time.monotonic()
    assert ev.acquire(timeout=timeout) is False
    elapsed = time.monotonic() - t0
    assert elapsed >= timeout
    assert elapsed < timeout + 2.0
    assert ev._peek() == 0


def test_timeout_on_a_nonblocking_object(make):
    # nonblocking describes read()/write(): acquire still waits its timeout.
    ev = make(0, nonblocking=True)
    t0 = time.monotonic()
    assert ev.acquire(timeout=0.1) is False
    assert time.monotonic() - t0 >= 0.1


def test_timeout_zero_polls(make, semaphore):
    ev = make(0, semaphore=semaphore)
    t0 = time.monotonic()
    for _ in range(100):
        assert ev.acquire(timeout=0) is False
    assert time.monotonic() - t0 < 1.0
    ev.release(2)
    assert ev.acquire(timeout=0) is True
    assert ev.acquire(True, 0) is semaphore
    assert ev._peek() == 0


def test_blocking_false(make, semaphore):
    ev = make(0, semaphore=semaphore)
    t0 = time.monotonic()
    assert ev.acquire(blocking=False) is False
    assert ev.acquire(False) is False
    assert time.monotonic() - t0 < 1.0
    ev.release(2)
    assert ev.acquire(blocking=False) is True
    assert ev._peek() == (1 if semaphore else 0)
    with pytest.raises(ValueError, match="non-blocking"):
        ev.acquire(blocking=False, timeout=1)


def test_release_arriving_mid_wait(make, semaphore):
    ev = make(0, semaphore=semaphore)
    timer = threading.Timer(0.2, ev.release, (2,))
    t0 = time.monotonic()
    timer.start()
    try:
        assert ev.acquire(timeout=20) is True
    finally:
        timer.join(PROMPT)
    elapsed = time.monotonic() - t0
    assert 0.15 <= elapsed < PROMPT
    assert ev._peek() == (1 if semaphore else 0)


def test_blocked_write_is_released_by_a_read(make, semaphore):
    ev = make(MAX, semaphore=semaphore)
    w = start(ev.write, 5)
    settle(w)
    assert ev._peek() == MAX
    if semaphore:
        for _ in range(5):
            assert ev.read() == 1
        w.finish()
        assert ev._peek() == MAX
    else:
        assert ev.read() == MAX
        w.finish()
        assert ev._peek() == 5


def test_several_waiters(make, semaphore):
    # Semaphore mode: each waiter takes one of the three units.  Counter
    # mode: one waiter takes all three and the others time out.
    ev = make(0, semaphore=semaphore)
    waiters = [start(ev.acquire, timeout=30 if semaphore else 1.0)
               for _ in range(3)]
    for w in waiters:
        settle(w, 0.05)
    ev.release(3)
    results = sorted(w.finish() for w in waiters)
    assert results == ([True] * 3 if semaphore else [False, False, True])
    assert ev._peek() == 0


def test_reader_and_acquirer_share_units(make):
    # Blocking read() and acquire() on one semaphore, fed unit by unit from
    # this thread: every unit is taken exactly once.
    ev = make(0, semaphore=True)
    by_acquire, by_read = [], []

    def consume(fn, n, into):
        for _ in range(n):
            into.append(fn())

    a = start(consume, lambda: ev.acquire(timeout=20), 50, by_acquire)
    b = start(consume, ev.read, 50, by_read)
    for _ in range(100):
        ev.release()
    a.finish(20)
    b.finish(20)
    assert by_acquire == [True] * 50
    assert by_read == [1] * 50
    assert ev._peek() == 0
