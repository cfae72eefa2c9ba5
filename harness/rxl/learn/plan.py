"""Learning at accept(2) on the guest's RSS NIC: what a learning run does.

A learning run proves commits 3 and 4 ("inpcb: Add TCP_REUSPORT_LB_CPU to deal
lbgroup members by CPU" counts, "tcp: Learn lbgroup worker CPUs at accept(2)"
captures) on a NIC that delivers real RSS hashes: the own QEMU guest in
one of its shapes (rxl.guest.targets), by default the two-socket NUMA server
whose igb (82576, igb(4) on iflib) has eight receive queues on the interrupt
CPUs of node 0; QEMU 7.2's e1000e (82574L, em(4), two queues) is the
fallback.  The guest runs ``learnd`` (harness/rxl/learn/learnd.c), an
unmodified SO_REUSEPORT_LB server, one pinned worker per CPU or per
receive-queue CPU; the host opens connections to it through QEMU user
networking (``hostfwd`` on 127.0.0.1), so every SYN enters the guest on the
NIC under test (``igb0``, ``em0``) with a hardware hash.

This module is the plan (pure):

* :func:`plan_phases` - warm-up and measured phases, each longer than the
  learning's two 10 s windows (seed 000, "Learning at accept(2)": "window
  older than 10 s: roll prev = cur"; "supply is learned in two ten-second
  windows, so runs shorter than that under-converge");
* :func:`plan_boots` - which kernel / tunable / sysctl each run uses;
* the tree lookups, learnd's compiler argv and the guest's rc.

The connection driver is :mod:`rxl.learn.drive`, learnd's summary lines are
parsed by :mod:`rxl.learn.results`, and :mod:`rxl.learn.metrics` analyzes
and tabulates them beside what :mod:`rxl.decide.outcomes` predicts.

The booting itself (staging a root, QEMU, the console) is in
:mod:`rxl.learn.cli`, which reuses the own guest's modules.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import jinja2

from rxl.errors import DataError
from rxl.guest.protocol import MARK
from rxl.tree import world as tree_world

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
#: learnd.c's KEEP_BYTE: a measured connection kept open for requests.
KEEP_BYTE = "M"
#: learnd.c's SNAP_BYTE: a connection asking learnd for a counter snapshot.
SNAP_BYTE = "s"
#: M_HASHTYPE_HASHPROP (sys/sys/mbuf.h): set for every hash a NIC computed.
HASHPROP = 0x80

#: Configurations of a learning run, in table order.  ``tagged``: the patched
#: kernel with learning off and every pinned worker's listener tagged with its
#: CPU (learnd -T): the deal with explicit tags, dealt from the tags alone
#: (tcp.4: "each CPU named by a tag counts as receiving an equal share").
CONFIGS = ("pristine", "learn-off", "tagged", "learn-on", "learn-spread")
#: The value each configuration's runs give the learning sysctl (learn-rc's SET
#: line says it), None: left alone (the pristine kernel has none).
LEARNING = {"pristine": None, "learn-off": 0, "tagged": 0, "learn-on": 1, "learn-spread": 1}
#: The configurations of a run that names none (the learning table's: all but tagged).
DEFAULT_CONFIGS = ("pristine", "learn-off", "learn-on", "learn-spread")
#: Configurations whose listeners are tagged (learnd -T).
TAGGED_CONFIGS = ("tagged",)
#: Worker sets: one pinned worker per receive-queue CPU, or per CPU, or as
#: many workers as receive queues left unpinned (``free``: never captured,
#: the untagged path of accept(2) that rxl kcount measures).
WORKER_SETS = ("rxq", "all", "free")
#: The worker sets of a run that names none (the learning table's).
DEFAULT_WORKER_SETS = ("rxq", "all")
#: Loader tunable of commit 1 for the guest's NIC under test (CTLFLAG_RDTUN in
#: iflib.c), by its driver: ``dev.igb.0.iflib.core_spread`` (:func:`spread_tunable`).
SPREAD_TUNABLE = "dev.{driver}.0.iflib.core_spread"
#: The driver of the default guest's NIC (rxl.guest.targets.DEFAULT_SHAPE: igb).
DEFAULT_DRIVER = "igb"
#: Its value for learn-spread: 1, the only spreading value of the 15 series
#: (model.SPREAD_ON): the L3 groups of a domain take turns, so the default
#: guest's eight queues alternate its node 0's two L3 groups (0, 8, 2, 10, ...:
#: docs/results/guest-numa.md); on qemu-2s (one L3 per socket) the queues
#: stay on socket 0, CPUs 0 and 2 (`rxl spread --topology qemu-2s --intr-cpus
#: 0-7 --queues 2`).  The 14 series' 2, which crossed sockets on purpose, is gone.
SPREAD_VALUE = "1"
#: Interval between two copies of the groups view learnd takes (-G), ms:
#: half a learning window, so every window is seen at least once.
GROUPS_MS = WINDOW_S * 1000 // 2


class LearnError(DataError):
    """Bad input to the learning harness (one-line message)."""


@dataclass(frozen=True)
class Requests:
    """The request phase of ``rxl learn --requests`` (rxl.learn.drive.drive_requests):
    ``connections`` kept open, ``requests`` per connection, ``idle_s`` seconds
    between snapshots 0 and 1 (the background of the counters)."""

    connections: int
    requests: int
    idle_s: float = 1.0

    def check(self) -> "Requests":
        """Self; LearnError for no connection, no request or a negative idle time."""
        if self.connections < 1 or self.requests < 1:
            raise LearnError(f"requests: {self.connections} connections x {self.requests} "
                             "requests: both must be >= 1")
        if not self.idle_s >= 0:
            raise LearnError(f"requests: idle window {self.idle_s:g} s must be >= 0")
        return self

    @property
    def total(self) -> int:
        return self.connections * self.requests


#: Kept connections learnd takes (learnd.c MAXFD: a worker keeps fds below
#: 4096; the margin covers its listener, kqueue and stdio).
MAX_KEPT = 4000
#: learnd's listen(2) backlog (learnd.c, ``listen(fd, 1024)``): the most
#: connections the host should have in flight to one listener at once
#: (``--concurrency``); more wait out SYN retransmits in the guest.
LISTEN_BACKLOG = 1024
#: The slowest request rate the deadline allows for, requests per second of
#: the whole guest (a guess for TCG with QEMU's user networking, not a
#: measurement: a request is one slirp round trip; raise --deadline if slower).
MIN_REQUEST_RATE = 50.0


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
    that many connections succeeded (the targets hold "at >= 512 connections").
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
    rep: int = 0

    @property
    def label(self) -> str:
        """``<config>.<workers>``, with ``.r<rep>`` for a repetition (rep >= 1)."""
        return f"{self.config}.{self.workers}" + (f".r{self.rep}" if self.rep else "")

    @property
    def tagged(self) -> bool:
        """learnd -T: tag every listener with its worker's CPU."""
        return self.config in TAGGED_CONFIGS


