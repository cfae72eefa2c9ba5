"""Where connections go under each selection policy, and what it costs.

Reproduces seed 000's "Thirty-two workers, four ways": given workers (one
per CPU, in member order), receiving CPUs and their shares of handshakes,
each policy sends every receiving CPU's connections somewhere:

* ``hash``: over all workers alike (today's ``il_inp[h % n]``);
* ``exact``: to the workers on that very CPU, else over all workers (the
  exact-claim predecessor: "the worker on this very CPU or the hash");
* ``deal``: over the CPU's range of the dealt map (every worker tagged
  with its CPU), else over all workers.

A worker's class is the distance over which most of its connections
arrive (ties go to the nearer class); a worker that gets nothing is
``never``.  Distances are :mod:`rxl.decide.distance`'s classes, read from
the tree (same core, same L3, same package or node with no cache
information, other L3, other package).  The expected cycles per request
weigh each connection by the cost ladder of its own distance
(:data:`DEFAULT_LADDER`, from seed 000's cost ladder).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Dict, List, Mapping, Optional, Sequence

from rxl.decide import distance, model
from rxl.decide.cpugroup import Topology
from rxl.decide.distance import DEFAULT_LADDER, DISTANCES

POLICIES = ("hash", "exact", "deal")
WORKER_CLASSES = DISTANCES + ("never",)

DealFn = Callable[[Topology, Sequence[model.Tag], Mapping[int, int]],
                  Optional[model.Deal]]


@dataclass(frozen=True)
class Outcome:
    """Shares are exact fractions of all connections (they sum to 1).

    ``per_worker[i]`` maps a distance class to worker ``i``'s share of
    connections arriving over it; ``classes[i]`` is worker ``i``'s class.
    """

    policy: str
    workers: Sequence[int]
    per_worker: List[Dict[str, Fraction]]
    classes: List[str]

    def share(self, i: int) -> Fraction:
        return sum(self.per_worker[i].values(), Fraction(0))

    def by_class(self) -> Dict[str, Dict[str, object]]:
        """Per worker class: number of workers and their connection share."""
        out: Dict[str, Dict[str, object]] = {
            c: {"workers": 0, "share": Fraction(0)} for c in WORKER_CLASSES}
        for i, cls in enumerate(self.classes):
            out[cls]["workers"] += 1
            out[cls]["share"] += self.share(i)
        return out

    def by_distance(self) -> Dict[str, Fraction]:
        """Share of connections travelling each distance."""
        out = dict.fromkeys(DISTANCES, Fraction(0))
        for per in self.per_worker:
            for cls, v in per.items():
                out[cls] += v
        return out

    def cycles(self, ladder: Mapping[str, float] = DEFAULT_LADDER) -> float:
        """Expected cycles per request relative to all-exact; ``ladder``
        maps every class of :data:`DISTANCES` to its cost."""
        dist = self.by_distance()
        return float(sum(dist[c] * Fraction(str(ladder[c]))
                         for c in DISTANCES))


def outcome(topo: Topology, workers: Sequence[int], rx: Mapping[int, int],
            policy: str, deal_fn: DealFn = model.deal) -> Outcome:
    """Distribute connections received on ``rx`` (CPU -> relative count).

    ``workers`` are CPUs, one worker each, in member order.  Raises
    ValueError for an unknown policy, no workers or no receiving CPU.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}: one of {POLICIES}")
    n = len(workers)
    if n == 0:
        raise ValueError("no workers")
    total = sum(v for v in rx.values() if v > 0)
    if total == 0:
        raise ValueError("no receiving CPU with a positive count")
    # Integer weights over one denominator, total * lcm of the splits: a
    # Fraction per (receiving CPU, worker) pair is a million of them on a
    # 1024-CPU tree; so is a classify() per pair (distance.classify_row).
    weight: List[Dict[str, int]] = [dict.fromkeys(DISTANCES, 0) for _ in workers]
    d = None
    if policy == "deal":
        d = deal_fn(topo, [model.Tag(w) for w in workers], dict(rx))
    on_cpu: Dict[int, List[int]] = {}
    for i, w in enumerate(workers):
        on_cpu.setdefault(w, []).append(i)
    splits = []  # (receiving CPU, count, worker indices it is split over)
    for r, count in sorted(rx.items()):
        if count <= 0:
            continue
        if policy == "exact" and r in on_cpu:
            splits.append((r, count, on_cpu[r]))
        elif policy == "deal" and d is not None and r in d.ranges:
            splits.append((r, count, list(d.slots_of(r))))
        else:
            splits.append((r, count, range(n)))
    lcm = 1
    for _, _, idx in splits:
        lcm = lcm * len(idx) // math.gcd(lcm, len(idx))
    doms = distance.domains(topo)
    for r, count, idx in splits:
        row = distance.classify_row(topo, r, doms)
        share = count * (lcm // len(idx))
        for i in idx:
            weight[i][row[workers[i]]] += share
    denom = total * lcm
    per: List[Dict[str, Fraction]] = [
        {c: Fraction(v, denom) for c, v in w.items()} for w in weight]

    classes = []
    for dist in per:
        if not any(dist.values()):
            classes.append("never")
        else:
            # max() keeps the first of equals: the nearer class wins ties.
            classes.append(max(DISTANCES, key=lambda c: dist[c]))
    return Outcome(policy, tuple(workers), per, classes)
