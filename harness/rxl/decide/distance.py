"""How far a connection travels from its receiving CPU to its worker,
as far as the cpu_group tree says.

Classes, nearest first (:data:`DISTANCES`):

* ``exact``: the worker runs on the receiving CPU;
* ``smt``: same core (the smallest group holding both is flagged THREAD
  or shares L1);
* ``l3``: same L3 (the smallest group holding both shares L2 or L3);
* ``node``: same package or NUMA node, but the tree says nothing about a
  shared cache (a tree without cache information, or cores with no cache
  group between them): not known to cross an L3;
* ``far``: other L3 group, same package or node (seed 000's "other CCD");
* ``remote``: other package or NUMA node (which crosses an L3 too): a pair
  whose common group shares no cache and holds them in two packages is
  never "same package" (:func:`classify`);

and ``any`` for an untagged member (the deal's last ring).  Domains are
:func:`domain_of`'s, packages :func:`classify`'s.

:data:`DEFAULT_LADDER`: cycles per request relative to exact, per class
(seed 000, "The cost ladder, measured on this host", Ryzen 9 5950X:
exact 1.00, SMT sibling about 1.00, same L3 about 1.00, other CCD 1.19).
``node`` is charged like ``l3`` (1.00): its cache distance is unknown and
the measured cross-L3 cost is not assumed.  ``remote`` is charged the
cross-L3 1.19 as a lower bound: crossing a socket was not measured.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

from rxl.decide.cpugroup import (CG_FLAG_NODE, CG_FLAG_THREAD, CG_SHARE_L1, CG_SHARE_L2,
                                 CG_SHARE_L3, CG_SHARE_NONE, Group, Topology)

DISTANCES = ("exact", "smt", "l3", "node", "far", "remote")
CLASSES = DISTANCES + ("any",)
#: The classes every tree with cache information can show (the table
#: columns ``rxl outcomes`` always prints).
BASE = ("exact", "smt", "l3", "far")
DEFAULT_LADDER: Dict[str, float] = {
    "exact": 1.0, "smt": 1.0, "l3": 1.0, "node": 1.0, "far": 1.19,
    "remote": 1.19}


def domain_of(topo: Topology, cpu: int) -> Group:
    """The group standing for ``cpu``'s NUMA domain in ``topo``: the outermost
    group flagged NODE that holds it, else the root.  A tree without NODE
    groups is one domain, as the kernel sees it (``vm_ndomains`` is 1: a NIC's
    ``_PXM`` maps to domain 0, all CPUs; sys/dev/acpica/acpi_pxm.c), whatever
    its packages.  Raises TopologyError for a CPU not in the tree.
    """
    chain = topo.enclosing(cpu)[::-1]          # root first
    return next((g for g in chain if g.flags & CG_FLAG_NODE), topo.root)


def _child_holding(group: Group, cpu: int) -> Optional[Group]:
    return next((c for c in group.children if cpu in c.cpus), None)


def _is_core(group: Group) -> bool:
    """A group that is one core (flagged THREAD: HTT or SMT) or one CPU."""
    return bool(group.flags & CG_FLAG_THREAD) or len(group.cpus) == 1


def has_cache_info(topo: Topology) -> bool:
    """Does any group of the tree share a cache (cache-level 1-3)?"""
    return any(g.level != CG_SHARE_NONE for g in topo.root.walk())


def classify(topo: Topology, rx_cpu: int, tag: Optional[int]) -> str:
    """One of :data:`CLASSES` for a connection received on ``rx_cpu`` and
    served by a worker on ``tag`` (None or a CPU outside the tree:
    ``any``).  Raises TopologyError if ``rx_cpu`` is not in the tree.

    Below the cache-sharing classes: ``remote`` when the two are in other
    NUMA domains (:func:`domain_of`), or in two groups below a common group
    that shares no cache where those groups are packages: groups of more
    than one core that are not L3 groups (they share an L1 or L2 cache, or
    none, within themselves).  Two L3 groups there are ``far``: one package
    with several L3s (the Ryzen's CCDs) and one L3 per package look the
    same in the tree, and the seed measured the first.  Two cores (or CPUs)
    directly below the common group are ``node``: one package, no cache
    known between them.
    """
    if tag is None or not topo.has_cpu(tag):
        return "any"
    if tag == rx_cpu:
        return "exact"
    common = next(g for g in topo.enclosing(rx_cpu) if tag in g.cpus)
    if common.flags & CG_FLAG_THREAD or common.level == CG_SHARE_L1:
        return "smt"
    if common.level in (CG_SHARE_L2, CG_SHARE_L3):
        return "l3"
    if domain_of(topo, rx_cpu) is not domain_of(topo, tag):
        return "remote"
    a, b = _child_holding(common, rx_cpu), _child_holding(common, tag)
    if a is None or b is None or _is_core(a) or _is_core(b):
        return "node"
    if a.level == CG_SHARE_L3 and b.level == CG_SHARE_L3:
        return "far"
    return "remote"


def domains(topo: Topology) -> Dict[int, Group]:
    """CPU -> :func:`domain_of` for every CPU of the tree (for :func:`classify_row`)."""
    return {cpu: domain_of(topo, cpu) for cpu in topo.cpus}


def classify_row(topo: Topology, rx_cpu: int,
                 doms: Optional[Dict[int, Group]] = None) -> Dict[int, str]:
    """:func:`classify` of ``rx_cpu`` against every CPU of the tree at once:
    CPU -> class, the same class :func:`classify` gives each pair.  Linear in
    the tree's CPUs (one walk up ``rx_cpu``'s groups, a class per group
    below each), where a call per pair searches the groups: ``rxl outcomes``
    on a 1024-CPU tree needs a row per receiving CPU, not a million searches.
    ``doms``: :func:`domains` of the tree, when the caller has it.  Raises
    TopologyError if ``rx_cpu`` is not in the tree.
    """
    chain = topo.enclosing(rx_cpu)
    doms = domains(topo) if doms is None else doms
    rx_domain = doms[rx_cpu]
    row: Dict[int, str] = {rx_cpu: "exact"}
    inner: Optional[Group] = None
    for common in chain:
        if common.children:
            below = [(b, b.cpus) for b in common.children if b is not inner]
        else:  # the innermost group: CPUs, no groups below
            below = [(None, tuple(t for t in common.cpus if t != rx_cpu))]
        for b, cpus in below:
            if common.flags & CG_FLAG_THREAD or common.level == CG_SHARE_L1:
                row.update(dict.fromkeys(cpus, "smt"))
                continue
            if common.level in (CG_SHARE_L2, CG_SHARE_L3):
                row.update(dict.fromkeys(cpus, "l3"))
                continue
            if inner is None or b is None or _is_core(inner) or _is_core(b):
                same = "node"
            elif inner.level == CG_SHARE_L3 and b.level == CG_SHARE_L3:
                same = "far"
            else:
                same = "remote"
            for t in cpus:
                row[t] = same if doms[t] is rx_domain else "remote"
        inner = common
    return row


def ladder(values: Sequence[float]) -> Dict[str, float]:
    """A cost ladder from ``--cost-ladder``'s numbers: four (exact, smt,
    l3, far; node costs as l3, remote as far) or six (exact, smt, l3,
    node, far, remote).  Raises ValueError otherwise."""
    v: Tuple[float, ...] = tuple(values)
    if len(v) == 4:
        v = (v[0], v[1], v[2], v[2], v[3], v[3])
    if len(v) != len(DISTANCES):
        raise ValueError("--cost-ladder takes four numbers (exact, smt, l3, "
                         "far) or six (exact, smt, l3, node, far, remote)")
    if not all(0 < x < float("inf") for x in v):
        raise ValueError("--cost-ladder: costs must be positive and finite")
    return dict(zip(DISTANCES, v))
