"""The eBPF SK_REUSEPORT setups of the accept rig.

``ebpf-deal`` carries the project's decision to Linux: the dealt map is
computed by the C cores under ``sys/`` (:func:`rxl.decide.core.deal`, the
kernel's own ``lbdeal()``) from the workers' CPUs and a topology, written
into BPF maps, and applied by ``reuseport_sel.bpf.c``'s ``deal`` program
with LBDEAL_SLOT's arithmetic.  ``ebpf-numa-rr`` is seed 003's policy
(a CPU -> node map, a range and an atomic ticket per node, global round
robin, SK_PASS without metadata).

This module builds the BPF object (clang's BPF target) and the server
with its libbpf part, writes the map file acceptd reads (``-b``), says why
the setups cannot run here (:func:`unavailable`), and checks every
accepted connection against the model (:func:`model_agreement`).

The map file has one ``<map> <key> <value...>`` per line; see
``acceptd_ebpf.c``.  Constants shared with the BPF program:
:data:`MAX_MEMBERS` 256 (the sockarray's size), :data:`GLOBAL_RANGE` 64
(the ranges index of the whole group), :data:`MAX_CPUS` 256.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from rxl.bench import ebpf_host
from rxl.decide import core, distance, model, topology
from rxl.decide.topology import Topology, TopologyError
from rxl.errors import HostError, quoted

HERE = Path(__file__).parent
BPF_SOURCE = HERE / "reuseport_sel.bpf.c"
SERVER_SOURCES = (HERE / "acceptd.c", HERE / "acceptd_ebpf.c")

#: Setup name -> program name in reuseport_sel.bpf.c.
PROGRAMS = {"ebpf-deal": "deal", "ebpf-numa-rr": "numa_rr"}

MAX_MEMBERS = 256
MAX_CPUS = 256
MAX_NODES = 64
GLOBAL_RANGE = MAX_NODES
#: The log's member for "SK_PASS without a selection" (NO_MEMBER).
NO_MEMBER = 0xFFFFFFFF
#: The program's selection log holds this many entries (LOG_ENTRIES):
#: the model check covers runs of at most this many connections.
LOG_ENTRIES = 8192

#: -mcpu=v3: the ticket's atomic fetch-and-add returns the old value
#: (BPF_FETCH), which older BPF ISA levels cannot encode.
BPF_CFLAGS = ("-O2", "-g", "-target", "bpf", "-mcpu=v3")


class Unavailable(HostError):
    """The eBPF setups cannot run here; the message says why (one line)."""


def unavailable(system: Optional[str] = None, euid: Optional[int] = None,
                release: Optional[str] = None) -> Optional[str]:
    """Why the eBPF setups cannot run on this machine, or None.

    Checks the OS and kernel (Linux >= 5.12), privilege (root, or CAP_BPF
    and CAP_NET_ADMIN: rxl.bench.ebpf_host), clang and the libbpf headers.
    A kernel without the program type is found only when loading: acceptd
    then exits 5 and says so.
    """
    why = (ebpf_host.kernel_problem(system or platform.system(), release)
           or ebpf_host.privilege_problem(euid))
    if why:
        return why
    if shutil.which("clang") is None:
        return "clang (BPF target) not found: apt-get install clang"
    if not Path("/usr/include/bpf/libbpf.h").is_file():
        return "libbpf headers not found: apt-get install libbpf-dev"
    return None


def _multiarch_include() -> List[str]:
    """-I for asm/types.h, which BPF builds do not find by themselves."""
    try:
        triple = subprocess.run(["cc", "-dumpmachine"], capture_output=True,
                                text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return []
    inc = Path("/usr/include") / triple
    return ["-I", str(inc)] if triple and inc.is_dir() else []


def _digest(paths: Sequence[Path], flags: Sequence[str]) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.read_bytes())
    h.update("\0".join(flags).encode())
    return h.hexdigest()[:12]


def bpf_argv(out: Path, clang: str = "clang") -> List[str]:
    """argv that compiles reuseport_sel.bpf.c to ``out``."""
    return [clang, *BPF_CFLAGS, *_multiarch_include(), "-c", str(BPF_SOURCE),
            "-o", str(out)]


def server_argv(out: Path, cc: Sequence[str], cflags: Sequence[str]) \
        -> List[str]:
    """argv that builds acceptd with its eBPF part (-DRXL_EBPF, -lbpf)."""
    return [*cc, *cflags, "-DRXL_EBPF", "-o", str(out),
            *(str(s) for s in SERVER_SOURCES), "-lbpf"]


def _run(argv: List[str], what: str) -> None:
    try:
        res = subprocess.run(argv, capture_output=True, text=True,
                             timeout=300)
    except FileNotFoundError:
        raise Unavailable(f"{argv[0]} not found (building {what})") from None
    if res.returncode != 0:
        first = (res.stderr.strip().splitlines() or ["?"])[0]
        raise Unavailable(f"building {what} failed: {first}")


def build(build_dir: Path, cc: Sequence[str], cflags: Sequence[str],
          dry_run: bool = False, echo=print) -> Tuple[Path, Path]:
    """Build (cached by source hash) the eBPF server and the BPF object.

    Returns ``(server, object)``.  With ``dry_run`` prints the commands.
    Raises Unavailable when a compiler or libbpf is missing or fails.
    """
    server = build_dir / ("acceptd-ebpf-" +
                          _digest(SERVER_SOURCES, [*cc, *cflags]))
    obj = build_dir / ("reuseport_sel-" +
                       _digest([BPF_SOURCE], BPF_CFLAGS) + ".bpf.o")
    for out, argv_of, what in ((server, lambda o: server_argv(o, cc, cflags),
                                "acceptd with libbpf"),
                               (obj, bpf_argv, "the BPF object")):
        if dry_run:
            echo(" ".join(argv_of(out)))
            continue
        if out.exists():
            continue
        tmp = out.with_name(out.name + f".tmp{os.getpid()}")
        _run(argv_of(tmp), what)
        os.replace(tmp, out)
    return server, obj

# --------------------------------------------------------------- maps


def worker_cpus(workers: int, ncpu: int) -> List[int]:
    """The CPU of each rank under ``--pin``: rank r on CPU r mod ncpu
    (acceptd's pinning)."""
    return [r % ncpu for r in range(workers)]


def host_ncpu() -> int:
    """CPUs acceptd pins its workers over: the online count
    (``sysconf(_SC_NPROCESSORS_ONLN)``), capped at :data:`MAX_CPUS` as
    acceptd caps it (MAXCPUS)."""
    try:
        n = os.sysconf("SC_NPROCESSORS_ONLN")
    except (ValueError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(int(n), MAX_CPUS))


def pinned_cpus(workers: int, topo: Topology,
                ncpu: Optional[int] = None) -> List[int]:
    """The CPU of each rank as acceptd pins it on this host (``ncpu``
    defaults to :func:`host_ncpu`), checked against the topology the map
    is dealt on: a topology that lacks one of them would deal slots to
    CPUs the workers are not on.  Raises TopologyError."""
    cpus = worker_cpus(workers, host_ncpu() if ncpu is None else ncpu)
    topology.check_cpus(topo, sorted(set(cpus)),
                        "--topology (the workers are pinned to this "
                        "host's CPUs)")
    return cpus


def _read_list(path: Path) -> List[int]:
    return topology.parse_cpu_list(path.read_text().strip(), str(path))


def host_topology(root: Path = Path("/sys/devices/system/cpu")) -> Topology:
    """This host's topology from sysfs, as an ``LxCxT`` regular topology.

    Counts the L3 domains (cache index3 shared_cpu_list), cores per L3
    and threads per core (thread_siblings_list).  Raises TopologyError
    when sysfs is missing or the machine is not regular, or when the
    regular numbering (siblings adjacent, L3s in blocks) is not the
    host's: pass ``--topology`` then.
    """
    cpus = sorted(int(p.name[3:]) for p in root.glob("cpu[0-9]*")
                  if (p / "topology").is_dir())
    if not cpus:
        raise TopologyError(f"no CPU topology under {root}: pass --topology")
    l3s, sibs = set(), set()
    for c in cpus:
        t = root / f"cpu{c}"
        sib = t / "topology" / "thread_siblings_list"
        sibs.add(tuple(_read_list(sib)) if sib.is_file() else (c,))
        l3 = t / "cache" / "index3" / "shared_cpu_list"
        l3s.add(tuple(_read_list(l3)) if l3.is_file() else tuple(cpus))
    threads = {len(s) for s in sibs}
    sizes = {len(g) for g in l3s}
    if len(threads) != 1 or len(sizes) != 1:
        raise TopologyError("host topology is not regular: pass --topology")
    th = threads.pop()
    per_l3 = sizes.pop()
    spec = f"{len(l3s)}x{per_l3 // th}x{th}"
    topo = topology.load(spec)
    for grp in l3s:
        if topo.l3_of(grp[0]) is None or any(
                distance.classify(topo, grp[0], c)
                not in ("exact", "smt", "l3") for c in grp):
            raise TopologyError(f"host CPU numbering differs from {spec}'s: "
                                f"pass --topology")
    return topo


def deal_lines(topo: Topology, cpus: Sequence[int], deal_fn=None,
               counts: Optional[Mapping[int, int]] = None) \
        -> Tuple[List[str], Optional[model.Deal]]:
    """Map-file lines of the dealt map for workers on ``cpus`` (one member
    per rank, tagged with its CPU), and the deal itself.

    ``deal_fn`` defaults to the C cores (:func:`rxl.decide.core.deal`).
    Without ``counts`` the receiving CPUs are the tags' CPUs, equal
    counts, as a group with explicit tags and nothing counted yet; with
    ``counts`` ({cpu: handshakes}) the map is dealt from them, as after
    learning at accept(2) counted them.  The per-CPU entry packs
    ``(offset << 16) | count`` (LBDEAL_ENTRY).  Raises ValueError for more
    than :data:`MAX_MEMBERS` workers or a CPU past :data:`MAX_CPUS`.
    """
    if not 0 < len(cpus) <= MAX_MEMBERS:
        raise ValueError(f"the sockarray holds 1..{MAX_MEMBERS} workers, "
                         f"not {len(cpus)}")
    if max(cpus) >= MAX_CPUS:
        raise ValueError(f"CPU {max(cpus)} past the map's {MAX_CPUS}")
    if deal_fn is None:
        deal_fn = core.deal
    d = deal_fn(topo, [model.Tag(c) for c in cpus], dict(counts or {}))
    if d is None:
        return [], None
    lines = [f"cpuent {c} {(off << 16) | cnt}"
             for c, (off, cnt) in sorted(d.ranges.items())]
    lines += [f"slots {i} {m}" for i, m in enumerate(d.slots)]
    return lines, d


def parse_node_map(text: str) -> Dict[int, int]:
    """``--numa-map 0:0,1:1`` -> {cpu: node}.  Raises ValueError."""
    out: Dict[int, int] = {}
    for item in text.split(","):
        try:
            c, n = (int(x) for x in item.split(":"))
        except ValueError:
            raise ValueError(f"--numa-map item {quoted(item)}: use CPU:NODE") \
                from None
        if c in out:
            raise ValueError(f"--numa-map names CPU {c} twice")
        if not (0 <= c < MAX_CPUS and 0 <= n < MAX_NODES):
            raise ValueError(f"--numa-map {quoted(item)}: CPU 0..{MAX_CPUS - 1}, "
                             f"node 0..{MAX_NODES - 1}")
        out[c] = n
    return out


def host_nodes(root: Path = Path("/sys/devices/system/node")) \
        -> Dict[int, int]:
    """{cpu: node} from sysfs; every CPU on node 0 when there is none."""
    out: Dict[int, int] = {}
    for d in sorted(root.glob("node[0-9]*")):
        cl = d / "cpulist"
        if cl.is_file() and cl.read_text().strip():
            for c in _read_list(cl):
                out[c] = int(d.name[4:])
    return out


def numa_layout(cpus: Sequence[int], nodes: Mapping[int, int]) \
        -> Tuple[List[int], Dict[int, Tuple[int, int]]]:
    """Seed 003's dense socket layout: ``(index of each rank, ranges)``.

    Ranks are grouped by their CPU's node (then by rank), so each node's
    listeners are one range ``(start, count)`` of the sockarray; a CPU
    missing from ``nodes`` is on no node and only in the global range.
    """
    keyed = sorted(range(len(cpus)),
                   key=lambda r: (nodes.get(cpus[r], MAX_NODES), r))
    index = [0] * len(cpus)
    ranges: Dict[int, Tuple[int, int]] = {}
    for i, r in enumerate(keyed):
        index[r] = i
        n = nodes.get(cpus[r])
        if n is not None:
            start, cnt = ranges.get(n, (i, 0))
            ranges[n] = (start, cnt + 1)
    return index, ranges


def numa_lines(cpus: Sequence[int], nodes: Mapping[int, int]) -> List[str]:
    """Map-file lines for numa_rr: layout, cpu_node, ranges (with the
    global range at :data:`GLOBAL_RANGE`)."""
    index, ranges = numa_layout(cpus, nodes)
    lines = [f"layout {r} {i}" for r, i in enumerate(index)]
    lines += [f"cpu_node {c} {n}" for c, n in sorted(nodes.items())
              if c < MAX_CPUS]
    lines += [f"ranges {n} {s} {c}" for n, (s, c) in sorted(ranges.items())]
    lines.append(f"ranges {GLOBAL_RANGE} 0 {len(cpus)}")
    return lines

# -------------------------------------------------------- model check


def model_agreement(raw: dict, d: Optional[model.Deal]) -> Optional[float]:
    """Fraction (0..1) of accepted connections on which the program did
    what the model says for the receiving CPU and hash it logged.

    Joins acceptd's per-connection records ``[rank, cpu, hcpu, port]``
    (``-C``) with the program's log ``[port, cpu, hash, member]`` by
    client port, in order (a port reused within a run pairs with its own
    decision).  Where :func:`rxl.decide.model.select` steers, the logged
    member and the accepting rank must both be the model's member; where
    it does not (the CPU supplies no slots), the program must have left
    the choice to the kernel's hash (member :data:`NO_MEMBER`), whose pick
    is the kernel's and not checked.  A connection with no log entry
    disagrees.  None when the run has no records or no deal.
    """
    recs = raw.get("records") or []
    log = (raw.get("ebpf") or {}).get("log") or []
    if not recs or d is None:
        return None
    n = raw["workers"]
    by_port: Dict[int, List[list]] = {}
    for e in log:
        by_port.setdefault(e[0], []).append(e)
    agree = 0
    for rec in recs:
        rank, port = rec[0], rec[3]
        sel = by_port.get(port)
        if not sel:
            continue
        _, cpu, h, member = sel.pop(0)
        want, steered = model.select(d, n, cpu, h)
        if steered:
            agree += want == member == rank
        else:
            agree += member == NO_MEMBER and 0 <= rank < n
    return agree / len(recs)


def summary(raw: dict, index: Optional[Sequence[int]] = None) -> dict:
    """The program's counters from one run: selections per worker rank
    (the program counts by sockarray index; ``index[rank]`` maps a rank
    to its index, identity when None), fallbacks by reason, logged."""
    e = raw.get("ebpf") or {}
    sel = list(e.get("selections", []))
    n = raw.get("workers", 0)
    index = list(index) if index is not None else list(range(n))
    return {"program": e.get("program"),
            "selections": [sel[i] if i < len(sel) else 0 for i in index],
            "fallbacks": dict(e.get("fallbacks", {})),
            "logged": e.get("logged", 0)}
