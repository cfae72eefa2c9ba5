"""CPU topologies as FreeBSD's scheduler sees them: where the trees come from.

The tree itself (:class:`~rxl.decide.cpugroup.Topology`, the cpu_group tree
``smp_topo()`` builds, and its ``CG_SHARE_*`` / ``CG_FLAG_*`` constants) is
:mod:`rxl.decide.cpugroup`.

Sources of topologies:

* built-ins named in :data:`BUILTINS` (the seed's two hosts and the
  harness's own QEMU guest), numbered as FreeBSD numbers x86 CPUs: the SMT
  siblings of core ``k`` are ``2k`` and ``2k + 1``, L3 groups and sockets
  take ascending blocks;
* ``"LxCxT"`` (for example ``"2x4x2"``): ``L`` L3 groups of ``C`` cores of
  ``T`` threads, numbered the same way;
* a file, the pipe of ``<(...)`` or stdin (``-``) holding ``sysctl -n
  kern.sched.topology_spec`` (the XML that
  ``sysctl_kern_sched_topology_spec_internal()`` in sys/kern/sched_ule.c
  prints), as people paste it: read by :mod:`rxl.decide.dump`.

Errors: every malformed input raises :class:`TopologyError` (a
``ValueError``) with a one-line message.
"""

from __future__ import annotations

import os
import re
from typing import Dict, Iterable, List, Tuple

from rxl.cli.options import Text, missing, note_stdin_read
from rxl.decide import distance, dump
from rxl.decide.cpugroup import (CG_FLAG_NODE, CG_FLAG_SMT, CG_SHARE_L2, CG_SHARE_L3, CG_SHARE_NONE,
                                 CPU_MAXSIZE, Group, Topology, TopologyError, cpu_ranges)
from rxl.errors import counted, quoted


def regular(name: str, l3_groups: int, cores: int, threads: int,
            l3_flags: int = 0) -> Topology:
    """``l3_groups`` L3 groups of ``cores`` cores of ``threads`` threads.

    CPUs are numbered core by core (siblings adjacent), L3 groups in
    ascending blocks.  With one L3 group the root itself shares the L3, as
    on a single-CCX machine.  Cores with one thread are not groups of
    their own (FreeBSD makes no single-CPU groups).  Raises TopologyError
    for non-positive sizes.
    """
    if min(l3_groups, cores, threads) < 1:
        raise TopologyError(f"topology sizes must be positive: "
                            f"{l3_groups}x{cores}x{threads}")
    if l3_groups * cores * threads > CPU_MAXSIZE:
        raise TopologyError(f"{l3_groups}x{cores}x{threads} has more than "
                            f"{CPU_MAXSIZE} CPUs (CPU_MAXSIZE)")
    per_l3 = cores * threads

    def l3(base: int) -> Group:
        cpus = tuple(range(base, base + per_l3))
        kids: Tuple[Group, ...] = ()
        if threads > 1 and cores > 1:
            kids = tuple(
                Group(tuple(range(base + k * threads,
                                  base + (k + 1) * threads)),
                      CG_SHARE_L2, CG_FLAG_SMT)
                for k in range(cores))
        elif threads > 1:
            return Group(cpus, CG_SHARE_L3, CG_FLAG_SMT | l3_flags)
        return Group(cpus, CG_SHARE_L3, l3_flags, kids)

    if l3_groups == 1:
        return Topology(name, l3(0))
    groups = tuple(l3(i * per_l3) for i in range(l3_groups))
    return Topology(name, Group(tuple(range(l3_groups * per_l3)),
                                CG_SHARE_NONE, 0, groups))


#: Built-in topologies: (L3 groups, cores per L3, threads per core, flags).
#: ryzen-5950x and xeon-e5-2470v2-2s are the seed's measured hosts (seed
#: 000, "The cost ladder" and the overview); qemu-2s is the own guest
#: (-smp 8,sockets=2,cores=2,threads=2 with one NUMA node per socket).
BUILTINS = {
    "ryzen-5950x": (2, 8, 2, 0),
    "xeon-e5-2470v2-2s": (2, 10, 2, CG_FLAG_NODE),
    "qemu-2s": (2, 2, 2, CG_FLAG_NODE),
}

#: Numbers in option values are at most 20 digits (any 64-bit value, so the
#: range checks still name it); longer is malformed, as Python's int()
#: refuses 4,300 digits and more with a message of its own.
_SPEC = re.compile(r"^([0-9]{1,20})x([0-9]{1,20})x([0-9]{1,20})\Z")


