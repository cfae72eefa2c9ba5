"""``rxl learn``: prove learning at accept(2) on the guest's e1000e (issue 6).

Stages, each printed as it starts (``--dry-run`` prints every external
command and runs nothing):

    kernels without ``--kernel`` / ``--pristine-kernel``: the rig kernels
            (rxl.tree.rig): ``<guest-dir>/rig-src``, a shared clone of ``--src``
            (never touched itself), at ``--src``'s HEAD (patched) and at
            patches/BASE (pristine), each with patches/guest/*.patch applied
            (the em(4) change QEMU 7.2's e1000e needs), built in
            ``<guest-dir>/obj-rig-src`` and kept under ``<guest-dir>/kernels/``
            by commit and guest-patch hash (a cached one is reused)
    world   the guest userland (rxl.tree.world), built only when it is missing
    server  cross-compile learnd (harness/rxl/learn/learnd.c) for FreeBSD
            against the world sysroot (``<objdir>/<src>/amd64.amd64/tmp``)
    image   one guest root per boot under ``--guest-dir`` (rxl.guest.image):
            kernel, loader.rc tunables, the learn rc (templates/learn-rc.j2)
    boot    QEMU per root (rxl.guest.qemu, user networking with a hostfwd from
            127.0.0.1:<free port> to the guest's learnd), console watched
            (rxl.guest.console); on each ``LEARN READY`` line the host drives the
            warm-up and measured phases (rxl.learn.drive.drive_run)
    report  parse the console logs, analyse, print and save the table
            (``<out>/learn.txt``, ``<out>/learn.json``)

``--log FILE`` (repeatable) skips the first three stages and re-analyses
saved console logs. Exit status: 0 when every planned run produced a
summary with connections in its measured phase; the issue's targets are
printed as MET/MISS (measured, not asserted).
"""

from __future__ import annotations

from rxl import paths

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Optional, Sequence

import click

from rxl.learn import plan as L
from rxl.learn import metrics as M
from rxl.learn import drive as D
from rxl.decide import topology
from rxl.decide import cpugroup
from rxl.learn.job import (Conductor, analyze_log, build_guest_world, single_thread,
                           world_lines)

DEFAULT_GUEST_DIR = paths.GUEST_LEARN
DEFAULT_LOG_ROOT = paths.LOGS
#: Guest path of the server in the staged root.
GUEST_LEARND = "/rxl/learnd"


def _fail(msg: str) -> None:
    raise click.ClickException(msg)


def report(analyses: Sequence[dict], out: Optional[str], as_json: bool) -> int:
    """Print (and save under ``out``) the table or JSON; return the exit status."""
    metrics = [m for a in analyses for m in a["metrics"]]
    rxq_by_run = {m.label: a["rxq"] for a in analyses for m in a["metrics"]}
    topo_names = sorted({a["topology"] for a in analyses})
    text = M.table(metrics, topo_name=", ".join(topo_names), rxq_by_run=rxq_by_run)
    errors = [e for a in analyses for e in a["errors"]]
    doc = {"logs": [{k: v for k, v in a.items() if k != "metrics"} for a in analyses],
           "runs": [m.to_dict() for m in metrics],
           "targets": [t.__dict__ for m in metrics for t in M.targets(m)],
           "errors": errors}
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "learn.txt").write_text(text + "".join(f"error: {e}\n" for e in errors))
        (Path(out) / "learn.json").write_text(json.dumps(doc, indent=2, default=str))
    click.echo(json.dumps(doc, indent=2, default=str) if as_json else text, nl=not as_json)
    for e in errors:
        click.echo(f"error: {e}", err=True)
    return 1 if errors or not metrics else 0


@click.command("learn")
@click.option("--src", default="/usr/src", show_default=True, help="FreeBSD tree with the series.")
@click.option("--objdir", default=paths.OBJDIR, show_default=True, help="MAKEOBJDIRPREFIX.")
@click.option("--out", default=None, help="Logs and reports [default: $RXL_WORK/logs/learn-<time>].")
@click.option("--guest-dir", default=DEFAULT_GUEST_DIR, show_default=True,
              help="Where learnd and the guest roots are staged.")
@click.option("--kernel", default=None,
              help="Patched kernel [default: a rig kernel built from --src's HEAD with "
                   "patches/guest/ applied, in <guest-dir>/rig-src].")
