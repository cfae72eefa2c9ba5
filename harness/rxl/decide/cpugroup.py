"""The kernel's cpu_group tree: its constants, :class:`Group`, :class:`Topology`.

A :class:`Topology` is the tree ``smp_topo()`` builds (sys/sys/smp.h,
sys/kern/subr_smp.c): every group holds a set of CPUs, shares a cache level
(``CG_SHARE_*``) and has flags (``CG_FLAG_*``); children partition their
parent's CPUs, leaves are the innermost groups (SMT cores).  Where
topologies come from (built-in shapes, spec strings, ``topology_spec``
XML) is :mod:`rxl.decide.topology`.  Errors: :class:`TopologyError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from rxl.errors import DataError

# Cache levels and flags: sys/sys/smp.h (FreeBSD 14.0).
CG_SHARE_NONE = 0
CG_SHARE_L1 = 1
CG_SHARE_L2 = 2
CG_SHARE_L3 = 3
CG_FLAG_HTT = 0x01
CG_FLAG_SMT = 0x02
CG_FLAG_THREAD = CG_FLAG_HTT | CG_FLAG_SMT
CG_FLAG_NODE = 0x04

FLAG_NAMES = {"HTT": CG_FLAG_HTT, "SMT": CG_FLAG_SMT, "NODE": CG_FLAG_NODE}

#: CPU ids are below CPU_MAXSIZE = 1024 (sys/sys/_cpuset.h), the size of a
#: cpuset_t outside the kernel and the userspace build's CPU_SETSIZE.
CPU_MAXSIZE = 1024

#: Deepest cpu_group tree accepted.  smp_topo() builds at most a root, a
#: package, a NUMA node and one group per cache level (MAX_CACHE_LEVELS = 3
#: in sys/sys/smp.h); 8 leaves room and stops runaway nesting.
MAX_DEPTH = 8


class TopologyError(DataError):
    """A topology (name, spec string or XML) that cannot be used."""


@dataclass(frozen=True)
class Group:
    """One cpu_group: its CPUs (ascending), cache level, flags, children."""

    cpus: Tuple[int, ...]
    level: int = CG_SHARE_NONE
    flags: int = 0
    children: Tuple["Group", ...] = ()

    def walk(self) -> Iterator["Group"]:
        """Preorder: this group, then each child's subtree in order."""
        yield self
        for child in self.children:
            yield from child.walk()


