"""Cross-CPU wakeups per request in the guest (``rxl learn --requests``). Pure.

docs/results/wakeups.md, part 2.  learnd counts in band, per worker: the
requests it answered (``reqs``), those on a connection whose handshake CPU
(its receiving CPU: the NIC hashes a flow to one queue) is not the CPU the
worker ran on (``xreqs``), the waits that slept and were ended by a request
(``slept``) and those of them ended by a request on such a connection
(``xwakes``: the cross-CPU wakeups).  It copies them at three snapshots,
with its workers' context switches, the guest's (``vm.stats.sys.v_swtch``)
and hw.intrcnt (rxl.learn.intrcnt.intr_delta): 0 before an idle window,
1 after it, 2 after the requests.  :func:`run_wakeups` turns one run's
copies into figures per 1,000 requests over the window 1 -> 2, the guest's
counters net of the idle window's rate (0 -> 1) scaled to the window;
:func:`summary` takes min/median/max over the repetitions, beside the
prediction of the run's policy (rxl.learn.metrics: the hash, the deal of
the tags alone, the deal of the run's counts).

The prediction: each connection carries the same number of requests, so
the share of requests received on another CPU than their worker's is the
share of connections whose worker is not on their receiving CPU, ``1 -
predicted co-location`` (what ``rxl outcomes`` prints as ``exact``).  With
one request outstanding per host loop and an idle worker, each such
request wakes its worker from another CPU once: ``1000 * (1 - exact)``
cross-CPU wakeups per 1,000 requests, as on Linux (rxl.bench.wakeups).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from rxl.learn import intrcnt as counters
from rxl.learn.metrics import DEAL_CONFIGS, RunMetrics
from rxl.learn.plan import LearnError, config_of, repetition_of
from rxl.learn.results import RunSummary

#: learnd's snapshots of a request run: before the idle window, after it
#: (before the requests), after the requests (rxl.learn.drive.drive_requests).
SNAP_IDLE, SNAP_BEFORE, SNAP_AFTER = 0, 1, 2
#: The in-band counts summed over the workers.
IN_BAND = ("reqs", "xreqs", "ureqs", "slept", "xwakes")


@dataclass
class RunWakeups:
    """One request run's figures.  Counts are over snapshots 1 -> 2;
    ``*_net`` are the guest's counts minus the idle window's rate times
    the window (None when not counted: no COUNT_IPIS, no v_swtch); ``ctx``
    is the workers' own voluntary + involuntary switches (None if unknown)."""

    label: str
    config: str
    workers_set: str
    rep: int
    connections: int
    requests: int
    xreqs: int
    ureqs: int
    slept: int
    xwakes: int
    ctx: Optional[int]
    window_ms: int
    idle_ms: int
    swtch_net: Optional[float]
    preempt_net: Optional[float]
    preempt_net_by_cpu: Dict[int, float] = field(default_factory=dict)
    intr_kinds: Tuple[str, ...] = ()
    colocated: Optional[float] = None
    predicted_colocated: Optional[float] = None
    policy: str = "hash"

    def per_1k(self, v: Optional[float]) -> Optional[float]:
        """``v`` per 1,000 requests (None for None or no request)."""
        return None if v is None or not self.requests else 1000.0 * v / self.requests

    @property
    def figures(self) -> Dict[str, Optional[float]]:
        """The table's figures (per 1,000 requests but ``requests`` and the shares)."""
        return {"requests": float(self.requests),
                "xreq_1k": self.per_1k(self.xreqs),
                "slept_1k": self.per_1k(self.slept),
                "xwake_1k": self.per_1k(self.xwakes),
                "ctx_1k": self.per_1k(self.ctx),
                "swtch_net_1k": self.per_1k(self.swtch_net),
                "preempt_net_1k": self.per_1k(self.preempt_net),
                "on_rx_pct": None if self.colocated is None else 100.0 * self.colocated}

    @property
    def predicted(self) -> Dict[str, float]:
        """The figures the policy predicts (see the module doc)."""
        if self.predicted_colocated is None:
            return {}
        x = 1000.0 * (1.0 - self.predicted_colocated)
        return {"xreq_1k": x, "xwake_1k": x, "on_rx_pct": 100.0 * self.predicted_colocated}

    def to_dict(self) -> dict:
        return {**asdict(self), "figures": self.figures, "predicted": self.predicted}


def _sum(run: RunSummary, seq: int, key: str) -> Optional[int]:
    """``key`` summed over the workers at snapshot ``seq``; None when one is -1."""
    vals = [w[key] for w in run.snaps[seq].values()]
    return None if any(v < 0 for v in vals) else sum(vals)


def _net(before: Optional[int], after: Optional[int], idle_before: Optional[int],
         idle_after: Optional[int], window_ms: int, idle_ms: int) -> Optional[float]:
    """after - before, less (idle_after - idle_before) * window / idle; None if unknown."""
    if None in (before, after, idle_before, idle_after):
        return None
    bg = (idle_after - idle_before) * window_ms / idle_ms if idle_ms > 0 else 0.0
    return (after - before) - bg


