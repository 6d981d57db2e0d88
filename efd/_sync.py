"""Drop-in replacements for :class:`threading.Semaphore` and
:class:`threading.Event` that live in a file descriptor.

Both are thin layers over :class:`efd.EventFD`, so they also work across
processes (fork, or handed to a :mod:`multiprocessing` child), in event loops
(:meth:`Semaphore.acquire_async`, :meth:`Event.wait_async`) and in
``select``-style code (``fileno()``).
"""
import math
import select
from types import TracebackType
from typing import Any, Coroutine, Optional, Tuple, Type

from . import EventFD, _aio

__all__ = ["Semaphore", "Event"]

_POLLIN = select.POLLIN


class _OnEventFD:
    # What both drop-ins share: an EventFD in `_ev`, handed to multiprocessing
    # children through its own __reduce__ (which checks that a child is being
    # spawned), and the descriptor to watch.
    __slots__ = ("_ev", "__weakref__")
    _ev: EventFD

    @classmethod
    def _wrap(cls, ev: EventFD) -> Any:
        # Rebuild around an EventFD received by a child process.
        self = cls.__new__(cls)
        self._setup(ev)
        return self

    def _setup(self, ev: EventFD) -> None:
        self._ev = ev

    def __reduce__(self) -> Tuple[Any, Tuple[EventFD]]:
        return (type(self)._wrap, (self._ev,))

    def _where(self) -> str:
        # The start of a repr, as threading's: "module.Class at 0x..."
        return "%s.%s at %#x" % (type(self).__module__,
                                 type(self).__qualname__, id(self))


