"""The one adapter the ported suites (trio's, anyio's) need for their
``Semaphore``: their names over an ``efd.aio`` semaphore.

trio and anyio spell a semaphore ``Semaphore(initial_value, *,
max_value=None)``; efd.aio spells asyncio's, whose bound is the initial
value.  Only names differ, and one reading of ``value`` (below); every
behaviour a test checks is efd's own.
"""
import re

import efd
import efd.aio


def load_suite(path, label, rewrites, wanted):
    """A library's own test module, loaded from ``path`` as it is but for
    ``rewrites`` ((pattern, replacement) pairs for its relative imports):
    (its namespace, "") or (None, why it cannot run here).  ``label``
    names it in the reasons; ``wanted`` are names it must define."""
    with open(path, encoding="utf-8") as f:
        source = f.read()
    for pattern, replacement in rewrites:
        source = re.sub(pattern, replacement, source, flags=re.M)
    namespace = {"__name__": "ported_" + re.sub(r"\W", "_", label)}
    try:
        exec(compile(source, path, "exec"), namespace)
    except Exception as exc:        # written for another version or Python
        return None, "%s does not load here: %r" % (label, exc)
    missing = [n for n in wanted if n not in namespace]
    if missing:
        return None, "%s has no %s" % (label, ", ".join(missing))
    return namespace, ""


class PortedSemaphore:
    """``Semaphore(initial_value, *, max_value=None)`` over efd.aio.

    Args:
        initial_value, max_value: as trio's and anyio's.
        backend: the efd backend.
        would_block: the library's WouldBlock, raised for efd.WouldBlock.
        too_many: the library's message for a release past ``max_value``.
        made: a list the new efd object is appended to (closed by the
            caller's fixture).
    """

    def __init__(self, initial_value, *, max_value=None, backend=None,
                 would_block=efd.WouldBlock, too_many=None, made=None):
        for name, v in (("initial_value", initial_value),
                        ("max_value", max_value)):
            if v is not None and not isinstance(v, int):
                raise TypeError("%s must be an int" % name)
        if initial_value < 0:
            raise ValueError("initial value must be >= 0")
        if max_value is None:
            self._sem = efd.aio.Semaphore(initial_value, backend=backend)
        else:
            if max_value < initial_value:
                raise ValueError("max_values must be >= initial_value")
            # efd's bound is its initial value: make it full, take the rest.
            self._sem = efd.aio.BoundedSemaphore(max_value, backend=backend)
            for _ in range(max_value - initial_value):
                self._sem.acquire_nowait()
        self._max_value = max_value
        self._would_block = would_block
        self._too_many = too_many
        if made is not None:
            made.append(self._sem)

    @property
    def value(self):
        # trio and anyio hand a released unit straight to the first queued
        # task, so their `value` is what a new acquirer could take.  efd's
        # `value` is the shared count (SPEC: "the count now"), in which a
        # released unit waits until the queued task takes it -- and which
        # no new acquirer of this process may take first (no barging).
        # What a new acquirer here could take is the count less the tasks
        # queued.
        return max(0, self._sem.value - self._sem.statistics().tasks_waiting)

    @property
    def max_value(self):
        return self._max_value

    def statistics(self):
        return self._sem.statistics()

    def acquire_nowait(self):
        try:
            self._sem.acquire_nowait()
        except efd.WouldBlock:
            raise self._would_block from None

    async def acquire(self):
        await self._sem.acquire()

    def release(self):
        try:
            self._sem.release()
        except ValueError as exc:
            if self._too_many and "released too many times" in str(exc):
                raise ValueError(self._too_many) from None
            raise

    async def __aenter__(self):
        await self.acquire()

    async def __aexit__(self, *exc_info):
        self.release()

    def __repr__(self):
        return repr(self._sem)
