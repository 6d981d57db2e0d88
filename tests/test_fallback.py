"""The probe chain and the fallback backends, on a real kernel that refuses.

Issue 3 wants proof without mocks: each test here starts a fresh interpreter,
installs a seccomp filter in it (tests/_seccomp.py) and only then imports
efd, so the probe sees a kernel that

* ``no-semaphore``: fails ``eventfd2(..., EFD_SEMAPHORE)`` with ``EINVAL``
  (what 2.6.27 - 2.6.29 did): semaphore objects must fall back to
  ``eventfd-readback``, normal ones keep the native ``eventfd``;
* ``no-eventfd``: fails ``eventfd2``/``eventfd`` with ``ENOSYS``: every
  object must use ``pipe``, and readiness (select, asyncio), timeouts and
  child processes must all still work.

The pytest process itself is never filtered.  Each child's code is plain
asserts; a failure shows up as the child's traceback in the test report.
"""
import os
import textwrap

import pytest

from conftest import child_env, kernel_eventfd_available
from test_seccomp_harness import needs_seccomp
from test_seccomp_harness import run as run_filtered

pytestmark = needs_seccomp

#: The no-semaphore filter only makes sense where a kernel eventfd exists
#: (not in an EFD_NO_EVENTFD build, where the probe never calls eventfd2).
needs_kernel_eventfd = pytest.mark.skipif(
    not kernel_eventfd_available(), reason="no kernel eventfd here (or in this build)"
)

# Shared by the child programs: bounded helpers, so that a lost wakeup in a
# child fails with a traceback instead of running into the harness timeout.
_CHILD_HELPERS = '''
import errno, os, select, sys, threading, time
import efd

MAX = 2**64 - 2

def join_all(threads, timeout=30.0):
    end = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    alive = [t.name for t in threads if t.is_alive()]
    assert not alive, "threads still running (lost wakeup?): %r" % (alive,)

def drain(ev):
    """Take everything left, one acquire at a time; return how many."""
    n = 0
    while ev.acquire(blocking=False):
        n += 1
        assert n < 1000000, "drain does not end"
    return n

def contend(ev, consumers=4, producers=2, per_consumer=400):
    """Producers release in chunks of 1..4 while consumers acquire a fixed
    quota each with blocking, timed and non-blocking acquires; what is left
    must be exactly released - acquired."""
    import random
    quota = consumers * per_consumer
    extra = 37                       # released but never acquired
    target = quota + extra
    per_producer = [target // producers] * producers
    per_producer[0] += target - sum(per_producer)
    got = [0] * consumers
    errors = []

    def producer(i, total):
        rng = random.Random(i)
        try:
            while total:
                n = min(total, rng.randint(1, 4))
                ev.release(n)
                total -= n
                if rng.random() < 0.05:
                    time.sleep(0.001)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    def consumer(i):
        rng = random.Random(100 + i)
        end = time.monotonic() + 25
        try:
            while got[i] < per_consumer:
                assert time.monotonic() < end, "consumer %d starved" % i
                how = rng.randint(0, 2)
                if how == 0:
                    ok = ev.acquire()
                    assert ok is True
                elif how == 1:
                    ok = ev.acquire(timeout=0.05)
                else:
                    ok = ev.acquire(blocking=False)
                    if not ok:
                        time.sleep(0.0005)
                if ok:
                    got[i] += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=consumer, args=(i,), name="c%d" % i,
                                daemon=True) for i in range(consumers)]
    threads += [threading.Thread(target=producer, args=(i, per_producer[i]),
                                 name="p%d" % i, daemon=True)
                for i in range(producers)]
    for t in threads:
        t.start()
    join_all(threads)
    assert not errors, errors
    assert got == [per_consumer] * consumers, got
    left = ev._peek()
    assert left in (None, extra), left
    assert drain(ev) == extra
    assert ev._peek() in (None, 0)
'''


def _run(mode, code, timeout=120):
    """Run the helpers, then *code*, in a child filtered by *mode*; return
    its stdout.  The child imports this checkout's efd, with EFD_BACKEND
    unset: the probe must choose, not the CI matrix."""
    source = _CHILD_HELPERS + textwrap.dedent(code)
    return run_filtered(mode, source, timeout=timeout, env=child_env()).stdout


