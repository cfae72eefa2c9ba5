"""A learning run's metrics beside what the model predicts, and the table.

:func:`analyze` turns one :class:`~rxl.learn.results.RunSummary` into per
worker shares, co-location with the receiving CPU, same socket and starved
workers, next to the prediction of :mod:`rxl.decide.outcomes`;
:func:`targets` checks the learning targets (measured, not asserted) and
:func:`table` prints them; :func:`analyze_log` does it all for one saved
console log.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

from rxl.cli.options import read_input
from rxl.decide import cpugroup, distance, model, outcomes, topology
from rxl.errors import BadOption, DataError, show
from rxl.guest.protocol import MARK, split_sentinel
from rxl.learn import groups
from rxl.learn.plan import CONFIGS, HASHPROP, LearnError, config_of
from rxl.learn.results import Count, RunSummary, parse_learn
from rxl.verify import parse


def socket_of(topo: cpugroup.Topology, cpu: int) -> int:
    """Index of the top-level group (socket / NUMA node) holding ``cpu``.

    A root that itself shares a cache (one L3 for the machine, as
    :func:`rxl.decide.topology.regular` builds with one L3 group) or has no
    children is one socket: 0. Raises LearnError for a CPU not in ``topo``.
    """
    kids = topo.root.children
    if not topo.has_cpu(cpu):
        raise LearnError(f"CPU {cpu} is not in topology {topo.name}")
    if not kids or topo.root.level != cpugroup.CG_SHARE_NONE:
        return 0
    for i, g in enumerate(kids):
        if cpu in g.cpus:
            return i
    raise LearnError(f"CPU {cpu} is not in topology {topo.name}")


_RXQ_NAME = re.compile(r"^dev\.([a-z0-9_]+\.\d+)\.iflib\.rxq(\d+)\.cpu$")


def nic_device(rxq: Mapping[str, int]) -> Optional[str]:
    """The iflib device (``igb.0``, ``em.0``) whose ``dev.<dev>.iflib.rxqN.cpu``
    sysctls ``rxq`` holds: the one there is, or None when there are none or
    several (the learn guest has one iflib NIC; its SSH NIC is vtnet, no iflib)."""
    devs = {m.group(1) for name in rxq if (m := _RXQ_NAME.match(name))}
    return devs.pop() if len(devs) == 1 else None


def rxq_cpus(rxq: Mapping[str, int], dev: Optional[str] = None) -> List[int]:
    """Receive-queue CPUs of ``dev`` (default :func:`nic_device`) in queue order
    from ``dev.<dev>.iflib.rxqN.cpu`` sysctls; [] when no device is known."""
    dev = dev or nic_device(rxq)
    found = sorted((int(m.group(2)), cpu) for name, cpu in rxq.items()
                   if (m := _RXQ_NAME.match(name)) and m.group(1) == dev)
    return [cpu for _, cpu in found]


@dataclass
class WorkerMetrics:
    """One worker in the measured phase. Shares are fractions of all connections.

    ``by_distance``: its connections per distance class from the receiving
    CPU (rxl.decide.distance.DISTANCES: exact, smt, l3, node, far = another
    L3 of the same node, remote = another node); ``cls``: the class over
    which most of them arrived (ties to the nearer, as rxl.decide.outcomes),
    ``never`` for none; ``predicted_cls``: the class rxl.decide.outcomes gives
    the worker; ``dealt_from``: the receiving CPUs whose range of the deal
    (from the run's own counts) holds the worker (None: not dealt, e.g. the
    hash), ``from_dealt``: its connections received on one of them.
    """

    worker: int
    cpu: int
    n: int
    share: float
    colocated: int
    same_socket: int
    predicted_share: Optional[float] = None
    by_distance: Dict[str, int] = field(default_factory=dict)
    cls: str = "never"
    predicted_cls: Optional[str] = None
    dealt_from: Optional[List[int]] = None
    from_dealt: int = 0


@dataclass
class RunMetrics:
    """Measured-phase results of one run, with the prediction of :mod:`rxl.decide.outcomes`.

    ``hcpu_source``: ``getsockopt`` (the series' TCP_REUSPORT_LB_CPU on the
    accepted socket), ``queue`` (derived: the 82574's queue of the flow id,
    mapped to that queue's CPU; used when the kernel has no getsockopt),
    ``single-queue`` (the NIC has one receive queue: its CPU, which with
    ``net.isr.dispatch=direct`` processes every handshake) or ``none``. ``rx``: handshake CPU -> connections. ``policy``: the
    :mod:`rxl.decide.outcomes` policy the configuration should behave as.
    ``max_dev``: largest |share - 1/W| relative to 1/W. ``by_distance`` /
    ``predicted_by_distance``: share of all connections per distance class,
    measured and as ``policy`` predicts. ``rx_cpus``: the NIC's receive-queue
    CPUs (else the handshake CPUs seen); ``rx_colocated``: of the connections
    accepted by workers on those CPUs, the share received on the worker's own CPU.
    ``model_check``: the kernel's maps in the groups view against rxl deal's on
    the kernel's own counts (rxl.learn.groups.model_check), None without views.
    """

    label: str
    config: str
    workers_set: str
    n: int
    hcpu_source: str
    rx: Dict[int, int]
    workers: List[WorkerMetrics]
    colocated: float
    same_socket: float
    starved: int
    max_dev: float
    policy: str
    predicted_colocated: Optional[float] = None
    predicted_same_socket: Optional[float] = None
    hash_colocated: Optional[float] = None
    queue_agreement: Optional[float] = None
    hw_hashed: Optional[float] = None
    learning: Optional[str] = None
    by_distance: Dict[str, float] = field(default_factory=dict)
    predicted_by_distance: Dict[str, float] = field(default_factory=dict)
    rx_cpus: List[int] = field(default_factory=list)
    rx_colocated: Optional[float] = None
    model_check: Optional[groups.ModelCheck] = None
    notes: List[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


#: Policies of a run: the hash, and the deal of the run's counts (learning,
#: and ``tagged``: a group with a set tag counts its handshakes with learning
#: off, tcp.4).
RUN_POLICIES = ("hash", "deal")

#: Configurations whose groups deal from the run's counts.
DEAL_CONFIGS = ("learn-on", "learn-spread", "tagged")


def policy_of(config: str) -> str:
    """The :data:`RUN_POLICIES` entry configuration ``config`` should behave as."""
    return "deal" if config in DEAL_CONFIGS else "hash"


def _deal_of(topo: cpugroup.Topology, pins: Sequence[int], rx: Mapping[int, int],
             policy: str) -> Optional[model.Deal]:
    """The map ``policy`` deals for workers on ``pins`` (None: not a deal)."""
    if policy != "deal":
        return None
    return model.deal(topo, [model.Tag(w) for w in pins], dict(rx))


def _outcome(topo: cpugroup.Topology, pins: Sequence[int], rx: Mapping[int, int],
             policy: str) -> outcomes.Outcome:
    """:func:`rxl.decide.outcomes.outcome` of ``policy`` (a :data:`RUN_POLICIES`)."""
    return outcomes.outcome(topo, list(pins), dict(rx), policy)


def _split(topo: cpugroup.Topology, pins: Sequence[int], rx: Mapping[int, int], r: int,
           policy: str) -> List[float]:
    """Fraction of receive CPU ``r``'s connections each worker gets under ``policy``.

    Mirrors :func:`rxl.decide.outcomes.outcome`: ``hash`` over all workers, ``deal``
    over ``r``'s range of the dealt map (every worker tagged with its CPU,
    supply from ``rx``), else over all workers.
    """
    n = len(pins)
    if policy == "deal":
        d = _deal_of(topo, pins, rx, policy)
        if d is not None and r in d.ranges:
            slots = d.slots_of(r)
            out = [0.0] * n
            for i in slots:
                out[i] += 1.0 / len(slots)
            return out
    return [1.0 / n] * n


def _outcome_shares(topo: cpugroup.Topology, pins: Sequence[int], rx: Mapping[int, int],
                    policy: str) -> Tuple[List[float], float, float]:
    """(per-worker share, exact share, same-socket share) predicted for ``policy``.

    Per-worker and exact shares come from :func:`rxl.decide.outcomes.outcome` (what
    ``rxl outcomes`` prints); the same-socket share weighs each receive
    CPU's split by :func:`socket_of`.
    """
    o = _outcome(topo, pins, rx, policy)
    exact = float(o.by_distance()["exact"])
    total = sum(v for v in rx.values() if v > 0)
    same = 0.0
    for r, cnt in sorted(rx.items()):
        if cnt <= 0:
            continue
        split = _split(topo, pins, rx, r, policy)
        same += cnt / total * sum(s for i, s in enumerate(split)
                                  if socket_of(topo, pins[i]) == socket_of(topo, r))
    return [float(o.share(i)) for i in range(len(pins))], exact, same


def analyze(run: RunSummary, topo: cpugroup.Topology, rxq: Sequence[int], *,
            phase: str = "m") -> RunMetrics:
    """Measured-phase metrics of ``run`` on ``topo``; ``rxq``: CPU of each receive queue.

    Raises LearnError when the run has no workers or no connection in ``phase``.
    """
    config, wset = config_of(run.label)
    if not run.workers:
        raise LearnError(f"{run.label}: learnd printed no workers (run incomplete?)")
    pins = run.pins
    counts = [c for c in run.counts if c.phase == phase]
    n = sum(c.n for c in counts)
    if n == 0:
        raise LearnError(f"{run.label}: no connection in phase {phase!r}")
    known = sum(c.n for c in counts if c.hcpu >= 0)
    qknown = sum(c.n for c in counts if 0 <= c.q < len(rxq))
    source = ("getsockopt" if known == n else "queue" if qknown == n
              else "single-queue" if len(rxq) == 1 else "none")
    notes: List[str] = list(run.notes)
    for w, (at, _) in zip(run.workers, run.lines_of.get("W", [])):
        if w["pinerr"] != 0 and w["cpu"] >= 0:  # learnd's pin_self failed: it ran unpinned
            notes.append(f"line {at}: worker {w['worker']} could not be pinned to CPU "
                         f"{w['cpu']} (pinerr={w['pinerr']}): it ran where the scheduler "
                         f"put it, and its share is shown under CPU {w['cpu']}")
    if source == "none":
        notes.append(f"handshake CPU known for {known}/{n} connections by getsockopt, "
                     f"{qknown}/{n} by queue: co-location not measurable")

    def hcpu_of(c: Count) -> int:
        if source == "getsockopt":
            return c.hcpu
        if source == "queue":
            return rxq[c.q]
        if source == "single-queue":
            return rxq[0]
        return -1

    per_n = [0] * len(pins)
    coloc = [0] * len(pins)
    same = [0] * len(pins)
    dist: List[Dict[str, int]] = [dict.fromkeys(distance.DISTANCES, 0) for _ in pins]
    by_pair: Dict[Tuple[int, int], int] = {}     # (worker, handshake CPU) -> n
    rx: Dict[int, int] = {}
    agree = 0
    both = 0
    for c in counts:
        if not 0 <= c.worker < len(pins):
            notes.append(f"count for unknown worker {c.worker}")
            continue
        per_n[c.worker] += c.n
        h = hcpu_of(c)
        if h < 0:
            continue
        rx[h] = rx.get(h, 0) + c.n
        by_pair[(c.worker, h)] = by_pair.get((c.worker, h), 0) + c.n
        if topo.has_cpu(h) and c.wcpu >= 0 and topo.has_cpu(c.wcpu):
            dist[c.worker][distance.classify(topo, h, c.wcpu)] += c.n
        if h == c.wcpu:
            coloc[c.worker] += c.n
        if c.wcpu >= 0 and topo.has_cpu(h) and topo.has_cpu(c.wcpu) and \
                socket_of(topo, h) == socket_of(topo, c.wcpu):
            same[c.worker] += c.n
        if c.hcpu >= 0 and 0 <= c.q < len(rxq):
            both += c.n
            agree += c.n if rxq[c.q] == c.hcpu else 0
    nw = len(pins)
    workers = [WorkerMetrics(i, pins[i], per_n[i], per_n[i] / n, coloc[i], same[i],
                             by_distance=dist[i], cls=_class_of(dist[i]))
               for i in range(nw)]
    rx_set = sorted(set(rxq)) if rxq else sorted(rx)
    on_rx = [w for w in workers if w.cpu in rx_set]
    on_rx_n = sum(w.n for w in on_rx)
    learning = ",".join(f"{k}={v}" for k, v in sorted(run.sets.items())) or None
    policy = policy_of(config)
    m = RunMetrics(
        label=run.label, config=config, workers_set=wset, n=n, hcpu_source=source, rx=rx,
        workers=workers,
        colocated=sum(coloc) / n, same_socket=sum(same) / n,
        starved=sum(1 for x in per_n if x == 0),
        max_dev=max(abs(x / n - 1 / nw) * nw for x in per_n),
        policy=policy, queue_agreement=(agree / both if both else None),
        learning=learning, notes=notes,
        by_distance={k: sum(d[k] for d in dist) / n for k in distance.DISTANCES},
        rx_cpus=rx_set,
        rx_colocated=(sum(w.colocated for w in on_rx) / on_rx_n if on_rx_n else None))
    ft = run.ftypes.get(phase, {})
    if ft:
        m.hw_hashed = sum(v for k, v in ft.items() if k >= 0 and k & HASHPROP) / sum(ft.values())
    if rx and all(p >= 0 and topo.has_cpu(p) for p in pins) and \
            all(topo.has_cpu(r) for r in rx):
        shares, exact, same_s = _outcome_shares(topo, pins, rx, policy)
        for w, s in zip(workers, shares):
            w.predicted_share = s
        m.predicted_colocated, m.predicted_same_socket = exact, same_s
        m.hash_colocated = _outcome_shares(topo, pins, rx, "hash")[1]
        o = _outcome(topo, pins, rx, policy)
        m.predicted_by_distance = {k: float(v) for k, v in o.by_distance().items()}
        for w, cls in zip(workers, o.classes):
            w.predicted_cls = cls
        d = _deal_of(topo, pins, rx, policy)
        if d is not None:
            for w in workers:
                w.dealt_from = sorted(r for r in d.ranges if w.worker in d.slots_of(r))
                w.from_dealt = sum(v for (i, h), v in by_pair.items()
                                   if i == w.worker and h in w.dealt_from)
    return m


def _class_of(dist: Mapping[str, int]) -> str:
    """The distance class over which most of ``dist``'s connections arrived,
    the nearer one on a tie; ``never`` for none (rxl.decide.outcomes' rule)."""
    if not any(dist.values()):
        return "never"
    return max(distance.DISTANCES, key=lambda c: dist.get(c, 0))


def binomial_sd(p: float, n: int) -> float:
    """Standard deviation of a share ``p`` measured over ``n`` connections."""
    return math.sqrt(max(p * (1 - p), 0.0) / n) if n > 0 else float("inf")


@dataclass(frozen=True)
class Target:
    """One learning target, measured (not asserted): what, the value, met or not."""

    run: str
    what: str
    measured: str
    met: bool


def targets(m: RunMetrics) -> List[Target]:
    """The learning targets that apply to run ``m`` (measured, not asserted).

    * learn-on / learn-spread / tagged, one worker per receive CPU (``rxq``):
      co-location >= 99 % (with largest-remainder supply each worker holds
      all of its own CPU's slots), 0 starved;
    * learn-on / learn-spread / tagged, one worker per CPU of every socket
      (``all``; tagged: the workers of CPUs that receive nothing are dealt
      from those that do, not starved, once a window has been counted):
      every worker within +-10 % of an equal share at >= 512 connections, 0
      starved, the workers on receiving CPUs co-located >= 99 % (the exact
      ring is dealt first: such a worker's 16 slots are all in its own CPU's
      range) and the exact share within 3 binomial SD of the deal's
      prediction; the per-class shares beside the deal of the run's total
      counts are shown, not targeted (the kernel deals each window's counts,
      whose supply moves a few slots from window to window);
    * learn-on / learn-spread with the groups view (learnd -G, the 15 series):
      every map the kernel published equals rxl deal's on the kernel's own
      counts (the ranges), and >= 99 % of the measured connections went to a
      worker that map gives a slot in the handshake CPU's range (on the NUMA
      guest this is "node-1 workers dealt from the receiving CPUs the deal
      says"; :func:`rxl.learn.groups.model_check`);
    * learn-off and pristine: co-location within 3 binomial SD of the hash's
      prediction ("behave as the hash").
    """
    out: List[Target] = []
    learning = m.config in ("learn-on", "learn-spread")
    dealt = m.config in DEAL_CONFIGS
    if dealt and m.workers_set == "rxq":
        out.append(Target(m.label, "co-location >= 99%", f"{m.colocated:.1%}",
                          m.colocated >= 0.99))
        out.append(Target(m.label, "0 starved", str(m.starved), m.starved == 0))
    if dealt and m.workers_set == "all":
        out.append(Target(m.label, "every worker within +-10% of equal, n >= 512",
                          f"max {m.max_dev:.1%} at n={m.n}", m.max_dev <= 0.10 and m.n >= 512))
        out.append(Target(m.label, "0 starved", str(m.starved), m.starved == 0))
        if m.rx_colocated is not None:
            out.append(Target(m.label, "workers on receiving CPUs co-located >= 99%",
                              f"{m.rx_colocated:.1%} (CPUs {_cpus(m.rx_cpus)})",
                              m.rx_colocated >= 0.99))
        if m.predicted_colocated is not None:
            sd = binomial_sd(m.predicted_colocated, m.n)
            out.append(Target(m.label, "exact share = deal prediction (3 SD)",
                              f"{m.colocated:.1%} vs {m.predicted_colocated:.1%} "
                              f"(SD {sd:.1%})",
                              abs(m.colocated - m.predicted_colocated) <= 3 * sd))
    if learning and m.model_check is not None and m.model_check.copies:
        c = m.model_check
        out.append(Target(m.label, "kernel maps = rxl deal of the kernel's counts",
                          f"{c.ranges_equal} of {c.copies} copies",
                          c.ranges_equal == c.copies))
        if c.n:
            out.append(Target(m.label, "connections dealt as rxl deal deals them >= 99%",
                              f"{c.dealt / c.n:.2%} of {c.n}", c.dealt >= 0.99 * c.n))
    if m.config in ("learn-off", "pristine") and m.hash_colocated is not None:
        sd = binomial_sd(m.hash_colocated, m.n)
        out.append(Target(m.label, "co-location as the hash (3 SD)",
                          f"{m.colocated:.1%} vs {m.hash_colocated:.1%} (SD {sd:.1%})",
                          abs(m.colocated - m.hash_colocated) <= 3 * sd))
    return out


def _cpus(cpus: Sequence[int]) -> str:
    return ",".join(map(str, cpus)) or "-"


def _pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def table(metrics: Sequence[RunMetrics], *, topo_name: str = "",
          rxq_by_run: Optional[Mapping[str, Sequence[int]]] = None) -> str:
    """The learning table: per run, per worker share / predicted share / co-located / same socket."""
    lines: List[str] = []
    if topo_name:
        lines.append(f"guest topology: {topo_name}")
    order = {c: i for i, c in enumerate(CONFIGS)}
    for m in sorted(metrics, key=lambda x: (order.get(x.config, 9), x.workers_set)):
        rxq = (rxq_by_run or {}).get(m.label)
        head = (f"{m.label}: n={m.n} measured connections; handshake CPU by {m.hcpu_source}; "
                f"rx CPUs {dict(sorted(m.rx.items()))}"
                + (f"; rxq CPUs {list(rxq)}" if rxq is not None else "")
                + (f"; learning sysctl {m.learning}" if m.learning is not None else ""))
        lines.append(head)
        dealt = any(w.dealt_from is not None for w in m.workers)
        lines.append(f"  {'worker':>6} {'cpu':>4} {'conns':>6} {'share':>7} "
                     f"{'pred':>7} {'co-loc':>7} {'same-skt':>8} {'class':>6} {'pred':>6}"
                     + (f" {'dealt from':>12} {'from':>6}" if dealt else ""))
        for w in m.workers:
            lines.append(f"  {w.worker:>6} {w.cpu:>4} {w.n:>6} {_pct(w.share):>7} "
                         f"{_pct(w.predicted_share):>7} "
                         f"{_pct(w.colocated / w.n if w.n else None):>7} "
                         f"{_pct(w.same_socket / w.n if w.n else None):>8} "
                         f"{w.cls:>6} {w.predicted_cls or '-':>6}"
                         + (f" {_cpus(w.dealt_from or []):>12} "
                            f"{_pct(w.from_dealt / w.n if w.n else None):>6}" if dealt else ""))
        if m.by_distance:
            lines.append("  by distance: " + ", ".join(
                f"{k} {_pct(m.by_distance.get(k))} (pred {_pct(m.predicted_by_distance.get(k))})"
                for k in distance.DISTANCES
                if m.by_distance.get(k) or m.predicted_by_distance.get(k)))
        lines.append(f"  co-located {_pct(m.colocated)} ({m.policy} predicts "
                     f"{_pct(m.predicted_colocated)}"
                     + (f", hash {_pct(m.hash_colocated)}" if m.policy != "hash" else "")
                     + "); "
                     f"same socket {_pct(m.same_socket)} (predicts "
                     f"{_pct(m.predicted_same_socket)}); starved {m.starved}; "
                     f"max deviation from equal share {_pct(m.max_dev)}"
                     + (f"; queue/getsockopt agreement {_pct(m.queue_agreement)}"
                        if m.queue_agreement is not None else "")
                     + (f"; hardware-hashed {_pct(m.hw_hashed)}" if m.hw_hashed is not None
                        else ""))
        if m.model_check is not None and m.model_check.copies:
            c = m.model_check
            lines.append(f"  groups view: {c.copies} copies with a map, {c.ranges_equal} with "
                         f"rxl deal's ranges on the kernel's counts; measured connections "
                         f"between them {c.n}, dealt as rxl deal deals them {c.dealt}"
                         + (f"; not: {', '.join(f'rx {h} -> cpu {w} x{k}' for h, w, k in c.off)}"
                            if c.off else ""))
        for t in targets(m):
            lines.append(f"  target {'MET ' if t.met else 'MISS'} {t.what}: {t.measured}")
        for note in m.notes:
            lines.append(f"  note: {note}")
    return "\n".join(lines) + "\n"


def log_cpus(runs: Mapping[str, RunSummary], rxq: Sequence[int]) -> Dict[int, str]:
    """Every CPU a learn log names -> where it is first named: an rx queue's
    CPU (``dev.<nic>.iflib.rxqN.cpu``), a worker's pin (its W line, RUN's
    pin=), a connection's worker
    or handshake CPU (-1, unknown or unpinned, is none)."""
    out: Dict[int, str] = {}
    for q, cpu in enumerate(rxq):
        out.setdefault(cpu, f"rx queue {q}'s CPU")
    for label, run in runs.items():
        for w, cpu in enumerate(run.pins):
            if cpu >= 0:
                out.setdefault(cpu, f"run {label}'s worker {w} is pinned there")
        pin = run.info.get("pin", "none")
        for w, cpu in enumerate(pin.split(",") if pin != "none" else []):
            if cpu.isascii() and cpu.isdigit():  # rxl.learn.results damages the others
                out.setdefault(int(cpu), f"run {label}'s RUN line pins worker {w} there")
        for c in run.counts:
            if c.wcpu >= 0:
                out.setdefault(c.wcpu, f"run {label}'s worker {c.worker} accepted there")
            if c.hcpu >= 0:
                out.setdefault(c.hcpu, f"run {label} has a handshake there")
    return out


#: learnd's keys that hold a CPU id (-1: none; rxl.learn.results).
CPU_KEYS = ("cpu", "wcpu", "hcpu")
_CPU_KV_RE = re.compile(r"(?<!\S)(" + "|".join(CPU_KEYS) + r")=([0-9]+)(?!\S)")


def _no_cpu_id(lines: Sequence[str]) -> Optional[Tuple[int, str, str, str]]:
    """The first LEARN line (its number from 1, key, value, line) whose CPU is
    a number at or past :data:`rxl.verify.parse.CPU_MAXSIZE`: no CPU id of any
    topology; None when there is none."""
    for n, line in enumerate(lines, 1):
        line = split_sentinel(line)[1]  # as parse_learn reads it
        if line and " LEARN " in line[:len(MARK) + 8]:
            for key, value in _CPU_KV_RE.findall(line):
                if len(value) > 4 or int(value) >= parse.CPU_MAXSIZE:
                    return n, key, value, line.rstrip("\r\n")
    return None


def analyze_log(path: str, topo_override: Union[cpugroup.Topology, str, None] = None) -> dict:
    """Parse one console log: console result, learn runs, topology, metrics.

    Returns ``{"log", "outcome", "topology", "rxq", "runs": {label: metrics
    dict}, "errors": [...], "warnings": [...], "metrics": [RunMetrics]}``:
    ``"summaries": {label: RunSummary}`` (for rxl.learn.wakeups);
    ``errors`` make the analysis fail (a run that did not finish, a guest
    that did not complete, a log without any learn run), ``warnings`` do not
    (the topology taken as qemu-2s). Raises OSError when the log cannot be
    read, rxl.errors.DataError when it is larger than a console log is.
    """
    text = read_input(path, "a console log of rxl learn").splitlines()
    bad = _no_cpu_id(text)
    if bad:  # no topology has it: --topology cannot help
        n, key, value, line = bad
        raise DataError(f"{show(path)} line {n}: {key}={show(value, 24)} is no CPU id (0 to "
                        f"{parse.CPU_MAXSIZE - 1}): {show(line, 160)}")
    con = parse.parse_console(text)
    runs = parse_learn(text)
    for label, run in runs.items():  # two runs of one label would be merged into one
        if len(run.begins) > 1:
            raise DataError(f"{show(path)} line {run.begins[1]}: a second run labelled "
                            f"{show(label, 80)} (the first began at line {run.begins[0]})")
    errors: List[str] = []
    warnings: List[str] = []
    if not runs:
        errors.append(f"{path}: no ==RXL== LEARN line: not a console log of rxl learn")
    rxq = rxq_cpus(con.rxq)
    if topo_override:
        topo = topo_override if isinstance(topo_override, cpugroup.Topology) \
            else topology.load(topo_override)
        lack = {c: why for c, why in log_cpus(runs, rxq).items() if not topo.has_cpu(c)}
        if lack:  # a CPU outside the topology has no distance: the table would guess
            cpu = min(lack)
            raise BadOption(f"{topo.name} has no CPU {cpu}, which {path} names ({lack[cpu]}"
                            f"{f'; {len(lack) - 1} more' if len(lack) > 1 else ''}): give the "
                            "guest's topology", "--topology")
    elif con.topology_xml:
        try:
            topo = topology.parse_spec(con.topology_xml, name=f"guest ({Path(path).name})")
        except cpugroup.TopologyError as exc:
            warnings.append(f"{path}: {exc}; using qemu-2s")
            topo = topology.load("qemu-2s")
    else:
        warnings.append(f"{path}: no topology in the log; using qemu-2s")
        topo = topology.load("qemu-2s")
    if not topo_override:
        lack = {c: why for c, why in log_cpus(runs, rxq).items() if not topo.has_cpu(c)}
        if lack:  # the input does not fit, as with --topology: exit 2 either way
            cpu = min(lack)
            raise DataError(f"{show(path)}: the topology {topo.name} has no CPU {cpu} "
                            f"({lack[cpu]}{f'; {len(lack) - 1} more' if len(lack) > 1 else ''}"
                            "): give the guest's with --topology")
    metrics = []
    for label, run in runs.items():
        if not run.complete:
            errors.append(f"{path}: run {label}: no DONE line (learnd did not finish)")
            continue
        if run.damage:  # its numbers would be reported as if the run were whole
            errors += [f"{path}: run {label} damaged: {d}" for d in run.damage]
            continue
        try:
            m = analyze(run, topo, rxq)
        except LearnError as exc:
            errors.append(f"{path}: {exc}")
            continue
        if run.views:
            m.model_check = groups.model_check(groups.views(run.views), topo)
        metrics.append(m)
    if con.outcome != "completed" and runs:
        errors.append(f"{path}: guest {con.outcome} ({show(con.last_line, 80)})")
    return {"log": path, "outcome": con.outcome, "topology": topo.name,
            "topology_xml": con.topology_xml, "rxq": rxq,
            "sysctls": {**con.sysctls, **con.rxq},
            "runs": {lbl: {"info": r.info, "sets": r.sets, "sysctls": r.sysctls,
                           "done": r.done, "ftypes": r.ftypes, "notes": r.notes,
                           "damage": r.damage,
                           "workers": r.workers}
                     for lbl, r in runs.items()},
            "views": {lbl: groups.views(r.views) for lbl, r in runs.items() if r.views},
            "errors": errors, "warnings": warnings, "metrics": metrics, "summaries": runs}
