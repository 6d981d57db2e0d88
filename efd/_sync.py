"""Drop-in replacements for :class:`threading.Semaphore`,
:class:`threading.BoundedSemaphore` and :class:`threading.Event` that live
in a file descriptor.

All three are thin layers over :class:`efd.EventFD`, so they also work
across processes (fork, or handed to a :mod:`multiprocessing` child), in
event loops (:meth:`Semaphore.acquire_async`, :meth:`Event.wait_async`) and
in ``select``-style code (``fileno()``).  Within one process they behave as
the :mod:`threading` classes do, as CPython's own ``Lib/test/lock_tests.py``
checks them (tests/test_lock_tests.py runs it against them).
"""
import operator
import os
import select
import sys
import threading
import warnings
import weakref
from types import TracebackType
from typing import Any, Coroutine, Optional, Tuple, Type

from . import MAX, EventFD, _aio

__all__ = ["Semaphore", "BoundedSemaphore", "Event"]

_POLLIN = select.POLLIN

#: Backends whose count is in shared memory, so that _peek() is one load
#: (the kernel counters' _peek() reads /proc/self/fdinfo instead).
_COUNT_IN_MEMORY = frozenset(("pipe", "futex"))
_INF = float("inf")

#: threading's classes have had a repr of their own since Python 3.11.
_THREADING_REPR = sys.version_info >= (3, 11)

#: threading.Event.isSet has warned since Python 3.10.
_ISSET_WARNS = sys.version_info >= (3, 10)


def _type_name(obj: object) -> str:
    return type(obj).__name__


def _integer(obj: Any, name: str) -> int:
    # An int argument as the C core reads one (an int, or anything with
    # __index__), with a TypeError that names the argument the user passed.
    if isinstance(obj, int):
        return obj
    if not hasattr(type(obj), "__index__"):
        raise TypeError("%s must be an integer, not %s"
                        % (name, _type_name(obj)))
    result: int = operator.index(obj)
    return result


def _initial_value(value: Any) -> int:
    # The `value` argument of the semaphores' constructors.
    value = _integer(value, "value")
    if value < 0:
        raise ValueError("semaphore initial value must be >= 0")  # threading's
    if value >= 2**64:
        raise OverflowError("value is too large: %d does not fit in 64 bits"
                            % value)
    if value > MAX:
        raise ValueError("value must be at most 2**64 - 2 (%d)" % MAX)
    return value


def _threading_timeout(timeout: Optional[float],
                       nan_only_looks: bool) -> Optional[float]:
    # threading's reading of a drop-in's timeout: None (or +infinity, or an
    # int too large for a float) waits without limit; a timeout that is not
    # above zero only tries once, where EventFD's own methods raise.  NaN:
    # threading.Event.wait only looks; threading.Semaphore.acquire would spin
    # forever, so the semaphores raise ValueError, as _thread's locks do.
    if timeout is None:
        return None
    if isinstance(timeout, (str, bytes, bytearray)):
        # float() would take "1"; threading raises TypeError (it compares).
        raise TypeError("timeout must be a number or None, not %s"
                        % _type_name(timeout))
    try:
        seconds = float(timeout)
    except OverflowError:
        return None if timeout > 0 else 0.0
    except TypeError:
        raise TypeError("timeout must be a number or None, not %s"
                        % _type_name(timeout)) from None
    if seconds != seconds:
        if nan_only_looks:
            return 0.0
        raise ValueError("timeout must not be NaN")
    if seconds == _INF:
        return None
    return seconds if seconds > 0 else 0.0


