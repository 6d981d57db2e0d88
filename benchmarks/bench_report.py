"""Turn measured cases into results.md, results.png and a console summary."""
import os
import platform

from bench_harness import fmt_time


def _ratio_cell(case, im):
    if im.name == case.ref:
        return "**1.00** (reference)"
    r, lo, hi = case.ratio(im.name)
    if r is None:
        return "-"
    return "%.2f (%.2f-%.2f)" % (r, lo, hi)


def _has_extra(case, key):
    return any(im.extras.get(key) for im in case.impls)


def _curve_cell(im):
    # "wall / CPU" of one point of a curve case, or why there is none.
    if im is None:
        return "–"
    if not im.ok or not im.samples:
        return im.status() or "no samples"
    runs = im.extra_median("runs")
    return "%s / %s / %s" % (fmt_time(im.median()), fmt_time(im.extra_median("cpu")),
                             "-" if runs is None else "%.1f" % runs)


def _curve_markdown(case, w):
    """The tables of a curve case (handoff-curve): one per waiter kind,
    a row per alternative, a column per N."""
    from bench_cases import HANDOFF_KIND_LABEL
    w("### `%s`: %s\n" % (case.key, case.title))
    if case.doc:
        w(case.doc + "\n")
    w("Each cell: **wall time per hand-off / CPU time per hand-off / waiter "
      "runs per hand-off** (medians of %d rounds); `–`: the alternative "
      "cannot have waiters of that kind. "
      "The last column is the flatness: wall time with the most waiters "
      "measured over wall time with one.\n" % case.cfg.rounds)
    hi = case.ns[-1]
    for kind in case.kinds:
        w("**Waiters: %s**\n" % HANDOFF_KIND_LABEL[kind])
        w("| alternative | " + " | ".join("N=%d" % n for n in case.ns)
          + " | N=%d / N=1 |" % hi)
        w("|---|" + "---:|" * (len(case.ns) + 1))
        for alt in case.alts:
            cells = [_curve_cell(case.point(alt.name, kind, n)) for n in case.ns]
            a, b = case.point(alt.name, kind, hi), case.point(alt.name, kind, case.ns[0])
            flat = "–"
            if a is not None and a.samples and b is not None and b.samples:
                flat = "%.2f" % (a.median() / b.median())
            w("| %s | %s | %s |" % (alt.name, " | ".join(cells), flat))
        w("")
    _wakeups_markdown(case, w)


def _wakeups_markdown(case, w):
    # Issue 13's EventFD._wakeups(), where efd has it: per hand-off, how
    # many of the waiter threads efd's wait loop woke, by an event and by a
    # re-check slice running out.
    rows = [alt for alt in case.alts if any(
        p is not None and p.extras.get("wakeups")
        for p in (case.point(alt.name, "thread", n) for n in case.ns))]
    if not rows:
        return
    w("**efd wake-ups per hand-off, thread waiters** (`EventFD._wakeups()` "
      "of the released object: returns from efd's own sleep call by an event "
      "+ by a re-check timeout, medians. A poll() sleeper that the kernel "
      "puts back to sleep is not counted: *runs* above is the real herd "
      "check, this one a second opinion)\n")
    w("| alternative | " + " | ".join("N=%d" % n for n in case.ns) + " |")
    w("|---|" + "---:|" * len(case.ns))
    for alt in rows:
        cells = []
        for n in case.ns:
            p = case.point(alt.name, "thread", n)
            if p is None or not p.extras.get("wakeups"):
                cells.append("-")
            else:
                cells.append("%.1f + %.2f" % (p.extra_median("wakeups"),
                                              p.extra_median("rechecks")))
        w("| %s | %s |" % (alt.name, " | ".join(cells)))
    w("")


