"""``rxl deal``, ``rxl spread``, ``rxl outcomes``: the decisions on demand.

Each runs either the C cores (``--impl c``, the kernel's own code built in
userspace) or the reference model (``--impl model``) and prints a table,
or JSON with ``--json``.  Bad input exits 1 with one line on stderr.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Dict, List, Optional

import click

from rxl.cli.groups import refuse_given
from rxl.cli.options import check_no_repeats, decimal_float
from rxl.cli.surface import command
from rxl.decide import attach, core, distance, model, outcomes, report, topology
from rxl.decide.cpugroup import CPU_MAXSIZE, Topology, TopologyError
from rxl.errors import UsageError, counted, quoted, show

IMPLS = ("c", "model")
#: Most members an lbgroup holds: INPCBLBGROUP_SIZMAX, sys/netinet/in_pcb.c.
LBGROUP_MAX = 256
TOPOLOGY_HELP = ("Built-in name, LxCxT, or a kern.sched.topology_spec dump "
                 "(file, a pipe such as <(ssh host sysctl -n "
                 "kern.sched.topology_spec), or - for stdin).")


def _impl(name: str):
    if name == "c":
        return core
    return model


def _friendly(fn):
    """Turn input errors into a one-line ``Error: ...``: exit 2 for bad input (a
    usage error), 1 for a failure of the C build."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (TopologyError, ValueError) as e:
            raise UsageError(str(e))
        except core.CoreError as e:  # one line by design
            raise click.ClickException(str(e).splitlines()[0])
        except MemoryError:
            raise click.ClickException("input too large")
    return wrapper


#: Digits of the longest number the options read as one (2**64-1 has 20); a
#: longer one is still a number, out of range, and said to be (not "malformed").
_DIGITS = 20


def _cpu(digits: str, topo: Topology, what: str) -> int:
    """The CPU id ``digits`` (decimal); TopologyError naming ``what`` for one of
    more than :data:`_DIGITS` digits, which no topology holds."""
    if len(digits) > _DIGITS:
        raise TopologyError(f"{what}: CPU {show(digits, 24)} is not in topology "
                            f"{topo.name} (CPUs {topology.cpu_ranges(topo.cpus)})")
    return int(digits)


def parse_members(text: str, topo: Topology) -> List[model.Tag]:
    """``"0,1,2,9,-,5L"``: a CPU (explicit tag), ``-`` (untagged), or a CPU
    with ``L`` (a tag learned at accept(2)).  Raises TopologyError."""
    tags = []
    for item in text.split(","):
        item = item.strip()
        if item == "-":
            tags.append(model.Tag())
            continue
        m = re.fullmatch(r"([0-9]+)([Ll]?)", item)
        if not m:
            raise TopologyError(f"malformed member {quoted(item)} in {quoted(text)}: use "
                                "a CPU id (5: tagged), '-' (untagged) or a CPU id "
                                "with L appended (5L: learned at accept(2))")
        tags.append(model.Tag(_cpu(m.group(1), topo, "--members"), bool(m.group(2))))
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
        m = re.fullmatch(r"\s*([0-9]+)\s*:\s*([0-9]+)\s*", item)
        if not m:
            raise TopologyError(f"malformed {what} item {quoted(item)}: use CPU:COUNT")
        cpu = _cpu(m.group(1), topo, what)
        if len(m.group(2)) > _DIGITS or int(m.group(2)) >= 1 << 32:
            raise TopologyError(f"{what}: count {show(m.group(2), 24)} does not fit 32 bits")
        count = int(m.group(2))
        if cpu in out:
            raise TopologyError(f"CPU {cpu} given twice in {what}")
        out[cpu] = count
    topology.check_cpus(topo, out, what)
    return out


def _emit(as_json: bool, doc: dict, text: str) -> None:
    click.echo(json.dumps(doc, indent=2) if as_json else text)


@command()
@click.option("--topology", "topo", required=True, type=topology.TOPOLOGY, help=TOPOLOGY_HELP)
@click.option("--members", required=True,
              help="Member tags in member order, comma-separated: a CPU id (5: tagged "
                   "with TCP_REUSPORT_LB_CPU), '-' (untagged) or a CPU id with L "
                   "appended (5L: learned at accept(2)).")
@click.option("--counts", default="",
              help="Handshakes per receiving CPU, CPU:COUNT,... (both windows).")
