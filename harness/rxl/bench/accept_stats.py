"""Accept-distribution rig: the server's JSON per run, and summaries over runs. Pure.

:func:`parse_run` reads one run of ``acceptd`` (per worker: wakeups,
accepts, empty wakeups, CPU time), :func:`run_warnings` flags runs that
did not do what was asked, and :func:`summarise` turns the repeated runs of
one setup into a :class:`Summary` of :class:`Stat` (median and spread).
Unit-tested on recorded runs under ``tests/data/bench/``.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from typing import List, Sequence

from rxl.bench import dispersion
from rxl.bench.accept import BenchError
from rxl.bench.knobs import run_label
from rxl.bench.tables import end_warnings
from rxl.errors import json_reason

#: acceptd JSON versions understood: 1 (serial model only), 2 (
#: server models, client figures, open connections).
VERSIONS = (1, 2)


_PER_WORKER_KEYS = ("rank", "id", "wakeups", "accepts", "empty_wakeups",
                    "cpu_ms")


@dataclass
class Run:
    """One server run, workers in registration order.

    Lists are indexed by registration rank.  ``cpu_ms`` is user+system CPU
    of each worker process in ms (wait4(2)); ``vcsw`` its voluntary context
    switches, i.e. how often it went to sleep, which counts the wakeups the
    kernel delivered even when epoll_wait then found nothing and went back
    to sleep without returning.
    """

    setup: str
    workers: int
    connections: int
    work_ms: float
    connect_ok: int
    connect_failed: int
    accepted: int
    order: List[int]
    accepts: List[int]
    wakeups: List[int]
    empty_wakeups: List[int]
    cpu_ms: List[float]
    vcsw: List[int]
    local: List[int]
    killed: List[bool]
    tagged: List[bool]
    exclusive: List[bool]
    elapsed_ms: int = 0
    deadline_hit: bool = False
    raw: dict = field(default_factory=dict, repr=False)

    @property
    def lost(self) -> int:
        """Connections the client completed that no worker accepted
        (never negative: accepted aborting clients are not in connect_ok)."""
        return max(0, self.connect_ok - self.accepted)

    @property
    def label(self) -> str:
        """The run's parameters as a label (:func:`knobs.run_label`)."""
        return run_label(self.raw or {"setup": self.setup,
                                      "work_us": self.work_ms * 1000})

    def share(self, rank: int) -> float:
        """Fraction (0..1) of accepted connections taken by ``rank``."""
        total = sum(self.accepts)
        return self.accepts[rank] / total if total else 0.0

    def as_json(self) -> dict:
        """The --json per-run record: lists in registration order."""
        return {"accepts": self.accepts, "wakeups": self.wakeups,
                "empty_wakeups": self.empty_wakeups, "cpu_ms": self.cpu_ms,
                "vcsw": self.vcsw, "local": self.local, "order": self.order,
                "killed": self.killed, "connect_ok": self.connect_ok,
                "connect_failed": self.connect_failed,
                "accepted": self.accepted, "elapsed_ms": self.elapsed_ms,
                "label": self.label, "dispersion": _finite(
                    dispersion.figures(self.accepts)),
                **{k: [w.get(k) for w in self.raw.get("per_worker", [])]
                   for k in ("open_max", "open_end", "handled", "resets",
                             "busy_at_stop", "killed_at_end")
                   if self.raw.get("version", 1) >= 2},
                **{k: self.raw[k] for k in _RUN_EXTRAS if k in self.raw}}


#: Run-level fields of acceptd version 2 carried into --json as they are.
_RUN_EXTRAS = ("server", "work_kind", "hold_us", "accepts_per_wakeup",
               "client", "concurrency", "abort_permille", "abort_kind",
               "aborted", "aborted_established", "resets", "completed",
               "conn_per_s", "connect_us",
               "response_us", "queue_wait_us", "acceptor", "untagged_rank",
               "reorder_every", "lag_us", "model_agreement", "ebpf_summary",
               "deal_counts", "wakeups_prediction")


def _finite(d: dict) -> dict:
    """JSON has no infinity: an infinite ratio becomes null."""
    return {k: (None if isinstance(v, float) and v == float("inf") else v)
            for k, v in d.items()}


