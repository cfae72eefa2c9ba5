"""Learning at accept(2) on the guest's e1000e: plan, drive, parse, tabulate.

Issue 6 proves commit 3 ("learn SO_REUSEPORT_LB receive and worker CPUs at
accept(2)") on a NIC that delivers real RSS hashes: the QEMU guest of issue 4
with its e1000e (82574L, em(4) on iflib, two receive queues).  The guest runs
``learnd`` (harness/rxl/learn/learnd.c), an unmodified SO_REUSEPORT_LB
server, one pinned worker per CPU or per receive-queue CPU; the host opens
connections to it through QEMU user networking (``hostfwd`` on 127.0.0.1),
so every SYN enters the guest on em0 with a hardware hash.

This module is the pure part plus the host-side driver:

* :func:`plan_phases` - warm-up and measured phases, each longer than the
  learning's two 10 s windows (seed 000, "Learning at accept(2)": "window
  older than 10 s: roll prev = cur"; "supply is learned in two ten-second
  windows, so runs shorter than that under-converge");
* :func:`plan_boots` - which kernel / tunable / sysctl each run uses;
* :func:`drive_phase` / :func:`drive_run` - the connection driver, bounded
  in count and time, 127.0.0.1 only;
* :func:`parse_learn` - learnd's summary lines from a console log;
* :func:`analyze` and :func:`table` - per worker shares, co-location, same
  socket, starved workers, beside what :mod:`rxl.decide.outcomes` predicts.

The booting itself (staging a root, QEMU, the console) is in
:mod:`rxl.learn.cli`, which reuses the guest modules of issue 4.
"""

from __future__ import annotations

import math
import re
import socket
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from rxl.decide import outcomes, topology
from rxl.guest.protocol import MARK

#: Length of one learning window, seconds, and how many are kept (seed 000,
#: "Learning at accept(2)": counts in ``il_rxcnt[2][cpu]``, two 10 s windows).
WINDOW_S = 10
WINDOWS = 2
#: A phase must outlast both windows to see a converged map.
MIN_PHASE_S = WINDOW_S * WINDOWS

#: The guest's address on QEMU user networking (slirp's defaults: guest
#: 10.0.2.15/24, host/gateway 10.0.2.2).
GUEST_ADDR = "10.0.2.15"
GUEST_PREFIX = 24
GUEST_GATEWAY = "10.0.2.2"
#: learnd's port inside the guest.
GUEST_PORT = 8080
#: Hosts the driver may connect to: loopback only (hostfwd listens there).
LOOPBACK_HOSTS = ("127.0.0.1",)

#: Phase bytes understood by learnd (learnd.c: ``phases[]``).
PHASE_BYTES = {"warmup": "w", "measured": "m", "quit": "q"}
#: M_HASHTYPE_HASHPROP (sys/sys/mbuf.h): set for every hash a NIC computed.
HASHPROP = 0x80
#: M_HASHTYPE_RSS_TCP_IPV4 = M_HASHTYPE_HASH(2) (sys/sys/mbuf.h, 14.0).
RSS_TCP_IPV4 = 0x82

#: Configurations of issue 6, in table order.
CONFIGS = ("pristine", "learn-off", "learn-on", "learn-spread")
#: Worker sets: one pinned worker per receive-queue CPU, or per CPU.
WORKER_SETS = ("rxq", "all")
#: Loader tunable of commit 1 for the guest's em0 (CTLFLAG_RDTUN in iflib.c).
SPREAD_TUNABLE = "dev.em.0.iflib.core_spread"


class LearnError(ValueError):
    """Bad input to the learning harness (one-line message)."""


# --------------------------------------------------------------------- plan

@dataclass(frozen=True)
class Phase:
    """One phase of connections: a name, learnd's byte, and its bounds.

    The phase lasts at least ``min_s`` seconds and until ``min_conns``
    connections succeeded, but never longer than ``max_s`` seconds or
    ``max_conns`` attempts.
    """

    name: str
    byte: str
    min_s: float
    max_s: float
    min_conns: int
    max_conns: int


def plan_phases(warmup_s: float = 25.0, measured_s: float = 30.0, *,
                min_measured: int = 512, max_factor: float = 4.0,
                max_conns: int = 20000) -> List[Phase]:
    """Warm-up then measured phase.

    ``warmup_s`` / ``measured_s``: minimum seconds of each, both must exceed
    :data:`MIN_PHASE_S` (two 10 s windows, seed 000). ``min_measured``: the
    measured phase goes on (up to ``max_factor`` times its length) until
    that many connections succeeded (issue 6: "at >= 512 connections").
    Raises LearnError for a phase not longer than both windows or bad bounds.
    """
    for name, s in (("warm-up", warmup_s), ("measured", measured_s)):
        if not s > MIN_PHASE_S:
            raise LearnError(f"{name} phase of {s:g} s is not longer than the two "
                             f"{WINDOW_S} s learning windows ({MIN_PHASE_S} s)")
    if min_measured < 0 or max_conns < 1 or max_factor < 1:
        raise LearnError("min_measured >= 0, max_conns >= 1 and max_factor >= 1 required")
    return [
        Phase("warmup", PHASE_BYTES["warmup"], warmup_s, warmup_s, 0, max_conns),
        Phase("measured", PHASE_BYTES["measured"], measured_s, measured_s * max_factor,
              min_measured, max_conns),
    ]


