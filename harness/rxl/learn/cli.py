"""``rxl learn``: prove learning at accept(2) on the guest's RSS NIC.

This module parses the options and prints; :mod:`rxl.learn.session` checks,
plans and runs.  Stages, each printed as it starts (``--dry-run`` prints every external
command and runs nothing):

    kernels without ``--kernel`` / ``--pristine-kernel``: the patched kernel
            ``rxl run`` built from ``--src`` when its stamp matches, else the
            rig kernels (rxl.tree.rig): ``<guest-dir>/rig-src``, a shared clone
            of ``--src`` (never touched itself), at ``--src``'s HEAD (patched)
            and at patches/BASE (pristine), with patches/guest/*.patch applied
            only for a NIC that needs it (the em(4) change QEMU 7.2's e1000e
            needs; the default guest's igb needs none:
            rxl.guest.qemu.needs_rig_patch), built in ``<guest-dir>/obj-rig-src``
            and kept under ``<guest-dir>/kernels/`` by commit and guest-patch
            hash (a cached one is reused)
    world   the guest userland (rxl.tree.world), built only when it is missing
    server  cross-compile learnd (harness/rxl/learn/learnd.c) for FreeBSD
            against the world sysroot (``<objdir>/<src>/amd64.amd64/tmp``)
    image   one guest root per boot under ``--guest-dir`` (rxl.guest.image):
            kernel, loader.rc tunables, the learn rc (templates/learn-rc.j2)
    boot    QEMU per root in the guest's shape (``--target``, default the
            two-socket NUMA server with its igb behind a ``_PXM`` bridge;
            rxl.guest.targets), user networking with a hostfwd from
            127.0.0.1:<free port> to the guest's learnd on the NIC under test,
            console watched
            (rxl.guest.console); on each ``LEARN READY`` line the host drives the
            warm-up and measured phases (rxl.learn.drive.drive_run)
    report  parse the console logs, analyse, print and save the table
            (``<out>/learn.txt``, ``<out>/learn.json``), then per run the
            kernel's groups view (net.inet.tcp.reuseport_lb.groups, copied
            by learnd every ``--groups-every`` s and at the quit byte,
            read with ``rxl inspect``'s parser) beside the connections that
            arrived between two copies (rxl.learn.groups)

``--requests N`` (docs/results/wakeups.md, part 2) replaces the measured
phase by a request phase: after the warm-up the host keeps ``--connections``
connections open and sends N requests on each in closed loops
(rxl.learn.drive.drive_requests); learnd counts cross-CPU requests and
wakeups in band and copies its counters, the workers' context switches and
hw.intrcnt around an idle window and the requests; the report adds the
table of rxl.learn.wakeups.  ``kern.sched.idlespins=0`` is set in the guest
unless ``--guest-sysctl`` names it.  ``--config tagged`` tags every pinned
worker's listener with its CPU (learnd -T), learning off.  ``--repetitions K``
runs each configuration K times in its boot.

``--log FILE`` (repeatable) skips the first three stages and re-analyses
saved console logs. Exit status: 0 when every planned run produced a
summary with connections in its measured phase; the learning targets are
printed as MET/MISS (measured, not asserted).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional, Sequence

import click

from rxl import paths
from rxl.cli.groups import refuse_given
from rxl.cli.options import (FILE, INT_MAX, SMP, CInteger, FiniteFloat, check_distinct_inputs,
                             check_input, check_no_repeats)
from rxl.cli.surface import command
from rxl.decide.topology import TOPOLOGY
from rxl.errors import BadOption, DataError, UsageError, show
from rxl.guest import targets
from rxl.learn import groups, metrics, plan, request, session, wakeups
from rxl.learn.metrics import analyze_log

DEFAULT_GUEST_DIR = paths.GUEST_LEARN


def report(analyses: Sequence[dict], out: Optional[str], as_json: bool) -> int:
    """Print (and save under ``out``) the table or JSON; return the exit status."""
    run_metrics = [m for a in analyses for m in a["metrics"]]
    rxq_by_run = {m.label: a["rxq"] for a in analyses for m in a["metrics"]}
    topo_names = sorted({a["topology"] for a in analyses})
    text = metrics.table(run_metrics, topo_name=", ".join(topo_names), rxq_by_run=rxq_by_run)
    views = {lbl: v for a in analyses for lbl, v in a.get("views", {}).items()}
    text += "".join("\n".join(groups.render(lbl, views[lbl])) + "\n" for lbl in sorted(views))
    errors = [e for a in analyses for e in a["errors"]]
    warnings = [w for a in analyses for w in a.get("warnings", [])]
    by_label = {m.label: m for m in run_metrics}
    wk: List[wakeups.RunWakeups] = []
    for a in analyses:
        got, bad = wakeups.from_runs(a.get("summaries", {}), by_label)
        wk += got
        errors += [f"{a['log']}: {e}" for e in bad]
    if wk:
        text += ("\ncross-CPU wakeups per 1,000 requests (rxl.learn.wakeups; median "
                 "(min-max) over the repetitions, [p x] predicted):\n"
                 + "\n".join(wakeups.table(wk)) + "\n")
    doc = {"logs": [{k: v for k, v in a.items() if k not in ("metrics", "views", "summaries")}
                    for a in analyses],
           "wakeups": [w.to_dict() for w in wk],
           "views": {lbl: groups.as_json(v) for lbl, v in views.items()},
           "runs": [m.to_dict() for m in run_metrics],
           "targets": [t.__dict__ for m in run_metrics for t in metrics.targets(m)],
           "errors": errors, "warnings": warnings}
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "learn.txt").write_text(text + "".join(f"warning: {w}\n" for w in warnings)
                                             + "".join(f"error: {e}\n" for e in errors))
        (Path(out) / "learn.json").write_text(json.dumps(doc, indent=2, default=str))
    click.echo(json.dumps(doc, indent=2, default=str) if as_json else text, nl=not as_json)
    for w in warnings:
        click.echo(f"warning: {w}", err=True)
    if not errors and not run_metrics:
        errors = ["no learn run with connections in its measured phase"]
    if errors:  # the one error line: the first, and how many more learn.txt lists
        more = f" (and {len(errors) - 1} more: see the error lines above)" \
            if len(errors) > 1 else ""
        for e in errors[1:]:
            click.echo(f"error: {e}", err=True)
        click.echo(f"Error: {errors[0]}{more}", err=True)
    return 1 if errors or not run_metrics else 0


def guest_shape(spec: Optional[str], path: Optional[str], memory_given: bool = False):
    """``--target NAME`` -> its rxl.guest.targets.Shape (None: the default guest).
    BadOption naming ``--target`` for no such name or a target that is not the own
    guest (kind: qemu); the targets file's own mistakes as they are (DataError).
    Unless ``--memory`` replaces it (``memory_given``), the shape's memory_mib
    must fit this host's RAM (rxl.guest.targets.check_host_memory)."""
    if spec is None:
        if path is not None:
            raise BadOption("only with --target NAME", "--targets")
        t = targets.default_guest()  # the targets file's own guest, if it gives one
        if t is not None and not memory_given:
            targets.check_host_memory(t, None)
        return None if t is None else t.shape
    try:
        t = targets.resolve(spec, path)
    except targets.TargetsError:
        raise
    except (KeyError, ValueError) as exc:
        raise BadOption(exc.args[0], "--target") from None
    if t.kind != "qemu":
        raise BadOption(f"{spec} is a {t.kind} target: rxl learn boots its own QEMU guest "
                        "(a kind: qemu target)", "--target")
    if not memory_given:
        targets.check_host_memory(t)
    return t.shape


