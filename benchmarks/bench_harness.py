"""The measuring part of benchmarks/run.py: interleaved samples and medians.

Why not pyperf's Runner (or pytest-benchmark) for the timing itself: both
measure one benchmark completely (all its worker processes, all its values)
before they start the next.  Every number this suite reports is a *ratio*
between alternatives, on a machine whose load drifts (2 cores shared with
other jobs), and a drift that lands on one side of a ratio shows up as a
false win or loss.  So each round here takes one sample of every
alternative, in turn (A B C ... then ... C B A, the order reversed every
other round so that nobody always runs first), and a ratio is the median of
the per-round ratios.  The loop inside a sample is timeit's: a calibrated
number of operations between two perf_counter() reads, the loop overhead
left in on every side alike.  pyperf is still used for what it is good at:
the samples are stored as a pyperf BenchmarkSuite (results.json), with
pyperf's system metadata, so `python -m pyperf stats|hist|compare_to` work
on them.
"""
import faulthandler
import statistics
import sys
import time

# A sample that takes longer than this is a hang: dump every thread's stack
# and exit, instead of leaving a stuck benchmark behind.
HANG_SECONDS = 180


class Skip(Exception):
    """Raised by an implementation that cannot run here (with the reason)."""


class Impl:
    """One alternative in a case.

    ``run(n)`` performs ``n`` operations and returns the seconds they took
    (setup and teardown outside the timed part), or ``(seconds, extras)``
    where ``extras`` is a dict of other numbers to report (e.g. threads).
    ``available`` is None, or the reason this alternative is skipped.
    """

    def __init__(self, name, run, note="", available=None, fixed_n=None):
        self.name = name
        self.run = run
        self.note = note
        self.available = available
        self.fixed_n = fixed_n      # no calibration: always this many ops
        self.n = None
        self.samples = []           # seconds per operation, one per round
        self.extras = {}            # name -> list of values, one per round
        self.error = None

    @property
    def ok(self):
        return self.available is None and self.error is None

    def status(self):
        if self.available is not None:
            return "skipped: " + self.available
        if self.error is not None:
            return "error: " + self.error
        return ""

    def median(self):
        return statistics.median(self.samples) if self.samples else None

    def quartiles(self):
        s = sorted(self.samples)
        if len(s) < 4:
            return (s[0], s[-1]) if s else (None, None)
        q = statistics.quantiles(s, n=4)
        return q[0], q[2]

    def extra_median(self, key):
        vals = self.extras.get(key)
        return statistics.median(vals) if vals else None


class Case:
    """A question ("what does a failed non-blocking acquire cost?") and the
    alternatives that answer it.  ``ref`` names the row ratios are taken
    against (an efd row)."""

    def __init__(self, key, title, unit, impls, ref, doc="", columns=()):
        self.key = key
        self.title = title
        self.unit = unit            # what one operation is, for the table
        self.impls = impls
        self.ref = ref
        self.doc = doc
        # Cases whose answer is not a time: (extra's key, header, format)
        # of each column the table shows instead of time and ratio.
        self.columns = columns

    def impl(self, name):
        for im in self.impls:
            if im.name == name:
                return im
        raise KeyError(name)

    def ratio(self, name, ref=None):
        """Median over rounds of impl/ref measured in the same round, with
        the quartiles of those per-round ratios; (None, None, None) if
        either side has no samples."""
        a = self.impl(name)
        b = self.impl(ref or self.ref)
        if not (a.ok and b.ok and a.samples and b.samples):
            return None, None, None
        per_round = [x / y for x, y in zip(a.samples, b.samples)]
        if len(per_round) >= 4:
            q = statistics.quantiles(per_round, n=4)
            lo, hi = q[0], q[2]
        else:
            lo, hi = min(per_round), max(per_round)
        return statistics.median(per_round), lo, hi


def _call(impl, n):
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True)
    try:
        res = impl.run(n)
    finally:
        faulthandler.cancel_dump_traceback_later()
    if isinstance(res, tuple):
        return res[0], res[1]
    return res, {}


def calibrate(impl, target, max_n):
    """timeit's rule: grow n until one sample takes at least `target` s."""
    if impl.fixed_n is not None:
        impl.n = impl.fixed_n
        _call(impl, impl.n)                     # warm-up
        return
    n = 1
    while True:
        secs, _ = _call(impl, n)
        if secs >= target or n >= max_n:
            break
        if secs <= 0:
            n *= 10
        else:
            n = int(min(max_n, max(n * 2, n * target / secs * 1.1)))
    impl.n = n
    _call(impl, n)                              # warm-up at the final size


def run_case(case, rounds, target, max_n, log=print):
    """Calibrate every available alternative, then take `rounds`
    interleaved samples of each."""
    live = []
    for im in case.impls:
        if im.available is not None:
            continue
        try:
            calibrate(im, target, max_n)
            live.append(im)
        except Skip as exc:
            im.available = str(exc)
        except Exception as exc:               # reported, never fatal
            im.error = "%s: %s" % (type(exc).__name__, exc)
            log("  ! %s: %s" % (im.name, im.error))
    for r in range(rounds):
        order = live if r % 2 == 0 else live[::-1]
        for im in order:
            if im.error is not None:
                continue
            try:
                secs, extras = _call(im, im.n)
            except Exception as exc:
                im.error = "%s: %s" % (type(exc).__name__, exc)
                log("  ! %s: %s" % (im.name, im.error))
                continue
            im.samples.append(secs / im.n)
            for k, v in extras.items():
                im.extras.setdefault(k, []).append(v)
    # A row that failed in some round is dropped whole: its remaining
    # samples would no longer pair up with the reference's rounds.
    for im in live:
        if im.error is not None:
            im.samples = []


def to_pyperf_suite(cases, metadata):
    """The samples as a pyperf BenchmarkSuite, or None without pyperf."""
    try:
        import pyperf
    except ImportError:
        return None
    benches = []
    common = None
    for case in cases:
        for im in case.impls:
            if not im.samples:
                continue
            md = {
                "name": "%s: %s" % (case.key, im.name),
                "loops": im.n,
                "unit": "second",
                "description": case.title,
            }
            if common is None:
                # pyperf's own system metadata (CPU, kernel, Python, ...),
                # collected once.
                run0 = pyperf.Run(im.samples, metadata=md,
                                  collect_metadata=True)
                common = {k: v for k, v in run0.get_metadata().items()
                          if k not in md}
                common.update(metadata)
            md.update(common)
            run = pyperf.Run(im.samples, metadata=md, collect_metadata=False)
            benches.append(pyperf.Benchmark([run]))
    return pyperf.BenchmarkSuite(benches) if benches else None


def fmt_time(secs):
    if secs is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if secs >= scale or unit == "ns":
            v = secs / scale
            return ("%.3g %s" % (v, unit)) if v < 1000 else ("%.0f %s" % (v, unit))
    return "-"


def now():
    return time.perf_counter()


def stderr(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()
