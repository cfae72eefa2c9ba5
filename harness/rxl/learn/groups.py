"""The kernel's groups view per window of a learning run (docs/design.md, "Observability").

With ``-G ms`` learnd copies ``net.inet.tcp.reuseport_lb.groups`` every
``ms`` milliseconds and once more at the quit byte, and notes with each
copy the connections counted so far per (phase, handshake CPU, worker
CPU) (learnd.c: ``LEARN G`` / ``LEARN GL`` lines, parsed by
:func:`rxl.learn.results.parse_learn` into ``RunSummary.views``).  This
module reads each copy with ``rxl inspect``'s parser
(:func:`rxl.verify.inspect.parse`) and puts, for every interval between
two copies, the connections that arrived in it beside the map in force.

The map's co-location (:func:`map_colocation`) assumes the deal's order:
a CPU's range goes first to the members tagged with that CPU (the exact
ring, docs/design.md "Deal"), so range ``c`` of ``r_c`` slots has
``min(r_c, slots of the members tagged c)`` slots on an exact member.
The view gives each member's slots and each CPU's range, not which slot
went where, so that is the one inference made here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from rxl.decide import model
from rxl.verify import inspect

#: learnd's port in the guest (plan.GUEST_PORT; repeated to keep this
#: module free of the plan's imports).
PORT = 8080

#: (phase byte, handshake CPU, worker CPU) -> cumulative connections.
Counts = Dict[Tuple[str, int, int], int]


@dataclass
class View:
    """One copy of the groups view: ``seq``, ms since READY, the last phase
    byte seen (``-`` before any), the sysctl's errno (0: read), the
    cumulative counts, and learnd's group (None: no group on :data:`PORT`
    in the view, e.g. a pristine kernel or learning without a map)."""

    seq: int
    t_ms: int
    phase: str
    err: int
    counts: Counts
    group: Optional[inspect.Group] = None
    notes: List[str] = field(default_factory=list)


def parse_counts(text: str) -> Counts:
    """``x=`` of a LEARN G line: ``p:hcpu:wcpu:n,...`` (``-`` for none).

    Raises ValueError for an item that is not four fields with integers.
    """
    out: Counts = {}
    if text in ("", "-"):
        return out
    for item in text.split(","):
        parts = item.split(":")
        if len(parts) != 4 or not parts[0] or \
                not all(re.fullmatch(r"-?[0-9]{1,20}", p) for p in parts[1:]):
            raise ValueError(f"count item {item[:40]!r} is not phase:hcpu:wcpu:n")
        out[(parts[0], int(parts[1]), int(parts[2]))] = int(parts[3])
    return out


def views(raw: Sequence[Mapping], port: int = PORT) -> List[View]:
    """``RunSummary.views`` (dicts with seq, t_ms, phase, err, x, lines) ->
    :class:`View` list in seq order.  A copy whose lines the inspect parser
    refuses keeps ``group`` None and the reason in ``notes``; one whose
    ``x=`` is damaged keeps empty counts and the reason in ``notes``."""
    out = []
    for r in sorted(raw, key=lambda r: r["seq"]):
        try:
            counts, bad = parse_counts(str(r["x"])), None
        except ValueError as exc:  # a damaged G line: the view without its counts
            counts, bad = {}, f"x=: {exc}"
        v = View(int(r["seq"]), int(r["t_ms"]), str(r["phase"]), int(r["err"]), counts)
        if bad:
            v.notes.append(bad)
        try:
            groups = inspect.parse(r.get("lines", []))
        except inspect.InspectError as exc:
            v.notes.append(str(exc))
            groups = []
        mine = [g for g in groups if g.port == port]
        v.group = mine[0] if mine else None
        out.append(v)
    return out


def exact_slots(g: inspect.Group) -> Dict[int, int]:
    """Slots of each CPU's range held by members tagged with that CPU
    (module doc: exact members take their CPU's range first)."""
    held: Dict[int, int] = {}
    for m in g.member_list:
        if m.tag is not None:
            held[m.tag] = held.get(m.tag, 0) + m.slots
    return {c: min(n, held.get(c, 0)) for c, (_, n) in g.ranges.items()}


def map_colocation(g: inspect.Group,
                   rx: Optional[Mapping[int, int]] = None) -> Optional[float]:
    """Share of connections this map gives to a worker on the handshake CPU,
    each CPU weighted by ``rx`` (default: the view's two windows,
    prev + cur).  None without a map or without counts on mapped CPUs."""
    if not g.map_slots or not g.ranges:
        return None
    w = dict(rx) if rx is not None else {c: p + n for c, (p, n) in g.rx.items()}
    ex = exact_slots(g)
    tot = sum(w.get(c, 0) for c in g.ranges)
    if tot <= 0:
        return None
    return sum(w.get(c, 0) * ex[c] / n for c, (_, n) in g.ranges.items() if n) / tot


def dealt_colocation(g: inspect.Group, rounding: str = "floor") -> Optional[float]:
    """What a supply rounded by ``rounding`` would co-locate, dealing this
    copy's window counts (prev + cur) to these members' tags: by default
    the seed's cumulative floor, the rounding the kernel used before the largest
    remainder (:func:`rxl.decide.model.supply`; ``largest-remainder`` is today's).
    None without a map or counts."""
    rx = {c: p + n for c, (p, n) in g.rx.items() if p + n > 0}
    if not g.map_slots or not rx:
        return None
    sup = model.supply(g.map_slots, rx, rounding)
    held: Dict[int, int] = {}
    for m in g.member_list:
        if m.tag is not None:
            held[m.tag] = held.get(m.tag, 0) + m.slots
    tot = sum(rx[c] for c in sup)
    return sum(rx[c] * min(n, held.get(c, 0)) / n for c, n in sup.items()) / tot


def whole(g: Optional[inspect.Group]) -> bool:
    """Every CPU range is all on exact members (no slot crosses)."""
    return g is not None and bool(g.ranges) and \
        all(exact_slots(g)[c] == n for c, (_, n) in g.ranges.items())


@dataclass
class Interval:
    """Connections between copies ``a`` and ``b`` (ms since READY) by phase:
    ``n`` with a known handshake CPU, ``co`` on a worker on that CPU;
    ``kind``: ``whole`` (the same map at both ends, no slot crossing),
    ``partial`` (the same map, some slots crossing) or ``changed`` (another
    map, or no map at one end)."""

    a: int
    b: int
    n: Dict[str, int]
    co: Dict[str, int]
    kind: str


def _same_map(x: Optional[inspect.Group], y: Optional[inspect.Group]) -> bool:
    """Both copies show a map, with the same ranges and member slots (a
    rebuild that deals the same map is not published, docs/design.md, so
    the rebuild count alone does not tell a changed map)."""
    return x is not None and y is not None and x.map_slots > 0 and \
        (x.ranges, [(m.tag, m.slots) for m in x.member_list]) == \
        (y.ranges, [(m.tag, m.slots) for m in y.member_list])


def intervals(vs: Sequence[View]) -> List[Interval]:
    """One :class:`Interval` per pair of consecutive copies."""
    out = []
    for p, q in zip(vs, vs[1:]):
        n: Dict[str, int] = {}
        co: Dict[str, int] = {}
        for key, v in q.counts.items():
            ph, h, wc = key
            d = v - p.counts.get(key, 0)
            if h < 0 or d <= 0:
                continue
            n[ph] = n.get(ph, 0) + d
            if h == wc:
                co[ph] = co.get(ph, 0) + d
        kind = ("changed" if not _same_map(p.group, q.group)
                else "whole" if whole(q.group) else "partial")
        out.append(Interval(p.t_ms, q.t_ms, n, co, kind))
    return out


def crossing_by_kind(ivs: Sequence[Interval], phase: str = "m") -> Dict[str, Tuple[int, int]]:
    """kind -> (connections, connections not on the handshake CPU's worker)
    in ``phase``, summed over the intervals of that kind."""
    out: Dict[str, Tuple[int, int]] = {}
    for iv in ivs:
        n, co = iv.n.get(phase, 0), iv.co.get(phase, 0)
        a, b = out.get(iv.kind, (0, 0))
        out[iv.kind] = (a + n, b + n - co)
    return out


def model_deal(g: inspect.Group, topo) -> Optional[model.Deal]:
    """What rxl deal (rxl.decide.model.deal) deals this copy's members, their tags
    (a learned tag as learned) in the view's member order, on the kernel's own
    deal input ``rx_sum`` (15's ``sum``: the last two windows, fixed at the last
    roll); None when it deals no map or the copy has no 15 counts."""
    if not g.member_list or not g.rx_sum:
        return None
    tags = [model.Tag(m.tag, learned=m.kind == "learned") for m in g.member_list]
    try:
        return model.deal(topo, tags, dict(g.rx_sum))
    except ValueError:
        return None


@dataclass
class ModelCheck:
    """The kernel's maps against rxl deal's on the kernel's own counts.

    ``copies``: copies with a map and 15 counts; ``ranges_equal``: of those,
    how many have exactly the ranges rxl deal gives (each receiving CPU's
    offset and slots); ``n``: connections of the phase between two such
    copies with a known handshake CPU and worker CPU; ``dealt``: of those,
    how many went to a worker that rxl deal's map of the copy before or
    after gives a slot in the handshake CPU's range (a CPU without a range
    hashes over every member: any worker is dealt); ``off``: the first few
    (handshake CPU, worker CPU, connections) that were not."""

    copies: int = 0
    ranges_equal: int = 0
    n: int = 0
    dealt: int = 0
    off: List[Tuple[int, int, int]] = field(default_factory=list)


def _allowed(d: Optional[model.Deal], g: inspect.Group, h: int, w: int) -> bool:
    if d is None or h not in d.ranges:
        return True                     # no map, or a CPU without slots: the hash
    return any(g.member_list[i].tag == w for i in set(d.slots_of(h)))


def model_check(vs: Sequence[View], topo, phase: str = "m") -> ModelCheck:
    """:class:`ModelCheck` over the copies ``vs`` of one run on ``topo``."""
    out = ModelCheck()
    deals = [(v, model_deal(v.group, topo)) if v.group is not None and v.group.map_slots
             else (v, None) for v in vs]
    for v, d in deals:
        if d is not None:
            out.copies += 1
            out.ranges_equal += d.ranges == v.group.ranges
    for (p, dp), (q, dq) in zip(deals, deals[1:]):
        if dp is None or dq is None:
            continue
        for (ph, h, w), c in sorted(q.counts.items()):
            k = c - p.counts.get((ph, h, w), 0)
            if ph != phase or h < 0 or w < 0 or k <= 0:
                continue
            out.n += k
            if _allowed(dp, p.group, h, w) or _allowed(dq, q.group, h, w):
                out.dealt += k
            elif len(out.off) < 8:
                out.off.append((h, w, k))
    return out


def _pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def view_line(v: View) -> str:
    """One copy in one line: time, phase, map, windows, ranges, members."""
    head = f"t={v.t_ms / 1000:6.1f}s ph={v.phase}"
    g = v.group
    if v.err:
        return f"{head} view unreadable (errno {v.err})"
    if g is None:
        return f"{head} no group on port {PORT}" + (f" ({v.notes[0]})" if v.notes else "")
    rx = " ".join(f"{c}:{p}+{n}" for c, (p, n) in sorted(g.rx.items())) or "-"
    ex = exact_slots(g) if g.ranges else {}
    rng = " ".join(f"{c}:{n}({ex[c]} exact)" for c, (_, n) in sorted(g.ranges.items())) or "-"
    mem = " ".join(f"{m.index}:{m.tag if m.tag is not None else m.kind}"
                   f"{'L' if m.kind == 'learned' else ''}/{m.slots}" for m in g.member_list)
    win = f" rolls {g.rolls} age {g.age_ms} ms" if g.rolls is not None else ""
    gen = f" gen {g.gen}" if g.gen is not None else ""
    deals = f" rebuilds {g.rebuilds}" if g.rebuilds is not None else ""
    return (f"{head}{gen}{deals}{win} map {g.map_slots or '-'}"
            f" | rx {rx} | ranges {rng} | members {mem}"
            f" | map co-locates {_pct(map_colocation(g))}"
            f" (floor would {_pct(dealt_colocation(g))})")


def render(label: str, vs: Sequence[View]) -> List[str]:
    """The report's block for one run: every copy, the connections between
    copies, and the measured phase's crossing split by the map's kind."""
    if not vs:
        return []
    lines = [f"{label}: groups view per window ({len(vs)} copies; members "
             "index:tag[L learned]/slots; ranges cpu:slots)"]
    if all(v.group is None for v in vs):
        errs = sorted({v.err for v in vs} - {0})
        why = (f"sysctl errno {', '.join(map(str, errs))}; 2: no such sysctl, the pristine "
               "kernel" if errs else "the view lists only groups with a map, a tag, "
               "learning state or a pending rebuild")
        return lines + [f"  no group on port {PORT} in any copy ({why})"]
    ivs = intervals(vs)
    for i, v in enumerate(vs):
        lines.append("  " + view_line(v))
        if i < len(ivs):
            iv = ivs[i]
            lines.append("      then " + (", ".join(
                f"{ph} {iv.n[ph]} conns, {iv.n[ph] - iv.co.get(ph, 0)} off the handshake CPU"
                for ph in sorted(iv.n)) or "no connections") + f" ({iv.kind} map)")
    pairs = [(dealt_colocation(v.group, "largest-remainder"), dealt_colocation(v.group))
             for v in vs if v.group is not None and dealt_colocation(v.group) is not None]
    if pairs:
        lr, fl = [a for a, _ in pairs], [b for _, b in pairs]
        lines.append(f"  dealt from each copy's counts ({len(pairs)} copies): largest remainder "
                     f"co-locates {_pct(sum(lr) / len(lr))} on average, below 100% in "
                     f"{sum(x < 1 for x in lr)}; the floor {_pct(sum(fl) / len(fl))}, below "
                     f"100% in {sum(x < 1 for x in fl)}")
    by = crossing_by_kind(ivs)
    if by:
        lines.append("  measured phase by map: " + "; ".join(
            f"{k} {n} conns, {x} off the handshake CPU" for k, (n, x) in sorted(by.items())))
    return lines


def as_json(vs: Sequence[View]) -> List[dict]:
    """Plain dicts for learn.json: each copy with its group (inspect's JSON)."""
    return [{"seq": v.seq, "t_ms": v.t_ms, "phase": v.phase, "err": v.err,
             "counts": [[*k, n] for k, n in sorted(v.counts.items())],
             "group": inspect.as_json([v.group])[0] if v.group else None,
             "map_colocation": map_colocation(v.group) if v.group else None,
             "floor_colocation": dealt_colocation(v.group) if v.group else None,
             "notes": v.notes} for v in vs]
