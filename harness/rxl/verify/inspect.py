"""Read the kernel's view of its dealt maps: ``net.inet.tcp.reuseport_lb.groups``.

The format is the one ``in_pcblb_report()`` (sys/netinet/in_pcblb.c of the
15 series; /work/coord/abi15.md) writes: per load-balancing group a
``group`` line, then, with learning state, one ``learn`` line and an ``rx``
line per CPU with a count, then a ``member`` line per member (0, 1, ... in
order) and a ``cpu`` line per CPU that supplies slots (ascending)::

    group port 8080 af inet members 2 map 32 deal 0
    learn window_ms 10000 age_ms 4210 rolls 7
    rx 0 last 6756 cur 3301 sum 13000
    member 0 tag 0 learned
    member 1 tag none
    cpu 0 offset 0 slots 32

A member line gives no slot count: every member of a map has
:data:`SLOTS_PER_MEMBER` slots (``lbdeal()`` KASSERTs it), none without
one.  The 15 view printed it before (``member 1 tag none - slots 16``,
``member 0 tag 0 learned slots 16``); those lines are read too, and their
counts checked against the map.
``deal D`` is 1 while the group waits for an accept(2) to deal it (a
member marked ``INP_LB_DEAL``); views from before it have no ``deal``.
Before the deal counters were dropped, the 15 view's group line ended in
``rebuilds R nomap F``; such lines are read too.
The 14 series' view (``group ... gen G map N dirty D rebuilds R allocfail
F``, ``rx C prev N cur N``, tags ``hash``) is read too, for logs recorded on
it; a group's lines are all of one.

Every line is accounted for: a line that starts with one of those five
words is a line of the view and must be read whole (every number an
unsigned 32-bit value, each CPU below CPU_MAXSIZE, ports 1-65535, each
member, rx and cpu line once, members in order, ranges tiling the map, the
members' slots adding up to it), else :class:`InspectError` names its line
number and its own group.  Other lines (a console log around the dump, a
prompt) are not the view; :func:`read` counts them, and a text with such
lines and no line of a view at all is refused (a JUnit file, a log of
something else).  Blank lines alone are the view of no group (the kernel
lists every group, with a map or not); ``rxl inspect`` refuses an input of
no bytes, which no ``sysctl -n`` prints (:data:`EMPTY_WHY`).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

from rxl.decide.cpugroup import CPU_MAXSIZE
from rxl.errors import DataError, counted, show

#: Largest view read, bytes (rxl inspect): 256 groups of 256 members are
#: under 2 MiB; a console log holding one, a few more.
MAX_BYTES = 16 << 20
#: The view's numbers are u_int (32 bits).
U32_MAX = (1 << 32) - 1
#: Most members of a group: INPCBLBGROUP_SIZMAX (sys/netinet/in_pcb.c).
MEMBERS_MAX = 256
#: Slots every member is owed in a map: LBDEAL_SLOTS (sys/netinet/in_pcblb_deal.h).
SLOTS_PER_MEMBER = 16
#: Why an input of no bytes is no view: the kernel lists every group (map or
#: none), so with no group the view is an empty string, and ``sysctl -n``
#: prints a newline after a string even when it is empty (sbin/sysctl/sysctl.c:
#: show_var(), then parse()'s putchar). Zero bytes are a command that printed
#: nothing: an unknown oid (a kernel without the series), a failed ssh.
EMPTY_WHY = "sysctl -n net.inet.tcp.reuseport_lb.groups prints a line even for no group"
#: What :func:`render` says of a view of no group (blank lines only).
NO_GROUP = "no load-balancing group (the view is empty)"
#: The first words of the view's lines.
KINDS = ("group", "learn", "rx", "member", "cpu")

_N = r"([0-9]{1,10})"
_GROUP = {
    15: re.compile(rf"group port {_N} af (inet6?) members {_N} map {_N}"
                   rf"(?: deal ([01]))?(?: rebuilds {_N} nomap {_N})?"),
    14: re.compile(rf"group port {_N} af (inet6?) members {_N} gen {_N} map {_N} "
                   rf"dirty ([01]) rebuilds {_N} allocfail {_N}"),
}
_LEARN = re.compile(rf"learn window_ms {_N} age_ms (-?[0-9]{{1,10}}) rolls {_N}")
_RX = {15: re.compile(rf"rx {_N} last {_N} cur {_N} sum {_N}"),
       14: re.compile(rf"rx {_N} prev {_N} cur {_N}")}
_MEMBER = {15: re.compile(rf"member {_N} tag (?:(none)|{_N} (explicit|learned))()"),
           "15-slots": re.compile(rf"member {_N} tag (?:(none) -|{_N} (explicit|learned)) "
                                  rf"slots {_N}"),
           14: re.compile(rf"member {_N} tag (?:(none|hash) -|{_N} (explicit|learned)) "
                          rf"slots {_N}")}
_CPU = re.compile(rf"cpu {_N} offset {_N} slots {_N}")
#: What a line of each kind looks like, in the error that refuses one: by the
#: group's format (the 15 series' or the older 14 series', read from its group
#: line), "*" for both.
_SHAPE = {("learn", "*"): "learn window_ms N age_ms N rolls N",
          ("rx", 15): "rx CPU last N cur N sum N",
          ("rx", 14): "rx CPU prev N cur N",
          ("member", 15): "member I tag none, or member I tag CPU explicit|learned",
          ("member", 14): "member I tag none|hash - slots N, or member I tag CPU "
                          "explicit|learned slots N",
          ("cpu", "*"): "cpu CPU offset N slots N"}


class InspectError(DataError):
    """A line of the view that cannot be read, or a group whose lines disagree
    (one line naming the line number and the group)."""


@dataclass
class Member:
    """One member: ``tag`` a CPU id, or None with ``kind`` "none" (or the 14
    view's "hash"); ``kind`` "explicit" or "learned" for a CPU tag;
    ``slots`` of the map (the line's count, or :data:`SLOTS_PER_MEMBER`
    in a map and 0 without one where the line gives none)."""

    index: int
    tag: Optional[int]
    kind: str
    slots: int


@dataclass
class Group:
    """One load-balancing group.  ``map_slots`` is 0 without a map; ``rx``
    maps a CPU to its (last or 14's previous window, current) counts,
    ``rx_sum`` to the deal's input fixed at the last roll (15 only);
    ``ranges`` a CPU to its (offset, slots) in the map; ``window_ms`` is
    None without learning state.  ``view``: 15 or 14; ``rebuilds`` and
    ``nomap`` (15, None in a view without them) or ``gen``, ``allocfail``
    (14); ``dirty``: a deal pending at the next accept(2) (15's ``deal``)
    or a rebuild pending (14's ``dirty``), None in a 15 view without it;
    ``line``: the group line's number."""

    port: int
    af: str
    members: int
    map_slots: int
    rebuilds: Optional[int] = None
    view: int = 15
    nomap: Optional[int] = None
    gen: Optional[int] = None
    dirty: Optional[bool] = None
    allocfail: Optional[int] = None
    window_ms: Optional[int] = None
    age_ms: Optional[int] = None
    rolls: Optional[int] = None
    rx: Dict[int, Tuple[int, int]] = field(default_factory=dict)
    rx_sum: Dict[int, int] = field(default_factory=dict)
    member_list: List[Member] = field(default_factory=list)
    ranges: Dict[int, Tuple[int, int]] = field(default_factory=dict)
    line: int = 0

    @property
    def where(self) -> str:
        return f"group port {self.port} af {self.af} (line {self.line})"

    def check(self) -> None:
        """Raise :class:`InspectError` if the group's lines disagree: member
        count, slots against the map size, ranges tiling the map."""
        if len(self.member_list) != self.members:
            raise InspectError(f"{self.where}: {counted(self.members, 'member')} announced, "
                               f"{counted(len(self.member_list), 'member line')}")
        if self.map_slots not in (0, SLOTS_PER_MEMBER * self.members):
            raise InspectError(f"{self.where}: a map of {counted(self.map_slots, 'slot')} for "
                               f"{counted(self.members, 'member')} (a map has {SLOTS_PER_MEMBER} a "
                               "member)")
        if sum(m.slots for m in self.member_list) != self.map_slots:
            raise InspectError(f"{self.where}: member slots add up to "
                               f"{sum(m.slots for m in self.member_list)}, "
                               f"map has {self.map_slots}")
        pos = 0
        for cpu in sorted(self.ranges, key=lambda c: self.ranges[c][0]):
            off, n = self.ranges[cpu]
            if off != pos:
                raise InspectError(f"{self.where}: cpu {cpu} range starts at "
                                   f"{off}, expected {pos}")
            pos += n
        if pos != self.map_slots:
            raise InspectError(f"{self.where}: ranges cover {pos} of "
                               f"{counted(self.map_slots, 'slot')}")


def _numbers(m: re.Match, what: str, at: str) -> List[Optional[int]]:
    out = []
    for g in m.groups():
        if g is not None and g.isdigit():
            v = int(g)
            if v > U32_MAX:
                raise InspectError(f"{at}: {v} is beyond a 32-bit counter: not a {what} "
                                   "line")
            out.append(v)
        else:
            out.append(None)
    return out


def read(lines: Iterable[str]) -> Tuple[List[Group], int]:
    """The groups of a view, in the order the kernel listed them, and how many
    non-blank lines were not part of the view; see the module doc.

    Raises :class:`InspectError` naming the line for a line of the view that
    cannot be read or contradicts its group, and for non-blank text that
    holds no line of a view at all.
    """
    groups: List[Group] = []
    cur: Optional[Group] = None
    skipped = 0
    stray: Optional[Tuple[int, str]] = None  # a line that is not the view, after a group's
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        word = line.split(" ", 1)[0]
        if word not in KINDS:
            if line:
                skipped += 1
                if cur is not None and stray is None:
                    stray = (n, line)
            continue
        at = f"line {n}"
        if stray is not None and word != "group" and cur is not None:
            raise InspectError(f"line {stray[0]} ({cur.where}): not a line of the view, "
                               f"inside the group (its {word} lines go on at line {n}): "
                               f"{show(stray[1], 60)}")
        stray = None
        if word == "group":
            if cur is not None:
                cur.check()
            cur = _group_line(line, at, n)
            groups.append(cur)
            continue
        if cur is None:
            raise InspectError(f"{at}: a {word} line before any group line: "
                               f"{show(line, 60)}")
        _group_part(cur, word, line, f"{at} ({cur.where})")
    if cur is not None:
        cur.check()
    if not groups and skipped:
        raise InspectError(f"no line of a groups view (net.inet.tcp.reuseport_lb.groups) "
                           f"among {counted(skipped, 'line')}")
    return groups, skipped


def parse(lines: Iterable[str]) -> List[Group]:
    """:func:`read`'s groups (the lines around the view are not counted)."""
    return read(lines)[0]


def _group_line(line: str, at: str, n: int) -> Group:
    for view, rx in _GROUP.items():
        m = rx.fullmatch(line)
        if m:
            break
    else:
        raise InspectError(f"{at}: not a group line of the groups view: {show(line, 80)}")
    v = _numbers(m, "group", at)
    if view == 15:
        port, _, members, nslots, deal, rebuilds, nomap = v
        g = Group(port, m.group(2), members, nslots, rebuilds, view=15, nomap=nomap,
                  dirty=None if deal is None else deal == 1, line=n)
    else:
        port, _, members, gen, nslots, dirty, rebuilds, allocfail = v
        g = Group(port, m.group(2), members, nslots, rebuilds, view=14, gen=gen,
                  dirty=dirty == 1, allocfail=allocfail, line=n)
    if not 1 <= port <= 65535:
        raise InspectError(f"{at}: port {port} is not a TCP port (1-65535)")
    if members > MEMBERS_MAX:
        raise InspectError(f"{at}: {members} members; a group holds at most {MEMBERS_MAX}")
    return g


def _cpu(cpu: int, at: str) -> int:
    if cpu >= CPU_MAXSIZE:
        raise InspectError(f"{at}: CPU {cpu} is beyond CPU_MAXSIZE ({CPU_MAXSIZE})")
    return cpu


def _not_a(word: str, g: Group, at: str, line: str) -> InspectError:
    """The error for a ``word`` line of group ``g`` that is not one: what such
    a line looks like (in the older 14 series format when the group line is
    in it) and the line."""
    shape = _SHAPE.get((word, g.view)) or _SHAPE[(word, "*")]
    older = ", in the older format its group line uses" \
        if g.view == 14 and (word, 14) in _SHAPE else ""
    a = "an" if word == "rx" else "a"  # "an rx", "a learn", "a member", "a cpu"
    return InspectError(f"{at}: not {a} {word} line ({shape}{older}): {show(line, 80)}")


def _group_part(g: Group, word: str, line: str, at: str) -> None:
    """One learn, rx, member or cpu line of group ``g``."""
    if word == "learn":
        m = _LEARN.fullmatch(line)
        if not m:
            raise _not_a("learn", g, at, line)
        if g.window_ms is not None:
            raise InspectError(f"{at}: a second learn line (learn given twice)")
        if g.rx or g.member_list or g.ranges:
            raise InspectError(f"{at}: the learn line comes right after the group line")
        g.window_ms, _, g.rolls = _numbers(m, "learn", at)
        g.age_ms = int(m.group(2))
        return
    if word == "rx":
        m = _RX[g.view].fullmatch(line)
        if not m:
            raise _not_a("rx", g, at, line)
        v = _numbers(m, "rx", at)
        cpu = _cpu(v[0], at)
        if g.window_ms is None:
            raise InspectError(f"{at}: an rx line without the group's learn line")
        if g.member_list or g.ranges:
            raise InspectError(f"{at}: rx lines come before the member lines")
        if cpu in g.rx:
            raise InspectError(f"{at}: rx {cpu} given twice")
        if g.rx and cpu < max(g.rx):
            raise InspectError(f"{at}: rx {cpu} after rx {max(g.rx)} (the kernel lists "
                               "CPUs in order)")
        if g.view == 15 and v[3] < v[1]:
            raise InspectError(f"{at}: rx {cpu} sum {v[3]} below its last {v[1]}: the "
                               "deal's input is the last window plus perhaps the one "
                               "before (docs/design.md, Core 3)")
        g.rx[cpu] = (v[1], v[2])
        if g.view == 15:
            g.rx_sum[cpu] = v[3]
        return
    if word == "member":
        m = _MEMBER[g.view].fullmatch(line)
        if not m and g.view == 15:
            m = _MEMBER["15-slots"].fullmatch(line)
        if not m:
            raise _not_a("member", g, at, line)
        idx, none_kind, tag, kind, slots = m.groups()
        idx = int(idx)
        slots = int(slots) if slots else (SLOTS_PER_MEMBER if g.map_slots else 0)
        if idx >= g.members:
            raise InspectError(f"{at}: member {idx} of a group of "
                               f"{counted(g.members, 'member')}")
        if idx != len(g.member_list):
            raise InspectError(f"{at}: member {idx} where member {len(g.member_list)} comes "
                               "(members are listed once each, in order)")
        if g.ranges:
            raise InspectError(f"{at}: member lines come before the cpu lines")
        if slots > U32_MAX:
            raise InspectError(f"{at}: {slots} slots is beyond a 32-bit counter")
        if slots and not g.map_slots:
            raise InspectError(f"{at}: member {idx} has {counted(slots, 'slot')} of a group without "
                               "a map (map 0)")
        cpu = None if tag is None else _cpu(int(tag), at)
        g.member_list.append(Member(idx, cpu, kind if cpu is not None else none_kind, slots))
        return
    m = _CPU.fullmatch(line)
    if not m:
        raise _not_a("cpu", g, at, line)
    cpu, off, n = _numbers(m, "cpu", at)
    _cpu(cpu, at)
    if cpu in g.ranges:
        raise InspectError(f"{at}: cpu {cpu} given twice")
    if g.ranges and cpu < max(g.ranges):
        raise InspectError(f"{at}: cpu {cpu} after cpu {max(g.ranges)} (the kernel lists "
                           "CPUs in order)")
    if not n:
        raise InspectError(f"{at}: cpu {cpu} supplies no slot (only CPUs that do are listed)")
    g.ranges[cpu] = (off, n)


def as_json(groups: List[Group]) -> List[dict]:
    """Plain dicts (JSON keys are strings: rx, rx_sum and ranges by CPU id)."""
    out = []
    for g in groups:
        d = asdict(g)
        d["rx"] = {str(c): list(v) for c, v in g.rx.items()}
        d["rx_sum"] = {str(c): v for c, v in g.rx_sum.items()}
        d["ranges"] = {str(c): list(v) for c, v in g.ranges.items()}
        out.append(d)
    return out


def render(groups: List[Group]) -> str:
    """A short table per group: members with tag and slots, then the
    receiving CPUs with their window counts and their map ranges."""
    lines = []
    for g in groups:
        learn = (f", window {g.window_ms} ms, {counted(g.rolls, 'roll')}"
                 if g.window_ms is not None else ", no learning")
        nomem = g.nomap if g.view == 15 else g.allocfail
        pending = ", deal pending at accept(2)" if g.view == 15 else ", rebuild pending"
        deals = (f", {counted(g.rebuilds, 'rebuild')}, {nomem} without memory"
                 if g.rebuilds is not None else "")
        lines.append(f"port {g.port} ({g.af}): {counted(g.members, 'member')}, map "
                     f"{g.map_slots or 'none'}{deals}{learn}"
                     f"{pending if g.dirty else ''}")
        for m in g.member_list:
            tag = f"{m.tag} ({m.kind})" if m.tag is not None else m.kind
            lines.append(f"  member {m.index:3}  tag {tag:16} slots {m.slots}")
        for cpu in sorted(set(g.rx) | set(g.ranges)):
            prev, now = g.rx.get(cpu, (0, 0))
            off, n = g.ranges.get(cpu, (0, 0))
            dealt = f"  dealt on {g.rx_sum[cpu]}" if cpu in g.rx_sum else ""
            lines.append(f"  cpu {cpu:4}  handshakes {prev:>8} + {now:>8}{dealt}  "
                         f"slots {n:4} at {off}")
    return "\n".join(lines) if lines else NO_GROUP
