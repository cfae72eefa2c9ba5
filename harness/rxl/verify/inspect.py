"""Read the kernel's view of its dealt maps: ``net.inet.tcp.reuseport_lb.groups``.

The format is the one docs/design.md ("Commits 2 and 3 in the kernel",
Observability) gives, written by ``in_pcblb_report()`` in
sys/netinet/in_pcb.c: one ``group`` line per load-balancing group, then
that group's ``learn``, ``rx``, ``member`` and ``cpu`` lines, each a first
word followed by ``key value`` pairs::

    group port 8080 af inet members 2 gen 5 map 32 dirty 0 rebuilds 3 allocfail 0
    learn window_ms 10000 age_ms 4210 rolls 7
    rx 0 prev 5034 cur 2511
    member 0 tag 2 learned slots 16
    member 1 tag none - slots 16
    cpu 0 offset 0 slots 15

Lines that fit none of these (a console log around a dump, a prompt) are
skipped, so the input may be a whole console log or the output of
``sysctl -n net.inet.tcp.reuseport_lb.groups``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

from rxl.errors import DataError

#: Numbers are at most 20 digits (a 64-bit counter); a longer one is a
#: damaged line, skipped like any other that fits no pattern (Python would
#: refuse to convert 4,300 digits or more at all).
_GROUP = re.compile(
    r"^group port (\d{1,20}) af (inet6?) members (\d{1,20}) gen (\d{1,20}) map (\d{1,20}) "
    r"dirty ([01]) rebuilds (\d{1,20}) allocfail (\d{1,20})\s*$")
_LEARN = re.compile(r"^learn window_ms (\d{1,20}) age_ms (-?\d{1,20}) rolls (\d{1,20})\s*$")
_RX = re.compile(r"^rx (\d{1,20}) prev (\d{1,20}) cur (\d{1,20})\s*$")
_MEMBER = re.compile(
    r"^member (\d{1,20}) tag (\d{1,20}|none|hash) (explicit|learned|-) slots (\d{1,20})\s*$")
_CPU = re.compile(r"^cpu (\d{1,20}) offset (\d{1,20}) slots (\d{1,20})\s*$")


class InspectError(DataError):
    """A group's lines contradict each other (one line, for the user)."""


@dataclass
class Member:
    """One member: ``tag`` a CPU id, or None with ``kind`` "none"/"hash";
    ``kind`` "explicit" or "learned" for a CPU tag; ``slots`` of the map."""

    index: int
    tag: Optional[int]
    kind: str
    slots: int


@dataclass
class Group:
    """One load-balancing group.  ``map_slots`` is 0 without a map;
    ``rx`` maps a CPU to its (previous, current) window counts; ``ranges``
    a CPU to its (offset, slots) in the map; ``window_ms`` is None without
    learning state."""

    port: int
    af: str
    members: int
    gen: int
    map_slots: int
    dirty: bool
    rebuilds: int
    allocfail: int
    window_ms: Optional[int] = None
    age_ms: Optional[int] = None
    rolls: Optional[int] = None
    rx: Dict[int, Tuple[int, int]] = field(default_factory=dict)
    member_list: List[Member] = field(default_factory=list)
    ranges: Dict[int, Tuple[int, int]] = field(default_factory=dict)

    def check(self) -> None:
        """Raise :class:`InspectError` if the lines disagree: member count,
        slots per member against the map size, ranges tiling the map."""
        where = f"group port {self.port} af {self.af}"
        if len(self.member_list) != self.members:
            raise InspectError(f"{where}: {self.members} members announced, "
                               f"{len(self.member_list)} member lines")
        if sum(m.slots for m in self.member_list) != self.map_slots:
            raise InspectError(f"{where}: member slots add up to "
                               f"{sum(m.slots for m in self.member_list)}, "
                               f"map has {self.map_slots}")
        pos = 0
        for cpu in sorted(self.ranges, key=lambda c: self.ranges[c][0]):
            off, n = self.ranges[cpu]
            if off != pos:
                raise InspectError(f"{where}: cpu {cpu} range starts at "
                                   f"{off}, expected {pos}")
            pos += n
        if pos != self.map_slots:
            raise InspectError(f"{where}: ranges cover {pos} of "
                               f"{self.map_slots} slots")


def parse(lines: Iterable[str]) -> List[Group]:
    """Groups in the order the kernel listed them; see the module doc.

    Raises :class:`InspectError` when a group's lines disagree
    (:meth:`Group.check`) or a group's line comes before any group line.
    """
    groups: List[Group] = []
    cur: Optional[Group] = None

    def need(kind: str) -> Group:
        if cur is None:
            raise InspectError(f"a {kind} line before any group line")
        return cur

    for raw in lines:
        line = raw.strip()
        if (m := _GROUP.match(line)):
            if cur is not None:
                cur.check()
            port, af, n, gen, nslots, dirty, rb, af_ = m.groups()
            cur = Group(int(port), af, int(n), int(gen), int(nslots),
                        dirty == "1", int(rb), int(af_))
            groups.append(cur)
        elif (m := _LEARN.match(line)):
            g = need("learn")
            g.window_ms, g.age_ms, g.rolls = (int(x) for x in m.groups())
        elif (m := _RX.match(line)):
            cpu, prev, now = (int(x) for x in m.groups())
            need("rx").rx[cpu] = (prev, now)
        elif (m := _MEMBER.match(line)):
            idx, tag, kind, slots = m.groups()
            cpu = int(tag) if tag.isdigit() else None
            need("member").member_list.append(
                Member(int(idx), cpu, kind if cpu is not None else tag,
                       int(slots)))
        elif (m := _CPU.match(line)):
            cpu, off, n = (int(x) for x in m.groups())
            need("cpu").ranges[cpu] = (off, n)
    if cur is not None:
        cur.check()
    return groups


def as_json(groups: List[Group]) -> List[dict]:
    """Plain dicts (JSON keys are strings: rx and ranges by CPU id)."""
    out = []
    for g in groups:
        d = asdict(g)
        d["rx"] = {str(c): list(v) for c, v in g.rx.items()}
        d["ranges"] = {str(c): list(v) for c, v in g.ranges.items()}
        out.append(d)
    return out


def render(groups: List[Group]) -> str:
    """A short table per group: members with tag and slots, then the
    receiving CPUs with their window counts and their map ranges."""
    lines = []
    for g in groups:
        learn = (f", window {g.window_ms} ms, {g.rolls} rolls"
                 if g.window_ms is not None else ", no learning")
        lines.append(f"port {g.port} ({g.af}): {g.members} members, map "
                     f"{g.map_slots or 'none'}, {g.rebuilds} rebuilds, "
                     f"{g.allocfail} without memory{learn}"
                     f"{', rebuild pending' if g.dirty else ''}")
        for m in g.member_list:
            tag = f"{m.tag} ({m.kind})" if m.tag is not None else m.kind
            lines.append(f"  member {m.index:3}  tag {tag:16} slots {m.slots}")
        for cpu in sorted(set(g.rx) | set(g.ranges)):
            prev, now = g.rx.get(cpu, (0, 0))
            off, n = g.ranges.get(cpu, (0, 0))
            lines.append(f"  cpu {cpu:4}  handshakes {prev:>8} + {now:>8}  "
                         f"slots {n:4} at {off}")
    return "\n".join(lines) if lines else "no group with a map, a tag or learning"
