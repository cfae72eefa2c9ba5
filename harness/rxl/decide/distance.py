"""How far a connection travels from its receiving CPU to its worker,
as far as the cpu_group tree says.

Classes, nearest first (:data:`DISTANCES`):

* ``exact``: the worker runs on the receiving CPU;
* ``smt``: same core (the smallest group holding both is flagged THREAD
  or shares L1);
* ``l3``: same L3 (the smallest group holding both shares L2 or L3);
* ``node``: same package or NUMA node, but the tree says nothing about a
  shared cache (a tree without cache information, or CPUs outside every
  L3 group): not known to cross an L3;
* ``far``: other L3 group, same package or node (seed 000's "other CCD");
* ``remote``: other package or NUMA node (which crosses an L3 too);

and ``any`` for an untagged member (the deal's last ring).  Domains and
packages are :func:`domain_of`'s.

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
    """The group standing for ``cpu``'s NUMA domain in ``topo``.

    The outermost group flagged NODE that holds it; in a tree with NODE
    groups, a CPU in none belongs to the root.  A tree without NODE groups
    has packages instead: the root's child holding ``cpu`` if it shares
    no cache (``CG_SHARE_NONE``), else the root (a single package).  The
    kernel's iflib_spread.c reads domains the same way.  Raises
    TopologyError for a CPU not in the tree.
    """
    chain = topo.enclosing(cpu)[::-1]          # root first
    if any(g.flags & CG_FLAG_NODE for g in topo.root.walk()):
        return next((g for g in chain if g.flags & CG_FLAG_NODE), topo.root)
    if len(chain) > 1 and chain[1].level == CG_SHARE_NONE:
        return chain[1]
    return topo.root


def has_cache_info(topo: Topology) -> bool:
    """Does any group of the tree share a cache (cache-level 1-3)?"""
    return any(g.level != CG_SHARE_NONE for g in topo.root.walk())


def classify(topo: Topology, rx_cpu: int, tag: Optional[int]) -> str:
    """One of :data:`CLASSES` for a connection received on ``rx_cpu`` and
    served by a worker on ``tag`` (None or a CPU outside the tree:
    ``any``).  Raises TopologyError if ``rx_cpu`` is not in the tree."""
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
    if topo.l3_of(rx_cpu) is not None and topo.l3_of(tag) is not None:
        return "far"
    return "node"


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
