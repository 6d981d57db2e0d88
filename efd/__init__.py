"""efd: Linux eventfd as a semaphore and event for threads, processes and
event loops.

``efd.EventFD`` is a 64-bit counter behind a file descriptor.  In semaphore
mode each read takes one unit; otherwise a read takes everything.  Its
``fileno()`` polls readable while the count is above zero, so ``select``,
``selectors`` and asyncio can wait on it, and child processes can inherit it.
Where the kernel refuses ``EFD_SEMAPHORE``, or has no eventfd at all, an
emulation with the same guarantees takes over (see ``EventFD.backend``).
"""
from ._efd import (
    EFD_CLOEXEC,
    EFD_NONBLOCK,
    EFD_SEMAPHORE,
    eventfd,
    eventfd_read,
    eventfd_write,
)
from ._efd import EventFD as _CEventFD

__all__ = [
    "EventFD",
    "EFD_CLOEXEC",
    "EFD_NONBLOCK",
    "EFD_SEMAPHORE",
    "eventfd",
    "eventfd_read",
    "eventfd_write",
]

__version__ = "0.1.0"

#: The largest count an EventFD can hold: ``2**64 - 2``.
MAX = 2**64 - 2


class EventFD(_CEventFD):
    __doc__ = _CEventFD.__doc__
    __slots__ = ()

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
