"""Helpers for the fault tests (issue 9): code shared by the child programs,
and seccomp filters beyond the two modes of ``_seccomp.py``.

Every fault test runs its scenario in a child interpreter behind conftest's
faulthandler watchdog, so that a hang -- even one with the GIL held -- ends
as a failure with every thread's traceback.  The child programs start with
:data:`CHILD_PRELUDE` (imports, bounded helpers) and can import this module
(the prelude puts ``tests/`` on ``sys.path``) to install a filter.

Filters (``install(...)``, irreversible: only ever in a child process):

* ``eventfd_errno=E``: ``eventfd2`` (and the legacy ``eventfd``) fail with
  errno ``E`` -- a sandbox that refuses eventfd with that errno;
* ``semaphore_errno=E``: only ``eventfd2`` with ``EFD_SEMAPHORE`` in its
  flags fails with ``E``;
* ``eventfd_kill=True``: any ``eventfd2``/``eventfd`` call kills the
  process (``SECCOMP_RET_KILL_PROCESS``), to prove a call is never made;
* ``write_fd=N``: ``write(N, ...)`` fails with ``EAGAIN`` -- a counter that
  stays full for this one descriptor (duplicates of it can still write).
"""

import errno
import os
import sys
import textwrap

import _seccomp as sc

TESTS = os.path.dirname(os.path.abspath(__file__))

SECCOMP_RET_KILL_PROCESS = 0x80000000

#: ``write`` syscall numbers (the ``_seccomp`` table has only eventfd's).
_WRITE_NR = {"x86_64": 1, "aarch64": 64}

#: Bounded re-check interval of SPEC §5 (0.1 s) plus generous slack for a
#: small shared machine: how long a survivor may take to see a wake-up.
#: EFD_FAULT_SLACK scales it for slow runs (valgrind, sanitizers).
SLACK = 1.0 * float(os.environ.get("EFD_FAULT_SLACK", "1"))


def supported():
    """(True, "") if the filters can be installed here, else (False, why)."""
    return sc.supported()


def _machine():
    import platform
    m = platform.machine().lower()
    return sc._ARCH_ALIASES.get(m, m)


def build(eventfd_errno=None, semaphore_errno=None, eventfd_kill=False,
          write_fd=None):
    """The BPF program for the filters asked for, as (code, jt, jf, k)."""
    info = sc._arch_info()
    ld = sc.BPF_LD | sc.BPF_W | sc.BPF_ABS
    jeq = sc.BPF_JMP | sc.BPF_JEQ | sc.BPF_K
    jset = sc.BPF_JMP | sc.BPF_JSET | sc.BPF_K
    ret = sc.BPF_RET | sc.BPF_K
    # Instructions with symbolic jump targets, resolved at the end.
    prog = [(ld, None, None, sc._OFF_ARCH),
            (jeq, None, "allow", info["audit"]),
            (ld, None, None, sc._OFF_NR)]
    nrs = [info["eventfd2"]] + ([info["eventfd"]] if info["eventfd"] else [])
    if write_fd is not None:
        prog += [(jeq, None, "not_write", _WRITE_NR[_machine()]),
                 (ld, None, None, sc._off_arg_low32(0)),
                 (jeq, "eagain", "allow", write_fd),
                 ("label", "not_write")]
    if eventfd_kill:
        for nr in nrs:
            prog.append((jeq, "kill", None, nr))
    elif eventfd_errno is not None:
        for nr in nrs:
            prog.append((jeq, "ev_errno", None, nr))
    elif semaphore_errno is not None:
        prog += [(jeq, None, "allow", info["eventfd2"]),
                 (ld, None, None, sc._off_arg_low32(1)),
                 (jset, "sem_errno", "allow", sc.EFD_SEMAPHORE)]
    prog.append(("label", "allow"))
    prog.append((ret, None, None, sc.SECCOMP_RET_ALLOW))
    prog.append(("label", "kill"))
    prog.append((ret, None, None, SECCOMP_RET_KILL_PROCESS))
    for name, err in (("ev_errno", eventfd_errno), ("sem_errno", semaphore_errno),
                      ("eagain", errno.EAGAIN)):
        prog.append(("label", name))
        prog.append((ret, None, None,
                     sc.SECCOMP_RET_ERRNO | ((err or 0) & sc.SECCOMP_RET_DATA)))
    labels, out = {}, []
    for insn in prog:
        if insn[0] == "label":
            labels[insn[1]] = len(out)
        else:
            out.append(insn)
    resolved = []
    for i, (code, jt, jf, k) in enumerate(out):
        def rel(target):
            return 0 if target is None else labels[target] - i - 1
        resolved.append((code, rel(jt), rel(jf), k))
    return resolved


def install(**filters):
    """Install the filter in this process (and the threads it starts
    later).  Exits with ``_seccomp.SKIP_EXIT_CODE`` where seccomp cannot
    work, so the test skips."""
    try:
        insns = build(**filters)
    except (sc.UnsupportedError, KeyError) as exc:
        sys.stderr.write("seccomp unsupported: %s\n" % (exc,))
        sys.exit(sc.SKIP_EXIT_CODE)
    arr = (sc._SockFilter * len(insns))(
        *[sc._SockFilter(c, jt, jf, k) for c, jt, jf, k in insns])
    prog = sc._SockFprog(len(insns), sc.ctypes.cast(
        arr, sc.ctypes.POINTER(sc._SockFilter)))
    sc.set_no_new_privs()
    sc._prctl(sc.PR_SET_SECCOMP, sc.SECCOMP_MODE_FILTER,
              sc.ctypes.addressof(prog))


