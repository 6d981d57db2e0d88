"""asyncio support for :class:`efd.EventFD`: waiting through the event loop.

A coroutine that has to wait for a unit does not block the loop and does not
use a thread.  It queues a future on a :class:`_Waiters` record, one per
``(EventFD, loop)`` pair, and that record keeps a single reader callback on
the loop for the object's :meth:`~efd.EventFD.fileno`.  When the descriptor
polls readable the callback hands units to the queued futures in FIFO order,
one non-blocking read each, and stops at the first read that finds nothing
(another thread or process got there first: spurious readiness is normal).
The reader is removed as soon as nobody waits, so a loop carries nothing for
an idle object.

Each future receives the value of the read it was served with; a future that
ends without one (timeout) receives ``None``.  A task that is cancelled after
a unit was read for it gives the unit to the next waiter, or back to the
counter, so cancellation never loses a unit.

:meth:`efd.EventFD.close` calls :func:`fail_waiters` before the descriptor
goes, so waiting tasks get :class:`ValueError` promptly and the reader is
removed while its descriptor is still valid (for loops running in other
threads the removal is handed to the loop with ``call_soon_threadsafe``).
"""
import asyncio
from collections import deque
from typing import TYPE_CHECKING, Any, Deque, Dict, List, Optional, Tuple

from . import _efd

if TYPE_CHECKING:  # pragma: no cover
    from . import EventFD

__all__ = ["check_timeout", "fail_waiters", "notify_watchers", "wait"]

#: The live wait records, keyed by ``(EventFD, loop)``.  An entry exists only
#: while at least one task waits (its frame holds the same two objects), so
#: the strong references cannot outlive the wait.
_registry: Dict[Tuple[Any, asyncio.AbstractEventLoop], "_Waiters"] = {}

_CLOSED_MESSAGE = "I/O operation on closed EventFD"


def check_timeout(timeout: Optional[float]) -> Optional[float]:
    """Validate a timeout the way :meth:`efd.EventFD.acquire` does (the
    same C code reads it).

    Args:
        timeout: ``None`` or a number of seconds.

    Returns:
        ``None`` for "no limit" (``None``, infinity, or an int too large for
        a float), otherwise the timeout as a float.

    Raises:
        TypeError: ``timeout`` is not a number.
        ValueError: ``timeout`` is negative or NaN.
    """
    seconds: Optional[float] = _efd._check_timeout(timeout)
    return seconds


def _expire(fut: "asyncio.Future[Any]") -> None:
    # Timer callback: the wait is over, with nothing taken.
    if not fut.done():
        fut.set_result(None)


class _Waiters:
    """Everything one loop waits for on one EventFD.

    ``consumers`` are futures of tasks that want a read's value (FIFO);
    ``watchers`` are futures of tasks that only want to see the descriptor
    readable (:meth:`efd.Event.wait_async`), all woken together.  The record
    owns one ``add_reader`` registration, from creation until :meth:`stop`.
    """

    __slots__ = ("ev", "loop", "fd", "key", "consumers", "watchers", "active")

    def __init__(self, ev: "EventFD", loop: asyncio.AbstractEventLoop) -> None:
        self.ev = ev
        self.loop = loop
        self.fd = ev.fileno()          # ValueError if closed
        self.key = (ev, loop)
        self.consumers: Deque["asyncio.Future[Any]"] = deque()
        self.watchers: List["asyncio.Future[Any]"] = []
        self.active = False

    def start(self) -> None:
        """Register the reader callback and publish the record."""
        _registry[self.key] = self
        try:
            self.loop.add_reader(self.fd, self._ready)
        except NotImplementedError:
            del _registry[self.key]
            raise NotImplementedError(
                "efd: %s cannot watch file descriptors (it has no working "
                "add_reader()); run the coroutine on a selector-based loop "
                "such as asyncio.SelectorEventLoop or uvloop"
                % type(self.loop).__name__
            ) from None
        except BaseException:
            del _registry[self.key]
            raise
        self.active = True
        # close() in another thread may have run between our fileno() and
        # the registration above; it closes first and then looks for
        # records, so either it sees this one or we see it closed here.
        if self.ev.closed:
            self.stop()
            raise ValueError(_CLOSED_MESSAGE)

    def stop(self) -> None:
        """Remove the reader and forget the record (idempotent)."""
        if not self.active:
            return
        self.active = False
        if _registry.get(self.key) is self:
            del _registry[self.key]
        try:
            self.loop.remove_reader(self.fd)
        except (OSError, RuntimeError, ValueError):
            # The descriptor is already closed (epoll dropped it by itself)
            # or the loop is closed: nothing is left registered either way.
            pass

    def _ready(self) -> None:
        # The reader callback: the descriptor polled readable.
        if self.watchers:
            watchers, self.watchers = self.watchers, []
            for fut in watchers:
                if not fut.done():
                    fut.set_result(True)
        queue = self.consumers
        try_read = self.ev._try_read
        try:
            while queue:
                fut = queue[0]
                if fut.done():          # timed out or cancelled meanwhile
                    queue.popleft()
                    continue
                value = try_read()
                if value is None:       # someone else took it: wait again
                    break
                queue.popleft()
                fut.set_result(value)
        except (OSError, ValueError) as exc:
            self.fail(exc)
            return
        if not queue and not self.watchers:
            self.stop()

    def notify(self) -> None:
        """Resolve every watcher's future with True (the event was set)."""
        watchers, self.watchers = self.watchers, []
        for fut in watchers:
            if not fut.done():
                fut.set_result(True)
        if not self.consumers and self.active:
            self.stop()

    def fail(self, exc: BaseException) -> None:
        """End every pending wait with ``exc`` and remove the reader."""
        futures = list(self.consumers) + self.watchers
        self.consumers.clear()
        self.watchers = []
        self.stop()
        for fut in futures:
            if not fut.done():
                fut.set_exception(exc)

    def give_back(self, value: int) -> None:
        """Pass ``value``, read for a task that will not take it, on.

        The next pending consumer gets it (keeping FIFO order and saving two
        system calls); with none, it goes back to the counter.
        """
        queue = self.consumers
        while queue:
            fut = queue.popleft()
            if not fut.done():
                fut.set_result(value)
                return
        try:
            self.ev.release(value)
        except (OSError, ValueError) as exc:
            self.loop.call_exception_handler({
                "message": "efd: could not give back %d unit(s) taken for a "
                           "cancelled task" % value,
                "exception": exc,
            })

    def discard(self, fut: "asyncio.Future[Any]") -> None:
        """Drop ``fut`` from the queues; stop when nobody waits any more."""
        # Served futures are gone already; look before removing (a failed
        # deque.remove() would build a message with the future's repr).
        consumers, watchers = self.consumers, self.watchers
        if consumers and fut in consumers:
            consumers.remove(fut)
        elif watchers and fut in watchers:
            watchers.remove(fut)
        if not consumers and not self.watchers and self.active:
            self.stop()


