"""Async support for :class:`efd.EventFD`: waiting through the event loop.

A coroutine that has to wait for a unit does not block the loop and does not
use a thread.  It waits through the readiness primitive of the library that
runs it, found the way ``sniffio`` finds it (without needing ``sniffio``
when only asyncio is installed):

* **asyncio** (and uvloop, and anyio on its asyncio backend): the task
  queues a future on a :class:`_Waiters` record, one per ``(EventFD, loop)``
  pair, and that record keeps one reader callback on the loop for the
  object's readiness while anybody waits.  When it polls readable the
  callback hands units to the queued futures in FIFO order, one
  non-blocking read each, and stops at the first read that finds nothing
  (another thread or process got there first: spurious readiness is
  normal).  What the reader watches: where the object offers a loop
  sleeper (``EventFD._loop_sleeper()``, efd_loop.c), that sleeper's
  descriptor -- a helper thread of efd's (on ``futex``, asleep on the
  futex word; on the kernel counter, asleep in an epoll instance of its
  own where the counter is registered with ``EPOLLEXCLUSIVE``) or a ring
  -- so that a release wakes one loop of all those waiting in every
  process, whatever the loop.  Otherwise :meth:`~efd.EventFD.fileno`;
  there, where the object wakes waiters one at a time
  (:attr:`efd.EventFD._wake_one`) and the loop waits with
  :class:`selectors.EpollSelector` (asyncio's default loop on Linux), the
  reader is registered with ``EPOLLEXCLUSIVE`` in the loop's epoll set
  (:func:`_register_exclusive`: the fallback, ``EFD_LOOP_SLEEP=fileno``);
  a loop that took a unit and still waits registers again, at the back of
  the kernel's line.  A loop registered that way that stops watching
  while units are there passes the wake-up on
  (:meth:`efd.EventFD._pass_on`), and looks at the count every
  :data:`RECHECK` seconds while it watches, in case the loop chosen for a
  wake-up belonged to a process that was killed before it could read.
* **trio** (and anyio on its trio backend): the tasks of one ``trio.run``
  waiting on one object queue on a fair :class:`trio.Lock`
  (:class:`_TrioWaiters`); the task at the head alone waits in
  :func:`trio.lowlevel.wait_readable` -- on the loop sleeper's descriptor
  where there is one, as above -- and reads for itself.

Fairness: within one loop (one ``trio.run``), waiters are served strictly in
arrival order.  A task that finds a unit while earlier tasks of its loop are
queued, or have been served and not yet resumed, joins the queue instead of
taking it (as :class:`asyncio.Semaphore` has done since 3.11.1); with no queue
the first try is one non-blocking read that never touches the loop.

Cancellation: a task that is cancelled after a unit was read for it gives the
unit to the next waiter of its loop, or back to the counter.  (Under trio the
head task reads for itself with no checkpoint between the read and the
return, so nothing is ever read for a cancelled task.)

Timeouts are measured on :func:`time.monotonic`; a timer that fires before the
deadline (uvloop rounds timers to milliseconds) is armed again for the rest.

Closing: :meth:`efd.EventFD.close` calls :func:`begin_close` before the
descriptor goes.  Every record of the object is failed (its tasks get
:class:`ValueError`) and its reader removed -- directly for the running loop
and loops not running, and for loops (and ``trio.run`` calls) running in
other threads by handing the work to that thread and waiting for it, up to
:data:`CLOSE_WAIT` seconds -- so that no loop still watches the number when
it is closed.  While the object is being closed no new wait can register.

Fork: a child process starts with an empty registry; the records it inherits
belong to the parent's loops (whose epoll set the child shares), and the child
never touches them.
"""
import asyncio
import math
import os
import select
import selectors
import sys
import threading
import time
import types
import warnings
from collections import deque
from typing import (TYPE_CHECKING, Any, Deque, Dict, List, Optional, Set,
                    Tuple)

from . import _efd

try:
    import sniffio
except ImportError:  # pragma: no cover - trio and anyio both require it
    sniffio = None

if TYPE_CHECKING:  # pragma: no cover
    from . import EventFD

#: sniffio's per-thread library name, which trio (0.22 and later) sets for
#: as long as it runs tasks in this thread, guest runs on another loop
#: included: whether trio runs the current task, in one load.  Where
#: sniffio is absent, so is trio: a stand-in that never says so.
thread_library: Any = (sniffio.thread_local if sniffio is not None
                       else types.SimpleNamespace(name=None))

__all__ = ["check_timeout", "begin_close", "end_close", "notify_watchers",
           "family", "hand_off", "loop_running", "record_for",
           "queued_anywhere", "waiting",
           "queued", "wait", "CLOSE_WAIT"]

#: The live wait records, keyed by ``(EventFD, loop)`` for asyncio and
#: ``(EventFD, TrioToken)`` for trio.  An entry exists only while a task of
#: that loop waits on the object or has been served and not yet resumed (its
#: frame holds the same two objects), so the strong references cannot outlive
#: the wait.  Changed only with :data:`_lock` held.
_registry: Dict[Tuple[Any, Any], Any] = {}

#: Objects whose close() is under way: no new record may be published.
_closing: Set[Any] = set()

#: Guards :data:`_registry` and :data:`_closing` between threads.
_lock = threading.Lock()

#: Seconds :meth:`efd.EventFD.close` waits for each loop running in another
#: thread to remove its reader before closing the descriptor anyway.
CLOSE_WAIT = 1.0

_CLOSED_MESSAGE = "I/O operation on closed EventFD"

#: Backends whose count lives in shared memory: their readiness descriptor
#: can lag the count after a process death, so waits also look at the count
#: every RECHECK seconds.
_COUNT_IN_MEMORY = frozenset(("pipe", "futex"))
RECHECK = 0.1

#: Seconds a loop stops watching a memory backend's descriptor that polled
#: readable with nothing to take: the token outlives the count for a moment
#: while the process that took the last unit brings it in step, and a loop
#: told "readable" again at once would spin (the C wait loop backs off the
#: same way).
STALE_BACKOFF = 0.001

_get_running_loop = asyncio._get_running_loop
_get_ident = threading.get_ident

#: ``select.EPOLLEXCLUSIVE`` where Python has it (Linux), else 0.
_EPOLLEXCLUSIVE = getattr(select, "EPOLLEXCLUSIVE", 0)
#: The epoll-based selector class, where the platform has one.
_EpollSelector = getattr(selectors, "EpollSelector", None)


def _loop_epoll(loop: asyncio.AbstractEventLoop) -> Any:
    # The epoll object (select.epoll, or whatever stands in for it) that an
    # asyncio selector loop waits in, or None for any other loop (uvloop,
    # other selectors, the proactor).
    if not _EPOLLEXCLUSIVE or _EpollSelector is None:
        return None
    selector = getattr(loop, "_selector", None)
    if not isinstance(selector, _EpollSelector):
        return None
    epoll = getattr(selector, "_selector", None)
    if not (hasattr(epoll, "register") and hasattr(epoll, "unregister")):
        return None
    return epoll


