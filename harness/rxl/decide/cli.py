"""``rxl deal``, ``rxl spread``, ``rxl outcomes``: the decisions on demand.

Each runs either the C cores (``--impl c``, the kernel's own code built in
userspace) or the reference model (``--impl model``) and prints a table,
or JSON with ``--json``.  Bad input exits 1 with one line on stderr.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Dict, List, Optional, Sequence

import click

from rxl.decide import model, outcomes, topology
from rxl.decide import cpugroup
from rxl.decide.cpugroup import Topology, TopologyError

IMPLS = ("c", "model")


def _impl(name: str):
    if name == "c":
        from rxl.decide import core
        return core
    return model


def _friendly(fn):
    """Turn input errors into a one-line ``Error: ...`` and exit 1."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (TopologyError, ValueError) as e:
            raise click.ClickException(str(e))
        except RuntimeError as e:  # core.CoreError: one line by design
            raise click.ClickException(str(e).splitlines()[0])
        except MemoryError:
            raise click.ClickException("input too large")
    return wrapper


def parse_members(text: str, topo: Topology) -> List[model.Tag]:
    """``"0,1,2,9,-,5L"``: a CPU (explicit tag), ``-`` (untagged), or a CPU
    with ``L`` (a tag learned at accept(2)).  Raises TopologyError."""
    tags = []
    for item in text.split(","):
        item = item.strip()
        if item == "-":
            tags.append(model.Tag())
            continue
        m = re.fullmatch(r"(\d+)([Ll]?)", item)
        if not m:
            raise TopologyError(f"malformed member {item!r} in {text!r}: use "
                                "a CPU, '-' (untagged) or CPU+'L' (learned)")
        tags.append(model.Tag(int(m.group(1)), bool(m.group(2))))
    topology.check_cpus(topo, [t.cpu for t in tags if t.cpu is not None],
                        "--members")
    return tags


def parse_counts(text: Optional[str], topo: Topology,
                 what: str = "--counts") -> Dict[int, int]:
    """``"0:100,2:100,4:50"`` -> ``{0: 100, 2: 100, 4: 50}``."""
    out: Dict[int, int] = {}
    if not text:
        return out
    for item in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", item)
        if not m:
            raise TopologyError(f"malformed {what} item {item!r}: use CPU:COUNT")
        cpu, count = int(m.group(1)), int(m.group(2))
        if cpu in out:
            raise TopologyError(f"CPU {cpu} given twice in {what}")
        if count >= 1 << 32:
            raise TopologyError(f"{what}: count {count} does not fit 32 bits")
        out[cpu] = count
    topology.check_cpus(topo, out, what)
    return out


def _emit(as_json: bool, doc: dict, text: str) -> None:
    click.echo(json.dumps(doc, indent=2) if as_json else text)


