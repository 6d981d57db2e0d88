"""The report behind ``python -m efd``: what efd will do on this machine, and a short self-check.

Prints the version, the Python and the kernel, the answers of the backend
probe and the backend each mode gets (and why), then checks a
release/acquire round trip across a thread and across a child process for
every backend that works here.  Exits 0 if every check passed, 1 otherwise.
"""
import multiprocessing
import os
import platform
import sys
import threading
import time

import efd
from efd import _efd

BACKENDS = ("eventfd", "eventfd-readback", "pipe", "futex")


# What a release wakes, by what the kernel offers (see docs/internals.rst).
#: For the kernel counter and 'pipe' (the 'futex' backend wakes one
#: sleeper by construction): how a release wakes, and what an idle waiter
#: costs (SPEC 6).
_WAKE_ONE = {
    "epoll-exclusive": "yes (epoll with EPOLLEXCLUSIVE): one waiter of one "
                       "process; while idle, one thread per process and "
                       "object looks at the count every 100 ms (for a "
                       "chosen waiter that died)",
    "epoll": "within a process (epoll; EPOLLEXCLUSIVE refused): every "
             "waiting process wakes; while idle, one thread per process "
             "and object looks at the count every 100 ms",
    "poll": "no (no epoll): every waiter wakes, and looks at the count "
            "every 100 ms while idle; the 'futex' backend still wakes one "
            "thread or process",
}


def _why(semaphore, probe):
    """Explain, in words, the backend the probe chain picks for a mode."""
    plain, sem = probe["eventfd2_errno"], probe["eventfd2_semaphore_errno"]
    if not probe["compiled_with_eventfd"]:
        return "pipe", "efd was built without <sys/eventfd.h>"
    if not semaphore:
        if plain == 0:
            return "eventfd", "eventfd2() works"
        return "pipe", "eventfd2() fails: %s" % probe["eventfd2"]
    if sem == 0:
        return "eventfd", "eventfd2(EFD_SEMAPHORE) works"
    if plain == 0:
        return ("eventfd-readback",
                "the kernel refuses EFD_SEMAPHORE (%s); plain eventfd2() works"
                % probe["eventfd2_semaphore"])
    return "pipe", "eventfd2() fails: %s" % probe["eventfd2"]


def _child(ev, done):
    # Runs in a child process: take the parent's unit, answer with two.
    ok = ev.acquire(timeout=10)
    done.release(2 if ok else 1)
    ev.close()
    done.close()


def _check_thread(backend):
    ev = efd.EventFD(semaphore=True, backend=backend)
    back = efd.EventFD(semaphore=True, backend=backend)
    try:
        def worker():
            if ev.acquire(timeout=10):
                back.release()

        t = threading.Thread(target=worker)
        t.start()
        ev.release()
        ok = back.acquire(timeout=10)
        t.join(10)
        return ok and not t.is_alive()
    finally:
        ev.close()
        back.close()


def _check_process(backend, method):
    ctx = multiprocessing.get_context(method)
    ev = efd.EventFD(semaphore=True, backend=backend)
    done = efd.EventFD(backend=backend)
    try:
        p = ctx.Process(target=_child, args=(ev, done))
        p.start()
        ev.release()
        got = 0
        deadline = time.monotonic() + 30
        while got == 0 and time.monotonic() < deadline:
            if done.acquire(timeout=0.2):
                got = 1
            elif not p.is_alive():
                break
        p.join(30)
        # The child answered 2 on success; a normal-mode read takes it all.
        return got == 1 and p.exitcode == 0 and done._peek() in (0, None)
    finally:
        ev.close()
        done.close()


