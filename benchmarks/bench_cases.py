"""The cases of benchmarks/run.py and every alternative each one measures.

Every ``run(n)`` below does its setup, starts the clock, performs ``n``
operations in the plainest loop the alternative allows (methods bound to
locals, as a careful user would write it), stops the clock, and cleans up.
The same loop shape is used on every side of a comparison, so the loop's own
cost is in every number alike.
"""
import asyncio
import ctypes
import faulthandler
import functools
import mmap
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
import multiprocessing

import efd
import efd.aio  # noqa: F401  (efd.aio.Semaphore cases)

from bench_harness import HANG_SECONDS, Case, Impl, Skip, fmt_time, now

try:
    import posix_ipc
except ImportError:                 # benchmarks/requirements.txt has it
    posix_ipc = None

try:
    import uvloop
except ImportError:
    uvloop = None

try:
    import trio
except ImportError:                 # efd[test] has it
    trio = None

SEM = efd.EFD_SEMAPHORE
NB = efd.EFD_NONBLOCK
BACKENDS = ("eventfd", "eventfd-readback", "pipe", "futex")
FORK = multiprocessing.get_context("fork")
JOIN_TIMEOUT = 60

# Why an alternative can beat efd, for the table's notes column.
WHY_FUTEX = ("no syscall while uncontended: a futex-based sem_t in shared "
             "memory is one atomic op; efd's native counter lives in the "
             "kernel, so every operation is a read()/write() -- the price of "
             "a pollable fd")
WHY_INPROC = ("pure Python object in one process: no syscall at all, and it "
              "cannot be shared with another process or polled by select()")
WHY_ASYNC = ("pure Python, one loop only: no syscall, no fd, cannot be woken "
             "from another process")
WHY_FLOOR = "the same syscalls from C: what Python and the wrapper cost is the gap"
WHY_FUTEX_FLOOR = ("sem_post+sem_wait from C: the futex fast path, no syscall "
                   "(what threading/multiprocessing/posix_ipc build on)")


def _missing_posix_ipc():
    return None if posix_ipc is not None else \
        "posix_ipc not installed (pip install -r benchmarks/requirements.txt)"


def _efd_available(backend):
    try:
        efd.EventFD(0, semaphore=True, backend=backend).close()
    except (OSError, ValueError) as exc:
        return "backend %s unavailable here: %s" % (backend, exc)
    return None


def _has_acquire_async():
    return None if hasattr(efd.EventFD, "acquire_async") else \
        "acquire_async missing"


class Sems:
    """A factory of semaphore-like (release, acquire, close) triples, one
    per alternative, so that the ping-pong and throughput cases can run the
    same code over every alternative."""

    @staticmethod
    def efd(backend):
        def make(initval=0):
            ev = efd.EventFD(initval, semaphore=True, backend=backend)
            return ev.release, ev.acquire, ev.close
        return make

    @staticmethod
    def efd_armed(backend):
        # fileno() asked for: the futex backend keeps readiness in step.
        def make(initval=0):
            ev = efd.EventFD(initval, semaphore=True, backend=backend)
            ev.fileno()
            return ev.release, ev.acquire, ev.close
        return make

    @staticmethod
    def dropin(initval=0):
        s = efd.Semaphore(initval)
        return s.release, s.acquire, s.close

    @staticmethod
    def os_eventfd(initval=0, flags=0):
        fd = os.eventfd(initval, SEM | flags)
        return (functools.partial(os.eventfd_write, fd, 1),
                functools.partial(os.eventfd_read, fd),
                functools.partial(os.close, fd))

    @staticmethod
    def threading(initval=0):
        s = threading.Semaphore(initval)
        return s.release, s.acquire, lambda: None

    @staticmethod
    def mp(initval=0):
        s = FORK.Semaphore(initval)
        return s.release, s.acquire, lambda: None

    @staticmethod
    def posix_ipc(initval=0):
        s = posix_ipc.Semaphore(None, posix_ipc.O_CREX, initial_value=initval)

        def close():
            s.unlink()
            s.close()
        return s.release, s.acquire, close


def _floor(cfg, name, *extra):
    def run(n):
        if cfg.floor is None:
            raise Skip(cfg.floor_error or "no C compiler")
        out = subprocess.run([cfg.floor, name, str(n)] + [str(e) for e in extra],
                             stdout=subprocess.PIPE, check=True,
                             timeout=JOIN_TIMEOUT).stdout
        return float(out)
    return run


# ---- uncontended release + acquire pair ------------------------------------

def _pair_loop(release, acquire, n):
    r = range(n)
    t0 = now()
    for _ in r:
        release()
        acquire()
    return now() - t0


def _pair(make, initval):
    def run(n):
        rel, acq, close = make(initval)
        try:
            return _pair_loop(rel, acq, n)
        finally:
            close()
    return run


def _pair_os(initval, flags, write=os.eventfd_write, read=os.eventfd_read):
    def run(n):
        fd = os.eventfd(initval, SEM | flags)
        try:
            r = range(n)
            t0 = now()
            for _ in r:
                write(fd, 1)
                read(fd)
            return now() - t0
        finally:
            os.close(fd)
    return run


def _pair_asyncio(initval):
    def run(n):
        async def main():
            sem = asyncio.Semaphore(initval)
            rel, acq = sem.release, sem.acquire
            r = range(n)
            t0 = now()
            for _ in r:
                rel()
                await acq()
            return now() - t0
        return asyncio.run(main())
    return run


def pair_case(cfg, held):
    initval = 1 if held else 0
    impls = []
    for b in BACKENDS:
        impls.append(Impl("efd EventFD [%s]" % b, _pair(Sems.efd(b), initval),
                          available=_efd_available(b)))
    impls += [
        Impl("efd.Semaphore (futex)", _pair(Sems.dropin, initval),
             available=_efd_available("futex"),
             note="the drop-in's C methods on the futex backend"),
        Impl("efd EventFD [futex], armed", _pair(Sems.efd_armed("futex"), initval),
             available=_efd_available("futex"),
             note="after fileno(): readiness kept in step (a syscall per crossing)"),
        Impl("os.eventfd, EFD_NONBLOCK fd", _pair_os(initval, NB),
             note="the same kind of fd as efd's (always O_NONBLOCK)"),
        Impl("os.eventfd, blocking fd", _pair_os(initval, 0)),
        Impl("efd.eventfd_write/read (backport)",
             _pair_os(initval, NB, efd.eventfd_write, efd.eventfd_read)),
        Impl("threading.Semaphore", _pair(Sems.threading, initval), note=WHY_INPROC),
        Impl("multiprocessing.Semaphore", _pair(Sems.mp, initval), note=WHY_FUTEX),
        Impl("posix_ipc.Semaphore", _pair(Sems.posix_ipc, initval), note=WHY_FUTEX,
             available=_missing_posix_ipc()),
        Impl("asyncio.Semaphore", _pair_asyncio(initval), note=WHY_ASYNC),
        Impl("C floor: eventfd write+read", _floor(cfg, "pair-held" if held else "pair"),
             note=WHY_FLOOR),
        Impl("C floor: sem_post+sem_wait", _floor(cfg, "sempair"), note=WHY_FUTEX_FLOOR),
    ]
    if held:
        return Case("pair-held", "release() + acquire(), counter stays >= 1",
                    "pair", impls, "efd EventFD [eventfd]",
                    doc="Starts at 1: release makes 2, acquire makes 1 again. "
                        "eventfd-readback must write c-1 back; pipe's counter "
                        "never crosses zero, so neither side needs a syscall.")
    return Case("pair", "uncontended release() + acquire(), counter 0 -> 1 -> 0",
                "pair", impls, "efd EventFD [eventfd]",
                doc="Semaphore mode, one thread, the counter crosses zero "
                    "every time.")


# ---- failed non-blocking acquire -------------------------------------------

def _fail_efd(backend):
    def run(n):
        with efd.EventFD(0, semaphore=True, backend=backend) as ev:
            acq = ev.acquire
            r = range(n)
            t0 = now()
            for _ in r:
                acq(False)
            return now() - t0
    return run


def _fail_os(read):
    def run(n):
        fd = os.eventfd(0, SEM | NB)
        try:
            r = range(n)
            t0 = now()
            for _ in r:
                try:
                    read(fd)
                except BlockingIOError:
                    pass
            return now() - t0
        finally:
            os.close(fd)
    return run


def _fail_acquire_false(make):
    def run(n):
        rel, acq, close = make(0)
        try:
            r = range(n)
            t0 = now()
            for _ in r:
                acq(False)
            return now() - t0
        finally:
            close()
    return run


def _fail_posix_ipc(n):
    s = posix_ipc.Semaphore(None, posix_ipc.O_CREX, initial_value=0)
    acq, busy = s.acquire, posix_ipc.BusyError
    try:
        r = range(n)
        t0 = now()
        for _ in r:
            try:
                acq(0)
            except busy:
                pass
        return now() - t0
    finally:
        s.unlink()
        s.close()


def fail_case(cfg):
    impls = [Impl("efd acquire(False) [%s]" % b, _fail_efd(b),
                  available=_efd_available(b),
                  note="no syscall: the shared counter is 0" if b == "pipe" else "")
             for b in BACKENDS]
    impls += [
        Impl("os.eventfd_read + except BlockingIOError", _fail_os(os.eventfd_read),
             note="raising and catching the OSError is most of the cost"),
        Impl("efd.eventfd_read + except BlockingIOError", _fail_os(efd.eventfd_read)),
        Impl("threading.Semaphore.acquire(False)", _fail_acquire_false(Sems.threading),
             note=WHY_INPROC),
        Impl("multiprocessing.Semaphore.acquire(False)", _fail_acquire_false(Sems.mp),
             note=WHY_FUTEX),
        Impl("posix_ipc acquire(0) + except BusyError", _fail_posix_ipc,
             available=_missing_posix_ipc(), note=WHY_FUTEX),
        Impl("asyncio.Semaphore", None,
             available="n/a: no non-blocking acquire (locked() only checks)"),
        Impl("C floor: read() -> EAGAIN", _floor(cfg, "fail"), note=WHY_FLOOR),
    ]
    return Case("fail", "failed non-blocking acquire on an empty semaphore",
                "call", impls, "efd acquire(False) [eventfd]")


