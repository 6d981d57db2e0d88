"""Drop-in replacements for :class:`threading.Semaphore`,
:class:`threading.BoundedSemaphore` and :class:`threading.Event` that live
in a file descriptor.

Each holds an :class:`efd.EventFD` -- on the ``futex`` backend where it
works, so that an uncontended acquire and release make no system call --
so they also work across processes (fork, or handed to a
:mod:`multiprocessing` child), in event loops (:meth:`Semaphore.acquire_async`,
:meth:`Event.wait_async`) and in ``select``-style code (``fileno()``).
Their hot methods (acquire, release, ``with``, is_set, set, clear, wait) are
C (``efd._efd.Semaphore`` and ``efd._efd.Event``); this module adds the
rest.  Within one process they behave as the :mod:`threading` classes do,
as CPython's own ``Lib/test/lock_tests.py`` checks them
(tests/test_lock_tests.py runs it against them).
"""
import operator
import os
import sys
import warnings
from types import TracebackType
from typing import Any, Coroutine, Optional, Tuple, Type, TypeVar

from . import MAX, EventFD, _aio, _efd, _handles

__all__ = ["Semaphore", "BoundedSemaphore", "Event", "WouldBlock"]


class WouldBlock(Exception):
    """Raised by a non-blocking call that would have to wait:
    :meth:`efd.aio.Semaphore.acquire_nowait` when no unit is there, or when
    tasks of this process are queued for one.

    It subclasses :class:`Exception` only.  anyio and trio each have a
    ``WouldBlock`` of their own (``anyio.WouldBlock``, ``trio.WouldBlock``);
    efd does not import those libraries, so it cannot subclass them: catch
    ``efd.WouldBlock`` (or both) in code that uses efd's objects.
    """

    __module__ = "efd"


_event_is_set = _efd.Event.is_set


def _warn_blocking(obj: object, method: str, instead: str,
                   stacklevel: int = 3) -> None:
    # A blocking call about to wait on a thread whose event loop runs.
    if method == "__enter__":
        what = "'with' on efd.%s" % type(obj).__name__
    else:
        what = "efd.%s.%s()" % (type(obj).__name__, method)
    warnings.warn(
        "%s blocks the running event loop of this thread; use '%s%s' in a "
        "coroutine" % (what, "" if instead.startswith("async ") else "await ",
                       instead),
        RuntimeWarning, stacklevel=stacklevel)


def _before_block(obj: object, method: str, instead: str) -> None:
    # Called by the C core of the drop-ins (efd_sync.c) once a blocking
    # call found nothing and is about to wait: warn if this thread runs an
    # event loop.  Nothing has been taken yet.
    if _aio.loop_running():
        _warn_blocking(obj, method, instead, stacklevel=3)

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
    result: int = value
    return result


def _default_backend(backend: Optional[str]) -> Optional[str]:
    # The drop-ins' backend: the one asked for; else $EFD_BACKEND (EventFD
    # reads it); else futex where this system has it, else the probe's.
    if backend is not None or os.environ.get("EFD_BACKEND", "") not in (
            "", "auto"):
        return backend
    return "futex" if _efd._probe()["futex_errno"] == 0 else None


def _refs_seen_by_del() -> int:
    # What sys.getrefcount(ev) says in _OnEventFD.__del__ when nothing else
    # holds the EventFD (the slot, the local name, the call's argument):
    # measured, since 3.14 borrows references that 3.13 counted.
    class _Probe:
        __slots__ = ("_ev",)

    def probe(self: Any) -> int:
        ev = getattr(self, "_ev", None)
        return sys.getrefcount(ev)

    p = _Probe()
    p._ev = object()
    return probe(p)


_DEL_REFS = _refs_seen_by_del()