# --- (a) the kernel refuses EFD_SEMAPHORE: eventfd-readback ---------------------


@needs_kernel_eventfd
def test_no_semaphore_probe_reports_einval():
    out = _run("no-semaphore", """
        p = efd._efd._probe()
        assert p["eventfd2_errno"] == 0, p
        assert p["eventfd2_semaphore_errno"] == errno.EINVAL, p
        # The filter really is the kernel refusing: the backport passes it on.
        try:
            efd.eventfd(0, efd.EFD_SEMAPHORE | efd.EFD_CLOEXEC)
        except OSError as exc:
            assert exc.errno == errno.EINVAL, exc
        else:
            raise AssertionError("eventfd2(EFD_SEMAPHORE) was not refused")
        os.close(efd.eventfd(0))
        print("probe", p["eventfd2"], "|", p["eventfd2_semaphore"])
    """)
    assert "probe ok |" in out


@needs_kernel_eventfd
def test_no_semaphore_automatic_choice():
    _run("no-semaphore", """
        with efd.EventFD(semaphore=True) as ev:
            assert ev.backend == "eventfd-readback", ev.backend
            assert ev.semaphore is True
        with efd.EventFD() as ev:
            assert ev.backend == "eventfd", ev.backend
        for value in ("", "auto"):
            os.environ["EFD_BACKEND"] = value
            with efd.EventFD(semaphore=True) as ev:
                assert ev.backend == "eventfd-readback", (value, ev.backend)
        del os.environ["EFD_BACKEND"]
        # The readback descriptor is a plain kernel eventfd, never EFD_SEMAPHORE.
        with efd.EventFD(5, semaphore=True) as ev:
            with open("/proc/self/fdinfo/%d" % ev.fileno()) as f:
                info = f.read()
            assert "eventfd-count:" in info, info
            for line in info.splitlines():
                if line.startswith("eventfd-semaphore:"):
                    assert line.split()[1] == "0", info
    """)


@needs_kernel_eventfd
def test_no_semaphore_semantics():
    _run("no-semaphore", """
        ev = efd.EventFD(3, semaphore=True)
        assert ev.backend == "eventfd-readback"
        assert ev._peek() == 3
        assert [ev.acquire(blocking=False) for _ in range(4)] == [True] * 3 + [False]
        t0 = time.monotonic()
        assert ev.acquire(timeout=0.2) is False
        dt = time.monotonic() - t0
        assert 0.19 <= dt < 3.0, dt
        ev.release(2)
        assert ev.read() == 1
        assert ev._peek() == 1
        assert ev.read() == 1
        ev.write(5)
        assert [ev.read() for _ in range(5)] == [1] * 5
        assert ev._peek() == 0
        ev.close()

        # Non-blocking object: read() on an empty counter is BlockingIOError.
        with efd.EventFD(2, semaphore=True, nonblocking=True) as nb:
            assert nb.read() == 1 and nb.read() == 1
            try:
                nb.read()
            except BlockingIOError:
                pass
            else:
                raise AssertionError("read() of an empty counter did not fail")
            # A write that would pass the maximum is refused, nothing changes.
            nb.write(MAX - 1)
            try:
                nb.write(2)
            except BlockingIOError:
                pass
            else:
                raise AssertionError("write past the maximum did not fail")
            assert nb._peek() == MAX - 1
            assert nb.read() == 1
            assert nb._peek() == MAX - 2

        # Readiness follows the count through readbacks.
        with efd.EventFD(2, semaphore=True) as ev:
            fd = ev.fileno()
            assert select.select([fd], [], [], 0)[0] == [fd]
            assert ev.acquire(blocking=False)
            assert select.select([fd], [], [], 0)[0] == [fd]
            assert ev.acquire(blocking=False)
            assert select.select([fd], [], [], 0)[0] == []

        # A blocked acquire is woken by a release from another thread.
        with efd.EventFD(0, semaphore=True) as ev:
            timer = threading.Timer(0.1, ev.release, (2,))
            timer.start()
            t0 = time.monotonic()
            assert ev.acquire(timeout=20) is True
            assert time.monotonic() - t0 < 10
            timer.join(10)
            assert ev._peek() == 1

        # Normal mode forced onto the readback backend: a read takes all.
        with efd.EventFD(4, backend="eventfd-readback") as ev:
            assert ev.backend == "eventfd-readback" and not ev.semaphore
            ev.release(3)
            assert ev.read() == 7
            assert ev.acquire(blocking=False) is False
    """)