# ---- timed acquire with a unit available -----------------------------------

def _timed_efd(backend, timeout):
    def run(n):
        with efd.EventFD(0, semaphore=True, backend=backend) as ev:
            ev.release(n)
            acq = ev.acquire
            r = range(n)
            if timeout is None:
                t0 = now()
                for _ in r:
                    acq()
                return now() - t0
            t0 = now()
            for _ in r:
                acq(timeout=timeout)
            return now() - t0
    return run


def _timed_os(n):
    # The raw way to "wait at most 1 s": try the read, poll() only on EAGAIN.
    fd = os.eventfd(0, SEM | NB)
    try:
        os.eventfd_write(fd, n)
        read, poll = os.eventfd_read, select.poll()
        poll.register(fd, select.POLLIN)
        r = range(n)
        t0 = now()
        for _ in r:
            try:
                read(fd)
            except BlockingIOError:
                poll.poll(1000)
                read(fd)
        return now() - t0
    finally:
        os.close(fd)


def _timed_sem(make, timeout_kw):
    def run(n):
        rel, acq, close = make(0)
        try:
            for _ in range(n):
                rel()
            r = range(n)
            if timeout_kw:
                t0 = now()
                for _ in r:
                    acq(timeout=1.0)
            else:                       # posix_ipc: acquire(timeout)
                t0 = now()
                for _ in r:
                    acq(1.0)
            return now() - t0
        finally:
            close()
    return run


def _timed_asyncio(n):
    async def main():
        sem = asyncio.Semaphore(n)
        acq, wait_for = sem.acquire, asyncio.wait_for
        r = range(n)
        t0 = now()
        for _ in r:
            await wait_for(acq(), 1.0)
        return now() - t0
    return asyncio.run(main())


def timed_case(cfg):
    impls = []
    for b in BACKENDS:
        av = _efd_available(b)
        impls.append(Impl("efd acquire(timeout=1.0) [%s]" % b, _timed_efd(b, 1.0),
                          available=av))
        impls.append(Impl("efd acquire() [%s]" % b, _timed_efd(b, None), available=av))
    impls += [
        Impl("os.eventfd_read (poll only on EAGAIN)", _timed_os),
        Impl("threading.Semaphore.acquire(timeout=1.0)",
             _timed_sem(Sems.threading, True), note=WHY_INPROC),
        Impl("multiprocessing.Semaphore.acquire(timeout=1.0)",
             _timed_sem(Sems.mp, True), note=WHY_FUTEX),
        Impl("posix_ipc acquire(1.0)", _timed_sem(Sems.posix_ipc, False),
             available=_missing_posix_ipc(), note=WHY_FUTEX),
        Impl("asyncio.wait_for(Semaphore.acquire(), 1.0)", _timed_asyncio,
             note="wait_for wraps the acquire in a task and a timer"),
        Impl("C floor: read()", _floor(cfg, "timed"), note=WHY_FLOOR),
    ]
    return Case("timed", "acquire with a timeout while a unit is available",
                "acquire", impls, "efd acquire(timeout=1.0) [eventfd]",
                doc="The counter is filled before the clock starts, so only "
                    "acquires are timed.")


def _start_partner(kind, n, first, second):
    """Start a thread or forked process (`kind`) that does first(); second()
    `n` times: the other side of a ping-pong."""
    def loop():
        for _ in range(n):
            first()
            second()
    if kind == "thread":
        p = threading.Thread(target=loop, daemon=True)
    else:
        p = FORK.Process(target=_orphan_proof(loop), daemon=True)
    p.start()
    return p


def _stop_partner(p, kind):
    """Join a partner; True if it finished (and, a process, exited 0)."""
    p.join(JOIN_TIMEOUT)
    if kind == "thread":
        return not p.is_alive()
    if p.is_alive():
        p.kill()
        p.join(JOIN_TIMEOUT)
        return False
    return p.exitcode == 0


# ---- ping-pong between threads and between processes ------------------------

def _pingpong(make, partner_kind):
    """Round trips: this side releases `req` and acquires `resp`; the
    partner (a thread or a forked process) acquires `req` and releases
    `resp`."""
    def run(n):
        req_rel, req_acq, req_close = make()
        resp_rel, resp_acq, resp_close = make()

        p = _start_partner(partner_kind, n + 1, req_acq, resp_rel)
        finished = False
        try:
            req_rel()
            resp_acq()              # one untimed round trip: both are up
            r = range(n)
            t0 = now()
            for _ in r:
                req_rel()
                resp_acq()
            secs = now() - t0
        finally:
            finished = _stop_partner(p, partner_kind)
            req_close()
            resp_close()
        if not finished:
            raise RuntimeError("partner did not finish")
        return secs
    return run


def pingpong_case(cfg, kind):
    impls = [Impl("efd EventFD [%s]" % b, _pingpong(Sems.efd(b), kind),
                  available=_efd_available(b)) for b in BACKENDS]
    impls += [
        Impl("efd.Semaphore (futex)", _pingpong(Sems.dropin, kind),
             available=_efd_available("futex")),
        Impl("os.eventfd, blocking fds", _pingpong(Sems.os_eventfd, kind),
             note="blocks in read(); efd waits in poll() then reads"),
    ]
    if kind == "thread":
        impls.append(Impl("threading.Semaphore", _pingpong(Sems.threading, kind),
                          note="a Condition on a lock: no fd"))
    impls += [
        Impl("multiprocessing.Semaphore", _pingpong(Sems.mp, kind)),
        Impl("posix_ipc.Semaphore", _pingpong(Sems.posix_ipc, kind),
             available=_missing_posix_ipc()),
        Impl("C floor: eventfd ping-pong", _floor(cfg, kind), note=WHY_FLOOR),
    ]
    if kind == "thread":
        return Case("thread-pingpong", "ping-pong between two threads",
                    "round trip", impls, "efd EventFD [eventfd]",
                    doc="Two semaphores; each round trip is two wake-ups.")
    return Case("process-pingpong", "ping-pong between two processes",
                "round trip", impls, "efd EventFD [eventfd]",
                doc="As thread-pingpong, with the partner a forked process.")


# ---- async wake-up round trip ----------------------------------------------

def _new_loop(use_uvloop):
    return uvloop.new_event_loop() if use_uvloop else asyncio.new_event_loop()


def _run_loop(coro, use_uvloop=False):
    loop = _new_loop(use_uvloop)
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()


class FdWaiter:
    """The hand-written alternative to acquire_async: one add_reader
    registration on an O_NONBLOCK semaphore eventfd, serving waiting tasks
    in FIFO order -- what a user writes without efd."""

    def __init__(self, loop, fd):
        self.loop, self.fd = loop, fd
        self.waiters = []
        self.registered = False

    async def acquire(self):
        try:
            return os.eventfd_read(self.fd)
        except BlockingIOError:
            pass
        fut = self.loop.create_future()
        self.waiters.append(fut)
        if not self.registered:
            self.loop.add_reader(self.fd, self._ready)
            self.registered = True
        return await fut

    def _ready(self):
        while self.waiters:
            fut = self.waiters[0]
            if fut.done():              # cancelled
                self.waiters.pop(0)
                continue
            try:
                v = os.eventfd_read(self.fd)
            except BlockingIOError:
                return
            self.waiters.pop(0)
            fut.set_result(v)
        self.loop.remove_reader(self.fd)
        self.registered = False


def _wakeup(side, partner_kind, use_uvloop=False):
    """An async task waits for `req`, then answers on `resp`; the partner
    (thread or process) releases `req` and blocks on `resp`.  `side` makes
    (partner_release, partner_acquire, async_acquire_factory, async_answer,
    close) for one run."""
    def run(n):
        async def main():
            loop = asyncio.get_running_loop()
            p_rel, p_acq, make_async_acq, answer, close = side(loop)
            async_acq = make_async_acq()

            p = _start_partner(partner_kind, n + 1, p_rel, p_acq)
            try:
                await async_acq()
                answer()
                r = range(n)
                t0 = now()
                for _ in r:
                    await async_acq()
                    answer()
                secs = now() - t0
            finally:
                # The partner's last acquire returned with our last answer,
                # so this join does not wait.
                _stop_partner(p, partner_kind)
                close()
            return secs
        return _run_loop(main(), use_uvloop)
    return run


def _side_efd(loop):
    # The answer goes back through a plain blocking eventfd, as in the
    # hand-written side, so that the partner's cost is the same in both and
    # the difference is acquire_async() itself.
    req = efd.EventFD(0, semaphore=True)
    resp = os.eventfd(0, SEM)
    return (req.release, functools.partial(os.eventfd_read, resp),
            lambda: req.acquire_async, functools.partial(os.eventfd_write, resp, 1),
            lambda: (req.close(), os.close(resp)))


def _side_efd_both(loop):
    # All efd: the partner also waits in EventFD.acquire().
    req = efd.EventFD(0, semaphore=True)
    resp = efd.EventFD(0, semaphore=True)
    return (req.release, resp.acquire, lambda: req.acquire_async, resp.release,
            lambda: (req.close(), resp.close()))


