"""efd: Linux eventfd as a semaphore and event for threads, processes and
event loops.

``efd.EventFD`` is a 64-bit counter behind a file descriptor.  In semaphore
mode each read takes one unit; otherwise a read takes everything.  Its
``fileno()`` polls readable while the count is above zero, so ``select``,
``selectors`` and asyncio can wait on it, and child processes can inherit it.
Where the kernel refuses ``EFD_SEMAPHORE``, or has no eventfd at all, an
emulation with the same guarantees takes over (see ``EventFD.backend``).
"""
from typing import Optional

from ._efd import (
    EFD_CLOEXEC,
    EFD_NONBLOCK,
    EFD_SEMAPHORE,
    eventfd,
    eventfd_read,
    eventfd_write,
)
from ._efd import EventFD as _CEventFD
from . import _aio, _handles
from ._handles import Handle, from_handle, recv_handle, send_handle

__all__ = [
    "EventFD",
    "EFD_CLOEXEC",
    "EFD_NONBLOCK",
    "EFD_SEMAPHORE",
    "eventfd",
    "eventfd_read",
    "eventfd_write",
    "MAX",
    "Semaphore",
    "BoundedSemaphore",
    "Event",
    "WouldBlock",
    "aio",
    "Handle",
    "from_handle",
    "send_handle",
    "recv_handle",
]

__version__ = "0.2.0"

#: The largest count an EventFD can hold: ``2**64 - 2``.
MAX = 2**64 - 2