@needs_kernel_eventfd
def test_no_semaphore_from_fd_adopts_with_readback():
    _run("no-semaphore", """
        fd = efd.eventfd(3)
        ev = efd.EventFD.from_fd(fd, semaphore=True)
        assert ev.backend == "eventfd-readback", ev.backend
        assert [ev.acquire(blocking=False) for _ in range(4)] == [True] * 3 + [False]
        ev.close()
        fd = efd.eventfd(3)
        with efd.EventFD.from_fd(fd, semaphore=False) as ev:
            assert ev.backend == "eventfd"
            assert ev.read() == 3
    """)


@needs_kernel_eventfd
def test_no_semaphore_forcing_native_backend_is_an_error():
    _run("no-semaphore", """
        try:
            efd.EventFD(semaphore=True, backend="eventfd")
        except OSError as exc:
            assert exc.errno == errno.EINVAL, exc
            msg = str(exc)
            assert "eventfd" in msg and "SEMAPHORE" in msg, msg
        else:
            raise AssertionError("backend='eventfd' with semaphore=True was accepted")
        os.environ["EFD_BACKEND"] = "eventfd"
        try:
            efd.EventFD(semaphore=True)
        except OSError as exc:
            assert exc.errno == errno.EINVAL, exc
        else:
            raise AssertionError("EFD_BACKEND=eventfd with semaphore=True was accepted")
        # Without the semaphore flag the native backend is fine.
        with efd.EventFD(1) as ev:
            assert ev.backend == "eventfd"
        del os.environ["EFD_BACKEND"]
        with efd.EventFD(1, backend="eventfd") as ev:
            assert ev.read() == 1
        # The pipe backend can always be forced.
        with efd.EventFD(2, semaphore=True, backend="pipe") as ev:
            assert ev.backend == "pipe"
            assert ev.read() == 1
    """)


# --- (b) no eventfd at all: pipe -----------------------------------------------


def test_no_eventfd_probe_and_automatic_choice():
    out = _run("no-eventfd", """
        p = efd._efd._probe()
        assert p["eventfd2_errno"] == errno.ENOSYS, p
        assert p["eventfd2_semaphore_errno"] == errno.ENOSYS, p
        for sem in (False, True):
            with efd.EventFD(semaphore=sem) as ev:
                assert ev.backend == "pipe", (sem, ev.backend)
                assert ev.semaphore is sem
        try:
            efd.eventfd(0)
        except OSError as exc:
            assert exc.errno == errno.ENOSYS, exc
        else:
            raise AssertionError("eventfd2 was not refused")
        print("probe", p["eventfd2"])
    """)
    assert out.startswith("probe ") and "ok" not in out


def test_no_eventfd_forcing_kernel_backends_is_an_error():
    _run("no-eventfd", """
        for name in ("eventfd", "eventfd-readback"):
            for sem in (False, True):
                try:
                    efd.EventFD(semaphore=sem, backend=name)
                except OSError as exc:
                    assert exc.errno == errno.ENOSYS, exc
                    assert name in str(exc), exc
                else:
                    raise AssertionError("backend=%r was accepted" % name)
                os.environ["EFD_BACKEND"] = name
                try:
                    efd.EventFD(semaphore=sem)
                except OSError as exc:
                    assert exc.errno == errno.ENOSYS, exc
                else:
                    raise AssertionError("EFD_BACKEND=%r was accepted" % name)
                del os.environ["EFD_BACKEND"]
        try:
            efd.EventFD(backend="kernel")
        except ValueError:
            pass
        else:
            raise AssertionError("an unknown backend name was accepted")
    """)