def _side_handwritten(loop):
    req = os.eventfd(0, SEM | NB)
    resp = os.eventfd(0, SEM)
    waiter = FdWaiter(loop, req)
    return (functools.partial(os.eventfd_write, req, 1),
            functools.partial(os.eventfd_read, resp),
            lambda: waiter.acquire,
            functools.partial(os.eventfd_write, resp, 1),
            lambda: (os.close(req), os.close(resp)))


def _side_asyncio_sem(loop):
    asem = asyncio.Semaphore(0)
    tsem = threading.Semaphore(0)
    return (functools.partial(loop.call_soon_threadsafe, asem.release),
            tsem.acquire, lambda: asem.acquire, tsem.release, lambda: None)


def _side_to_thread(loop):
    req = threading.Semaphore(0)
    resp = threading.Semaphore(0)

    def make():
        async def acq():
            return await loop.run_in_executor(None, req.acquire)
        return acq
    return req.release, resp.acquire, make, resp.release, lambda: None


def _wakeup_callback(partner_kind):
    """The floor of asyncio: no task at all, the reader callback answers."""
    def run(n):
        req = os.eventfd(0, SEM | NB)
        resp = os.eventfd(0, SEM)

        async def main():
            loop = asyncio.get_running_loop()
            done = loop.create_future()
            state = {"left": n + 1, "t0": None}

            def ready():
                while True:
                    try:
                        os.eventfd_read(req)
                    except BlockingIOError:
                        return
                    os.eventfd_write(resp, 1)
                    state["left"] -= 1
                    if state["t0"] is None:
                        state["t0"] = now()
                    if state["left"] == 0:
                        loop.remove_reader(req)
                        done.set_result(now() - state["t0"])
                        return
            loop.add_reader(req, ready)
            p = _start_partner(partner_kind, n + 1,
                               functools.partial(os.eventfd_write, req, 1),
                               functools.partial(os.eventfd_read, resp))
            try:
                return await asyncio.wait_for(done, JOIN_TIMEOUT)
            finally:
                _stop_partner(p, partner_kind)
        try:
            return _run_loop(main())
        finally:
            os.close(req)
            os.close(resp)
    return run


def wakeup_case(cfg, partner_kind):
    missing = _has_acquire_async()
    impls = [
        Impl("efd acquire_async()", _wakeup(_side_efd, partner_kind), available=missing),
        Impl("hand-written add_reader + os.eventfd_read",
             _wakeup(_side_handwritten, partner_kind),
             note="a future per wait, one reader registration (FdWaiter)"),
        Impl("add_reader callback answering directly (no task)",
             _wakeup_callback(partner_kind),
             note="asyncio's floor: no task switch per wake-up"),
    ]
    if uvloop is not None:
        impls.insert(1, Impl("efd acquire_async() on uvloop",
                             _wakeup(_side_efd, partner_kind, True), available=missing))
    impls.insert(1, Impl("efd acquire_async(), partner in EventFD.acquire()",
                         _wakeup(_side_efd_both, partner_kind), available=missing,
                         note="the partner waits with poll(), see %s-pingpong"
                              % partner_kind))
    if partner_kind == "thread":
        impls += [
            Impl("asyncio.Semaphore + call_soon_threadsafe",
                 _wakeup(_side_asyncio_sem, partner_kind),
                 note="answers through a threading.Semaphore; cannot cross processes"),
            Impl("run_in_executor(threading.Semaphore.acquire)",
                 _wakeup(_side_to_thread, partner_kind),
                 note="a worker thread blocks per wait"),
        ]
    impls.append(Impl("C floor: poll()+read() ping-pong",
                      _floor(cfg, "wakeup-" + partner_kind), note=WHY_FLOOR))
    return Case("async-wakeup-" + partner_kind,
                "async wake-up round trip, released by a %s" % partner_kind,
                "round trip", impls, "efd acquire_async()",
                doc="A %s releases; an asyncio task acquires and answers; the "
                    "%s waits for the answer.  Unless a row says otherwise the "
                    "answer goes through a plain blocking os.eventfd, so only "
                    "the async side differs." % (partner_kind, partner_kind))


# ---- 1000 async waiters ------------------------------------------------------

def _waiters(kind, n_tasks, use_uvloop=False):
    """n_tasks tasks wait; a process (or thread, where the alternative
    cannot cross processes) releases n_tasks units one by one.  Timed from
    the go signal until the last task has its unit; also reports how many
    threads the process gained while waiting."""
    def run(n):
        assert n == n_tasks
        go = os.eventfd(0, SEM)
        release = None
        close = lambda: None            # noqa: E731
        if kind == "efd":
            ev = efd.EventFD(0, semaphore=True)
            release, close = ev.release, ev.close
        elif kind == "handwritten":
            fd = os.eventfd(0, SEM | NB)
            release = functools.partial(os.eventfd_write, fd, 1)
            close = functools.partial(os.close, fd)
        elif kind == "mp":
            msem = FORK.Semaphore(0)
            release = msem.release
        elif kind == "posix_ipc":
            psem = posix_ipc.Semaphore(None, posix_ipc.O_CREX, initial_value=0)
            release = psem.release

            def close():
                psem.unlink()
                psem.close()
        elif kind == "threading":
            tsem = threading.Semaphore(0)
            release = tsem.release
        by_thread = kind in ("threading", "asyncio")

        async def main():
            loop = asyncio.get_running_loop()
            if kind == "efd":
                acquire = ev.acquire_async
            elif kind == "handwritten":
                acquire = FdWaiter(loop, fd).acquire
            elif kind in ("mp", "posix_ipc"):
                blocking_acquire = msem.acquire if kind == "mp" else psem.acquire

                async def acquire():
                    return await loop.run_in_executor(None, blocking_acquire)
            elif kind == "threading":
                acquire = functools.partial(asyncio.to_thread, tsem.acquire)
            elif kind == "asyncio":
                asem = asyncio.Semaphore(0)
                acquire = asem.acquire
                rel = functools.partial(loop.call_soon_threadsafe, asem.release)
            peak = [0]

            def record(_):
                c = threading.active_count()
                if c > peak[0]:
                    peak[0] = c

            def releaser():
                os.eventfd_read(go)
                r = rel if kind == "asyncio" else release
                for _ in range(n_tasks):
                    r()
            if by_thread:
                p = threading.Thread(target=releaser, daemon=True)
            else:
                p = FORK.Process(target=_orphan_proof(releaser), daemon=True)
            p.start()
            base = threading.active_count()     # with a releaser thread
            peak[0] = base
            tasks = []
            try:
                tasks = [loop.create_task(acquire()) for _ in range(n_tasks)]
                for t in tasks:
                    t.add_done_callback(record)
                for _ in range(3):
                    await asyncio.sleep(0)      # every task is now waiting
                record(None)                    # executor threads started
                t0 = now()
                os.eventfd_write(go, 1)
                await asyncio.wait_for(asyncio.gather(*tasks), JOIN_TIMEOUT)
                secs = now() - t0
            except BaseException:
                # Unblock whatever waits (executor threads in acquire()),
                # so that the loop's executor can shut down.
                if by_thread:
                    os.eventfd_write(go, 1)
                else:
                    p.kill()
                for t in tasks:
                    t.cancel()
                if release is not None:
                    for _ in range(n_tasks):
                        release()
                raise
            finally:
                p.join(JOIN_TIMEOUT)
            return secs, {"threads": peak[0] - base}
        try:
            return _run_loop(main(), use_uvloop)
        finally:
            close()
            os.close(go)
    return run


def waiters_case(cfg):
    n = cfg.n_waiters
    missing = _has_acquire_async()
    impls = [
        Impl("efd acquire_async()", _waiters("efd", n), available=missing, fixed_n=n,
             note="released by a process; waits through the loop's reader"),
    ]
    if uvloop is not None:
        impls.append(Impl("efd acquire_async() on uvloop", _waiters("efd", n, True),
                          available=missing, fixed_n=n))
    impls += [
        Impl("hand-written add_reader + os.eventfd_read", _waiters("handwritten", n),
             fixed_n=n, note="released by a process"),
        Impl("run_in_executor(multiprocessing.Semaphore.acquire)", _waiters("mp", n),
             fixed_n=n, note="released by a process; executor threads block"),
        Impl("run_in_executor(posix_ipc.Semaphore.acquire)", _waiters("posix_ipc", n),
             fixed_n=n, available=_missing_posix_ipc(),
             note="released by a process; executor threads block"),
        Impl("asyncio.to_thread(threading.Semaphore.acquire)", _waiters("threading", n),
             fixed_n=n, note="released by a thread (cannot cross processes)"),
        Impl("asyncio.Semaphore + call_soon_threadsafe", _waiters("asyncio", n),
             fixed_n=n, note="released by a thread (cannot cross processes)"),
    ]
    return Case("async-waiters", "%d async tasks, each acquiring one unit "
                "released one by one" % n, "task", impls, "efd acquire_async()",
                doc="Wall time from the first release to the last task served, "
                    "per task; 'threads' is how many threads the process "
                    "gained while the tasks waited.")


# ---- contended fair hand-off ------------------------------------------------------

