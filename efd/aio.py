"""asyncio's :class:`~asyncio.Semaphore`, :class:`~asyncio.BoundedSemaphore`,
:class:`~asyncio.Lock` and :class:`~asyncio.Event`, shared by processes.

``efd.aio.Semaphore(4)`` is used exactly as ``asyncio.Semaphore(4)`` is
(``await sem.acquire()``, ``sem.release()``, ``async with sem:``,
``sem.locked()``), but its count lives in an :class:`efd.EventFD` (on the
``futex`` backend where it works, like the threading drop-ins), so every
process that shares the object -- a fork child, a :mod:`multiprocessing`
child -- shares the count.  The same objects work under asyncio, uvloop,
trio and anyio (on either of its backends), and add what trio and anyio
users reach for: :meth:`Semaphore.acquire_nowait` (raising
:class:`efd.WouldBlock`), a :attr:`Semaphore.value` property and
:meth:`Semaphore.statistics`.

Behaviour, per library:

* **asyncio, uvloop**: as asyncio's own classes.  An acquire that finds a
  unit and nobody of its loop queued returns at once, without yielding;
  otherwise the task queues, and the tasks of one loop are served strictly
  in arrival order.  A release made in a task of the loop that has tasks
  queued hands the unit straight to the first of them (see
  ``efd._aio.hand_off``): no system call, and asyncio's timing.
* **trio, anyio**: every :meth:`~Semaphore.acquire` and
  :meth:`~Event.wait` is a checkpoint, as those libraries' own primitives
  are: a cancelled scope always cancels it, before anything is taken, and a
  task that got a unit without waiting still yields once (so the others
  get their turn: FIFO fairness).  An :meth:`Event.wait` that was woken by
  :meth:`~Event.set` returns normally even if its scope is cancelled right
  after, as ``trio.Event``'s does.

Cancellation never loses or duplicates a unit: a task cancelled after a
unit was handed to it passes the unit to the next task of its loop, or back
to the count.

Across processes the units are one count; FIFO order holds among the tasks
of one loop, not between processes.  In-process hand-offs are bounded
(:data:`HANDOFF_RUN` in a row, while anyone else may wait) so that waiters
of other processes, threads and loops are not starved by a busy loop.
"""
import inspect
import sys
from typing import (Any, Callable, NamedTuple, Optional, Tuple, Type,
                    TypeVar)
from types import TracebackType

from . import _aio, _efd
from ._sync import BoundedSemaphore as _SyncBounded
from ._sync import Event as _SyncEvent
from ._sync import Semaphore as _SyncSemaphore
from ._sync import WouldBlock

__all__ = ["Semaphore", "BoundedSemaphore", "Lock", "Event", "WouldBlock",
           "SemaphoreStatistics", "LockStatistics", "EventStatistics"]

#: In-process hand-offs in a row, after which a release goes through the
#: shared count even with tasks of the loop queued, so that a process whose
#: tasks keep the semaphore busy cannot starve waiters of other processes,
#: threads and loops -- unless none of them can exist: the object was never
#: handed to another process (no fork since it was made, no pickle or
#: handle, not inheritable) and no thread or other loop of this process
#: waits on it.  (A bound in time instead -- one trip a millisecond -- was
#: tried, and made other loops, threads and processes wait ten times
#: longer: the busy loop's own reader takes most trips' unit back.)
HANDOFF_RUN = 16

_try_acquire = _efd.Semaphore.acquire
_try_enter = _efd.Semaphore._try_enter
_core_release = _efd.Semaphore.release
_is_set = _efd.Event.is_set
_hinted = _aio._hinted
_anyio_runs_task = _aio._anyio_runs_task
_thread_library = _aio.thread_library
_Waiters = _aio._Waiters

_T = TypeVar("_T")


class SemaphoreStatistics(NamedTuple):
    """What :meth:`Semaphore.statistics` returns (anyio's names)."""

    #: Tasks of this process waiting in :meth:`Semaphore.acquire`.
    tasks_waiting: int


class LockStatistics(NamedTuple):
    """What :meth:`Lock.statistics` returns (trio's and anyio's names)."""

    #: Whether the lock is held (by any process).
    locked: bool
    #: Always None: the holder may be another process, and a task that
    #: holds it is not recorded.
    owner: None
    #: Tasks of this process waiting in :meth:`Lock.acquire`.
    tasks_waiting: int


