"""efd benchmarks: one command, every alternative, medians and ratios.

    python benchmarks/run.py                 # full run, a few minutes
    python benchmarks/run.py --quick         # CI-sized, under a minute
    python benchmarks/run.py --cases pair,fail --out /tmp/bench

Writes OUT/results.md (tables), OUT/results.png (plot), OUT/results.json
(every sample, as a pyperf BenchmarkSuite) and prints the performance
targets of issues 2, 3, 4, 12 and 13 as PASS/FAIL lines.  See benchmarks/README.md.
"""
import argparse
import datetime
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import efd                                          # noqa: E402

import bench_cases                                  # noqa: E402
from bench_harness import fmt_time, run_case, stderr, to_pyperf_suite   # noqa: E402
import bench_report                                 # noqa: E402


class Config:
    def __init__(self, quick):
        self.quick = quick
        self.rounds = 5 if quick else 11
        self.target = 0.008 if quick else 0.04      # seconds per sample
        self.max_n = 200000 if quick else 2000000
        self.n_waiters = 1000
        self.handoff_tasks = 10
        self.handoff_acquisitions = 10000
        self.producers = 2
        self.consumers = 2
        self.mpmc_units = 4000 if quick else 40000
        self.syscall_n = 10000
        # issue 13: the hand-off curve (waiters per point, seconds per
        # sample, most hand-offs in one sample)
        self.handoff_ns = (1, 16, 64) if quick else (1, 4, 16, 64, 256, 1000)
        self.handoff_target = 0.01 if quick else 0.03
        # issue 19: how long a waiter sits idle per sample
        self.idle_seconds = 0.5 if quick else 1.0
        # issue 19: idle waiters in the crowd
        self.crowd = 100 if quick else 1000
        self.handoff_max = 2000
        self.floor = None
        self.floor_error = None


def build_floor(cfg, tmpdir):
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        cfg.floor_error = "no C compiler (cc) on PATH"
        return
    exe = os.path.join(tmpdir, "floor")
    proc = subprocess.run([cc, "-O2", "-pthread", "-o", exe,
                           os.path.join(HERE, "floor.c")],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True)
    if proc.returncode != 0:
        cfg.floor_error = "floor.c did not build: " + proc.stdout.strip()[:200]
        stderr("! " + cfg.floor_error)
        return
    cfg.floor = exe


# ---- issue 3: an uncontended pipe acquire makes no syscall -----------------

SYSCALL_CHILD = r"""
import os, sys, efd
backend, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if backend == "efd.Semaphore":           # the drop-in, counter 0 -> 1 -> 0
    ev = efd.Semaphore(1 if mode == "with" else 0)
    acq, rel, r = ev.acquire, ev.release, range(n)
else:
    ev = efd.EventFD(n + 1, semaphore=True, backend=backend)
    acq, rel, r = ev.acquire, ev.release, range(n)
def mark(tag):
    try:
        os.write(-1, tag)       # shows up in strace as write(-1, "TAG", ..)
    except OSError:
        pass
if mode == "with":           # the holder slot is claimed on first use
    with ev:
        pass
elif mode == "undo":
    acq(undo=True)
    rel()
mark(b"EFD-BENCH-BEGIN")
if mode == "acquire":
    for _ in r:
        acq()
elif mode == "cross":
    for _ in r:
        rel()
        acq()
elif mode == "with":                     # a held block (the books)
    for _ in r:
        with ev:
            pass
elif mode == "undo":
    for _ in r:
        acq(undo=True)
        rel()
else:
    for _ in r:
        acq()
        rel()
mark(b"EFD-BENCH-END")
if backend == "efd.Semaphore":
    assert ev._ev._peek() == (mode == "with"), ev._ev._peek()
else:
    assert ev._peek() in (1, n + 1), ev._peek()
ev.close()
"""


