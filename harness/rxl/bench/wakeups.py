"""Cross-CPU wakeups of the request workload, measured and predicted. Pure.

The mechanism behind seed 000's headline ("it cut cross-CPU wakeups from
~292k to ~15k and cycles per request by 11.3% against a plain hash", a
two-socket Xeon E5-2470 v2) is countable anywhere: a connection whose
worker sits on another CPU than the one receiving it costs a cross-CPU
wakeup for every request it carries.  ``acceptd -q`` (``rxl bench accept
--requests N``) runs that workload over loopback; this module turns one
run's JSON into figures per 1,000 requests and sets them beside what the
selection policy predicts.

Receiving CPU over loopback: a segment sent on CPU c is processed in the
softirq its send raises on c (loopback_xmit -> netif_rx on the sending
CPU; no RPS on lo), so the SYN selects the listener on c and every
request wakes its worker from c.  acceptd pins one client process per
receiving CPU, and every request carries the CPU its send ran on.

Three counts of the same thing, from three places:

* in-band, exact per process: a worker (client) counts a wakeup when a
  wait that found nothing ready returned with an event, and calls it
  cross-CPU when the first ready request (reply) was sent on another CPU
  (``wk_remote``);
* the kernel's IPIs: ``RES`` of /proc/interrupts per CPU (rxl.bench.counters),
  minus the background rate of an idle window before the requests, scaled
  to the phase.  A wakeup of a task whose CPU is idle costs one; one whose
  CPU is busy costs none unless it preempts, so RES <= in-band wakeups;
* context switches of the workers and clients (/proc/<pid>/status).

The prediction (:func:`predict`) applies the setup's selection rule to the
connections per receiving CPU: ``hash`` (reuseport: Linux's
reciprocal_scale over the group, uniform), ``incoming-cpu`` (Linux >= 6.2
reuseport_select_sock_by_hash: from the hash's index, the first listener
whose SO_INCOMING_CPU is this CPU, else the one at the index), ``cbpf``
(acceptd's classic BPF: cpu + ncpu * (hash % groups), past the group the
kernel's hash), ``node-rr`` (seed 003: the node's listeners in turn, the
whole group when the node has none) and ``deal`` (the dealt map:
``model.Deal.slots_of``; a CPU without slots is the kernel's hash).  hash,
incoming-cpu without an untagged listener and deal are
``rxl outcomes``'s hash, exact and deal policies (tests/unit/bench).
With one request in flight per client and the worker idle between
requests, each cross-CPU request wakes its worker once from another CPU
and, over loopback, its reply wakes the client once: per 1,000 requests
the prediction is 1000 x remote worker wakeups and 2000 x remote IPIs.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from fractions import Fraction
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from rxl.bench import counters
from rxl.bench.counters import CounterError
from rxl.decide import model

#: Setup -> the rule :func:`predict` applies; setups not named here (a
#: shared listener: the scheduler decides) get no prediction.
SETUP_POLICY = {"reuseport": "hash", "incoming-cpu": "incoming-cpu",
                "cbpf-cpu": "cbpf", "ebpf-numa-rr": "node-rr",
                "ebpf-deal": "deal"}
#: Figures per run, their units in the table's head.
FIGURES = ("requests", "remote_pct", "worker_wakeups_1k",
           "client_wakeups_1k", "res_1k", "bg_res_1k", "net_res_1k",
           "cal_1k", "vol_1k", "invol_1k", "client_ctx_1k",
           "local_conns_pct", "fed", "cpu_us", "softirq_ms", "phase_s",
           "krps")


# ------------------------------------------------------------ prediction


@dataclass(frozen=True)
class Prediction:
    """Where a policy sends each receiving CPU's connections.

    ``worker_cpus[r]``: rank r's CPU; ``rx_share[c]``: share of all
    connections (and, each carrying the same number, of requests)
    received on CPU c; ``matrix[c][r]``: share of CPU c's connections
    that rank r gets (each row sums to 1).  Exact fractions.
    """

    policy: str
    worker_cpus: Tuple[int, ...]
    rx_share: Dict[int, Fraction]
    matrix: Dict[int, Tuple[Fraction, ...]]

    def shares(self) -> Tuple[Fraction, ...]:
        """Each rank's share of all connections."""
        n = len(self.worker_cpus)
        return tuple(sum((self.rx_share[c] * self.matrix[c][r]
                          for c in self.matrix), Fraction(0))
                     for r in range(n))

    def remote(self) -> Fraction:
        """Share of connections whose worker is not on the receiving CPU."""
        return sum((self.rx_share[c] * m
                    for c, row in self.matrix.items()
                    for r, m in enumerate(row) if self.worker_cpus[r] != c),
                   Fraction(0))

    def wakeups_by_cpu(self) -> Dict[int, Fraction]:
        """Cross-CPU wakeups per request that land on each CPU: the
        requests its workers get from other CPUs, plus the replies its
        client gets from workers elsewhere (loopback: the reply is sent,
        and wakes the client, from the worker's CPU)."""
        cpus = set(self.worker_cpus) | set(self.matrix)
        out = dict.fromkeys(sorted(cpus), Fraction(0))
        for c, row in self.matrix.items():
            for r, m in enumerate(row):
                w = self.worker_cpus[r]
                if w != c:
                    out[w] += self.rx_share[c] * m     # the worker
                    out[c] += self.rx_share[c] * m     # the client
        return out

    def as_json(self) -> dict:
        """Floats: policy, remote share, shares by rank, wakeups per
        request by CPU."""
        return {"policy": self.policy, "remote": float(self.remote()),
                "shares": [float(s) for s in self.shares()],
                "wakeups_by_cpu": {str(c): float(v) for c, v in
                                   self.wakeups_by_cpu().items()}}