def test_no_eventfd_semaphore_and_normal_mode():
    _run("no-eventfd", """
        ev = efd.EventFD(3, semaphore=True)
        assert ev.backend == "pipe"
        assert [ev.acquire(blocking=False) for _ in range(4)] == [True] * 3 + [False]
        ev.release(2)
        assert ev.read() == 1
        assert ev._peek() == 1
        assert ev.read() == 1
        ev.write(0)
        assert ev._peek() == 0
        ev.close()
        try:
            ev.acquire(blocking=False)
        except ValueError:
            pass
        else:
            raise AssertionError("a closed object still works")

        with efd.EventFD(0, nonblocking=True) as ev:
            assert ev.backend == "pipe" and not ev.semaphore
            ev.write(3)
            ev.release(4)
            assert ev.read() == 7
            try:
                ev.read()
            except BlockingIOError:
                pass
            else:
                raise AssertionError("read() of an empty counter did not fail")
            try:
                ev.write(2**64 - 1)
            except OSError as exc:
                assert exc.errno == errno.EINVAL, exc
            else:
                raise AssertionError("write(2**64 - 1) was accepted")
            ev.write(MAX)
            try:
                ev.write(1)
            except BlockingIOError:
                pass
            else:
                raise AssertionError("write past the maximum did not fail")
            try:
                ev.release(1)
            except ValueError:
                pass
            else:
                raise AssertionError("release past the maximum was accepted")
            assert ev.read() == MAX

        with efd.EventFD(MAX, semaphore=True) as ev:
            assert ev.acquire(blocking=False)
            assert ev._peek() == MAX - 1
    """)


def test_no_eventfd_timeouts_and_wakeups():
    _run("no-eventfd", """
        with efd.EventFD(0, semaphore=True) as ev:
            assert ev.backend == "pipe"
            t0 = time.monotonic()
            assert ev.acquire(timeout=0.2) is False
            dt = time.monotonic() - t0
            assert 0.19 <= dt < 3.0, dt
            assert ev.acquire(timeout=0) is False

            timer = threading.Timer(0.1, ev.release)
            timer.start()
            t0 = time.monotonic()
            assert ev.acquire(timeout=20) is True
            assert time.monotonic() - t0 < 10
            timer.join(10)
            assert ev.acquire(blocking=False) is False

            # A blocking read() in normal mode is woken as well.
        with efd.EventFD(0) as ev:
            timer = threading.Timer(0.1, ev.write, (6,))
            timer.start()
            assert ev.read() == 6
            timer.join(10)

            # close() from another thread wakes a blocked waiter.
        ev = efd.EventFD(0, semaphore=True)
        result = []
        def waiter():
            try:
                result.append(ev.acquire(timeout=20))
            except ValueError as exc:
                result.append(exc)
        t = threading.Thread(target=waiter, daemon=True)
        t.start()
        time.sleep(0.2)
        ev.close()
        join_all([t], 10)
        assert len(result) == 1 and isinstance(result[0], ValueError), result
    """)


def test_no_eventfd_select_readiness():
    _run("no-eventfd", """
        with efd.EventFD(0, semaphore=True) as ev:
            fd = ev.fileno()
            assert select.select([fd], [], [], 0)[0] == []
            ev.release(2)
            assert select.select([fd], [], [], 5)[0] == [fd]
            assert ev.acquire(blocking=False)
            assert select.select([fd], [], [], 0)[0] == [fd]
            assert ev.acquire(blocking=False)
            assert select.select([fd], [], [], 0)[0] == []
            # A release from another thread wakes a select() in progress.
            timer = threading.Timer(0.1, ev.release)
            timer.start()
            t0 = time.monotonic()
            assert select.select([fd], [], [], 20)[0] == [fd]
            assert time.monotonic() - t0 < 10
            timer.join(10)
            p = select.poll()
            p.register(fd, select.POLLIN)
            assert p.poll(0) == [(fd, select.POLLIN)]
            assert ev.acquire(blocking=False)
            assert p.poll(0) == []
        with efd.EventFD(0) as ev:
            ev.write(5)
            assert select.select([ev.fileno()], [], [], 0)[0] == [ev.fileno()]
            assert ev.read() == 5
            assert select.select([ev.fileno()], [], [], 0)[0] == []
    """)