@click.option("--pristine-kernel", default=None,
              help="Kernel of the base, for 'pristine' [default: a rig kernel built from "
                   "patches/BASE with patches/guest/ applied].")
@click.option("--config", "configs", multiple=True, type=click.Choice(L.CONFIGS),
              help="Configurations to run (repeatable) [default: all].")
@click.option("--workers", "worker_sets", multiple=True, type=click.Choice(L.WORKER_SETS),
              help="Worker sets: rxq (one pinned per rxq CPU), all (one pinned per CPU), "
                   "free (one per rxq CPU, unpinned) (repeatable) [default: rxq, all].")
@click.option("--warmup", default=25.0, show_default=True, help="Warm-up seconds (> 20).")
@click.option("--measured", default=30.0, show_default=True, help="Measured seconds (> 20).")
@click.option("--min-conns", default=512, show_default=True,
              help="Measured phase runs on (up to 4x) until this many connections.")
@click.option("--concurrency", default=4, show_default=True, help="Host connection threads.")
@click.option("--learn-sysctl", default=None,
              help="Commit 3's learning sysctl [default: found in the tree].")
@click.option("--client-ports", type=click.Choice(["random", "kernel"]), default="random",
              show_default=True,
              help="Client source ports: uniform over 20000-60999 (seeded), or the host "
                   "kernel's choice (Linux: even ports only, which biases the lbgroup hash).")
@click.option("--lb-cpu-opt", default=None,
              help="Value of SO_REUSEPORT_LB_CPU for learnd [default: from the tree's "
                   "sys/sys/socket.h]; e.g. 0x1030.")
@click.option("--topology", "topo_spec", default=None,
              help="Topology for the predictions [default: the guest's topology_spec].")
@click.option("--memory", "memory_mib", default=1024, show_default=True, help="Guest MiB.")
@click.option("--log", "logs", multiple=True, type=click.Path(dir_okay=False),
              help="Analyse a saved console log instead of booting (repeatable).")
@click.option("--tunable", "tunables", multiple=True,
              help="Extra loader tunable NAME=VALUE for every boot (repeatable).")
@click.option("--deadline", "deadline_s", default=None, type=int,
              help="learnd's own deadline per run, s [default: every phase at its longest + 120].")
@click.option("--tcg-single-thread", is_flag=True,
              help="Run every vCPU in one TCG thread (-accel tcg,thread=single).")
@click.option("--smp", default="2,2,2", show_default=True,
              help="Guest sockets,cores,threads (one NUMA node per socket).")
@click.option("--guest-sysctl", "guest_sysctls", multiple=True,
              help="sysctl NAME=VALUE the guest sets before the runs (repeatable).")
@click.option("--nic-reinit", default=0, show_default=True,
              help="Take em0 down and up this many times before the runs.")
@click.option("--qemu-arg", "qemu_args", multiple=True,
              help="Extra QEMU argument, e.g. for tracing (repeatable, in order).")
@click.option("--per-connection", is_flag=True,
              help="learnd -K: log every measured connection's foreign port and "
                   "handshake CPU (LEARN K lines; see rxl.learn.ports).")
@click.option("--pcap", is_flag=True,
              help="Also record the guest NIC's traffic (QEMU filter-dump) to <out>/<boot>.pcap.")
