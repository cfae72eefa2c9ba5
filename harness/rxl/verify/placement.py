"""Where a boot's RX queues landed, and whether ``core_spread`` put them
where commit 1's rules say.

Input: a parsed console log (:class:`rxl.verify.parse.RunResult`) with the
guest's ``kern.sched.topology_spec`` and ``dev.<nic>.iflib.rxq<N>.cpu``
lines.  The topology is read with :mod:`rxl.decide.dump`; L3 groups and
NUMA domains are :mod:`rxl.decide`'s (``topology.l3_of``,
``distance.domain_of``), numbered in tree order and by lowest CPU.

Rules checked (sys/net/iflib_spread.h):

* ``core_spread=1``: every queue in one domain, that of the lowest queue
  CPU, while that domain has a core per queue; and on as many L3 groups
  of it as there are queues, up to all of them;
* ``core_spread=2``: on as many domains as there are queues, up to all.

``core_spread=0`` is today's numeric order and is only shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

from rxl.decide import distance, dump
from rxl.decide.cpugroup import CG_FLAG_THREAD, CG_SHARE_L3, Topology, TopologyError
from rxl.verify.parse import RunResult


@dataclass(frozen=True)
class Placement:
    """One boot's queues: sysctl name -> CPU, L3 group index, domain index.

    ``local_l3`` and ``local_cores``: L3 groups and cores of the domain of
    the lowest queue CPU.  ``domains``: how many the tree has.
    """

    core_spread: Optional[int]
    cpu: Dict[str, int]
    l3: Dict[str, Optional[int]]
    domain: Dict[str, int]
    domains: int
    local_l3: int
    local_cores: int


def spread_value(run: RunResult) -> Optional[int]:
    """The ``core_spread`` the guest printed (first NIC found), or None."""
    for name, value in sorted(run.sysctls.items()):
        if name.endswith(".iflib.core_spread") and value.strip().isdigit():
            return int(value)
    return None


def topology_of(run: RunResult) -> Optional[Topology]:
    """The guest's topology from its log, or None if absent or unusable."""
    if not run.topology_xml.strip():
        return None
    try:
        return dump.parse_spec(run.topology_xml, name=f"{run.label} log")
    except TopologyError:
        return None


def place(run: RunResult) -> Optional[Placement]:
    """The placement of ``run``'s queues; None without topology or queues
    or with a queue CPU outside the topology."""
    topo = topology_of(run)
    if topo is None or not run.rxq:
        return None
    if not all(topo.has_cpu(c) for c in run.rxq.values()):
        return None
    units: List = []                        # outermost L3 groups
    for g in topo.root.walk():
        if g.level == CG_SHARE_L3 and not any(
                set(g.cpus) <= set(u.cpus) for u in units):
            units.append(g)
    doms: List = []
    for c in topo.cpus:
        d = distance.domain_of(topo, c)
        if not any(d is x for x in doms):
            doms.append(d)

    def l3_index(cpu: int) -> Optional[int]:
        g = topo.l3_of(cpu)
        return None if g is None else next(
            i for i, u in enumerate(units) if u is g)

    def dom_index(cpu: int) -> int:
        d = distance.domain_of(topo, cpu)
        return next(i for i, x in enumerate(doms) if x is d)

    home = distance.domain_of(topo, min(run.rxq.values()))
    mine = [c for c in topo.cpus if distance.domain_of(topo, c) is home]
    cores = {next((g.cpus for g in topo.enclosing(c)
                   if g.flags & CG_FLAG_THREAD), (c,)) for c in mine}
    return Placement(
        core_spread=spread_value(run), cpu=dict(run.rxq),
        l3={q: l3_index(c) for q, c in run.rxq.items()},
        domain={q: dom_index(c) for q, c in run.rxq.items()},
        domains=len(doms),
        local_l3=len({l3_index(c) for c in mine} - {None}),
        local_cores=len(cores))


def check(label: str, run: RunResult, core_spread: int) -> List[str]:
    """Reasons ``run`` (booted with ``core_spread``) breaks the rules
    above; empty when it keeps them."""
    p = place(run)
    if p is None:
        return [f"{label}: no topology or rx queue CPUs in the log to check "
                f"core_spread={core_spread} against"]
    out = []
    if p.core_spread is not None and p.core_spread != core_spread:
        out.append(f"{label}: the guest reports core_spread={p.core_spread}, "
                   f"booted with {core_spread}")
    n = len(p.cpu)
    doms = set(p.domain.values())
    l3s = set(p.l3.values()) - {None}
    if core_spread == 1:
        if len(doms) > 1 and n <= p.local_cores:
            out.append(f"{label}: core_spread=1 put rx queues on "
                       f"{len(doms)} NUMA domains, expected the local one "
                       "only")
        want = min(n, p.local_l3)
        if len(l3s) < want:
            out.append(f"{label}: core_spread=1 put rx queues on "
                       f"{len(l3s)} L3 group(s), expected {want} (the "
                       "local domain's)")
    elif core_spread == 2:
        want = min(n, p.domains)
        if len(doms) < want:
            out.append(f"{label}: core_spread=2 put rx queues on "
                       f"{len(doms)} NUMA domain(s), expected {want}")
    return out


def rows(label: str, run: RunResult) -> List[List[str]]:
    """Table rows: run, core_spread, queue, CPU, L3 group, domain."""
    p = place(run)
    out = []
    for q in sorted(run.rxq):
        if p is None:
            out.append([label, "?", q, str(run.rxq[q]), "?", "?"])
            continue
        l3 = p.l3[q]
        out.append([label, "-" if p.core_spread is None else
                    str(p.core_spread), q, str(p.cpu[q]),
                    "-" if l3 is None else str(l3), str(p.domain[q])])
    return out