def test_no_eventfd_asyncio_readiness():
    _run("no-eventfd", """
        import asyncio

        async def main():
            loop = asyncio.get_running_loop()
            ev = efd.EventFD(0, semaphore=True)
            assert ev.backend == "pipe"
            got = []
            done = loop.create_future()

            def on_readable():
                while ev.acquire(blocking=False):
                    got.append(1)
                if len(got) >= 3 and not done.done():
                    done.set_result(len(got))

            loop.add_reader(ev.fileno(), on_readable)
            try:
                loop.call_later(0.05, ev.release, 2)
                loop.call_later(0.15, ev.release, 1)
                # and one from a thread, which the loop sees only via the fd
                threading.Timer(0.1, ev.release, (1,)).start()
                n = await asyncio.wait_for(done, 20)
                await asyncio.sleep(0.1)
                on_readable()
                assert len(got) == 4, got
            finally:
                loop.remove_reader(ev.fileno())
            if hasattr(ev, "acquire_async"):
                loop.call_later(0.05, ev.release)
                assert await asyncio.wait_for(ev.acquire_async(timeout=20), 30) is True
                assert await ev.acquire_async(timeout=0.05) is False
            ev.close()

        asyncio.run(main())
    """)


@pytest.mark.parametrize("mode, expected", [
    pytest.param("no-semaphore", "eventfd-readback", marks=needs_kernel_eventfd),
    ("no-eventfd", "pipe"),
])
def test_threads_conserve_units(mode, expected):
    _run(mode, """
        with efd.EventFD(0, semaphore=True) as ev:
            assert ev.backend == %r, ev.backend
            contend(ev)
    """ % (expected,))


def test_no_eventfd_multiprocessing_children():
    _run("no-eventfd", """
        import multiprocessing as mp

        for method in ("spawn", "fork", "forkserver"):
            ctx = mp.get_context(method)
            ev = efd.EventFD(0, semaphore=True)
            assert ev.backend == "pipe"
            # The child releases: what it adds is seen here.
            p = ctx.Process(target=ev.release, args=(5,))
            p.start()
            p.join(60)
            assert p.exitcode == 0, (method, p.exitcode)
            assert [ev.acquire(blocking=False) for _ in range(6)] == [True] * 5 + [False]
            # The child blocks until this process releases: a cross-process
            # wakeup.  Had its acquire timed out instead, a unit would be left.
            p = ctx.Process(target=ev.acquire, args=(True, 30))
            p.start()
            time.sleep(0.3)
            ev.release()
            p.join(60)
            assert p.exitcode == 0, (method, p.exitcode)
            assert ev._peek() == 0 and not ev.acquire(blocking=False), method
            ev.close()
            print(method, "ok")
    """, timeout=240)


def test_no_eventfd_python_m_efd_reports_pipe():
    import efd

    main = os.path.join(os.path.dirname(efd.__file__), "__main__.py")
    if not os.path.exists(main):
        pytest.skip("efd/__main__.py does not exist yet")
    out = _run("no-eventfd", """
        import subprocess
        # seccomp filters survive execve: the grandchild is refused too.
        proc = subprocess.run([sys.executable, "-m", "efd"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, universal_newlines=True,
                              timeout=120)
        sys.stdout.write(proc.stdout)
        assert proc.returncode == 0, proc.returncode
    """, timeout=180)
    assert "pipe" in out, out
    normal = [l for l in out.splitlines() if l.strip().startswith("normal mode")]
    semaphore = [l for l in out.splitlines() if l.strip().startswith("semaphore mode")]
    assert normal and "pipe" in normal[0], out
    assert semaphore and "pipe" in semaphore[0], out


# --- (d) no epoll: every waiter polls, as before one wake-up per unit -------