def _register_exclusive(loop: asyncio.AbstractEventLoop, fd: int,
                        callback: Any) -> bool:
    """Make the reader that ``loop.add_reader(fd, callback)`` has just
    registered an exclusive one, where the loop allows it.

    On an asyncio loop whose selector is :class:`selectors.EpollSelector`,
    ``fd`` is taken out of the selector's epoll set and put back with
    ``EPOLLIN | EPOLLEXCLUSIVE`` (``EPOLL_CTL_MOD`` refuses that flag).  The
    selector's own map is left as it is, so ``remove_reader`` works as
    before (``EPOLL_CTL_DEL`` accepts an exclusive entry).  The loop is not
    waiting meanwhile (this runs in its thread, or while it is stopped),
    and adding an entry looks at the descriptor at once, so no readiness is
    missed in between.

    Args:
        loop: The loop that has just registered the reader.
        fd: The descriptor watched.
        callback: The reader callback (to register the reader again should
            the epoll set refuse both ways).

    Returns:
        True if the registration is now exclusive; False if it is the
        plain one (any other loop, a writer on the same descriptor, or a
        kernel that refuses the flag).

    Raises:
        OSError: The descriptor could be registered neither way (the
            reader is then registered again through the loop, which
            raised).
    """
    epoll = _loop_epoll(loop)
    if epoll is None:
        return False
    key = loop._selector.get_map().get(fd)  # type: ignore[attr-defined]
    if key is None or key.events != selectors.EVENT_READ:
        # Not registered by us alone, or a writer too: leave it be.
        return False
    try:
        epoll.unregister(fd)
    except (OSError, ValueError):
        return False
    try:
        epoll.register(fd, select.EPOLLIN | _EPOLLEXCLUSIVE)
        return True
    except (OSError, ValueError):
        pass
    try:
        epoll.register(fd, select.EPOLLIN)
    except (OSError, ValueError):
        # The set refused the plain entry too: start over through the
        # loop, which raises if it cannot either.
        loop.remove_reader(fd)
        loop.add_reader(fd, callback)
    return False


def _orphaned(loop: asyncio.AbstractEventLoop, fd: int) -> bool:
    # Whether the selector of a loop we registered ``fd`` in exclusively no
    # longer knows the fd (see _Waiters._recheck).
    selector = getattr(loop, "_selector", None)
    try:
        return selector is not None and selector.get_map().get(fd) is None
    except (AttributeError, RuntimeError):
        return False