def run_wakeups(run: RunSummary, m: Optional[RunMetrics] = None) -> RunWakeups:
    """One request run's figures from its snapshots; ``m`` (its
    rxl.learn.metrics analysis) gives the co-location and its prediction.

    Raises LearnError for a run without the three snapshots (not a
    ``--requests`` run, or its driver stopped early), snapshots of other
    workers, or in-band counts that went back; rxl.learn.intrcnt.CounterError
    for hw.intrcnt copies that do not pair.
    """
    seqs = (SNAP_IDLE, SNAP_BEFORE, SNAP_AFTER)
    missing = [s for s in seqs if s not in run.snaps or s not in run.snap_sys]
    if missing:
        raise LearnError(f"{run.label}: no snapshot {missing[0]} (learnd S/SS lines): "
                         "not a --requests run, or its driver stopped early")
    workers = {s: sorted(run.snaps[s]) for s in seqs}
    if len({tuple(v) for v in workers.values()}) != 1 or \
            workers[SNAP_AFTER] != list(range(len(run.workers) or len(workers[SNAP_AFTER]))):
        raise LearnError(f"{run.label}: the snapshots name other workers "
                         f"({workers[SNAP_IDLE]} / {workers[SNAP_AFTER]})")
    d = {}
    for k in IN_BAND:
        for w in workers[SNAP_AFTER]:
            if run.snaps[SNAP_AFTER][w][k] < run.snaps[SNAP_BEFORE][w][k]:
                raise LearnError(f"{run.label}: worker {w}'s in-band {k} went back between "
                                 "snapshots 1 and 2")
        d[k] = _sum(run, SNAP_AFTER, k) - _sum(run, SNAP_BEFORE, k)
    t = {s: run.snap_sys[s]["t_ms"] for s in seqs}
    window, idle = t[SNAP_AFTER] - t[SNAP_BEFORE], t[SNAP_BEFORE] - t[SNAP_IDLE]
    if window < 0 or idle < 0:
        raise LearnError(f"{run.label}: snapshot times go back ({t})")
    v0, v1, v2 = (_sum(run, s, "nvcsw") for s in seqs)
    i0, i1, i2 = (_sum(run, s, "nivcsw") for s in seqs)
    ctx = None if None in (v1, v2, i1, i2) else (v2 + i2) - (v1 + i1)
    sw = {s: run.snap_sys[s]["swtch"] for s in seqs}
    swtch_net = None if min(sw.values()) < 0 else _net(
        sw[SNAP_BEFORE], sw[SNAP_AFTER], sw[SNAP_IDLE], sw[SNAP_BEFORE], window, idle)
    preempt_net: Optional[float] = None
    by_cpu: Dict[int, float] = {}
    kinds: Tuple[str, ...] = ()
    if all(s in run.intr for s in seqs):
        work = counters.intr_delta(run.intr[SNAP_BEFORE], run.intr[SNAP_AFTER])
        bg = counters.intr_delta(run.intr[SNAP_IDLE], run.intr[SNAP_BEFORE])
        kinds = counters.intr_kinds(work)
        pw, pb = counters.intr_per_cpu(work, "preempt"), counters.intr_per_cpu(bg, "preempt")
        if pw:
            scale = window / idle if idle > 0 else 0.0
            by_cpu = {c: pw[c] - pb.get(c, 0) * scale for c in sorted(pw)}
            preempt_net = sum(by_cpu.values())
    config, wset = config_of(run.label)
    return RunWakeups(
        label=run.label, config=config, workers_set=wset, rep=repetition_of(run.label),
        connections=_sum(run, SNAP_AFTER, "rconns") or 0, requests=d["reqs"],
        xreqs=d["xreqs"], ureqs=d["ureqs"], slept=d["slept"], xwakes=d["xwakes"], ctx=ctx,
        window_ms=window, idle_ms=idle, swtch_net=swtch_net, preempt_net=preempt_net,
        preempt_net_by_cpu=by_cpu, intr_kinds=kinds,
        colocated=m.colocated if m else None,
        predicted_colocated=m.predicted_colocated if m else None,
        policy=m.policy if m else "hash")


def median_range(values: Sequence[float]) -> Tuple[float, float, float]:
    """(median, min, max) of ``values``; ValueError when empty (as
    rxl.bench.wakeups.median_range, the Linux table's)."""
    if not values:
        raise ValueError("no values")
    return statistics.median(values), min(values), max(values)


def fmt(values: Sequence[float], digits: int = 0) -> str:
    """``median (min-max)``, or the value when all agree (rxl.bench.wakeups.fmt)."""
    m, lo, hi = (f"{round(v, digits) + 0.0:.{digits}f}" for v in median_range(values))
    return m if lo == hi else f"{m} ({lo}-{hi})"


