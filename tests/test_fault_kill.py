"""Process death and stopped processes (issue 9, items 2 and 3; SPEC §5).

A process SIGKILLed at any instant -- reaped, or left a zombie -- must never
make another process hang, spin, or miss a wake-up; only units already in
the dead process's hands may be gone.  No test can time a kill inside the
``pipe`` backend's locked section, so these kill workers that hammer a shared
object at random instants, dozens of times (hundreds under ``pytest
--full``), and after every kill check what a survivor sees: a thread that
was already waiting wakes, a timed acquire returns on time, ``select`` on
``fileno()`` agrees with the count, a fresh waiter and an ``acquire_async``
waiter get a released unit, and nothing was created or lost beyond the dead
workers' hands.

Everything runs in a child (the "survivor") with a faulthandler watchdog:
a survivor frozen with the GIL held fails with its threads' tracebacks.
"""
import platform
import shutil
import subprocess

import pytest

from _faults import child_code, run_parallel
from conftest import full_or

#: Kill rounds per (backend, mode): 200 per backend in all with --full.
#: (Each size here is full_or(default run, --full).)
KILL_ROUNDS = full_or(25, 100)
#: Kill rounds with the worker in a pid namespace, per (backend, mode).
NS_ROUNDS = full_or(6, 25)
#: Kill rounds of the Event test, per backend.
EVENT_ROUNDS = full_or(25, 100)
#: Stop rounds per backend.
STOP_ROUNDS = full_or(4, 10)

