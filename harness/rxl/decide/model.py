"""Reference model of the three decisions, written from the design.

This is the design (seed 000, "Distance rings and the dealing loop",
"What one group holds", "Selecting a member", "Learning at accept(2)") in
plain Python, kept independent of the C under ``sys/``: the C sorts the
members by their CPU's position in the tree once and gives every group's
run a cursor; the model asks the topology for every member's ring and
scans.  Property tests require the two to agree exactly.

Constants, each named once:

* :data:`SLOTS_PER_MEMBER` = 16: "every member is owed 16 slots" (seed 000,
  "Distance rings"); the C's ``LBDEAL_SLOTS``.
* :data:`WINDOW_SEC` = 10: "two 10 s windows" (seed 000, "What one group
  holds"); the C's ``LBLEARN_WINDOW_MS`` / 1000, the default of
  ``net.inet.tcp.reuseport_lb.window_ms``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from rxl.decide import distance
from rxl.decide.cpugroup import CG_FLAG_NODE, CG_FLAG_THREAD, CG_SHARE_L3, Topology

SLOTS_PER_MEMBER = 16
WINDOW_SEC = 10
#: The C's LBDEAL_MAXMEMBERS: 16 x members must fit the 16-bit offsets.
MAX_MEMBERS = 4095


@dataclass(frozen=True)
class Tag:
    """A member's tag: the CPU its worker runs on, or None (untagged).

    ``learned`` marks a tag captured at accept(2) rather than set with
    TCP_REUSPORT_LB_CPU; only explicit tags stand in as receiving CPUs
    before anything is counted (seed 000, "What one group holds").
    """

    cpu: Optional[int] = None
    learned: bool = False


@dataclass(frozen=True)
class Deal:
    """A dealt map.

    ``ranges[cpu] = (offset, count)`` for every CPU that supplies slots;
    ``slots`` has ``total_slots`` member indices; CPU ``c``'s slots are
    ``slots[offset:offset + count]``.
    """

    total_slots: int
    ranges: Dict[int, Tuple[int, int]]
    slots: Tuple[int, ...]

    def slots_of(self, cpu: int) -> Tuple[int, ...]:
        off, cnt = self.ranges.get(cpu, (0, 0))
        return self.slots[off:off + cnt]


#: How :func:`supply` rounds the CPUs' shares: ``largest-remainder`` is
#: the C's; ``floor`` cuts the ranges at cumulative floors, the
#: rule the seed states ("rounded cumulatively") and its tables assume.
ROUNDINGS = ("largest-remainder", "floor")


def supply(total_slots: int, counts: Mapping[int, int],
           rounding: str = "largest-remainder") -> Dict[int, int]:
    """Slots each receiving CPU supplies, in proportion to its count.

    CPU ``c``'s exact share is ``total_slots * counts[c] / total``.  With
    ``largest-remainder`` every CPU gets its share rounded down and the
    slots left over go one each to the CPUs with the largest remainders,
    the lower CPU id first among equal ones.  With ``floor`` (the seed's
    rule) the ranges are cut at ``total_slots * cum // total`` over CPUs in
    ascending id (``cum``: the counts up to and including the CPU).  Both
    add up to ``total_slots`` exactly.  CPUs with a zero count, or whose
    supply rounds to zero, are left out.  Raises ValueError for an unknown
    ``rounding``.
    """
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding is one of {', '.join(ROUNDINGS)}, "
                         f"not {rounding!r}")
    pos = {c: v for c, v in counts.items() if v > 0}
    total = sum(pos.values())
    out: Dict[int, int] = {}
    if rounding == "floor":
        cum = 0
        cut = 0
        for cpu in sorted(pos):
            cum += pos[cpu]
            nxt = total_slots * cum // total
            if nxt > cut:
                out[cpu] = nxt - cut
            cut = nxt
        return out
    share = {c: divmod(total_slots * v, total) for c, v in pos.items()}
    left = total_slots - sum(q for q, _ in share.values())
    ahead = sorted(pos, key=lambda c: (-share[c][1], c))[:left]
    for cpu in sorted(pos):
        n = share[cpu][0] + (cpu in ahead)
        if n:
            out[cpu] = n
    return out


def effective_counts(topo: Topology, tags: Sequence[Tag],
                     counts: Mapping[int, int]) -> Dict[int, int]:
    """The counts the deal uses: the learned ones, or stand-ins.

    With nothing counted, each CPU named by an explicit tag counts one
    (seed 000: "Nothing counted yet? Explicitly tagged CPUs stand in with a
    count of one each").  Counts of CPUs outside the topology are ignored.
    """
    real = {c: v for c, v in counts.items() if v > 0 and topo.has_cpu(c)}
    if real:
        return real
    return {t.cpu: 1 for t in tags
            if t.cpu is not None and not t.learned and topo.has_cpu(t.cpu)}


def deal(topo: Topology, tags: Sequence[Tag], counts: Mapping[int, int],
         rounding: str = "largest-remainder") -> Optional[Deal]:
    """Deal ``len(tags)`` members to the receiving CPUs of ``counts``.

    ``rounding`` is passed to :func:`supply` (``floor`` reproduces the
    seed's tables; the C rounds by largest remainder).  Returns None when
    the group needs no map: no member is tagged, or no CPU supplies
    anything.  Raises ValueError for an empty group, one larger than
    :data:`MAX_MEMBERS`, or an unknown ``rounding``.
    """
    n = len(tags)
    if not 0 < n <= MAX_MEMBERS:
        raise ValueError(f"a group holds 1 to {MAX_MEMBERS} members, not {n}")
    if not any(t.cpu is not None and topo.has_cpu(t.cpu) for t in tags):
        return None
    total = SLOTS_PER_MEMBER * n
    give = supply(total, effective_counts(topo, tags, counts), rounding)
    if not give:
        return None

    owed = [SLOTS_PER_MEMBER] * n
    dealt: Dict[int, List[int]] = {cpu: [] for cpu in give}
    left = dict(give)
    # Ring k admits the members inside the k-th enclosing group of the
    # receiving CPU; one ring past the deepest chain admits everyone.  The
    # CPU's own ring and the last one take members in member order; a
    # group's ring in the order of their CPUs in a depth-first walk of the
    # tree (a leaf's CPUs ascending), members of one CPU in member order.
    last = 1 + max(len(topo.enclosing(c)) for c in topo.cpus)
    pos = {c: k for k, c in enumerate(
        c for g in topo.root.walk() if not g.children for c in g.cpus)}
    by_pos = sorted(range(n), key=lambda i: (
        pos.get(tags[i].cpu, len(pos)) if tags[i].cpu is not None
        else len(pos), i))
    for ring in range(last + 1):
        visit = list(range(n)) if ring in (0, last) else by_pos
        for cpu in sorted(give):
            for i in visit:
                tag = tags[i]
                if left[cpu] == 0:
                    break
                if owed[i] == 0:
                    continue
                r = topo.ring(cpu, tag.cpu)
                if ring < last and (r is None or r > ring):
                    continue
                take = min(owed[i], left[cpu])
                dealt[cpu].extend([i] * take)
                owed[i] -= take
                left[cpu] -= take
    assert not any(owed) and not any(left.values()), "the deal did not close"

    ranges: Dict[int, Tuple[int, int]] = {}
    slots: List[int] = []
    for cpu in sorted(dealt):
        ranges[cpu] = (len(slots), len(dealt[cpu]))
        slots.extend(dealt[cpu])
    return Deal(total, ranges, tuple(slots))


def select(d: Optional[Deal], n: int, cpu: int, h: int) -> Tuple[int, bool]:
    """The member a packet with 32-bit tuple hash ``h`` on ``cpu`` goes to.

    Returns ``(member index, steered)``.  Without a map, or on a CPU that
    supplies no slots, the hash picks among all ``n`` members; otherwise
    ``h`` is scaled onto the CPU's range (seed 000, "Selecting a member":
    no division).  Raises ValueError for an empty group.
    """
    if n <= 0:
        raise ValueError("an empty group has no member to select")
    h &= 0xFFFFFFFF
    if d is None or cpu not in d.ranges:
        return h % n, False
    off, cnt = d.ranges[cpu]
    return d.slots[off + (h * cnt >> 32)], True


#: 2^32 / phi, rounded to odd: Knuth's multiplicative hashing constant.
FIBONACCI32 = 0x9E3779B1


def mix(h: int) -> int:
    """Carry a 32-bit hash's low-bit entropy into its high bits.

    :func:`select` scales the high bits of ``h`` onto a CPU's range; the
    lbgroup tuple hash (sys/netinet/in_pcb.h, INP_PCBLBGROUP_PKTHASH) has
    only the foreign address in its high 16 bits, so the kernel mixes it
    first with a Fibonacci multiply.
    """
    return (h * FIBONACCI32) & 0xFFFFFFFF


def ring_counts(topo: Topology, tags: Sequence[Tag],
                d: Deal) -> List[Dict[str, int]]:
    """Per member, its slots by distance class (:data:`distance.CLASSES`)."""
    out = [dict.fromkeys(distance.CLASSES, 0) for _ in tags]
    for cpu in d.ranges:
        for i in d.slots_of(cpu):
            out[i][distance.classify(topo, cpu, tags[i].cpu)] += 1
    return out


# -- spread order (commit 1) ------------------------------------------------

#: Values of iflib's ``core_spread`` tunable (iflib.4): numeric, spread.
SPREAD_OFF, SPREAD_ON = 0, 1
SPREAD_MODES = (SPREAD_OFF, SPREAD_ON)


def spread_order(topo: Topology, eligible: Sequence[int],
                 mode: int = SPREAD_ON) -> List[int]:
    """The order in which an iflib device's queues take CPUs.

    ``mode`` is the ``core_spread`` value: 0 the ascending order (iflib's
    numeric walk); 1 one NUMA domain after another (the outermost groups
    flagged NODE, by their lowest CPU; the CPUs in none form one more
    domain, first), within a domain every core's first SMT thread before
    any second thread (a CPU's rank: the eligible CPUs of its core, the
    innermost THREAD group, below it), and within each rank the L3 groups
    ("units": the outermost L3 group; CPUs in none last) take turns by
    their lowest CPU, each giving its CPUs by id.  A tree without L3
    groups still gets the thread order.  ``eligible`` is the interrupt
    set: for a device with ACPI ``_PXM`` only its domain's CPUs.  Raises
    ValueError for an unknown mode.
    """
    if mode not in SPREAD_MODES:
        raise ValueError(f"core_spread {mode} is not one of {SPREAD_MODES}")
    cpus = sorted(set(eligible))
    if mode == SPREAD_OFF:
        return cpus

    def outermost(c, pred):
        return next((g for g in reversed(topo.enclosing(c)) if pred(g)),
                    None)

    def dkey(c):
        d = outermost(c, lambda g: g.flags & CG_FLAG_NODE)
        return -1 if d is None else min(d.cpus)

    def ukey(c):
        u = outermost(c, lambda g: g.level == CG_SHARE_L3)
        return float("inf") if u is None else min(u.cpus)

    rank: Dict[int, int] = {}
    below: Dict[int, int] = {}  # core (by id()) -> its eligible CPUs seen so far
    for c in cpus:  # ascending: a CPU's rank is the eligible CPUs of its core below it
        core = next((g for g in topo.enclosing(c)
                     if g.flags & CG_FLAG_THREAD), None)
        if core is None:
            rank[c] = 0
        else:
            rank[c] = below.get(id(core), 0)
            below[id(core)] = rank[c] + 1
    # Each CPU's turn among the CPUs of its domain, rank and unit, by id.
    turn: Dict[int, int] = {}
    seen: Dict[tuple, int] = {}
    for c in cpus:
        k = (dkey(c), rank[c], ukey(c))
        turn[c] = seen.get(k, 0)
        seen[k] = turn[c] + 1
    return sorted(cpus, key=lambda c: (dkey(c), rank[c], turn[c], ukey(c),
                                       c))


# -- learning windows (commit 4) --------------------------------------------

class Windows:
    """Windows of per-CPU handshake counts, time in ticks (seed 000, "Two
    windows of counts"; the kernel's form is in docs/design.md, "Core 3").

    ``count(cpu, n)`` is what syncache_socket() does for ``n`` counted
    handshakes completed on ``cpu``: it adds to that CPU's cumulative
    32-bit counter, never reset, and nothing else.  ``roll(now)`` is the
    roll the first accept(2) after the end of a window does: the deal's
    input becomes the ending window's counts plus the previous window's
    (those only if the ending window lasted less than two window lengths),
    and a new window starts now.  It returns whether it rolled.  Windows
    are kept as snapshots of the counters, so counts are unsigned 32-bit
    differences, right across a wrap.
    """

    def __init__(self, ncpu: int, window: int, now: int) -> None:
        if ncpu <= 0 or window <= 0:
            raise ValueError("ncpu and window must be positive")
        self.ncpu = ncpu
        self.window = window
        self.start = now
        self.cum = [0] * ncpu
        self.snap = [0] * ncpu          # counters when the window began
        self.last = [0] * ncpu          # the last complete window
        self.sum = [0] * ncpu           # the deal's input

    def count(self, cpu: int, n: int = 1) -> None:
        if 0 <= cpu < self.ncpu:        # other CPUs are not tracked
            self.cum[cpu] = (self.cum[cpu] + n) & 0xFFFFFFFF

    def roll(self, now: int) -> bool:
        age = (now - self.start) & 0xFFFFFFFF
        if age < self.window:
            return False
        for c in range(self.ncpu):
            cur = (self.cum[c] - self.snap[c]) & 0xFFFFFFFF
            prev = self.last[c] if age < 2 * self.window else 0
            self.sum[c] = (cur + prev) & 0xFFFFFFFF
            self.last[c] = cur
            self.snap[c] = self.cum[c]
        self.start = now
        return True

    def window_counts(self, cpu: int) -> Tuple[int, int]:
        """(last complete window, current window so far) counts of ``cpu``."""
        return (self.last[cpu],
                (self.cum[cpu] - self.snap[cpu]) & 0xFFFFFFFF)

    def counts(self) -> Dict[int, int]:
        """The deal's input as of the last roll, CPUs with zero left out."""
        return {c: n for c, n in enumerate(self.sum) if n}
