"""Recompute the kernel's slot choice per connection of a learning run.

``rxl learn --per-connection`` makes learnd print every measured
connection's foreign port and handshake CPU (``LEARN K`` lines).  In a
guest run every connection comes from one foreign address (QEMU's
10.0.2.2) to one local port, so the lbgroup tuple hash
(``INP_PCBLBGROUP_PKTHASH``, sys/netinet/in_pcb.h) is ``J ^ (lport ^
fport)`` with one unknown ``J``: the seeded Jenkins hash of the address.
The steered lookup reads slot ``LBDEAL_MIX(h) * cnt >> 32`` of its CPU's
range, and ``LBDEAL_MIX(J ^ x) = C + LBDEAL_MIX(J_lo ^ x)`` (mod 2^32), so
only ``J``'s low 16 bits and one offset matter.

:func:`solve` finds them from the connections themselves: each one says
that its mixed hash lies in the part of its CPU's range that its worker
holds (``harness/rxl/learn/jsolve.c`` tries every 32-bit ``J``).  With
``J`` known, :func:`analyze` recomputes the member each connection should
have gone to under the map dealt from the run's receive counts (the
model's :func:`rxl.decide.model.deal`), and compares the hash's block shares over
the ports the run used with those over the whole client port range.

Usage::

    python -m rxl.learn.ports LOG --label learn-spread.all [--topology qemu-2s]
"""

from __future__ import annotations

import collections
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import click

from rxl.decide import core, cpugroup, model
from rxl.decide.topology import TOPOLOGY
from rxl.cli.options import check_input, read_input
from rxl.cli.surface import command
from rxl.errors import BadOption, DataError, show
from rxl.learn import drive, plan, results

#: learnd's port in the guest (rxl.learn.plan.GUEST_PORT).
LPORT = plan.GUEST_PORT
T32 = 1 << 32
#: Observations handed to jsolve: enough bits to pin J_lo and the offset.
NOBS = 80


class PortsError(DataError):
    """A log or run that cannot be analysed (one-line message)."""


def mixed(j: int, fport: int, lport: int = LPORT) -> int:
    """``LBDEAL_MIX(J ^ (lport ^ fport))`` as a 32-bit value."""
    return model.mix((j ^ (lport ^ fport)) & 0xFFFFFFFF)


def member_intervals(d: model.Deal, cpu: int) -> Dict[int, List[Tuple[int, int]]]:
    """Per member, the runs of consecutive slots it holds in ``cpu``'s range.

    Returns ``{member: [(first, end), ...]}`` in slot units relative to the
    range (``end`` exclusive).
    """
    out: Dict[int, List[Tuple[int, int]]] = collections.defaultdict(list)
    slots = d.slots_of(cpu)
    i = 0
    while i < len(slots):
        j = i
        while j < len(slots) and slots[j] == slots[i]:
            j += 1
        out[slots[i]].append((i, j))
        i = j
    return dict(out)


def observations(conns: Sequence[Tuple[int, int, int]], d: model.Deal, *,
                 slack: int = 1) -> List[Tuple[int, int, int]]:
    """jsolve input lines ``(x, lo, hi)`` from connections whose member holds
    one run of slots in its CPU's range.

    The bounds are widened by ``slack`` slots on each side, because the run's
    maps were dealt from window counts that moved a CPU's range by a slot
    or so.  Connections to a member outside their CPU's range (a crossing)
    are left out.
    """
    out = []
    for w, fport, hcpu in conns:
        if hcpu not in d.ranges:
            continue
        runs = member_intervals(d, hcpu).get(w)
        if not runs or len(runs) != 1:
            continue
        cnt = d.ranges[hcpu][1]
        a, b = runs[0]
        lo = max(0, (a - slack)) * T32 // cnt
        hi = min(cnt, b + slack) * T32 // cnt
        out.append((LPORT ^ fport, lo, hi))
    return out


def jsolve_binary() -> Path:
    """Build ``harness/rxl/learn/jsolve.c`` once into the build directory."""
    src = Path(__file__).with_name("jsolve.c")
    out = core.make_build_dir() / "jsolve"
    if out.exists() and out.stat().st_mtime >= src.stat().st_mtime:
        return out
    p = subprocess.run([*core.cc_argv(), "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror",
                        str(src), "-o", str(out)], capture_output=True, text=True)
    if p.returncode:
        raise PortsError(f"building jsolve failed: {p.stderr.strip()}")
    return out


def solve(obs: Sequence[Tuple[int, int, int]], *, n: int = NOBS, seed: int = 1) -> List[int]:
    """The ``J`` (up to 16) consistent with ``n`` of the observations (sampled, seeded).

    Several agree: their high bits only shift every mixed hash by nearly
    the same offset.  Raises PortsError when none does: the lookup is then
    not the hash this module assumes.
    """
    if not obs:
        raise PortsError("no usable connections (none steered into a single run of slots)")
    pick = random.Random(seed).sample(list(obs), min(n, len(obs)))
    text = "".join(f"{x} {lo} {hi}\n" for x, lo, hi in pick)
    p = subprocess.run([str(jsolve_binary())], input=text, capture_output=True, text=True)
    if p.returncode or not p.stdout.split():
        raise PortsError(f"no J fits {len(pick)} connections: the slot choice is not "
                         "LBDEAL_MIX(J ^ (lport ^ fport)) * cnt >> 32")
    return [int(v, 16) for v in p.stdout.split()]


@dataclass
class Analysis:
    """What :func:`analyze` found; shares are fractions of connections."""

    j: int
    agree: int
    disagree: int
    blocks: int
    used: List[float]
    all_ports: List[float]
    reused: List[float]
    fresh: List[float]
    nreused: int