_KILL = '''
    rng = random.Random(SEED)
    N = 2                          # units handed to the workers each round
    ev = efd.EventFD(0, semaphore=SEM, backend=BACKEND)
    fd = ev.fileno()

    def hammer():
        while True:
            ev.release(ev.read())  # holds what one read takes, briefly

    # How many units may die with W workers: one each in semaphore mode; in
    # counter mode (a read takes everything) and on eventfd-readback (a
    # semaphore read holds the whole count until it writes c - 1 back) all
    # N in circulation.  The extra unit released after the deaths is safe.
    def may_lose(w):
        return w if SEM and ev.backend != "eventfd-readback" else N

    # NS: each worker runs in a pid (and user) namespace of its own, where
    # its pid means nothing to us: it adopts the object's descriptors.
    NS_WORKER = (
        "import os, sys\\n"
        "import efd\\n"
        "ev = efd.EventFD._from_fds(%r, %r, %r, False)\\n"
        "os.write(1, b'r')\\n"
        "while True:\\n"
        "    ev.release(ev.read())\\n" % (ev._fds(), ev.backend, SEM))

    def ns_worker():
        import subprocess
        p = subprocess.Popen(
            ["unshare", "-Urpf", "--kill-child", sys.executable, "-c",
             NS_WORKER], pass_fds=ev._fds(), stdout=subprocess.PIPE)
        check(select.select([p.stdout], [], [], 20)[0] and p.stdout.read(1),
              "the worker in a pid namespace did not start")
        return p

    def ns_kill(p):
        # unshare dies at once; its child gets SIGKILL (--kill-child) and
        # closes the stdout pipe as it dies.
        p.kill()
        p.wait()
        check(select.select([p.stdout], [], [], 10)[0]
              and p.stdout.read() == b"", "the worker in a pid namespace "
                                          "did not die")
        p.stdout.close()

    stats = {"zombie": 0, "reaped": 0}
    for rnd in range(ROUNDS):
        ev.release(N)
        w = 1 if NS else rng.choice((1, 2))
        pids = [ns_worker() if NS else fork_worker(hammer) for _ in range(w)]

        # A thread of the survivor, busy on the object (often blocked in
        # read()) when the kill comes.
        progress, stop = [0], []
        def busy():
            while not stop:
                v = ev.read()
                progress[0] += 1
                ev.release(v)
        t, box = in_thread(busy)

        time.sleep(rng.uniform(0, 0.008))
        if NS:
            for p in pids:
                ns_kill(p)
            pids = []
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        for pid in pids:            # dead, not reaped: a zombie for now
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        reaped = [pid for pid in pids if rng.random() < 0.5]
        for pid in reaped:
            os.waitpid(pid, 0)
        stats["reaped"] += len(reaped)
        stats["zombie"] += len(pids) - len(reaped)
        where = "round %d (%d killed, %s)" % (
            rnd, w, "in a pid namespace" if NS
            else "%d left zombies" % (w - len(reaped)))

        # 1. The thread already waiting wakes once a unit exists.
        ev.release(1)
        p0 = progress[0]
        check(until(lambda: progress[0] >= p0 + 2 or "error" in box),
              lambda: "%s: a thread already blocked in read() did not wake "
                      "within %.1f s of release(1): count %r, fileno() "
                      "readable %r" % (where, SLACK, ev._peek(), readable(fd)))
        check("error" not in box, lambda: "%s: %r" % (where, box.get("error")))
        stop.append(1)
        t.join(SLACK)
        check(not t.is_alive(), "%s: the busy thread did not stop" % where)

        # 2. A timed acquire returns on time, either way.
        before = ev._peek()
        got, dt = timed(ev.acquire, timeout=0.5)
        check(dt < 0.5 + SLACK, "%s: acquire(timeout=0.5) took %.2f s"
              % (where, dt))
        if got:
            ev.release(1 if SEM else before)

        # 3. select() on fileno() agrees with the count.
        check(until(lambda: readable(fd) == (ev._peek() > 0)),
              lambda: "%s: fileno() readable=%r but the count is %r for "
                      "more than %.1f s" % (where, readable(fd), ev._peek(),
                                            SLACK))

        # 4. Conservation: nothing created; lost only what the dead held.
        total = 0
        if SEM:
            while ev.acquire(False):
                total += 1
                check(total <= N + 1, "%s: more units than were released"
                      % where)
        else:
            c = ev._peek()
            if ev.acquire(False):
                total = c
        check(N + 1 - may_lose(w) <= total <= N + 1,
              "%s: %d units left of %d (at most %d could die with the "
              "workers)" % (where, total, N + 1, may_lose(w)))
        check(not readable(fd), "%s: fileno() readable after draining"
              % where)

        # 5. A fresh waiter wakes after a release.
        t, box = in_thread(ev.acquire, 5)
        time.sleep(0.01)
        released = time.monotonic()
        ev.release(1)
        t.join(SLACK)
        check(box.get("result") is True and box["ended"] - released < SLACK,
              lambda: "%s: a waiter blocked in acquire() did not get a "
                      "released unit within %.1f s: %r" % (where, SLACK, box))

        # 6. acquire_async gets a released unit.
        async def take():
            asyncio.get_running_loop().call_later(0.01, ev.release, 1)
            return await ev.acquire_async(timeout=5)
        got, dt = timed(asyncio.run, take())
        check(got is True and dt < SLACK,
              "%s: acquire_async() got %r after %.2f s" % (where, got, dt))

        for pid in pids:
            if pid not in reaped:
                os.waitpid(pid, 0)
    print("rounds", ROUNDS, stats)
'''


def test_kill_at_random_instants(backend, popen_py):
    """Issue 9 items 2 and 3: SIGKILLed workers never freeze, starve or short-change survivors."""
    jobs = {mode: (child_code(_KILL, SEM=sem, ROUNDS=KILL_ROUNDS, SEED=9,
                              NS=False), backend)
            for mode, sem in (("counter", False), ("semaphore", True))}
    for out in run_parallel(popen_py, jobs, limit=60).values():
        assert "rounds %d" % KILL_ROUNDS in out