@dataclass(frozen=True)
class BootPlan:
    """One guest boot: a kernel (``patched``/``pristine``), loader tunables, runs."""

    name: str
    kernel: str
    tunables: Tuple[Tuple[str, str], ...]
    runs: Tuple[RunPlan, ...]


def spread_tunable(driver: str = DEFAULT_DRIVER) -> str:
    """:data:`SPREAD_TUNABLE` of the NIC whose FreeBSD driver is ``driver``
    (``igb`` -> ``dev.igb.0.iflib.core_spread``)."""
    return SPREAD_TUNABLE.format(driver=driver)


def plan_boots(configs: Sequence[str] = DEFAULT_CONFIGS,
               worker_sets: Sequence[str] = DEFAULT_WORKER_SETS, *,
               driver: str = DEFAULT_DRIVER, repetitions: int = 1) -> List[BootPlan]:
    """The boots that cover ``configs`` x ``worker_sets``. Pure.

    learn-off and learn-on share one boot (the sysctl is set at run time,
    off first so nothing learned leaks into the control); learn-spread needs
    its own boot (``core_spread`` is a loader tunable of the NIC's
    ``driver``); pristine boots the base kernel. ``tagged`` runs in the
    patched boot, after learn-off and before learn-on, learning off.
    ``repetitions`` > 1 runs each run that many times in a row, labelled
    ``.r1``, ``.r2``, ... (each a new learnd, so a new lbgroup). Raises
    LearnError for unknown names, empty selections or repetitions < 1.
    """
    if repetitions < 1:
        raise LearnError(f"repetitions must be >= 1, got {repetitions}")
    bad = [c for c in configs if c not in CONFIGS] + [w for w in worker_sets
                                                      if w not in WORKER_SETS]
    if bad:
        raise LearnError(f"unknown configuration or worker set: {', '.join(bad)} "
                         f"(configs: {', '.join(CONFIGS)}; workers: {', '.join(WORKER_SETS)})")
    if not configs or not worker_sets:
        raise LearnError("no configuration or no worker set selected")
    ws = [w for w in WORKER_SETS if w in worker_sets]
    boots: List[BootPlan] = []
    reps = [0] if repetitions == 1 else list(range(1, repetitions + 1))
    main_runs = [RunPlan(c, w, LEARNING[c], k)
                 for c in ("learn-off", "tagged", "learn-on") if c in configs for w in ws
                 for k in reps]
    if main_runs:
        boots.append(BootPlan("patched", "patched", (), tuple(main_runs)))
    if "learn-spread" in configs:
        boots.append(BootPlan("spread", "patched", ((spread_tunable(driver), SPREAD_VALUE),),
                              tuple(RunPlan("learn-spread", w, LEARNING["learn-spread"], k)
                                    for w in reversed(ws)
                                    for k in reps)))
    if "pristine" in configs:
        boots.append(BootPlan("pristine", "pristine", (),
                              tuple(RunPlan("pristine", w, LEARNING["pristine"], k)
                                    for w in ws
                                    for k in reps)))
    return boots