def markdown(cases, checks, syscalls, cfg, meta, probe, elapsed):
    out = []
    w = out.append
    w("# efd benchmark results\n")
    w("Produced by `python benchmarks/run.py%s` in %.0f s: efd %s, Python %s "
      "(%s), Linux %s, %d CPUs. Each case ran **%d interleaved rounds** (one "
      "sample of every alternative per round, order reversed every other "
      "round)." % (" --quick" if cfg.quick else "", elapsed, meta["efd_version"],
                   platform.python_version(), platform.python_implementation(),
                   platform.release(), os.cpu_count() or 0, cfg.rounds)
      + ("" if not probe else " Backend probe: %s." % ", ".join(
          "%s=%s" % kv for kv in sorted(probe.items()))) + "\n")
    w("**How to read it.** *median* is the median time of one operation over "
      "the rounds. *ratio* is alternative / efd, taken within each round and "
      "then the median over rounds (the two numbers in brackets are the "
      "quartiles of those per-round ratios): **above 1 efd is faster, below 1 "
      "the alternative is faster**. Only ratios measured in the same run mean "
      "anything; absolute times depend on the machine and its load.\n")

    w("## Targets (issues %s)\n" % ", ".join(
        str(i) for i in sorted({c.issue for c in checks})))
    w("```")
    for c in checks:
        w(c.line())
    w("```\n")

    if syscalls:
        w("## Syscalls per operation (strace)\n")
        w("A child process runs the loop under `strace -f`; only the syscalls "
          "between two marker writes are counted. The counter starts at "
          "N + 1, so it never reaches zero.\n")
        w("| backend | loop | syscalls | per iteration | which |")
        w("|---|---|---:|---:|---|")
        for backend, mode, total, names, err, n in syscalls:
            loop = "%d x acquire()" % n if mode == "acquire" else \
                "%d x acquire() + release()" % n
            if err:
                w("| %s | %s | - | - | %s |" % (backend, loop, err))
            else:
                which = ", ".join("%s %d" % kv for kv in sorted(names.items())) or "none"
                w("| %s | %s | %d | %.2f | %s |" % (backend, loop, total, total / n, which))
        w("")

    w("## Cases\n")
    for case in cases:
        if getattr(case, "curve", False):
            _curve_markdown(case, w)
            continue
        w("### `%s`: %s\n" % (case.key, case.title))
        if case.doc:
            w(case.doc + "\n")
        if case.columns:
            _columns_markdown(case, w)
            continue
        threads = _has_extra(case, "threads")
        head = "| alternative | median per %s | ratio to efd |" % case.unit
        rule = "|---|---:|---:|"
        if threads:
            head += " threads added |"
            rule += "---:|"
        head += " note |"
        rule += "---|"
        w(head)
        w(rule)
        for im in case.impls:
            if not im.ok or not im.samples:
                row = "| %s | %s | - |" % (im.name, im.status() or "no samples")
                if threads:
                    row += " - |"
                w(row + " %s |" % im.note)
                continue
            row = "| %s | %s | %s |" % (im.name, fmt_time(im.median()),
                                        _ratio_cell(case, im))
            if threads:
                t = im.extra_median("threads")
                row += " %s |" % ("-" if t is None else "%d" % t)
            note = im.note
            r = case.ratio(im.name)[0]
            if r is not None and r < 0.95 and im.name != case.ref and note:
                note = "**beats efd:** " + note
            w(row + " %s |" % note)
        w("")
    w("Raw samples: `results.json` (a pyperf BenchmarkSuite: "
      "`python -m pyperf stats results.json`).\n")
    return "\n".join(out)


def _columns_markdown(case, w):
    """A case whose answer is not a time: its columns, medians over rounds."""
    w("| alternative | %s | note |" % " | ".join(h for _, h, _ in case.columns))
    w("|---|%s---|" % ("---:|" * len(case.columns)))
    for im in case.impls:
        if not im.ok or not im.samples:
            cells = [im.status() or "no samples"] + ["-"] * (len(case.columns) - 1)
        else:
            cells = []
            for key, _, fmt in case.columns:
                v = im.extra_median(key)
                cells.append("-" if v is None else fmt % v)
        w("| %s | %s | %s |" % (im.name, " | ".join(cells), im.note))
    w("")


def console_summary(cases):
    lines = []
    for case in cases:
        if getattr(case, "curve", False):
            lines.append("%s: %s (wall time per hand-off, medians)"
                         % (case.key, case.title))
            for kind in case.kinds:
                lines.append("  waiters: %s, N = %s" % (
                    kind, ", ".join(str(n) for n in case.ns)))
                for alt in case.alts:
                    pts = [case.point(alt.name, kind, n) for n in case.ns]
                    if all(p is None for p in pts):
                        continue
                    lines.append("    %-30s %s" % (alt.name, " ".join(
                        "%10s" % ("-" if p is None or not p.samples
                                  else fmt_time(p.median())) for p in pts)))
            continue
        if case.columns:
            lines.append("%s: %s" % (case.key, case.title))
            for im in case.impls:
                if not im.ok or not im.samples:
                    lines.append("    %-52s %s" % (im.name, im.status() or "no samples"))
                    continue
                lines.append("    %-52s %s" % (im.name, "  ".join(
                    "%s %s" % (h, "-" if im.extra_median(k) is None
                               else f % im.extra_median(k))
                    for k, h, f in case.columns)))
            continue
        lines.append("%s: %s (ratio = alternative / efd, >1: efd faster)"
                     % (case.key, case.title))
        for im in case.impls:
            if not im.ok or not im.samples:
                lines.append("    %-52s %s" % (im.name, im.status() or "no samples"))
                continue
            r = case.ratio(im.name)[0]
            extra = ""
            t = im.extra_median("threads")
            if t is not None:
                extra = "  threads +%d" % t
            lines.append("    %-52s %10s  x%s%s" % (
                im.name, fmt_time(im.median()),
                "1.00 ref" if im.name == case.ref else
                ("%.2f" % r if r is not None else " -"), extra))
    return "\n".join(lines)