class EventStatistics(NamedTuple):
    """What :meth:`Event.statistics` returns (trio's and anyio's names)."""

    #: Tasks of this process waiting in :meth:`Event.wait`.
    tasks_waiting: int


def _rebuild(cls: Any, core: Any) -> Any:
    # Unpickling in a multiprocessing child: the same class around the
    # threading drop-in (whose own pickling moved the descriptors).
    self = object.__new__(cls)
    self._core = core
    self._ev = core._ev
    self._run = 0
    self._rec = None
    return self


class _Base:
    # _rec: the wait record of a loop this object's tasks queued on last
    # (a hint for efd._aio.arrive and hand_off), while it is busy; None
    # otherwise, so that no idle record, and no closed loop, is kept.
    # _run: the in-process hand-offs in a row.
    __slots__ = ("_core", "_ev", "_run", "_rec", "__weakref__")
    _core: Any

    def __reduce__(self) -> Tuple[Any, Tuple[Any, ...]]:
        # For multiprocessing children (spawn, forkserver): the inner
        # drop-in checks that a child is being spawned and moves the
        # descriptors.
        return (_rebuild, (type(self), self._core))

    def _extra(self) -> str:
        raise NotImplementedError  # pragma: no cover

    def handle(self) -> Any:
        """A text naming this object, for :func:`efd.from_handle` in a
        program started with ``exec`` (or :func:`efd.send_handle` to an
        unrelated process): the same class, backend and bound there, over
        the same count.  See :meth:`efd.EventFD.handle`.

        Returns:
            An :class:`efd.Handle` (a :class:`str`) with a ``fds`` tuple.

        Raises:
            ValueError: The object is closed.
        """
        from . import _handles
        return _handles.handle(self)

    def __repr__(self) -> str:
        # asyncio's format: "<efd.aio.Lock object at 0x... [unlocked]>".
        res = object.__repr__(self)
        extra = "closed" if self._ev.closed else self._extra()
        return "<%s [%s]>" % (res[1:-1], extra)

    @property
    def backend(self) -> str:
        """The :class:`efd.EventFD` backend that holds the count."""
        backend: str = self._ev.backend
        return backend

    def fileno(self) -> int:
        """The descriptor to watch (do not read or write it): readable
        while units remain (a semaphore) or the flag is set (an event).

        Raises:
            ValueError: The object is closed.
        """
        fd: int = self._ev.fileno()
        return fd

    def close(self) -> None:
        """Close the descriptor(s); calling it again does nothing.  Tasks
        waiting in this object wake with :class:`ValueError`; other
        processes' copies stay usable."""
        self._core.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has been called."""
        closed: bool = self._ev.closed
        return closed

    def __enter__(self) -> None:
        raise TypeError("%r does not support 'with'; use 'async with'"
                        % type(self).__name__)

    def __exit__(self, *exc_info: object) -> None:  # pragma: no cover
        pass


class Semaphore(_Base):
    """asyncio's :class:`~asyncio.Semaphore`, with the count shared by
    processes.

    ``await acquire()`` takes a unit (waiting for one, FIFO among the tasks
    of this loop), :meth:`release` gives one back, ``async with sem:`` does
    both.  See the module's description for the behaviour under each
    library.

    Args:
        value: The initial count, ``0 .. 2**64 - 2``.
        backend: Force an :class:`efd.EventFD` backend; ``None`` uses
            ``$EFD_BACKEND`` if set, else ``futex`` where it works, else
            the automatic choice.

    Raises:
        ValueError: ``value`` is negative or above ``2**64 - 2``.
        OverflowError: ``value`` does not fit in 64 bits.
        TypeError: ``value`` is not an integer.
    """

    __slots__ = ()
    __module__ = "efd.aio"
    _SYNC: Any = _SyncSemaphore

    def __init__(self, value: int = 1, *,
                 backend: Optional[str] = None) -> None:
        self._core = self._SYNC(value, backend=backend)
        self._ev = self._core._ev
        self._run = 0
        self._rec = None

    # -- state ------------------------------------------------------------

    @property
    def value(self) -> int:
        """The count now, shared by every process (units handed straight
        to a task of this process never show up in it).

        Raises:
            ValueError: The object is closed.
        """
        ev = self._ev
        if ev.closed:
            raise ValueError("I/O operation on closed %s"
                             % type(self).__name__)
        result: int = ev.value      # after settling dead holders' books
        return result

    def locked(self) -> bool:
        """True if an :meth:`acquire` would wait now: the count is zero, or
        tasks of this process are queued for it (asyncio's rule)."""
        ev = self._ev
        if _aio._registry and _aio.queued_anywhere(ev):
            return True
        return not ev._look()       # (dead holders' units count as there)

    def statistics(self) -> SemaphoreStatistics:
        """What is knowable about the waiters: the tasks of *this* process
        waiting (other processes' are not counted)."""
        return SemaphoreStatistics(_aio.waiting(self._ev))

    def _extra(self) -> str:
        if self.locked():
            extra = "locked"
        else:
            extra = "unlocked, value:%s" % self._ev._peek()
        waiters = _aio.waiting(self._ev)
        if waiters:
            extra = "%s, waiters:%d" % (extra, waiters)
        return extra

    # -- taking -----------------------------------------------------------

    def acquire_nowait(self) -> None:
        """Take a unit if one is there and no task of this process is
        queued for one; never waits.

        Raises:
            efd.WouldBlock: No unit, or tasks of this process are queued
                (a newcomer never takes a unit meant for them).
            ValueError: The object is closed.
        """
        if _aio._registry and _aio.queued_anywhere(self._ev):
            if self._ev.closed:
                raise ValueError("I/O operation on closed %s"
                                 % type(self).__name__)
            raise WouldBlock
        if not _try_acquire(self._core, False):
            raise WouldBlock

    async def acquire(self, *, _hold: bool = False) -> bool:
        """Take a unit, waiting for one in the running loop.

        Under asyncio and uvloop a unit that is there (with no task of this
        loop queued) is taken without yielding; under trio and anyio the
        call is always a checkpoint.  A task cancelled while it waits takes
        nothing; one cancelled after a unit reached it passes the unit on.

        Returns:
            True.

        Raises:
            ValueError: The object is closed, or is closed while the task
                waits.
            RuntimeError: No supported async library runs the task.
        """
        ev = self._ev
        rec = self._rec
        if (rec is None or rec.thread is None
                or not (rec.consumers or rec.served) or not _hinted(rec)
                or _thread_library.name == "trio"
                or ("anyio._backends._asyncio" in sys.modules
                    and _anyio_runs_task())):
            # Not the record of a busy loop running here (an asyncio record
            # whose tasks are queued or served: arrive()'s answer, which
            # this asks in fewer steps), or trio runs the task (a guest run
            # on this loop's thread) or anyio does (both checkpoint
            # first): the questions in full.
            fam, rec = _aio.arrive(ev, rec)
            if fam.checkpoints:
                await fam.checkpoint_if_cancelled()
                fam, rec = _aio.arrive(ev)  # others may have come meanwhile
            if rec is None:
                if (_try_acquire(self._core, False, undo=True) if _hold
                        else _try_acquire(self._core, False)):
                    self._rec = None
                    if fam.checkpoints:
                        await fam.cancel_shielded_checkpoint()
                    return True
                rec = _aio.record_for(ev)
            if type(rec) is not _Waiters:   # trio's: never a hint
                await rec.take(_hold)
                return True
        # Queue behind the tasks of this loop (asyncio, uvloop).
        if ev.closed:
            raise ValueError("I/O operation on closed %s"
                             % type(self).__name__)
        # Queue on the record as its comment describes (_aio._Waiters), in
        # this coroutine: the path of every acquisition in a busy loop,
        # where two method calls or a coroutine more cost 3% of a hand-off
        # (benchmarks: async-handoff).
        self._rec = rec
        fut = rec.loop.create_future()
        rec.consumers.append(fut)
        if _hold:
            rec.holds.add(fut)      # the reader books it as it takes it
        try:
            if not rec.reading or rec.watchers:
                rec.watch()
            await fut
        except BaseException:
            rec.abandon(fut)
            if not (rec.consumers or rec.served):
                self._rec = None    # settled: keep no idle record (loop)
            raise
        if _hold:                   # booked by whoever served it
            rec.holds.discard(fut)
        rec.served -= 1
        if not rec.consumers:
            if not rec.watchers:
                rec.settle()
            if not rec.served:
                self._rec = None
        return True

    # -- giving -----------------------------------------------------------

    #: What a hand-off must refuse besides a closed object (it does not go
    #: through the count's own checks): a method, or None (the bound).
    _check_release: Any = None

    def release(self) -> None:
        """Give a unit back.

        With tasks of the running loop queued (called from one of its
        tasks or callbacks), the first of them gets the unit directly;
        otherwise it goes to the shared count, waking a waiter of any
        process.

        Raises:
            ValueError: The object is closed.
        """
        ev = self._ev
        if ev._aio_records:             # tasks of some loop wait on it
            if ev.closed:
                raise ValueError("I/O operation on closed %s"
                                 % type(self).__name__)
            run = self._run
            if run >= HANDOFF_RUN and ev._alone():
                run = 0         # nobody else could be let in: a new run
            if run < HANDOFF_RUN:
                if _aio.hand_off(ev, self._check_release, self._rec):
                    self._run = run + 1
                    return
        self._run = 0
        _core_release(self._core)

    async def __aenter__(self) -> None:
        # The block holds its unit: booked to this process where the
        # backend keeps books, so that it comes back if the process dies
        # inside (_can_hold(): on the kernel counters it consumes, as
        # before; where this process cannot claim a holder slot, it
        # consumes and warns once).  Booked in the step that takes it,
        # whoever takes it (the fast path, the loop's reader, trio's head
        # task).  A subclass's own acquire() is awaited as asyncio's
        # __aenter__ awaits it, with asyncio's signature: what it takes is
        # not held.
        if type(self).acquire is not _OWN_ACQUIRE:
            await self.acquire()
        # No task of this process queued on any object (nobody to let
        # in first) and a library that does not checkpoint (asyncio,
        # uvloop): the take and the block's entry in one call, as acquire()
        # would take it.
        elif (not _aio._registry and not _aio.family().checkpoints
                and _try_enter(self._core)):
            self._rec = None
            return
        else:
            await self.acquire(_hold=self._ev._can_hold())
        self._ev._block_enter()

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        how = self._ev._unhold_block()
        if how == 1:
            # Booked: back through the count, which takes it off the books
            # in the same step (a hand-off to a queued task would leave
            # it booked, and a death would give it back twice).
            self._release_counted()
        elif how == 2:
            self.release()
        # 0: a fork child's copy of its parent's block: nothing

    def _release_counted(self) -> None:
        # release() through the shared count, never handed to a task.
        if self._ev.closed:
            raise ValueError("I/O operation on closed %s"
                             % type(self).__name__)
        self._run = 0
        _core_release(self._core)


# acquire()'s `_hold` is __aenter__'s alone: what help() and the docs show
# is asyncio's signature.
_ACQUIRE = inspect.signature(Semaphore.acquire)
Semaphore.acquire.__signature__ = _ACQUIRE.replace(  # type: ignore
    parameters=[_ACQUIRE.parameters["self"]])
del _ACQUIRE
#: What __aenter__ compares a class's acquire() with: a subclass may
#: override it, as it may asyncio's.
_OWN_ACQUIRE = Semaphore.acquire


class BoundedSemaphore(Semaphore):
    """asyncio's :class:`~asyncio.BoundedSemaphore`, shared by processes:
    :meth:`release` raises :class:`ValueError` and changes nothing when the
    count would pass the initial value (exact across processes on the
    ``futex`` and ``pipe`` backends; see :class:`efd.BoundedSemaphore`).

    The arguments are :class:`Semaphore`'s; ``value`` is also the bound.
    """

    __slots__ = ()
    __module__ = "efd.aio"
    _SYNC = _SyncBounded
    #: What a release past the bound raises, as asyncio's class does.
    _TOO_MANY: Tuple[Type[Exception], str] = (
        ValueError, "BoundedSemaphore released too many times")

    def __init__(self, value: int = 1, *,
                 backend: Optional[str] = None) -> None:
        super().__init__(value, backend=backend)

    def _check_release(self) -> None:
        # A hand-off does not change the count; refuse what the count's
        # own check would refuse.
        if (self._ev._peek() or 0) + 1 > self._core._bound:
            raise ValueError("BoundedSemaphore released too many times")

    def release(self) -> None:
        """Give a unit back; see :meth:`Semaphore.release`.

        Raises:
            ValueError: The count would pass the initial value
                ("BoundedSemaphore released too many times"), or the
                object is closed.
        """
        self._within_bound(super().release)

    def _within_bound(self, release: Callable[[], None]) -> None:
        # Run a release; past the bound, raise what asyncio's class raises
        # (_TOO_MANY) instead of the core's words.
        try:
            release()
        except ValueError as exc:
            if "too many" in str(exc):
                kind, words = self._TOO_MANY
                raise kind(words) from None
            raise

    def _release_counted(self) -> None:
        self._within_bound(super()._release_counted)


class Lock(BoundedSemaphore):
    """asyncio's :class:`~asyncio.Lock`, shared by processes: a bounded
    semaphore of one unit.

    Like asyncio's, it has no owner: any task (of any process) may release
    it.

    Args:
        backend: Force an :class:`efd.EventFD` backend (see
            :class:`Semaphore`).
    """

    __slots__ = ()
    __module__ = "efd.aio"
    _TOO_MANY = (RuntimeError, "Lock is not acquired.")

    def __init__(self, *, backend: Optional[str] = None) -> None:
        super().__init__(1, backend=backend)

    def locked(self) -> bool:
        """True while the lock is held (by a task of any process), or
        tasks of this process are queued for it."""
        return super().locked()

    def _extra(self) -> str:
        extra = "locked" if self.locked() else "unlocked"
        waiters = _aio.waiting(self._ev)
        if waiters:
            extra = "%s, waiters:%d" % (extra, waiters)
        return extra

    def statistics(self) -> LockStatistics:  # type: ignore[override]
        """``locked``, ``owner`` (None: not knowable across processes) and
        the tasks of this process waiting."""
        return LockStatistics(self.locked(), None, _aio.waiting(self._ev))

    def release(self) -> None:
        """Release the lock; the first queued task of this loop (or a
        waiter of any process) gets it.

        Raises:
            RuntimeError: The lock is not held ("Lock is not acquired.").
            ValueError: The object is closed.
        """
        if _aio._registry and _aio.in_flight(self._ev):
            # Handed to a queued task that has not run yet: the lock is
            # released already (asyncio's Lock is unlocked until that task
            # runs, and refuses a second release meanwhile).
            raise RuntimeError("Lock is not acquired.")
        super().release()


class Event(_Base):
    """asyncio's :class:`~asyncio.Event`, set and cleared for every
    process that shares it.

    :meth:`set` wakes every task waiting in :meth:`wait`, in every process;
    tasks of this process waiting at that moment return True even if
    :meth:`clear` follows at once.

    Args:
        backend: Force an :class:`efd.EventFD` backend (see
            :class:`Semaphore`).
    """

    __slots__ = ()
    __module__ = "efd.aio"

    def __init__(self, *, backend: Optional[str] = None) -> None:
        self._core = _SyncEvent(backend=backend)
        self._ev = self._core._ev
        self._run = 0
        self._rec = None

    @property
    def value(self) -> int:
        """1 while the flag is set, 0 while it is clear.

        Raises:
            ValueError: The object is closed.
        """
        return 1 if self.is_set() else 0

    def is_set(self) -> bool:
        """True while the flag is set."""
        result: bool = _is_set(self._core)
        return result

    def set(self) -> None:
        """Set the flag and wake every waiter, in every process.

        Raises:
            ValueError: The object is closed.
        """
        self._core.set()

    def clear(self) -> None:
        """Clear the flag; later :meth:`wait` calls wait again.

        Raises:
            ValueError: The object is closed.
        """
        self._core.clear()

    def statistics(self) -> EventStatistics:
        """The tasks of this process waiting (others are not counted)."""
        return EventStatistics(_aio.waiting(self._ev))

    def _extra(self) -> str:
        extra = "set" if self.is_set() else "unset"
        waiters = _aio.waiting(self._ev)
        if waiters:
            extra = "%s, waiters:%d" % (extra, waiters)
        return extra

    async def wait(self) -> bool:
        """Wait until the flag is set.

        Under asyncio and uvloop a set flag returns at once; under trio and
        anyio the call is always a checkpoint.

        Returns:
            True.

        Raises:
            ValueError: The object is closed, or is closed while waiting.
            RuntimeError: No supported async library runs the task.
        """
        fam = _aio.family()
        if _is_set(self._core):
            if fam.checkpoints:
                await fam.checkpoint()
            return True
        if fam.checkpoints:
            await fam.checkpoint_if_cancelled()
        await _aio.wait(self._ev, None, False)
        return True


if sys.version_info < (3, 8):  # pragma: no cover
    raise ImportError("efd.aio needs Python 3.8+")