_LABEL_RE = re.compile(r"^([a-z-]+)\.([a-z]+)(?:\.r([1-9]\d{0,3}))?$")


def config_of(label: str) -> Tuple[str, str]:
    """``"learn-on.all"`` (or a repetition, ``"learn-on.all.r2"``) ->
    ``("learn-on", "all")``. Raises LearnError otherwise."""
    m = _LABEL_RE.match(label)
    if not m or m.group(1) not in CONFIGS or m.group(2) not in WORKER_SETS:
        raise LearnError(f"run label {label!r} is not <config>.<workers>[.r<k>]")
    return m.group(1), m.group(2)


def repetition_of(label: str) -> int:
    """The ``k`` of a label ``<config>.<workers>.r<k>``, 0 without one.
    Raises LearnError for a label :func:`config_of` refuses."""
    config_of(label)
    m = _LABEL_RE.match(label)
    return int(m.group(3)) if m.group(3) else 0


# ------------------------------------------------------------ tree lookups

#: The series' socket option learnd uses (commit 3, sys/netinet/tcp.h, level
#: IPPROTO_TCP): on a listener its tag (read back at the end), on an accepted
#: socket the CPU that completed its handshake; with the -D name learnd.c takes.
SOCKET_OPTIONS = {"TCP_REUSPORT_LB_CPU": "LEARND_LB_CPU_OPT"}
#: The header that defines :data:`SOCKET_OPTIONS`.
OPTION_HEADER = "sys/netinet/tcp.h"
_SYSCTL_RE = re.compile(
    r"SYSCTL_(?:INT|UINT|BOOL|U8|U16|U32|PROC)\s*\(\s*_net_inet(_tcp_reuseport_lb|_tcp|_ip)?"
    r"\s*,\s*OID_AUTO\s*,\s*(\w*learn\w*)\s*,")
_SYSCTL_PARENTS = {None: "net.inet", "_tcp": "net.inet.tcp", "_ip": "net.inet.ip",
                   "_tcp_reuseport_lb": "net.inet.tcp.reuseport_lb"}
#: Files of the series that may declare the learning sysctl (commit 4
#: declares it in tcp_usrreq.c).
SYSCTL_FILES = ("sys/netinet/tcp_usrreq.c", "sys/netinet/in_pcb.c",
                "sys/netinet/in_pcblb.c", "sys/netinet/tcp_syncache.c")


def socket_option(src: str, name: str) -> Optional[int]:
    """Value of ``#define <name>`` in ``<src>/`` :data:`OPTION_HEADER`, or None (no commit 3)."""
    p = Path(src) / OPTION_HEADER
    if not p.is_file():
        return None
    m = re.search(rf"^#define\s+{re.escape(name)}\s+(0x[0-9a-fA-F]+|\d+)\b",
                  p.read_text(errors="replace"), re.M)
    return int(m.group(1), 0) if m else None


def socket_options(src: str, given: Mapping[str, Optional[str]]) -> Dict[str, Optional[int]]:
    """Each of :data:`SOCKET_OPTIONS`: the value given (an int, or a string in
    C syntax: ``0x1031`` or ``4145``) or else the tree's.  Raises LearnError naming the
    option for a given value that is not an integer."""
    out: Dict[str, Optional[int]] = {}
    for name in SOCKET_OPTIONS:
        v = given.get(name)
        try:
            out[name] = (v if isinstance(v, int) else int(v, 0) if v is not None
                         else socket_option(src, name))
        except ValueError:
            raise LearnError(f"{name} {v!r}: not an integer (e.g. 1027)") from None
    return out