def load(spec: str) -> Topology:
    """Resolve a built-in name, an ``LxCxT`` string, ``-`` (stdin) or a
    path (a file or the pipe of ``<(...)`` holding a kern.sched.topology_spec dump, read by
    :mod:`rxl.decide.dump`).

    Raises TopologyError naming what was wrong.
    """
    if spec in BUILTINS:
        l3_groups, cores, threads, flags = BUILTINS[spec]
        return regular(spec, l3_groups, cores, threads, flags)
    m = _SPEC.match(spec)
    if m:
        return regular(spec, *(int(x) for x in m.groups()))
    if dump.is_source(spec):
        text, name = dump.read_source(spec)
        return dump.parse_spec(text, name)
    if os.sep in spec or spec.endswith(".xml"):
        raise TopologyError(f"{spec}: {missing(spec)} (a topology file holds "
                            "sysctl -n kern.sched.topology_spec output)")
    raise TopologyError(
        f"unknown topology {quoted(spec)}: use one of {', '.join(BUILTINS)}, "
        "LxCxT (e.g. 2x4x2), a kern.sched.topology_spec dump file or - "
        "(stdin)")


#: ``sysctl -n kern.sched.topology_spec`` text -> Topology (see
#: :func:`rxl.decide.dump.parse_spec`: pasted dumps, line-numbered errors).
parse_spec = dump.parse_spec


def parse_cpu_list(text: str, what: str = "CPU list") -> List[int]:
    """``"0,2,4-7,16-30:2"`` -> ``[0, 2, 4, 5, 6, 7, 16, 18, ...]``.

    Items are ids, ranges ``a-b`` or strided ranges ``a-b:s``; order is
    kept, duplicates are an error.  Raises TopologyError.
    """
    out: List[int] = []
    for item in text.split(","):
        item = item.strip()
        m = re.fullmatch(r"([0-9]{1,20})(?:-([0-9]{1,20})(?::([0-9]{1,20}))?)?", item)
        if not m:
            raise TopologyError(f"malformed {what} item {quoted(item)} in {quoted(text)}")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        step = int(m.group(3)) if m.group(3) else 1
        if hi >= CPU_MAXSIZE:
            raise TopologyError(f"CPU {hi} in {what} is beyond CPU_MAXSIZE "
                                f"({CPU_MAXSIZE})")
        if hi < lo or step < 1:
            raise TopologyError(f"empty range {quoted(item)} in {what}")
        out.extend(range(lo, hi + 1, step))
    if len(set(out)) != len(out):
        raise TopologyError(f"duplicate CPU in {what} {quoted(text)}")
    return out


def check_cpus(topo: Topology, cpus: Iterable[int], what: str) -> None:
    """Raise TopologyError if any CPU is not in ``topo``."""
    for cpu in cpus:
        if not topo.has_cpu(cpu):
            raise TopologyError(
                f"{what}: CPU {cpu} is not in topology {topo.name} "
                f"(CPUs {cpu_ranges(topo.cpus)})")


def domain_cpus(topo: Topology, domain: int) -> List[int]:
    """CPUs of NUMA domain ``domain``: domains as
    :func:`rxl.decide.distance.domain_of` draws them (NODE groups, else
    packages, else the whole machine), numbered by their lowest CPU.
    Raises TopologyError."""
    doms: Dict[int, List[int]] = {}
    for c in topo.cpus:
        doms.setdefault(id(distance.domain_of(topo, c)), []).append(c)
    groups = sorted(doms.values())
    if not 0 <= domain < len(groups):
        raise TopologyError(f"--domain {domain}: topology {topo.name} has "
                            f"{counted(len(groups), 'NUMA domain')}")
    return groups[domain]


class TopologyOption(Text):
    """``--topology``: a built-in name, ``LxCxT``, a kern.sched.topology_spec
    dump (file, the pipe of ``<(...)``) or ``-`` (stdin), loaded once by :func:`load` -> its
    Topology.  A name it does not know or a dump it cannot read is a usage
    error naming the option (stdin is read here, once: every use of the
    option gets this Topology)."""

    name = "topology"

    def convert(self, value, param, ctx):
        if value == "-" and param is not None:  # stdin is this option's: no other input's
            note_stdin_read(max(param.opts, key=len))
        return super().convert(value, param, ctx)

    def parse(self, text: str) -> Topology:
        return load(text)


#: The one type of every ``--topology`` option.
TOPOLOGY = TopologyOption()