def group(runs: Sequence[RunWakeups]) -> Dict[Tuple[str, str], List[RunWakeups]]:
    """Runs by (configuration, worker set), repetitions in order."""
    out: Dict[Tuple[str, str], List[RunWakeups]] = {}
    for r in sorted(runs, key=lambda r: (r.config, r.workers_set, r.rep)):
        out.setdefault((r.config, r.workers_set), []).append(r)
    return out


def summary(runs: Sequence[RunWakeups]) -> dict:
    """Every figure's ``(median, min, max)`` over ``runs`` (the repetitions
    of one configuration; a figure not counted in every run is left out),
    and the prediction (the runs' median of it: each run predicts from its
    own counts).  Raises ValueError for no runs."""
    if not runs:
        raise ValueError("no runs")
    out: Dict[str, object] = {"runs": len(runs), "figures": {}, "predicted": {}}
    for k in runs[0].figures:
        vals = [r.figures[k] for r in runs]
        if all(v is not None for v in vals):
            out["figures"][k] = median_range(vals)
    for k in runs[0].predicted:
        vals = [r.predicted.get(k) for r in runs]
        if all(v is not None for v in vals):
            out["predicted"][k] = median_range(vals)[0]
    return out


#: The table's columns: (figure, heading, digits).
COLUMNS = (("requests", "requests", 0), ("xreq_1k", "x-cpu req/1k", 0),
           ("slept_1k", "slept waits/1k", 0), ("xwake_1k", "x-cpu wakeups/1k", 0),
           ("ctx_1k", "worker ctx sw/1k", 0), ("swtch_net_1k", "guest ctx sw net/1k", 0),
           ("preempt_net_1k", "preempt IPIs net/1k", 0), ("on_rx_pct", "conns on rx cpu %", 1))
#: Configurations in table order (rxl.learn.plan.CONFIGS).
_ORDER = ("pristine", "learn-off", "tagged", "learn-on", "learn-spread")
#: The hash's configurations for the target line; the deal's are
#: rxl.learn.metrics.DEAL_CONFIGS.
HASH_CONFIGS = ("learn-off", "pristine")


def _cell(vals: Optional[Tuple[float, float, float]], digits: int,
          pred: Optional[float]) -> str:
    if vals is None:
        return "-"
    return fmt(list(vals), digits) + ("" if pred is None else f" [p {pred:.{digits}f}]")


def table(runs: Sequence[RunWakeups]) -> List[str]:
    """Markdown rows, one per configuration: median (min-max) over its
    repetitions, ``[p x]`` the prediction; then the issue's target per
    worker set where the hash and a deal both ran: the deal's cross-CPU
    wakeups per 1,000 requests <= 10% of the hash's (measured, not asserted)."""
    groups_ = group(runs)
    order = {c: i for i, c in enumerate(_ORDER)}
    lines = ["| run | reps | policy | " + " | ".join(h for _, h, _ in COLUMNS) + " |",
             "|---|---|---|" + "---|" * len(COLUMNS)]
    sums = {}
    for key in sorted(groups_, key=lambda k: (k[1], order.get(k[0], 9))):
        rs = groups_[key]
        s = sums[key] = summary(rs)
        lines.append(f"| {key[0]}.{key[1]} | {s['runs']} | {rs[0].policy} | " + " | ".join(
            _cell(s["figures"].get(k), dg, s["predicted"].get(k)) for k, _, dg in COLUMNS)
            + " |")
    for (c, w), s in sorted(sums.items()):
        if c not in DEAL_CONFIGS:
            continue
        for h in HASH_CONFIGS:
            hs = sums.get((h, w))
            if hs is None or "xwake_1k" not in hs["figures"] or "xwake_1k" not in s["figures"]:
                continue
            hash_x, deal_x = hs["figures"]["xwake_1k"][0], s["figures"]["xwake_1k"][0]
            ratio = deal_x / hash_x if hash_x else None
            met = ratio is not None and ratio <= 0.10
            lines.append(f"target {'MET ' if met else 'MISS'} {c}.{w} x-cpu wakeups/1k <= 10% "
                         f"of {h}.{w}'s: {deal_x:.0f} vs {hash_x:.0f}"
                         + (f" ({ratio:.1%})" if ratio is not None else " (hash: none)"))
    return lines


def from_runs(summaries: Mapping[str, RunSummary],
              metrics: Mapping[str, RunMetrics]) -> Tuple[List[RunWakeups], List[str]]:
    """(figures of every request run, one error line per run that has
    snapshots but cannot be read).  Runs without any snapshot are not
    request runs and are skipped, and so are damaged runs
    (rxl.learn.results.RunSummary.damage: rxl.learn.metrics.analyze_log
    reports them, and their figures would be of numbers that contradict)."""
    out: List[RunWakeups] = []
    errors: List[str] = []
    for label, r in summaries.items():
        if (not r.snaps and not r.snap_sys) or r.damage:
            continue
        try:
            out.append(run_wakeups(r, metrics.get(label)))
        except (LearnError, counters.CounterError) as exc:
            errors.append(str(exc))
    return out, errors
