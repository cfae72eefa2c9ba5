"""One ``rxl learn`` invocation: its plan, its dry run, its boots.

:class:`LearnRequest` holds the options as given; :func:`check` refuses bad
ones before anything is built (:class:`Checked`: phases, boots, guest
shape); both are in :mod:`rxl.learn.request` and re-exported here.
:func:`prepare` looks at the tree and plans the kernels, the world
and learnd's build (:class:`Setup`); :func:`dry_run_lines` is what
``--dry-run`` prints; :func:`execute` builds, stages and boots, and
returns one analysis per boot (:func:`rxl.learn.job.analyze_log`).  Every
refusal or failure is :class:`LearnFailed` with a one-line message.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from rxl import paths
from rxl.cli.options import missing
from rxl.errors import RxlError, reason
from rxl.guest import console, image, qemu
from rxl.learn import drive, plan
from rxl.learn.drive import Conductor
from rxl.learn.metrics import analyze_log
from rxl.learn.request import Checked, LearnFailed, LearnRequest, LearnUsage
from rxl.tree import base as tree_base
from rxl.tree import build as tree_build
from rxl.tree import rig
from rxl.tree import version as tree_version
from rxl.tree import world as tree_world
from rxl.verify import kernels as verify_kernels

#: Guest path of the server in the staged root.
GUEST_LEARND = "/rxl/learnd"


@dataclass
class Setup:
    """What :func:`prepare` found and planned. Paths are absolute.

    ``kernels``: variant -> kernel path (given, ``rxl run``'s, or the rig's);
    ``wanted``: variants the rig builds; ``rig_plan``: :class:`rxl.tree.rig.RigPlan`
    or None; ``opts``: socket option name -> value (plan.SOCKET_OPTIONS); ``wout``:
    the world's outputs; ``cc``: learnd's compiler argv; ``deadline``: learnd's, s;
    ``guest_patches``: whether the rig applies patches/guest/
    (rxl.guest.qemu.needs_rig_patch); ``notes``: where each kernel comes from.
    """

    src: str
    objdir: str
    guest_dir: str
    out: str
    kernels: Dict[str, Optional[str]]
    wanted: List[str]
    rig_plan: object
    opts: Dict[str, Optional[int]]
    sysctl_name: Optional[str]
    wout: object
    learnd_bin: str
    cc: List[str]
    deadline: int
    guest_patches: bool = False
    notes: Tuple[str, ...] = ()


def qemu_extra(pcap: bool, qemu_args: Sequence[str], out: str, boot: str) -> Tuple[str, ...]:
    """QEMU arguments a boot adds: the ``--pcap`` dump to ``<out>/<boot>.pcap``,
    then ``--qemu-arg``s. A comma of the path is doubled, as QEMU's option
    syntax escapes one (``file=/a,,b/x.pcap`` is ``/a,b/x.pcap``; a single one
    would end the value and make the rest a key)."""
    pcap_file = qemu.opt_value(str(Path(out) / (boot + ".pcap")))
    dump = ("-object", f"filter-dump,id=dump0,netdev=net0,file={pcap_file}") if pcap else ()
    return dump + tuple(qemu_args)


def single_thread(argv: List[str]) -> List[str]:
    """``argv`` with ``-machine q35,accel=tcg`` turned into ``-machine q35 -accel tcg,thread=single``.

    QEMU refuses both spellings at once. Raises ValueError if the argv has
    no ``accel=tcg`` machine option.
    """
    out = list(argv)
    for i, a in enumerate(out[:-1]):
        if a == "-machine" and ",accel=tcg" in out[i + 1]:
            out[i + 1] = out[i + 1].replace(",accel=tcg", "")
            return out[:i + 2] + ["-accel", "tcg,thread=single"] + out[i + 2:]
    raise ValueError("no '-machine ...,accel=tcg' in the QEMU argv")


def world_lines(src: str, objdir: str) -> List[str]:
    """Shell lines of the guest userland build (kernel-toolchain first if the objdir lacks it)."""
    stages = []
    if not tree_build.toolchain_done(objdir, src):
        stages.append(tree_build.plan_stages(src, objdir, toolchain=True)[0])
    # one list, so the objdir's bmake bootstrap is printed before its first stage
    return tree_build.shell_lines(stages + tree_world.plan_world(src, objdir))


def build_guest_world(src: str, objdir: str, logdir: str, echo: Callable[[str], None]) -> None:
    """Build the guest userland as ``rxl run`` does (kernel-toolchain first if needed).

    Raises rxl.tree.build.BuildError naming the failed stage's log, RuntimeError
    when a product is missing afterwards.
    """
    Path(objdir).mkdir(parents=True, exist_ok=True)
    if not tree_build.toolchain_done(objdir, src):
        st = tree_build.plan_stages(src, objdir, toolchain=True)[0]
        echo(f"$ {st.shell()}")
        res = tree_build.run_stage(st, logdir, echo)
        (Path(objdir) / tree_build.TOOLCHAIN_DONE).touch()
        echo(f"{st.name}: done in {res.seconds:.0f} s")
    for line in tree_world.shell_lines(src, objdir):
        echo(f"$ {line}")
    tree_world.build_world(src, objdir, logdir=logdir, echo=echo)


def guest_config(chk: Checked, root: str, port: object, extra: Sequence[str] = ()
                 ) -> qemu.GuestConfig:
    """The QEMU guest of one boot: the checked shape booting ``root``, the host's
    ``127.0.0.1:<port>`` forwarded to learnd on the NIC under test, ``extra`` args."""
    return dataclasses.replace(chk.shape.config(root),
                               hostfwd=(f"tcp:127.0.0.1:{port}-:{plan.GUEST_PORT}",),
                               extra=tuple(extra))


def prepare(req: LearnRequest, chk: Checked) -> Setup:
    """Look at the tree and plan: the kernels, the world, learnd's build.

    Raises LearnUsage (exit 2) for a ``--src`` that is no directory, has no
    ``sys/``, or says no release (rxl.tree.version.read_version: no
    ``__FreeBSD_version`` in ``sys/sys/param.h``), which would leave learnd's
    compiler and the world's build to a guess, or says another release than
    patches/BASE's (rxl.tree.base.check_series_release, rxl run's check: learnd
    sets the series' TCP_REUSPORT_LB_CPU, which a 14.0 tree's tcp.h lacks).

    Kernels not given: without a rig change for the NIC (every shape but an
    e1000e under QEMU 7.2, rxl.guest.qemu.needs_rig_patch) the patched kernel
    ``rxl run`` built from ``--src`` in ``--objdir`` when its stamp matches the
    tree; else (and the pristine one) the rig's (rxl.tree.rig), with
    patches/guest/ only when the NIC needs it.
    """

    src, objdir, guest_dir = (os.path.abspath(p) for p in (req.src, req.objdir, req.guest_dir))
    out = os.path.abspath(req.out or str(Path(paths.LOGS) /
                                         time.strftime("learn-%Y%m%d-%H%M%S")))
    if not Path(src).is_dir():  # missing, a loop, or said to be what it is
        raise LearnUsage(f"--src {src}: {missing(src, 'directory')}")
    if not (Path(src) / "sys").is_dir():
        raise LearnUsage(f"--src {src}: not a FreeBSD source tree (no sys/)")
    try:  # learnd's compiler and the world's build are the release's: never guessed
        tree_version.require_release(src, "learnd's compiler and the world's build are "
                                     "chosen by it")
    except tree_version.VersionError as exc:
        raise LearnUsage(str(exc)) from None
    try:  # learnd and the kernels are the series': a tree of another release has neither
        tree_base.check_series_release(src, "learn runs the series' learnd "
                                       "(TCP_REUSPORT_LB_CPU) and kernels with its world: "
                                       "give a tree of the series' release")
    except tree_base.TreeError as exc:
        raise LearnUsage(str(exc)) from None
    kernels = {"patched": os.path.abspath(req.kernel) if req.kernel else None,
               "pristine": os.path.abspath(req.pristine_kernel) if req.pristine_kernel else None}
    version = qemu.installed_version(chk.shape.config("/").qemu)
    patch = qemu.needs_rig_patch(chk.shape.config("/"), version)
    notes: List[str] = []
    if not patch and not kernels["patched"] and any(b.kernel == "patched" for b in chk.boots):
        run_kernel = str(tree_build.kernel_path(src, objdir))
        if verify_kernels.kernel_cached(src, run_kernel):
            kernels["patched"] = run_kernel
            notes.append(f"kernel patched: {run_kernel} (rxl run's: its stamp matches {src})")
    wanted = [v for v in rig.VARIANTS
              if any(b.kernel == v for b in chk.boots) and not kernels[v]]
    rig_plan = None
    if wanted:
        try:
            commits = rig.tree_commits(src, wanted)
            gpatches = rig.read_guest_patches() if patch else []
            rig_dir = Path(guest_dir) / rig.RIG_SRC
            rig_plan = rig.plan_rig(
                src, guest_dir, commits, gpatches, rig_exists=rig.rig_is_clone(rig_dir, src),
                toolchain_done=tree_build.toolchain_done(Path(guest_dir) / rig.RIG_OBJDIR,
                                                        rig_dir),
                cached=lambda pth: pth.is_file())
        except rig.RigInput as exc:  # --src or --guest-dir as given: bad input, exit 2
            raise LearnUsage(f"kernels: {exc}") from None
        except (rig.RigError, ValueError) as exc:
            raise LearnFailed(f"kernels: {exc}") from None
        for v, k in rig_plan.kernels.items():
            kernels[v] = str(k.path)
    try:
        opts = plan.socket_options(src, {"TCP_REUSPORT_LB_CPU": req.lb_cpu_opt})
    except plan.LearnError as exc:
        raise LearnUsage(f"--lb-cpu-opt: {exc}") from None
    sysctl_name = req.learn_sysctl or plan.learn_sysctl_name(src)
    needs_learning = any(r.learning is not None for b in chk.boots for r in b.runs)
    wout = tree_world.world_outputs(src, objdir)
    learnd_bin = str(Path(guest_dir) / "learnd")
    cc = plan.learnd_cc_argv(str(plan.learnd_source()), learnd_bin, str(wout.sysroot),
                          lb_cpu_opt=opts["TCP_REUSPORT_LB_CPU"], tree=src)
    deadline = req.deadline_s or plan.run_deadline_s(chk.phases, requests=chk.requests)
    if needs_learning and not sysctl_name:
        # the tree given is the wrong input, not a failed step: a usage error (exit 2)
        raise LearnUsage(f"--src {src}: no learning sysctl found (commit 4 missing?); "
                         "give --learn-sysctl")
    if wanted:
        notes.append("rig kernels " + ", ".join(wanted) + (
            f": with patches/guest/ (the {chk.nic} NIC under QEMU "
            f"{'%d.%d' % version if version else '(version unknown)'})" if patch
            else f": without patches/guest/ (the {chk.nic} NIC needs none)"))
    return Setup(src, objdir, guest_dir, out, kernels, wanted, rig_plan, opts, sysctl_name,
                 wout, learnd_bin, cc, deadline, guest_patches=patch, notes=tuple(notes))


def idle_timeout(deadline_s: int) -> float:
    """Console silence that counts as a hung guest: learnd prints nothing
    between a run's READY and its end, which may take its whole deadline
    (a long --warmup, or a guest held by gdb for rxl kcount), so never less
    than that plus a minute, nor less than the console's default."""
    return max(console.DEFAULT_IDLE_TIMEOUT, deadline_s + 60.0)