@dataclass(frozen=True)
class RunPlan:
    """One learnd run inside a boot: ``label`` is ``<config>.<workers>``.

    ``learning``: the value the rc writes to the learning sysctl, None to
    leave it alone (the pristine kernel has none).
    """

    config: str
    workers: str
    learning: Optional[int]

    @property
    def label(self) -> str:
        return f"{self.config}.{self.workers}"


@dataclass(frozen=True)
class BootPlan:
    """One guest boot: a kernel (``patched``/``pristine``), loader tunables, runs."""

    name: str
    kernel: str
    tunables: Tuple[Tuple[str, str], ...]
    runs: Tuple[RunPlan, ...]


def plan_boots(configs: Sequence[str] = CONFIGS,
               worker_sets: Sequence[str] = WORKER_SETS) -> List[BootPlan]:
    """The boots that cover ``configs`` x ``worker_sets``. Pure.

    learn-off and learn-on share one boot (the sysctl is set at run time,
    off first so nothing learned leaks into the control); learn-spread needs
    its own boot (``core_spread`` is a loader tunable); pristine boots the
    base kernel. Raises LearnError for unknown names or empty selections.
    """
    bad = [c for c in configs if c not in CONFIGS] + [w for w in worker_sets
                                                      if w not in WORKER_SETS]
    if bad:
        raise LearnError(f"unknown configuration or worker set: {', '.join(bad)} "
                         f"(configs: {', '.join(CONFIGS)}; workers: {', '.join(WORKER_SETS)})")
    if not configs or not worker_sets:
        raise LearnError("no configuration or no worker set selected")
    ws = [w for w in WORKER_SETS if w in worker_sets]
    boots: List[BootPlan] = []
    main_runs = [RunPlan(c, w, 0 if c == "learn-off" else 1)
                 for c in ("learn-off", "learn-on") if c in configs for w in ws]
    if main_runs:
        boots.append(BootPlan("patched", "patched", (), tuple(main_runs)))
    if "learn-spread" in configs:
        boots.append(BootPlan("spread", "patched", ((SPREAD_TUNABLE, "1"),),
                              tuple(RunPlan("learn-spread", w, 1) for w in reversed(ws))))
    if "pristine" in configs:
        boots.append(BootPlan("pristine", "pristine", (),
                              tuple(RunPlan("pristine", w, None) for w in ws)))
    return boots


def config_of(label: str) -> Tuple[str, str]:
    """``"learn-on.all"`` -> ``("learn-on", "all")``. Raises LearnError otherwise."""
    config, sep, workers = label.rpartition(".")
    if not sep or config not in CONFIGS or workers not in WORKER_SETS:
        raise LearnError(f"run label {label!r} is not <config>.<workers>")
    return config, workers


# ------------------------------------------------------------ tree lookups

_OPT_RE = re.compile(r"^#define\s+SO_REUSEPORT_LB_CPU\s+(0x[0-9a-fA-F]+|\d+)\b", re.M)
_SYSCTL_RE = re.compile(
    r"SYSCTL_(?:INT|UINT|BOOL|U8|U16|U32|PROC)\s*\(\s*_net_inet(_tcp|_ip)?\s*,\s*OID_AUTO\s*,"
    r"\s*(\w*learn\w*)\s*,")
_SYSCTL_PARENTS = {None: "net.inet", "_tcp": "net.inet.tcp", "_ip": "net.inet.ip"}
#: Files of commit 3 that may declare the learning sysctl (seed 000, "The
#: three commits": protosw.h, uipc_syscalls.c, tcp_usrreq.c, in_pcb.c).
SYSCTL_FILES = ("sys/netinet/in_pcb.c", "sys/netinet/tcp_usrreq.c",
                "sys/kern/uipc_syscalls.c", "sys/netinet/tcp_syncache.c")


def lb_cpu_option(src: str) -> Optional[int]:
    """Value of ``SO_REUSEPORT_LB_CPU`` in ``<src>/sys/sys/socket.h``, or None (no commit 2)."""
    p = Path(src) / "sys/sys/socket.h"
    if not p.is_file():
        return None
    m = _OPT_RE.search(p.read_text(errors="replace"))
    return int(m.group(1), 0) if m else None