@dataclass(frozen=True)
class Topology:
    """A validated cpu_group tree and lookups over it."""

    name: str
    root: Group
    _chains: Dict[int, Tuple[Group, ...]] = field(
        default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        _validate(self.root)
        for group in self.root.walk():
            if not group.children:
                for cpu in group.cpus:
                    self._chains[cpu] = tuple(_chain(self.root, cpu))

    @property
    def cpus(self) -> Tuple[int, ...]:
        """Every CPU, ascending."""
        return self.root.cpus

    @property
    def ncpu(self) -> int:
        """``mp_maxid + 1``: one past the highest CPU id."""
        return max(self.root.cpus) + 1

    def has_cpu(self, cpu: int) -> bool:
        return cpu in self._chains

    def enclosing(self, cpu: int) -> Tuple[Group, ...]:
        """The groups holding ``cpu``, innermost first, root last.

        Raises TopologyError for a CPU that is not in the tree.
        """
        try:
            return self._chains[cpu]
        except KeyError:
            raise TopologyError(f"CPU {cpu} is not in topology {self.name}")

    def ring(self, rx_cpu: int, tag: Optional[int]) -> Optional[int]:
        """Ring of a member tagged ``tag`` as seen from ``rx_cpu``.

        0 for the CPU itself, ``k`` when the ``k``-th enclosing group of
        ``rx_cpu`` (1 = innermost) is the smallest one holding ``tag``;
        None for an untagged member or one outside the tree.
        """
        if tag is None or not self.has_cpu(tag):
            return None
        if tag == rx_cpu:
            return 0
        for k, group in enumerate(self.enclosing(rx_cpu), start=1):
            if tag in group.cpus:
                return k
        return None  # pragma: no cover - the root holds every CPU

    def l3_of(self, cpu: int) -> Optional[Group]:
        """The outermost group sharing an L3 that holds ``cpu``, if any."""
        for group in reversed(self.enclosing(cpu)):
            if group.level == CG_SHARE_L3:
                return group
        return None

    def bfs(self) -> List[Tuple[Group, int]]:
        """Groups breadth first, each with its parent's index (-1: root).

        Children of every group are contiguous, as ``smp_topo()`` lays
        them out; the userspace build of the cores relies on it.
        """
        out: List[Tuple[Group, int]] = [(self.root, -1)]
        i = 0
        while i < len(out):
            group = out[i][0]
            out.extend((child, i) for child in group.children)
            i += 1
        return out

    def to_xml(self) -> str:
        """The tree in ``kern.sched.topology_spec`` form."""
        lines = ["<groups>"]
        _emit(self.root, 0, lines)
        lines.append("</groups>")
        return "\n".join(lines) + "\n"


def _chain(root: Group, cpu: int) -> List[Group]:
    path = [root]
    while path[-1].children:
        for child in path[-1].children:
            if cpu in child.cpus:
                path.append(child)
                break
        else:
            break
    return list(reversed(path))


def _validate(group: Group, depth: int = 0) -> None:
    """Raise TopologyError unless ``group`` and its subtree could have come
    from smp_topo(): CPU ids in range, known levels and flags, children
    partitioning their parent."""
    if depth > MAX_DEPTH:
        raise TopologyError(f"cpu_group tree deeper than {MAX_DEPTH} levels")
    if not group.cpus:
        raise TopologyError("a cpu_group with no CPUs")
    if list(group.cpus) != sorted(set(group.cpus)):
        raise TopologyError(
            f"cpu_group CPUs not ascending and distinct: {group.cpus}")
    for cpu in (group.cpus[0], group.cpus[-1]):
        if not 0 <= cpu < CPU_MAXSIZE:
            raise TopologyError(f"CPU id {cpu} outside 0-{CPU_MAXSIZE - 1} "
                                "(CPU_MAXSIZE)")
    if not CG_SHARE_NONE <= group.level <= CG_SHARE_L3:
        raise TopologyError(f"cache-level {group.level} is not one of 0-3 "
                            "(CG_SHARE_NONE to CG_SHARE_L3)")
    if group.flags & ~(CG_FLAG_THREAD | CG_FLAG_NODE):
        raise TopologyError(f"unknown cpu_group flags {group.flags:#x}")
    if group.children:
        union: List[int] = []
        for child in group.children:
            union.extend(child.cpus)
        if sorted(union) != list(group.cpus):
            raise TopologyError(
                "children of a cpu_group do not partition its CPUs "
                f"{cpu_ranges(group.cpus)}")
        for child in group.children:
            _validate(child, depth + 1)


def _emit(group: Group, indent: int, lines: List[str]) -> None:
    pad = " " * indent
    mask = 0
    for cpu in group.cpus:
        mask |= 1 << cpu
    lines.append(f'{pad}<group level="{1 + indent // 2}" '
                 f'cache-level="{group.level}">')
    lines.append(f'{pad} <cpu count="{len(group.cpus)}" mask="{mask:x}">'
                 + ", ".join(str(c) for c in group.cpus) + "</cpu>")
    if group.flags:
        flags = ""
        if group.flags & CG_FLAG_HTT:
            flags += '<flag name="HTT">HTT group</flag>'
        if group.flags & CG_FLAG_THREAD:
            flags += '<flag name="THREAD">THREAD group</flag>'
        if group.flags & CG_FLAG_SMT:
            flags += '<flag name="SMT">SMT group</flag>'
        if group.flags & CG_FLAG_NODE:
            flags += '<flag name="NODE">NUMA node</flag>'
        lines.append(f"{pad} <flags>{flags}</flags>")
    if group.children:
        lines.append(f"{pad} <children>")
        for child in group.children:
            _emit(child, indent + 2, lines)
        lines.append(f"{pad} </children>")
    lines.append(f"{pad}</group>")


def cpu_ranges(cpus: Sequence[int]) -> str:
    """Sorted CPU ids as ranges, e.g. ``[0, 1, 2, 5]`` -> ``"0-2,5"``."""
    out = []
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(out)
