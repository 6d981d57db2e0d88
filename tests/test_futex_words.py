"""The futex backend's sleeper bookkeeping with processes that die
(issue 17, rows 4 and 5).

Readers (``acquire``) and watchers (``Event.wait`` and other readiness
waits, which consume nothing) sleep on two different futex words, each with
its own count of sleepers.  A watcher killed in its sleep leaves its count
behind; the first release whose wake-up finds no watcher asleep forgets it,
and from then on a release wakes one reader per unit again -- not every
reader, as when both kinds shared one word (a live reader woken with the
dead watcher's wake-all kept the dead count alive, so every later release
woke everyone).

The interleavings of these protocols (a wake-up going to the wrong kind of
sleeper, a live sleeper dropped from the count) are checked schedule by
schedule by the interleaving explorer (tests/test_explore.py); this file
checks the same bookkeeping with real processes and real deaths.  Every
scenario runs in a child interpreter behind a watchdog; nothing is timed.
"""

import pytest

from conftest import backend_unavailable

#: Reader threads that stay asleep, and single releases measured.
READERS = 8
RELEASES = 6

_DEAD_WATCHER = '''
    import os, signal, sys, threading, time
    import efd

    LIMIT = 60.0
    PROMPT = 10.0

    def check(cond, what):
        if not cond:
            print("FAIL:", what() if callable(what) else what)
            sys.stdout.flush()
            os._exit(1)

    def until(pred, limit):
        end = time.monotonic() + limit
        while time.monotonic() < end:
            if pred():
                return True
            time.sleep(0.005)
        return pred()

    def wchan(pid, tid):
        try:
            with open("/proc/%d/task/%d/wchan" % (pid, tid)) as f:
                return f.read()
        except OSError:
            return ""

    def asleep(pid, tid):
        return "futex" in wchan(pid, tid)

    ev = efd.EventFD(0, semaphore=True, backend="futex")

    # A watcher in another process, killed in its futex sleep.
    pid = os.fork()
    if pid == 0:
        ev._wait_readable(LIMIT)
        os._exit(0)
    check(until(lambda: asleep(pid, pid), PROMPT), "the watcher did not sleep")
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)

    got, tids = [], {}

    def reader(i):
        tids[i] = threading.get_native_id()
        got.append((i, ev.acquire(timeout=LIMIT)))

    threads = [threading.Thread(target=reader, args=(i,), daemon=True)
               for i in range(N)]
    for t in threads:
        t.start()
    me = os.getpid()
    check(until(lambda: len(tids) == N
                and all(asleep(me, tids[i]) for i in range(N)), PROMPT),
          "the readers did not all sleep")
    w0 = ev._wakeups()
    for k in range(K):
        ev.release(1)
        check(until(lambda: len(got) > k, PROMPT),
              "release %d: no reader took the unit" % (k + 1))
        left = [tids[i] for i in range(N) if i not in dict(got)]
        check(until(lambda: all(asleep(me, t) for t in left), PROMPT),
              "the readers left did not sleep again")
    w1 = ev._wakeups()
    woken = w1[0] - w0[0]
    ev.release(N - K)
    for t in threads:
        t.join(PROMPT)
    check(len(got) == N and all(ok for _, ok in got), lambda: repr(got))
    check(ev._peek() == 0, lambda: "left: %r" % ev._peek())
    # One wake-up per unit, and perhaps one passed on; a herd is N - k for
    # the k-th release (here 8+7+6+5+4+3 = 33).
    check(woken <= 2 * K, "a dead watcher made releases wake every reader: "
          "%d wake-ups for %d single releases to %d readers" % (woken, K, N))
    print("ok", woken, "wake-ups for", K, "releases")
'''


def test_dead_watcher_does_not_make_releases_wake_every_reader(run_py):
    """A watcher killed in its sleep costs at most one wake-up: afterwards,
    each single release wakes one of the sleeping readers, not all."""
    why = backend_unavailable("futex")
    if why:
        pytest.skip(why)
    code = "    N = %d\n    K = %d\n" % (READERS, RELEASES) + _DEAD_WATCHER
    proc = run_py(code, timeout=90)
    print(proc.stdout)
    assert "ok" in proc.stdout