class EventFD(_CEventFD):
    __doc__ = _CEventFD.__doc__
    __slots__ = ()

    async def acquire_async(self, timeout: Optional[float] = None, *,
                            undo: bool = False) -> bool:
        """Take what :meth:`acquire` takes, waiting in the running event loop.

        Works under asyncio (and uvloop), trio, and anyio on either backend.
        When no earlier task of the same loop is queued, the first try is
        one non-blocking read, so a coroutine that finds a unit never
        touches the loop.  Otherwise the task waits through the loop's own
        readiness primitive on :meth:`fileno` (no threads), and the tasks of
        one loop are served strictly in the order they started waiting: a
        newcomer never takes a unit while earlier tasks of its loop are
        queued for one.  A task that is cancelled consumes nothing: a unit
        already read for it goes to the next waiter or back to the counter.
        The loop stops watching the descriptor once nobody waits.

        Args:
            timeout: Seconds to wait at most (monotonic, never less);
                ``None`` or infinity waits without limit, ``0`` only tries
                (and, with earlier tasks queued, gives up at once).
            undo: Book what is taken to this process, as
                :meth:`acquire` does with ``undo=True``: if the process dies
                before a :meth:`release` of its own, it goes back.  (The
                loop's reader books the unit it takes for the task in the
                same step, so a death before the task resumes loses
                nothing.)

        Returns:
            True when a unit (in semaphore mode) or the whole count was
            taken, False when ``timeout`` ran out.

        Raises:
            ValueError: The object is closed, or is closed while the task
                waits; or ``timeout`` is negative or NaN; or ``undo`` is
                true and the backend keeps no books.
            TypeError: ``timeout`` is not a number.
            NotImplementedError: The running loop cannot watch file
                descriptors (such as the Windows proactor loop).
            RuntimeError: No supported async library runs the task.
        """
        seconds = None if timeout is None else _aio.check_timeout(timeout)
        fam = _aio.family()
        if fam.checkpoints:
            await fam.checkpoint_if_cancelled()
        if not (_aio._registry and _aio.queued(self)):
            if self.acquire(False, undo=undo):
                if fam.checkpoints:
                    await fam.cancel_shielded_checkpoint()
                return True
        elif self.closed:
            raise ValueError(_aio._CLOSED_MESSAGE)
        elif undo:
            self._can_hold(True)        # raises if undo cannot be kept
        if seconds == 0:
            if fam.checkpoints:
                await fam.cancel_shielded_checkpoint()
            return False
        value = await _aio.wait(self, seconds, True, undo)
        return value is not None

    async def read_async(self, timeout: Optional[float] = None) -> int:
        """One read, as :meth:`read` does, waiting in the running event loop.

        Waits like :meth:`acquire_async` when there is nothing to read, or
        when earlier tasks of the same loop are queued, whatever
        :attr:`nonblocking` says.  If the task is cancelled after the read
        was made for it, the value goes to the next waiter or back to the
        counter.  Under trio and anyio the call is always a checkpoint, as
        :meth:`acquire_async` is.

        Args:
            timeout: Seconds to wait at most (monotonic, never less);
                ``None`` or infinity waits without limit, ``0`` only tries.

        Returns:
            The value read: 1 in semaphore mode, the whole count otherwise.

        Raises:
            TimeoutError: ``timeout`` ran out with nothing read (the
                builtin :class:`TimeoutError`; a read never returns 0, so
                there is no value to signal it with).
            ValueError: The object is closed, or is closed while the task
                waits; or ``timeout`` is negative or NaN.
            TypeError: ``timeout`` is not a number.
            NotImplementedError: The running loop cannot watch file
                descriptors.
            RuntimeError: No supported async library runs the task.
        """
        seconds = None if timeout is None else _aio.check_timeout(timeout)
        fam = _aio.family()
        if fam.checkpoints:
            await fam.checkpoint_if_cancelled()
        if not (_aio._registry and _aio.queued(self)):
            value = self._try_read()
            if value is not None:
                if fam.checkpoints:
                    await fam.cancel_shielded_checkpoint()
                return value
        elif self.closed:
            raise ValueError(_aio._CLOSED_MESSAGE)
        if seconds == 0:
            if fam.checkpoints:
                await fam.cancel_shielded_checkpoint()
            raise TimeoutError("nothing to read")
        result: Optional[int] = await _aio.wait(self, seconds, True)
        if result is None:
            raise TimeoutError("nothing to read within %g s" % timeout)
        return result

    def close(self) -> None:
        """Close the descriptor(s); calling it again does nothing.

        Threads blocked in this object wake with :class:`ValueError`, and so
        do tasks waiting in :meth:`acquire_async`, :meth:`read_async` or
        :meth:`efd.Event.wait_async`.  Every event loop stops watching the
        descriptor *before* it is closed: loops running in other threads
        are asked to, and waited for (up to a second each; see
        :doc:`asyncio`), so that no loop keeps a registration for a
        descriptor that a forked child or a ``dup`` still holds open.
        """
        if self.closed:
            return
        _aio.begin_close(self)
        try:
            super().close()
        finally:
            _aio.end_close(self)

    def detach(self) -> int:
        """Give up the descriptor without closing it, as
        :meth:`socket.socket.detach` does; the object is closed afterwards.

        Threads blocked in this object wake with :class:`ValueError`, and so
        do tasks waiting in :meth:`acquire_async`, :meth:`read_async` or
        :meth:`efd.Event.wait_async`; every event loop stops watching the
        descriptor before this returns it (loops running in other threads
        are asked to, and waited for, as in :meth:`close`).

        Returns:
            The descriptor, now the caller's to close.

        Raises:
            ValueError: The object is closed, or its backend keeps the count
                outside the descriptor (only a kernel eventfd can be
                detached), or it holds units it could not write back.
        """
        fd: int = super().detach()
        if _aio._registry:
            # The number stays open (the caller has not got it yet), so the
            # loops can still name it when they remove their readers.
            _aio.begin_close(self)
            _aio.end_close(self)
        return fd

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def handle(self) -> "Handle":
        """A text naming this object, for :func:`efd.from_handle` in a
        program started with ``exec`` (see :doc:`processes`).

        Pass the descriptors it names along with it
        (``subprocess.Popen(..., pass_fds=h.fds, env={"JOBS": h})``); the
        program rebuilds the same class, backend, mode and count.  Any
        backend can be handed over this way.

        Returns:
            An :class:`efd.Handle` (a :class:`str`) with a ``fds`` tuple.

        Raises:
            ValueError: The object is closed.
        """
        return _handles.handle(self)

    def __reduce__(self):
        # A child process being started by multiprocessing (spawn or
        # forkserver): the descriptors are duplicated into the child, as
        # multiprocessing does for its own Connection objects.  Any other
        # pickle is for this process only (another interpreter, a queue's
        # get): it holds no descriptor, and loading it duplicates the live
        # object's (efd/_handles.py).
        from multiprocessing import context, reduction

        if context.get_spawning_popen() is None:
            return _handles.reduce_local(self, type(self), ())
        fds = tuple(reduction.DupFd(fd) for fd in self._fds())
        return (EventFD._rebuild,
                (fds, self.backend, self.semaphore, self.nonblocking))

    @staticmethod
    def _rebuild(dupfds, backend, semaphore, nonblocking):
        # Unpickling in the child: adopt the duplicated descriptors.  They
        # are ours until _from_fds succeeds (on failure it closes nothing),
        # so close them if it fails, or if a later one cannot be detached;
        # once adopted, they close when the child's process ends (no
        # ResourceWarning).
        fds = []
        try:
            for d in dupfds:
                fds.append(d.detach())
            ev = EventFD._from_fds(tuple(fds), backend, semaphore,
                                   nonblocking)
        except BaseException:
            import os
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
            raise
        _handles.close_at_exit(ev)
        return ev


# The drop-ins are built on EventFD, so they come last.
from ._sync import BoundedSemaphore, Event, Semaphore, WouldBlock  # noqa: E402
from . import aio  # noqa: E402  (efd.aio: asyncio's names, shared)

# Names needed only to build the module go; dir(efd) lists the public API,
# the submodules and the module's dunders.
del Optional, _CEventFD


def __dir__():
    return sorted(name for name, value in globals().items()
                  if name in __all__ or name.startswith("__")
                  or getattr(value, "__name__", None) == __name__ + "." + name)