def count_syscalls(backend, n, mode):
    """Run N acquires (or acquire+release pairs) on a counter that stays
    above zero in a child under strace; return (count, {name: count}) of
    the syscalls between the two markers, or raise RuntimeError."""
    strace = shutil.which("strace")
    if strace is None:
        raise RuntimeError("strace not installed")
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "trace")
        proc = subprocess.run(
            [strace, "-f", "-qq", "-o", log, sys.executable, "-c",
             SYSCALL_CHILD, backend, str(n), mode],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            universal_newlines=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError("strace child failed: " + proc.stderr.strip()[-300:])
        with open(log) as f:
            lines = f.read().splitlines()
    inside, names = False, {}
    for line in lines:
        if "EFD-BENCH-BEGIN" in line:
            inside = True
            continue
        if "EFD-BENCH-END" in line:
            break
        if not inside:
            continue
        m = re.match(r"^(?:\d+\s+)?([a-z_0-9]+)\(", line)
        if m:                        # not "--- SIG..." or "<... resumed>"
            names[m.group(1)] = names.get(m.group(1), 0) + 1
    else:
        raise RuntimeError("markers not found in the strace output")
    return sum(names.values()), names


def syscall_checks(cfg):
    rows = []
    runs = [(b, m) for b in bench_cases.BACKENDS for m in ("acquire", "pair")]
    runs.append(("efd.Semaphore", "cross"))
    runs.append(("efd.Semaphore", "with"))
    runs.append(("futex", "undo"))
    for backend, mode in runs:
        try:
            total, names = count_syscalls(backend, cfg.syscall_n, mode)
            rows.append((backend, mode, total, names, None))
        except Exception as exc:            # reported, not fatal
            rows.append((backend, mode, None, {}, str(exc)))
    return rows


# ---- the targets of issues 2, 3, 4, 12 and 13 --------------------------------------

class Check:
    def __init__(self, issue, what, value, op, limit, skip=None, shown=None):
        self.issue, self.what, self.value = issue, what, value
        self.op, self.limit, self.skip = op, limit, skip
        self.shown = shown

    @property
    def verdict(self):
        if self.skip or self.value is None:
            return "SKIP"
        ok = {"<=": self.value <= self.limit, ">=": self.value >= self.limit,
              "<": self.value < self.limit, "==": self.value == self.limit}[self.op]
        return "PASS" if ok else "FAIL"

    def line(self):
        v = self.verdict
        if v == "SKIP":
            return "SKIP  issue %s: %s (%s)" % (self.issue, self.what,
                                                self.skip or "not measured")
        return "%s  issue %s: %s = %s (target %s %s)" % (
            v, self.issue, self.what, self.shown or ("%.2f" % self.value),
            self.op, self.limit)


def _ratio_check(cases, issue, key, a, b, op, limit, what):
    case = cases.get(key)
    if case is None:
        return Check(issue, what, None, op, limit, skip="case %s not run" % key)
    im_a, im_b = case.impl(a), case.impl(b)
    for im in (im_a, im_b):
        if not im.ok or not im.samples:
            return Check(issue, what, None, op, limit,
                         skip="%s %s" % (im.name, im.status() or "has no samples"))
    r, lo, hi = case.ratio(a, b)
    return Check(issue, what, r, op, limit,
                 shown="%.2f (IQR of per-round ratios %.2f-%.2f)" % (r, lo, hi))


def _syscall_check(syscalls, issue, backend, mode, what):
    # Zero syscalls counted for (backend, mode), from syscall_checks().
    row = [r for r in syscalls if r[0] == backend and r[1] == mode]
    if not row:
        return Check(issue, what % 0, None, "==", 0,
                     skip="syscall count not run")
    b, mode, total, names, err, n = row[0]
    return Check(issue, what % n, total, "==", 0, skip=err,
                 shown=None if total is None else str(total))


def _curve_check(cases, what, a, b, limit):
    """Issue 13: the median hand-off time of point `a` over point `b`, each
    (alternative, kind, N) of the handoff-curve case, against `limit`."""
    case = cases.get("handoff-curve")
    if case is None:
        return Check(13, what, None, "<=", limit, skip="case handoff-curve not run")
    ims = [case.point(*a), case.point(*b)]
    for p, im in zip((a, b), ims):
        if im is None:
            return Check(13, what, None, "<=", limit,
                         skip="N=%d not in this run's curve" % p[2])
        if not im.ok or not im.samples:
            return Check(13, what, None, "<=", limit,
                         skip="%s %s" % (im.name, im.status() or "has no samples"))
    r = ims[0].median() / ims[1].median()
    return Check(13, what, r, "<=", limit, shown="%.2f (%s / %s)" % (
        r, fmt_time(ims[0].median()), fmt_time(ims[1].median())))


def handoff_checks(cases):
    out = []
    mp = ("multiprocessing.Semaphore", "process", 64)
    for b in bench_cases.BACKENDS:
        ev = "efd EventFD [%s]" % b
        out.append(_curve_check(cases, "hand-off to 1 of 64 blocked threads / "
                                "to 1 of 1, %s" % ev,
                                (ev, "thread", 64), (ev, "thread", 1), 1.5))
        out.append(_curve_check(cases, "hand-off to 1 of 64 blocked threads, "
                                "%s / threading.Semaphore" % ev, (ev, "thread", 64),
                                ("threading.Semaphore", "thread", 64), 1.0))
        out.append(_curve_check(cases, "hand-off to 1 of 64 blocked processes, "
                                "%s / multiprocessing (goal 1.0)" % ev,
                                (ev, "process", 64), mp, 1.5))
        out.append(_curve_check(cases, "hand-off to 1 of 64 processes in "
                                "acquire_async(), %s / multiprocessing with 64 "
                                "blocked processes (goal 1.0)" % ev,
                                (ev, "async", 64), mp, 1.5))
    return out


def checks(cases, syscalls):
    out = []
    ev, os_nb, os_bl = ("efd EventFD [eventfd]", "os.eventfd, EFD_NONBLOCK fd",
                        "os.eventfd, blocking fd")
    out.append(_ratio_check(cases, 2, "pair", ev, os_nb, "<=", 1.00,
                            "release+acquire, efd / os.eventfd (O_NONBLOCK fd, like efd's)"))
    out.append(_ratio_check(cases, 2, "pair", ev, os_bl, "<=", 1.00,
                            "release+acquire, efd / os.eventfd (blocking fd)"))
    out.append(_ratio_check(cases, 2, "fail", "os.eventfd_read + except BlockingIOError",
                            "efd acquire(False) [eventfd]", ">=", 2.0,
                            "failed non-blocking acquire, os.eventfd_read+except / efd"))
    out.append(_ratio_check(cases, 2, "timed", "efd acquire(timeout=1.0) [eventfd]",
                            "efd acquire() [eventfd]", "<=", 1.10,
                            "acquire(timeout=1.0) / acquire(), unit available"))
    for key, label in (("pair", "counter 0->1->0"), ("pair-held", "counter stays >= 1")):
        out.append(_ratio_check(cases, 3, key, "efd EventFD [pipe]", ev, "<=", 1.5,
                                "release+acquire, pipe / eventfd, " + label))
        out.append(_ratio_check(cases, 3, key, "efd EventFD [eventfd-readback]", ev,
                                "<=", 2.5, "release+acquire, eventfd-readback / "
                                "eventfd, " + label))
    out.append(_syscall_check(
        syscalls, 3, "pipe", "acquire",
        "syscalls in %d uncontended pipe acquires (counter stays > 0)"))
    for kind in ("thread", "process"):
        out.append(_ratio_check(cases, 4, "async-wakeup-" + kind, "efd acquire_async()",
                                "hand-written add_reader + os.eventfd_read", "<=", 1.2,
                                "async wake-up round trip (%s releases), efd / "
                                "hand-written add_reader" % kind))
    sem, mp, pi = ("efd.Semaphore (futex)", "multiprocessing.Semaphore",
                   "posix_ipc.Semaphore")
    out.append(_ratio_check(cases, 12, "pair", sem, mp, "<=", 1.00,
                            "efd.Semaphore release+acquire / multiprocessing"))
    out.append(_ratio_check(cases, 12, "pair", sem, pi, "<=", 1.00,
                            "efd.Semaphore release+acquire / posix_ipc"))
    out.append(_ratio_check(cases, 12, "pair", "efd EventFD [futex], armed", ev,
                            "<=", 1.2, "futex pair after fileno() / eventfd pair"))
    for kind in ("thread", "process"):
        out.append(_ratio_check(cases, 12, kind + "-pingpong", sem, pi, "<=", 1.00,
                                "%s ping-pong, efd.Semaphore / posix_ipc" % kind))
    out.append(_ratio_check(cases, 12, "event-is-set", "efd.Event (futex)",
                            "threading.Event", "<=", 1.0,
                            "Event.is_set(), efd / threading"))
    out.append(_syscall_check(
        syscalls, 12, "efd.Semaphore", "cross",
        "syscalls in %d efd.Semaphore release+acquire pairs (0 -> 1 -> 0)"))
    out.append(_ratio_check(cases, 20, "async-handoff", "efd.aio.Semaphore",
                            "asyncio.Semaphore", "<=", 1.0,
                            "fair hand-off between tasks of one loop, "
                            "efd.aio / asyncio"))
    out.append(_ratio_check(cases, 20, "async-with", "efd.aio.Semaphore",
                            "asyncio.Semaphore", "<=", 1.5,
                            "uncontended async with, efd.aio / asyncio"))
    wc = cases.get("async-waiters")
    for alt in ("run_in_executor(multiprocessing.Semaphore.acquire)",
                "run_in_executor(posix_ipc.Semaphore.acquire)",
                "asyncio.to_thread(threading.Semaphore.acquire)"):
        out.append(_ratio_check(cases, 4, "async-waiters", "efd acquire_async()", alt,
                                "<", 1.0, "1000 waiters wall time, efd / " + alt))
    what = "threads efd acquire_async() adds for 1000 waiters"
    if wc is None:
        out.append(Check(4, what, None, "==", 0, skip="case async-waiters not run"))
    else:
        im = wc.impl("efd acquire_async()")
        t = im.extra_median("threads") if im.ok else None
        out.append(Check(4, what, t, "==", 0, skip=None if t is not None else
                         (im.status() or "no samples"),
                         shown=None if t is None else "%d" % t))
    out += _value_check(cases, 19, "idle-cost", "efd.Semaphore() acquire() (futex)",
                        "wakeups/s", "wake-ups per second of an idle waiter, "
                        "efd.Semaphore (futex)")
    out += _value_check(cases, 19, "idle-cost", "efd.Semaphore() acquire_async() (futex)",
                        "wakeups/s", "wake-ups per second of an idle loop, "
                        "efd.Semaphore acquire_async() (futex)")
    out += _value_check(cases, 22, "killed-holders", "efd.BoundedSemaphore [futex]",
                        "units lost", "units lost when holders are killed, "
                        "efd.BoundedSemaphore (futex)")
    out.append(_ratio_check(cases, 22, "holds", "efd.Semaphore: with sem (held)",
                            "efd.Semaphore: with sem, EFD_HOLDS=off", "<=", 1.5,
                            "uncontended held `with sem:`, / without books"))
    out.append(_ratio_check(cases, 22, "holds",
                            "EventFD [futex]: acquire(undo=True) + release()",
                            "EventFD [futex]: acquire() + release()", "<=", 2.0,
                            "acquire(undo=True) + release(), / a plain pair"))
    out.append(_syscall_check(
        syscalls, 22, "efd.Semaphore", "with",
        "syscalls in %d held `with sem:` blocks (futex)"))
    out.append(_syscall_check(
        syscalls, 22, "futex", "undo",
        "syscalls in %d acquire(undo=True) + release() pairs (futex)"))
    return out + handoff_checks(cases)


def _value_check(cases, issue, key, alt, extra, what):
    """A check that an extra's median is 0 (a case whose answer is not a
    time)."""
    case = cases.get(key)
    if case is None:
        return [Check(issue, what, None, "==", 0, skip="case %s not run" % key)]
    im = case.impl(alt)
    v = im.extra_median(extra) if im.ok else None
    return [Check(issue, what, v, "==", 0,
                  skip=None if v is not None else (im.status() or "no samples"),
                  shown=None if v is None else "%g" % v)]


def parse_args(argv):
    keys = [k for k, _ in bench_cases.all_cases(Config(True))] + ["syscalls"]
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="CI-sized run (5 rounds, short samples): about three minutes")
    ap.add_argument("--out", default=os.path.join(HERE, "results"),
                    help="directory for results.md/.png/.json (default: %(default)s)")
    ap.add_argument("--cases", default="",
                    help="comma-separated cases to run (default: all): " + ", ".join(keys))
    ap.add_argument("--rounds", type=int, default=None,
                    help="interleaved rounds per case (default: 5 quick, 11 full)")
    ap.add_argument("--no-plot", action="store_true", help="skip results.png")
    args = ap.parse_args(argv)
    wanted = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in wanted if c not in keys]
    if unknown:
        ap.error("unknown case(s) %s; choose from %s" % (", ".join(unknown), ", ".join(keys)))
    args.wanted = set(wanted or keys)
    return args


