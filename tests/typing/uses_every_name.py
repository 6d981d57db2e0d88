"""A small typed program that uses every public name of efd.

tests/test_typing.py runs ``mypy --strict`` on it: the stubs (efd/_efd.pyi)
and the annotations of the Python layer must describe the API exactly enough
for a strict user.  It is also run, so it must be correct at run time too.
"""
import asyncio
import os
import select
from typing import List, Optional, Tuple

import efd


def counters() -> List[int]:
    seen: List[int] = []
    with efd.EventFD(3, semaphore=True, nonblocking=False, cloexec=True,
                     backend=None) as ev:
        ok: bool = ev.acquire(blocking=True, timeout=1.0)
        assert ok
        first: int = ev.read()
        ev.write(2)
        ev.release(n=1)
        fd: int = ev.fileno()
        ready, _, _ = select.select([fd], [], [], 0)
        seen += [first, len(ready)]
        mode: bool = ev.semaphore
        nb: bool = ev.nonblocking
        name: str = ev.backend
        closed: bool = ev.closed
        seen += [int(mode), int(nb), len(name), int(closed)]
    raw: int = efd.eventfd(0, efd.EFD_CLOEXEC | efd.EFD_NONBLOCK | efd.EFD_SEMAPHORE)
    efd.eventfd_write(raw, 5)
    value: int = efd.eventfd_read(raw)
    seen.append(value)
    adopted: efd.EventFD = efd.EventFD.from_fd(raw, semaphore=None)
    adopted.close()
    return seen


async def waits() -> int:
    ev = efd.EventFD(1, semaphore=True)
    sem = efd.Semaphore(1)
    bounded = efd.BoundedSemaphore(value=2, backend=None)
    event = efd.Event()
    try:
        got: bool = await ev.acquire_async(timeout=1.0)
        ev.release(2)
        taken: int = await ev.read_async()
        async with sem:
            pass
        with sem:
            pass
        sem_ok: bool = await sem.acquire_async(timeout=0.5)
        sem.release()
        as_sem: efd.Semaphore = bounded
        with bounded:
            pass
        async with bounded:
            pass
        bounded_ok: bool = as_sem.acquire(timeout=-1)
        bounded.release(n=1)
        limit: int = efd.MAX
        event.set()
        is_set: bool = event.is_set() and event.isSet()
        waited: bool = event.wait(timeout=0.1)
        waited_async: bool = await event.wait_async(timeout=0.1)
        event.clear()
        fds: List[int] = [sem.fileno(), bounded.fileno(), event.fileno()]
        timeout: Optional[float] = None
        assert sem.acquire(blocking=True, timeout=timeout)
        return int(got) + taken + int(sem_ok) + int(is_set) + int(waited) \
            + int(waited_async) + len(fds) + int(bounded_ok) + int(limit > 0)
    finally:
        ev.close()
        sem.close()
        bounded.close()
        event.close()


def handles() -> bool:
    # Handles: the text, its descriptors, and the socket pair of calls (a
    # handle adopted in the process that owns it is refused: owned once).
    sem = efd.BoundedSemaphore(2)
    try:
        h: efd.Handle = sem.handle()
        text: str = h
        fds: Tuple[int, ...] = h.fds
        backend: str = sem.backend
        try:
            efd.from_handle(text)
        except ValueError:
            pass
        import socket
        a, b = socket.socketpair()
        with a, b:
            efd.send_handle(a, sem)
            try:
                efd.recv_handle(b)
            except ValueError:
                pass
        return len(fds) > 0 and backend != ""
    finally:
        sem.close()


def main() -> None:
    print(counters(), asyncio.run(waits()), os.getpid() > 0, handles())


if __name__ == "__main__":
    main()
