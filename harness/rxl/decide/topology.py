"""CPU topologies as FreeBSD's scheduler sees them: trees of cpu_group.

A :class:`Topology` is the tree ``smp_topo()`` builds (sys/sys/smp.h,
sys/kern/subr_smp.c): every group holds a set of CPUs, shares a cache level
(``CG_SHARE_*``) and may carry flags (``CG_FLAG_*``); children partition
their parent's CPUs, leaves are the innermost groups (SMT cores).

Sources of topologies:

* built-ins named in :data:`BUILTINS` (the seed's two hosts and the
  QEMU guest of issue 4), numbered as FreeBSD numbers x86 CPUs: the SMT
  siblings of core ``k`` are ``2k`` and ``2k + 1``, L3 groups and sockets
  take ascending blocks;
* ``"LxCxT"`` (for example ``"2x4x2"``): ``L`` L3 groups of ``C`` cores of
  ``T`` threads, numbered the same way;
* a file holding ``sysctl -n kern.sched.topology_spec`` (the XML that
  ``sysctl_kern_sched_topology_spec_internal()`` in sys/kern/sched_ule.c
  prints: nested ``<group>`` elements, each with a ``<cpu>`` list, optional
  ``<flags>`` and ``<children>``).

Errors: every malformed input raises :class:`TopologyError` (a
``ValueError``) with a one-line message.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

# Cache levels and flags: sys/sys/smp.h (FreeBSD 14.0).
CG_SHARE_NONE = 0
CG_SHARE_L1 = 1
CG_SHARE_L2 = 2
CG_SHARE_L3 = 3
CG_FLAG_HTT = 0x01
CG_FLAG_SMT = 0x02
CG_FLAG_THREAD = CG_FLAG_HTT | CG_FLAG_SMT
CG_FLAG_NODE = 0x04

_FLAG_NAMES = {"HTT": CG_FLAG_HTT, "SMT": CG_FLAG_SMT, "NODE": CG_FLAG_NODE}

#: CPU ids are below CPU_MAXSIZE = 1024 (sys/sys/_cpuset.h), the size of a
#: cpuset_t outside the kernel and the userspace build's CPU_SETSIZE.
CPU_MAXSIZE = 1024
#: Deepest cpu_group tree accepted.  smp_topo() builds at most a root, a
#: package, a NUMA node and one group per cache level (MAX_CACHE_LEVELS = 3
#: in sys/sys/smp.h); 8 leaves room and stops runaway nesting.
MAX_DEPTH = 8

#: Distance classes, nearest first: the keys of ``rings`` in ``rxl deal``.
CLASSES = ("exact", "smt", "l3", "far", "any")


class TopologyError(ValueError):
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

    @property
    def distance_class(self) -> str:
        """The class of a ring that is this group: ``smt``, ``l3`` or ``far``.

        SMT groups (``THREAD`` flags) or groups sharing only L1 are ``smt``;
        groups sharing L2 or L3 are ``l3`` (they are inside one L3); groups
        sharing no cache (packages, the root of a multi-L3 machine) are
        ``far``.
        """
        if self.flags & CG_FLAG_THREAD or self.level == CG_SHARE_L1:
            return "smt"
        if self.level in (CG_SHARE_L2, CG_SHARE_L3):
            return "l3"
        return "far"


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

    def distance_class(self, rx_cpu: int, tag: Optional[int]) -> str:
        """One of :data:`CLASSES` for a connection received on ``rx_cpu``
        and served by a worker on ``tag`` (None: untagged, ``any``)."""
        k = self.ring(rx_cpu, tag)
        if k is None:
            return "any"
        if k == 0:
            return "exact"
        return self.enclosing(rx_cpu)[k - 1].distance_class

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
                f"{_ranges(group.cpus)}")
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
#: 000, "The cost ladder" and the overview); qemu-2s is the guest of issue
#: 4 (-smp 8,sockets=2,cores=2,threads=2 with one NUMA node per socket).
BUILTINS = {
    "ryzen-5950x": (2, 8, 2, 0),
    "xeon-e5-2470v2-2s": (2, 10, 2, CG_FLAG_NODE),
    "qemu-2s": (2, 2, 2, CG_FLAG_NODE),
}

_SPEC = re.compile(r"^(\d+)x(\d+)x(\d+)$")


def load(spec: str) -> Topology:
    """Resolve a built-in name, an ``LxCxT`` string, or an XML file path.

    Raises TopologyError naming what was wrong.
    """
    if spec in BUILTINS:
        l3_groups, cores, threads, flags = BUILTINS[spec]
        return regular(spec, l3_groups, cores, threads, flags)
    m = _SPEC.match(spec)
    if m:
        return regular(spec, *(int(x) for x in m.groups()))
    if os.path.isfile(spec):
        try:
            with open(spec, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise TopologyError(f"cannot read {spec}: {e.strerror}")
        except UnicodeDecodeError:
            raise TopologyError(f"{spec}: not a text file (not UTF-8)")
        return parse_spec(text, name=spec)
    if os.sep in spec or spec.endswith(".xml"):
        raise TopologyError(f"{spec}: no such file (a topology file holds "
                            "sysctl -n kern.sched.topology_spec output)")
    raise TopologyError(
        f"unknown topology {spec!r}: use one of {', '.join(BUILTINS)}, "
        "LxCxT (e.g. 2x4x2) or a kern.sched.topology_spec XML file")


def parse_spec(text: str, name: str = "topology_spec") -> Topology:
    """Parse ``sysctl -n kern.sched.topology_spec`` output.

    Accepts the document with or without its ``<groups>`` wrapper and
    with surrounding noise lines (a console log excerpt).  Raises
    TopologyError if the XML cannot be parsed or describes no valid tree.
    """
    start = text.find("<groups")
    end = text.rfind("</groups>")
    if start >= 0 and end > start:
        text = text[start:end + len("</groups>")]
    else:
        start = text.find("<group")
        end = text.rfind("</group>")
        if start < 0:
            raise TopologyError(f"{name}: no <group> element found")
        if end < start:
            raise TopologyError(f"{name}: unparseable topology XML: "
                                "a <group> element is never closed")
        text = text[start:end + len("</group>")]
    try:
        doc = ET.fromstring(text)
    except ET.ParseError as e:
        raise TopologyError(f"{name}: unparseable topology XML: {e}")
    if doc.tag == "groups":
        groups = doc.findall("group")
        if len(groups) != 1:
            raise TopologyError(f"{name}: expected one root <group>, "
                                f"found {len(groups)}")
        doc = groups[0]
    try:
        return Topology(name, _parse_group(doc, name, 0))
    except TopologyError as e:
        msg = str(e)
        raise TopologyError(msg if msg.startswith(name) else f"{name}: {msg}")


def _parse_group(el: ET.Element, name: str, depth: int) -> Group:
    if depth > MAX_DEPTH:
        raise TopologyError(f"cpu_group tree deeper than {MAX_DEPTH} levels")
    if el.tag != "group":
        raise TopologyError(f"{name}: unexpected element <{el.tag}>")
    cpu = el.find("cpu")
    if cpu is None:
        raise TopologyError(f"{name}: <group> without <cpu>")
    try:
        cpus = tuple(int(x) for x in (cpu.text or "").replace(",", " ").split())
        level = int(el.get("cache-level", "0"))
        count = int(cpu.get("count", str(len(cpus))))
    except ValueError as e:
        raise TopologyError(f"{name}: bad number in <group>: {e}")
    if count != len(cpus):
        raise TopologyError(f"{name}: <cpu count=\"{count}\"> lists "
                            f"{len(cpus)} CPUs")
    flags = 0
    fl = el.find("flags")
    if fl is not None:
        for f in fl.findall("flag"):
            flags |= _FLAG_NAMES.get(f.get("name", ""), 0)
    kids = el.find("children")
    children = tuple(_parse_group(c, name, depth + 1)
                     for c in kids.findall("group")) if kids is not None else ()
    return Group(tuple(sorted(cpus)), level, flags, children)


def parse_cpu_list(text: str, what: str = "CPU list") -> List[int]:
    """``"0,2,4-7,16-30:2"`` -> ``[0, 2, 4, 5, 6, 7, 16, 18, ...]``.

    Items are ids, ranges ``a-b`` or strided ranges ``a-b:s``; order is
    kept, duplicates are an error.  Raises TopologyError.
    """
    out: List[int] = []
    for item in text.split(","):
        item = item.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+))?)?", item)
        if not m:
            raise TopologyError(f"malformed {what} item {item!r} in {text!r}")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        step = int(m.group(3)) if m.group(3) else 1
        if hi >= CPU_MAXSIZE:
            raise TopologyError(f"CPU {hi} in {what} is beyond CPU_MAXSIZE "
                                f"({CPU_MAXSIZE})")
        if hi < lo or step < 1:
            raise TopologyError(f"empty range {item!r} in {what}")
        out.extend(range(lo, hi + 1, step))
    if len(set(out)) != len(out):
        raise TopologyError(f"duplicate CPU in {what} {text!r}")
    return out


def check_cpus(topo: Topology, cpus: Iterable[int], what: str) -> None:
    """Raise TopologyError if any CPU is not in ``topo``."""
    for cpu in cpus:
        if not topo.has_cpu(cpu):
            raise TopologyError(
                f"{what}: CPU {cpu} is not in topology {topo.name} "
                f"(CPUs {_ranges(topo.cpus)})")


def _ranges(cpus: Sequence[int]) -> str:
    out = []
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(out)