def _handoff(kind, n_tasks, use_uvloop=False):
    """n_tasks tasks of one loop share one unit: each acquires, yields once
    inside (so that the others are queued), releases, and goes again, until
    n acquisitions are done.  Every hand-off goes to the longest waiter."""
    def run(n):
        left = [n]

        def worker(acquire, release, pause):
            async def loop_body():
                while True:
                    await acquire()
                    if left[0] <= 0:
                        release()
                        return
                    left[0] -= 1
                    await pause()
                    release()
            return loop_body

        if kind == "trio" or kind == "trio.Semaphore":
            import trio

            async def trio_main():
                if kind == "trio":
                    ev = efd.EventFD(1, semaphore=True)
                    acquire, release, close = ev.acquire_async, ev.release, ev.close
                else:
                    tsem = trio.Semaphore(1)
                    acquire, release = tsem.acquire, tsem.release
                    close = lambda: None            # noqa: E731
                body = worker(acquire, release, functools.partial(trio.sleep, 0))
                t0 = now()
                async with trio.open_nursery() as nursery:
                    for _ in range(n_tasks):
                        nursery.start_soon(body)
                secs = now() - t0
                close()
                return secs
            return trio.run(trio_main)

        async def main():
            if kind == "asyncio":
                asem = asyncio.Semaphore(1)
                acquire, release = asem.acquire, asem.release
                close = lambda: None                # noqa: E731
            elif kind == "Semaphore":
                sem = efd.Semaphore(1)
                acquire, release, close = sem.acquire_async, sem.release, sem.close
            elif kind == "aio":
                sem = efd.aio.Semaphore(1)
                acquire, release, close = sem.acquire, sem.release, sem.close
            else:
                ev = efd.EventFD(1, semaphore=True)
                acquire, release, close = ev.acquire_async, ev.release, ev.close
            body = worker(acquire, release, functools.partial(asyncio.sleep, 0))
            t0 = now()
            await asyncio.wait_for(
                asyncio.gather(*(body() for _ in range(n_tasks))), JOIN_TIMEOUT)
            secs = now() - t0
            close()
            return secs
        return _run_loop(main(), use_uvloop)
    return run


def handoff_case(cfg):
    tasks, n = cfg.handoff_tasks, cfg.handoff_acquisitions
    missing = _has_acquire_async()
    impls = [
        Impl("efd acquire_async()", _handoff("efd", tasks), available=missing,
             fixed_n=n, note="each hand-off: release() writes, the loop polls, "
                             "the reader serves the head of the queue"),
        Impl("efd.Semaphore.acquire_async()", _handoff("Semaphore", tasks),
             available=missing, fixed_n=n),
    ]
    if uvloop is not None:
        impls.append(Impl("efd acquire_async() on uvloop",
                          _handoff("efd", tasks, True), available=missing,
                          fixed_n=n))
    no_aio = None if hasattr(efd, "aio") else "this efd has no efd.aio"
    impls.append(Impl("efd.aio.Semaphore", _handoff("aio", tasks), fixed_n=n,
                      available=no_aio,
                      note="a release hands the unit to the loop's queued "
                           "task in-process (no syscall); every %s-th goes "
                           "through the shared count" % getattr(
                               getattr(efd, "aio", None), "HANDOFF_RUN", "?")))
    if uvloop is not None:
        impls.append(Impl("efd.aio.Semaphore on uvloop",
                          _handoff("aio", tasks, True), fixed_n=n,
                          available=no_aio))
    impls.append(Impl("asyncio.Semaphore", _handoff("asyncio", tasks), fixed_n=n,
                      note=WHY_ASYNC + "; fair since 3.11.1"))
    try:
        import trio  # noqa: F401
        no_trio = None
    except ImportError:
        no_trio = "trio not installed"
    impls += [
        Impl("efd acquire_async() under trio", _handoff("trio", tasks),
             available=missing or no_trio, fixed_n=n),
        Impl("trio.Semaphore", _handoff("trio.Semaphore", tasks),
             available=no_trio, fixed_n=n, note="pure Python, one trio.run only"),
    ]
    return Case("async-handoff", "%d tasks of one loop handing one unit round, "
                "%d acquisitions" % (tasks, n), "acquisition", impls,
                "efd acquire_async()",
                doc="Contended and fair: each task acquires, yields once with "
                    "the unit, and releases it to the longest waiter.  Time "
                    "per acquisition.")


# ---- uncontended async with ---------------------------------------------------

def _async_with(kind):
    """``async with sem: pass`` n times in one task, nobody else waiting."""
    def run(n):
        async def main():
            if kind == "asyncio":
                sem = asyncio.Semaphore(1)
                close = lambda: None                # noqa: E731
            elif kind == "aio":
                sem = efd.aio.Semaphore(1)
                close = sem.close
            else:
                sem = efd.Semaphore(1)
                close = sem.close
            r = range(n)
            t0 = now()
            for _ in r:
                async with sem:
                    pass
            secs = now() - t0
            close()
            return secs
        return asyncio.run(main())
    return run


def async_with_case(cfg):
    no_aio = None if hasattr(efd, "aio") else "this efd has no efd.aio"
    impls = [
        Impl("efd.aio.Semaphore", _async_with("aio"), available=no_aio,
             note="futex backend: the C non-blocking acquire and release, "
                  "plus the library check"),
        Impl("efd.Semaphore async with", _async_with("Semaphore")),
        Impl("asyncio.Semaphore", _async_with("asyncio"), note=WHY_ASYNC),
    ]
    return Case("async-with", "uncontended `async with sem: pass`, one task",
                "block", impls, "asyncio.Semaphore",
                doc="One task, a unit always there: what entering and leaving "
                    "the block costs.")


# ---- many producers, many consumers, across processes -------------------------