def dry_run_lines(req: LearnRequest, chk: Checked, s: Setup) -> List[str]:
    """Every external command the run would execute, with ``#`` notes, in order."""
    out = [f"# tree {s.src}: " + "; ".join(
        f"{k} {hex(v) if v is not None else 'absent (commit 3 missing)'}"
        for k, v in s.opts.items())
        + f"; learning sysctl {s.sysctl_name or 'absent (commit 4 missing)'}"
        + ("; groups view: never" if req.groups_every == 0  # -0 too, which is 0
           else f"; groups view every {req.groups_every:g} s")]
    if chk.extra_tun:
        out.append(f"# extra loader tunables for every boot: {chk.extra_tun}")
    if chk.gsys:
        out.append("# guest sysctls: " + " ".join(f"{n}={v}" for n, v in chk.gsys))
    out += [f"# {n}" for n in s.notes]
    if s.rig_plan is not None:
        out.append("# kernels")
        out += s.rig_plan.lines()
    for v in rig.VARIANTS:
        if v not in s.wanted and s.kernels[v] and any(b.kernel == v for b in chk.boots):
            out.append(f"# kernel {v}: {s.kernels[v]} (given)")
    wmissing = s.wout.missing()
    if wmissing:
        out.append(f"# world: missing {wmissing[0]}; built first")
        out += world_lines(s.src, s.objdir)
    else:
        out.append(f"# world: {s.wout.objtop} (present)")
    out.append("# server")
    out.append(shlex.join(s.cc))
    fw = qemu.find_ovmf() or "/usr/share/OVMF/OVMF_CODE_4M.fd"
    for b in chk.boots:
        root = str(Path(s.guest_dir) / b.name)
        out.append(f"# boot {b.name}: kernel {s.kernels[b.kernel]}, tunables "
                   f"{ {**chk.extra_tun, **dict(b.tunables)} or '-'}, runs "
                   f"{', '.join(r.label for r in b.runs)}; root {root}")
        cfg = guest_config(chk, root, "<port>", qemu_extra(req.pcap, req.qemu_args, s.out,
                                                           b.name))
        argv = qemu.build_argv(cfg, firmware=fw)
        out.append(shlex.join(single_thread(argv) if req.tcg_single_thread else argv))
    out.append(f"# host driver per run: {len(chk.phases)} phases "
               + ", ".join(f"{p.name} {p.min_s:g}-{p.max_s:g} s, >= {p.min_conns} conns"
                           for p in chk.phases)
               + f", {req.concurrency} threads to 127.0.0.1:<port>, client ports "
               f"{req.client_ports}; learnd deadline {s.deadline} s")
    if chk.requests is not None:
        r = chk.requests
        out.append(f"# host driver per run, then: {r.connections} connections kept open "
                   f"(byte {plan.KEEP_BYTE!r}), snapshot 0 (byte {plan.SNAP_BYTE!r}), "
                   f"{r.idle_s:g} s idle, snapshot 1, {r.requests} requests per connection "
                   f"in {req.concurrency} closed loops (one request outstanding each), "
                   f"snapshot 2; figures: rxl.learn.wakeups")
    return out