def _drop_orphan(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    # After remove_reader() of an exclusive registration: make sure the
    # kernel's epoll set holds no entry for ``fd`` that the selector has
    # forgotten (it would report readiness nobody asked for: a spin).
    epoll = _loop_epoll(loop)
    if epoll is None or not _orphaned(loop, fd):
        return
    try:
        epoll.unregister(fd)
    except (OSError, ValueError):
        pass                            # gone already: nothing to drop


def _forget_in_child() -> None:
    # After fork(), in the child: the records describe the parent's loops and
    # tasks.  Drop them without touching any loop, since the child shares the
    # parent's epoll instances and a remove_reader() here would remove the
    # parent's registration.
    global _lock
    for (ev, _loop), record in _registry.items():
        ev._aio_records = 0
        if type(record) is _Waiters:
            # Never a hint again (arrive(), hand_off()): its loop is the
            # parent's, though its thread number may be this child's.
            record.thread = None
    _registry.clear()
    _closing.clear()
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


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


def _trio_token() -> Any:
    # The running trio.run's token, or None outside trio.
    trio = sys.modules.get("trio")
    if trio is None:
        return None
    try:
        return trio.lowlevel.current_trio_token()
    except RuntimeError:
        return None


def _library() -> Optional[str]:
    # The async library running the current task: "asyncio", "trio", another
    # name sniffio knows, or None outside any.  sniffio's convention, with
    # its cheap checks first: the name a library declares for its thread or
    # task (trio does, also as a guest on an asyncio loop), then asyncio's
    # running loop, then whatever else sniffio can tell.
    if sniffio is not None:
        name: Optional[str] = (sniffio.thread_local.name
                               or sniffio.current_async_library_cvar.get())
        if name is not None:
            return name
    if _get_running_loop() is not None:
        return "asyncio"
    if sniffio is not None:
        try:
            name = sniffio.current_async_library()
        except sniffio.AsyncLibraryNotFoundError:
            return None
        return name
    return "trio" if _trio_token() is not None else None


def _publish(record: Any) -> None:
    # Make a new record visible to close() and to later waiters, unless the
    # object is closed or being closed (checked under the lock that close()
    # takes, so a record is either seen by close() or refused here).
    with _lock:
        if record.ev in _closing or record.ev.closed:
            raise ValueError(_CLOSED_MESSAGE)
        if _registry.get(record.key) is None:
            record.ev._aio_records += 1      # the C drop-ins look at it
        _registry[record.key] = record


def _unpublish(record: Any) -> None:
    with _lock:
        if _registry.get(record.key) is record:
            del _registry[record.key]
            record.ev._aio_records -= 1


def _records_of(ev: "EventFD") -> List[Any]:
    with _lock:
        return [rec for key, rec in _registry.items() if key[0] is ev]


def _served(fut: "asyncio.Future[Any]") -> bool:
    # A consumer's future that received a unit (rather than a timeout's None,
    # a cancellation or an exception).
    return (fut.done() and not fut.cancelled() and fut.exception() is None
            and fut.result() is not None)


def _run_elsewhere(schedule: Any, work: Any) -> Optional[threading.Event]:
    # Hand `work` to another thread's loop through `schedule` (its
    # call_soon_threadsafe or run_sync_soon); the event is set once it ran.
    # None when that loop is gone (nothing of it is left to undo).
    done = threading.Event()

    def run() -> None:
        try:
            work()
        finally:
            done.set()

    try:
        schedule(run)
    except RuntimeError:        # closed asyncio loop, finished trio.run
        return None
    return done


def _loop_sleeper_of(record: Any) -> Any:
    """A record's loop sleeper (efd_loop.c), made on first use; None where
    the object or this process offers none.  (The ``_sleeper`` method of
    both records.)"""
    if record.sleeper is None:
        record.sleeper = record.ev._loop_sleeper() or False
    return record.sleeper or None


class _Waiters:
    """Everything one asyncio loop waits for on one EventFD.

    ``consumers`` are futures of tasks that want a read's value (FIFO);
    ``watchers`` are futures of tasks that only want to see the descriptor
    readable (:meth:`efd.Event.wait_async`), all woken together; ``served``
    counts consumers that were handed a value and have not resumed yet
    (newcomers queue behind them).  The reader callback is registered while
    anybody is queued; the record stays published while anybody is queued
    or served.  ``exclusive`` tells whether that registration is an
    ``EPOLLEXCLUSIVE`` one (see :func:`_register_exclusive`): only while
    nobody waits as a watcher, since :meth:`efd.Event.set` must wake every
    loop.
    """

    __slots__ = ("ev", "loop", "thread", "tid_attr", "fd", "key",
                 "consumers", "watchers", "served", "reading", "exclusive",
                 "recheck", "poller", "plain_only", "paused", "stale_runs",
                 "sleeper", "ring", "for_ready", "holds")

    def __init__(self, ev: "EventFD", loop: asyncio.AbstractEventLoop) -> None:
        self.ev = ev
        self.loop = loop
        self.thread = threading.get_ident()     # made by a task of `loop`
        # _hinted() may read the loop's `_thread_id` (see there).
        self.tid_attr = (isinstance(loop, asyncio.BaseEventLoop)
                         and hasattr(loop, "_thread_id"))
        if ev.closed:
            raise ValueError(_CLOSED_MESSAGE)
        # The descriptor the reader watches: the object's fileno(), or a
        # loop sleeper's (see watch()); asked for when first watched, since
        # a futex object's fileno() makes every release keep it in step.
        self.fd = -1
        self.key = (ev, loop)
        self.consumers: Deque["asyncio.Future[Any]"] = deque()
        self.watchers: List["asyncio.Future[Any]"] = []
        self.served = 0
        self.reading = False
        self.exclusive = False
        self.plain_only = False         # see _recheck
        self.stale_runs = 0             # see _back_off
        self.recheck: Any = None
        self.poller: Any = None
        self.paused: Any = None
        # A futex object's loop sleeper (efd_loop.c): None until asked
        # for, False where this loop cannot sleep that way.  `ring`: the
        # reader watches the sleeper's descriptor now (its helper's door,
        # or its ring).
        self.sleeper: Any = None
        self.ring = False
        # The sleeper sleeps for readiness (watchers wait), not for units.
        self.for_ready = False
        # Consumers that hold what they take (a `with` block, undo=True):
        # whoever serves one books its unit to this process before it is
        # theirs -- the reader in the same step as it takes it
        # (EventFD._try_read_hold), give_back() and hand_off() before they
        # pass one on -- so that no death before the task resumes loses
        # it.  So a served consumer's unit is booked exactly when the
        # consumer is in `holds`.
        self.holds: Set["asyncio.Future[Any]"] = set()

    def busy(self) -> bool:
        """Whether a newcomer must queue: consumers wait or were served.

        Not the tasks of a loop that was closed with them still queued:
        they can never run again, so no unit is meant for them (the record
        is dropped).
        """
        if self.loop.is_closed():
            self.fail(ValueError(_CLOSED_MESSAGE))
            return False
        return bool(self.consumers or self.served)

    def count_waiting(self) -> int:
        """Tasks of this loop waiting now (consumers and watchers)."""
        return (sum(not fut.done() for fut in self.consumers)
                + sum(not fut.done() for fut in self.watchers))

    def watch(self) -> None:
        """Register the reader callback unless it is registered.

        On a futex object, the loop sleeps on the object's futex word
        through its loop sleeper (:meth:`_sleep`): a helper thread, or a
        ring.  With only consumers queued, one release wakes one loop of
        all those waiting; with watchers, a helper sleeps as a blocked
        :meth:`efd.Event.wait` does (every release wakes it), and costs
        nothing while idle.  A ring sleeps for units only, so watchers
        make it give way to the descriptor.  Otherwise the reader watches
        :meth:`efd.EventFD.fileno`; that registration is exclusive where
        the object wakes waiters one at a time and the loop allows it,
        unless watchers wait (an exclusive registration that a watcher
        joins is made plain again).
        """
        if self.reading:
            if self.ring:
                if not self.watchers or self.sleeper.kind == "helper":
                    self._sleep()       # for units, or for readiness
                    return
                # A watcher wants readiness, which a ring cannot wait for.
                self.unwatch()
            elif not (self.exclusive and self.watchers):
                return
            else:
                # A watcher must see every set(): register the plain way.
                # The loop keeps watching, so there is nothing to pass on.
                self.unwatch(pass_on=False)
        if (self._sleeper() is not None
                and (not self.watchers or self.sleeper.kind == "helper")):
            try:
                self.fd = self.sleeper.fileno()
            except OSError:
                # Its ring is gone (a cancel io_uring refused): wait the
                # old way from now on.
                self.sleeper.close()
                self.sleeper = False
            else:
                self._add_reader()
                self.reading = self.ring = True
                self._sleep()
                return
        self.fd = self.ev.fileno()          # ValueError if closed
        self._add_reader()
        self.reading = True
        if self.ev._wake_one and not self.watchers and not self.plain_only:
            try:
                self.exclusive = _register_exclusive(self.loop, self.fd,
                                                     self._ready)
            except OSError:
                self.reading = False    # the loop holds no reader now
                raise
        if self.exclusive or self.ev.backend in _COUNT_IN_MEMORY:
            self.recheck = self.loop.call_later(RECHECK, self._recheck)

    _sleeper = _loop_sleeper_of

    def _sleep(self) -> None:
        # Sleep on the futex word (again): units there now are served at
        # once.  A loop whose helper thread sleeps for it (efd_futex.c, "A
        # loop's helper") needs nothing more: the helper sleeps with the
        # death bell.  Through a ring, the loop looks at the count every
        # RECHECK seconds as well: a loop killed while a release had
        # chosen it rings for nobody ("An event loop's sleep").
        self.for_ready = bool(self.watchers)
        try:
            ready = self.sleeper.sleep(self.for_ready)
        except OSError:
            # The sleeper failed (a ring that a sandbox refuses
            # io_uring_enter after the probe said yes, a helper that lost
            # the bell): wait the old way from now on.
            self.unwatch()
            self.sleeper.close()
            self.sleeper = False
            self.watch()
            return
        if ready:
            self.loop.call_soon(self._ready)
        if self.recheck is None and self.sleeper.rechecks:
            self.recheck = self.loop.call_later(RECHECK, self._recheck)

    def _add_reader(self) -> None:
        try:
            self.loop.add_reader(self.fd, self._ready)
        except NotImplementedError:
            raise NotImplementedError(
                "efd: %s cannot watch file descriptors (it has no working "
                "add_reader()); run the coroutine on a selector-based loop "
                "such as asyncio.SelectorEventLoop or uvloop"
                % type(self.loop).__name__
            ) from None

    def _recheck(self) -> None:
        # The memory backends' token can go missing with a process killed
        # between changing the count and moving it, and a process killed
        # while its loop was the one an exclusive wake-up chose takes the
        # wake-up with it: look at the count itself every RECHECK seconds
        # while anybody waits (SPEC 5: a wake-up owed by a dead process
        # arrives within that interval).  A kernel counter's descriptor
        # polls readable exactly while the count is above zero, and poll()
        # costs far less than _peek()'s read of /proc.
        self.recheck = None
        if not self.reading or self.ev.closed:
            return
        if self.exclusive and _orphaned(self.loop, self.fd):
            # Somebody changed this fd's registration in our loop (an
            # add_writer: the kernel refuses to modify an exclusive entry,
            # and the selector forgot the fd, leaving the kernel's entry
            # behind).  Drop the kernel's entry, and wait the plain way.
            self.reading = self.exclusive = False
            _drop_orphan(self.loop, self.fd)
            self.plain_only = True
            self.watch()
            return
        try:
            if self.ev.backend in _COUNT_IN_MEMORY:
                # (_look() also gives back the units of holders found dead:
                # nobody tells a loop of their deaths.)
                ready = bool(self.ev._look())
            else:
                if self.poller is None:
                    self.poller = select.poll()
                    self.poller.register(self.fd, select.POLLIN)
                ready = bool(self.poller.poll(0))
        except ValueError:              # closed: close() fails the waiters
            return
        if ready:
            self._ready()
        if self.reading and self.recheck is None:
            self.recheck = self.loop.call_later(RECHECK, self._recheck)

    def unwatch(self, pass_on: bool = True) -> None:
        """Remove the reader callback if it is registered.

        After an exclusive registration, and unless ``pass_on`` is False or
        the object is being closed, the wake-up is passed on to another
        waiter if units are there: this loop may have been the one a
        release woke, and it is not going to take them.
        """
        if not self.reading:
            return
        self.reading = False
        ring, self.ring = self.ring, False
        exclusive, self.exclusive = self.exclusive, False
        if self.recheck is not None:
            self.recheck.cancel()
            self.recheck = None
        if self.paused is not None:     # the reader is off for now anyway
            self.paused.cancel()
            self.paused = None
        try:
            self.loop.remove_reader(self.fd)
        except (OSError, RuntimeError, ValueError):
            # The loop is closed: nothing of it is left registered.
            pass
        if ring:
            # Cancels the sleep, and passes on a wake-up that chose it.
            self.sleeper.rest()
            return
        if exclusive:
            _drop_orphan(self.loop, self.fd)
        ev = self.ev
        if exclusive and pass_on and not ev.closed and ev not in _closing:
            try:
                ev._pass_on()
            except (OSError, ValueError):
                # Closed meanwhile (its waiters are woken anyway), or an
                # error the next wait will report; the others re-check.
                pass

    def settle(self) -> None:
        """Drop the reader once nobody is queued, the record once nobody is
        queued or served."""
        if not self.consumers and not self.watchers:
            self.unwatch()
            if not self.served:
                _unpublish(self)
        elif self.ring and self.for_ready and not self.watchers:
            # The watchers are gone, consumers wait on: sleep for units
            # again, so that a release wakes one loop, not every one.
            self._sleep()

    def _ready(self) -> None:
        # The reader callback: the descriptor polled readable (or, with a
        # sleeper, its descriptor: the sleeper is told first).
        # Watchers are told when the count is above 0: fileno() polled
        # readable, or (a helper's door) the loop sees it so now -- a call
        # whose event was cleared again meanwhile by another process may
        # go unseen, as efd.Event says; this process's set() tells its
        # watchers itself (notify()).
        readable = True
        if self.ring:
            try:
                self.sleeper.woke()
                readable = bool(self.watchers and self.ev._peek())
            except ValueError as exc:
                self.fail(exc)
                return
        if self.watchers and readable:
            watchers, self.watchers = self.watchers, []
            for fut in watchers:
                if not fut.done():
                    fut.set_result(True)
        queue = self.consumers
        try_read = self.ev._try_read
        holds = self.holds
        took = stale = False
        try:
            while queue:
                fut = queue[0]
                if fut.done():          # timed out or cancelled meanwhile
                    queue.popleft()
                    continue
                hold = holds and fut in holds
                value = (self.ev._try_read_hold if hold else try_read)()
                if value is None:       # someone else took it: wait again
                    stale = not took
                    break
                queue.popleft()
                self.served += 1
                took = True
                fut.set_result(value)
            if took and queue and self.exclusive:
                # Still waiting: go to the back of the kernel's line for
                # exclusive wake-ups, as a process's threads do after
                # taking a unit; otherwise the loop that registered first
                # would win every release while it has tasks queued.
                self.exclusive = _register_exclusive(self.loop, self.fd,
                                                     self._ready)
            if (queue or self.watchers) and self.ring:
                self._sleep()           # its tasks still wait: sleep again
        except (OSError, ValueError) as exc:
            self.fail(exc)
            return
        if stale and self.ev.backend in _COUNT_IN_MEMORY and not self.ring:
            self._back_off()
        else:
            self.stale_runs = 0
        self.settle()

    def _back_off(self) -> None:
        # Readable with nothing to take, on a memory backend: stop watching
        # for STALE_BACKOFF seconds rather than be told again at once, twice
        # as long each time in a row (a token whose mover is descheduled or
        # stopped), up to RECHECK.  (The re-check keeps running; the reader
        # comes back as it was.)
        if self.paused is not None or not self.reading:
            return
        try:
            self.loop.remove_reader(self.fd)
        except (OSError, RuntimeError, ValueError):
            return
        delay = min(STALE_BACKOFF * (1 << min(self.stale_runs, 10)), RECHECK)
        self.stale_runs += 1
        self.paused = self.loop.call_later(delay, self._resume)

    def _resume(self) -> None:
        # The back-off is over: watch the descriptor again.
        self.paused = None
        if not self.reading:
            return
        try:
            self.loop.add_reader(self.fd, self._ready)
            if self.exclusive:
                self.exclusive = _register_exclusive(self.loop, self.fd,
                                                     self._ready)
        except OSError as exc:
            self.fail(exc)

    def notify(self) -> None:
        """Resolve every watcher's future with True (the event was set)."""
        watchers, self.watchers = self.watchers, []
        for fut in watchers:
            if not fut.done():
                fut.set_result(True)
        self.settle()

    def notify_soon(self) -> None:
        """:meth:`notify`, from any thread."""
        loop = self.loop
        if _get_running_loop() is loop or not loop.is_running():
            self.notify()
        else:
            _run_elsewhere(loop.call_soon_threadsafe, self.notify)

    def fail(self, exc: BaseException) -> None:
        """End every queued wait with ``exc``, remove the reader and forget
        the record."""
        futures = list(self.consumers) + self.watchers
        self.consumers.clear()
        self.watchers = []
        # A closed loop too: nothing of it is left registered (unwatch()
        # bears that), but its sleeper must rest -- a helper left wanting
        # would sleep on the word for nobody (a consumers' helper taking a
        # release's wake-up only to pass it on 100 ms later) until close().
        self.unwatch()
        _unpublish(self)
        if self.loop.is_closed():
            return      # its tasks can never run: nothing to tell them
        for fut in futures:
            if not fut.done():
                fut.set_exception(exc)

    def fail_soon(self, exc: BaseException) -> Optional[threading.Event]:
        """:meth:`fail`, from any thread: done at once for this thread's
        running loop and for loops not running; otherwise handed to the
        loop's thread, with an event that is set once it ran."""
        loop = self.loop
        if _get_running_loop() is loop or not loop.is_running():
            self.fail(exc)
            return None
        done = _run_elsewhere(loop.call_soon_threadsafe,
                              lambda: self.fail(exc))
        if done is None:                # the loop closed meanwhile
            self.fail(exc)
        return done

    def give_back(self, value: int, booked: bool = False) -> None:
        """Pass ``value``, read for a task that will not take it, on.

        The next pending consumer gets it (keeping FIFO order and saving two
        system calls); with none, it goes back to the counter.  A
        ``booked`` value (held by this process, see ``holds``) goes only
        to a consumer that holds what it takes: a plain consumer's unit
        must not come back if the process dies, so it goes back to the
        counter then (a release by a holder takes it off the books in the
        same step) and the consumer waits on.  A plain value going to a
        holder is booked first.
        """
        queue = self.consumers
        while queue and queue[0].done():
            queue.popleft()
        holder = bool(queue) and queue[0] in self.holds
        if queue and (holder or not booked):
            fut = queue[0]
            try:
                if holder and not booked:
                    # Booked before it is the holder's, as the reader and
                    # hand_off() do: no death until it resumes loses it.
                    self.ev._book(value)
            except (OSError, ValueError):
                pass        # not bookable (closed): the count's, below
            else:
                queue.popleft()
                self.served += 1
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
        """Drop ``fut`` from the queues, then :meth:`settle`."""
        # Served futures are gone already; look before removing (a failed
        # deque.remove() would build a message with the future's repr).
        consumers, watchers = self.consumers, self.watchers
        if consumers and fut in consumers:
            consumers.remove(fut)
        elif watchers and fut in watchers:
            watchers.remove(fut)
        self.settle()

    def _expire(self, fut: "asyncio.Future[Any]", deadline: float,
                timer: List[Any]) -> None:
        # Timer callback.  Some loops fire early (uvloop rounds to whole
        # milliseconds): before the monotonic deadline, arm again for the
        # rest; after it, end the wait with nothing taken.
        if fut.done():
            return
        remaining = deadline - time.monotonic()
        if remaining > 0:
            timer[0] = self.loop.call_later(remaining, self._expire, fut,
                                            deadline, timer)
        else:
            fut.set_result(None)

    async def wait(self, timeout: Optional[float], consume: bool,
                   hold: bool = False) -> Any:
        """Queue the running task and wait; see :func:`wait`."""
        fut = self.loop.create_future()
        if consume:
            self.consumers.append(fut)
            if hold:
                self.holds.add(fut)
        else:
            self.watchers.append(fut)
        timer: List[Any] = [None]
        try:
            self.watch()
            if timeout is not None:
                deadline = time.monotonic() + timeout
                timer[0] = self.loop.call_later(timeout, self._expire, fut,
                                                deadline, timer)
            # A holder's unit is booked by whoever served it (_ready,
            # give_back, hand_off).
            return await fut
        except BaseException:
            if consume and _served(fut):
                # Served, but cancelled before it could resume: pass it on.
                self.give_back(fut.result(), fut in self.holds)
            raise
        finally:
            if timer[0] is not None:
                timer[0].cancel()
            if consume and _served(fut):
                self.served -= 1
            if hold:
                self.holds.discard(fut)
            self.discard(fut)

    # A consumer without a deadline -- every contended acquire() -- queues
    # in efd.aio's acquire() itself, with no coroutine of ours between it
    # and its future: it appends the future to `consumers`, makes sure the
    # reader is registered (watch()), awaits, and on the normal way out
    # only settles the books (`served`, settle()): a served future was
    # taken off the queue by whoever served it.  A consumer that leaves
    # otherwise calls abandon().

    def abandon(self, fut: "asyncio.Future[Any]") -> None:
        """The consumer leaves without resuming (cancelled, failed): a unit
        served to it meanwhile goes on (:meth:`give_back`)."""
        if _served(fut):
            self.give_back(fut.result(), fut in self.holds)
            self.served -= 1
        self.holds.discard(fut)
        self.discard(fut)


class _TrioWaiters:
    """Everything one ``trio.run`` waits for on one EventFD.

    The tasks queue on a fair :class:`trio.Lock`; the holder alone waits in
    :func:`trio.lowlevel.wait_readable` (trio allows one waiter per
    descriptor), reads for itself and hands the lock to the next task.  On
    a futex object the holder sleeps on the futex word through a loop
    sleeper, as an asyncio loop does (:meth:`_sleeper_wait`): one release
    wakes one ``trio.run`` of all those waiting.  ``watchers`` maps
    the cancel scope of each :meth:`efd.Event.wait_async` task to whether
    it was notified.
    """

    __slots__ = ("ev", "token", "fd", "key", "lock", "consumers", "users",
                 "watchers", "failed", "sleeper", "sleeper_fd")

    def __init__(self, ev: "EventFD", token: Any) -> None:
        import trio
        self.ev = ev
        self.token = token
        if ev.closed:
            raise ValueError(_CLOSED_MESSAGE)
        # The object's fileno(), asked for when a task first waits on it:
        # a futex object's fileno() makes every release keep it in step,
        # and a run whose helper sleeps for it never needs it.
        self.fd = -1
        self.key = (ev, token)
        self.lock = trio.Lock()
        self.consumers = 0
        self.users = 0
        self.watchers: Dict[Any, bool] = {}
        self.failed = False
        # The futex object's loop sleeper (efd_loop.c): None until asked
        # for, False where this run cannot sleep that way.
        self.sleeper: Any = None
        # The sleeper's descriptor while a task waits on it, for fail():
        # close() may have closed it (and the sleeper) by then, and trio
        # must still be told that number is gone.
        self.sleeper_fd = -1

    #: Nothing is served past the queue under trio (the holder of the
    #: queue's lock reads for itself); arrive() reads it as for asyncio.
    served = 0
    #: Never a hint (see arrive()): no asyncio loop runs it.
    thread = None

    def busy(self) -> bool:
        """Whether a newcomer must queue: consumer tasks are inside."""
        return self.consumers > 0

    def count_waiting(self) -> int:
        """Tasks of this ``trio.run`` waiting now."""
        return self.users

    async def _wait_readable(self) -> None:
        import trio
        if self.failed:
            raise ValueError(_CLOSED_MESSAGE)
        if self.fd < 0:
            self.fd = self.ev.fileno()      # ValueError if closed
        try:
            if self.ev.backend not in _COUNT_IN_MEMORY:
                await trio.lowlevel.wait_readable(self.fd)
                return
            # The memory backends: look at the count itself every RECHECK
            # seconds as well (see _Waiters._recheck).
            while not self.failed:
                with trio.move_on_after(RECHECK):
                    await trio.lowlevel.wait_readable(self.fd)
                    return
                if self.ev._look():
                    return
        except trio.ClosedResourceError:
            raise ValueError(_CLOSED_MESSAGE) from None

    _sleeper = _loop_sleeper_of

    async def _sleeper_wait(self) -> None:
        # Sleep on the futex word through the loop sleeper until it may
        # have units (or, through a ring, RECHECK passed: a loop killed
        # while a release had chosen it rings for nobody, see
        # _Waiters._sleep).  Falls back to the readiness descriptor for
        # good if the sleeper fails.
        import trio
        sleeper = self.sleeper
        try:
            ready = sleeper.sleep()
        except OSError:
            sleeper.close()
            self.sleeper = False
            return
        if ready:
            await trio.lowlevel.checkpoint()
            return
        try:
            with trio.move_on_after(RECHECK if sleeper.rechecks
                                    else math.inf):
                await self._wait_sleeper(sleeper)
        except trio.ClosedResourceError:
            raise ValueError(_CLOSED_MESSAGE) from None
        if self.failed:
            raise ValueError(_CLOSED_MESSAGE)
        if not sleeper.woke():
            # RECHECK passed with the sleep in flight: look at the count
            # (and the books of holders found dead) before trying again.
            self.ev._look()

    async def _consume(self, hold: bool = False) -> int:
        import trio
        async with self.lock:
            # Taking trio's lock ends in a shielded checkpoint: a scope
            # cancelled meanwhile (and a release made meanwhile) must
            # cancel this task before it reads, not after (anyio's
            # test_cancel_during_acquire).
            await trio.lowlevel.checkpoint_if_cancelled()
            # A unit the task holds is booked as it is read.
            try_read = self.ev._try_read_hold if hold else self.ev._try_read
            slept = False
            try:
                while True:
                    if self.failed:
                        raise ValueError(_CLOSED_MESSAGE)
                    value = try_read()
                    if value is not None:
                        # No checkpoint from the read to the caller: a unit
                        # is never read for a task that is then cancelled.
                        return value
                    if self._sleeper() is not None:
                        slept = True
                        await self._sleeper_wait()
                    else:
                        await self._wait_readable()
            finally:
                if slept and self.sleeper:
                    # Cancels a sleep in flight, and passes on a wake-up
                    # that chose this run if it is not taking it.
                    self.sleeper.rest()

    async def _wait_sleeper(self, sleeper: Any) -> None:
        # wait_readable() on the sleeper's descriptor, its number kept for
        # fail() meanwhile.
        import trio
        self.sleeper_fd = sleeper.fileno()
        try:
            await trio.lowlevel.wait_readable(self.sleeper_fd)
        finally:
            self.sleeper_fd = -1

    async def _sleeper_watch(self) -> bool:
        # Event.wait_async through a helper sleeper (efd_futex.c, "A
        # loop's helper"): it sleeps as a blocked Event.wait() does, with
        # the death bell, so this run neither looks every RECHECK seconds
        # nor asks for fileno().  True once this run sees the count above
        # 0 (a call whose event another process cleared again goes
        # unseen, as efd.Event says); False if the sleeper failed (wait
        # the old way).
        import trio
        sleeper = self.sleeper
        try:
            while True:
                # A task that took the queue's lock after close() failed
                # the record (fail() ended only the task asleep then, and
                # the helper's door goes with the object: trio would wait
                # on it for ever).
                if self.failed:
                    raise ValueError(_CLOSED_MESSAGE)
                try:
                    ready = sleeper.sleep(True)
                except OSError:
                    sleeper.close()
                    self.sleeper = False
                    return False
                if ready:
                    return True
                try:
                    await self._wait_sleeper(sleeper)
                except trio.ClosedResourceError:
                    raise ValueError(_CLOSED_MESSAGE) from None
                if self.failed:
                    raise ValueError(_CLOSED_MESSAGE)
                sleeper.woke()
        finally:
            if self.sleeper:
                self.sleeper.rest()

    async def _watch(self) -> bool:
        import trio
        with trio.CancelScope() as scope:
            self.watchers[scope] = False
            try:
                async with self.lock:
                    sleeper = self._sleeper()
                    if (sleeper is None or sleeper.kind != "helper"
                            or not await self._sleeper_watch()):
                        await self._wait_readable()
                return True
            except trio.Cancelled:
                # notify() cancels this scope; when an outer scope is
                # cancelled too, trio lets the Cancelled through this one.
                # A set() that came first keeps its wake-up (trio.Event's
                # rule): return normally, and the outer scope's cancellation
                # is delivered at the caller's next checkpoint.
                if self.watchers.get(scope):
                    return True
                raise
            finally:
                notified = self.watchers.pop(scope)
        return notified

    async def take(self, hold: bool = False) -> Any:
        """``wait(None, True, hold)``: efd.aio's acquire under trio."""
        return await self.wait(None, True, hold)

    async def wait(self, timeout: Optional[float], consume: bool,
                   hold: bool = False) -> Any:
        """Queue the running task and wait; see :func:`wait`."""
        import trio
        self.users += 1
        if consume:
            self.consumers += 1
        try:
            if timeout is None:
                return await (self._consume(hold) if consume
                              else self._watch())
            deadline = time.monotonic() + timeout
            while True:
                # Clamped: a timeout of a few nanoseconds, or a clock tick
                # between the check below and this line, leaves less than
                # nothing, and trio refuses a negative span.
                with trio.move_on_after(max(0.0, deadline - time.monotonic())):
                    return await (self._consume(hold) if consume
                                  else self._watch())
                if time.monotonic() >= deadline:
                    return None
        finally:
            self.users -= 1
            if consume:
                self.consumers -= 1
            if not self.users:
                _unpublish(self)

    def notify(self) -> None:
        """End every watcher's wait with True (the event was set)."""
        for scope in self.watchers:
            self.watchers[scope] = True
            scope.cancel()

    def _in_run(self) -> bool:
        return _trio_token() is self.token

    def notify_soon(self) -> None:
        """:meth:`notify`, from any thread."""
        if self._in_run():
            self.notify()
        else:
            _run_elsewhere(self.token.run_sync_soon, self.notify)

    def fail(self, exc: BaseException) -> None:
        """End every wait with :class:`ValueError` and make trio forget the
        descriptor (``notify_closing``); forget the record."""
        import trio
        self.failed = True
        _unpublish(self)
        if self.fd >= 0:
            trio.lowlevel.notify_closing(self.fd)
        if self.sleeper_fd >= 0:
            # By number: close() closed the sleeper, and its descriptor,
            # before this ran if this run was busy then (a task that does
            # not yield for longer than CLOSE_WAIT); the task asleep on it
            # is told all the same.
            trio.lowlevel.notify_closing(self.sleeper_fd)

    def fail_soon(self, exc: BaseException) -> Optional[threading.Event]:
        """:meth:`fail`, from any thread (see :meth:`_Waiters.fail_soon`)."""
        if self._in_run():
            self.fail(exc)
            return None
        done = _run_elsewhere(self.token.run_sync_soon, lambda: self.fail(exc))
        if done is None:                # that trio.run has ended
            _unpublish(self)
        return done


def _running_key() -> Any:
    # What the running task's records are keyed by: its trio.run's token,
    # else its asyncio loop (None outside both).  _library()'s answer for
    # those two, at a third of the cost (see family()).
    if "trio" in sys.modules and _trio_runs():
        return _trio_token()
    return _get_running_loop()


def _hinted(hint: Any) -> bool:
    # Whether `hint`, a record the caller used before, is the running
    # loop's: its loop runs in this thread now (a thread runs one loop at a
    # time).  Cheaper than asking for the running loop, which costs a
    # getpid() system call in CPython's asyncio.  The one private attribute
    # read here: an asyncio BaseEventLoop's `_thread_id`, the thread that
    # runs it or None, which answers both questions in one load.  Other
    # loops (uvloop) may have moved to another thread since the record was
    # made, and still run there: for them, ask.
    if hint.tid_attr:
        return hint.loop._thread_id == _get_ident()
    return _get_running_loop() is hint.loop


def arrive(ev: "EventFD", hint: Any = None) -> Tuple["_Family", Any]:
    """What an ``acquire()`` asks first, in one call (it runs on every
    one): the family of the library running the task (:func:`family`),
    and the running task's record for ``ev`` if tasks of its loop are
    queued there or were served and have not resumed -- a newcomer must
    then queue behind them with the record's ``take()`` -- else None.

    Args:
        ev: The object about to be read.
        hint: The record this caller queued on last, or None: if it is
            busy and its loop runs here, it is the answer, found without
            the registry.  (A busy record is published: only an idle one
            is dropped.)
    """
    fam = family()
    if not _registry:
        return fam, None
    if (fam is not TRIO and hint is not None and hint.thread is not None
            and (hint.consumers or hint.served) and _hinted(hint)):
        return fam, hint
    key = _trio_token() if fam is TRIO else _get_running_loop()
    record = _registry.get((ev, key)) if key is not None else None
    # The running loop's own record: its loop is not closed (busy()'s
    # question), so the queues alone say.
    if record is None or not (record.consumers or record.served):
        return fam, None
    return fam, record


def _drop_closed_loops(ev: "EventFD") -> None:
    # Records of loops closed while their tasks waited (a loop closed with
    # tasks pending, without asyncio.run's cancelling): those tasks can
    # never run, and the registry keeps them alive.  A new loop's first
    # wait drops them, letting their sleepers rest (see _Waiters.fail).
    for record in _records_of(ev):
        if type(record) is _Waiters and record.loop.is_closed():
            record.fail(ValueError(_CLOSED_MESSAGE))


def record_for(ev: "EventFD") -> Any:
    """The running task's record for ``ev``, made and published if new.

    Raises:
        ValueError: ``ev`` is closed.
        RuntimeError: No supported async library runs the task.
    """
    if _registry:
        key = _running_key()
        if key is not None:
            record = _registry.get((ev, key))
            if record is not None:
                return record
    library = _library()
    if library == "asyncio":
        loop = asyncio.get_running_loop()
        record = _registry.get((ev, loop))
        if record is None:
            _drop_closed_loops(ev)
            record = _Waiters(ev, loop)
            _publish(record)
        return record
    if library == "trio":
        token = _trio_token()
        record = _registry.get((ev, token))
        if record is None:
            record = _TrioWaiters(ev, token)
            _publish(record)
        return record
    if library is None:
        raise RuntimeError("efd: no running event loop (asyncio, uvloop, "
                           "trio or anyio) to wait in")
    raise RuntimeError("efd: cannot wait under %s: the async methods work "
                       "under asyncio, uvloop, trio and anyio" % library)


def hand_off(ev: "EventFD", check: Any = None, hint: Any = None) -> bool:
    """Give one unit that the caller holds straight to the first task of
    the running loop queued for ``ev`` (asyncio), without crossing the
    descriptor.

    Conservation: the unit was taken from the shared count by a task of
    this process and is moved to another task of the same process; the
    count is not touched, so no other process can see it, and nobody sees
    it twice.  It is exactly a release and an acquire with nothing between
    them.  A served task that is cancelled before it resumes passes the
    unit on (:meth:`_Waiters.give_back`): to the next queued task, or back
    to the count.

    Args:
        ev: The semaphore-mode object.
        check: Called (it may raise) once a task to hand to is found,
            before anything changes: the checks a release into the count
            would make.
        hint: The record the caller's object queued on last, or None (see
            :func:`arrive`).

    Returns:
        True if a queued task of the running loop got the unit; False if
        there is none (the caller releases into the count).
    """
    # The running loop's record: the hint, else the registry's.
    if (hint is not None and hint.thread is not None and hint.consumers
            and _hinted(hint)):
        record = hint
    else:
        record = (_registry.get((ev, _get_running_loop())) if _registry
                  else None)
        if record is None or type(record) is not _Waiters:
            return False
    queue = record.consumers
    while queue and queue[0].done():     # timed out or cancelled meanwhile
        queue.popleft()
    if not queue:
        return False
    if check is not None:
        check()
    fut = queue[0]
    if record.holds and fut in record.holds:
        ev._book(1)             # the task holds it: booked before it is its
    queue.popleft()
    record.served += 1
    fut.set_result(1)
    return True


def waiting(ev: "EventFD") -> int:
    """How many tasks of this process (every loop, every ``trio.run``)
    wait on ``ev`` now.

    Args:
        ev: The object.
    """
    if not _registry:
        return 0
    total = 0
    for record in _records_of(ev):
        total += record.count_waiting()
    return total


def queued_anywhere(ev: "EventFD") -> bool:
    """Whether tasks of any loop of this process are queued for ``ev``'s
    units (or were served and have not resumed).  A non-blocking taker
    (``acquire_nowait()``, the threading drop-ins' ``acquire(False)``) then
    refuses rather than take a unit meant for them.

    Args:
        ev: The object.
    """
    if not _registry:
        return False
    return any(record.busy() for record in _records_of(ev))


def in_flight(ev: "EventFD") -> bool:
    """Whether a unit of ``ev`` was handed to a task of this process (any
    loop) that has not resumed yet: it is that task's, though the task does
    not know it yet.

    Args:
        ev: The object.
    """
    if not _registry or not ev._aio_records:
        return False
    return any(record.served for record in _records_of(ev))


def queued(ev: "EventFD") -> bool:
    """Whether tasks of the running loop are queued for ``ev``'s units (or
    were served and have not resumed yet): a newcomer must then queue too,
    rather than take a unit that is there.

    Args:
        ev: The object about to be read.

    Returns:
        False outside a supported async library, or with no such task.
    """
    if not _registry:
        return False
    key = _running_key()
    if key is None:
        return False
    record = _registry.get((ev, key))
    return record is not None and record.busy()


async def wait(ev: "EventFD", timeout: Optional[float], consume: bool,
               hold: bool = False) -> Any:
    """Wait in the running loop until ``ev`` serves this task, or polls
    readable.

    The caller has already tried once when that was allowed (see
    :func:`queued`) and validated ``timeout`` with :func:`check_timeout`:
    this only waits.

    Args:
        ev: The object to wait on.
        timeout: Seconds to wait at most; ``None`` waits without limit.
        consume: True to be served one read's value, in FIFO order among
            this loop's consumers; False to be told when the descriptor
            polls readable (or :func:`notify_watchers` is called), taking
            nothing (with every other watcher).
        hold: (``consume`` only) book what is read to this process in the
            same step, as ``acquire(undo=True)`` does: the caller holds it.

    Returns:
        The value read (``consume``), True (not ``consume``), or None when
        ``timeout`` ran out.

    Raises:
        ValueError: ``ev`` is closed, or is closed while the task waits.
        NotImplementedError: The loop cannot watch file descriptors.
        RuntimeError: No supported async library runs the task.
    """
    record = record_for(ev)
    return await record.wait(timeout, consume, hold)


def notify_watchers(ev: "EventFD") -> None:
    """Tell every task waiting for ``ev`` to poll readable that it did.

    :meth:`efd.Event.set` calls this, so that a task waiting in
    :meth:`efd.Event.wait_async` when the event is set returns True even if
    :meth:`~efd.Event.clear` follows before its loop looks at the
    descriptor (as with :class:`asyncio.Event`).  Safe from any thread:
    loops running in other threads are handed the work (asyncio's
    ``call_soon_threadsafe``, trio's ``run_sync_soon``).  Consumers
    (:meth:`~efd.EventFD.acquire_async`) are not touched.

    Args:
        ev: The object that was made readable.
    """
    if not _registry:
        return
    for record in _records_of(ev):
        if record.watchers:
            record.notify_soon()


def begin_close(ev: "EventFD") -> None:
    """Prepare ``ev`` to be closed: refuse new waits, end the current ones
    with :class:`ValueError`, and have every loop drop its reader.

    Loops running in other threads do that in their own thread; this waits
    for them, up to :data:`CLOSE_WAIT` seconds in all, and warns
    (:class:`RuntimeWarning`) about a loop that did not answer in time.
    Call :func:`end_close` once the descriptor is closed.

    Args:
        ev: The object about to be closed.
    """
    with _lock:
        _closing.add(ev)
    pending = []
    for record in _records_of(ev):
        done = record.fail_soon(ValueError(_CLOSED_MESSAGE))
        if done is not None:
            pending.append((record, done))
    if not pending:
        return
    deadline = time.monotonic() + CLOSE_WAIT
    for record, done in pending:
        if not done.wait(max(0.0, deadline - time.monotonic())):
            warnings.warn(
                "efd: the event loop of another thread (%r) did not stop "
                "watching the descriptor within %g s of close(); closing it "
                "anyway" % (getattr(record, "loop", None) or record.token,
                            CLOSE_WAIT),
                RuntimeWarning, stacklevel=3)


def end_close(ev: "EventFD") -> None:
    """Undo :func:`begin_close`'s refusal once ``ev`` is closed (its
    ``closed`` flag refuses from now on).

    Args:
        ev: The object just closed.
    """
    with _lock:
        _closing.discard(ev)


# ---- Families: what efd needs from the library running a task -------------
#
# Each event-loop family answers two questions behind one small interface:
# does every acquire/wait have to be a checkpoint (trio's and anyio's rule),
# and how does it make one.  Plain asyncio and uvloop need none (asyncio's
# own primitives return at once when they can); trio, and anyio on either
# backend, get their own lowlevel checkpoints.  The one reach into a
# library's internals is _anyio_runs_task() below.


class _Family:
    """asyncio and uvloop: no forced checkpoints."""

    __slots__ = ()
    name = "asyncio"
    #: Whether every acquire/wait must be a checkpoint.
    checkpoints = False

    async def checkpoint_if_cancelled(self) -> None:
        """Raise the library's cancellation if the task's scope is
        cancelled; otherwise return (without yielding if possible)."""

    async def cancel_shielded_checkpoint(self) -> None:
        """Yield to the scheduler once, without raising a cancellation."""

    async def checkpoint(self) -> None:
        """Both: raise if cancelled, and yield."""


class _Anyio(_Family):
    """anyio running the task (on its asyncio backend; on trio the trio
    family's checkpoints are anyio's): anyio's own lowlevel checkpoints."""

    __slots__ = ()
    name = "anyio"
    checkpoints = True

    async def checkpoint_if_cancelled(self) -> None:
        import anyio.lowlevel
        await anyio.lowlevel.checkpoint_if_cancelled()

    async def cancel_shielded_checkpoint(self) -> None:
        import anyio.lowlevel
        await anyio.lowlevel.cancel_shielded_checkpoint()

    async def checkpoint(self) -> None:
        import anyio.lowlevel
        await anyio.lowlevel.checkpoint()


class _Trio(_Family):
    """trio (and anyio on its trio backend)."""

    __slots__ = ()
    name = "trio"
    checkpoints = True

    async def checkpoint_if_cancelled(self) -> None:
        import trio
        await trio.lowlevel.checkpoint_if_cancelled()

    async def cancel_shielded_checkpoint(self) -> None:
        import trio
        await trio.lowlevel.cancel_shielded_checkpoint()

    async def checkpoint(self) -> None:
        import trio
        await trio.lowlevel.checkpoint()


ASYNCIO = _Family()
ANYIO = _Anyio()
TRIO = _Trio()


def _anyio_runs_task() -> bool:
    # Whether anyio (asyncio backend) runs the current asyncio task: anyio
    # keeps a state record for each task it knows (its cancel scopes).  This
    # is the one place efd reads a library's private attribute; if a future
    # anyio drops it, every task is treated as anyio's once anyio is loaded
    # (the safe side: a checkpoint too many, never one too few).
    backend = sys.modules.get("anyio._backends._asyncio")
    if backend is None:
        return False
    states = getattr(backend, "_task_states", None)
    if states is None:           # pragma: no cover - another anyio layout
        return True
    try:
        task = asyncio.current_task()
    except RuntimeError:         # pragma: no cover - no running loop
        return False
    return task is not None and task in states


def family() -> _Family:
    """The family of the library running the current task.

    Outside any library (a coroutine stepped by hand) or under one efd
    does not support, this is the asyncio family (no checkpoints): a unit
    that is there is taken on the first step, and a wait raises
    :class:`RuntimeError` when it needs a loop (:func:`wait`).
    """
    # On every acquire and wait, so the cheap questions first: a library
    # that was never imported runs nothing here (sys.modules), and whether
    # trio runs is the name it declares for its thread (sniffio's
    # convention) -- not the whole of _library(), whose running-loop
    # question costs more than the rest of an uncontended acquire.
    modules = sys.modules
    if "trio" in modules and _trio_runs():
        return TRIO
    if "anyio._backends._asyncio" in modules and _anyio_runs_task():
        return ANYIO
    return ASYNCIO


def _trio_runs() -> bool:
    # Whether trio (or anyio on trio) runs the current task: _library()'s
    # first and last questions, which are the ones that can say "trio".
    if sniffio is not None:
        return (sniffio.thread_local.name
                or sniffio.current_async_library_cvar.get()) == "trio"
    return _trio_token() is not None


def loop_running() -> bool:
    """Whether this thread runs an event loop (asyncio, uvloop, trio,
    anyio) right now: a blocking call here would stall it."""
    if _get_running_loop() is not None:
        return True
    try:
        return _library() is not None
    except Exception:            # pragma: no cover - a broken sniffio
        return False