def _mpmc(make, producers, consumers):
    def run(n):
        rel, acq, close = make()
        go = os.eventfd(0, SEM)
        done = os.eventfd(0, SEM)
        per_producer = n // producers
        total = per_producer * producers
        procs = []

        def producer():
            os.eventfd_read(go)
            for _ in range(per_producer):
                rel()

        def consumer(k):
            os.eventfd_read(go)
            for _ in range(total // consumers + (k < total % consumers)):
                acq()
            os.eventfd_write(done, 1)
        producer, consumer = _orphan_proof(producer), _orphan_proof(consumer)
        for i in range(producers):
            procs.append(FORK.Process(target=producer, daemon=True))
        for k in range(consumers):
            procs.append(FORK.Process(target=consumer, args=(k,), daemon=True))
        for p in procs:
            p.start()
        try:
            t0 = now()
            os.eventfd_write(go, producers + consumers)
            for _ in range(consumers):
                os.eventfd_read(done)
            secs = now() - t0
        finally:
            for p in procs:
                p.join(JOIN_TIMEOUT)
                if p.is_alive():
                    p.kill()
            close()
            os.close(go)
            os.close(done)
        if any(p.exitcode != 0 for p in procs):
            raise RuntimeError("a worker process failed")
        return secs * n / total
    return run


def mpmc_case(cfg):
    P, C, n = cfg.producers, cfg.consumers, cfg.mpmc_units
    impls = [Impl("efd EventFD [%s]" % b, _mpmc(Sems.efd(b), P, C),
                  available=_efd_available(b), fixed_n=n) for b in BACKENDS]
    impls += [
        Impl("os.eventfd, blocking fd", _mpmc(Sems.os_eventfd, P, C), fixed_n=n,
             note="consumers sleep in read(): the kernel wakes one"),
        Impl("multiprocessing.Semaphore", _mpmc(Sems.mp, P, C), fixed_n=n,
             note=WHY_FUTEX),
        Impl("posix_ipc.Semaphore", _mpmc(Sems.posix_ipc, P, C), fixed_n=n,
             available=_missing_posix_ipc(), note=WHY_FUTEX),
        Impl("C floor: eventfd, blocking fd", _floor(cfg, "mpmc", P, C), fixed_n=n,
             note=WHY_FLOOR),
    ]
    return Case("mpmc", "%d producer and %d consumer processes, throughput"
                % (P, C), "unit", impls, "efd EventFD [eventfd]",
                doc="Each producer releases its share as fast as it can; the "
                    "consumers acquire them all.  Time per unit moved.")


# ---- issue 13: hand one unit to one of N blocked waiters ---------------------

HANDOFF_KINDS = ("thread", "process", "async")
#: Loops of other libraries, for efd only: they reach the same sleepers
#: (efd_loop.c) without asyncio's selector.
HANDOFF_LOOP_KINDS = tuple(k for k, lib in (("async-uvloop", uvloop),
                                            ("async-trio", trio))
                           if lib is not None)
HANDOFF_KIND_LABEL = {"thread": "threads", "process": "processes",
                      "async": "processes in acquire_async()",
                      "async-uvloop": "processes in acquire_async() on uvloop",
                      "async-trio": "processes in acquire_async() on trio"}
HANDOFF_TIMEOUT = 30.0          # the measuring side's wait for one answer
HANDOFF_READY_TIMEOUT = 120.0   # for N waiters to be up and asleep
HANDOFF_SETTLE_TIMEOUT = 20.0   # for them to be asleep again after a sample
HANDOFF_SLOW = 0.05             # a point this slow ends its row (larger N skipped)
PR_SET_PDEATHSIG = 1
_libc = []


def _load_libc():
    """libc for prctl(), loaded once in the benchmark process (before any
    fork, so that no child has to)."""
    if not _libc:
        try:
            _libc.append(ctypes.CDLL(None, use_errno=True))
        except OSError:
            pass


def _die_with_parent(parent):
    """In a forked child: be killed with SIGKILL when the benchmark
    process dies, however it dies (a hang's faulthandler exit, or a Ctrl-C
    or kill of a run that seems stuck), so that no child -- a killed-holders
    worker loops for ever -- outlives it."""
    if not _libc:
        return
    _libc[0].prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:          # it died before the prctl
        os._exit(1)


def _orphan_proof(target):
    """`target`, to run in a forked child that dies with the benchmark."""
    _load_libc()
    parent = os.getpid()

    def run(*args):
        _die_with_parent(parent)
        return target(*args)
    return run


def _task_state(path):
    """The one-letter scheduler state in a /proc/.../stat file, or None
    if the task is gone."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data[data.rindex(b")") + 2:][:1].decode()


def _tasks(pid):
    """The thread ids of process `pid` (none once it is gone)."""
    try:
        return os.listdir("/proc/%d/task" % pid)
    except OSError:
        return []


def _schedstat(path):
    """(ns on a CPU, times scheduled in) of a task, from its schedstat;
    (0, 0) if it is gone."""
    try:
        with open(path, "rb") as f:
            fields = f.read().split()
        return int(fields[0]), int(fields[2])
    except (OSError, ValueError, IndexError):
        return 0, 0


class _WaiterPool:
    """Waiters of one kind ("thread", "process" or "async": a forked
    process running an asyncio loop), each blocked in ``req``'s acquire;
    a waiter that gets a unit answers with one ``resp.release()`` and
    blocks again.  The pool only grows; ``stop()`` ends every waiter
    within a bounded time, killing the processes that do not leave."""

    def __init__(self, kind, req, resp, max_n, env=None):
        self.kind = kind
        self.req, self.resp = req, resp
        self.env = env or {}            # set in each waiter process
        # flags[0]: stop; flags[1 + i]: waiter i is in its loop.  Shared
        # with the forked waiters (an anonymous mmap is MAP_SHARED).
        self.flags = mmap.mmap(-1, 1 + max_n)
        self.threads, self.tids, self.pids = [], [], []
        self.parent = os.getpid()

    def __len__(self):
        return len(self.threads) + len(self.pids)

    def _loop(self, i):
        flags, answer = self.flags, self.resp.release
        if self.kind.startswith("async"):
            acquire_async = self.req.acquire_async

            async def main():
                flags[1 + i] = 1
                while True:
                    await acquire_async()
                    if flags[0]:
                        return
                    answer()
            if self.kind == "async-trio":
                trio.run(main)
                return
            loop = (uvloop.new_event_loop() if self.kind == "async-uvloop"
                    else asyncio.new_event_loop())
            try:
                loop.run_until_complete(main())
            finally:
                loop.close()
            return
        acquire = self.req.acquire
        if self.kind == "thread":
            self.tids[i] = threading.get_native_id()
        flags[1 + i] = 1
        try:
            while True:
                acquire()
                if flags[0]:
                    return
                answer()
        except ValueError:          # closed under us while stopping
            if not flags[0]:
                raise

    def _child(self, i):
        code = 1
        try:
            _die_with_parent(self.parent)
            os.environ.update(self.env)
            self._loop(i)
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)

    def grow(self, n):
        while len(self) < n:
            i = len(self)
            if self.kind == "thread":
                self.tids.append(None)
                t = threading.Thread(target=self._loop, args=(i,), daemon=True)
                t.start()
                self.threads.append(t)
            else:
                pid = os.fork()
                if pid == 0:
                    self._child(i)          # never returns
                self.pids.append(pid)

    def _paths(self):
        if self.kind == "thread":
            return ["/proc/self/task/%d/stat" % t for t in self.tids]
        return ["/proc/%d/stat" % p for p in self.pids]

    def _check_alive(self):
        for pid in self.pids:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                self.pids.remove(pid)
                raise RuntimeError("waiter process %d exited (status %#x)"
                                   % (pid, status))
        for t in self.threads:
            if not t.is_alive():
                raise RuntimeError("a waiter thread exited")

    def wait_blocked(self, timeout):
        """Return once every waiter has entered its loop and is asleep
        (scheduler state S) at two checks 5 ms apart; RuntimeError after
        `timeout` seconds (a waiter that spins, or never got there)."""
        n = len(self)
        deadline = time.monotonic() + timeout
        calm = 0
        while True:
            self._check_alive()
            awake = self.flags[1:1 + n].count(0)
            if not awake:
                awake = sum(_task_state(p) != "S" for p in self._paths())
            calm = calm + 1 if not awake else 0
            if calm >= 2:
                return
            if time.monotonic() > deadline:
                raise RuntimeError("%d of %d waiters not asleep in acquire after "
                                   "%.0f s (spinning?)" % (awake, n, timeout))
            time.sleep(0.005)

    def counters(self):
        """(CPU seconds used so far by this process and, when they are
        processes, the waiters; how many times the waiters were scheduled
        in).  A waiter that wakes, finds nothing and sleeps again counts
        one run even where efd's own counters cannot see it (a poll()er
        the kernel puts back to sleep): the herd shows here.  A waiter
        process counts all its threads: a loop's helper thread (efd_loop.c)
        and its loop are two runs."""
        own = time.process_time()       # before reading N files, not after
        if self.kind == "thread":
            paths = ["/proc/self/task/%d/schedstat" % t for t in self.tids]
        else:
            paths = ["/proc/%d/task/%s/schedstat" % (p, t)
                     for p in self.pids for t in _tasks(p)]
        stats = [_schedstat(p) for p in paths]
        runs = sum(r for _, r in stats)
        if self.kind == "thread":       # the waiters' CPU is the process's
            return own, runs
        return own + sum(ns for ns, _ in stats) / 1e9, runs

    def stop(self):
        """End every waiter: raise the stop flag and release one unit per
        waiter; threads are joined and processes reaped for up to 20 s,
        then the processes left are killed.  Returns how many threads did
        not leave (a process cannot stay)."""
        self.flags[0] = 1
        try:
            for _ in range(len(self)):
                self.req.release()
        except Exception:                   # killing is the fallback
            pass
        deadline = time.monotonic() + 20.0
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        left = set(self.pids)
        while left and time.monotonic() < deadline:
            for pid in list(left):
                if os.waitpid(pid, os.WNOHANG)[0]:
                    left.discard(pid)
            if left:
                time.sleep(0.01)
        self.kill(left)
        self.pids = []
        return sum(t.is_alive() for t in self.threads)

    def kill(self, pids=None):
        for pid in list(self.pids if pids is None else pids):
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass


class HandoffAlt:
    """One alternative on the hand-off curve.  ``new()`` returns a fresh
    semaphore at 0 and the function that disposes of it; ``kinds`` are
    the waiter kinds it can serve; ``timed(sem)`` is sem's acquire bounded
    by HANDOFF_TIMEOUT (returns False, or raises, when it runs out)."""

    def __init__(self, name, new, kinds, available=None, timed=None,
                 env=None):
        self.name, self.new, self.kinds = name, new, kinds
        self.available = available
        self.env = env                  # the waiters' environment, added
        self.timed = timed or (lambda s: functools.partial(
            s.acquire, timeout=HANDOFF_TIMEOUT))


def _new_efd(backend):
    def new():
        ev = efd.EventFD(0, semaphore=True, backend=backend)
        return ev, ev.close
    return new


def _new_dropin():
    s = efd.Semaphore(0)
    return s, s.close


def _new_threading():
    return threading.Semaphore(0), lambda: None


def _new_mp():
    return FORK.Semaphore(0), lambda: None


def _new_posix_ipc():
    s = posix_ipc.Semaphore(None, posix_ipc.O_CREX, initial_value=0)

    def close():
        s.unlink()
        s.close()
    return s, close


class CurveCase(Case):
    """A case whose rows are (alternative, waiter kind, N) points, measured
    by its own ``measure()`` rather than by interleaved rounds: every
    point of one (alternative, kind) comes from one pool of waiters that
    grows from the smallest N to the largest.  ``impls`` holds one Impl
    per point (for results.json and error reporting)."""

    curve = True

    def __init__(self, key, title, unit, alts, kinds, ns, cfg, doc=""):
        self.alts, self.kinds, self.ns, self.cfg = alts, kinds, ns, cfg
        self.points = {}
        impls = []
        for kind in kinds:
            for alt in alts:
                if kind not in alt.kinds:
                    continue
                for n in ns:
                    im = Impl("%s, %d %s" % (alt.name, n, HANDOFF_KIND_LABEL[kind]),
                              None, available=alt.available)
                    self.points[alt.name, kind, n] = im
                    impls.append(im)
        Case.__init__(self, key, title, unit, impls, impls[0].name, doc=doc)

    def point(self, alt, kind, n):
        """The Impl of one point, or None if this run has no such point."""
        return self.points.get((alt, kind, n))

    def ratio(self, name, ref=None):
        """Median over median (the points are not measured in the same
        rounds), with the quartile-crossed range q1/q3 .. q3/q1."""
        a, b = self.impl(name), self.impl(ref or self.ref)
        if not (a.ok and b.ok and a.samples and b.samples):
            return None, None, None
        (a1, a3), (b1, b3) = a.quartiles(), b.quartiles()
        return a.median() / b.median(), a1 / b3, a3 / b1

    def measure(self, log):
        for kind in self.kinds:
            for alt in self.alts:
                if kind in alt.kinds and alt.available is None:
                    self._sweep(alt, kind, log)
                    print(".", end="", flush=True)

    def _sweep(self, alt, kind, log):
        cfg = self.cfg
        pts = [self.points[alt.name, kind, n] for n in self.ns]
        objs = []
        pool = None
        try:
            req, close = alt.new()
            objs.append(close)
            resp, close = alt.new()
            objs.append(close)
            pool = _WaiterPool(kind, req, resp, max(self.ns), alt.env)
            release, wait, counters = req.release, alt.timed(resp), pool.counters
            # efd's count of its own wake-ups in this process (issue 13's
            # private EventFD._wakeups()): with thread waiters, how many
            # threads one release woke.
            wakeups = getattr(getattr(req, "_ev", req), "_wakeups", None) \
                if kind == "thread" else None

            def sample(k):
                r = range(k)
                (c0, s0), w0 = counters(), wakeups and wakeups()
                t0 = now()
                for _ in r:
                    release()
                    if wait() is False:
                        raise RuntimeError("no answer within %.0f s" % HANDOFF_TIMEOUT)
                secs = now() - t0
                c1, s1 = counters()
                extras = {"cpu": (c1 - c0) / k, "runs": (s1 - s0) / k}
                if wakeups:
                    w1 = wakeups()
                    extras["wakeups"] = (w1[0] - w0[0]) / k
                    extras["rechecks"] = (w1[1] - w0[1]) / k
                return secs / k, extras

            slow = None
            for n, im in zip(self.ns, pts):
                if slow is not None:
                    im.available = slow
                    continue
                pool.grow(n)
                pool.wait_blocked(HANDOFF_READY_TIMEOUT)
                faulthandler.dump_traceback_later(HANG_SECONDS, exit=True)
                try:
                    per, _ = sample(3)      # warm-up, and the sample's size
                    im.n = max(1, min(cfg.handoff_max, int(cfg.handoff_target / per)))
                    for _ in range(cfg.rounds):
                        secs, extras = sample(im.n)
                        im.samples.append(secs)
                        for key, v in extras.items():
                            im.extras.setdefault(key, []).append(v)
                finally:
                    faulthandler.cancel_dump_traceback_later()
                pool.wait_blocked(HANDOFF_SETTLE_TIMEOUT)
                if im.median() > HANDOFF_SLOW:
                    slow = "%s per hand-off at N=%d" % (
                        fmt_time(im.median()), n)
        except Exception as exc:
            err = "%s: %s" % (type(exc).__name__, exc)
            for im in pts:
                if im.error is None and len(im.samples) < cfg.rounds:
                    im.error, im.samples = err, []
            log("  ! %s with %s: %s" % (alt.name, HANDOFF_KIND_LABEL[kind], err))
        finally:
            if pool is not None:
                try:
                    stuck = pool.stop()
                except BaseException:
                    pool.kill()
                    raise
                if stuck:
                    log("  ! %s: %d waiter threads did not leave" % (alt.name, stuck))
            for close in objs:
                close()


def handoff_curve_case(cfg):
    _load_libc()
    efd_kinds = HANDOFF_KINDS + HANDOFF_LOOP_KINDS
    alts = [HandoffAlt("efd EventFD [%s]" % b, _new_efd(b), efd_kinds,
                       available=_efd_available(b)) for b in BACKENDS]
    alts += [
        # The fallback, measured: loops on the kernel counter watch
        # fileno() themselves (asyncio's epoll loops register it with
        # EPOLLEXCLUSIVE; uvloop and trio plainly).
        HandoffAlt("efd EventFD [eventfd], loops on fileno()",
                   _new_efd("eventfd"), ("async",) + HANDOFF_LOOP_KINDS,
                   available=_efd_available("eventfd"),
                   env={"EFD_LOOP_SLEEP": "fileno"}),
        HandoffAlt("efd.Semaphore (futex)", _new_dropin, efd_kinds,
                   available=_efd_available("futex")),
        HandoffAlt("threading.Semaphore", _new_threading, ("thread",)),
        HandoffAlt("multiprocessing.Semaphore", _new_mp, ("thread", "process")),
        HandoffAlt("posix_ipc.Semaphore", _new_posix_ipc, ("thread", "process"),
                   available=_missing_posix_ipc(),
                   timed=lambda s: functools.partial(s.acquire, HANDOFF_TIMEOUT)),
    ]
    return CurveCase(
        "handoff-curve", "release() handing one unit to one of N blocked waiters",
        "hand-off", alts, HANDOFF_KINDS + HANDOFF_LOOP_KINDS, cfg.handoff_ns,
        cfg,
        doc="A ping-pong: this process releases one unit of a semaphore on "
            "which N waiters are blocked and waits (acquire with a 30 s "
            "bound) until the waiter that got it has answered through a "
            "second semaphore of the same kind; the other N-1 stay blocked. "
            "Time per hand-off = one round trip, median of the rounds. One "
            "pool of waiters per (alternative, kind) grows from the smallest "
            "N to the largest, and before and after each N every waiter must "
            "be asleep (state S in /proc) -- a waiter that spins fails the "
            "row. *CPU* is the CPU time per hand-off of this process (threads: "
            "all of them) plus, for processes, the waiters' (schedstat); "
            "*runs* is how many times waiters were scheduled in per hand-off "
            "(schedstat): about 1 when a release wakes one waiter, about N "
            "in a thundering herd. "
            "Points are not interleaved, so ratios are of medians.")


# ---- efd.Event against threading.Event --------------------------------------

def _calls(make, *names):
    # The named methods of the object make() returns, called in turn n
    # times in a plain loop (one name: is_set; two: set, clear).
    def run(n):
        obj = make()
        try:
            fs = [getattr(obj, name) for name in names]
            r = range(n)
            if len(fs) == 1:
                f, = fs
                t0 = now()
                for _ in r:
                    f()
            else:
                f, g = fs
                t0 = now()
                for _ in r:
                    f()
                    g()
            return now() - t0
        finally:
            close = getattr(obj, "close", None)
            if close is not None:
                close()
    return run


def event_case(cfg, what):
    futex = _efd_available("futex")
    if what == "is_set":
        impls = [
            Impl("efd.Event (futex)", _calls(efd.Event, "is_set"), available=futex),
            Impl("efd.Event [eventfd]",
                 _calls(lambda: efd.Event(backend="eventfd"), "is_set"),
                 available=_efd_available("eventfd"),
                 note="poll() on the kernel counter"),
            Impl("threading.Event", _calls(threading.Event, "is_set"), note=WHY_INPROC),
            Impl("multiprocessing.Event", _calls(FORK.Event, "is_set")),
        ]
        return Case("event-is-set", "Event.is_set(), flag clear", "call", impls,
                    "efd.Event (futex)",
                    doc="One load from the shared page on the futex backend.")
    impls = [
        Impl("efd.Event (futex)", _calls(efd.Event, "set", "clear"), available=futex),
        Impl("efd.Event [eventfd]", _calls(lambda: efd.Event(backend="eventfd"), "set", "clear"),
             available=_efd_available("eventfd")),
        Impl("threading.Event", _calls(threading.Event, "set", "clear"), note=WHY_INPROC),
        Impl("multiprocessing.Event", _calls(FORK.Event, "set", "clear")),
    ]
    return Case("event-set-clear", "Event.set() + clear(), nobody waiting", "pair",
                impls, "efd.Event (futex)",
                doc="No system call on the futex backend while nobody waits "
                    "and nobody asked for fileno().")


# ---- idle cost (issue 19) ------------------------------------------------------

# A child that makes its object, says so, and blocks on it with nothing ever
# released; the parent counts the child's context switches meanwhile.
_IDLE_CHILD = r"""
import asyncio, os, sys, threading
kind, backend, seconds = sys.argv[1], sys.argv[2] or None, float(sys.argv[3])
if kind == "multiprocessing":
    import multiprocessing
    sem = multiprocessing.Semaphore(0)
    wait = lambda: sem.acquire(timeout=seconds * 3)