def test_no_epoll_falls_back_to_polling_and_says_so():
    # Without epoll there is no shared instance for a process's readers: each
    # polls the readiness descriptor, so a release wakes every one of them
    # (today's behaviour, issue 13), python -m efd says so, and nothing else
    # changes: every unit is taken, close() wakes the rest.  The futex
    # backend (and the pipe backend, where futexes are) sleeps on its futex
    # words and still wakes one.  The kernel puts a
    # poller that finds nothing back to sleep before poll() returns, so the
    # herd shows in the waiters' context switches, not in efd's own count.
    out = _run("no-epoll", """
        import subprocess, threading, time
        import efd, efd._efd as _efd
        assert _efd._probe()["wake_one"] == "poll", _efd._probe()
        proc = subprocess.run([sys.executable, "-m", "efd"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, universal_newlines=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stdout
        line = [l for l in proc.stdout.splitlines() if "one wake-up per release" in l]
        assert line and "no (no epoll)" in line[0], proc.stdout

        def switches(tid):
            with open("/proc/self/task/%d/status" % tid) as f:
                for l in f:
                    if l.startswith("voluntary_ctxt_switches"):
                        return int(l.split()[1])

        N, K = 8, 4
        for backend in ("eventfd", "eventfd-readback", "pipe", "futex"):
            try:
                ev = efd.EventFD(0, semaphore=True, backend=backend)
            except OSError as exc:          # a build without <sys/eventfd.h>
                print(backend, "not here:", exc)
                continue
            assert not ev._wake_one, backend
            futex_sleep = ev._futex_sleep   # futex; pipe where futexes are
            got, errors, tids = [], [], {}
            def waiter():
                tids[threading.current_thread()] = threading.get_native_id()
                try:
                    if ev.acquire(timeout=30):
                        got.append(threading.current_thread())
                except ValueError:
                    errors.append("closed")
            threads = [threading.Thread(target=waiter) for _ in range(N)]
            for t in threads:
                t.start()
            time.sleep(0.3)                 # every waiter asleep
            before = {t: switches(tids[t]) for t in threads}
            started = time.monotonic()
            deadline = started + 30
            for i in range(K):
                ev.release()
                while len(got) < i + 1 and time.monotonic() < deadline:
                    time.sleep(0.005)
                time.sleep(0.1)         # the others asleep again (a busy CI)
            stayed = [t for t in threads if t not in got]
            herd = sum(switches(tids[t]) - before[t] for t in stayed)
            rechecks = int((time.monotonic() - started) / 0.1) + 3   # each
            ev.close()
            for t in threads:
                t.join(30)
            assert not any(t.is_alive() for t in threads), backend
            assert len(got) == K and len(errors) == N - K, (backend, got, errors)
            if futex_sleep:
                assert herd <= 2 * K + len(stayed) * rechecks, (backend, herd)
            else:
                assert herd >= K * len(stayed) // 2, (backend, herd)
            print(backend, "switches of the waiters left", herd, "for", K,
                  "releases", "(futex words)" if futex_sleep else "(poll)")
    """, timeout=240)
    assert "pipe switches" in out, out


# --- (e) no memfd: pages from shm_open, which cannot be sealed --------------


def test_no_memfd_pages_travel_by_handle():
    # Where memfd_create is refused, the memory backends' pages come from
    # shm_open and cannot be sealed against shrinking.  A process there
    # cannot make sealed pages either, so it takes such a page from a peer
    # (an exec'd program given the handle); a process that can make sealed
    # pages refuses it (test_handles.py's unsealable-page case).
    out = _run("no-memfd", """
        import fcntl, subprocess
        probe = efd._efd._probe()
        assert probe["sealed_pages"] is False, probe
        for backend in ("pipe", "futex"):
            sem = efd.Semaphore(2, backend=backend)
            page = sem.handle().fds[0]
            F_GET_SEALS, F_SEAL_SEAL = 1034, 1
            assert fcntl.fcntl(page, F_GET_SEALS) == F_SEAL_SEAL, backend
            h = sem.handle()
            code = ("import os, efd\\n"
                    "s = efd.from_handle(os.environ['H'])\\n"
                    "assert s.acquire(timeout=30)\\n"
                    "s.release(3)\\n"
                    "print(s.backend)\\n")
            proc = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, H=str(h)),
                                  pass_fds=h.fds, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, universal_newlines=True,
                                  timeout=120)
            assert proc.returncode == 0, proc.stdout
            assert proc.stdout.strip() == backend, proc.stdout
            assert sem.value == 4, (backend, sem.value)
            sem.close()
            print(backend, "ok")
    """, timeout=240)
    assert "pipe ok" in out and "futex ok" in out, out