def _analyze_saved(path, topo_spec):
    """A saved ``--log`` analysed (rxl.learn.metrics.analyze_log); one it cannot
    read (``/proc/self/mem``: EIO) is refused naming ``--log``, never taken for
    an output that could not be written (rxl.cli.surface's OUTPUT_ERRNOS)."""
    try:
        return analyze_log(path, topo_spec)
    except OSError as exc:
        raise BadOption(f"{show(path)}: {exc.strerror or exc}", "--log") from None


@command("learn")
@click.option("--src", default="/usr/src", show_default=True, help="FreeBSD tree with the series.")
@click.option("--objdir", default=paths.OBJDIR, show_default=True, help="MAKEOBJDIRPREFIX.")
@click.option("--out", default=None, help="Logs and reports [default: $RXL_WORK/logs/learn-<time>].")
@click.option("--guest-dir", default=DEFAULT_GUEST_DIR, show_default=True,
              help="Where learnd and the guest roots are staged.")
@click.option("--kernel", default=None,
              help="Patched kernel [default: rxl run's of --src when its stamp matches, "
                   "else a rig kernel built from --src's HEAD in <guest-dir>/rig-src, with "
                   "patches/guest/ for QEMU 7.2's e1000e only].")
@click.option("--pristine-kernel", default=None,
              help="Kernel of the base, for 'pristine' [default: a rig kernel built from "
                   "patches/BASE, with patches/guest/ for QEMU 7.2's e1000e only].")
