"""The accept rig's imbalance, per-worker and client tables.

Pure functions over summaries: anything with ``label``, ``runs`` and, per
run, ``accepts``, ``cpu_ms``, ``workers`` and ``raw`` (acceptd's JSON).
Every figure is "mean (min-max) over repetitions"; means keep a decimal
(a mean of 0.5 accepts must not print as 0).

Rows of more than :data:`WIDE` workers are summarised (busiest ranks,
idle count) rather than listed; ``--plot`` draws every worker.
"""

from __future__ import annotations

import statistics
from typing import List, Optional, Sequence

from rxl.bench import dispersion

#: Above this many workers a per-rank list is summarised, not printed.
WIDE = 16

IMBALANCE_COLUMNS = ("setup", "idle", "top-k", "cv", "max/min", "on rx cpu")

CLIENT_COLUMNS = ("setup", "conn/s", "connect us p50/p99",
                  "response us p50/p99", "queue wait us p50/p99",
                  "aborted", "resets", "lost")

WORKER_COLUMNS = ("setup", "cpu ms by rank", "open max by rank")

NOTES = (
    "idle: workers with no accept in the run; top-k: share of the busiest "
    "quarter (k = ceil(workers/4); even = 25%); cv: stdev/mean of accepts "
    "per worker (0 = even); max/min: busiest over least busy (inf: a "
    "worker idle).",
    "on rx cpu: accepts by a worker on the CPU that completed the "
    "handshake (SO_INCOMING_CPU).",
    "conn/s: completed connections from the first connect(2) to the last "
    "response (closed loop: the server's rate; open loop: about the "
    "offered rate). connect: connect() "
    "to established; response: connect() to the server's response byte "
    "(serial model: its close); queue wait: established to accept(2).",
)


def mean_range(values: Sequence[float], digits: int = 1,
               pct: bool = False) -> str:
    """``mean (lo-hi)``, or just the value when all are equal."""
    if not values:
        return "-"
    k, unit = (100.0, "%") if pct else (1.0, "")
    m, lo, hi = (f"{v * k:.{digits}f}" for v in
                 (statistics.fmean(values), min(values), max(values)))
    return f"{m}{unit}" if lo == hi else f"{m}{unit} ({lo}-{hi})"


def _per_run(s, fn) -> List[float]:
    return [fn(r) for r in s.runs]


def local_share(run) -> float:
    """Share (0..1) of a run's accepts made on the handshake CPU."""
    total = sum(run.accepts)
    return sum(run.local) / total if total else 0.0


def imbalance_rows(summaries: Sequence) -> List[List[str]]:
    """Per setup: idle workers, top-k share, CV, max/min, local share."""
    rows = []
    for s in summaries:
        figs = [dispersion.figures(r.accepts) for r in s.runs]
        mm = [f["max_min"] for f in figs]
        finite = [x for x in mm if x != float("inf")]
        inf = len(mm) - len(finite)
        mmtxt = mean_range(finite, 2) if finite else ""
        if inf:
            mmtxt = (mmtxt + "; " if mmtxt else "") + f"inf in {inf}/{len(mm)}"
        rows.append([
            s.label,
            mean_range([f["idle"] for f in figs], 1) +
            f" of {s.runs[0].workers}",
            mean_range([f["top_k"] for f in figs], 1, pct=True) +
            f" k={figs[0]['k']}",
            mean_range([f["cv"] for f in figs], 2),
            mmtxt,
            mean_range(_per_run(s, local_share), 0, pct=True)])
    return rows