def parse_run(text: str) -> Run:
    """Parse acceptd's stdout into a Run.

    Raises BenchError if the text is not one JSON object of an acceptd
    version in :data:`VERSIONS` or lacks a per-worker field.  The server already orders
    ``per_worker`` by registration rank; that order is checked, not trusted.
    """
    try:
        d = json.loads(text)
    except ValueError as e:
        raise BenchError(f"server output is not JSON: {json_reason(e)}") from None
    if not isinstance(d, dict) or d.get("tool") != "acceptd":
        raise BenchError("server output is not an acceptd summary")
    if d.get("version") not in VERSIONS:
        raise BenchError(f"acceptd summary version {d.get('version')!r}, "
                         f"want one of {VERSIONS}")
    pw = d.get("per_worker")
    if not isinstance(pw, list) or len(pw) != d.get("workers"):
        raise BenchError("acceptd summary: per_worker does not match "
                         "workers")
    for i, w in enumerate(pw):
        missing = [k for k in _PER_WORKER_KEYS if k not in w]
        if missing:
            raise BenchError(f"acceptd summary: worker {i} lacks "
                             f"{', '.join(missing)}")
        if w["rank"] != i:
            raise BenchError("acceptd summary: per_worker not in rank order")
    return Run(
        setup=d["setup"], workers=d["workers"],
        connections=d["connections"], work_ms=d.get("work_us", 0) / 1000.0,
        connect_ok=d["connect_ok"], connect_failed=d["connect_failed"],
        accepted=d["accepted"], order=[w["id"] for w in pw],
        accepts=[w["accepts"] for w in pw],
        wakeups=[w["wakeups"] for w in pw],
        empty_wakeups=[w["empty_wakeups"] for w in pw],
        cpu_ms=[round(float(w["cpu_ms"]), 3) for w in pw],
        vcsw=[w.get("vcsw", 0) for w in pw],
        local=[w.get("local", 0) for w in pw],
        killed=[bool(w.get("killed")) for w in pw],
        tagged=[bool(w.get("tagged")) for w in pw],
        exclusive=[bool(w.get("exclusive")) for w in pw],
        elapsed_ms=d.get("elapsed_ms", 0),
        deadline_hit=bool(d.get("deadline_hit")), raw=d)


def run_warnings(run: Run) -> List[str]:
    """Why a run's figures may not mean what the table implies.

    Returns human-readable strings (empty when the run is clean): the
    deadline cut the client short, connects failed, or connected clients
    were never accepted (on Linux a killed SO_REUSEPORT listener's queue
    is dropped unless net.ipv4.tcp_migrate_req is set).
    """
    out = []
    if run.deadline_hit:
        out.append("server deadline hit; the client stopped early")
    tried = run.connect_ok + run.connect_failed + run.raw.get("aborted", 0)
    if tried < run.connections:
        out.append(f"only {tried} of {run.connections} connections "
                   f"attempted")
    if run.connect_failed:
        out.append(f"{run.connect_failed} connects failed")
    if run.lost:
        out.append(f"{run.lost} connected clients never accepted")
    late = run.raw.get("aborted_established", 0)
    if late and run.raw.get("abort_kind") == "handshake":
        out.append(f"{late} of {run.raw.get('aborted')} handshake aborts "
                   f"came after the handshake had completed (over "
                   f"loopback it completes inside connect(2)): resets")
    return out + end_warnings(run.raw)


@dataclass(frozen=True)
class Stat:
    """Mean and min-max of one figure over repetitions."""

    mean: float
    lo: float
    hi: float

    @classmethod
    def of(cls, values: Sequence[float]) -> "Stat":
        """Raises BenchError on an empty sequence."""
        if not values:
            raise BenchError("no repetitions to summarise")
        return cls(statistics.fmean(values), min(values), max(values))

    def fmt(self, digits: int = 0, pct: bool = False) -> str:
        """``mean (lo-hi)``; ``pct`` renders fractions as percent."""
        k = 100.0 if pct else 1.0
        unit = "%" if pct else ""
        m, a, b = (f"{v * k:.{digits}f}"
                   for v in (self.mean, self.lo, self.hi))
        if a == b:
            return f"{m}{unit}"
        return f"{m}{unit} ({a}-{b})"

    def as_json(self) -> dict:
        """``{"mean", "min", "max"}``, same units as the figure."""
        return {"mean": self.mean, "min": self.lo, "max": self.hi}