@click.option("--target", "target_spec", default=None, metavar="NAME",
              help="The guest's shape: a kind: qemu target (built in: guest, guest-nopxm, "
                   "guest-e1000e for QEMU 7.2, guest-2s, guest-2l3) [default: guest, the "
                   "two-socket NUMA server with its igb, or the shape $RXL_WORK/targets.yaml "
                   "gives guest].")
@click.option("--targets", "targets_file", default=None,
              help="Targets file [default: $RXL_WORK/targets.yaml].")
@click.option("--config", "configs", multiple=True, type=click.Choice(plan.CONFIGS),
              help="Configurations to run (repeatable) [default: all but tagged; tagged: "
                   "learning off, every pinned worker's listener tagged with its CPU].")
@click.option("--workers", "worker_sets", multiple=True, type=click.Choice(plan.WORKER_SETS),
              help="Worker sets: rxq (one pinned per rxq CPU), all (one pinned per CPU), "
                   "free (one per rxq CPU, unpinned) (repeatable) [default: rxq, all].")
@click.option("--warmup", default=25.0, show_default=True, type=FiniteFloat(),
              help="Warm-up seconds (> 20, at most 3600: rxl.learn.request.MAX_PHASE_S).")
@click.option("--measured", default=30.0, show_default=True, type=FiniteFloat(),
              help="Measured seconds (> 20, at most 3600: rxl.learn.request.MAX_PHASE_S).")
@click.option("--min-conns", default=512, show_default=True,
              help="Measured phase runs on (up to 4x) until this many connections (0-20000: "
                   "the phase stops at 20000).")
@click.option("--concurrency", default=4, show_default=True,
              help=f"Host connection threads (at most {plan.LISTEN_BACKLOG}, learnd's listen "
                   "backlog).")
@click.option("--learn-sysctl", default=None,
              help="Commit 4's learning sysctl [default: found in the tree].")
@click.option("--client-ports", type=click.Choice(["random", "kernel"]), default="random",
              show_default=True,
              help="Client source ports: uniform over 20000-60999 (seeded), or the host "
                   "kernel's choice (Linux: even ports only, which biases the lbgroup hash).")
@click.option("--lb-cpu-opt", default=None,
              type=CInteger(1, INT_MAX, "a TCP socket option (setsockopt(2)'s optname, an int)"),
              help="Value of TCP_REUSPORT_LB_CPU (a listener's tag; on an accepted socket "
                   "its handshake CPU) for learnd [default: from the tree's "
                   "sys/netinet/tcp.h]; e.g. 1027.")
@click.option("--groups-every", default=plan.GROUPS_MS / 1000, show_default=True,
              type=FiniteFloat(),
              help="learnd copies net.inet.tcp.reuseport_lb.groups every this many "
                   "seconds (0: never); the report shows each copy.")
@click.option("--topology", "topo_spec", default=None, type=TOPOLOGY,
              help="Topology for the predictions: a built-in name, LxCxT or a "
                   "kern.sched.topology_spec dump, holding every CPU the runs name "
                   "[default: the guest's topology_spec].")
@click.option("--memory", "memory_mib", default=None, type=int,
              help="Guest MiB [default: the shape's; 2048 for guest].")
@click.option("--log", "logs", multiple=True, type=FILE,
              help="Analyse a saved console log instead of booting (repeatable).")
@click.option("--tunable", "tunables", multiple=True,
              help="Extra loader tunable NAME=VALUE for every boot (repeatable).")
@click.option("--deadline", "deadline_s", default=None, type=int,
              help="learnd's own deadline per run, s [default: every phase at its longest + 120].")
@click.option("--tcg-single-thread", is_flag=True,
              help="Run every vCPU in one TCG thread (-accel tcg,thread=single).")
@click.option("--smp", default=None, type=SMP,
              help="Guest SOCKETS,CORES,THREADS in place of the shape's (one L3 per "
                   "socket, one NUMA node per socket) [default: the shape's].")
@click.option("--guest-sysctl", "guest_sysctls", multiple=True,
              help="sysctl NAME=VALUE the guest sets before the runs (repeatable).")
@click.option("--nic-reinit", default=0, show_default=True,
              help="Take the NIC under test down and up this many times before the runs.")
@click.option("--qemu-arg", "qemu_args", multiple=True,
              help="Extra QEMU argument, e.g. for tracing (repeatable, in order).")
@click.option("--per-connection", is_flag=True,
              help="learnd -K: log every measured connection's foreign port and "
                   "handshake CPU (LEARN K lines; see rxl.learn.ports).")