def per_rank(values_by_run: Sequence[Sequence[float]], digits: int = 1,
             marks: Optional[Sequence[str]] = None) -> str:
    """Per-rank ``mean (min-max)`` over runs, one decimal, or for wide
    rows the busiest ranks and the idle count."""
    n = len(values_by_run[0])
    cols = [[v[i] for v in values_by_run] for i in range(n)]
    marks = marks or [""] * n
    if n <= WIDE:
        return " ".join(mean_range(c, digits) + (f"[{m}]" if m else "")
                        for c, m in zip(cols, marks))
    means = [statistics.fmean(c) for c in cols]
    order = sorted(range(n), key=lambda i: -means[i])
    total = sum(means) or 1.0
    top = ", ".join(f"r{i} {means[i]:.{digits}f}" for i in order[:6])
    never = sum(1 for c in cols if max(c) == 0)
    return (f"{n} workers; busiest: {top} (these 6: "
            f"{sum(means[i] for i in order[:6]) / total:.1%}); "
            f"idle in every run: {never}; see --plot")


def worker_rows(summaries: Sequence) -> List[List[str]]:
    """Per setup: CPU ms and most connections open at once, per rank."""
    rows = []
    for s in summaries:
        cpu = [r.cpu_ms for r in s.runs]
        opn = [[w.get("open_max", 0) for w in r.raw.get("per_worker", [])]
               for r in s.runs]
        rows.append([s.label, per_rank(cpu, 1),
                     per_rank(opn, 1) if all(opn) else "-"])
    return rows


def _pct(r, key: str, q: str) -> Optional[float]:
    d = r.raw.get(key)
    return None if not d else float(d[q])


def _p50_p99(s, key: str) -> str:
    p50 = [v for v in (_pct(r, key, "p50") for r in s.runs) if v is not None]
    p99 = [v for v in (_pct(r, key, "p99") for r in s.runs) if v is not None]
    if not p50:
        return "-"
    return f"{statistics.fmean(p50):.0f} / {statistics.fmean(p99):.0f} " \
           f"(p99 max {max(p99):.0f})"


def client_rows(summaries: Sequence) -> List[List[str]]:
    """Per setup: rate, latency percentiles (means over runs of each
    run's p50 and p99, and the worst p99), aborted, resets, lost."""
    rows = []
    for s in summaries:
        rows.append([
            s.label,
            mean_range([r.raw.get("conn_per_s", 0.0) for r in s.runs], 0),
            _p50_p99(s, "connect_us"), _p50_p99(s, "response_us"),
            _p50_p99(s, "queue_wait_us"),
            mean_range([r.raw.get("aborted", 0) for r in s.runs], 1),
            mean_range([r.raw.get("resets", 0) for r in s.runs], 1),
            mean_range([r.lost for r in s.runs], 1)])
    return rows


def end_warnings(raw: dict) -> List[str]:
    """Workers the end of a run cut short or left holding connections."""
    out = []
    pw = raw.get("per_worker", [])
    busy = [w["rank"] for w in pw if w.get("busy_at_stop")]
    cut = [w["rank"] for w in pw if w.get("killed_at_end")]
    held = sum(w.get("open_end", 0) for w in pw if not w.get("killed"))
    if busy:
        out.append(f"ranks {busy} were still inside their work at the end")
    if cut:
        out.append(f"ranks {cut} did not exit and were killed at the end; "
                   f"their CPU and work figures are cut")
    if held:
        out.append(f"{held} connections were still open at the end")
    acc = raw.get("acceptor") or {}
    if acc.get("killed_at_end"):
        out.append("the handoff acceptor was killed at the end")
    return out


def ebpf_lines(summaries: Sequence) -> List[str]:
    """Per eBPF setup: the model check (fraction of connections on the
    model's member, ebpf-deal only) and the program's fallbacks."""
    out = []
    for s in summaries:
        sums = [r.raw.get("ebpf_summary") for r in s.runs]
        if not any(sums):
            continue
        agree = [r.raw.get("model_agreement") for r in s.runs]
        agree = [a for a in agree if a is not None]
        fb: dict = {}
        for e in sums:
            for k, v in (e or {}).get("fallbacks", {}).items():
                fb[k] = fb.get(k, 0) + v
        text = f"{s.label}: fallbacks over {len(s.runs)} runs " + \
            ", ".join(f"{k} {v}" for k, v in fb.items())
        if agree:
            text += f"; model agreement {mean_range(agree, 1, pct=True)}"
        out.append(text)
    return out