elif kind == "threading":
    sem = threading.Semaphore(0)
    wait = lambda: sem.acquire(timeout=seconds * 3)
elif kind == "posix_ipc":
    import posix_ipc
    sem = posix_ipc.Semaphore(None, posix_ipc.O_CREX, initial_value=0)
    def wait():
        try:
            sem.acquire(seconds * 3)
        except posix_ipc.BusyError:
            pass
        sem.unlink()
else:
    import efd
    if kind == "efd.Semaphore held":
        # Another process holds the one unit in a `with` block (issue 22's
        # books): the waiter must learn if that holder dies.
        sem = efd.Semaphore(1, backend=backend)
        held_r, held_w = os.pipe()
        if os.fork() == 0:
            with sem:
                os.write(held_w, b"h")
                import time
                time.sleep(seconds * 3)
            os._exit(0)
        os.read(held_r, 1)
    elif kind.startswith("efd.Semaphore"):
        sem = efd.Semaphore(0, backend=backend)
    elif kind.startswith("efd.Event"):
        sem = efd.Event(backend=backend)    # never set
    else:
        sem = efd.EventFD(0, semaphore=True, backend=backend)
    if kind.endswith("async"):
        waiting = (sem.wait_async if kind.startswith("efd.Event")
                   else sem.acquire_async)
        async def main():
            try:
                await asyncio.wait_for(waiting(), seconds * 3)
            except asyncio.TimeoutError:
                pass
        wait = lambda: asyncio.run(main())
    else:
        wait = lambda: sem.acquire(timeout=seconds * 3)
os.write(1, b"ready\n")
wait()
"""


def _ctxt_switches(pid):
    """Voluntary + involuntary context switches of every thread of `pid`."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                for line in f:
                    if "ctxt_switches:" in line:    # voluntary, nonvoluntary
                        total += int(line.split()[-1])
        except OSError:
            pass                            # a thread that just ended
    return total


def _switches_per_second(pids, settle, seconds):
    """After `settle` seconds (the waiters are blocked by then), the
    context switches of every thread of `pids` over `seconds`: (the window
    measured, {"wakeups/s": switches per second})."""
    time.sleep(settle)
    before = sum(_ctxt_switches(p) for p in pids)
    t0 = now()
    time.sleep(seconds)
    after = sum(_ctxt_switches(p) for p in pids)
    secs = now() - t0
    return secs, {"wakeups/s": (after - before) / secs}


