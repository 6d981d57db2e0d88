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

    w("## Targets (issues 2, 3, 4)\n")
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
        w("### `%s`: %s\n" % (case.key, case.title))
        if case.doc:
            w(case.doc + "\n")
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


def console_summary(cases):
    lines = []
    for case in cases:
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
    panels = [c for c in cases if any(im.samples for im in c.impls)]
    if not panels:
        return None
    ncol = 2
    nrow = (len(panels) + ncol - 1) // ncol
    fig, axes = plt.subplots(nrow, ncol, figsize=(15, 3.0 * nrow + 0.8), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
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