def main(argv=None):
    args = parse_args(argv)
    cfg = Config(args.quick)
    if args.rounds:
        cfg.rounds = args.rounds
    started = time.time()
    os.makedirs(args.out, exist_ok=True)
    probe = efd._efd._probe() if hasattr(efd._efd, "_probe") else {}
    meta = {
        "efd_version": efd.__version__,
        "mode": "quick" if cfg.quick else "full",
        "rounds": cfg.rounds,
    }
    print("efd %s benchmarks (%s: %d interleaved rounds per case), Python %s, "
          "Linux %s, %d CPUs" % (efd.__version__, meta["mode"], cfg.rounds,
                                 platform.python_version(), platform.release(),
                                 os.cpu_count() or 0))
    cases = {}
    syscalls = []
    with tempfile.TemporaryDirectory(prefix="efd-bench-") as tmp:
        build_floor(cfg, tmp)
        for key, build in bench_cases.all_cases(cfg):
            if key not in args.wanted:
                continue
            case = build()
            t0 = time.time()
            print("%-22s" % key, end=" ", flush=True)
            log = lambda m: print("\n" + m, end=" ", flush=True)  # noqa: E731
            if getattr(case, "curve", False):
                case.measure(log)
            else:
                run_case(case, cfg.rounds, cfg.target, cfg.max_n, log=log)
            print("%5.1f s" % (time.time() - t0), flush=True)
            cases[key] = case
        if "syscalls" in args.wanted:
            print("%-22s" % "syscalls", end=" ", flush=True)
            t0 = time.time()
            syscalls = [r + (cfg.syscall_n,) for r in syscall_checks(cfg)]
            print("%5.1f s" % (time.time() - t0), flush=True)

    results = checks(cases, syscalls)
    ordered = [cases[k] for k, _ in bench_cases.all_cases(cfg) if k in cases]
    md = bench_report.markdown(ordered, results, syscalls, cfg, meta, probe,
                               time.time() - started)
    md_path = os.path.join(args.out, "results.md")
    with open(md_path, "w") as f:
        f.write(md)
    suite = to_pyperf_suite(ordered, meta)
    if suite is not None:
        suite.dump(os.path.join(args.out, "results.json"), replace=True)
    png = None
    if not args.no_plot:
        png = bench_report.plot(ordered, os.path.join(args.out, "results.png"), meta)
    print()
    print(bench_report.console_summary(ordered))
    print()
    for c in results:
        print(c.line())
    print()
    print("wrote %s%s%s (%.0f s, %s)" % (
        md_path, ", " + png if png else "",
        ", results.json" if suite is not None else "",
        time.time() - started, datetime.datetime.now().strftime("%Y-%m-%d %H:%M")))
    # The exit status reports the run, not the targets: a noisy machine
    # must not fail CI.  A case that crashed is an error, though.
    errors = [im for c in ordered for im in c.impls if im.error]
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