def learn_sysctl_name(src: str) -> Optional[str]:
    """Dotted name of commit 3's learning sysctl found in the tree, or None.

    Recognises ``SYSCTL_<INT|UINT|BOOL|U8|U16|U32|PROC>(_net_inet[_tcp|_ip],
    OID_AUTO, <name with "learn">, ...)`` in :data:`SYSCTL_FILES` (commit 3
    declares ``net.inet.tcp.reuseport_lb_learn`` with SYSCTL_PROC in
    tcp_usrreq.c).
    """
    for rel in SYSCTL_FILES:
        p = Path(src) / rel
        if not p.is_file():
            continue
        m = _SYSCTL_RE.search(p.read_text(errors="replace"))
        if m:
            return f"{_SYSCTL_PARENTS[m.group(1)]}.{m.group(2)}"
    return None


def learnd_source() -> Path:
    """Path of learnd.c next to this module."""
    return Path(__file__).with_name("learnd.c")


def learnd_cc_argv(source: str, output: str, sysroot: str, *, lb_cpu_opt: Optional[int],
                   clang: str = "/usr/lib/llvm-16/bin/clang",
                   triple: str = "x86_64-unknown-freebsd14.0") -> List[str]:
    """argv cross-compiling learnd for the guest, statically, against the world sysroot.

    ``lb_cpu_opt``: the series' SO_REUSEPORT_LB_CPU value when the sysroot's
    headers predate it (None: learnd reports the handshake CPU as unknown).
    """
    argv = [clang, f"--target={triple}", f"--sysroot={sysroot}", "-fuse-ld=lld",
            "-O2", "-Wall", "-static"]
    if lb_cpu_opt is not None:
        argv.append(f"-DLEARND_LB_CPU_OPT={lb_cpu_opt:#x}")
    return argv + ["-o", output, source]


# ------------------------------------------------------------------ driver

@dataclass
class PhaseResult:
    """What the driver did in one phase. ``seconds``: wall time."""

    name: str
    attempts: int = 0
    ok: int = 0
    failed: int = 0
    seconds: float = 0.0
    stopped_by: str = ""


def connect_once(port: int, byte: str, *, host: str = "127.0.0.1",
                 timeout: float = 5.0, src_port: Optional[int] = None) -> bool:
    """One connection: connect, send ``byte``, wait for learnd's ``k``. True on success.

    ``src_port``: bind the client to this local port first (None: the
    kernel picks). Raises LearnError for a host outside
    :data:`LOOPBACK_HOSTS`; a port already in use is a failed attempt.
    """
    if host not in LOOPBACK_HOSTS:
        raise LearnError(f"refusing to connect to {host}: loopback only")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            if src_port is not None:
                s.bind((host, src_port))
            s.connect((host, port))
            s.sendall(byte.encode("ascii"))
            return s.recv(1) == b"k"
    except OSError:
        return False


#: Client source ports for :func:`port_connector` (both parities; below
#: Linux's default ephemeral range 32768-60999 would be fine too, this
#: range just avoids the well-known and registered low ports).
SRC_PORT_RANGE = (20000, 61000)


def port_connector(mode: str = "random", *, seed: int = 6,
                   port_range: Tuple[int, int] = SRC_PORT_RANGE,
                   connect: Callable[..., bool] = connect_once,
                   tries: int = 5) -> Callable[[int, str], bool]:
    """A ``connect(port, byte)`` for the driver that chooses client source ports.

    QEMU's user networking hands the host client's source port to the guest
    as the connection's foreign port (measured: ``rxl learn`` run of
    2026-11-30, docs/results/learning.md), and Linux's connect(2) prefers
    even ephemeral ports, so with ``mode="kernel"`` every guest-side foreign
    port is even and the lbgroup tuple hash (``INP_PCBLBGROUP_PKTHASH``: the
    port pair XORed into the low bits) never selects odd-indexed members.

    ``mode="random"`` walks a seeded random permutation of ``port_range``,
    so a port comes back only after every other port of the range has been
    used: at a few hundred connections a second, later than the 60 s
    TIME_WAIT of either side.  Drawing with replacement reused ports within
    TIME_WAIT, and such a reuse fails more often for some members than
    others (docs/results/learning.md, "Where the exact share goes"); the
    driver's retry with a fresh port then skewed which ports, and so which
    slots, the measured connections had.  A failed try moves on to the next
    port, up to ``tries`` per connection.  The returned function counts
    failed tries in its ``retries`` attribute.  Raises LearnError for an
    unknown mode or an empty range.
    """
    if mode == "kernel":
        return lambda port, byte: connect(port, byte)
    if mode != "random":
        raise LearnError(f"client port mode {mode!r}: 'random' or 'kernel'")
    lo, hi = port_range
    if not 0 < lo < hi <= 65536:
        raise LearnError(f"bad client port range {port_range}")
    import random
    order = list(range(lo, hi))
    random.Random(seed).shuffle(order)
    pos = [0]
    lock = threading.Lock()

    def go(port: int, byte: str) -> bool:
        for _ in range(tries):
            with lock:
                src = order[pos[0] % len(order)]
                pos[0] += 1
            if connect(port, byte, src_port=src):
                return True
            with lock:
                go.retries += 1
        return False
    go.retries = 0
    return go


