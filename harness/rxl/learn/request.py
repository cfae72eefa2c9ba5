"""``rxl learn``'s options as given (:class:`LearnRequest`) and their checks.

:func:`check` refuses bad option values before anything is built or checked
out, each as :class:`LearnUsage` (a usage error, exit 2, naming the option);
:class:`LearnFailed` is every other refusal or failure of ``rxl learn``.
"""

from __future__ import annotations

import dataclasses
import resource
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

from rxl.cli.options import SAFE_WORD, SMP, SYSCTL_NAME, check_guest, check_out_dir
from rxl.decide import cpugroup, topology
from rxl.decide.cpugroup import Topology
from rxl.errors import BadOption, RxlError, show
from rxl.guest import qemu
from rxl.guest.targets import Shape
from rxl.learn import plan
from rxl.tree import build as tree_build
from rxl.verify import ownguest


#: ULE's idle spin (sys/kern/sched_ule.c, ``sched_idlespins``, a RWTUN sysctl):
#: the request phase sets it to 0 unless --guest-sysctl names it, so that an
#: idle CPU halts at once and a remote wakeup to it takes an IPI
#: (docs/results/wakeups.md, "Decision").
IDLESPINS = "kern.sched.idlespins"


#: Files the driver keeps for other uses than the kept connections.
FD_MARGIN = 64
#: Longest --warmup or --measured, seconds: a bound of the harness, not of
#: learnd.c.  A phase is 10 s learning windows (rxl.learn.plan.WINDOW_S); an
#: hour is 360 of them, and a measured phase may run 4 times its length
#: (plan_phases' max_factor) in every run of a boot that runs each
#: configuration, worker set and repetition in turn.
MAX_PHASE_S = 3600
#: Most runs of each configuration in one boot (--repetitions), as bench
#: accept bounds its own (rxl.bench.accept.MAX_REPETITIONS): 1000 runs of the
#: default phases (25 s, then 30-120 s) take 15 h or more per configuration,
#: and a dry run prints every run.
MAX_REPETITIONS = 1000
#: Largest --min-conns: the measured phase stops at plan.plan_phases'
#: ``max_conns`` attempts (20000), so a larger minimum can never be met.
MAX_MIN_CONNS = 20000
#: Longest deadline learnd takes (-d), s: learnd.c main's ``num(optarg, 1,
#: 86400, "deadline_s")``, which exits 2 in the guest for more, after the
#: builds and the boot.
MAX_DEADLINE_S = 86400
#: Longest interval between copies of the groups view learnd takes (-G), s:
#: learnd.c's ``num(optarg, 100, 3600000, ...)`` in ms.
MAX_GROUPS_EVERY_S = 3600