def _shares(ports: Sequence[int], j: int, blocks: int) -> List[float]:
    c = collections.Counter(mixed(j, p) * blocks >> 32 for p in ports)
    n = max(1, len(ports))
    return [c[b] / n for b in range(blocks)]


def analyze(conns: Sequence[Tuple[int, int, int]], d: model.Deal, *,
            port_range: Tuple[int, int] = drive.SRC_PORT_RANGE, blocks: int = 4) -> Analysis:
    """Solve ``J``, recompute every connection's member, compare block shares.

    ``blocks``: the range is cut into that many equal parts (4: one per
    member of a CPU's 64 slots in the guest's one-worker-per-CPU run).
    A port counts as reused when it appeared earlier in the measured
    connections of the same worker list (accept order per worker, so
    approximate).
    """
    def score(j: int) -> Tuple[int, int]:
        agree = disagree = 0
        for w, fport, hcpu in conns:
            if hcpu not in d.ranges:
                continue
            off, cnt = d.ranges[hcpu]
            if d.slots[off + (mixed(j, fport) * cnt >> 32)] == w:
                agree += 1
            else:
                disagree += 1
        return agree, disagree

    # The candidates differ at the edges of the slot runs: keep the one
    # that recomputes the most connections right.
    scored = [(score(j), j) for j in solve(observations(conns, d))]
    (agree, disagree), j = max(scored)
    ports = [p for _, p, _ in conns]
    seen, reused, fresh = set(), [], []
    for p in ports:
        (reused if p in seen else fresh).append(p)
        seen.add(p)
    return Analysis(j=j, agree=agree, disagree=disagree, blocks=blocks,
                    used=_shares(ports, j, blocks),
                    all_ports=_shares(range(*port_range), j, blocks),
                    reused=_shares(reused, j, blocks), fresh=_shares(fresh, j, blocks),
                    nreused=len(reused))


def run_deal(run: results.RunSummary, topo: cpugroup.Topology) -> model.Deal:
    """The map the run's final state deals: learned tags = pinned CPUs,
    counts = measured handshakes per CPU. Raises PortsError, also for a
    run whose kernel built no map (learning set to 0, or no learning
    sysctl at all: the pristine kernel)."""
    learning = [v for k, v in run.sets.items() if "learn" in k]
    if not learning or learning[0] in ("0", "missing"):
        raise PortsError(f"run {run.label}: learning was "
                         f"{'off' if learning else 'not available (pristine kernel)'}, "
                         "so there was no map: the hash picked h % n, nothing to recompute")
    pins = run.pins
    if not pins or any(c < 0 for c in pins):
        raise PortsError(f"run {run.label}: workers are not all pinned")
    counts: Dict[int, int] = collections.Counter()
    for c in run.counts:
        if c.phase == "m" and c.hcpu >= 0:
            counts[c.hcpu] += c.n
    d = model.deal(topo, [model.Tag(c, learned=True) for c in pins], dict(counts))
    if d is None:
        raise PortsError(f"run {run.label}: no map (nothing counted)")
    return d


@command()
@click.argument("log")
@click.option("--label", required=True, help="Run label, e.g. learn-spread.all.")
@click.option("--topology", "topo", default="qemu-2s", show_default=True, type=TOPOLOGY)
def main(log: str, label: str, topo: cpugroup.Topology) -> None:
    """Recompute the slot of every measured connection of one run.

    Errors as every rxl command's (rxl.cli.surface): one line, exit 2 for a
    LOG that is no console log of rxl learn or a --label it does not hold."""
    check_input(log, "LOG")
    try:
        text = read_input(log, "a console log of rxl learn")
    except OSError as exc:
        raise DataError(f"{show(log)}: {exc.strerror}") from None
    runs = results.parse_learn(text.splitlines())
    if not runs:
        raise DataError(f"{show(log)}: no ==RXL== LEARN line: not a console log of rxl learn")
    if label not in runs:
        raise BadOption(f"{show(label)}: no run of {show(log)} (its runs: "
                        f"{', '.join(sorted(runs))})", "--label")
    run = runs[label]
    if len(run.begins) > 1:  # as rxl learn --log: two runs' connections would be mixed
        raise DataError(f"{show(log)} line {run.begins[1]}: a second run labelled "
                        f"{show(label, 80)} (the first began at line {run.begins[0]})")
    if run.damage:
        raise DataError(f"{show(log)}: run {show(label, 80)} damaged: {run.damage[0]}")
    try:
        if not run.conns:
            raise PortsError(f"{log}: run {label} has no LEARN K lines "
                             "(run rxl learn with --per-connection)")
        a = analyze(run.conns, run_deal(run, topo))
    except core.CoreError as exc:  # the C build: a failure, exit 1
        raise click.ClickException(str(exc).splitlines()[0]) from None

    def fmt(v: List[float]) -> str:
        return " ".join(f"{x * 100:5.1f}%" for x in v)

    click.echo(f"{label}: {len(run.conns)} connections; J low 16 bits {a.j & 0xffff:04x}")
    click.echo(f"recomputed member = observed: {a.agree} of {a.agree + a.disagree} "
               f"({a.agree / max(1, a.agree + a.disagree) * 100:.1f}%)")
    click.echo("hash's share of each quarter of a range:")
    click.echo(f"  every port of the client range  {fmt(a.all_ports)}")
    click.echo(f"  ports of the measured connections {fmt(a.used)}")
    click.echo(f"    first use in the run           {fmt(a.fresh)}")
    click.echo(f"    reused ({a.nreused:5d})            {fmt(a.reused)}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