@pytest.mark.skipif(shutil.which("unshare") is None, reason="no unshare(1)")
def test_kill_in_another_pid_namespace(backend, popen_py):
    """Issue 9 item 2: a SIGKILLed worker in another pid namespace never freezes the survivors."""
    probe = subprocess.run(["unshare", "-Urpf", "true"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if probe.returncode != 0:
        pytest.skip("no user and pid namespaces here: %s"
                    % probe.stderr.decode(errors="replace").strip())
    jobs = {mode: (child_code(_KILL, SEM=sem, ROUNDS=NS_ROUNDS, SEED=4,
                              NS=True), backend)
            for mode, sem in (("counter", False), ("semaphore", True))}
    for out in run_parallel(popen_py, jobs, limit=60).values():
        assert "rounds %d" % NS_ROUNDS in out


_EVENT = '''
    rng = random.Random(SEED)
    e = efd.Event(backend=BACKEND)
    ev = e._ev

    def flip():
        while True:
            e.set()
            e.clear()

    for rnd in range(ROUNDS):
        w = rng.choice((1, 2))
        pids = [fork_worker(flip) for _ in range(w)]
        time.sleep(rng.uniform(0, 0.008))
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        for pid in pids:
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        reaped = [pid for pid in pids if rng.random() < 0.5]
        for pid in reaped:
            os.waitpid(pid, 0)
        where = "round %d (%d killed, %d zombies)" % (rnd, w, w - len(reaped))

        # is_set() (a poll of fileno()) does not lie for longer than the
        # re-check interval, whichever way the death left the flag.
        check(until(lambda: e.is_set() == (ev._peek() > 0)),
              lambda: "%s: is_set() is %r, the count %r" % (
                  where, e.is_set(), ev._peek()))
        e.set()
        check(until(e.is_set), lambda: "%s: set() then is_set() stays False "
                                       "(count %r)" % (where, ev._peek()))
        r, dt = timed(e.wait, 0.5)
        check(r is True and dt < SLACK, "%s: wait() on a set event gave %r "
                                        "after %.2f s" % (where, r, dt))
        e.clear()
        check(until(lambda: not e.is_set()),
              lambda: "%s: clear() then is_set() stays True (count %r)"
                      % (where, ev._peek()))

        # A thread blocked in wait() wakes when the flag is set.
        t, box = in_thread(e.wait, 5)
        time.sleep(0.01)
        t_set = time.monotonic()
        e.set()
        t.join(SLACK)
        check(box.get("result") is True and box["ended"] - t_set < SLACK,
              lambda: "%s: a thread in wait() missed set(): %r" % (where, box))
        e.clear()
        for pid in pids:
            if pid not in reaped:
                os.waitpid(pid, 0)
    print("rounds", ROUNDS)
'''


def test_event_survives_killed_setters(backend, run_py):
    """Issue 9 item 3: after a SIGKILLed setter, Event.is_set() never lies and wait() wakes."""
    code = child_code(_EVENT, ROUNDS=EVENT_ROUNDS, SEED=3)
    proc = run_py(code, backend=backend, timeout=40)
    assert "rounds %d" % EVENT_ROUNDS in proc.stdout


#: The stop test's child, shared with test_fault_close (CHECKS picks what
#: each round checks while the workers are stopped).
STOP = '''
    rng = random.Random(SEED)
    ev = efd.EventFD(1, semaphore=True, backend=BACKEND)

    def hammer():
        while True:
            ev.acquire()
            ev.release()

    pids = [fork_worker(hammer) for _ in range(2)]
    stats = {"blocked-then-closed": 0, "interrupted": 0}
    for rnd in range(ROUNDS):
        time.sleep(rng.uniform(0.001, 0.01))
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        for pid in pids:
            os.waitid(os.P_PID, pid, os.WSTOPPED | os.WNOWAIT)
        where = "round %d (workers stopped)" % rnd
        taken = 0

        if "timeouts" in CHECKS:
            got, dt = timed(ev.acquire, False)
            check(dt < SLACK, "%s: acquire(False) took %.2f s" % (where, dt))
            taken += got
            got, dt = timed(ev.acquire, timeout=0.2)
            check(dt < 0.2 + SLACK, "%s: acquire(timeout=0.2) took %.2f s"
                  % (where, dt))
            taken += got

        if "close" in CHECKS:
            # close() from another thread wakes a waiter, even one that is
            # waiting for the lock a stopped process holds.
            view = twin(ev)
            t, box = in_thread(view.acquire)
            time.sleep(0.05)
            closed = time.monotonic()
            view.close()
            t.join(SLACK)
            check(not t.is_alive(), "%s: close() did not wake the waiter "
                                    "within %.1f s" % (where, SLACK))
            if box.get("result") is True:
                taken += 1          # a unit was there: it did not block
            else:
                err = box.get("error")
                check(isinstance(err, ValueError) and "closed" in str(err),
                      "%s: the waiter got %r, not ValueError" % (where, box))
                check(box["ended"] - closed < SLACK, "%s: woke %.2f s after "
                      "close()" % (where, box["ended"] - closed))
                stats["blocked-then-closed"] += 1

        if "sigint" in CHECKS:
            # Ctrl-C interrupts a blocking acquire().
            fired = []
            def interrupt():
                fired.append(time.monotonic())
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            timer = threading.Timer(0.1, interrupt)
            timer.start()
            try:
                while True:
                    if ev.acquire():
                        taken += 1
                    check(taken < 10, "%s: acquire() keeps succeeding" % where)
            except KeyboardInterrupt:
                late = time.monotonic() - fired[0]
                check(late < SLACK, "%s: KeyboardInterrupt came %.2f s after "
                                    "SIGINT" % (where, late))
                stats["interrupted"] += 1
            timer.join()

        if taken:
            ev.release(taken)
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    print("rounds", ROUNDS, stats)
'''


def test_stopped_holder_does_not_freeze_others(backend, run_py):
    """Issue 9 item 2: SIGSTOPped workers never block the others' timeouts or Ctrl-C."""
    code = child_code(STOP, ROUNDS=STOP_ROUNDS, SEED=5,
                      CHECKS=("timeouts", "sigint"))
    proc = run_py(code, backend=backend, timeout=40)
    assert "rounds %d" % STOP_ROUNDS in proc.stdout


# clone(SIGCHLD) as a bare system call: a fork that runs no
# pthread_atfork handler, as a program that forks by syscall() does.
RAW_CLONE = {"x86_64": 56, "aarch64": 220}.get(platform.machine())


@pytest.mark.parametrize("memory_backend", ["pipe", "futex"])
@pytest.mark.parametrize("how", ["os.fork", "raw clone"])
def test_killed_inside_the_page_lock_and_left_a_zombie(memory_backend, run_py,
                                                        how):
    """A process SIGKILLed while it holds the page lock, and not reaped: the
    next operation of a live process takes the lock over at once (the
    kernel dropped the dead holder's beacon when it died, zombie or not),
    so a select() on fileno() sees the count again -- before the zombie
    is reaped.  (With thread numbers as the lock's word, tgkill() answers
    for a zombie's main thread, and readiness waited for the reaping.)

    The raw clone's child skips efd's fork handler, so it starts with its
    parent's beacon: it must notice at its first lock and make its own,
    or its death inside would leave a word naming the parent's live
    beacon, never taken over."""
    if how == "raw clone" and RAW_CLONE is None:
        pytest.skip("no clone system call number for " + platform.machine())
    out = run_py("""
        import ctypes, mmap, os, random, select, signal, struct, time, efd
        OWNER = 56              # struct efd_count, efd.h (layout 5)
        libc = ctypes.CDLL(None, use_errno=True)
        def fork():
            if %(raw)r is None:
                return os.fork()
            return libc.syscall(%(raw)r, signal.SIGCHLD, 0, 0, 0, 0)
        rng = random.Random(7)
        for attempt in range(300):
            sem = efd.Semaphore(0, backend=%(backend)r)
            fd = sem.fileno()
            sem.release()           # the parent's beacon exists now
            sem.acquire(False)
            page = mmap.mmap(sem.handle().fds[0], 0)
            pid = fork()
            if pid == 0:
                try:
                    while True:
                        sem.release()
                        sem.acquire(False)
                finally:
                    os._exit(0)
            time.sleep(rng.uniform(0.0005, 0.003))
            os.kill(pid, signal.SIGKILL)
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)   # a zombie
            if struct.unpack_from("<Q", page, OWNER)[0] == 0:
                os.waitpid(pid, 0)
                page.close()
                sem.close()
                continue                # it did not die inside: again
            while sem.acquire(False):
                pass
            sem.release()               # 0 -> 1: must put the token
            readable = bool(select.select([fd], [], [], 0.5)[0])
            assert readable, "the zombie still holds the lock"
            assert struct.unpack_from("<Q", page, OWNER)[0] == 0
            os.waitpid(pid, 0)
            print("caught at attempt", attempt)
            break
        else:
            print("never caught a death inside the lock")
    """ % {"backend": memory_backend,
           "raw": RAW_CLONE if how == "raw clone" else None})
    if "never caught" in out.stdout:
        pytest.skip("no death inside the lock in 300 tries")
    assert "caught at attempt" in out.stdout


@pytest.mark.parametrize("memory_backend", ["pipe", "futex"])
def test_a_raw_child_does_not_keep_a_dead_holder_alive(memory_backend, run_py):
    """A holder killed inside an object's lock, whose child -- made by a
    bare clone system call, so no fork handler closed its copies of the
    holder's beacons -- lives on, using efd for *another* object only: the
    child's first lock of anything closes every copy it inherited, so the
    dead holder's lock is taken over at once and select() on fileno()
    agrees with the count while the child still lives."""
    if RAW_CLONE is None:
        pytest.skip("no clone system call number for " + platform.machine())
    out = run_py("""
        import ctypes, mmap, os, random, select, signal, struct, time, efd
        OWNER = 56              # struct efd_count, efd.h (layout 5)
        libc = ctypes.PyDLL(None, use_errno=True)   # the GIL stays held
        def raw_fork():
            return libc.syscall(%(raw)r, signal.SIGCHLD, 0, 0, 0, 0)
        def word(page):
            return struct.unpack_from("<Q", page, OWNER)[0]
        rng = random.Random(5)
        other = efd.Semaphore(0, backend=%(backend)r)
        other.fileno()
        for attempt in range(300):
            sem = efd.Semaphore(0, backend=%(backend)r)
            fd = sem.fileno()
            page = mmap.mmap(sem.handle().fds[0], 0)
            r, w = os.pipe()
            holder = os.fork()
            if holder == 0:
                os.close(r)
                sem.release()           # the holder's beacon for `sem`
                sem.acquire(False)
                if raw_fork() == 0:     # uses `other` only, then lives on
                    for _ in range(100):
                        other.release()
                        other.acquire(False)
                    os.write(w, struct.pack("i", os.getpid()))   # done
                    time.sleep(60)
                    os._exit(0)
                while True:
                    sem.release()
                    sem.acquire(False)
            os.close(w)
            child = struct.unpack("i", os.read(r, 4))[0]    # its ops done
            os.close(r)
            time.sleep(rng.uniform(0.0005, 0.003))
            os.kill(holder, signal.SIGKILL)
            os.waitpid(holder, 0)
            if word(page) == 0:         # it did not die inside: again
                os.kill(child, signal.SIGKILL)
                page.close()
                sem.close()
                continue
            wrong = 0
            for _ in range(20):         # the child still lives
                while sem.acquire(False):
                    pass
                wrong += bool(select.select([fd], [], [], 0)[0])
                sem.release()
                wrong += not select.select([fd], [], [], 0.5)[0]
            os.kill(child, signal.SIGKILL)
            assert wrong == 0, "readiness wrong %%d times in 40" %% wrong
            print("caught at attempt", attempt)
            break
        else:
            print("never caught a death inside the lock")
    """ % {"backend": memory_backend, "raw": RAW_CLONE}, timeout=120)
    if "never caught" in out.stdout:
        pytest.skip("no death inside the lock in 300 tries")
    assert "caught at attempt" in out.stdout