def main():
    """Print the report; return the exit status."""
    print("efd %s" % efd.__version__)
    print("Python %s (%s)" % (platform.python_version(), sys.executable))
    print("Kernel %s %s (%s)" % (platform.system(), platform.release(),
                                 platform.machine()))
    probe = _efd._probe()
    print()
    print("Probe (run once per process):")
    print("  built with <sys/eventfd.h>:  %s" % probe["compiled_with_eventfd"])
    print("  eventfd2(0, CLOEXEC|NONBLOCK):            %s" % probe["eventfd2"])
    print("  eventfd2(0, CLOEXEC|NONBLOCK|SEMAPHORE):  %s"
          % probe["eventfd2_semaphore"])
    print("  process-shared futex (backend 'futex'):   %s" % probe["futex"])
    print("  one wake-up per release:                  %s"
          % _WAKE_ONE[probe["wake_one"]])
    on_futex = ("'futex' and 'pipe'" if probe["pipe_sleeps"] == "futex"
                else "'futex'")
    print("  death bell (futex_waitv, robust list):    %s"
          % ("yes: %s waiters sleep without re-checks; the kernel "
             "wakes them for a process that died owing a wake-up" % on_futex
             if probe["death_bell"] else
             "no: %s waiters look at the count every 100 ms" % on_futex))
    if probe["loop_sleep"] == "helper":
        loops = ("yes, through a helper thread: a loop's sleep is a thread "
                 "of efd's asleep on the futex word with the death bell; a "
                 "release wakes one loop, and an idle loop wakes nobody")
    elif probe["loop_sleep"] == "ring":
        loops = ("yes, through io_uring: a loop sleeps on the futex word; a "
                 "release wakes one loop (loops, and every waiter of an "
                 "object loops sleep on, look at the count every 100 ms)")
    else:
        loops = ("no (%s): loops watch the readiness descriptor, every "
                 "loop wakes for a release, and each looks at the count "
                 "every 100 ms" % (os.strerror(probe["loop_ring_errno"])
                                   if probe["loop_ring_errno"]
                                   else "no futex"))
    print("  event loops on %s (sleep on the word): %s" % (on_futex, loops))
    print("  event loops on the kernel counter:        %s"
          % ("through a helper thread asleep in an epoll instance of its "
             "own (EPOLLEXCLUSIVE): a release wakes one loop, whatever the "
             "loop library; a waiting loop's helper looks at the count "
             "every 100 ms" if probe["kernel_loop_sleep"] == "helper" else
             "on the readiness descriptor: asyncio's epoll loops register "
             "it with EPOLLEXCLUSIVE where they can (else every loop wakes "
             "for a release), and look at the count every 100 ms"))
    print("  'pipe' waiters sleep:                     %s"
          % ("on futex words, as 'futex' waiters do (the pipe is for "
             "readiness only)" if probe["pipe_sleeps"] == "futex" else
             "in poll() on the pipe: one per process and object looks at "
             "the count every 100 ms; every process wakes for a release"))
    if probe["holder_deaths_told"] and probe["death_bell"]:
        told = ("on %s the kernel tells a waiter that a holder died "
                "(a pidfd): it wakes at once and never looks before%s"
                % (on_futex, "" if probe["pipe_sleeps"] == "futex" else
                   "; on 'pipe' it finds out within a re-check (100 ms)"))
    elif probe["death_bell"]:
        told = ("a waiter finds out within a re-check (100 ms): no pidfds "
                "here, so waiters look every 100 ms while another process "
                "holds units")
    else:
        told = "a waiter finds out within a re-check (100 ms)"
    print("  robust holds (OFD-locked holder slots):   %s"
          % ("yes: a unit held by `with sem:` or undo=True comes back when "
             "its process dies ('futex', 'pipe'); " + told
             if probe["robust_holds"] else
             "no: a dead holder's units do not come back here (no OFD "
             "locks, no /proc/self/fd, or no 16-byte compare-and-swap)"))
    print("  shared pages sealed (memfd):              %s"
          % ("yes" if probe["sealed_pages"] else
             "no (shm_open): a peer holding one could shrink it"))
    forced = os.environ.get("EFD_BACKEND", "")
    print()
    print("Automatic choice%s:" % (
        " (EFD_BACKEND=%s overrides it in this environment)" % forced
        if forced not in ("", "auto") else ""))
    for semaphore in (False, True):
        name, why = _why(semaphore, probe)
        print("  %-15s -> %-17s %s" % (
            "semaphore mode" if semaphore else "normal mode", name, why))

    print()
    print("Default backend of each class (made here with no backend=):")
    for cls, make in (("efd.EventFD", lambda: efd.EventFD()),
                      ("efd.EventFD(semaphore=True)",
                       lambda: efd.EventFD(semaphore=True)),
                      ("efd.Semaphore", lambda: efd.Semaphore()),
                      ("efd.BoundedSemaphore", lambda: efd.BoundedSemaphore()),
                      ("efd.Event", lambda: efd.Event())):
        try:
            obj = make()
        except OSError as exc:
            print("  %-28s not available here: %s" % (cls, exc))
            continue
        try:
            print("  %-28s %s" % (cls, obj.backend))
        finally:
            obj.close()

    print()
    print("Self-check (release/acquire round trips):")
    failures = 0
    methods = [m for m in ("fork", "spawn")
               if m in multiprocessing.get_all_start_methods()]
    for backend in BACKENDS:
        try:
            efd.EventFD(semaphore=True, backend=backend).close()
        except OSError as exc:
            print("  %-17s not available here: %s" % (backend, exc))
            continue
        checks = [("thread", lambda b=backend: _check_thread(b))]
        for m in methods:
            checks.append(("process/%s" % m,
                           lambda b=backend, m=m: _check_process(b, m)))
        results = []
        for label, check in checks:
            try:
                ok = check()
            except Exception as exc:  # report, don't crash the report
                ok = False
                label += " (%s: %s)" % (type(exc).__name__, exc)
            failures += not ok
            results.append("%s %s" % (label, "ok" if ok else "FAILED"))
        print("  %-17s %s" % (backend, ", ".join(results)))
    print()
    print("All checks passed." if not failures else
          "%d check(s) FAILED." % failures)
    return 1 if failures else 0