def _idle(kind, backend, seconds, env=None):
    """One waiter (a child process) blocked `seconds` on an object nobody
    releases: its wake-ups per second (all its threads: a loop's helper
    included).  The timed value is the idle window itself; what matters is
    the 'wake-ups per second' column.  `env`: set in the child's
    environment."""
    def run(n):
        child = subprocess.Popen(
            [sys.executable, "-c", _IDLE_CHILD, kind, backend or "", str(seconds)],
            stdout=subprocess.PIPE, env=dict(os.environ, **(env or {})))
        try:
            if child.stdout.readline() != b"ready\n":
                raise Skip("the waiter did not start")
            return _switches_per_second([child.pid], 0.2, seconds)
        finally:
            child.kill()
            child.wait()
    return run


def idle_case(cfg):
    seconds = cfg.idle_seconds
    impls = []
    ring = {"EFD_LOOP_SLEEP": "ring"}
    for kind, backend, label, env in (
            ("efd.Semaphore", None, "efd.Semaphore() acquire() (futex)", None),
            ("efd.Semaphore held", None,
             "efd.Semaphore() acquire() (futex), another process holding "
             "the unit in `with`", None),
            ("EventFD", "eventfd", "efd EventFD [eventfd] acquire()", None),
            ("EventFD", "eventfd-readback",
             "efd EventFD [eventfd-readback] acquire()", None),
            ("EventFD", "pipe", "efd EventFD [pipe] acquire()", None),
            ("efd.Semaphore async", None,
             "efd.Semaphore() acquire_async() (futex)", None),
            ("efd.Semaphore async", None,
             "efd.Semaphore() acquire_async() (futex, EFD_LOOP_SLEEP=ring)",
             ring),
            ("EventFD async", "eventfd", "efd EventFD [eventfd] acquire_async()",
             None),
            ("EventFD async", "pipe", "efd EventFD [pipe] acquire_async()",
             None),
            ("efd.Event async", None, "efd.Event() wait_async() (futex)",
             None),
            ("efd.Event async", "pipe", "efd.Event(backend='pipe') "
             "wait_async()", None)):
        impls.append(Impl(label, _idle(kind, backend, seconds, env), fixed_n=1,
                          available=_efd_available(backend or "futex")))
    impls += [
        Impl("multiprocessing.Semaphore acquire()",
             _idle("multiprocessing", None, seconds), fixed_n=1),
        Impl("threading.Semaphore acquire()", _idle("threading", None, seconds),
             fixed_n=1),
        Impl("posix_ipc.Semaphore acquire()", _idle("posix_ipc", None, seconds),
             fixed_n=1, available=_missing_posix_ipc()),
    ]
    return Case("idle-cost", "one waiter blocked %g s, nothing released: "
                "its wake-ups" % seconds, "idle window", impls,
                "efd.Semaphore() acquire() (futex)",
                doc="Issue 19's idle cost: context switches of the waiting "
                    "process per second while nothing changes (a timed "
                    "acquire with a deadline far beyond the window).  The "
                    "goal is 0.  On the futex backend with its death bell "
                    "(python -m efd) blocked waiters, and event loops "
                    "(acquire_async(), Event.wait_async()) through "
                    "their helper thread, sleep until the kernel or a "
                    "release wakes them; elsewhere, and for loops sleeping "
                    "through a ring (EFD_LOOP_SLEEP=ring), they look at the "
                    "count every 100 ms in case a wake-up was owed by a "
                    "process that died.  While another process holds units "
                    "(a `with` block, issue 22) futex waiters sleep too: "
                    "the kernel tells the waiter's process when that holder "
                    "dies (a pidfd, src/efd_watch.c); where pidfds are "
                    "refused they look every 100 ms.",
                columns=(("wakeups/s", "wake-ups per second", "%.1f"),))


# ---- idle cost of a crowd (issue 19) -------------------------------------------

# A child that makes its object, then `count` waiters blocked on it --
# threads of its own, or forked processes -- with nothing ever released.
# It prints "ready" and the waiters' process ids once all are started;
# the parent sums their context switches (every thread of each).
_CROWD_CHILD = r"""
import os, sys, threading, time
kind, backend, how = sys.argv[1], sys.argv[2] or None, sys.argv[3]
count, seconds = int(sys.argv[4]), float(sys.argv[5])
if kind == "multiprocessing":
    import multiprocessing
    sem = multiprocessing.Semaphore(0)
elif kind == "threading":
    sem = threading.Semaphore(0)
else:
    import efd
    if kind == "efd.Semaphore":
        sem = efd.Semaphore(0, backend=backend)
    else:
        sem = efd.EventFD(0, semaphore=True, backend=backend)
bound = seconds * 3 + 5


def wait():
    sem.acquire(timeout=bound)


pids = [os.getpid()]
if how == "threads":
    threads = [threading.Thread(target=wait, daemon=True)
               for _ in range(count)]
    for t in threads:
        t.start()
else:
    import ctypes, signal
    libc = ctypes.CDLL(None, use_errno=True)
    for _ in range(count):
        pid = os.fork()
        if pid == 0:
            libc.prctl(1, signal.SIGKILL)       # PR_SET_PDEATHSIG
            wait()
            os._exit(0)
        pids.append(pid)
os.write(1, ("ready %s\n" % ",".join(map(str, pids))).encode())
time.sleep(bound)
"""


def _idle_crowd(kind, backend, how, count, seconds):
    """`count` waiters (threads of one child process, or processes forked
    by it) blocked `seconds` on an object nobody releases: their wake-ups
    per second in total."""
    def run(n):
        _load_libc()
        parent = os.getpid()
        child = subprocess.Popen(
            [sys.executable, "-c", _CROWD_CHILD, kind, backend or "", how,
             str(count), str(seconds)],
            stdout=subprocess.PIPE,
            preexec_fn=lambda: _die_with_parent(parent))
        try:
            line = child.stdout.readline().split()
            if len(line) != 2 or line[0] != b"ready":
                raise Skip("the waiters did not start")
            pids = [int(p) for p in line[1].split(b",")]
            return _switches_per_second(pids, 0.5 + count / 2000, seconds)
        finally:
            child.kill()
            child.wait()
    return run


def idle_crowd_case(cfg):
    seconds = cfg.idle_seconds
    count = cfg.crowd
    impls = []
    for kind, backend, how in (
            ("efd.Semaphore", None, "threads"),
            ("efd.Semaphore", None, "processes"),
            ("EventFD", "futex", "threads"),
            ("EventFD", "eventfd", "threads"),
            ("EventFD", "eventfd", "processes"),
            ("EventFD", "eventfd-readback", "threads"),
            ("EventFD", "pipe", "threads")):
        label = "%s %s" % ("efd.Semaphore() (futex)" if backend is None
                           else "efd EventFD [%s]" % backend, how)
        impls.append(Impl(label, _idle_crowd(kind, backend, how, count,
                                             seconds), fixed_n=1,
                          available=_efd_available(backend or "futex")))
    impls += [
        Impl("multiprocessing.Semaphore threads",
             _idle_crowd("multiprocessing", None, "threads", count, seconds),
             fixed_n=1),
        Impl("multiprocessing.Semaphore processes",
             _idle_crowd("multiprocessing", None, "processes", count,
                         seconds), fixed_n=1),
        Impl("threading.Semaphore threads",
             _idle_crowd("threading", None, "threads", count, seconds),
             fixed_n=1),
    ]
    return Case("idle-crowd", "%d waiters blocked %g s, nothing released: "
                "their wake-ups in total" % (count, seconds), "idle window",
                impls, "efd.Semaphore() (futex) threads",
                doc="Issue 19's idle cost at scale: %d waiters in acquire() "
                    "-- threads of one process, or processes -- on one "
                    "object nobody releases, and the context switches of "
                    "all of them per second.  The goal is 0.  On the "
                    "kernel counters and the pipe backend someone must look "
                    "at the count every 100 ms (a chosen waiter killed "
                    "after its wake-up hands nothing on): one sleeper per "
                    "process keeps that watch, so %d threads of one "
                    "process cost about 10 a second, and %d processes "
                    "about %d." % (count, count, count, count * 10),
                columns=(("wakeups/s", "wake-ups per second, all waiters",
                          "%.0f"),))


# ---- killed holders (issue 22) ------------------------------------------------

def _reap(pids, grace):
    """Wait for `pids`; SIGKILL those still there after `grace` seconds.  A
    worker asleep in an acquire that no unit will reach does not always
    see its SIGTERM: one that arrives between the acquire's signal check
    and its sleep (multiprocessing's sem_wait() has no time limit) is
    handled only once the sleep ends -- and with the killed holders' units
    gone for good, it does not end.  (It hung the full benchmark once.)"""
    deadline = now() + grace
    left = list(pids)
    while left and now() < deadline:
        left = [pid for pid in left if os.waitpid(pid, os.WNOHANG)[0] == 0]
        if left:
            time.sleep(0.01)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return len(left)


