"""Accept-distribution rig: the tables, the JSON document and the plot.

:func:`summary_rows` / :func:`distribution_rows` with :func:`plain_table`
(or rich, in the command) print the summaries; :func:`results_json` is the
``--json`` document; :func:`plot_shares` draws the per-worker shares
(matplotlib, optional: :func:`check_plot_target` refuses early without it).
"""

from __future__ import annotations

import importlib.util
import os
import statistics
from typing import List, Sequence

from rxl.bench import tables, wakeups
from rxl.bench.accept import BenchError
from rxl.bench.accept_stats import Summary
from rxl.cli.options import check_out_file
from rxl.errors import os_reason

SUMMARY_COLUMNS = ("setup", "accepts", "wakeups", "empty", "sleeps",
                   "cpu ms", "first", "last", "top", "local")


#: What each summary column means; printed under the table.
COLUMN_NOTES = (
    "mean (min-max) over repetitions; totals over all workers.",
    "wakeups: epoll_wait/poll returns with an event; empty: of those, "
    "accept got EAGAIN.",
    "sleeps: voluntary context switches (getrusage ru_nvcsw), which also "
    "count wakeups epoll_wait swallowed (event gone by the time it ran) "
    "and the 100 ms wait-slice timeouts.",
    "first/last/top: share of accepts of the first registrant, the last "
    "registrant, the busiest worker.",
    "local: accepts whose handshake CPU (SO_INCOMING_CPU) is the worker's "
    "CPU.",
)


def summary_rows(summaries: Sequence[Summary]) -> List[List[str]]:
    """Rows of the summary table, one per setup (and work time)."""
    rows = []
    for s in summaries:
        rows.append([s.label, s.accepts.fmt(), s.wakeups.fmt(), s.empty.fmt(),
                     s.vcsw.fmt(), s.cpu_ms.fmt(), s.first_share.fmt(1, True),
                     s.last_share.fmt(1, True), s.top_share.fmt(1, True),
                     s.local_share.fmt(0, True)])
    return rows


def distribution_rows(summaries: Sequence[Summary]) -> List[List[str]]:
    """Rows of the distribution table: per rank mean (min-max) accepts,
    one decimal (a mean of 0.5 is not 0), then the median run's list, in
    registration order; rows of more than tables.WIDE workers summarised."""
    rows = []
    for s in summaries:
        marks = []
        mr = s.median_run
        for i in range(mr.workers):
            m = ""
            if mr.exclusive[i] and s.setup in ("half", "exclusive-et"):
                m = "E"
            if s.setup == "incoming-cpu" and not mr.tagged[i]:
                m = "u"
            if mr.killed[i]:
                m += "k"
            marks.append(m)
        per_rank = tables.per_rank([r.accepts for r in s.runs], 1,
                                   marks if mr.workers <= tables.WIDE
                                   else None)
        median = (str(mr.accepts) if mr.workers <= tables.WIDE else
                  f"idle {sum(1 for a in mr.accepts if a == 0)}, "
                  f"top {max(mr.accepts)}")
        rows.append([s.label, per_rank, median])
    return rows


def plain_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A fixed-width text table (the fallback when rich is absent)."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths)),
             "  ".join("-" * w for w in widths)]
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    return "\n".join(line.rstrip() for line in lines)


def wakeup_items(summaries: Sequence[Summary]) -> list:
    """(label, [RunWakeups per run], prediction) of every summary that ran
    the request workload, for :func:`rxl.bench.wakeups.rows`."""
    return [(s.label, [wakeups.run_wakeups(r.raw) for r in s.runs],
             s.runs[0].raw.get("wakeups_prediction"))
            for s in summaries if s.runs[0].raw.get("requests")]


def results_json(summaries: Sequence[Summary], config: dict) -> dict:
    """The --json document: config, then per setup its runs and summary;
    with the request workload also each run's wakeup figures and the
    setup's wakeup summary (rxl.bench.wakeups)."""
    results = []
    for s in summaries:
        doc = s.as_json()
        if s.runs[0].raw.get("requests"):
            ws = [wakeups.run_wakeups(r.raw) for r in s.runs]
            for rj, w in zip(doc["runs"], ws):
                rj["wakeups"] = {"figures": w.figures(),
                                 "res_by_cpu": w.res_by_cpu,
                                 "bg_res_by_cpu": w.bg_res_by_cpu,
                                 "cal_by_cpu": w.cal_by_cpu,
                                 "softirq_ms_by_cpu": w.softirq_ms_by_cpu}
            doc["wakeups"] = wakeups.summary(
                ws, s.runs[0].raw.get("wakeups_prediction"))
        results.append(doc)
    return {"config": config, "results": results}


def check_plot_target(path: os.PathLike) -> None:
    """Raise BenchError unless matplotlib imports, BadOption unless ``path``
    is a file that can be written (rxl.cli.options.check_out_file: its
    directory there, no symlink loop on its way)."""
    if importlib.util.find_spec("matplotlib") is None:
        raise BenchError("--plot needs matplotlib: pip install 'rxl[plot]'")
    check_out_file(str(path), "--plot")


def plot_shares(summaries: Sequence[Summary], path: os.PathLike) -> None:
    """Draw per-worker accept shares per setup to ``path`` (PNG).

    One panel per setup; bars are the mean share per registration rank,
    whiskers the min-max over repetitions.  Raises BenchError when
    matplotlib (optional dependency ``plot``) is missing.
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise BenchError("--plot needs matplotlib: pip install "
                         "'rxl[plot]'") from None
    n = len(summaries)
    cols = min(4, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows),
                             squeeze=False, sharey=True)
    for ax, s in zip(axes.flat, summaries):
        tot = [sum(r.accepts) or 1 for r in s.runs]
        shares = [[r.accepts[i] / t for r, t in zip(s.runs, tot)]
                  for i in range(len(s.per_rank))]
        means = [statistics.fmean(v) for v in shares]
        # max(0, .): fmean of equal values can differ from them by an ulp.
        lo = [max(0.0, m - min(v)) for m, v in zip(means, shares)]
        hi = [max(0.0, max(v) - m) for m, v in zip(means, shares)]
        ax.bar(range(len(means)), means, yerr=[lo, hi], capsize=2,
               color="tab:blue")
        ax.axhline(1.0 / len(means), color="grey", lw=0.8, ls="--")
        ax.set_title(s.label, fontsize=9)
        # Every rank up to 16 workers, about 8 labelled ticks past that.
        ax.set_xticks(range(0, len(means), max(1, len(means) // 8)
                            if len(means) > tables.WIDE else 1))
        ax.set_xlabel("registration rank", fontsize=8)
        ax.set_ylim(0, 1)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    axes[0][0].set_ylabel("share of accepts")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as e:
        raise BenchError(f"--plot: cannot write {path}: {os_reason(e)}") from None
    finally:
        plt.close(fig)