def _uniform(n: int) -> Tuple[Fraction, ...]:
    return tuple(Fraction(1, n) for _ in range(n))


def _incoming_cpu(cpus: Sequence[int], untagged: Optional[int], c: int) \
        -> Tuple[Fraction, ...]:
    # Linux net/core/sock_reuseport.c, reuseport_select_sock_by_hash():
    # from i = reciprocal_scale(hash, n), the first listener whose
    # sk_incoming_cpu is this CPU, else the one at i (every listener is
    # a valid candidate).  The index is uniform over 0..n-1.
    n = len(cpus)
    got = [Fraction(0)] * n
    for i in range(n):
        pick = i
        for k in range(n):
            j = (i + k) % n
            if j != untagged and cpus[j] == c:
                pick = j
                break
        got[pick] += Fraction(1, n)
    return tuple(got)


def _cbpf(n: int, ncpu: int, c: int) -> Tuple[Fraction, ...]:
    # acceptd.c attach_cbpf(): index = cpu + ncpu * (rxhash % groups),
    # groups = workers / ncpu (at least 1); an index past the group makes
    # the kernel fall back to its hash (socket(7)).
    groups = max(1, n // ncpu)
    got = [Fraction(0)] * n
    for g in range(groups):
        idx = c + ncpu * g
        if idx < n:
            got[idx] += Fraction(1, groups)
        else:
            for r in range(n):
                got[r] += Fraction(1, groups * n)
    return tuple(got)


def _node_rr(cpus: Sequence[int], nodes: Mapping[int, int], c: int) \
        -> Tuple[Fraction, ...]:
    # reuseport_sel.bpf.c numa_rr: node = cpu_node[cpu] (an array map:
    # 0 when unset), that node's range in turn, the whole group when the
    # node has no listener.
    node = nodes.get(c, 0)
    mine = [r for r, w in enumerate(cpus) if nodes.get(w, 0) == node]
    if not mine:
        return _uniform(len(cpus))
    return tuple(Fraction(1, len(mine)) if r in mine else Fraction(0)
                 for r in range(len(cpus)))


def _deal(d: Optional[model.Deal], n: int, c: int) -> Tuple[Fraction, ...]:
    # reuseport_sel.bpf.c deal: the CPU's range of the map, slot
    # offset + (hash * count >> 32), i.e. each slot alike; a CPU without
    # slots (or no map) is SK_PASS without a selection: the kernel's hash.
    slots = d.slots_of(c) if d is not None else ()
    if not slots:
        return _uniform(n)
    got = [Fraction(0)] * n
    for m in slots:
        got[m] += Fraction(1, len(slots))
    return tuple(got)


def predict(setup: str, worker_cpus: Sequence[int],
            rx_conns: Mapping[int, int], *, ncpu: int,
            deal: Optional[model.Deal] = None,
            untagged: Optional[int] = None,
            nodes: Optional[Mapping[int, int]] = None) -> Optional[Prediction]:
    """The setup's prediction for workers on ``worker_cpus`` (by rank)
    and ``rx_conns`` ({receiving CPU: connections}); None for a setup
    without a rule (:data:`SETUP_POLICY`).  ``deal`` is ebpf-deal's map,
    ``untagged`` incoming-cpu's untagged rank (None: none), ``nodes``
    ebpf-numa-rr's {cpu: node}.  Raises ValueError on no workers or no
    connections."""
    policy = SETUP_POLICY.get(setup)
    if policy is None:
        return None
    n = len(worker_cpus)
    total = sum(v for v in rx_conns.values() if v > 0)
    if n == 0 or total == 0:
        raise ValueError("a prediction needs workers and connections")
    matrix = {}
    for c in sorted(rx_conns):
        if rx_conns[c] <= 0:
            continue
        if policy == "hash":
            row = _uniform(n)
        elif policy == "incoming-cpu":
            row = _incoming_cpu(worker_cpus, untagged, c)
        elif policy == "cbpf":
            row = _cbpf(n, ncpu, c)
        elif policy == "node-rr":
            row = _node_rr(worker_cpus, nodes or {}, c)
        else:
            row = _deal(deal, n, c)
        matrix[c] = row
    return Prediction(policy, tuple(worker_cpus),
                      {c: Fraction(rx_conns[c], total) for c in matrix},
                      matrix)


def client_conns(connections: int, rx_cpus: Sequence[int]) -> Dict[int, int]:
    """Connections per receiving CPU as acceptd splits them: connection i
    is client i mod len(rx_cpus)'s."""
    k = len(rx_cpus)
    return {c: connections // k + (i < connections % k)
            for i, c in enumerate(rx_cpus)}


# ------------------------------------------------------------ one run


@dataclass
class RunWakeups:
    """One run's request phase.  Counts are totals over the phase; the
    ``*_by_cpu`` maps are per CPU id; ``bg_res_by_cpu`` is the idle
    window's RES rate scaled to the phase's length."""

    requests: int
    remote_requests: int
    rank_requests: List[int]
    worker_wk: int
    worker_wk_remote: int
    client_wk: int
    client_wk_remote: int
    phase_s: float
    idle_s: float
    res_by_cpu: Dict[int, int]
    cal_by_cpu: Dict[int, int]
    bg_res_by_cpu: Dict[int, float]
    workers: counters.ProcCounters
    clients: counters.ProcCounters
    softirq_ms_by_cpu: Dict[int, float]
    conns: int
    local_conns: int

    def net_res_by_cpu(self) -> Dict[int, float]:
        """RES minus the background, per CPU."""
        return {c: v - self.bg_res_by_cpu.get(c, 0.0)
                for c, v in self.res_by_cpu.items()}

    def figures(self) -> Dict[str, float]:
        """The table's figures (:data:`FIGURES`); per 1k requests where
        named ``_1k``; ``fed`` is the least-fed worker's requests over an
        even share; ``cpu_us`` workers' and clients' run time per request
        (schedstat; on a kernel without IRQ_TIME_ACCOUNTING it includes
        the softirq work run in their context)."""
        k = 1000.0 / self.requests
        n = len(self.rank_requests)
        res = sum(self.res_by_cpu.values())
        bg = sum(self.bg_res_by_cpu.values())
        return {
            "requests": float(self.requests),
            "remote_pct": 100.0 * self.remote_requests / self.requests,
            "worker_wakeups_1k": k * self.worker_wk_remote,
            "client_wakeups_1k": k * self.client_wk_remote,
            "res_1k": k * res, "bg_res_1k": k * bg,
            "net_res_1k": k * (res - bg),
            "cal_1k": k * sum(self.cal_by_cpu.values()),
            "vol_1k": k * self.workers.voluntary,
            "invol_1k": k * self.workers.nonvoluntary,
            "client_ctx_1k": k * (self.clients.voluntary +
                                  self.clients.nonvoluntary),
            "local_conns_pct": 100.0 * self.local_conns / self.conns
            if self.conns else 0.0,
            "fed": min(self.rank_requests) * n / self.requests,
            "cpu_us": (self.workers.run_ns + self.clients.run_ns) /
            self.requests / 1000.0,
            "softirq_ms": sum(self.softirq_ms_by_cpu.values()),
            "phase_s": self.phase_s,
            "krps": self.requests / self.phase_s / 1000.0
            if self.phase_s > 0 else 0.0,
        }


def _procs(snap: dict, role: str, n: int, what: str) \
        -> List[counters.ProcCounters]:
    got = {p["index"]: p for p in snap.get("procs", [])
           if p.get("role") == role}
    if sorted(got) != list(range(n)):
        raise CounterError(f"snapshot {what} lacks a {role} process")
    return [counters.parse_proc(got[i]["text"]) for i in range(n)]


def _sum(items: Sequence[counters.ProcCounters]) -> counters.ProcCounters:
    return counters.ProcCounters(*(sum(getattr(p, f) for p in items)
                                   for f in counters.ProcCounters.
                                   __dataclass_fields__))


def _pair(snaps: dict, a: str, b: str, role: str, n: int) \
        -> counters.ProcCounters:
    before = _procs(snaps[a], role, n, a)
    after = _procs(snaps[b], role, n, b)
    return _sum([y.minus(x) for x, y in zip(before, after)])


def run_wakeups(raw: dict) -> RunWakeups:
    """The request phase of one acceptd run (its JSON, parsed).

    Fails closed: raises CounterError when the run has no request block,
    a client failed or did not finish, the workers' and clients' counts
    disagree, or a snapshot is missing or unreadable.
    """
    rq = raw.get("requests")
    if not rq:
        raise CounterError("the run has no request phase (acceptd -q)")
    clients, workers = rq.get("clients", []), rq.get("workers", [])
    bad = [c for c in clients if c.get("error") or not c.get("done")]
    if bad:
        c = bad[0]
        raise CounterError(f"client on CPU {c.get('cpu')} failed: "
                           f"{c.get('error') or 'did not finish'}")
    want = sum(c["conns"] for c in clients) * rq["per_connection"]
    replies = sum(c["replies"] for c in clients)
    served = sum(w["rq"] for w in workers)
    if not replies == served == want:
        raise CounterError(f"requests disagree: {want} wanted, {replies} "
                           f"answered, {served} served")
    if any(w["rq_bad"] for w in workers) or any(c["rp_bad"] for c in clients):
        raise CounterError("a malformed request or reply was seen")
    snaps = rq.get("snapshots") or {}
    for name in ("before", "after"):
        if not snaps.get(name) or snaps[name].get("interrupts") is None:
            raise CounterError(f"snapshot {name} missing (not Linux?)")
    ib = counters.parse_interrupts(snaps["before"]["interrupts"])
    ia = counters.parse_interrupts(snaps["after"]["interrupts"])
    phase_s = (snaps["after"]["t_ns"] - snaps["before"]["t_ns"]) / 1e9
    res = counters.irq_delta(ib, ia, "RES")
    cal = counters.irq_delta(ib, ia, "CAL")
    bg: Dict[int, float] = {c: 0.0 for c in res}
    idle_s = 0.0
    if snaps.get("idle0") and snaps.get("idle1"):
        idle_s = (snaps["idle1"]["t_ns"] - snaps["idle0"]["t_ns"]) / 1e9
        if idle_s > 0:
            d = counters.irq_delta(
                counters.parse_interrupts(snaps["idle0"]["interrupts"]),
                counters.parse_interrupts(snaps["idle1"]["interrupts"]),
                "RES")
            bg = {c: d[c] * phase_s / idle_s for c in res}
    tck = rq.get("clk_tck") or 100
    st = counters.stat_delta(counters.parse_stat(snaps["before"]["stat"]),
                             counters.parse_stat(snaps["after"]["stat"]))
    pw = raw.get("per_worker", [])
    return RunWakeups(
        requests=served,
        remote_requests=sum(w["rq"] - w["rq_local"] for w in workers),
        rank_requests=[w["rq"] for w in workers],
        worker_wk=sum(w["wk"] for w in workers),
        worker_wk_remote=sum(w["wk_remote"] for w in workers),
        client_wk=sum(c["wk"] for c in clients),
        client_wk_remote=sum(c["wk_remote"] for c in clients),
        phase_s=phase_s, idle_s=idle_s, res_by_cpu=res, cal_by_cpu=cal,
        bg_res_by_cpu=bg,
        workers=_pair(snaps, "before", "after", "worker", len(workers)),
        clients=_pair(snaps, "before", "after", "client", len(clients)),
        softirq_ms_by_cpu={c: v["softirq"] * 1000.0 / tck
                           for c, v in st.items()},
        conns=sum(w.get("accepts", 0) for w in pw),
        local_conns=sum(w.get("local", 0) for w in pw))


def predicted_figures(pred: Mapping) -> Dict[str, float]:
    """A prediction's (``Prediction.as_json``) figures in the table's
    units: cross-CPU requests in percent, worker wakeups per 1k requests
    (one per cross-CPU request), RES per 1k (two: the worker's and, over
    loopback, the client's), the least-fed worker over an even share."""
    shares = pred["shares"]
    return {"remote_pct": 100.0 * pred["remote"],
            "worker_wakeups_1k": 1000.0 * pred["remote"],
            "net_res_1k": 2000.0 * pred["remote"],
            "fed": min(shares) * len(shares)}


# ---------------------------------------------------------- over runs


def median_range(values: Sequence[float]) -> Tuple[float, float, float]:
    """(median, min, max); ValueError when empty."""
    if not values:
        raise ValueError("no values")
    return statistics.median(values), min(values), max(values)


def fmt(values: Sequence[float], digits: int = 0) -> str:
    """``median (min-max)``, or the value when all runs agree."""
    # round() + 0.0: -0.3 prints as 0, not -0.
    m, lo, hi = (f"{round(v, digits) + 0.0:.{digits}f}"
                 for v in median_range(values))
    return m if lo == hi else f"{m} ({lo}-{hi})"


def deviation(measured: float, predicted: float) -> Optional[float]:
    """(measured - predicted) / predicted, or None when nothing was
    predicted."""
    if predicted == 0:
        return None
    return (measured - predicted) / predicted


def summary(runs: Sequence[RunWakeups], pred: Optional[Mapping]) -> dict:
    """Median, min and max of every figure over the repetitions, the
    per-CPU RES (raw, background, net) medians, and the prediction's
    figures and per-CPU wakeups per 1k requests."""
    figs = [r.figures() for r in runs]
    out = {"runs": len(runs),
           "figures": {k: dict(zip(("median", "min", "max"),
                                   median_range([f[k] for f in figs])))
                       for k in FIGURES}}
    cpus = sorted(runs[0].res_by_cpu)
    per_cpu = {}
    for c in cpus:
        k = [1000.0 / r.requests for r in runs]
        per_cpu[str(c)] = {
            "res_1k": statistics.median(x * r.res_by_cpu[c]
                                        for x, r in zip(k, runs)),
            "bg_1k": statistics.median(x * r.bg_res_by_cpu[c]
                                       for x, r in zip(k, runs)),
            "net_1k": statistics.median(x * r.net_res_by_cpu()[c]
                                        for x, r in zip(k, runs))}
        if pred is not None:
            per_cpu[str(c)]["pred_1k"] = 1000.0 * pred[
                "wakeups_by_cpu"].get(str(c), 0.0)
    out["per_cpu"] = per_cpu
    if pred is not None:
        out["prediction"] = dict(pred)
        out["predicted"] = predicted_figures(pred)
        med = {k: v["median"] for k, v in out["figures"].items()}
        out["deviation"] = {k: deviation(med[k], v)
                            for k, v in out["predicted"].items()}
    return out


# ------------------------------------------------------------- tables

COLUMNS = ("setup", "requests", "x-cpu req %", "worker x-cpu wakeups/1k",
           "client x-cpu wakeups/1k", "RES/1k net", "bg RES/1k",
           "ctx sw/1k vol+invol", "conns on rx cpu", "least fed",
           "cpu us/req", "softirq ms")
CPU_COLUMNS = ("setup", "cpu", "RES/1k", "background/1k", "net/1k",
               "predicted/1k")
NOTES = (
    "median (min-max) over repetitions; [p] what the setup's rule "
    "predicts (rxl.bench.wakeups.predict; hash/exact/deal as rxl "
    "outcomes), +x% the median's deviation from it.",
    "x-cpu req: requests served on another CPU than the one their send "
    "ran on (over loopback: the receiving CPU).",
    "worker/client x-cpu wakeups: waits that slept and were ended by a "
    "request (reply) sent on another CPU, as the process saw it.",
    "RES/1k net: rescheduling IPIs (/proc/interrupts, all CPUs) per 1k "
    "requests minus the idle window's rate; predicted two per cross-CPU "
    "request (the worker's wakeup and, over loopback, the client's).",
    "least fed: the least-served worker's requests over an even share "
    "(>= 0.5: every worker fed).  cpu us/req: workers' and clients' run "
    "time (schedstat) per request, this host's.",
)


def _cell(vals: Sequence[float], digits: int, pred: Optional[float] = None) \
        -> str:
    text = fmt(vals, digits)
    if pred is None:
        return text
    dev = deviation(statistics.median(vals), pred)
    dtext = "" if dev is None else f" {dev:+.0%}"
    return f"{text} [p {pred:.{digits}f}{dtext}]"


def rows(items: Sequence[Tuple[str, Sequence[RunWakeups],
                               Optional[Mapping]]]) -> List[List[str]]:
    """The wakeup table: one row per (label, runs, prediction)."""
    out = []
    for label, runs, pred in items:
        figs = [r.figures() for r in runs]
        p = predicted_figures(pred) if pred is not None else {}

        def col(key: str, digits: int = 0) -> str:
            return _cell([f[key] for f in figs], digits, p.get(key))
        out.append([
            label, fmt([f["requests"] for f in figs]),
            col("remote_pct", 1), col("worker_wakeups_1k"),
            fmt([f["client_wakeups_1k"] for f in figs]),
            col("net_res_1k"), fmt([f["bg_res_1k"] for f in figs], 1),
            fmt([f["vol_1k"] + f["invol_1k"] for f in figs]),
            fmt([f["local_conns_pct"] for f in figs], 0) + "%",
            col("fed", 2), fmt([f["cpu_us"] for f in figs], 1),
            fmt([f["softirq_ms"] for f in figs])])
    return out


def cpu_rows(items: Sequence[Tuple[str, Sequence[RunWakeups],
                                   Optional[Mapping]]]) -> List[List[str]]:
    """Per setup and CPU: RES, background and net per 1k requests
    (medians) and the predicted cross-CPU wakeups landing there."""
    out = []
    for label, runs, pred in items:
        s = summary(runs, pred)
        for c, v in s["per_cpu"].items():
            out.append([label, c, f"{v['res_1k']:.0f}", f"{v['bg_1k']:.1f}",
                        f"{round(v['net_1k']) + 0.0:.0f}",
                        f"{v['pred_1k']:.0f}" if "pred_1k" in v else "-"])
    return out