@dataclass
class Summary:
    """One setup at one work time, over its repetitions.

    Totals are over all workers of a run; shares are fractions 0..1 of the
    accepted connections; ``per_rank`` holds each rank's accepts as a Stat.
    ``median_run`` is the run whose top share is the median, the single run
    whose distribution the table shows (seed 004 shows single runs).
    """

    setup: str
    work_ms: float
    runs: List[Run]
    wakeups: Stat
    accepts: Stat
    empty: Stat
    vcsw: Stat
    cpu_ms: Stat
    first_share: Stat
    last_share: Stat
    top_share: Stat
    local_share: Stat
    lost: Stat
    per_rank: List[Stat]
    median_run: Run

    @property
    def label(self) -> str:
        """Table label: the setup and every parameter off its default, as
        the runs report them (:func:`knobs.run_label`)."""
        return self.runs[0].label

    def as_json(self) -> dict:
        """The --json record of this setup: its runs and the summary."""
        figs = [dispersion.figures(r.accepts) for r in self.runs]
        mm = [f["max_min"] for f in figs]
        return {"setup": self.setup, "label": self.label,
                "work_ms": self.work_ms,
                "runs": [r.as_json() for r in self.runs],
                "summary": {
                    "wakeups": self.wakeups.as_json(),
                    "accepts": self.accepts.as_json(),
                    "empty_wakeups": self.empty.as_json(),
                    "vcsw": self.vcsw.as_json(),
                    "cpu_ms": self.cpu_ms.as_json(),
                    "first_share": self.first_share.as_json(),
                    "last_share": self.last_share.as_json(),
                    "top_share": self.top_share.as_json(),
                    "local_share": self.local_share.as_json(),
                    "lost": self.lost.as_json(),
                    "accepts_by_rank": [s.as_json() for s in self.per_rank],
                    "idle_workers": Stat.of([f["idle"] for f in figs])
                    .as_json(),
                    "cv": Stat.of([f["cv"] for f in figs]).as_json(),
                    "top_k_share": Stat.of([f["top_k"] for f in figs])
                    .as_json(),
                    "top_k": figs[0]["k"],
                    "max_min_finite": [x for x in mm if x != float("inf")],
                    "runs_with_idle_worker": sum(1 for f in figs
                                                 if f["idle"]),
                }}


def summarise(runs: Sequence[Run]) -> Summary:
    """Summarise repetitions of one setup at one work time.

    Raises BenchError if ``runs`` is empty or mixes setups, worker counts
    or work times.
    """
    if not runs:
        raise BenchError("no runs to summarise")
    r0 = runs[0]
    for r in runs:
        if (r.setup, r.workers, r.work_ms) != (r0.setup, r0.workers,
                                               r0.work_ms):
            raise BenchError("runs of different setups cannot be "
                             "summarised together")

    def local_share(r: Run) -> float:
        total = sum(r.accepts)
        return sum(r.local) / total if total else 0.0

    def top(r: Run) -> float:
        return max(r.share(i) for i in range(r.workers))

    ranked = sorted(runs, key=top)
    return Summary(
        setup=r0.setup, work_ms=r0.work_ms, runs=list(runs),
        wakeups=Stat.of([sum(r.wakeups) for r in runs]),
        accepts=Stat.of([sum(r.accepts) for r in runs]),
        empty=Stat.of([sum(r.empty_wakeups) for r in runs]),
        vcsw=Stat.of([sum(r.vcsw) for r in runs]),
        cpu_ms=Stat.of([sum(r.cpu_ms) for r in runs]),
        first_share=Stat.of([r.share(0) for r in runs]),
        last_share=Stat.of([r.share(r.workers - 1) for r in runs]),
        top_share=Stat.of([top(r) for r in runs]),
        local_share=Stat.of([local_share(r) for r in runs]),
        lost=Stat.of([r.lost for r in runs]),
        per_rank=[Stat.of([r.accepts[i] for r in runs])
                  for i in range(r0.workers)],
        median_run=ranked[(len(ranked) - 1) // 2])