def expect_ok(proc):
    """Check a child run with ``run_py(..., check=False)``: it must exit 0
    having printed "ok"; exit status 77 (no seccomp here) skips the test."""
    import pytest
    if proc.returncode == sc.SKIP_EXIT_CODE:
        pytest.skip(proc.stderr.strip())
    assert proc.returncode == 0 and "ok" in proc.stdout, (
        "child exited with %d\n--- stdout\n%s\n--- stderr\n%s"
        % (proc.returncode, proc.stdout, proc.stderr))


def run_parallel(popen_py, jobs, limit=60):
    """Run child programs side by side (they mostly sleep, fork and wait):
    `jobs` maps a name to (code, backend).  Fails the test with the output
    of every child that did not exit 0; returns {name: stdout}."""
    import pytest
    import subprocess
    procs = {name: popen_py(code, backend=backend, limit=limit)
             for name, (code, backend) in jobs.items()}
    results, failed = {}, []
    for name, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=limit + 10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        results[name] = out
        if proc.returncode != 0:
            failed.append("%s: exited with %s\n--- stdout\n%s\n--- stderr\n%s"
                          % (name, proc.returncode, out, err))
    if failed:
        pytest.fail("\n".join(failed))
    return results


#: The start of every child program: imports and bounded helpers.
CHILD_PRELUDE = textwrap.dedent('''
    import asyncio, ctypes, errno, os, random, select, signal, sys
    import threading, time
    sys.path.insert(0, %(tests)r)
    import efd

    SLACK = %(slack)r
    MAX = 2**64 - 2
    BACKEND = os.environ.get("EFD_BACKEND") or None

    def fail(msg):
        """Report and end the child at once (threads may be stuck)."""
        sys.stdout.flush()
        sys.stderr.write("FAULT: %%s\\n" %% (msg,))
        sys.stderr.flush()
        os._exit(3)

    def check(cond, msg):
        if not cond:
            fail(msg() if callable(msg) else msg)

    def readable(fd):
        return bool(select.select([fd], [], [], 0)[0])

    def until(pred, limit=SLACK, step=0.002):
        """Poll pred() until it is true or `limit` seconds pass."""
        end = time.monotonic() + limit
        while True:
            if pred():
                return True
            if time.monotonic() >= end:
                return False
            time.sleep(step)

    def timed(fn, *args, **kwargs):
        t0 = time.monotonic()
        result = fn(*args, **kwargs)
        return result, time.monotonic() - t0

    def twin(ev, nonblocking=True):
        """A second object over the same counter (duplicated descriptors)."""
        fds = tuple(os.dup(fd) for fd in ev._fds())
        return efd.EventFD._from_fds(fds, ev.backend, ev.semaphore, nonblocking)

    def in_thread(fn, *args):
        """Run fn in a daemon thread; box gets result/error and 'ended'."""
        box = {}
        def run():
            try:
                box["result"] = fn(*args)
            except BaseException as exc:
                box["error"] = exc
            box["ended"] = time.monotonic()
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t, box

    class Heartbeat:
        """A thread noting the longest gap between its own iterations: a
        call that keeps the GIL (or freezes the process) shows as a gap."""
        def __init__(self):
            self.reset()
            threading.Thread(target=self._beat, daemon=True).start()
            until(lambda: self.beats > 0)
        def reset(self):
            self.last, self.gap, self.beats = time.monotonic(), 0.0, 0
        def _beat(self):
            while True:
                now = time.monotonic()
                self.gap = max(self.gap, now - self.last)
                self.last = now
                self.beats += 1

    def others_run(what, fn, *args, **kwargs):
        """timed(fn, ...), checking that other threads kept running."""
        HEART.reset()
        result, dt = timed(fn, *args, **kwargs)
        check(HEART.gap < 0.2, "%%s: other threads stopped for %%.2f s (the "
                               "GIL held?)" %% (what, HEART.gap))
        return result, dt

    _libc = ctypes.CDLL(None, use_errno=True)

    def fork_worker(body):
        """Fork a process running body() for ever (it dies with us); return
        its pid once it has started."""
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                _libc.prctl(1, signal.SIGKILL)        # PR_SET_PDEATHSIG
                os.close(r)
                os.write(w, b"r")
                body()
            finally:
                os._exit(0)
        os.close(w)
        ok = select.select([r], [], [], 10)[0]
        os.close(r)
        check(ok, "worker %%d did not start" %% pid)
        return pid
''') % {"tests": TESTS, "slack": SLACK}


def child_code(code, filters=None, **params):
    """CHILD_PRELUDE, the given constants, then the dedented code.  With
    `filters` (keyword arguments of :func:`install`), the child installs
    that seccomp filter first, before it imports efd."""
    head = ""
    if filters:
        head = ("import sys\nsys.path.insert(0, %r)\nimport _faults\n"
                "_faults.install(**%r)\n" % (TESTS, filters))
    consts = "".join("%s = %r\n" % kv for kv in sorted(params.items()))
    return head + CHILD_PRELUDE + consts + textwrap.dedent(code)