def _open_files() -> int:
    """This process's soft limit of open files (RLIMIT_NOFILE; a large
    number when unlimited)."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if soft != resource.RLIM_INFINITY else 1 << 30


class LearnFailed(RxlError):
    """A refused option or a failed step of ``rxl learn``; the message is one line."""


class LearnUsage(LearnFailed):
    """A bad option value (the message names the option): a usage error, exit 2,
    where a :class:`LearnFailed` of a step is exit 1 (rxl.decide.checks)."""


@dataclass
class LearnRequest:
    """The options of ``rxl learn`` as given (see its ``--help`` for each).

    Seconds: ``warmup``, ``measured``, ``deadline_s``; ``memory_mib``: guest
    MiB (None: the shape's); ``tunables`` / ``guest_sysctls``:
    ``NAME=VALUE`` strings; ``smp``: ``(sockets, cores, threads)`` or its text
    ``SOCKETS,CORES,THREADS`` in place of the shape's CPUs (None or "": the
    shape's); ``topo_spec``: a Topology or its spec (rxl.decide.topology.load);
    ``lb_cpu_opt``: an int or its C text; ``shape``: the guest (None: the default
    one, rxl.guest.targets.DEFAULT_SHAPE, the NUMA server with its igb);
    ``out`` None: a new directory under ``$RXL_WORK/logs``.  ``requests`` > 0:
    the request phase (``--requests``: that many requests on each of
    ``connections`` kept connections, ``idle_s`` s of background first) in
    place of the measured phase of one-shot connections; ``repetitions``:
    every run that many times (labels ``.r1`` ...).
    """

    src: str
    objdir: str
    out: Optional[str]
    guest_dir: str
    kernel: Optional[str]
    pristine_kernel: Optional[str]
    configs: Sequence[str]
    worker_sets: Sequence[str]
    warmup: float
    measured: float
    min_conns: int
    concurrency: int
    learn_sysctl: Optional[str]
    topo_spec: Union[Topology, str, None]
    memory_mib: Optional[int]
    logs: Sequence[str]
    client_ports: str
    lb_cpu_opt: Union[int, str, None]
    groups_every: float
    tunables: Sequence[str]
    deadline_s: Optional[int]
    tcg_single_thread: bool
    smp: Union[Tuple[int, int, int], str, None]
    guest_sysctls: Sequence[str]
    nic_reinit: int
    qemu_args: Sequence[str]
    per_connection: bool
    pcap: bool
    dry_run: bool
    shape: Optional[Shape] = None
    requests: int = 0
    connections: int = 512
    idle_s: float = 1.0
    repetitions: int = 1


@dataclass
class Checked:
    """The request, checked: phases, boots, guest sysctls, extra loader
    tunables and the guest's shape (with ``--smp`` and ``--memory`` applied)."""

    phases: List[plan.Phase]
    boots: List[plan.BootPlan]
    gsys: List[Tuple[str, str]]
    extra_tun: Dict[str, str]
    shape: Shape
    requests: Optional[plan.Requests] = None

    @property
    def nic(self) -> str:
        """The NIC under test as FreeBSD names it: ``igb0``, ``em0``."""
        return f"{self.shape.driver}0"


def name_values(values: Sequence[str], option: str, *,
                harness_sets: Optional[Dict[str, str]] = None) -> List[Tuple[str, str]]:
    """``NAME=VALUE`` strings -> pairs; LearnUsage naming ``option`` for one
    without ``=``, an empty side, or a space, a NAME that is no sysctl or
    tunable name (rxl.cli.options.SYSCTL_NAME) or a VALUE that is not one
    shell word (rxl.cli.options.SAFE_WORD): both go unquoted into the
    guest's rc script and loader.conf, where ``a=1;reboot`` would run.
    A NAME given twice is refused naming both values (loader.conf and the
    rc take the last: the first would be dropped without a word), and so is
    a NAME of ``harness_sets`` (name -> the values the command gives it
    itself, per boot: ``dev.igb.0.iflib.core_spread``), naming both: the
    command's value would replace the given one on some boots, or the given
    one would hold on boots that must not have it. The one parser of every
    ``--tunable`` (rxl learn, rxl kcount setsockopt) and ``--guest-sysctl``."""
    out: List[Tuple[str, str]] = []
    first: Dict[str, str] = {}
    for t in values:
        name, sep, value = t.partition("=")
        if not sep or not name or not value or any(c.isspace() for c in t):
            raise LearnUsage(f"{option} {t!r}: expected NAME=VALUE without spaces")
        if not SYSCTL_NAME.fullmatch(name):
            raise LearnUsage(f"{option} {t!r}: {name!r} is no sysctl name (dotted words of "
                             "letters, digits, '_', '-', '%')")
        if not SAFE_WORD.fullmatch(value):
            raise LearnUsage(f"{option} {t!r}: the value {value!r} is not one plain word "
                             "(letters, digits and _.,:/+@%=-: it goes unquoted into the "
                             "guest's rc)")
        if name in first:
            raise LearnUsage(f"{option} {t!r}: {name} given twice ({name}={first[name]}, "
                             f"{name}={value}): give each NAME once")
        if harness_sets and name in harness_sets:
            raise LearnUsage(f"{option} {t!r}: {name} is set by the harness itself, per "
                             f"boot ({harness_sets[name]}); leave it out")
        first[name] = value
        out.append((name, value))
    return out


def guest_shape(req: LearnRequest) -> Shape:
    """The guest of the run: ``req.shape`` (default: the NUMA server), its CPUs
    replaced by ``--smp`` (one die, a NUMA node per socket) and its memory by
    ``--memory``. Raises BadOption naming ``--smp`` for one that is not three
    integers of at least 1 (rxl.cli.options.SMP, the option's own type)."""
    shape = req.shape or Shape()
    if req.smp:
        smp = req.smp
        if isinstance(smp, str):
            try:
                smp = SMP.parse(smp)
            except ValueError as exc:
                raise BadOption(str(exc), "--smp") from None
        sockets, cores, threads = smp
        shape = dataclasses.replace(shape, sockets=sockets, dies=1, cores=cores,
                                    threads=threads, numa_nodes=sockets)
    if req.memory_mib is not None:
        shape = dataclasses.replace(shape, memory_mib=req.memory_mib)
    return shape


def check_topology_holds(topo: Topology, shape: Shape) -> None:
    """Refuse a ``--topology`` for the predictions that lacks a CPU of the guest
    (``shape``: its vCPUs 0..N-1): the runs may name any of them (``--workers
    all`` pins a worker to each, iflib puts receive queues on any), and a CPU
    outside the topology has no distance, so the table would guess.  BadOption
    naming ``--topology``."""
    lack = [c for c in range(shape.vcpus) if not topo.has_cpu(c)]
    if lack:
        more = f" and {len(lack) - 1} more" if len(lack) > 1 else ""
        raise BadOption(f"{topo.name} has no CPU {lack[0]}{more} of the guest's "
                        f"{shape.vcpus} vCPUs (0-{shape.vcpus - 1}), which the runs may "
                        "name (--workers all pins one to each; receive queues go on any): "
                        "give the guest's topology, or leave --topology out for its own",
                        "--topology")


def check_deadline(deadline_s: int, phases: Sequence[plan.Phase],
                   requests: Optional[plan.Requests]) -> None:
    """Refuse a ``--deadline`` (learnd's, per run, in seconds) shorter than the
    run's phases at their shortest (``--warmup`` + ``--measured``, or with
    ``--requests`` the warm-up and ``--idle``): learnd would end every run
    before its measured part.  LearnUsage naming ``--deadline`` and the
    options of the phases."""
    parts = [(f"--{'warmup' if p.name == 'warmup' else 'measured'}", p.min_s) for p in phases]
    if requests is not None:
        parts.append(("--idle", requests.idle_s))
    least = sum(s for _, s in parts)
    if deadline_s < least:
        raise LearnUsage(
            f"--deadline {deadline_s}: shorter than the phases of a run at their shortest, "
            + " + ".join(f"{o} {s:g} s" for o, s in parts) + f" = {least:g} s: learnd would "
            "end every run before it is measured (leave --deadline out for every phase at "
            f"its longest + 120 s, {plan.run_deadline_s(phases, requests=requests)} s)")


def check(req: LearnRequest) -> Checked:
    """Refuse, before any build or checkout, what the boots would refuse later,
    also (not in a dry run, nor with ``--log``) a shape the installed QEMU cannot
    run (rxl.verify.ownguest.check_qemu).  A given kernel is checked as rxl run
    checks it: a kernel file of --src's release (rxl.tree.build:
    check_kernel_release), and --pristine-kernel not --kernel (check_kernel_pair).

    Bounds: --warmup and --measured over plan.MIN_PHASE_S and at most
    :data:`MAX_PHASE_S` seconds; --min-conns 0..:data:`MAX_MIN_CONNS`;
    --repetitions 1..:data:`MAX_REPETITIONS` (each constant says its source).
    Every refusal is :class:`LearnUsage` naming the option (exit 2), but the
    QEMU's, a :class:`LearnFailed` (exit 1)."""
    for option, s in (("--warmup", req.warmup), ("--measured", req.measured)):
        if not s > plan.MIN_PHASE_S:
            raise LearnUsage(f"{option} {s:g}: a phase must be longer than the two "
                             f"{plan.WINDOW_S} s learning windows ({plan.MIN_PHASE_S} s)")
        if s > MAX_PHASE_S:
            raise LearnUsage(f"{option} {s:g}: a phase is at most {MAX_PHASE_S} s "
                             f"({MAX_PHASE_S // plan.WINDOW_S} learning windows)")
    if not 0 <= req.min_conns <= MAX_MIN_CONNS:
        raise LearnUsage(f"--min-conns must be 0..{MAX_MIN_CONNS} (the measured phase "
                         f"stops at {MAX_MIN_CONNS} connections), got {show(req.min_conns, 24)}")
    if not 1 <= req.repetitions <= MAX_REPETITIONS:
        raise LearnUsage(f"--repetitions must be 1..{MAX_REPETITIONS}, got "
                         f"{show(req.repetitions, 24)}")
    if req.requests < 0:
        raise LearnUsage(f"--requests must be >= 0 (0: no request phase), got {req.requests}")
    if req.requests and req.connections < 1:
        raise LearnUsage(f"--connections must be >= 1, got {req.connections}")
    if req.requests and req.connections > plan.MAX_KEPT:
        raise LearnUsage(f"--connections {req.connections}: learnd keeps at most "
                         f"{plan.MAX_KEPT}")
    if req.requests and req.connections + FD_MARGIN > _open_files():
        raise LearnUsage(f"--connections {req.connections}: this process may open "
                         f"{_open_files()} files (ulimit -n), {FD_MARGIN} of them for "
                         "other uses")
    if req.requests and not req.idle_s >= 0:
        raise LearnUsage(f"--idle must be >= 0 s, got {req.idle_s:g}")
    requests = plan.Requests(req.connections, req.requests, req.idle_s).check() \
        if req.requests else None
    try:
        phases = plan.plan_phases(req.warmup, req.measured, min_measured=req.min_conns)
        if requests is not None:  # the request phase is the measured one
            phases = [p for p in phases if p.name == "warmup"]
        shape = guest_shape(req)
        boots = plan.plan_boots(req.configs or plan.DEFAULT_CONFIGS,
                                req.worker_sets or plan.DEFAULT_WORKER_SETS,
                                driver=shape.driver, repetitions=req.repetitions)
    except plan.LearnError as exc:
        raise LearnUsage(str(exc)) from None
    topo = req.topo_spec or None
    if isinstance(topo, str):
        try:
            topo = topology.load(topo)
        except cpugroup.TopologyError as exc:
            raise BadOption(str(exc), "--topology") from None
    if topo is not None and not req.logs:  # a saved log's CPUs: rxl.learn.metrics
        check_topology_holds(topo, shape)
    if req.concurrency < 1:
        raise LearnUsage(f"--concurrency must be >= 1, got {req.concurrency}")
    most = min(plan.LISTEN_BACKLOG, _open_files() - FD_MARGIN)
    if req.concurrency > most:
        raise BadOption(
            f"{req.concurrency} threads, each with a connection in flight: at most {most} ("
            + (f"learnd's listen(2) backlog, {plan.LISTEN_BACKLOG}: more would wait in "
               "SYN retries and time the queue, not the deal" if most == plan.LISTEN_BACKLOG
               else f"this process may open {_open_files()} files (ulimit -n), {FD_MARGIN} "
                    "of them for other uses") + ")", "--concurrency")
    if req.groups_every != 0 and not 0.1 <= req.groups_every <= MAX_GROUPS_EVERY_S:
        raise LearnUsage(f"--groups-every must be 0 or 0.1..{MAX_GROUPS_EVERY_S} s (learnd "
                         f"-G), got {req.groups_every:g}")
    gsys = name_values(req.guest_sysctls, "--guest-sysctl")
    if requests is not None and not any(n == IDLESPINS for n, _ in gsys):
        gsys.insert(0, (IDLESPINS, "0"))
    spread = plan.spread_tunable(shape.driver)  # commit 1's, per boot: never --tunable's
    extra_tun = dict(name_values(req.tunables, "--tunable", harness_sets={
        spread: f"{plan.SPREAD_VALUE} on the spread boot of --config learn-spread, unset on "
                "the others: --config chooses the boots"}))
    cfg = shape.config(req.guest_dir)
    try:
        # The same checks the boot makes, before any build or checkout.
        qemu.validate(cfg)
    except qemu.QemuMemoryError as exc:
        raise BadOption(exc.why, "--memory") from None
    except qemu.QemuConfigError as exc:
        raise LearnUsage(f"guest ({shape.vcpus} vCPUs, --memory {shape.memory_mib}): "
                         f"{exc}") from None
    check_guest(shape.vcpus, shape.memory_mib)
    if not req.dry_run and not req.logs:
        try:
            ownguest.check_qemu(cfg)
        except qemu.QemuConfigError as exc:
            raise LearnFailed(str(exc)) from None
    if req.out:
        check_out_dir(req.out)
    if not req.logs:  # where the roots and the builds go: directories that can be made
        check_out_dir(req.guest_dir, "--guest-dir")
        check_out_dir(req.objdir, "--objdir")
    if req.learn_sysctl is not None and not SYSCTL_NAME.fullmatch(req.learn_sysctl):
        raise BadOption(f"{req.learn_sysctl!r}: no sysctl name (dotted words of letters, "
                        "digits, '_', '-', '%'; it goes unquoted into the guest's rc)",
                        "--learn-sysctl")
    for kernel, option, variant in ((req.kernel, "--kernel", "patched"),
                                    (req.pristine_kernel, "--pristine-kernel", "pristine")):
        if kernel is None:
            continue
        if not any(b.kernel == variant for b in boots):
            raise BadOption(f"no run boots the {variant} kernel: --config "
                            f"{', '.join(req.configs or plan.DEFAULT_CONFIGS)}", option)
        tree_build.check_kernel_file(kernel, option)  # the one check: rxl run's, guest up's
        tree_build.check_kernel_release(kernel, option, req.src)  # with --src's world
    if req.kernel and req.pristine_kernel:
        tree_build.check_kernel_pair(req.kernel, req.pristine_kernel,
                                     "learn's pristine runs would boot the series' kernel "
                                     "and the report would compare that kernel with itself")
    if req.nic_reinit < 0:
        raise LearnUsage(f"--nic-reinit must be >= 0, got {req.nic_reinit}")
    if req.deadline_s is not None and req.deadline_s < 1:
        raise LearnUsage(f"--deadline must be >= 1 s, got {req.deadline_s}")
    if req.deadline_s is not None and req.deadline_s > MAX_DEADLINE_S:
        raise LearnUsage(f"--deadline {show(req.deadline_s, 24)}: learnd takes at most "
                         f"{MAX_DEADLINE_S} s (its -d)")
    if req.deadline_s is not None:
        check_deadline(req.deadline_s, phases, requests)
    elif requests is not None and \
            plan.run_deadline_s(phases, requests=requests) > MAX_DEADLINE_S:
        # the default deadline allows for every request at plan.MIN_REQUEST_RATE
        raise LearnUsage(
            f"--requests {requests.requests} on --connections {requests.connections}, "
            f"--idle {requests.idle_s:g} s: a run's deadline would be "
            f"{plan.run_deadline_s(phases, requests=requests)} s (every phase at its "
            f"longest + 120 s, the requests at {plan.MIN_REQUEST_RATE:g}/s), more than "
            f"learnd's {MAX_DEADLINE_S} s (its -d): give fewer requests or connections")
    return Checked(phases, boots, gsys, extra_tun, shape, requests)
