"""The documents and tables of ``rxl deal``, ``rxl spread`` and ``rxl outcomes``.

Each ``*_doc`` is the ``--json`` document (its schema: docs/design.md);
each ``*_text`` the table printed without ``--json``, made from that
document so the two cannot disagree.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Mapping, Optional, Sequence

from rxl.decide import cpugroup, distance, model, outcomes
from rxl.decide.cpugroup import Topology
from rxl.errors import counted


def deal_doc(topo: Topology, tags: Sequence[model.Tag],
             d: Optional[model.Deal]) -> dict:
    """The ``rxl deal --json`` document (schema: docs/design.md)."""
    rings = model.ring_counts(topo, tags, d) if d is not None else None
    members = []
    for i, t in enumerate(tags):
        members.append({
            "index": i, "tag": t.cpu, "learned": t.learned,
            "slots": model.SLOTS_PER_MEMBER if d is not None else 0,
            "rings": rings[i] if rings else dict.fromkeys(distance.CLASSES, 0),
        })
    doc_map = None
    if d is not None:
        doc_map = {"cpus": [
            {"cpu": c, "offset": off, "count": cnt,
             "slots": list(d.slots_of(c))}
            for c, (off, cnt) in sorted(d.ranges.items())]}
    return {"topology": topo.name,
            "slots_per_member": model.SLOTS_PER_MEMBER,
            "total_slots": model.SLOTS_PER_MEMBER * len(tags),
            "map": doc_map, "members": members}


def member_name(i: int) -> str:
    """A, B, ..., Z, AA, ...: the seed's member letters."""
    name = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        name = chr(65 + r) + name
    return name


def deal_text(doc: dict) -> str:
    """``rxl deal``'s table: the map's runs of members per CPU, then each
    member's tag and rings by distance class."""
    lines = [f"topology {doc['topology']}: {counted(len(doc['members']), 'member')}, "
             f"T = {doc['slots_per_member']} x {len(doc['members'])} = "
             f"{doc['total_slots']} slots"]
    if doc["map"] is None:
        lines.append("no map: every lookup hashes over all members")
    else:
        lines.append(f"{'cpu':>5} {'offset':>6} {'count':>5}  members")
        for e in doc["map"]["cpus"]:
            runs: List[str] = []
            for m in e["slots"]:
                if runs and runs[-1][0] == m:
                    runs[-1] = (m, runs[-1][1] + 1)
                else:
                    runs.append((m, 1))
            desc = ", ".join(f"{member_name(m)} x{k}" for m, k in runs)
            lines.append(f"{e['cpu']:>5} {e['offset']:>6} {e['count']:>5}  "
                         f"{desc}")
    lines.append("")
    lines.append(f"{'member':>6} {'tag':>5} " + " ".join(
        f"{c:>5}" for c in distance.CLASSES))
    for m in doc["members"]:
        tag = "-" if m["tag"] is None else str(m["tag"]) + (
            "L" if m["learned"] else "")
        lines.append(f"{member_name(m['index']):>6} {tag:>5} " + " ".join(
            f"{m['rings'][c]:>5}" for c in distance.CLASSES))
    return "\n".join(lines)


def l3_indices(topo: Topology) -> Dict[int, Optional[int]]:
    """CPU -> :func:`l3_index` for every CPU of the tree, in one walk."""
    l3s = {id(x): i for i, x in enumerate(
        g for g in topo.root.walk() if g.level == cpugroup.CG_SHARE_L3)}
    out: Dict[int, Optional[int]] = {}
    for cpu in topo.cpus:
        g = topo.l3_of(cpu)
        out[cpu] = None if g is None else l3s[id(g)]
    return out


def l3_index(topo: Topology, cpu: int) -> Optional[int]:
    """Index of ``cpu``'s L3 group among the tree's L3 groups (walk order); None without one."""
    g = topo.l3_of(cpu)
    if g is None:
        return None
    l3s = [x for x in topo.root.walk() if x.level == cpugroup.CG_SHARE_L3]
    return l3s.index(g)


def spread_doc(topo: Topology, devices: Sequence[Mapping], *, mode: int) -> dict:
    """``rxl spread --json``: the core_spread value, the tree's L3 group
    count and, per device in attach order (``devices``: ``{"order",
    "attached"`` (rxl.decide.attach.Attached)``, "domain", "core_offset"}``),
    its interrupt set in queue order, its base CPU, how it got it (the
    tunable or the shared cursor) and per queue its CPU and L3 group index.
    ``order`` and ``queues`` are the first device's."""
    l3s = sum(1 for g in topo.root.walk() if g.level == cpugroup.CG_SHARE_L3)
    l3 = l3_indices(topo)  # one walk, not one per queue (50 devices x 4096 queues)
    devs = []
    for k, d in enumerate(devices):
        a = d["attached"]
        devs.append({"device": k, "domain": d["domain"], "core_offset": d["core_offset"],
                     "base": a.base, "cursor": a.shared, "order": list(d["order"]),
                     "queues": [{"queue": q, "cpu": c, "l3": l3[c]}
                                for q, c in enumerate(a.cpus)]})
    return {"topology": topo.name, "spread": mode != 0, "core_spread": mode,
            "l3_groups": l3s, "order": devs[0]["order"], "queues": devs[0]["queues"],
            "devices": devs}