def learn_sysctl_name(src: str) -> Optional[str]:
    """Dotted name of commit 4's learning sysctl found in the tree, or None.

    Recognises ``SYSCTL_<INT|UINT|BOOL|U8|U16|U32|PROC>(_net_inet[_tcp_reuseport_lb|_tcp|_ip],
    OID_AUTO, <name with "learn">, ...)`` in :data:`SYSCTL_FILES` (commit 4
    declares ``net.inet.tcp.reuseport_lb.learn`` with SYSCTL_PROC in
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
                   tree: Optional[str] = None) -> List[str]:
    """argv cross-compiling learnd for the guest, statically, against the world sysroot,
    with ``tree``'s compiler and triple (:func:`rxl.tree.world.compiler_for`).

    ``lb_cpu_opt``: the series' TCP_REUSPORT_LB_CPU, for a sysroot whose
    headers predate it (None: learnd reports the tag and the handshake CPU
    as unknown).
    """
    clang, triple = tree_world.compiler_for(tree)
    argv = [clang, f"--target={triple}", f"--sysroot={sysroot}", "-fuse-ld=lld",
            "-O2", "-Wall", "-static"]
    if lb_cpu_opt is not None:
        argv.append(f"-DLEARND_LB_CPU_OPT={lb_cpu_opt:#x}")
    return argv + ["-o", output, source]


# --------------------------------------------------------------------- rc

#: sysctls the learn rc prints next to the topology (one-line values).
RC_SYSCTLS = ("kern.ident", "hw.ncpu", "vm.ndomains", "net.isr.dispatch",
              "net.isr.maxthreads", "net.isr.bindthreads")


def render_learn_rc(boot: BootPlan, *, learn_sysctl: Optional[str], learnd: str = "/rxl/learnd",
                    port: int = GUEST_PORT, nic: str = f"{DEFAULT_DRIVER}0", deadline_s: int = 600,
                    link_wait_s: int = 3, nic_reinit: int = 0,
                    guest_sysctls: Sequence[Tuple[str, str]] = (),
                    poweroff: bool = True, per_connection: bool = False,
                    groups_ms: int = GROUPS_MS) -> str:
    """Text of the guest's ``/etc/rc`` for one boot (template ``learn-rc.j2``).

    ``learn_sysctl``: commit 4's sysctl (dotted name); required when a run
    sets learning. ``deadline_s``: learnd's own deadline per run (``-d``);
    timeout(1) kills it 30 s later. ``nic_reinit``: after the address is
    set, take the NIC down and up this many times (a reset of the device;
    an experiment against QEMU 7.2's e1000e losing receive interrupts under
    MSI-X, docs/results/learning.md). ``guest_sysctls``: (name, value)
    pairs the rc sets before the runs (e.g. ``kern.ipc.soacceptqueue``).
    ``per_connection``: run learnd with -K (every measured connection's
    foreign port and handshake CPU, printed after the run). ``groups_ms``:
    learnd -G, copies of the groups view every that many ms (0: none).
    A run that sets learning sets it explicitly and puts back the value it
    found afterwards (learning is opt-in, default 0).
    ``nic``: the NIC under test (``igb0``; ``em0`` on the e1000e shapes).
    Raises LearnError on a missing sysctl
    name, a NIC name that is not ``<driver><unit>``, or words with whitespace.
    """
    m = re.match(r"^([a-z]+)(\d+)$", nic)
    if not m:
        raise LearnError(f"NIC {nic!r} is not <driver><unit> (e.g. igb0)")
    if any(r.learning is not None for r in boot.runs) and not learn_sysctl:
        raise LearnError(f"boot {boot.name}: a run sets learning but no learning sysctl "
                         "name is known (give --learn-sysctl)")
    for word in [boot.name, learnd, learn_sysctl or "x", *(r.label for r in boot.runs),
                 *(w for pair in guest_sysctls for w in pair)]:
        if not word or any(c.isspace() for c in word):
            raise LearnError(f"rc: {word!r} must be a non-empty word without whitespace")
    if deadline_s < 1 or not 1 <= port <= 65535 or not (groups_ms == 0 or groups_ms >= 100):
        raise LearnError("rc: deadline_s >= 1, a port in 1..65535 and groups_ms 0 or "
                         ">= 100 required")
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
        learnd_extra=(" -K" if per_connection else "")
        + (f" -G {groups_ms}" if groups_ms else ""))


def run_deadline_s(phases: Sequence[Phase], margin_s: float = 120.0,
                   requests: Optional[Requests] = None) -> int:
    """learnd's deadline for one run: every phase at its longest plus ``margin_s``,
    plus for ``requests`` its idle window and its requests at
    :data:`MIN_REQUEST_RATE`."""
    extra = requests.idle_s + requests.total / MIN_REQUEST_RATE if requests else 0.0
    return int(math.ceil(sum(p.max_s for p in phases) + margin_s + extra))