def _killed_holders(make, workers, killed, limit):
    """`workers` processes loop `with sem:` (holding 1 ms) on a bounded
    semaphore of `limit` units; `killed` of them are SIGKILLed at random
    instants (some inside the block); the others stop.  The units left are
    counted 0.5 s after the last kill.  The timed value is the run; what
    matters is 'units lost' and 'recovered'."""
    def run(n):
        import random
        sem = make(limit)
        rng = random.Random()
        pids = []
        _load_libc()
        parent = os.getpid()
        for _ in range(workers):
            pid = os.fork()
            if pid == 0:
                try:
                    _die_with_parent(parent)
                    # SIGTERM: leave the block as an exception would.
                    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
                    while True:
                        with sem:
                            time.sleep(0.001)
                finally:
                    os._exit(0)
            pids.append(pid)
        t0 = now()
        time.sleep(0.05)
        victims = rng.sample(pids, killed)
        for pid in victims:
            time.sleep(rng.uniform(0.005, 0.03))
            os.kill(pid, signal.SIGKILL)
        for pid in pids:
            if pid not in victims:
                os.kill(pid, signal.SIGTERM)   # leaves its block cleanly
        stragglers = _reap(pids, 5.0)
        # Recovery: take every unit, waiting up to 1 s for each (a dead
        # holder's comes back within a waiter's re-check, 100 ms).
        t_rec = now()
        left = 0
        while left < limit and sem.acquire(timeout=1.0):
            left += 1
        recovery = now() - t_rec
        secs = now() - t0
        for _ in range(left):
            sem.release()
        close = getattr(sem, "close", None)
        if close is not None:
            close()
        extra = {"units lost": limit - left, "stragglers": stragglers}
        if left == limit:
            extra["recovery ms"] = recovery * 1e3
        return secs, extra
    return run


def killed_holders_case(cfg):
    workers, killed, limit = 12, 6, 4
    impls = []
    for backend in ("futex", "pipe", "eventfd"):
        impls.append(Impl(
            "efd.BoundedSemaphore [%s]" % backend,
            _killed_holders(functools.partial(efd.BoundedSemaphore,
                                              backend=backend),
                            workers, killed, limit),
            fixed_n=1, available=_efd_available(backend)))
    impls.append(Impl("multiprocessing.BoundedSemaphore",
                      _killed_holders(FORK.BoundedSemaphore, workers, killed,
                                      limit), fixed_n=1))
    return Case("killed-holders", "%d processes looping `with sem:` on a "
                "BoundedSemaphore(%d), %d SIGKILLed" % (workers, limit, killed),
                "run", impls, "efd.BoundedSemaphore [futex]",
                doc="Issue 22's scenario (a pre-fork server whose workers are "
                    "killed while they hold the shared limit): how many of "
                    "the %d units are gone for good, and how long taking "
                    "all of them back took once the workers were reaped.  "
                    "efd's memory backends (futex, pipe) keep books of "
                    "held units; the kernel counter and multiprocessing "
                    "keep none.  The goal is 0 lost." % limit,
                columns=(("units lost", "units lost (of %d)" % limit, "%.0f"),
                         ("recovery ms", "recovery (ms)", "%.0f"),
                         ("stragglers", "workers deaf to SIGTERM for 5 s "
                          "(then killed)", "%.0f")))


# ---- a holder's death, told or found (issues 19 and 22) ------------------------

def _holder_death(backend):
    """One process holds the unit in a `with` block; another blocks in
    acquire() meanwhile; the holder is SIGKILLed.  The timed value is the
    time from the kill to the waiter having the unit (one clock,
    CLOCK_MONOTONIC, for all processes), with the switches the waiter made
    while the holder held (0.5 s) beside it."""
    def run(n):
        sem = efd.Semaphore(1, backend=backend)
        held_r, held_w = os.pipe()
        got_r, got_w = os.pipe()
        parent = os.getpid()
        _load_libc()
        holder = os.fork()
        if holder == 0:
            try:
                _die_with_parent(parent)
                with sem:
                    os.write(held_w, b"h")
                    time.sleep(30)
            finally:
                os._exit(0)
        os.read(held_r, 1)
        waiter = os.fork()
        if waiter == 0:
            try:
                _die_with_parent(parent)
                ok = sem.acquire(timeout=10)
                os.write(got_w, b"%d %.9f" % (ok, time.monotonic()))
            finally:
                os._exit(0)
        try:
            time.sleep(0.2)                 # the waiter is asleep by now
            before = _ctxt_switches(waiter)
            time.sleep(0.5)
            looks = _ctxt_switches(waiter) - before
            killed_at = time.monotonic()
            os.kill(holder, signal.SIGKILL)
            ok, at = os.read(got_r, 64).split()
        finally:
            for pid in (holder, waiter):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                os.waitpid(pid, 0)
            for fd in (held_r, held_w, got_r, got_w):
                os.close(fd)
            sem.close()
        if ok != b"1":
            raise Skip("the waiter did not get the dead holder's unit")
        latency = float(at) - killed_at
        return latency, {"switches/s": looks / 0.5, "ms": latency * 1e3}
    return run


def holder_death_case(cfg):
    impls = [Impl("efd.Semaphore [%s] acquire()" % backend,
                  _holder_death(backend), fixed_n=1,
                  available=_efd_available(backend))
             for backend in ("futex", "pipe")]
    return Case("holder-death", "a waiter blocked while another process "
                "holds the unit; the holder SIGKILLed: time until the "
                "waiter has it", "kill to unit", impls,
                "efd.Semaphore [futex] acquire()",
                doc="Issues 19 and 22 crossed: a dead holder's unit must "
                    "reach a waiter that is already asleep, and the waiter "
                    "should not pay for that while the holder lives.  On "
                    "futex the kernel tells the waiter's process (a pidfd, "
                    "src/efd_watch.c): the waiter sleeps and wakes at the "
                    "death.  On pipe it looks every 100 ms while another "
                    "process holds units (10 switches a second).  "
                    "multiprocessing.Semaphore has no books: its "
                    "unit never comes back, so it has no row.",
                columns=(("ms", "kill to unit (ms)", "%.2f"),
                         ("switches/s", "waiter's switches per second "
                          "while held", "%.1f")))


# ---- robust holds: their cost (issue 22) --------------------------------------

def _holds(kind):
    """Uncontended, one thread, futex backend: a `with` block (booked), or
    a pair of calls with or without undo."""
    def run(n):
        r = range(n)
        if kind.startswith("ev"):
            ev = efd.EventFD(1, semaphore=True, backend="futex")
            acq, rel = ev.acquire, ev.release
            t0 = now()
            if kind == "ev-undo":
                for _ in r:
                    acq(undo=True)
                    rel()
            else:
                for _ in r:
                    acq()
                    rel()
            secs = now() - t0
            ev.close()
            return secs
        if kind == "threading":
            sem = threading.Semaphore(1)
        elif kind == "with-off":
            # The same block with the books turned off: what `with sem:`
            # cost before robust holds (it consumed and released).
            os.environ["EFD_HOLDS"] = "off"
            try:
                sem = efd.Semaphore(1, backend="futex")
            finally:
                del os.environ["EFD_HOLDS"]
        else:
            sem = efd.Semaphore(1, backend="futex")
        if kind == "pair":
            acq, rel = sem.acquire, sem.release
            t0 = now()
            for _ in r:
                acq()
                rel()
            secs = now() - t0
        else:
            t0 = now()
            for _ in r:
                with sem:
                    pass
            secs = now() - t0
        getattr(sem, "close", lambda: None)()
        return secs
    return run


def holds_case(cfg):
    impls = [
        Impl("efd.Semaphore: with sem (held)", _holds("with"),
             available=_efd_available("futex"),
             note="the unit is booked to the process: a 16-byte "
                  "compare-and-swap on (count, journal) each way"),
        Impl("efd.Semaphore: with sem, EFD_HOLDS=off", _holds("with-off"),
             available=_efd_available("futex"),
             note="the books turned off: what `with sem:` cost before them"),
        Impl("efd.Semaphore: acquire() + release()", _holds("pair"),
             available=_efd_available("futex")),
        Impl("EventFD [futex]: acquire(undo=True) + release()",
             _holds("ev-undo"), available=_efd_available("futex")),
        Impl("EventFD [futex]: acquire() + release()", _holds("ev"),
             available=_efd_available("futex")),
        Impl("threading.Semaphore: with sem", _holds("threading"),
             note=WHY_INPROC),
    ]
    return Case("holds", "uncontended held units: `with sem:` and undo=True",
                "block", impls, "efd.Semaphore: with sem, EFD_HOLDS=off",
                doc="One thread, a unit always there, futex backend.  Targets "
                    "(issue 22): a held `with sem:` at most 1.5x the same "
                    "block without books, and an undo pair at most 2x a "
                    "plain EventFD pair; no system call either way.")


def all_cases(cfg):
    """Every case, in report order, as (key, builder)."""
    return [
        ("pair", lambda: pair_case(cfg, False)),
        ("pair-held", lambda: pair_case(cfg, True)),
        ("fail", lambda: fail_case(cfg)),
        ("timed", lambda: timed_case(cfg)),
        ("thread-pingpong", lambda: pingpong_case(cfg, "thread")),
        ("process-pingpong", lambda: pingpong_case(cfg, "process")),
        ("async-wakeup-thread", lambda: wakeup_case(cfg, "thread")),
        ("async-wakeup-process", lambda: wakeup_case(cfg, "process")),
        ("async-waiters", lambda: waiters_case(cfg)),
        ("async-handoff", lambda: handoff_case(cfg)),
        ("async-with", lambda: async_with_case(cfg)),
        ("mpmc", lambda: mpmc_case(cfg)),
        ("event-is-set", lambda: event_case(cfg, "is_set")),
        ("event-set-clear", lambda: event_case(cfg, "set_clear")),
        ("handoff-curve", lambda: handoff_curve_case(cfg)),
        ("idle-cost", lambda: idle_case(cfg)),
        ("idle-crowd", lambda: idle_crowd_case(cfg)),
        ("killed-holders", lambda: killed_holders_case(cfg)),
        ("holder-death", lambda: holder_death_case(cfg)),
        ("holds", lambda: holds_case(cfg)),
    ]