async def wait(ev: "EventFD", timeout: Optional[float], consume: bool) -> Any:
    """Wait in the running loop until ``ev`` serves this task, or polls
    readable.

    The caller has already tried once (and validated ``timeout`` with
    :func:`check_timeout`): this only waits.

    Args:
        ev: The object to wait on.
        timeout: Seconds to wait at most; ``None`` waits without limit.
        consume: True to be served one read's value, in FIFO order among
            this loop's consumers; False to be told when the descriptor
            polls readable, taking nothing (with every other watcher).

    Returns:
        The value read (``consume``), True (not ``consume``), or None when
        ``timeout`` ran out.

    Raises:
        ValueError: ``ev`` is closed, or is closed while the task waits.
        NotImplementedError: The loop cannot watch file descriptors.
    """
    loop = asyncio.get_running_loop()
    waiters = _registry.get((ev, loop))
    fut = loop.create_future()
    if waiters is None:
        waiters = _Waiters(ev, loop)
        waiters.start()
    if consume:
        waiters.consumers.append(fut)
    else:
        waiters.watchers.append(fut)
    timer = None if timeout is None else loop.call_later(timeout, _expire, fut)
    try:
        return await fut
    except BaseException:
        if (consume and fut.done() and not fut.cancelled()
                and fut.exception() is None and fut.result() is not None):
            # Served, but cancelled before it could resume: pass it on.
            waiters.give_back(fut.result())
        raise
    finally:
        if timer is not None:
            timer.cancel()
        waiters.discard(fut)


def fail_waiters(ev: "EventFD", closing: bool) -> None:
    """Wake the tasks waiting on ``ev`` because it is being closed.

    :meth:`efd.EventFD.close` calls this twice: with ``closing=True``
    before the descriptor is closed, to handle the loops that this thread
    may touch directly (the running one, and loops not running at all) while
    the descriptor is still valid; and with ``closing=False`` after it, to
    hand the rest to their own threads.

    Args:
        ev: The object being closed.
        closing: True for the pass before the close, False for the one after.
    """
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    for (obj, loop), waiters in list(_registry.items()):
        if obj is not ev:
            continue
        exc = ValueError(_CLOSED_MESSAGE)
        if loop is running or not loop.is_running():
            waiters.fail(exc)
        elif not closing:
            try:
                loop.call_soon_threadsafe(waiters.fail, exc)
            except RuntimeError:        # that loop is closed
                waiters.stop()


def notify_watchers(ev: "EventFD") -> None:
    """Tell every task waiting for ``ev`` to poll readable that it did.

    :meth:`efd.Event.set` calls this, so that a task waiting in
    :meth:`efd.Event.wait_async` when the event is set returns True even if
    :meth:`~efd.Event.clear` follows before its loop looks at the
    descriptor (as with :class:`asyncio.Event`).  Safe from any thread:
    loops running in other threads are handed the work with
    ``call_soon_threadsafe``.  Consumers (:meth:`~efd.EventFD.acquire_async`)
    are not touched.

    Args:
        ev: The object that was made readable.
    """
    if not _registry:
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    for (obj, loop), waiters in list(_registry.items()):
        if obj is not ev or not waiters.watchers:
            continue
        if loop is running or not loop.is_running():
            waiters.notify()
        else:
            try:
                loop.call_soon_threadsafe(waiters.notify)
            except RuntimeError:        # that loop is closed
                pass