class _OnEventFD:
    # What the drop-ins share: an EventFD in `_ev`, handed to multiprocessing
    # children through its own __reduce__ (which checks that a child is being
    # spawned), the descriptor to watch, close(), and threading's repr.
    __slots__ = ("_ev", "__weakref__")
    _ev: EventFD

    @classmethod
    def _wrap(cls, ev: EventFD, *state: Any) -> Any:
        # Rebuild around an EventFD received by a child process.
        self = cls.__new__(cls)
        self._setup(ev, *state)
        return self

    def _setup(self, ev: EventFD) -> None:
        self._ev = ev

    def _state(self) -> Tuple[Any, ...]:
        # What _wrap needs besides the EventFD to rebuild the object.
        return ()

    def __reduce__(self) -> Tuple[Any, Tuple[Any, ...]]:
        return (type(self)._wrap, (self._ev,) + self._state())

    def _describe(self) -> str:
        raise NotImplementedError  # pragma: no cover - every subclass has it

    def __repr__(self) -> str:
        # threading's format on the running Python: "<module.Class at 0x...:
        # state>" since 3.11, object's default repr before.
        if not _THREADING_REPR:
            return object.__repr__(self)
        cls = type(self)
        state = "closed" if self._ev.closed else self._describe()
        return "<%s.%s at %#x: %s>" % (cls.__module__, cls.__qualname__,
                                       id(self), state)

    def fileno(self) -> int:
        """The descriptor to watch (do not read or write it).

        A semaphore's polls readable while units remain; an event's while
        the flag is set.

        Returns:
            A file descriptor owned by this object.

        Raises:
            ValueError: The object is closed.
        """
        return self._ev.fileno()

    def close(self) -> None:
        """Close the descriptor(s); calling it again does nothing.

        Threads and tasks waiting in this object wake with
        :class:`ValueError`.  Other processes' copies stay usable.
        """
        self._ev.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has been called."""
        return self._ev.closed


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
        ValueError: ``value`` is negative or above ``2**64 - 2``.
        OverflowError: ``value`` does not fit in 64 bits.
        TypeError: ``value`` is not an integer.
    """

    __slots__ = ()
    __module__ = "efd"

    def __init__(self, value: int = 1, *,
                 backend: Optional[str] = None) -> None:
        self._setup(EventFD(_initial_value(value), semaphore=True,
                            backend=backend))

    def _describe(self) -> str:
        value = self._ev._peek()
        return "value=%s" % ("?" if value is None else value)

    def acquire(self, blocking: bool = True,
                timeout: Optional[float] = None) -> bool:
        """Take one unit, waiting for one if needed.

        As with :class:`threading.Semaphore`, a ``timeout`` that is not
        above zero only tries once.

        Args:
            blocking: False to only try.
            timeout: Seconds to wait at most; ``None`` waits without limit.
                Not allowed with ``blocking=False``.

        Returns:
            True if a unit was taken, False if none was there in time.

        Raises:
            ValueError: ``timeout`` with ``blocking=False``, a NaN
                ``timeout``, or the semaphore is closed.
            TypeError: ``timeout`` is not a number.
        """
        if not blocking:
            if timeout is not None:
                raise ValueError("can't specify timeout for non-blocking "
                                 "acquire")
            return self._ev.acquire(False)
        return self._ev.acquire(True, _threading_timeout(timeout, False))

    def release(self, n: int = 1) -> None:
        """Add ``n`` units, waking up to ``n`` waiters in any process.

        Args:
            n: How many units to add, at least one.

        Raises:
            ValueError: ``n`` is less than one, or the count would pass
                ``2**64 - 2`` (nothing is added), or the semaphore is closed.
            TypeError: ``n`` is not an integer.
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

    def __enter__(self) -> bool:
        return self._ev.acquire()

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.release()

    async def __aenter__(self) -> None:
        await self._ev.acquire_async()

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        self.release()


#: Live bounded semaphores of this process, whose locks a fork child renews.
_bounded: "weakref.WeakSet[BoundedSemaphore]" = weakref.WeakSet()


class BoundedSemaphore(Semaphore):
    """A semaphore that refuses to go above its initial value, a drop-in for
    :class:`threading.BoundedSemaphore`.

    :meth:`release` raises :class:`ValueError` ("Semaphore released too
    many times") and changes nothing when the count would pass the initial
    value.  Everything else is :class:`Semaphore`'s.

    Within one process the check is exact: releases of the same object are
    serialized by a lock, and a concurrent :meth:`~Semaphore.acquire` only
    lowers the count.  (On the ``eventfd-readback`` backend a semaphore read
    takes the whole count and writes the rest back, so a release that lands
    in that instant is checked against a count that is too low.)  Across
    processes the check and the addition are two steps, as they are in
    :class:`multiprocessing.BoundedSemaphore`: a release is refused whenever
    the count it sees is at the bound, but two processes releasing at the
    same instant can both pass the check.

    The arguments and their errors are :class:`Semaphore`'s; ``value`` is
    also the bound.
    """

    __slots__ = ("_initial_value", "_lock")
    __module__ = "efd"

    def __init__(self, value: int = 1, *,
                 backend: Optional[str] = None) -> None:
        value = _initial_value(value)
        self._setup(EventFD(value, semaphore=True, backend=backend), value)

    def _setup(self, ev: EventFD, bound: int) -> None:  # type: ignore[override]
        self._ev = ev
        self._initial_value = bound
        self._lock = threading.Lock()
        _bounded.add(self)

    def _state(self) -> Tuple[int]:
        return (self._initial_value,)

    def _describe(self) -> str:
        return "%s/%d" % (super()._describe(), self._initial_value)

    def release(self, n: int = 1) -> None:
        """Add ``n`` units, unless that would take the count above the
        initial value.

        Args:
            n: How many units to add, at least one.

        Raises:
            ValueError: ``n`` is less than one; or the count would pass the
                initial value ("Semaphore released too many times"; nothing
                is added); or the semaphore is closed.
            TypeError: ``n`` is not an integer.
            OSError: The backend cannot read the count here (the ``eventfd``
                backends read it from ``/proc/self/fdinfo``).
        """
        n = _integer(n, "n")
        if n < 1:
            raise ValueError("n must be one or more")
        with self._lock:
            value = self._ev._peek()
            if value is None:
                raise OSError("BoundedSemaphore.release() cannot read the "
                              "count of a %r backend here (no "
                              "/proc/self/fdinfo?)" % self._ev.backend)
            if value + n > self._initial_value:
                raise ValueError("Semaphore released too many times")
            self._ev.release(n)


def _renew_bounded_locks() -> None:
    # In a fork child only the forking thread exists: a lock that another
    # thread held at the fork would never be released.
    for sem in list(_bounded):
        sem._lock = threading.Lock()


os.register_at_fork(after_in_child=_renew_bounded_locks)


class Event(_OnEventFD):
    """A flag that threads wait for, a drop-in for :class:`threading.Event`.

    The flag is a normal-mode :class:`efd.EventFD` whose count is above
    zero exactly while the flag is set, so :meth:`fileno` polls readable
    while it is set, and :meth:`set` wakes every waiter in every process
    that shares the event (fork, or handed to a :mod:`multiprocessing`
    child).  Waiters only look at the descriptor; they never consume.

    Within a process, :meth:`set` also wakes every thread then blocked in
    :meth:`wait` (and every task in :meth:`wait_async`) with True, even if
    :meth:`clear` follows at once, as :class:`threading.Event` does.  A
    waiter in another process looks at the flag itself, as with
    :class:`multiprocessing.Event`: a :meth:`set` undone by :meth:`clear`
    before that waiter got to look can go unseen by it.

    Unlike :class:`threading.Event`, the event holds file descriptors:
    :meth:`close` it when done.

    Args:
        backend: Force an :class:`efd.EventFD` backend (for tests); ``None``
            chooses automatically.
    """

    __slots__ = ()
    __module__ = "efd"

    def __init__(self, *, backend: Optional[str] = None) -> None:
        self._setup(EventFD(0, backend=backend))

    def _describe(self) -> str:
        return "set" if self.is_set() else "unset"

    def is_set(self) -> bool:
        """Whether the flag is set (in any process sharing the event).

        Returns:
            True while the flag is set.

        Raises:
            ValueError: The event is closed.
        """
        ev = self._ev
        if ev.backend in _COUNT_IN_MEMORY:
            # One load from the shared count; asking for fileno() would arm
            # the readiness descriptor that these backends keep only for
            # those who watch it.
            return ev._peek() != 0
        poller = select.poll()
        poller.register(ev.fileno(), _POLLIN)
        return bool(poller.poll(0))

    def isSet(self) -> bool:
        """Deprecated alias of :meth:`is_set`, as in :mod:`threading`.

        Emits :class:`DeprecationWarning` on Python 3.10 and later, where
        ``threading.Event.isSet`` does.

        Returns:
            True while the flag is set.
        """
        if _ISSET_WARNS:
            warnings.warn("isSet() is deprecated, use is_set() instead",
                          DeprecationWarning, stacklevel=2)
        return self.is_set()

    def set(self) -> None:
        """Set the flag and wake every waiter, in every process.

        Threads of this process that are blocked in :meth:`wait` at this
        moment return True even if :meth:`clear` follows at once.  Setting
        a set flag changes nothing (the count never grows past the number
        of processes racing to set it).

        Raises:
            ValueError: The event is closed.
        """
        ev = self._ev
        if not self.is_set():
            ev.release()
        ev._notify()
        _aio.notify_watchers(ev)

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
                above zero (or NaN) only looks.

        Returns:
            True if the flag was set at the end of the wait, or was set by
            :meth:`set` in this process while this thread waited; False if
            the time ran out first.

        Raises:
            ValueError: The event is closed, or is closed while waiting.
            TypeError: ``timeout`` is not a number.
        """
        result: bool = self._ev._wait_readable(
            _threading_timeout(timeout, True))
        return result

    async def wait_async(self, timeout: Optional[float] = None) -> bool:
        """Wait until the flag is set, from a coroutine.

        The task waits through the running loop's reader callback on
        :meth:`fileno` (no threads); every task waiting on the event in one
        loop shares one registration.

        Args:
            timeout: Seconds to wait at most; ``None`` waits without limit;
                a timeout that is not above zero (or NaN) only looks.

        Returns:
            True once the flag is set, False if the time ran out first.

        Raises:
            ValueError: The event is closed, or is closed while waiting.
            TypeError: ``timeout`` is not a number.
            NotImplementedError: The running loop cannot watch file
                descriptors.
        """
        seconds = _threading_timeout(timeout, True)
        if self.is_set():
            return True
        if seconds == 0:
            return False
        return await _aio.wait(self._ev, seconds, False) is not None
