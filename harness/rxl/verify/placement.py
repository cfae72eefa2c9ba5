"""Where a boot's RX queues landed, and whether they are where iflib and
commit 1 put them.

Input: a parsed console log (:class:`rxl.verify.parse.RunResult`) with the
guest's ``kern.sched.topology_spec``, ``dev.<nic>.<unit>.iflib.rxq<N>.cpu``,
``dev.<nic>.<unit>.%domain`` (absent when the NIC's bridge has no ``_PXM``)
and ``machdep.hyperthreading_intr_allowed`` lines.  The topology is read
with :mod:`rxl.decide.dump`; L3 groups and NUMA domains are
:mod:`rxl.decide`'s (``topology.l3_of``, ``distance.domain_of``),
numbered in tree order and by lowest CPU (FreeBSD's domain N is the N-th).

The NIC's interrupt set (:func:`interrupt_set`), as FreeBSD 15 computes it:
x86's ``intr_cpus`` is every CPU but the second and later SMT threads of a
core (``set_interrupt_apic_ids()`` in sys/x86/x86/mp_x86.c, unless
``machdep.hyperthreading_intr_allowed=1``); ``acpi_get_cpus()``
(sys/dev/acpica/acpi.c) ANDs it with the NIC's domain when the NIC's host
bridge has ``_PXM``.

Rules checked (:func:`check`), for every boot:

* no queue outside the NIC's domain, when the guest reports one;
* ``core_spread=0`` (iflib's numeric walk, ``cpuid_advance()`` from the
  set's first CPU): queue i on the i-th CPU of the interrupt set;
* ``core_spread=1`` (and 2 where the kernel has it): the order
  :func:`rxl.decide.model.spread_order` (``rxl spread``) gives for the
  guest's own topology, interrupt set and NIC domain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

import re

from rxl.decide import distance, dump, model
from rxl.decide.cpugroup import CG_FLAG_THREAD, CG_SHARE_L3, Topology, TopologyError
from rxl.verify.parse import RunResult

#: ``dev.<driver>.<unit>.iflib.rxq<N>.cpu``: the device and the queue index.
_RXQ = re.compile(r"^(dev\.[a-z0-9_]+\.\d+)\.iflib\.rxq(\d+)\.cpu$")
#: x86's default for ``machdep.hyperthreading_intr_allowed`` (mp_x86.c).
HT_INTR_DEFAULT = 0


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


def queue_order(run: RunResult) -> List[int]:
    """The queue CPUs of the run's first iflib device, by queue index."""
    by_dev: Dict[str, Dict[int, int]] = {}
    for name, cpu in run.rxq.items():
        m = _RXQ.match(name)
        if m:
            by_dev.setdefault(m.group(1), {})[int(m.group(2))] = cpu
    if not by_dev:
        return []
    q = by_dev[min(by_dev)]
    return [q[i] for i in sorted(q)]


def nic_device(run: RunResult) -> Optional[str]:
    """``dev.<driver>.<unit>`` of the run's first iflib device, or None."""
    devs = sorted({m.group(1) for m in map(_RXQ.match, run.rxq) if m})
    return devs[0] if devs else None


def nic_domain(run: RunResult) -> Optional[int]:
    """The NIC's NUMA domain (``dev.<nic>.<unit>.%domain``), None when the guest
    reports none (no ``_PXM``)."""
    dev = nic_device(run)
    value = run.sysctls.get(f"{dev}.%domain", "").strip() if dev else ""
    return int(value) if value.lstrip("-").isdigit() and int(value) >= 0 else None


def interrupt_set(topo: Topology, domain: Optional[int], ht_allowed: bool = False) -> List[int]:
    """The CPUs FreeBSD lets the NIC interrupt (see the module's docstring):
    the first SMT thread of each core (every thread when ``ht_allowed``), of
    ``domain`` only when it is known. Raises TopologyError for a domain the
    tree does not have."""
    from rxl.decide.topology import domain_cpus
    cpus = domain_cpus(topo, domain) if domain is not None else list(topo.cpus)
    out = []
    for c in cpus:
        core = next((g.cpus for g in topo.enclosing(c) if g.flags & CG_FLAG_THREAD), (c,))
        if ht_allowed or c == min(core):
            out.append(c)
    return sorted(out)


def expected_order(topo: Topology, intr: List[int], domain: Optional[int], core_spread: int,
                   queues: int) -> List[int]:
    """The CPUs of queues 0..``queues``-1: the numeric walk of ``intr`` for
    ``core_spread=0``, else the model's spread order. Pure."""
    if core_spread == 0:
        order = list(intr)
    else:
        # intr is already the domain's CPUs when the domain is known.
        order = model.spread_order(topo, intr, core_spread)
    return [order[i % len(order)] for i in range(queues)] if order else []


def _cpus(cpus: List[int]) -> str:
    return ",".join(map(str, cpus))


def explain(run: RunResult, core_spread: int) -> Optional[Dict[str, object]]:
    """What :func:`check` compares, for the report: ``{"device", "domain",
    "ht_intr", "interrupt_set", "queues", "expected", "core_spread"}``, or None
    without topology or queues."""
    topo = topology_of(run)
    got = queue_order(run)
    if topo is None or not got:
        return None
    dom = nic_domain(run)
    ht = run.sysctls.get("machdep.hyperthreading_intr_allowed", str(HT_INTR_DEFAULT)).strip()
    try:
        intr = interrupt_set(topo, dom, ht == "1")
        want = expected_order(topo, intr, dom, core_spread, len(got))
    except (TopologyError, ValueError):
        return None
    return {"device": nic_device(run), "domain": dom, "ht_intr": ht == "1",
            "interrupt_set": intr, "queues": got, "expected": want,
            "core_spread": core_spread}


def summary(label: str, run: RunResult, core_spread: int) -> List[str]:
    """Report lines: the NIC, its domain and interrupt set, and the queue CPUs
    against what :func:`check` expects."""
    e = explain(run, core_spread)
    if e is None:
        return []
    dev = str(e["device"])[4:].replace(".", "")
    where = (f"domain {e['domain']}" if e["domain"] is not None
             else "domain unknown (no _PXM)")
    return [f"{label}: {dev} {where}, interrupt set {_cpus(e['interrupt_set'])} "
            f"({len(e['interrupt_set'])} CPUs); core_spread={core_spread}: rx queues on "
            f"{_cpus(e['queues'])}, expected {_cpus(e['expected'])}"]


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
    e = explain(run, core_spread)
    if e is None:
        return out + [f"{label}: the NIC's interrupt set cannot be derived from the "
                      "guest's topology and domain"]
    topo = topology_of(run)
    if e["domain"] is not None:
        from rxl.decide.topology import domain_cpus
        mine = set(domain_cpus(topo, e["domain"]))
        away = [c for c in e["queues"] if c not in mine]
        if away:
            out.append(f"{label}: rx queues on CPUs {_cpus(away)}, outside the NIC's "
                       f"domain {e['domain']}")
    if e["queues"] != e["expected"]:
        what = "the numeric order of" if core_spread == 0 else "the spread order of"
        out.append(f"{label}: core_spread={core_spread} put rx queues on "
                   f"{_cpus(e['queues'])}, expected {what} the interrupt set "
                   f"{_cpus(e['interrupt_set'])}: {_cpus(e['expected'])}")
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