def drive_phase(port: int, phase: Phase, *, concurrency: int = 1,
                connect: Callable[[int, str], bool] = connect_once,
                clock: Callable[[], float] = time.monotonic,
                max_consecutive_failures: int = 200) -> PhaseResult:
    """Open connections for one phase; returns counts. Bounded in count and time.

    Stops at ``phase.max_s`` seconds or ``phase.max_conns`` attempts, or
    once ``phase.min_s`` passed and ``phase.min_conns`` succeeded, or after
    ``max_consecutive_failures`` failures in a row (the guest is gone).
    ``concurrency`` > 1 uses that many threads; 1 runs in the caller.
    """
    if concurrency < 1:
        raise LearnError(f"concurrency must be >= 1, got {concurrency}")
    res = PhaseResult(phase.name)
    lock = threading.Lock()
    t0 = clock()
    state = {"streak": 0}

    def claim() -> bool:
        with lock:
            el = clock() - t0
            if el >= phase.max_s:
                res.stopped_by = res.stopped_by or "max_s"
            elif res.attempts >= phase.max_conns:
                res.stopped_by = res.stopped_by or "max_conns"
            elif el >= phase.min_s and res.ok >= phase.min_conns:
                res.stopped_by = res.stopped_by or "done"
            elif state["streak"] >= max_consecutive_failures:
                res.stopped_by = res.stopped_by or "failures"
            else:
                res.attempts += 1
                return True
            return False

    def loop() -> None:
        while claim():
            good = connect(port, phase.byte)
            with lock:
                if good:
                    res.ok += 1
                    state["streak"] = 0
                else:
                    res.failed += 1
                    state["streak"] += 1

    if concurrency == 1:
        loop()
    else:
        threads = [threading.Thread(target=loop, daemon=True) for _ in range(concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(phase.max_s + 60)
    res.seconds = clock() - t0
    return res


def drive_run(port: int, phases: Sequence[Phase], *, concurrency: int = 1,
              connect: Callable[[int, str], bool] = connect_once,
              clock: Callable[[], float] = time.monotonic, quit_tries: int = 5,
              sleep: Callable[[float], None] = time.sleep) -> List[PhaseResult]:
    """Every phase in order, then the quit connection (up to ``quit_tries``, 1 s apart).

    A phase in which no connection succeeded ends the phases (the guest is
    not answering); the quit connection is still tried.
    """
    out: List[PhaseResult] = []
    for ph in phases:
        r = drive_phase(port, ph, concurrency=concurrency, connect=connect, clock=clock)
        out.append(r)
        if r.attempts and not r.ok:
            # Nothing got through: the guest does not answer; skip to quit.
            r.stopped_by += " (no connection succeeded: later phases skipped)"
            break
    q = PhaseResult("quit")
    t0 = clock()
    for _ in range(quit_tries):
        q.attempts += 1
        if connect(port, PHASE_BYTES["quit"]):
            q.ok += 1
            break
        q.failed += 1
        sleep(1.0)
    q.seconds = clock() - t0
    out.append(q)
    return out


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (for the hostfwd rule)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------- parse

_LEARN_RE = re.compile(r"^LEARN (\w+) (\S+)(.*)$")
_KV_RE = re.compile(r"(\w+)=(\S+)")


@dataclass(frozen=True)
class Count:
    """Connections of one phase by worker, worker CPU, handshake CPU and RSS queue (-1: unknown)."""

    phase: str
    worker: int
    wcpu: int
    hcpu: int
    q: int
    n: int


@dataclass
class RunSummary:
    """learnd's summary of one run, as printed on the console."""

    label: str
    ready: bool = False
    info: Dict[str, str] = field(default_factory=dict)
    workers: List[Dict[str, int]] = field(default_factory=list)
    counts: List[Count] = field(default_factory=list)
    ftypes: Dict[str, Dict[int, int]] = field(default_factory=dict)
    done: Dict[str, str] = field(default_factory=dict)
    sets: Dict[str, str] = field(default_factory=dict)
    sysctls: Dict[str, str] = field(default_factory=dict)
    rc: Optional[int] = None
    notes: List[str] = field(default_factory=list)
    #: With learnd -K: (worker, foreign port, handshake CPU) per measured
    #: connection, in accept order per worker.
    conns: List[Tuple[int, int, int]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """learnd printed its DONE line."""
        return bool(self.done)

    @property
    def pins(self) -> List[int]:
        """CPU of each worker (rank order); -1 when not pinned."""
        return [w["cpu"] for w in self.workers]


def _ints(kv: Dict[str, str], keys: Sequence[str], line: str) -> Dict[str, int]:
    try:
        return {k: int(kv[k]) for k in keys}
    except (KeyError, ValueError):
        raise LearnError(f"malformed learnd line (need {', '.join(keys)}): {line}") from None


def parse_learn(lines: Iterable[str]) -> Dict[str, RunSummary]:
    """learnd / learn-rc sentinel lines -> run label -> :class:`RunSummary`. Pure.

    Lines (prefix :data:`rxl.guest.protocol.MARK`): ``LEARN BEGIN|READY|RUN|W|C|K|FT|
    DONE|SET|SYSCTL|END <label> key=value...`` (``K``: ``worker=<i>`` then
    ``<fport>:<hcpu>`` items, learnd -K). Other lines are ignored; a
    malformed LEARN line is kept in the run's ``notes`` (a console can
    interleave kernel messages), never raised.
    """
    runs: Dict[str, RunSummary] = {}
    for raw in lines:
        line = raw.rstrip("\r\n").replace("\r", "")
        if not line.startswith(MARK):
            continue
        m = _LEARN_RE.match(line[len(MARK):].strip())
        if not m:
            continue
        kind, label, rest = m.group(1), m.group(2), m.group(3).strip()
        r = runs.setdefault(label, RunSummary(label))
        kv = dict(_KV_RE.findall(rest))
        try:
            if kind == "READY":
                r.ready = True
            elif kind == "RUN":
                r.info = kv
            elif kind == "W":
                r.workers.append(_ints(kv, ("worker", "cpu", "accepts", "errors", "pinerr"), line))
            elif kind == "C":
                v = _ints(kv, ("worker", "wcpu", "hcpu", "q", "n"), line)
                ph = kv.get("phase", "")
                if ph not in ("w", "m", "q", "x"):
                    raise LearnError(f"malformed learnd line (phase): {line}")
                r.counts.append(Count(ph, v["worker"], v["wcpu"], v["hcpu"], v["q"], v["n"]))
            elif kind == "K":
                w = _ints(kv, ("worker",), line)["worker"]
                for item in rest.split()[1:]:
                    port, sep, hcpu = item.partition(":")
                    if not sep or not port.isdigit() or not hcpu.lstrip("-").isdigit():
                        raise LearnError(f"malformed learnd line (K item {item!r}): {line}")
                    r.conns.append((w, int(port), int(hcpu)))
            elif kind == "FT":
                v = _ints(kv, ("ftype", "n"), line)
                r.ftypes.setdefault(kv.get("phase", "?"), {})[v["ftype"]] = v["n"]
            elif kind == "DONE":
                r.done = kv
            elif kind == "SET":
                r.sets.update(re.findall(r"(\S+)=(\S+)", rest))
            elif kind == "SYSCTL":
                name, _, value = rest.partition(":")
                r.sysctls[name.strip()] = value.strip()
            elif kind == "END":
                rc = kv.get("rc")
                r.rc = int(rc) if rc and rc.lstrip("-").isdigit() else None
            elif kind != "BEGIN":
                r.notes.append(f"unknown learn line: {line}")
        except LearnError as exc:
            r.notes.append(str(exc))
    return runs


# ----------------------------------------------------------------- analyze

def socket_of(topo: topology.Topology, cpu: int) -> int:
    """Index of the top-level group (socket / NUMA node) holding ``cpu``.

    A root that itself shares a cache (one L3 for the machine, as
    :func:`rxl.decide.topology.regular` builds with one L3 group) or has no
    children is one socket: 0. Raises LearnError for a CPU not in ``topo``.
    """
    kids = topo.root.children
    if not topo.has_cpu(cpu):
        raise LearnError(f"CPU {cpu} is not in topology {topo.name}")
    if not kids or topo.root.level != topology.CG_SHARE_NONE:
        return 0
    for i, g in enumerate(kids):
        if cpu in g.cpus:
            return i
    raise LearnError(f"CPU {cpu} is not in topology {topo.name}")


def rxq_cpus(rxq: Mapping[str, int], dev: str = "em.0") -> List[int]:
    """Receive-queue CPUs of ``dev`` in queue order from ``dev.<dev>.iflib.rxqN.cpu`` sysctls."""
    pat = re.compile(rf"^dev\.{re.escape(dev)}\.iflib\.rxq(\d+)\.cpu$")
    found = sorted((int(m.group(1)), cpu) for name, cpu in rxq.items()
                   if (m := pat.match(name)))
    return [cpu for _, cpu in found]


@dataclass
class WorkerMetrics:
    """One worker in the measured phase. Shares are fractions of all connections."""

    worker: int
    cpu: int
    n: int
    share: float
    colocated: int
    same_socket: int
    predicted_share: Optional[float] = None


@dataclass
class RunMetrics:
    """Measured-phase results of one run, with the prediction of :mod:`rxl.decide.outcomes`.

    ``hcpu_source``: ``getsockopt`` (the series' SO_REUSEPORT_LB_CPU on the
    accepted socket), ``queue`` (derived: the 82574's queue of the flow id,
    mapped to that queue's CPU; used when the kernel has no getsockopt),
    ``single-queue`` (the NIC has one receive queue: its CPU, which with
    ``net.isr.dispatch=direct`` processes every handshake) or ``none``. ``rx``: handshake CPU -> connections. ``policy``: the
    :mod:`rxl.decide.outcomes` policy the configuration should behave as.
    ``max_dev``: largest |share - 1/W| relative to 1/W.
    """

    label: str
    config: str
    workers_set: str
    n: int
    hcpu_source: str
    rx: Dict[int, int]
    workers: List[WorkerMetrics]
    colocated: float
    same_socket: float
    starved: int
    max_dev: float
    policy: str
    predicted_colocated: Optional[float] = None
    predicted_same_socket: Optional[float] = None
    hash_colocated: Optional[float] = None
    queue_agreement: Optional[float] = None
    hw_hashed: Optional[float] = None
    learning: Optional[str] = None
    notes: List[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _split(topo: topology.Topology, pins: Sequence[int], rx: Mapping[int, int], r: int,
           policy: str) -> List[float]:
    """Fraction of receive CPU ``r``'s connections each worker gets under ``policy``.

    Mirrors :func:`rxl.decide.outcomes.outcome`: ``hash`` over all workers, ``deal``
    over ``r``'s range of the dealt map (every worker tagged with its CPU,
    supply from ``rx``), else over all workers.
    """
    n = len(pins)
    if policy == "deal":
        from rxl.decide import model
        d = model.deal(topo, [model.Tag(w) for w in pins], dict(rx))
        if d is not None and r in d.ranges:
            slots = d.slots_of(r)
            out = [0.0] * n
            for i in slots:
                out[i] += 1.0 / len(slots)
            return out
    return [1.0 / n] * n


def _outcome_shares(topo: topology.Topology, pins: Sequence[int], rx: Mapping[int, int],
                    policy: str) -> Tuple[List[float], float, float]:
    """(per-worker share, exact share, same-socket share) predicted for ``policy``.

    Per-worker and exact shares come from :func:`rxl.decide.outcomes.outcome` (what
    ``rxl outcomes`` prints); the same-socket share weighs each receive
    CPU's split by :func:`socket_of`.
    """
    o = outcomes.outcome(topo, list(pins), dict(rx), policy)
    exact = float(o.by_distance()["exact"])
    total = sum(v for v in rx.values() if v > 0)
    same = 0.0
    for r, cnt in sorted(rx.items()):
        if cnt <= 0:
            continue
        split = _split(topo, pins, rx, r, policy)
        same += cnt / total * sum(s for i, s in enumerate(split)
                                  if socket_of(topo, pins[i]) == socket_of(topo, r))
    return [float(o.share(i)) for i in range(len(pins))], exact, same


def analyze(run: RunSummary, topo: topology.Topology, rxq: Sequence[int], *,
            phase: str = "m") -> RunMetrics:
    """Measured-phase metrics of ``run`` on ``topo``; ``rxq``: CPU of each receive queue.

    Raises LearnError when the run has no workers or no connection in ``phase``.
    """
    config, wset = config_of(run.label)
    if not run.workers:
        raise LearnError(f"{run.label}: learnd printed no workers (run incomplete?)")
    pins = run.pins
    counts = [c for c in run.counts if c.phase == phase]
    n = sum(c.n for c in counts)
    if n == 0:
        raise LearnError(f"{run.label}: no connection in phase {phase!r}")
    known = sum(c.n for c in counts if c.hcpu >= 0)
    qknown = sum(c.n for c in counts if 0 <= c.q < len(rxq))
    source = ("getsockopt" if known == n else "queue" if qknown == n
              else "single-queue" if len(rxq) == 1 else "none")
    notes: List[str] = list(run.notes)
    if source == "none":
        notes.append(f"handshake CPU known for {known}/{n} connections by getsockopt, "
                     f"{qknown}/{n} by queue: co-location not measurable")

    def hcpu_of(c: Count) -> int:
        if source == "getsockopt":
            return c.hcpu
        if source == "queue":
            return rxq[c.q]
        if source == "single-queue":
            return rxq[0]
        return -1

    per_n = [0] * len(pins)
    coloc = [0] * len(pins)
    same = [0] * len(pins)
    rx: Dict[int, int] = {}
    agree = 0
    both = 0
    for c in counts:
        if not 0 <= c.worker < len(pins):
            notes.append(f"count for unknown worker {c.worker}")
            continue
        per_n[c.worker] += c.n
        h = hcpu_of(c)
        if h < 0:
            continue
        rx[h] = rx.get(h, 0) + c.n
        if h == c.wcpu:
            coloc[c.worker] += c.n
        if c.wcpu >= 0 and topo.has_cpu(h) and topo.has_cpu(c.wcpu) and \
                socket_of(topo, h) == socket_of(topo, c.wcpu):
            same[c.worker] += c.n
        if c.hcpu >= 0 and 0 <= c.q < len(rxq):
            both += c.n
            agree += c.n if rxq[c.q] == c.hcpu else 0
    nw = len(pins)
    workers = [WorkerMetrics(i, pins[i], per_n[i], per_n[i] / n, coloc[i], same[i])
               for i in range(nw)]
    learning = ",".join(f"{k}={v}" for k, v in sorted(run.sets.items())) or None
    policy = "deal" if config in ("learn-on", "learn-spread") else "hash"
    m = RunMetrics(
        label=run.label, config=config, workers_set=wset, n=n, hcpu_source=source, rx=rx,
        workers=workers,
        colocated=sum(coloc) / n, same_socket=sum(same) / n,
        starved=sum(1 for x in per_n if x == 0),
        max_dev=max(abs(x / n - 1 / nw) * nw for x in per_n),
        policy=policy, queue_agreement=(agree / both if both else None),
        learning=learning, notes=notes)
    ft = run.ftypes.get(phase, {})
    if ft:
        m.hw_hashed = sum(v for k, v in ft.items() if k >= 0 and k & HASHPROP) / sum(ft.values())
    if rx and all(p >= 0 and topo.has_cpu(p) for p in pins) and \
            all(topo.has_cpu(r) for r in rx):
        shares, exact, same_s = _outcome_shares(topo, pins, rx, policy)
        for w, s in zip(workers, shares):
            w.predicted_share = s
        m.predicted_colocated, m.predicted_same_socket = exact, same_s
        m.hash_colocated = _outcome_shares(topo, pins, rx, "hash")[1]
    return m


def binomial_sd(p: float, n: int) -> float:
    """Standard deviation of a share ``p`` measured over ``n`` connections."""
    return math.sqrt(max(p * (1 - p), 0.0) / n) if n > 0 else float("inf")


@dataclass(frozen=True)
class Target:
    """One of issue 6's targets, measured (not asserted): what, the value, met or not."""

    run: str
    what: str
    measured: str
    met: bool


def targets(m: RunMetrics) -> List[Target]:
    """Issue 6's targets that apply to run ``m``.

    * learn-on / learn-spread, one worker per receive CPU: co-location >= 96 %,
      0 starved;
    * learn-spread, one worker per CPU: same socket >= 96 %, exact share
      within 3 binomial SD of the deal's prediction, every worker within
      +-10 % of an equal share at >= 512 connections, 0 starved;
    * learn-off and pristine: co-location within 3 binomial SD of the hash's
      prediction ("behave as the hash").
    """
    out: List[Target] = []
    if m.config in ("learn-on", "learn-spread") and m.workers_set == "rxq":
        out.append(Target(m.label, "co-location >= 96%", f"{m.colocated:.1%}",
                          m.colocated >= 0.96))
        out.append(Target(m.label, "0 starved", str(m.starved), m.starved == 0))
    if m.config == "learn-spread" and m.workers_set == "all":
        out.append(Target(m.label, "same socket >= 96%", f"{m.same_socket:.1%}",
                          m.same_socket >= 0.96))
        if m.predicted_colocated is not None:
            sd = binomial_sd(m.predicted_colocated, m.n)
            out.append(Target(m.label, "exact share = deal prediction (3 SD)",
                              f"{m.colocated:.1%} vs {m.predicted_colocated:.1%} "
                              f"(SD {sd:.1%})",
                              abs(m.colocated - m.predicted_colocated) <= 3 * sd))
        out.append(Target(m.label, "every worker within +-10% of equal, n >= 512",
                          f"max {m.max_dev:.1%} at n={m.n}", m.max_dev <= 0.10 and m.n >= 512))
        out.append(Target(m.label, "0 starved", str(m.starved), m.starved == 0))
    if m.config in ("learn-off", "pristine") and m.hash_colocated is not None:
        sd = binomial_sd(m.hash_colocated, m.n)
        out.append(Target(m.label, "co-location as the hash (3 SD)",
                          f"{m.colocated:.1%} vs {m.hash_colocated:.1%} (SD {sd:.1%})",
                          abs(m.colocated - m.hash_colocated) <= 3 * sd))
    return out


# ------------------------------------------------------------------- table

def _pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def table(metrics: Sequence[RunMetrics], *, topo_name: str = "",
          rxq_by_run: Optional[Mapping[str, Sequence[int]]] = None) -> str:
    """The issue's table: per run, per worker share / predicted share / co-located / same socket."""
    lines: List[str] = []
    if topo_name:
        lines.append(f"guest topology: {topo_name}")
    order = {c: i for i, c in enumerate(CONFIGS)}
    for m in sorted(metrics, key=lambda x: (order.get(x.config, 9), x.workers_set)):
        rxq = (rxq_by_run or {}).get(m.label)
        head = (f"{m.label}: n={m.n} measured connections; handshake CPU by {m.hcpu_source}; "
                f"rx CPUs {dict(sorted(m.rx.items()))}"
                + (f"; rxq CPUs {list(rxq)}" if rxq is not None else "")
                + (f"; learning sysctl {m.learning}" if m.learning is not None else ""))
        lines.append(head)
        lines.append(f"  {'worker':>6} {'cpu':>4} {'conns':>6} {'share':>7} "
                     f"{'pred':>7} {'co-loc':>7} {'same-skt':>8}")
        for w in m.workers:
            lines.append(f"  {w.worker:>6} {w.cpu:>4} {w.n:>6} {_pct(w.share):>7} "
                         f"{_pct(w.predicted_share):>7} "
                         f"{_pct(w.colocated / w.n if w.n else None):>7} "
                         f"{_pct(w.same_socket / w.n if w.n else None):>8}")
        lines.append(f"  co-located {_pct(m.colocated)} ({m.policy} predicts "
                     f"{_pct(m.predicted_colocated)}"
                     + (f", hash {_pct(m.hash_colocated)}" if m.policy != "hash" else "")
                     + "); "
                     f"same socket {_pct(m.same_socket)} (predicts "
                     f"{_pct(m.predicted_same_socket)}); starved {m.starved}; "
                     f"max deviation from equal share {_pct(m.max_dev)}"
                     + (f"; queue/getsockopt agreement {_pct(m.queue_agreement)}"
                        if m.queue_agreement is not None else "")
                     + (f"; hardware-hashed {_pct(m.hw_hashed)}" if m.hw_hashed is not None
                        else ""))
        for t in targets(m):
            lines.append(f"  target {'MET ' if t.met else 'MISS'} {t.what}: {t.measured}")
        for note in m.notes:
            lines.append(f"  note: {note}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------- rc

#: sysctls the learn rc prints next to the topology (one-line values).
RC_SYSCTLS = ("kern.ident", "hw.ncpu", "vm.ndomains", "net.isr.dispatch",
              "net.isr.maxthreads", "net.isr.bindthreads")


def render_learn_rc(boot: BootPlan, *, learn_sysctl: Optional[str], learnd: str = "/rxl/learnd",
                    port: int = GUEST_PORT, nic: str = "em0", deadline_s: int = 600,
                    link_wait_s: int = 3, nic_reinit: int = 0,
                    guest_sysctls: Sequence[Tuple[str, str]] = (),
                    poweroff: bool = True, per_connection: bool = False) -> str:
    """Text of the guest's ``/etc/rc`` for one boot (template ``learn-rc.j2``).

    ``learn_sysctl``: commit 3's sysctl (dotted name); required when a run
    sets learning. ``deadline_s``: learnd's own deadline per run (``-d``);
    timeout(1) kills it 30 s later. ``nic_reinit``: after the address is
    set, take the NIC down and up this many times (a reset of the device;
    an experiment against QEMU 7.2's e1000e losing receive interrupts under
    MSI-X, docs/results/learning.md). ``guest_sysctls``: (name, value)
    pairs the rc sets before the runs (e.g. ``kern.ipc.soacceptqueue``).
    ``per_connection``: run learnd with -K (every measured connection's
    foreign port and handshake CPU, printed after the run).
    Raises LearnError on a missing sysctl
    name, a NIC name that is not ``<driver><unit>``, or words with whitespace.
    """
    import jinja2

    m = re.match(r"^([a-z]+)(\d+)$", nic)
    if not m:
        raise LearnError(f"NIC {nic!r} is not <driver><unit> (e.g. em0)")
    if any(r.learning is not None for r in boot.runs) and not learn_sysctl:
        raise LearnError(f"boot {boot.name}: a run sets learning but no learning sysctl "
                         "name is known (give --learn-sysctl)")
    for word in [boot.name, learnd, learn_sysctl or "x", *(r.label for r in boot.runs),
                 *(w for pair in guest_sysctls for w in pair)]:
        if not word or any(c.isspace() for c in word):
            raise LearnError(f"rc: {word!r} must be a non-empty word without whitespace")
    if deadline_s < 1 or not 1 <= port <= 65535:
        raise LearnError("rc: deadline_s >= 1 and a port in 1..65535 required")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).with_name("templates"))),
        undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env.get_template("learn-rc.j2").render(
        boot=boot.name, runs=boot.runs, mark=MARK, nic=nic,
        nic_sysctl=f"{m.group(1)}.{m.group(2)}", addr=GUEST_ADDR, prefix=GUEST_PREFIX,
        gateway=GUEST_GATEWAY, link_wait=link_wait_s, sysctls=RC_SYSCTLS,
        learn_sysctl=learn_sysctl or "", learnd=learnd, port=port, deadline=deadline_s,
        run_timeout=deadline_s + 30, nic_reinit=nic_reinit,
        guest_sysctls=list(guest_sysctls), poweroff=poweroff,
        learnd_extra=" -K" if per_connection else "")


def run_deadline_s(phases: Sequence[Phase], margin_s: float = 120.0) -> int:
    """learnd's deadline for one run: every phase at its longest plus ``margin_s``."""
    return int(math.ceil(sum(p.max_s for p in phases) + margin_s))