def spread_text(doc: dict) -> str:
    """``rxl spread``'s table: the order, then one line per queue; with several
    devices (or a core_offset) each device's order and base first."""
    def queue(prefix: str, e: dict) -> str:
        return (f"{prefix}rxq{e['queue']}: cpu {e['cpu']} (" + (
            f"L3 group {e['l3']}" if e["l3"] is not None else "no L3 group") + ")")

    devs = doc["devices"]
    lines = []
    if len(devs) == 1 and devs[0]["core_offset"] is None:
        lines.append(f"order: {', '.join(map(str, doc['order']))}")
        lines += [queue("", e) for e in doc["queues"]]
    else:
        for d in devs:
            prefix = f"dev{d['device']} " if len(devs) > 1 else ""
            how = (f"core_offset {d['core_offset']}" if d["core_offset"] is not None
                   else "core_offset unset: the cursor devices of this interrupt set share")
            lines.append(f"{prefix}order: {', '.join(map(str, d['order']))}")
            lines.append(f"{prefix}base: cpu {d['base']} ({how})")
            lines += [queue(prefix, e) for e in d["queues"]]
    if not doc["l3_groups"] and doc["core_spread"]:
        lines.append("note: the topology reports no L3 group: only the SMT order applies "
                     "(every core's first thread first), no L3 groups take turns")
    return "\n".join(lines)


def outcomes_doc(topo: Topology, wl: Sequence[int], rx: Mapping[int, int],
                 policies: Sequence[str], ladder: Mapping[str, float],
                 deal_fn: Callable) -> dict:
    """``rxl outcomes --json``: per policy, the workers by class with their
    share of connections, connections by distance, the share accepted on the
    receiving CPU, and the expected cycles per request under ``ladder``."""
    docs = []
    for pol in policies:
        o = outcomes.outcome(topo, wl, rx, pol, deal_fn)
        bc = o.by_class()
        docs.append({
            "policy": pol,
            "classes": {c: {"workers": v["workers"],
                            "share": float(v["share"])}
                        for c, v in bc.items()},
            "connections": {c: float(v) for c, v in o.by_distance().items()},
            "on_rx_cpu": float(o.by_distance()["exact"]),
            "cycles_per_request": round(o.cycles(ladder), 6),
            "workers": [{"cpu": w, "class": o.classes[i],
                         "share": float(o.share(i))}
                        for i, w in enumerate(wl)],
        })
    return {"topology": topo.name, "cost_ladder": dict(ladder),
            "cache_info": distance.has_cache_info(topo), "policies": docs}


def _cycles_cell(x: float) -> str:
    """The 9-wide cycles cell: 4 decimals below 1,000 (at most 8 characters,
    so a space stays before it), else 3 significant digits with an exponent,
    so a ladder of 1e308 keeps the table's columns."""
    return f"{x:>9.4f}" if x < 1e3 else f"{x:>9.3g}"


def outcomes_text(doc: dict) -> str:
    """``rxl outcomes``' table: one row per policy, then each worker's share."""
    docs, ladder = doc["policies"], doc["cost_ladder"]
    # The base classes, and the others where some policy has workers.
    cols = [c for c in outcomes.WORKER_CLASSES
            if c in distance.BASE or c == "never" or
            any(p["classes"][c]["workers"] for p in docs)]
    head = f"{'policy':<7}" + "".join(f"{c:>14}" for c in cols) + \
        f"{'cycles':>9}" + f"{'on rx cpu':>10}"
    rows = [head]
    for p in docs:
        rows.append(f"{p['policy']:<7}" + "".join(
            f"{p['classes'][c]['workers']:>4} ({p['classes'][c]['share']:6.1%})"
            for c in cols) +
            f"{_cycles_cell(p['cycles_per_request'])}{p['on_rx_cpu']:>10.1%}")
    for p in docs:
        rows.append(f"{p['policy']:<7}per worker (cpu:share) " + " ".join(
            f"{w['cpu']}:{w['share']:.1%}" for w in p["workers"]))
    rows.append("each cell: workers in that class, i.e. where most of a "
                "worker's connections come from (their share of "
                "connections); cycles: expected per request, in the cost "
                "ladder's units (exact = " + f"{ladder['exact']:g}); on rx "
                "cpu: share of connections accepted on the CPU that "
                "received them")
    if not doc["cache_info"]:
        rows.append("note: the topology reports no cache groups, so beyond "
                    "the core only package and node are known: 'node' "
                    "workers are not charged a cross-L3 cost")
    return "\n".join(rows)