class Semaphore(_OnEventFD):
    """A counting semaphore, a drop-in for :class:`threading.Semaphore`.

    The count lives in a semaphore-mode :class:`efd.EventFD`, so the same
    semaphore can be shared with child processes, awaited in an event loop
    (:meth:`acquire_async`, ``async with``) and watched with ``select`` on
    :meth:`fileno` (readable while the count is above zero).

    ``with sem:`` acquires on entry and releases on exit, as with
    :class:`threading.Semaphore`.  Unlike it, the semaphore holds a file
    descriptor: :meth:`close` it when done (garbage collection closes it
    too, with a :class:`ResourceWarning`).

    Args:
        value: The initial count, ``0 .. 2**64 - 2``.
        backend: Force an :class:`efd.EventFD` backend (for tests); ``None``
            chooses automatically.

    Raises:
        ValueError: ``value`` is negative or too large.
        TypeError: ``value`` is not an int.
    """

    __slots__ = ()

    def __init__(self, value: int = 1, *, backend: Optional[str] = None) -> None:
        if value < 0:
            raise ValueError("semaphore initial value must be >= 0")
        self._setup(EventFD(value, semaphore=True, backend=backend))

    def __repr__(self) -> str:
        if self._ev.closed:
            return "<%s closed>" % self._where()
        value = self._ev._peek()
        return "<%s value=%s>" % (self._where(),
                                  "?" if value is None else value)

    def acquire(self, blocking: bool = True,
                timeout: Optional[float] = None) -> bool:
        """Take one unit, waiting for one if needed.

        Args:
            blocking: False to only try.
            timeout: Seconds to wait at most; ``None`` waits without limit.
                Not allowed with ``blocking=False``.

        Returns:
            True if a unit was taken, False if none was there in time.

        Raises:
            ValueError: ``timeout`` with ``blocking=False``, a negative or
                NaN ``timeout``, or the semaphore is closed.
        """
        return self._ev.acquire(blocking, timeout)

    def release(self, n: int = 1) -> None:
        """Add ``n`` units, waking up to ``n`` waiters in any process.

        Args:
            n: How many units to add, at least one.

        Raises:
            ValueError: ``n`` is less than one, or the count would pass
                ``2**64 - 2`` (nothing is added), or the semaphore is closed.
        """
        self._ev.release(n)

    def acquire_async(self, timeout: Optional[float] = None
                      ) -> Coroutine[Any, Any, bool]:
        """Take one unit from a coroutine: ``await sem.acquire_async()``.

        See :meth:`efd.EventFD.acquire_async`: no threads, FIFO among the
        tasks of one loop, and a cancelled task consumes nothing.

        Args:
            timeout: Seconds to wait at most; ``None`` waits without limit.

        Returns:
            An awaitable giving True once a unit is taken, or False when
            ``timeout`` ran out.
        """
        return self._ev.acquire_async(timeout)

    def fileno(self) -> int:
        """The descriptor to watch: it polls readable while units remain.

        Returns:
            A file descriptor owned by the semaphore (do not read it).
        """
        return self._ev.fileno()

    def close(self) -> None:
        """Close the descriptor(s); calling it again does nothing.

        Threads and tasks waiting in this semaphore wake with
        :class:`ValueError`.  Other processes' copies stay usable.
        """
        self._ev.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has been called."""
        return self._ev.closed

    def __enter__(self) -> bool:
        return self._ev.acquire()

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self._ev.release()

    async def __aenter__(self) -> None:
        await self._ev.acquire_async()

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        self._ev.release()


def _event_timeout(timeout: Optional[float]) -> Optional[float]:
    # threading.Event.wait's reading of a timeout: None (or infinity) waits
    # without limit, anything not above zero (negative, NaN) only looks.
    if timeout is None:
        return None
    if isinstance(timeout, (str, bytes, bytearray)):
        # float() would take "1"; threading raises TypeError (it compares).
        raise TypeError("timeout must be a number or None, not %s"
                        % type(timeout).__name__)
    seconds = float(timeout)
    if math.isinf(seconds) and seconds > 0:
        return None
    return seconds if seconds > 0 else 0.0


class Event(_OnEventFD):
    """A flag that tasks wait for, a drop-in for :class:`threading.Event`.

    The flag is a normal-mode :class:`efd.EventFD` whose count is above
    zero exactly while the flag is set, so :meth:`fileno` polls readable
    while it is set, and :meth:`set` wakes every waiter in every process
    that shares the event (fork, or handed to a :mod:`multiprocessing`
    child).  Waiters only look at the descriptor; they never consume.

    Unlike :class:`threading.Event`, the event holds file descriptors:
    :meth:`close` it when done.  And, as with :class:`multiprocessing.Event`,
    a waiter looks at the flag itself: a :meth:`set` undone by :meth:`clear`
    before a waiter got to run can go unseen by it (a ``threading.Event``
    waiter would still return True).

    Args:
        backend: Force an :class:`efd.EventFD` backend (for tests); ``None``
            chooses automatically.
    """

    __slots__ = ()

    def __init__(self, *, backend: Optional[str] = None) -> None:
        self._setup(EventFD(0, backend=backend))

    def __repr__(self) -> str:
        if self._ev.closed:
            return "<%s closed>" % self._where()
        return "<%s %s>" % (self._where(),
                            "set" if self.is_set() else "unset")

    def _readable(self, fd: int) -> bool:
        poller = select.poll()
        poller.register(fd, _POLLIN)
        return bool(poller.poll(0))

    def is_set(self) -> bool:
        """Whether the flag is set (in any process sharing the event).

        Returns:
            True while the flag is set.

        Raises:
            ValueError: The event is closed.
        """
        return self._readable(self._ev.fileno())

    def set(self) -> None:
        """Set the flag and wake every waiter, in every process.

        Setting a set flag changes nothing (the count never grows past the
        number of processes racing to set it).

        Raises:
            ValueError: The event is closed.
        """
        ev = self._ev
        if not self._readable(ev.fileno()):
            ev.release()

    def clear(self) -> None:
        """Reset the flag: waiters block again until :meth:`set`.

        Raises:
            ValueError: The event is closed.
        """
        self._ev.acquire(False)

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block until the flag is set, or until ``timeout`` runs out.

        Returns at once when the flag is set already.  The wait is
        :class:`efd.EventFD`'s own wait loop: it releases the GIL, follows
        PEP 475 for signals (Ctrl-C interrupts it), and wakes with
        :class:`ValueError` if another thread closes the event.

        Args:
            timeout: Seconds to wait at most; ``None`` waits without limit.
                As with :class:`threading.Event`, a timeout that is not
                above zero only looks.

        Returns:
            True if the flag was set (at the end of the wait), False if the
            time ran out first.

        Raises:
            ValueError: The event is closed, or is closed while waiting.
        """
        result: bool = self._ev._wait_readable(_event_timeout(timeout))
        return result

    async def wait_async(self, timeout: Optional[float] = None) -> bool:
        """Wait until the flag is set, from a coroutine.

        The task waits through the running loop's reader callback on
        :meth:`fileno` (no threads); every task waiting on the event in one
        loop shares one registration.

        Args:
            timeout: Seconds to wait at most; ``None`` waits without limit;
                a timeout that is not above zero only looks.

        Returns:
            True once the flag is set, False if the time ran out first.

        Raises:
            ValueError: The event is closed, or is closed while waiting.
            NotImplementedError: The running loop cannot watch file
                descriptors.
        """
        seconds = _event_timeout(timeout)
        if self.is_set():
            return True
        if seconds == 0:
            return False
        return await _aio.wait(self._ev, seconds, False) is not None

    def fileno(self) -> int:
        """The descriptor to watch: it polls readable while the flag is set.

        Returns:
            A file descriptor owned by the event (do not read it).
        """
        return self._ev.fileno()

    def close(self) -> None:
        """Close the descriptor; calling it again does nothing.

        Threads waiting in :meth:`wait` and tasks in :meth:`wait_async`
        wake with :class:`ValueError`.  Other processes' copies stay usable.
        """
        self._ev.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has been called."""
        return self._ev.closed