@click.option("--dry-run", is_flag=True, help="Print every external command, run nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of the table.")
def learn(src, objdir, out, guest_dir, kernel, pristine_kernel, configs, worker_sets, warmup,
          measured, min_conns, concurrency, learn_sysctl, topo_spec, memory_mib, logs,
          client_ports, lb_cpu_opt, tunables, deadline_s, tcg_single_thread, smp, guest_sysctls,
          nic_reinit, qemu_args, per_connection, pcap, dry_run, as_json):
    """Learning at accept(2) on the guest's RSS NIC: shares, co-location, predictions."""
    try:
        phases = L.plan_phases(warmup, measured, min_measured=min_conns)
        boots = L.plan_boots(configs or L.CONFIGS, worker_sets or L.DEFAULT_WORKER_SETS)
        if topo_spec:
            topology.load(topo_spec)
    except (L.LearnError, cpugroup.TopologyError) as exc:
        _fail(str(exc))
    if concurrency < 1:
        _fail(f"--concurrency must be >= 1, got {concurrency}")
    gsys = []
    for t in guest_sysctls:
        name, sep, value = t.partition("=")
        if not sep or not name or not value or any(c.isspace() for c in t):
            _fail(f"--guest-sysctl {t!r}: expected NAME=VALUE without spaces")
        gsys.append((name, value))
    extra_tun = {}
    for t in tunables:
        name, sep, value = t.partition("=")
        if not sep or not name or not value or any(c.isspace() for c in t):
            _fail(f"--tunable {t!r}: expected NAME=VALUE without spaces")
        extra_tun[name] = value
    try:
        sockets, cores, threads = (int(x) for x in smp.split(","))
    except ValueError:
        _fail(f"--smp {smp!r}: expected SOCKETS,CORES,THREADS (e.g. 2,2,2)")
    topo_kw = dict(sockets=sockets, cores=cores, threads=threads, numa_nodes=sockets)
    from rxl.guest import qemu as qemu_mod
    try:
        # The same checks the boot makes, before any build or checkout.
        qemu_mod.validate(qemu_mod.GuestConfig(root_dir=guest_dir, memory_mib=memory_mib,
                                               **topo_kw))
    except qemu_mod.QemuConfigError as exc:
        _fail(f"guest (--smp {smp}, --memory {memory_mib}): {exc}")
    if nic_reinit < 0:
        _fail(f"--nic-reinit must be >= 0, got {nic_reinit}")
    if deadline_s is not None and deadline_s < 1:
        _fail(f"--deadline must be >= 1 s, got {deadline_s}")
    if logs:
        missing = [p for p in logs if not Path(p).is_file()]
        if missing:
            _fail(f"{missing[0]}: no such file")
        analyses = [analyze_log(p, topo_spec) for p in logs]
        sys.exit(report(analyses, out, as_json))

    from rxl.tree import build as build_mod
    from rxl.guest import image as image_mod
    from rxl.tree import rig as rig_mod
    from rxl.tree import rigrun as rig_run
    from rxl.tree import world as world_mod

    src, objdir, guest_dir = (os.path.abspath(p) for p in (src, objdir, guest_dir))
    out = os.path.abspath(out or str(Path(DEFAULT_LOG_ROOT) /
                                     time.strftime("learn-%Y%m%d-%H%M%S")))
    echo = lambda s: click.echo(s, err=True)  # noqa: E731
    if not (Path(src) / "sys").is_dir():
        _fail(f"{src} is not a FreeBSD source tree (no sys/)")
    kernels = {"patched": os.path.abspath(kernel) if kernel else None,
               "pristine": os.path.abspath(pristine_kernel) if pristine_kernel else None}
    wanted = [v for v in rig_mod.VARIANTS
              if any(b.kernel == v for b in boots) and not kernels[v]]
    rig_plan = None
    if wanted:
        try:
            commits = rig_mod.tree_commits(src, wanted)
            gpatches = rig_mod.read_guest_patches()
            rig_dir = Path(guest_dir) / rig_mod.RIG_SRC
            rig_plan = rig_mod.plan_rig(
                src, guest_dir, commits, gpatches, rig_exists=rig_run.rig_is_clone(rig_dir, src),
                toolchain_done=build_mod.toolchain_done(Path(guest_dir) / rig_mod.RIG_OBJDIR,
                                                        rig_dir),
                cached=lambda pth: pth.is_file())
        except (rig_mod.RigError, ValueError) as exc:
            _fail(f"kernels: {exc}")
        for v, k in rig_plan.kernels.items():
            kernels[v] = str(k.path)
    if lb_cpu_opt is not None:
        try:
            opt = int(lb_cpu_opt, 0)
        except ValueError:
            _fail(f"--lb-cpu-opt {lb_cpu_opt!r}: not an integer (e.g. 0x1030)")
    else:
        opt = L.lb_cpu_option(src)
    sysctl_name = learn_sysctl or L.learn_sysctl_name(src)
    needs_learning = any(r.learning is not None for b in boots for r in b.runs)
    wout = world_mod.world_outputs(src, objdir)
    learnd_bin = str(Path(guest_dir) / "learnd")
    cc = L.learnd_cc_argv(str(L.learnd_source()), learnd_bin, str(wout.sysroot),
                          lb_cpu_opt=opt)
    deadline = deadline_s or L.run_deadline_s(phases)

    if needs_learning and not sysctl_name:
        _fail(f"{src}: no learning sysctl found (commit 3 missing?); give --learn-sysctl")
    if dry_run:
        click.echo(f"# tree {src}: SO_REUSEPORT_LB_CPU "
                   f"{hex(opt) if opt is not None else 'absent (commit 2 missing)'}; "
                   f"learning sysctl {sysctl_name or 'absent (commit 3 missing)'}")
        if extra_tun:
            click.echo(f"# extra loader tunables for every boot: {extra_tun}")
        if rig_plan is not None:
            click.echo("# kernels")
            for line in rig_plan.lines():
                click.echo(line)
        for v in rig_mod.VARIANTS:
            if v not in wanted and kernels[v] and any(b.kernel == v for b in boots):
                click.echo(f"# kernel {v}: {kernels[v]} (given)")
        wmissing = wout.missing()
        if wmissing:
            click.echo(f"# world: missing {wmissing[0]}; built first")
            for line in world_lines(src, objdir):
                click.echo(line)
        else:
            click.echo(f"# world: {wout.objtop} (present)")
        click.echo("# server")
        click.echo(shlex.join(cc))
        fw = qemu_mod.find_ovmf() or "/usr/share/OVMF/OVMF_CODE_4M.fd"
        for b in boots:
            root = str(Path(guest_dir) / b.name)
            click.echo(f"# boot {b.name}: kernel {kernels[b.kernel]}, tunables "
                       f"{ {**extra_tun, **dict(b.tunables)} or '-'}, runs "
                       f"{', '.join(r.label for r in b.runs)}; root {root}")
            cfg = qemu_mod.GuestConfig(root_dir=root, memory_mib=memory_mib,
                                       hostfwd=(f"tcp:127.0.0.1:<port>-:{L.GUEST_PORT}",),
                                       **topo_kw)
            click.echo(shlex.join(qemu_mod.build_argv(cfg, firmware=fw)))
        click.echo(f"# host driver per run: {len(phases)} phases "
                   + ", ".join(f"{p.name} {p.min_s:g}-{p.max_s:g} s, >= {p.min_conns} conns"
                               for p in phases)
                   + f", {concurrency} threads to 127.0.0.1:<port>, client ports {client_ports}; "
                   f"learnd deadline {deadline} s")
        sys.exit(0)

    for what, v in (("kernel", "patched"), ("pristine kernel", "pristine")):
        if v not in wanted and any(b.kernel == v for b in boots) and \
                not Path(kernels[v] or "").is_file():
            _fail(f"{what} {kernels[v]}: no such file")
    try:
        Path(out).mkdir(parents=True, exist_ok=True)
        Path(guest_dir).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _fail(f"{exc.filename}: {exc.strerror}")
    timings: Dict[str, float] = {}

    if rig_plan is not None:
        t0 = time.monotonic()
        echo("== kernels: " + "; ".join(
            f"{k.variant} {k.commit[:12]} -> {k.path}" + (" (cached)" if k.cached else "")
            for k in rig_plan.kernels.values()))
        try:
            rig_res = rig_run.run_rig(rig_plan, out=out, echo=echo)
        except rig_mod.RigError as exc:
            _fail(f"kernels: {exc}")
        timings["kernels"] = time.monotonic() - t0
        for v, r in rig_res.items():
            echo(f"== kernel {v}: {r['kernel']}" + (" (cached)" if r["cached"] else
                 f" built in {r['seconds']} s (" + ", ".join(
                     f"{st['name']} {st['seconds']} s, lock wait {st['wait_seconds']} s"
                     for st in r["stages"]) + ")"))
        (Path(out) / "kernels.json").write_text(json.dumps(rig_res, indent=2))

    missing = wout.missing()
    if missing:
        t0 = time.monotonic()
        echo(f"== world: missing {missing[0]}; building the guest userland")
        try:
            build_guest_world(src, objdir, str(Path(out) / "world"), echo)
        except (build_mod.BuildError, RuntimeError, OSError) as exc:
            _fail(f"world: {exc}")
        timings["world"] = time.monotonic() - t0
        echo(f"== world: done in {timings['world']:.0f} s")

    echo(f"== server: {shlex.join(cc)}")
    t0 = time.monotonic()
    p = subprocess.run(cc, capture_output=True, text=True)
    timings["server"] = time.monotonic() - t0
    (Path(out) / "learnd-cc.log").write_text(p.stdout + p.stderr)
    if p.returncode:
        _fail(f"server: cross-compile failed (exit {p.returncode}); log {out}/learnd-cc.log")

    progs = {g: str(pth) for g, pth in wout.programs.items()}
    try:
        dyn = [pth for g, pth in progs.items() if g != "/libexec/ld-elf.so.1"]
        libs = image_mod.resolve_libs(dyn, str(wout.sysroot))
    except image_mod.ImageError as exc:
        _fail(f"image: {exc}")
    fw = qemu_mod.find_ovmf()
    if not fw:
        _fail("no OVMF firmware (apt-get install -y ovmf)")

    from rxl.guest import console as console_mod
    analyses = []
    # One client-port sequence for the whole invocation: a new boot goes on
    # where the last one stopped, so no port comes back within TIME_WAIT.
    connector = D.port_connector(client_ports)
    for b in boots:
        root = str(Path(guest_dir) / b.name)
        try:
            acts = image_mod.plan_root(
                loader_efi=str(wout.loader_efi), kernel=kernels[b.kernel], programs=progs,
                libs=libs, tests={GUEST_LEARND: learnd_bin},
                loader_rc=image_mod.render_loader_rc({**extra_tun, **dict(b.tunables)}),
                rc=L.render_learn_rc(b, learn_sysctl=sysctl_name, learnd=GUEST_LEARND,
                                     deadline_s=deadline, nic_reinit=nic_reinit,
                                     per_connection=per_connection,
                                     guest_sysctls=gsys))
            info = image_mod.stage_root(root, acts)
        except (image_mod.ImageError, L.LearnError, ValueError, OSError) as exc:
            _fail(f"image: {b.name}: {exc}")
        echo(f"== image {b.name}: {root} ({info['files']} files, {info['bytes'] >> 20} MiB)")
        port = D.free_port()
        extra = (("-object", f"filter-dump,id=dump0,netdev=net0,"
                  f"file={Path(out) / (b.name + '.pcap')}") if pcap else ()) + tuple(qemu_args)
        cfg = qemu_mod.GuestConfig(root_dir=root, memory_mib=memory_mib,
                                   hostfwd=(f"tcp:127.0.0.1:{port}-:{L.GUEST_PORT}",),
                                   extra=extra, **topo_kw)
        argv = single_thread(qemu_mod.build_argv(cfg, firmware=fw)) if tcg_single_thread \
            else qemu_mod.build_argv(cfg, firmware=fw)
        log = str(Path(out) / f"console-{b.name}.log")
        echo(f"== boot {b.name}: {shlex.join(argv)}")
        echo(f"   console {log}")
        t0 = time.monotonic()
        cond = Conductor(port, phases, len(b.runs), concurrency=concurrency,
                         wait_s=deadline + 600, echo=echo,
                         connect=connector)
        cond.start()
        total = 600 + len(b.runs) * (deadline + 60)
        try:
            console_mod.watch(console_mod.SerialTransport(argv), log, echo=cond.on_line,
                              total_timeout=total)
        except console_mod.GuestError as exc:
            echo(f"boot {b.name}: guest {exc.kind}: {exc}")
        except FileNotFoundError as exc:
            _fail(f"boot: {exc}")
        finally:
            cond.stop()
        (Path(out) / f"driver-{b.name}.json").write_text(json.dumps(
            {k: [r.__dict__ for r in v] for k, v in cond.results.items()}, indent=2))
        timings[f"boot {b.name}"] = time.monotonic() - t0
        echo(f"== boot {b.name}: done in {timings[f'boot {b.name}']:.0f} s")
        analyses.append(analyze_log(log, topo_spec))
    (Path(out) / "timings.json").write_text(json.dumps(
        {k: round(v) for k, v in timings.items()}, indent=2))
    echo("== wall time: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()))
    sys.exit(report(analyses, out, as_json))