@click.option("--pcap", is_flag=True,
              help="Also record the guest NIC's traffic (QEMU filter-dump) to <out>/<boot>.pcap.")
@click.option("--requests", default=0, show_default=True, type=int,
              help="Cross-CPU wakeups per request (docs/results/wakeups.md, part 2): "
                   "after the warm-up, this many requests on each of --connections "
                   "connections kept open, in place of the measured phase (0: none).")
@click.option("--connections", default=512, show_default=True, type=int,
              help="With --requests: connections kept open.")
@click.option("--idle", "idle_s", default=1.0, show_default=True, type=FiniteFloat(),
              help="With --requests: idle seconds between snapshots 0 and 1 (the "
                   "counters' background).")
@click.option("--repetitions", default=1, show_default=True, type=int,
              help="Run every configuration this many times in its boot (labels .r1, ...; "
                   "1-1000, as bench accept's).")
@click.option("--dry-run", is_flag=True, help="Print every external command, run nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of the table.")
@click.pass_context
def learn(ctx, src, objdir, out, guest_dir, kernel, pristine_kernel, target_spec,
          targets_file, configs, worker_sets, warmup,
          measured, min_conns, concurrency, learn_sysctl, topo_spec, memory_mib, logs,
          client_ports, lb_cpu_opt, groups_every, tunables, deadline_s, tcg_single_thread, smp, guest_sysctls,
          nic_reinit, qemu_args, per_connection, pcap, requests, connections, idle_s,
          repetitions, dry_run, as_json):
    """Learning at accept(2) on the guest's RSS NIC: shares, co-location, predictions."""
    if logs:  # re-analysing saved logs reads only these
        refuse_given(ctx, [n for n in ctx.params if n not in ("logs", "topo_spec", "as_json",
                                                              "out")],
                     "not with --log: saved logs are only analysed (--topology, --out and "
                     "--json apply)")
    if not requests:
        refuse_given(ctx, ["connections", "idle_s"], "only with --requests N")
    else:
        refuse_given(ctx, ["measured", "min_conns"], "not with --requests: the request "
                     "phase takes the measured phase's place")
    check_no_repeats(configs, "--config", "each configuration runs once")
    check_no_repeats(worker_sets, "--workers", "each worker set runs once")
    shape = guest_shape(target_spec, targets_file, memory_mib is not None)
    req = request.LearnRequest(
        src=src, objdir=objdir, out=out, guest_dir=guest_dir, kernel=kernel,
        pristine_kernel=pristine_kernel, configs=configs, worker_sets=worker_sets,
        warmup=warmup, measured=measured, min_conns=min_conns, concurrency=concurrency,
        learn_sysctl=learn_sysctl, topo_spec=topo_spec, memory_mib=memory_mib, logs=logs,
        client_ports=client_ports, lb_cpu_opt=lb_cpu_opt,
        groups_every=groups_every, tunables=tunables,
        deadline_s=deadline_s, tcg_single_thread=tcg_single_thread, smp=smp,
        guest_sysctls=guest_sysctls, nic_reinit=nic_reinit, qemu_args=qemu_args,
        per_connection=per_connection, pcap=pcap, dry_run=dry_run, shape=shape,
        requests=requests, connections=connections, idle_s=idle_s, repetitions=repetitions)
    try:
        chk = request.check(req)
        if logs:
            for p in logs:
                check_input(p, "--log")
            check_distinct_inputs(logs, "--log")
            analyses = [_analyze_saved(p, topo_spec) for p in logs]
            first = {}  # run label -> the log it was first found in
            for a in analyses:  # input that is not what --log takes: exit 2, one line
                if not a["runs"]:
                    raise DataError(a["errors"][0])
                for label in a["runs"]:
                    if label in first:  # the report is keyed by label: one would hide the other
                        raise BadOption(f"{a['log']}: run {label} is in {first[label]} too: "
                                        "the report keys runs by label; give one of them",
                                        "--log")
                    first[label] = a["log"]
            sys.exit(report(analyses, out, as_json))
        setup = session.prepare(req, chk)
        if dry_run:
            lines = list(session.dry_run_lines(req, chk, setup))
            click.echo(json.dumps({"dry_run": True, "lines": lines}, indent=2) if as_json
                       else "\n".join(lines))
            sys.exit(0)
        analyses = session.execute(req, chk, setup, echo=lambda s: click.echo(s, err=True))
    except request.LearnUsage as exc:
        raise UsageError(str(exc)) from None
    except request.LearnFailed as exc:
        raise click.ClickException(str(exc)) from None
    sys.exit(report(analyses, setup.out, as_json))