def execute(req: LearnRequest, chk: Checked, s: Setup,
            echo: Callable[[str], None]) -> List[dict]:
    """Build the rig kernels, the world and learnd, stage a root per boot and
    boot it, driving connections on each ``LEARN READY``; one analysis per
    boot.  Writes kernels.json, learnd-cc.log, driver-<boot>.json,
    console-<boot>.log and timings.json under ``s.out``."""

    kernels, out, guest_dir = s.kernels, s.out, s.guest_dir
    for what, v in (("kernel", "patched"), ("pristine kernel", "pristine")):
        if v not in s.wanted and any(b.kernel == v for b in chk.boots) and \
                not Path(kernels[v] or "").is_file():
            raise LearnFailed(f"{what} {kernels[v]}: {missing(kernels[v] or '')}")
    try:
        Path(out).mkdir(parents=True, exist_ok=True)
        Path(guest_dir).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LearnFailed(f"{exc.filename}: {exc.strerror}")
    timings: Dict[str, float] = {}

    if s.rig_plan is not None:
        t0 = time.monotonic()
        echo("== kernels: " + "; ".join(
            f"{k.variant} {k.commit[:12]} -> {k.path}" + (" (cached)" if k.cached else "")
            for k in s.rig_plan.kernels.values()))
        try:
            rig_res = rig.run_rig(s.rig_plan, out=out, echo=echo)
        except rig.RigError as exc:
            raise LearnFailed(f"kernels: {exc}") from None
        timings["kernels"] = time.monotonic() - t0
        for v, r in rig_res.items():
            echo(f"== kernel {v}: {r['kernel']}" + (" (cached)" if r["cached"] else
                 f" built in {r['seconds']} s (" + ", ".join(
                     f"{st['name']} {st['seconds']} s, lock wait {st['wait_seconds']} s"
                     for st in r["stages"]) + ")"))
        (Path(out) / "kernels.json").write_text(json.dumps(rig_res, indent=2))

    missing = s.wout.missing()
    if missing:
        t0 = time.monotonic()
        echo(f"== world: missing {missing[0]}; building the guest userland")
        try:
            build_guest_world(s.src, s.objdir, str(Path(out) / "world"), echo)
        except (RxlError, OSError) as exc:
            raise LearnFailed(f"world: {reason(exc)}") from None
        timings["world"] = time.monotonic() - t0
        echo(f"== world: done in {timings['world']:.0f} s")

    echo(f"== server: {shlex.join(s.cc)}")
    t0 = time.monotonic()
    p = subprocess.run(s.cc, capture_output=True, text=True)
    timings["server"] = time.monotonic() - t0
    (Path(out) / "learnd-cc.log").write_text(p.stdout + p.stderr)
    if p.returncode:
        raise LearnFailed(f"server: cross-compile failed (exit {p.returncode}); "
                          f"log {out}/learnd-cc.log")

    progs = {g: str(pth) for g, pth in s.wout.programs.items()}
    try:
        dyn = [pth for g, pth in progs.items() if g != "/libexec/ld-elf.so.1"]
        libs = image.resolve_libs(dyn, str(s.wout.sysroot))
    except image.ImageError as exc:
        raise LearnFailed(f"image: {exc}") from None
    fw = qemu.find_ovmf()
    if not fw:
        raise LearnFailed("no OVMF firmware (apt-get install -y ovmf)")

    analyses = []
    # One client-port sequence for the whole invocation: a new boot goes on
    # where the last one stopped, so no port comes back within TIME_WAIT.
    connector = drive.port_connector(req.client_ports)
    for b in chk.boots:
        root = str(Path(guest_dir) / b.name)
        try:
            acts = image.plan_root(
                loader_efi=str(s.wout.loader_efi), kernel=kernels[b.kernel], programs=progs,
                libs=libs, tests={GUEST_LEARND: s.learnd_bin},
                loader_rc=image.render_loader_rc({**chk.extra_tun, **dict(b.tunables)}),
                rc=plan.render_learn_rc(b, learn_sysctl=s.sysctl_name, learnd=GUEST_LEARND,
                                        nic=chk.nic,
                                     deadline_s=s.deadline, nic_reinit=req.nic_reinit,
                                     per_connection=req.per_connection,
                                     groups_ms=int(round(req.groups_every * 1000)),
                                     guest_sysctls=chk.gsys))
            info = image.stage_root(root, acts)
        except (RxlError, ValueError, OSError) as exc:
            raise LearnFailed(f"image: {b.name}: {reason(exc)}") from None
        echo(f"== image {b.name}: {root} ({info['files']} files, {info['bytes'] >> 20} MiB)")
        port = drive.free_port()
        extra = qemu_extra(req.pcap, req.qemu_args, out, b.name)
        cfg = guest_config(chk, root, port, extra)
        argv = single_thread(qemu.build_argv(cfg, firmware=fw)) if req.tcg_single_thread \
            else qemu.build_argv(cfg, firmware=fw)
        log = str(Path(out) / f"console-{b.name}.log")
        echo(f"== boot {b.name}: {shlex.join(argv)}")
        echo(f"   console {log}")
        t0 = time.monotonic()
        cond = Conductor(port, chk.phases, len(b.runs), concurrency=req.concurrency,
                         wait_s=s.deadline + 600, echo=echo, connect=connector,
                         requests=chk.requests)
        cond.start()
        total = 600 + len(b.runs) * (s.deadline + 60)
        try:
            console.watch(console.SerialTransport(argv), log, echo=cond.on_line,
                              total_timeout=total, idle_timeout=idle_timeout(s.deadline))
        except console.GuestError as exc:
            echo(f"boot {b.name}: guest {exc.kind}: {exc}")
        except FileNotFoundError as exc:
            raise LearnFailed(f"boot: {reason(exc)}") from None
        finally:
            cond.stop()
        (Path(out) / f"driver-{b.name}.json").write_text(json.dumps(
            {k: [r.__dict__ for r in v] for k, v in cond.results.items()}, indent=2))
        timings[f"boot {b.name}"] = time.monotonic() - t0
        echo(f"== boot {b.name}: done in {timings[f'boot {b.name}']:.0f} s")
        analyses.append(analyze_log(log, req.topo_spec))
    (Path(out) / "timings.json").write_text(json.dumps(
        {k: round(v) for k, v in timings.items()}, indent=2))
    echo("== wall time: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()))
    return analyses
