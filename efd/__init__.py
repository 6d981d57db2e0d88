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
from . import _aio

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
]

__version__ = "0.1.0"

#: The largest count an EventFD can hold: ``2**64 - 2``.
MAX = 2**64 - 2


class EventFD(_CEventFD):
    __doc__ = _CEventFD.__doc__
    __slots__ = ()

    async def acquire_async(self, timeout: Optional[float] = None) -> bool:
        """Take what :meth:`acquire` takes, waiting in the running event loop.

        The first try is one non-blocking read, so a coroutine that finds a
        unit never touches the loop.  Otherwise the task waits through the
        loop's reader callback on :meth:`fileno` (no threads): all the tasks
        of one loop waiting on one object share one registration and are
        served in the order they started waiting.  A task that is cancelled
        consumes nothing: a unit already read for it goes to the next waiter
        or back to the counter.  The loop's reader is removed once nobody
        waits.

        Args:
            timeout: Seconds to wait at most (monotonic); ``None`` or
                infinity waits without limit, ``0`` only tries.

        Returns:
            True when a unit (in semaphore mode) or the whole count was
            taken, False when ``timeout`` ran out.

        Raises:
            ValueError: The object is closed, or is closed while the task
                waits; or ``timeout`` is negative or NaN.
            TypeError: ``timeout`` is not a number.
            NotImplementedError: The running loop cannot watch file
                descriptors (such as the Windows proactor loop).
        """
        seconds = None if timeout is None else _aio.check_timeout(timeout)
        if self.acquire(False):
            return True
        if seconds == 0:
            return False
        return await _aio.wait(self, seconds, True) is not None

    async def read_async(self) -> int:
        """One read, as :meth:`read` does, waiting in the running event loop.

        Waits like :meth:`acquire_async` when there is nothing to read,
        whatever :attr:`nonblocking` says.  If the task is cancelled after
        the read was made for it, the value goes to the next waiter or back
        to the counter.

        Returns:
            The value read: 1 in semaphore mode, the whole count otherwise.

        Raises:
            ValueError: The object is closed, or is closed while the task
                waits.
            NotImplementedError: The running loop cannot watch file
                descriptors.
        """
        value = self._try_read()
        if value is not None:
            return value
        result: int = await _aio.wait(self, None, True)
        return result

    def close(self) -> None:
        """Close the descriptor(s); calling it again does nothing.

        Threads blocked in this object wake with :class:`ValueError`, and so
        do tasks waiting in :meth:`acquire_async` or :meth:`read_async`,
        whose loops stop watching the descriptor.
        """
        if _aio._registry:
            _aio.fail_waiters(self, True)
            super().close()
            _aio.fail_waiters(self, False)
        else:
            super().close()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __reduce__(self):
        # Only for a child process being started by multiprocessing (spawn
        # or forkserver): the descriptors are duplicated into the child, as
        # multiprocessing does for its own Connection objects.
        from multiprocessing import context, reduction

        context.assert_spawning(self)
        fds = tuple(reduction.DupFd(fd) for fd in self._fds())
        return (_rebuild, (fds, self.backend, self.semaphore, self.nonblocking))


def _rebuild(dupfds, backend, semaphore, nonblocking):
    fds = tuple(d.detach() for d in dupfds)
    return EventFD._from_fds(fds, backend, semaphore, nonblocking)


# The drop-ins are built on EventFD, so they come last.
from ._sync import BoundedSemaphore, Event, Semaphore  # noqa: E402

# Names needed only to build the module go; dir(efd) lists the public API,
# the submodules and the module's dunders (not the helpers that pickling
# must still find here, such as _rebuild).
del Optional, _CEventFD


def __dir__():
    return sorted(name for name, value in globals().items()
                  if name in __all__ or name.startswith("__")
                  or getattr(value, "__name__", None) == __name__ + "." + name)