class _OnEventFD:
    # What the drop-ins share besides their C core: the descriptor to watch,
    # close(), threading's repr, and pickling for multiprocessing children
    # (through the EventFD's own __reduce__, which checks that a child is
    # being spawned).
    __slots__ = ()
    _ev: EventFD

    def _state(self) -> Tuple[Any, ...]:
        # What the C core's constructor takes besides the EventFD.
        return ()

    def __reduce__(self) -> Tuple[Any, Tuple[Any, ...]]:
        # To a multiprocessing child being started: the EventFD's own
        # pickle (descriptors duplicated into the child).  Anything else
        # stays in this process (another interpreter): no descriptor, and
        # the load duplicates the live object's (efd/_handles.py); loaded
        # in another process, it raises naming this class.
        from multiprocessing import context
        if context.get_spawning_popen() is None:
            return _handles.reduce_local(self, type(self), self._state())
        return (_rebuild, (type(self), self._ev) + self._state())

    def handle(self) -> "_handles.Handle":
        """A text naming this object, for :func:`efd.from_handle` in a
        program started with ``exec``: see :meth:`efd.EventFD.handle`.

        Returns:
            An :class:`efd.Handle` (a :class:`str`) with a ``fds`` tuple.

        Raises:
            ValueError: The object is closed.
        """
        self._check_open()
        return _handles.handle(self)

    @property
    def backend(self) -> str:
        """The :class:`efd.EventFD` backend the count lives on (``'futex'``,
        ``'eventfd'``, ``'eventfd-readback'`` or ``'pipe'``)."""
        name: str = self._ev.backend
        return name

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
        the flag is set.  On the ``futex`` backend the first call switches
        on keeping it in step, for every process that shares the object.

        Returns:
            A file descriptor owned by this object.

        Raises:
            ValueError: The object is closed.
        """
        self._check_open()
        return self._ev.fileno()

    def _check_open(self) -> None:
        # The "closed" error, naming this class (as the C core's methods
        # of the drop-ins do).
        if self._ev.closed:
            raise ValueError("I/O operation on closed %s" % _type_name(self))

    def __del__(self) -> None:
        # Garbage-collected while open: warn naming this object (not the
        # EventFD inside it), and close, as files do.
        # Only if nothing else holds the EventFD (this object's slot, the
        # local name and getrefcount's argument): a coroutine of
        # acquire_async() may still be using it, and its own finalizer will
        # tell then.
        ev = getattr(self, "_ev", None)
        if (ev is not None and not ev.closed and not ev._quiet
                and sys.getrefcount(ev) <= _DEL_REFS):
            try:
                warnings.warn("unclosed %r" % (self,), ResourceWarning,
                              stacklevel=2, source=self)
            finally:
                ev._collect()

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

    @property
    def value(self) -> int:
        """The count now, shared by every process (a semaphore's free
        units; an event's 1 while set, 0 while clear), without consuming
        anything.  A snapshot: others may change it at once.

        Raises:
            ValueError: The object is closed.
        """
        if self._ev.closed:
            raise ValueError("I/O operation on closed %s"
                             % type(self).__name__)
        value: int = self._ev.value
        return value


_Sem = TypeVar("_Sem", bound="Semaphore")


def _rebuild(cls: Any, ev: EventFD, *state: Any) -> Any:
    # Unpickling in a child process: the same class around the EventFD the
    # child received.
    return _efd.Semaphore.__new__(cls, ev, *state) if issubclass(
        cls, _efd.Semaphore) else _efd.Event.__new__(cls, ev)


class Semaphore(_OnEventFD, _efd.Semaphore):
    """A counting semaphore, a drop-in for :class:`threading.Semaphore`.

    The count lives in a semaphore-mode :class:`efd.EventFD` (on the
    ``futex`` backend where it works: no system call while nobody waits),
    so the same semaphore can be shared with child processes, awaited in an
    event loop (:meth:`acquire_async`, ``async with``) and watched with
    ``select`` on :meth:`fileno` (readable while the count is above zero).

    :meth:`acquire`, :meth:`release` and ``with sem:`` behave as
    :class:`threading.Semaphore`'s, timeouts included (a timeout that is
    not above zero only tries once; a NaN timeout is :exc:`ValueError`).
    Unlike it, the semaphore holds file descriptors: :meth:`close` it when
    done (garbage collection closes them too, with a
    :class:`ResourceWarning`).

    Args:
        value: The initial count, ``0 .. 2**64 - 2``.
        backend: Force an :class:`efd.EventFD` backend; ``None`` uses
            ``$EFD_BACKEND`` if set, else ``futex`` where it works, else the
            automatic choice.

    Raises:
        ValueError: ``value`` is negative or above ``2**64 - 2``.
        OverflowError: ``value`` does not fit in 64 bits.
        TypeError: ``value`` is not an integer.
    """

    __slots__ = ()
    __module__ = "efd"

    def __new__(cls: Type[_Sem], *args: Any, **kwargs: Any) -> _Sem:
        if cls.__init__ is not Semaphore.__init__:
            # A subclass with an __init__ of its own: its constructor's
            # arguments are its own; the value comes when that __init__
            # calls ours.  Until then: an empty count on the default
            # backend, which our __init__ fills (or replaces).
            ev = EventFD(0, semaphore=True, backend=_default_backend(None))
            self: _Sem = _efd.Semaphore.__new__(cls, ev)
            return self
        return cls._made(*args, **kwargs)

    @classmethod
    def _made(cls: Type[_Sem], value: int = 1, *,
              backend: Optional[str] = None) -> _Sem:
        ev = EventFD(_initial_value(value), semaphore=True,
                     backend=_default_backend(backend))
        self: _Sem = _efd.Semaphore.__new__(cls, ev, *cls._bound_for(value))
        return self

    def __init__(self, value: int = 1, *,
                 backend: Optional[str] = None) -> None:
        if type(self).__init__ is Semaphore.__init__:
            return                  # __new__ made it from these arguments
        # Called by a subclass's own __init__ (threading.Semaphore's
        # subclasses do the same): the count is empty until now.
        try:
            _initial_value(value)
        except BaseException:
            self.close()            # unusable: no count to keep open
            raise
        bound = self._bound_for(value)
        wanted = _default_backend(backend)
        if not bound and wanted in (None, self._ev.backend) \
                and self._ev._peek() == 0:
            if value:
                self._ev.release(value)
            return
        ev = EventFD(value, semaphore=True, backend=wanted)
        self._reinit(ev, *bound).close()

    @staticmethod
    def _bound_for(value: int) -> Tuple[int, ...]:
        return ()

    def _describe(self) -> str:
        value = self._ev._peek()
        return "value=%s" % ("?" if value is None else value)

    def acquire_async(self, timeout: Optional[float] = None, *,
                      undo: bool = False) -> Coroutine[Any, Any, bool]:
        """Take one unit from a coroutine: ``await sem.acquire_async()``.

        See :meth:`efd.EventFD.acquire_async`: no threads, FIFO among the
        tasks of one loop, and a cancelled task consumes nothing.

        Args:
            timeout: Seconds to wait at most; ``None`` waits without limit.
            undo: Book the unit to this process (SysV's ``SEM_UNDO``): if
                the process dies before a release of its own, the unit
                goes back.  See :meth:`acquire`.

        Returns:
            An awaitable giving True once a unit is taken, or False when
            ``timeout`` ran out.
        """
        self._check_open()
        return self._ev.acquire_async(timeout, undo=undo)

    async def __aenter__(self) -> None:
        # The block holds its unit: booked to this process where the
        # backend keeps books, so that it comes back if the process dies
        # inside (as `with sem:` does, in C).
        self._check_open()
        ev = self._ev
        await ev.acquire_async(undo=ev._can_hold())
        ev._block_enter()

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        # A fork child that inherited the block releases nothing: its
        # parent does.
        if self._ev._block_exit():
            self.release()


class BoundedSemaphore(Semaphore):
    """A semaphore that refuses to go above its initial value, a drop-in for
    :class:`threading.BoundedSemaphore`.

    :meth:`release` raises :class:`ValueError` ("Semaphore released too
    many times") and changes nothing when the count would pass the initial
    value.  Everything else is :class:`Semaphore`'s.

    How exact the check is depends on the backend.  On ``futex`` (the
    default) and ``pipe`` the count itself refuses to pass the bound, in
    the same atomic step that adds: exact across threads and processes.  On
    the kernel counters (``eventfd``, ``eventfd-readback``) a release looks
    at the count (in ``/proc/self/fdinfo``) and then adds, both while
    holding the GIL: exact among the threads of one process, but two
    processes releasing at the same instant can both pass the check, as
    with :class:`multiprocessing.BoundedSemaphore`.  (On
    ``eventfd-readback`` a semaphore read takes the whole count and writes
    the rest back, so a release that lands in that instant is checked
    against a count that is too low.)

    The arguments and their errors are :class:`Semaphore`'s; ``value`` is
    also the bound.
    """

    __slots__ = ()
    __module__ = "efd"

    @staticmethod
    def _bound_for(value: int) -> Tuple[int, ...]:
        return (value,)

    def _state(self) -> Tuple[Any, ...]:
        return (self._bound,)

    def _describe(self) -> str:
        return "%s/%s" % (super()._describe(), self._bound)


class Event(_OnEventFD, _efd.Event):
    """A flag that threads wait for, a drop-in for :class:`threading.Event`.

    The flag is a normal-mode :class:`efd.EventFD` (on the ``futex``
    backend where it works) whose count is above zero exactly while the
    flag is set, so :meth:`fileno` polls readable while it is set, and
    :meth:`set` wakes every waiter in every process that shares the event
    (fork, or handed to a :mod:`multiprocessing` child).  Waiters only look;
    they never consume.

    :meth:`is_set`, :meth:`set`, :meth:`clear` and :meth:`wait` behave as
    :class:`threading.Event`'s, timeouts included (a timeout that is not
    above zero, or NaN, only looks).  Within a process, :meth:`set` wakes
    every thread then blocked in :meth:`wait` (and every task in
    :meth:`wait_async`) with True, even if :meth:`clear` follows at once, as
    :class:`threading.Event` does.  A waiter in another process looks at the
    flag itself, as with :class:`multiprocessing.Event`: a :meth:`set`
    undone by :meth:`clear` before that waiter got to look can go unseen by
    it.

    Unlike :class:`threading.Event`, the event holds file descriptors:
    :meth:`close` it when done.

    Args:
        backend: Force an :class:`efd.EventFD` backend; ``None`` uses
            ``$EFD_BACKEND`` if set, else ``futex`` where it works, else the
            automatic choice.
    """

    __slots__ = ()
    __module__ = "efd"

    def __new__(cls, *args: Any, **kwargs: Any) -> "Event":
        if cls.__init__ is not Event.__init__:
            # A subclass with an __init__ of its own (see Semaphore): its
            # arguments are its own; ours come when it calls our __init__.
            args, kwargs = (), {}
        return cls._made(*args, **kwargs)

    @classmethod
    def _made(cls, *, backend: Optional[str] = None) -> "Event":
        self: Event = _efd.Event.__new__(
            cls, EventFD(0, backend=_default_backend(backend)))
        return self

    def __init__(self, *, backend: Optional[str] = None) -> None:
        if type(self).__init__ is Event.__init__:
            return                  # __new__ made it from these arguments
        wanted = _default_backend(backend)
        if wanted not in (None, self._ev.backend) and not self.is_set():
            self._reinit(EventFD(0, backend=wanted)).close()

    def _describe(self) -> str:
        return "set" if self.is_set() else "unset"

    @property
    def value(self) -> int:
        """1 while the flag is set, 0 while it is clear.

        Raises:
            ValueError: The event is closed.
        """
        if self._ev.closed:
            raise ValueError("I/O operation on closed %s"
                             % type(self).__name__)
        return 1 if self.is_set() else 0

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

        Threads and tasks of this process that are waiting at this moment
        return True even if :meth:`clear` follows at once.  Setting a set
        flag changes nothing.

        Raises:
            ValueError: The event is closed.
        """
        _efd.Event.set(self)
        if _aio._registry:
            _aio.notify_watchers(self._ev)

    async def wait_async(self, timeout: Optional[float] = None) -> bool:
        """Wait until the flag is set, from a coroutine.

        Every task waiting on the event in one loop shares one
        registration.  On the ``futex`` backend (and on ``pipe`` wherever
        Linux's futexes are), where the kernel's death bell works, the
        loop watches the door of a small helper thread of efd's, which
        sleeps as a blocked :meth:`wait` does and rings when the flag is
        set: an idle wait costs nothing.  Otherwise the loop's reader
        callback watches :meth:`fileno` (no threads), and on ``futex``
        and ``pipe`` also looks at the flag every 100 ms.

        Args:
            timeout: Seconds to wait at most; ``None`` waits without limit;
                a timeout that is not above zero (or NaN) only looks.

        Returns:
            True once the flag is set, False if the time ran out first.

        Under trio and anyio the call is always a checkpoint (a cancelled
        scope cancels it even when the flag is set); a task woken by
        :meth:`set` returns True even if its scope is cancelled right
        after, as ``trio.Event``'s waiters do.

        Raises:
            ValueError: The event is closed, or is closed while waiting.
            TypeError: ``timeout`` is not a number.
            NotImplementedError: The running loop cannot watch file
                descriptors.
        """
        # Event.wait's reading of the timeout (the C core's).
        seconds = _efd._check_timeout(timeout, _efd._TIMEOUT_LOOK)
        self._check_open()
        fam = _aio.family()
        if self.is_set() or seconds == 0:
            # trio and anyio: a checkpoint even when there is no wait.
            if fam.checkpoints:
                await fam.checkpoint()
            return self.is_set()
        if fam.checkpoints:
            await fam.checkpoint_if_cancelled()
        return await _aio.wait(self._ev, seconds, False) is not None