def _curve_panel(ax, case, kind, what, matplotlib):
    """One waiter kind of a curve case: time per hand-off against N, a line
    per alternative, log-log."""
    from bench_cases import HANDOFF_KIND_LABEL
    for i, alt in enumerate(case.alts):
        pts = [(n, case.point(alt.name, kind, n)) for n in case.ns]
        pts = [(n, p.median() if what == "wall" else p.extra_median("cpu"))
               for n, p in pts if p is not None and p.samples]
        if not pts:
            continue
        xs, ys = zip(*pts)
        ax.plot(xs, [y * 1e6 for y in ys], marker="o", markersize=3,
                linestyle="-" if alt.name.startswith("efd") else "--",
                label=alt.name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(list(case.ns))
    ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("N blocked waiters (%s)" % HANDOFF_KIND_LABEL[kind], fontsize=7)
    ax.set_ylabel("µs per hand-off (%s)" % ("wall" if what == "wall" else "CPU"),
                  fontsize=7)
    ax.tick_params(labelsize=7)
    ax.grid(True, which="both", linewidth=0.3)
    ax.legend(fontsize=6)
    ax.set_title("%s: %s time per hand-off, waiters: %s (medians, lower is better)"
                 % (case.key, "wall" if what == "wall" else "CPU",
                    HANDOFF_KIND_LABEL[kind]), fontsize=8)


def plot(cases, path, meta):
    """One panel per case: each alternative's median as a ratio to efd,
    on a log scale; returns the path, or None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return None
    panels = [c for c in cases if any(im.samples for im in c.impls)
              and not getattr(c, "curve", False)
              and not c.columns]            # not times: in results.md only
    curves = [(c, kind, what) for c in cases if getattr(c, "curve", False)
              for kind in c.kinds for what in ("wall", "cpu")
              if any(p.samples for (_, k, _), p in c.points.items() if k == kind)]
    if not panels and not curves:
        return None
    ncol = 2
    first = len(panels) + len(panels) % ncol        # the curves start a row
    nrow = (first + len(curves) + ncol - 1) // ncol
    fig, axes = plt.subplots(nrow, ncol, figsize=(15, 3.0 * nrow + 0.8), squeeze=False)
    for ax in list(axes.flat[len(panels):first]) + list(axes.flat[first + len(curves):]):
        ax.axis("off")
    for ax, (case, kind, what) in zip(axes.flat[first:], curves):
        _curve_panel(ax, case, kind, what, matplotlib)
    for ax, case in zip(axes.flat, panels):
        rows = [im for im in case.impls if im.ok and im.samples
                and case.ratio(im.name)[0] is not None]
        names = [im.name for im in rows]
        ratios = [case.ratio(im.name)[0] for im in rows]
        colors = ["#1f77b4" if im.name.startswith("efd") else
                  "#7f7f7f" if im.name.startswith("C floor") else "#ff7f0e"
                  for im in rows]
        y = range(len(rows))
        ax.barh(list(y), ratios, color=colors)
        ax.set_yticks(list(y))
        ax.set_yticklabels(names, fontsize=7)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.axvline(1.0, color="black", linewidth=0.8)
        for yi, (r, im) in enumerate(zip(ratios, rows)):
            ax.text(r, yi, " %.2fx  %s" % (r, fmt_time(im.median())),
                    va="center", fontsize=6)
        lo = min(ratios + [1.0])
        hi = max(ratios + [1.0])
        ax.set_xlim(lo / 1.6, hi * 4)
        ax.set_title("%s: %s\n(time per %s relative to %s)" % (
            case.key, case.title, case.unit, case.ref), fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
    fig.suptitle("efd %s vs alternatives, ratio = alternative / efd "
                 "(right of 1: efd faster) -- %s run, %d rounds, medians"
                 % (meta["efd_version"], meta["mode"], meta["rounds"]), fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