def deal_doc(topo: Topology, tags: Sequence[model.Tag],
             d: Optional[model.Deal]) -> dict:
    """The ``rxl deal --json`` document (issue 2's schema)."""
    rings = model.ring_counts(topo, tags, d) if d is not None else None
    members = []
    for i, t in enumerate(tags):
        members.append({
            "index": i, "tag": t.cpu, "learned": t.learned,
            "slots": model.SLOTS_PER_MEMBER if d is not None else 0,
            "rings": rings[i] if rings else dict.fromkeys(cpugroup.CLASSES, 0),
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


def _member_name(i: int) -> str:
    """A, B, ..., Z, AA, ...: the seed's member letters."""
    name = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        name = chr(65 + r) + name
    return name


def deal_text(doc: dict) -> str:
    lines = [f"topology {doc['topology']}: {len(doc['members'])} members, "
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
            desc = ", ".join(f"{_member_name(m)} x{k}" for m, k in runs)
            lines.append(f"{e['cpu']:>5} {e['offset']:>6} {e['count']:>5}  "
                         f"{desc}")
    lines.append("")
    lines.append(f"{'member':>6} {'tag':>5} " + " ".join(
        f"{c:>5}" for c in cpugroup.CLASSES))
    for m in doc["members"]:
        tag = "-" if m["tag"] is None else str(m["tag"]) + (
            "L" if m["learned"] else "")
        lines.append(f"{_member_name(m['index']):>6} {tag:>5} " + " ".join(
            f"{m['rings'][c]:>5}" for c in cpugroup.CLASSES))
    return "\n".join(lines)


@click.command()
@click.option("--topology", "topo_spec", required=True,
              help="Built-in name, LxCxT, or a kern.sched.topology_spec file.")
@click.option("--members", required=True,
              help="Member tags in member order: CPU, '-' untagged, CPU+L learned.")
@click.option("--counts", default="",
              help="Handshakes per receiving CPU, CPU:COUNT,... (both windows).")
@click.option("--impl", type=click.Choice(IMPLS), default="c", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_friendly
def deal(topo_spec, members, counts, impl, as_json):
    """Deal the members of an SO_REUSEPORT_LB group to receiving CPUs."""
    topo = topology.load(topo_spec)
    tags = parse_members(members, topo)
    d = _impl(impl).deal(topo, tags, parse_counts(counts, topo))
    doc = deal_doc(topo, tags, d)
    _emit(as_json, doc, deal_text(doc))


def domain_cpus(topo: Topology, domain: int) -> List[int]:
    """CPUs of NUMA domain ``domain``: the groups flagged NODE in tree
    order, or domain 0 = every CPU when none is.  Raises TopologyError."""
    nodes = [g for g in topo.root.walk() if g.flags & cpugroup.CG_FLAG_NODE]
    if not nodes:
        nodes = [topo.root]
    if not 0 <= domain < len(nodes):
        raise TopologyError(f"--domain {domain}: topology {topo.name} has "
                            f"{len(nodes)} NUMA domain(s)")
    return list(nodes[domain].cpus)


@click.command()
@click.option("--topology", "topo_spec", required=True)
@click.option("--intr-cpus", required=True,
              help="The interrupt-eligible CPU set, e.g. 0-30:2.")
@click.option("--queues", type=click.IntRange(min=1, max=4096), required=True,
              help="Queues to place (at most 4096).")
@click.option("--domain", type=int, default=None,
              help="The NIC's NUMA domain (default: unknown).")
@click.option("--no-spread", is_flag=True,
              help="Today's numeric order (core_spread=0).")
@click.option("--impl", type=click.Choice(IMPLS), default="c", show_default=True)
@click.option("--json", "as_json", is_flag=True)
@_friendly
def spread(topo_spec, intr_cpus, queues, domain, no_spread, impl, as_json):
    """Order in which an iflib device's queues take CPUs."""
    topo = topology.load(topo_spec)
    eligible = topology.parse_cpu_list(intr_cpus, "--intr-cpus")
    topology.check_cpus(topo, eligible, "--intr-cpus")
    local = domain_cpus(topo, domain) if domain is not None else None
    if no_spread:
        order = sorted(eligible, key=lambda c: (
            local is not None and c not in local, c))
    else:
        order = _impl(impl).spread_order(topo, eligible, local)
    qmap = [{"queue": q, "cpu": order[q % len(order)],
             "l3": _l3_index(topo, order[q % len(order)])}
            for q in range(queues)]
    doc = {"topology": topo.name, "spread": not no_spread, "order": order,
           "queues": qmap}
    text = (f"order: {', '.join(map(str, order))}\n" + "\n".join(
        f"rxq{e['queue']}: cpu {e['cpu']} (" + (
            f"L3 group {e['l3']}" if e["l3"] is not None else "no L3 group")
        + ")" for e in qmap))
    _emit(as_json, doc, text)


def _l3_index(topo: Topology, cpu: int) -> Optional[int]:
    g = topo.l3_of(cpu)
    if g is None:
        return None
    l3s = [x for x in topo.root.walk() if x.level == cpugroup.CG_SHARE_L3]
    return l3s.index(g)


@click.command(name="outcomes")
@click.option("--topology", "topo_spec", required=True)
@click.option("--workers", required=True, help="Worker CPUs, e.g. 0-31.")
@click.option("--rx-cpus", required=True, help="Receiving CPUs.")
@click.option("--rx-counts", default="",
              help="Relative handshakes per receiving CPU as CPU:COUNT,... "
                   "(e.g. 0:3,2:1; default equal).")
@click.option("--policy", type=click.Choice(outcomes.POLICIES), multiple=True,
              help="Repeatable; default all three.")
@click.option("--cost-ladder", default="1,1,1,1.19", show_default=True,
              help="Cycles per request for exact, smt, l3, far (seed 000).")
@click.option("--impl", type=click.Choice(IMPLS), default="c", show_default=True)
@click.option("--json", "as_json", is_flag=True)
@_friendly
def outcomes_cmd(topo_spec, workers, rx_cpus, rx_counts, policy, cost_ladder,
                 impl, as_json):
    """Worker classes and expected cost under hash, exact claims and deal."""
    topo = topology.load(topo_spec)
    # A CPU may carry several workers, as in `rxl deal --members 0,0,1,1`.
    wl = [c for item in workers.split(",")
          for c in topology.parse_cpu_list(item, "--workers")]
    topology.check_cpus(topo, wl, "--workers")
    rx_list = topology.parse_cpu_list(rx_cpus, "--rx-cpus")
    topology.check_cpus(topo, rx_list, "--rx-cpus")
    counts = parse_counts(rx_counts, topo, "--rx-counts")
    stray = set(counts) - set(rx_list)
    if stray:
        raise TopologyError(f"--rx-counts names CPUs not in --rx-cpus: "
                            f"{sorted(stray)}")
    rx = {c: counts.get(c, 1 if not counts else 0) for c in rx_list}
    try:
        ladder = tuple(float(x) for x in cost_ladder.split(","))
    except ValueError:
        raise TopologyError(f"malformed --cost-ladder {cost_ladder!r}")
    if len(ladder) != 4:
        raise TopologyError("--cost-ladder takes four numbers: exact, smt, "
                            "l3, far")
    if not all(0 < x < float("inf") for x in ladder):
        raise TopologyError(f"--cost-ladder {cost_ladder!r}: costs must be "
                            "positive and finite")
    deal_fn = _impl(impl).deal
    docs = []
    for pol in policy or outcomes.POLICIES:
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
    doc = {"topology": topo.name, "cost_ladder": list(ladder),
           "policies": docs}
    head = f"{'policy':<7}" + "".join(
        f"{c:>14}" for c in outcomes.WORKER_CLASSES) + f"{'cycles':>9}" + \
        f"{'on rx cpu':>10}"
    rows = [head]
    for p in docs:
        rows.append(f"{p['policy']:<7}" + "".join(
            f"{p['classes'][c]['workers']:>4} ({p['classes'][c]['share']:6.1%})"
            for c in outcomes.WORKER_CLASSES) +
            f"{p['cycles_per_request']:>9.4f}{p['on_rx_cpu']:>10.1%}")
    for p in docs:
        rows.append(f"{p['policy']:<7}per worker (cpu:share) " + " ".join(
            f"{w['cpu']}:{w['share']:.1%}" for w in p["workers"]))
    rows.append("each cell: workers in that class, i.e. where most of a "
                "worker's connections come from (their share of "
                "connections); cycles: expected per request, in the cost "
                "ladder's units (exact = " + f"{ladder[0]:g}); on rx cpu: "
                "share of connections accepted on the CPU that received "
                "them")
    _emit(as_json, doc, "\n".join(rows))