@click.option("--impl", type=click.Choice(IMPLS), default="c", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_friendly
def deal(topo, members, counts, impl, as_json):
    """Deal the members of an SO_REUSEPORT_LB group to receiving CPUs."""
    tags = parse_members(members, topo)
    if len(tags) > LBGROUP_MAX:
        raise click.BadParameter(f"{len(tags)} members: FreeBSD caps an SO_REUSEPORT_LB "
                                 f"group at {LBGROUP_MAX} (INPCBLBGROUP_SIZMAX)",
                                 param_hint="'--members'")
    d = _impl(impl).deal(topo, tags, parse_counts(counts, topo))
    doc = report.deal_doc(topo, tags, d)
    _emit(as_json, doc, report.deal_text(doc))


#: Most devices ``rxl spread`` attaches in one go.
MAX_DEVICES = 64


def per_device(text: Optional[str], what: str, lo: int, hi: int,
               unset: bool) -> List[Optional[int]]:
    """``"2,2"`` -> ``[2, 2]``: one value per device in attach order; ``-`` is
    unset (None) where ``unset``. Raises TopologyError naming ``what``."""
    if text is None:
        return [None]
    out: List[Optional[int]] = []
    for item in text.split(","):
        item = item.strip()
        if unset and item == "-":
            out.append(None)
            continue
        if not re.fullmatch(r"[0-9]{1,20}", item) or not lo <= int(item) <= hi:
            raise TopologyError(f"{what}: {quoted(item)} is not " + (
                f"a number {lo}..{hi}" + (" or '-' (unset)" if unset else "")))
        out.append(int(item))
    if len(out) > MAX_DEVICES:
        raise TopologyError(f"{what}: {len(out)} devices; at most {MAX_DEVICES}")
    return out


@command()
@click.option("--topology", "topo", required=True, type=topology.TOPOLOGY, help=TOPOLOGY_HELP)
@click.option("--intr-cpus", required=True,
              help="The interrupt-eligible CPU set, e.g. 0-30:2.")
@click.option("--queues", required=True, metavar="N[,N...]",
              help="Queues to place (1 to 4096); several: one number per device, in "
                   "attach order (e.g. 2,2: two 2-queue NICs).")
@click.option("--domain", default=None, metavar="D[,D...]",
              help="The NIC's NUMA domain (ACPI _PXM): the interrupt set is then its "
                   "CPUs among --intr-cpus, as acpi_get_cpus() gives them; one per "
                   "device, '-' for a device without _PXM (default: unknown, the "
                   "whole set).")
@click.option("--core-offset", "core_offsets", default=None, metavar="CPU[,CPU...]",
              help="dev.<drv>.<unit>.iflib.core_offset per device (0-65534; '-' unset). "
                   "Unset, devices with the same interrupt set share one cursor: each "
                   "starts where the one attached before it stopped (iflib's "
                   "get_ctx_core_offset()).")
@click.option("--core-spread", "mode", type=click.IntRange(0, 1), default=1,
              show_default=True,
              help="The tunable's value: 0 numeric order, 1 spread over "
                   "cores, then L3 groups, one domain after another.")
@click.option("--no-spread", is_flag=True,
              help="Today's numeric order (the same as --core-spread 0).")
@click.option("--impl", type=click.Choice(IMPLS), default="c", show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@_friendly
def spread(ctx, topo, intr_cpus, queues, domain, core_offsets, mode, no_spread, impl,
           as_json):
    """Order in which iflib devices' queues take CPUs.

    With core_spread=1 the CPUs are taken one NUMA domain after another,
    within a domain every core's first SMT thread before any second
    thread, and the L3 groups take turns among the CPUs of one such round.
    A topology without L3 (cache-level 3) groups still gets the thread
    order.  Each device starts at its core_offset, or where the devices
    attached before it with the same interrupt set stopped.
    """
    if no_spread:
        refuse_given(ctx, ("mode",), "--no-spread is --core-spread 0; give one of them")
        mode = model.SPREAD_OFF
    eligible = topology.parse_cpu_list(intr_cpus, "--intr-cpus")
    topology.check_cpus(topo, eligible, "--intr-cpus")
    lists = {"--queues": per_device(queues, "--queues", 1, 4096, unset=False),
             "--domain": per_device(domain, "--domain", 0, CPU_MAXSIZE, unset=True),
             "--core-offset": per_device(core_offsets, "--core-offset", 0,
                                         attach.CORE_OFFSET_UNSPECIFIED - 1, unset=True)}
    n = len(lists["--queues"])  # the devices: one --queues number each
    for opt, text in (("--domain", domain), ("--core-offset", core_offsets)):
        if text is not None and len(lists[opt]) != n:
            raise click.BadParameter(
                f"{counted(len(lists[opt]), 'value')} for the {counted(n, 'device')} of "
                f"--queues {queues}: give one per device ('-' for unset)",
                param_hint=f"'{opt}'")
    devices, meta = [], []
    orders: Dict[tuple, List[int]] = {}
    for k in range(n):
        q, dom, off = (lists[o][k if len(lists[o]) > 1 else 0]
                       for o in ("--queues", "--domain", "--core-offset"))
        mine = eligible
        if dom is not None:
            cpus = set(topology.domain_cpus(topo, dom))
            mine = [c for c in eligible if c in cpus]
            if not mine:
                raise click.BadParameter(f"no CPU of --intr-cpus is in domain {dom}",
                                         param_hint="'--domain'")
        key = tuple(mine)
        if key not in orders:  # devices of one interrupt set: one order
            orders[key] = _impl(impl).spread_order(topo, mine, mode)
        order = orders[key]
        devices.append(attach.Device(q, order, off))
        meta.append({"order": order, "domain": dom, "core_offset": off})
    for d, a in zip(meta, attach.attach(devices)):
        d["attached"] = a
    doc = report.spread_doc(topo, meta, mode=mode)
    _emit(as_json, doc, report.spread_text(doc))


@command(name="outcomes")
@click.option("--topology", "topo", required=True, type=topology.TOPOLOGY, help=TOPOLOGY_HELP)
@click.option("--workers", required=True, help="Worker CPUs, e.g. 0-31.")
@click.option("--rx-cpus", required=True, help="Receiving CPUs.")
@click.option("--rx-counts", default="",
              help="Relative handshakes per receiving CPU as CPU:COUNT,... (e.g. "
                   "0:3,2:1); a CPU of --rx-cpus it leaves out receives none [default: "
                   "equal].")
@click.option("--policy", type=click.Choice(outcomes.POLICIES), multiple=True,
              help="Repeatable; default all three.")
@click.option("--cost-ladder", default="1,1,1,1.19", show_default=True,
              help="Cycles per request for exact, smt, l3, far (seed 000); "
                   "node costs as l3, remote as far, unless six numbers give "
                   "exact, smt, l3, node, far, remote.")
@click.option("--impl", type=click.Choice(IMPLS), default="c", show_default=True)
@click.option("--json", "as_json", is_flag=True)
@_friendly
def outcomes_cmd(topo, workers, rx_cpus, rx_counts, policy, cost_ladder,
                 impl, as_json):
    """Worker classes and expected cost under hash, exact claims and deal.

    Distances follow the topology: smt (same core), l3 (same L3), node
    (same package or NUMA node, but the tree reports no cache to say
    whether an L3 is crossed; not charged the cross-L3 cost), far (other
    L3 of the same package or node), remote (other package or node).
    """
    # A CPU may carry several workers, as in `rxl deal --members 0,0,1,1`.
    wl = [c for item in workers.split(",")
          for c in topology.parse_cpu_list(item, "--workers")]
    topology.check_cpus(topo, wl, "--workers")
    if len(wl) > LBGROUP_MAX:  # the workers are one lbgroup's members, as deal's are
        raise click.BadParameter(f"{len(wl)} workers: FreeBSD caps an SO_REUSEPORT_LB "
                                 f"group at {LBGROUP_MAX} (INPCBLBGROUP_SIZMAX)",
                                 param_hint="'--workers'")
    rx_list = topology.parse_cpu_list(rx_cpus, "--rx-cpus")
    topology.check_cpus(topo, rx_list, "--rx-cpus")
    counts = parse_counts(rx_counts, topo, "--rx-counts")
    stray = set(counts) - set(rx_list)
    if stray:
        raise TopologyError(f"--rx-counts names CPUs not in --rx-cpus: "
                            f"{sorted(stray)}")
    check_no_repeats(policy, "--policy", "each policy is a row, once")
    rx = {c: counts.get(c, 1 if not counts else 0) for c in rx_list}
    try:
        costs = [decimal_float(x.strip()) for x in cost_ladder.split(",")]
    except ValueError:
        raise TopologyError(f"malformed --cost-ladder {quoted(cost_ladder)}")
    ladder = distance.ladder(costs)
    doc = report.outcomes_doc(topo, wl, rx, policy or outcomes.POLICIES, ladder, _impl(impl).deal)
    _emit(as_json, doc, report.outcomes_text(doc))
