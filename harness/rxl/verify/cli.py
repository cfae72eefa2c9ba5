"""``rxl run`` (the main job), ``rxl parse`` and ``rxl inspect``.

``rxl run --src DIR`` goes through the stages of one machine of the run
interface (:mod:`rxl.verify.machine`), chained by :mod:`rxl.verify.pipeline`,
each recorded with a status (``ok``, ``failed``, ``skipped``, ``planned``),
wall seconds and its log.  On the own guest:

    series  the tree: a FreeBSD source tree with the series applied
            (``rxl series apply --src DIR``), its HEAD and local changes
    build   the patched kernel (rxl.tree.build), unless --kernel is given
    world   the guest userland and the ATF programs (rxl.tree.world)
    image   one guest root per boot (rxl.guest.image): patched, spread, pristine
    boot    QEMU per root, console teed and watched (rxl.guest.qemu, rxl.guest.console)
    parse   console logs -> results (rxl.verify.parse)
    report  report.json, junit.xml, report.txt (rxl.verify.report)

and on an SSH target (``--target``) ``target`` and ``tests`` in place of
image, boot and parse (:mod:`rxl.verify.target`).  A failing stage prints
one line naming its log and the run exits non-zero; nothing is deleted
(``--out`` keeps every log and report). ``--dry-run`` prints every command
the run would execute, in order, and exits 0.

The options come in groups, each filling one request type
(:mod:`rxl.verify.request`); a group that cannot apply to the machine asked
for is refused, naming the option (:func:`refuse_other_modes`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Dict, Optional, Tuple

import click

from rxl import paths
from rxl.cli.groups import OptionGroup, objdir_option, option, refuse_given
from rxl.cli.options import EmptyIsNone, check_input, read_input, read_limited
from rxl.cli.surface import command
from rxl.errors import BadOption, DataError, HostError, RxlError, counted, show
from rxl.guest import targets
from rxl.guest import up as guest_up
from rxl.guest.image import check_atf_var
from rxl.guest.ssh import SSHTarget, TargetError
from rxl.guest.targets import Shape
from rxl.tree import base as tree_base
from rxl.tree.patch import parse_base
from rxl.tree.world import PROGRAM_NAME, PROGRAM_NAME_RULE, REPO_ATF_DIR, check_atf_dir
from rxl.verify import inspect, ownguest, parse, pipeline, schedule
from rxl.verify import report as report_mod
from rxl.verify.machine import Machine
from rxl.verify.preflight import CHECKED, CHECKED_TARGET, check_request, target_needs_tree
from rxl.verify.request import RunRequest
from rxl.verify.target import Target, programs_in


def _default_out() -> str:
    return str(Path(paths.LOGS) / time.strftime("guest-run-%Y%m%d-%H%M%S"))


def _parse_test(value: str) -> Tuple[str, str]:
    name, sep, path = value.partition("=")
    if not sep or not name or not path:
        raise click.BadParameter(f"{value!r}: expected NAME=PATH/TO/test.c", param_hint="'--test'")
    if not PROGRAM_NAME.fullmatch(name):  # an --atf-dir program's rule too
        raise click.BadParameter(f"{value!r}: NAME must be {PROGRAM_NAME_RULE}",
                                 param_hint="'--test'")
    return name, os.path.abspath(path)


def _parse_atf_var(value: str) -> Tuple[str, str]:
    """``--atf-var NAME=VALUE`` -> (name, value); click.BadParameter if it cannot be passed."""
    name, sep, val = value.partition("=")
    try:
        if not sep:
            raise ValueError("expected NAME=VALUE")
        check_atf_var(name, val)
    except ValueError as exc:
        raise click.BadParameter(f"{value!r}: {exc}", param_hint="'--atf-var'") from None
    return name, val


def _parse_atf_vars(values) -> Tuple[Tuple[str, str], ...]:
    """Every ``--atf-var``, each NAME once: atf takes the last ``-v`` of a
    name, so a second one would drop the first without a word."""
    out: Dict[str, str] = {}
    for value in values:
        name, val = _parse_atf_var(value)
        if name in out:
            raise click.BadParameter(f"{name} given twice ({name}={out[name]}, "
                                     f"{show(value)}): give each NAME once",
                                     param_hint="'--atf-var'")
        out[name] = val
    return tuple(out.items())


def resolve_target(spec: Optional[str], targets_file: Optional[str],
                   install_kernel: bool) -> Tuple[Optional[SSHTarget], Optional[Shape]]:
    """``--target`` -> (the SSH target or None, the own guest's named shape or None)."""
    if spec is None:
        if install_kernel:
            raise click.BadParameter("needs an SSH target (--target)",
                                     param_hint="'--install-kernel'")
        t = targets.default_guest()  # the targets file's own guest, if it gives one
        if t is not None:
            targets.check_host_memory(t, None)  # its memory_mib is the guest's
        return None, None if t is None else t.shape
    try:
        t = targets.resolve(spec, targets_file)
    except targets.TargetsError:
        raise  # the file's own mistake (a DataError: exit 2), not --target's
    except (KeyError, ValueError, TargetError) as exc:  # no such name; a malformed ssh:// URL
        raise click.BadParameter(exc.args[0], param_hint="'--target'") from None
    if t.kind == "qemu":
        if install_kernel:
            raise click.BadParameter(f"{spec} is the own QEMU guest: it boots the kernel it "
                                     "is given (--kernel)", param_hint="'--install-kernel'")
        targets.check_host_memory(t)  # its memory_mib is the guest's (--memory is refused)
        return None, t.shape
    try:
        import paramiko  # noqa: F401  (an optional dependency: rxl[guest])
    except ImportError:
        raise HostError("an SSH target needs paramiko: pip install 'rxl[guest]' "
                        "(or pip install paramiko)") from None
    st = t.ssh_target()
    key = guest_up.own_host_key(st.host, st.port)
    if key:  # the guest `rxl guest up` started: trust the key it generated
        st = dataclasses.replace(st, own_host_key=key, name=f"own guest {st.url}")
    return st, None


# ------------------------------------------------------- rxl run's option groups
#: --out, --dry-run, --json, --check-only: every machine (ReportRequest).
report_opts = OptionGroup(
    "report",
    option("--check-only", is_flag=True,
           help="Check --src and every option, say where the trees come from, run "
                "nothing (make run does this before installing anything)."),
    option("--out", default=None, help="Directory for logs and reports "
           "[default: $RXL_WORK/logs/guest-run-<time>]."),
    option("--dry-run", is_flag=True, help="Print every command, run nothing."),
    option("--json", "as_json", is_flag=True, help="Print report.json to stdout (with "
           "--dry-run: the planned stages and their commands; with --check-only: what "
           "was checked)."))
#: Where the tree comes from: every machine (TreeRequest).
tree_opts = OptionGroup(
    "tree",
    option("--src", default=None,
           help="FreeBSD source tree: a git clone holding patches/BASE's commit (the "
                "series is applied in a work clone under $RXL_WORK unless it already "
                "is), or a tree with the series' files [default: fetch the base]."),
    option("--base-url", default=None,
           help="Without --src: fetch the base from this URL or local repository "
                "[default: $RXL_BASE_URL, else GitHub's copy of patches/BASE's "
                "repository]."),
    option("--no-series", "no_series", is_flag=True,
           help="Build and boot the tree as it is, without the series (a pristine tree, "
                "a tree of another release): FreeBSD's own cases must pass, the report "
                "says the series' cases are absent; no pristine or spread boot."))
#: Where builds and staged files go: every machine (BuildRequest's directories).
dirs_opts = OptionGroup(
    "dirs",
    option("--guest-dir", default=paths.GUEST, show_default=True,
           help="Guest roots and test binaries go to <guest-dir>/<name of --out>/."))
#: The kernels: the own guest (BuildRequest); --kernel also a target's --install-kernel.
kernel_opts = OptionGroup(
    "kernels",
    option("--kernel", default=None, help="Patched kernel to boot (skips the build stage)."),
    option("--pristine-kernel", default=None, help="Kernel built from the base, for comparison."),
    option("--pristine-src", default=None,
           help="Checkout of the base (e.g. `git clone --branch main <repo> DIR`): its "
                "kernel is built with the same config, objdir <guest-dir>/obj-<name of DIR>."),
    option("--auto-pristine/--no-auto-pristine", default=True, show_default=True,
           help="Without --pristine-kernel/--pristine-src: check out patches/BASE's "
                "commit from --src (git clone --shared) and build it."))
#: The own QEMU guest (GuestRequest).
guest_opts = OptionGroup(
    "guest",
    option("--spread/--no-spread", default=True, show_default=True,
           help="Also boot the patched kernel with the guest NIC's "
                "dev.<driver>.0.iflib.core_spread=1 (boot spread)."),
    option("--tests-on-spread", is_flag=True,
           help="Run the ATF suite on the spread boot too (default: placement only)."),
    option("--modules", is_flag=True,
           help="Also boot MINIMAL with its iflib and NIC modules (built and link-checked "
                "first): kldload if_em must load and attach the NIC (rxl.verify.modboot)."),
    option("--memory", "memory_mib", default=1024, show_default=True,
           help="Guest MiB (>= 128 per NUMA node, 2 nodes) of the default guest; a "
                f"--target shape sets its own (guest: {targets.DEFAULT_SHAPE['memory_mib']}, "
                "as rxl learn boots it), as does a guest the targets file gives (then also "
                "the default)."),
    option("--transport", type=click.Choice(["auto", "ssh", "serial"]), default="auto",
           show_default=True, help="The own guest: the cases over SSH on kyua after boot (the "
           "sshd userland with kyua built on first use) or run by the rc on the serial "
           "console; auto: SSH, a boot whose SSH never answers (no panic) falling back to "
           "the console (serial only without paramiko)."),
    option("--ssh-wait", default=300, show_default=True, type=click.IntRange(1, 3600),
           help="Over SSH: seconds a boot waits for sshd (then auto falls back)."),
    option("--boot-jobs", default=None, type=click.IntRange(1, schedule.MAX_JOBS),
           help="Boots (patched, spread, pristine, --modules') run at once, each with its "
                "own root, logs and SSH port; 1: one after another, in that order "
                "[default: os.cpu_count(), a TCG guest keeping about one CPU busy]."))
#: The ATF programs and their cases: every machine (CasesRequest).
cases_opts = OptionGroup(
    "cases",
    option("--case-timeout", default=300, show_default=True,
           help="Seconds per ATF case (1 to 86400)."),
    option("--atf-var", "atf_vars", multiple=True, metavar="NAME=VALUE",
           help="ATF configuration variable for every case (-v NAME=VALUE), e.g. "
                "churn_seconds=200 for the churn cases' duration (repeatable)."),
    option("--new-program", "new_programs", multiple=True,
           help="Basename of a test program of the run (from --atf-dir or --test) "
                "that must fail on pristine; the --atf-dir ones are already."),
    option("--test", "tests", multiple=True,
           help="Extra ATF C test: NAME=PATH.c (the file must exist)."),
    option("--atf-dir", default=str(REPO_ATF_DIR), show_default=True, cls=EmptyIsNone,
           help="The series' ATF tests: every *_test.c is built and counted as new "
                "(must pass patched, fail pristine). '' for none; a directory that does "
                "not exist or holds no *_test.c is an error."),
    option("--rebuild-world", is_flag=True, help="Ignore the world stamp."))
#: A machine reached over SSH (TargetRequest).
target_opts = OptionGroup(
    "target",
    option("--target", "target_spec", default=None, metavar="NAME|ssh://USER@HOST[:PORT]",
           help="Run on a FreeBSD 15 machine over SSH (by kern.osreldate; a URL, or a "
                "bhyve/box target of "
                "--targets), or the own guest in a named shape (a kind: qemu target)."),
    option("--targets", "targets_file", default=None,
           help="Targets file [default: $RXL_WORK/targets.yaml]."),
    option("--install-kernel", is_flag=True,
           help="With an SSH target: copy the patched kernel (--kernel, else built) to a "
                "new /boot/kernel.rxl-<id>/, boot it once (nextboot -k), check it runs."),
    option("--programs", "programs_dir", default=None,
           help="With an SSH target: ATF programs built already (every executable in "
                "DIR) instead of the world stage."))
#: An SSH session's work directory and kyua: a target, and the own guest over SSH.
session_opts = OptionGroup(
    "session",
    option("--workdir", default="/var/tmp/rxl", show_default=True,
           help="Over SSH (a target, or the own guest): the work directory there (the "
                "only one the run writes)."),
    option("--kyua/--no-kyua", default=None,
           help="Over SSH: run the cases with kyua [default: the own guest yes, its "
                "userland has kyua; a target when it has kyua]."))


def refuse_other_modes(ctx: click.Context, ssh_target: Optional[SSHTarget],
                       shape: Optional[Shape]) -> None:
    """Refuse (usage error naming both options) an option that cannot apply to
    what was asked: on an SSH target the own guest's options (and ``--kernel``
    without ``--install-kernel``), and the tree's when none is used
    (``--programs`` and no kernel to build); on the own guest a target's, the
    SSH session's with ``--transport serial``, and ``--memory`` when a named
    shape sets the guest; anywhere options that contradict each other
    (``--base-url`` with ``--src``, ``--pristine-src`` with
    ``--pristine-kernel``, ``--auto-pristine`` with either, ``--tests-on-spread``
    with ``--no-spread``)."""
    p = ctx.params
    if p["src"] is not None:
        refuse_given(ctx, ("base_url",), "only without --src (where the base is fetched "
                                         "from); --src gives the tree")
    if p["pristine_kernel"] is not None:
        refuse_given(ctx, ("pristine_src",), "not with --pristine-kernel: that kernel is "
                                             "booted, nothing is built from this tree")
    if p["pristine_kernel"] is not None or p["pristine_src"] is not None:
        refuse_given(ctx, ("auto_pristine",), "not with --pristine-kernel or "
                                              "--pristine-src, which give the pristine side")
    if not p["spread"]:
        refuse_given(ctx, ("tests_on_spread",), "not with --no-spread: there is no spread "
                                                "boot to run the suite on")
    if p["no_series"]:
        refuse_given(ctx, ("kernel", "pristine_kernel", "pristine_src", "auto_pristine",
                           "spread", "tests_on_spread", "new_programs", "atf_dir"),
                     "not with --no-series: the tree is built and booted as it is, alone")
    if ssh_target is not None:
        refuse_given(ctx, ("no_series",), f"only for the own QEMU guest, not with --target "
                                          f"{ssh_target.label}")
        own = tuple(n for n in kernel_opts.params if n != "kernel") + guest_opts.params
        refuse_given(ctx, own, f"only for the own QEMU guest, not with --target "
                               f"{ssh_target.label}")
        if "://" in p["target_spec"]:  # a URL names no entry of a targets file
            refuse_given(ctx, ("targets_file",), f"only with --target NAME, not the URL "
                                                 f"{ssh_target.label}")
        if not p["install_kernel"]:
            refuse_given(ctx, ("kernel",), "with --target only with --install-kernel "
                                           "(the target's running kernel runs the cases)")
        if p["programs_dir"] is not None and (not p["install_kernel"] or p["kernel"]):
            refuse_given(ctx, ("src", "base_url", "objdir", "guest_dir", "rebuild_world",
                               "atf_dir", "tests"),
                         "no tree is used with --programs (the programs are given) and no "
                         "kernel to build")
        return
    refuse_given(ctx, ("programs_dir",), "only with an SSH target (--target)")
    if not p["target_spec"]:
        refuse_given(ctx, ("targets_file",), "only with --target NAME")
    if p["transport"] == "serial":
        refuse_given(ctx, session_opts.params + ("ssh_wait",),
                     "only over SSH (an SSH target, or --transport ssh or auto), not with "
                     "--transport serial")
    if shape is not None:
        who = f"--target {p['target_spec']}" if p["target_spec"] else \
            f"the default guest, {show(str(targets.default_path()))}'s {targets.DEFAULT_TARGET},"
        refuse_given(ctx, ("memory_mib",), f"{who} is a guest shape: its memory_mib sets "
                                           "the guest's memory")


def machine_for(ssh_target: Optional[SSHTarget], transport: str, src: Optional[str],
                series: bool = True) -> Machine:
    """The machine of the run interface the options ask for; ``--transport auto``
    says which it took and why (stderr), of the tree the run builds (``series``
    False: ``--no-series``, ``src`` as it is)."""
    if ssh_target is not None:
        return Target()
    if ownguest.resolve(transport, src, pipeline.echo_err, series) == "ssh":
        return ownguest.SSHGuest()
    return ownguest.SerialGuest()


@command("run")
@tree_opts
@objdir_option
@dirs_opts
@kernel_opts
@guest_opts
@cases_opts
@target_opts
@session_opts
@report_opts
@click.pass_context
def run(ctx, src, base_url, no_series, objdir, guest_dir, kernel, pristine_kernel, pristine_src,
        auto_pristine, spread, tests_on_spread, modules, memory_mib, transport, ssh_wait,
        boot_jobs, case_timeout,
        atf_vars, new_programs, tests, atf_dir, rebuild_world, target_spec, targets_file,
        install_kernel, programs_dir, workdir, kyua, check_only, out, dry_run, as_json):
    """Build, boot a two-socket QEMU guest and run the ATF suite, patched vs pristine.

    With --target ssh://... (or a named bhyve/box target) the suite runs on
    that machine instead: see rxl.verify.target and the README.
    """
    if check_only:  # the check stops before any command: none to print
        refuse_given(ctx, ("dry_run",), "not with --check-only: the check runs and prints "
                     "no command (--dry-run prints them all after the same check)")
    ssh_target, shape = resolve_target(target_spec, targets_file, install_kernel)
    refuse_other_modes(ctx, ssh_target, shape)
    # what --atf-dir holds is named as its own, not as --test's (guest up's check too)
    stests = [] if no_series else check_atf_dir(atf_dir)
    auto_new = tuple(n for n, _ in stests)  # the series' programs are new
    if programs_dir is not None:  # the run's programs are DIR's: one it lacks is not run
        try:
            have = programs_in(os.path.abspath(programs_dir))
            auto_new = tuple(n for n in auto_new if n in have)
        except BadOption:
            pass  # check_request refuses DIR, in its order of checks
    req = RunRequest(
        src=os.path.abspath(src) if src else None, objdir=os.path.abspath(objdir),
        out=os.path.abspath(out or _default_out()), guest_dir=os.path.abspath(guest_dir),
        kernel=os.path.abspath(kernel) if kernel else None,
        pristine_kernel=os.path.abspath(pristine_kernel) if pristine_kernel else None,
        spread=spread and not no_series, case_timeout=case_timeout, series=not no_series,
        atf_vars=_parse_atf_vars(atf_vars),
        new_programs=tuple(new_programs) + auto_new,
        extra_tests=tuple(stests) + tuple(_parse_test(t) for t in tests),
        memory_mib=memory_mib,
        dry_run=dry_run, rebuild_world=rebuild_world,
        pristine_src=os.path.abspath(pristine_src) if pristine_src else None,
        tests_on_spread=tests_on_spread,
        auto_pristine=auto_pristine and ssh_target is None and not no_series,
        target=ssh_target, install_kernel=install_kernel, workdir=workdir, kyua=kyua,
        shape=shape, programs_dir=os.path.abspath(programs_dir) if programs_dir else None,
        base_url=base_url, work=str(paths.work_root()), lock=str(paths.work_root() / "build.lock"),
        ssh_wait=float(ssh_wait), ssh_fallback=transport == "auto", modules=modules,
        boot_jobs=boot_jobs or schedule.default_jobs(), boot_jobs_default=boot_jobs is None)
    kind = check_request(req, ssh=transport != "serial", check_only=check_only)
    if check_only:
        if ssh_target is not None and not target_needs_tree(req):
            n = len(programs_in(req.programs_dir))
            says = (f"--programs {req.programs_dir}: {counted(n, 'program')}; the "
                    f"target's kernel runs {'it' if n == 1 else 'them'}")
        elif req.src:
            says = f"--src {req.src}: {CHECKED[kind]}" + (CHECKED_TARGET if ssh_target else "")
        else:
            b = parse_base((tree_base.REPO_PATCHES / "BASE").read_text())
            says = (f"no --src: the base {b.commit[:12]} will be fetched from "
                    f"{tree_base.base_url(b.repository, base_url)} into {req.work}" +
                    (", the series applied in a work clone" if req.series else
                     f", the series not applied; {CHECKED['as-is']}") +
                    (CHECKED_TARGET if ssh_target else ""))
        if as_json:
            click.echo(json.dumps({"check_only": True, "src": req.src, "src_kind": kind,
                                   "target": req.target.url if req.target else None,
                                   "doctor": "ssh" if req.target else "guest",
                                   "says": says, "ran": []}, indent=2))
        else:
            click.echo(says)
            click.echo("options checked: nothing run")
        return
    machine = machine_for(ssh_target, transport, req.src, req.series)
    ok, st = pipeline.run(req, machine.stages(req))
    if dry_run:
        if as_json:
            doc = json.loads(pipeline.json_text(st))
            click.echo(json.dumps({"dry_run": True, "ok": ok, **doc}, indent=2))
            sys.exit(0 if ok else 1)
        for rec in st.records:
            click.echo(f"# {rec.name}: {rec.status}" + (f" ({rec.detail})" if rec.detail else ""))
            for c in rec.commands:
                click.echo(c)
        sys.exit(0 if ok else 1)
    if as_json:
        click.echo(pipeline.json_text(st))
    elif st.runs:
        click.echo(report_mod.table(st.runs, st.verdict, st.fallbacks))
    click.echo(f"logs and reports: {req.out}", err=True)
    sys.exit(0 if ok and st.verdict is not None and st.verdict.ok else 1)


@command("parse")
@click.argument("log")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of the table.")
def parse_cmd(log, as_json):
    """Re-read a saved guest console LOG (a file, - for stdin, or a pipe: <(...)) and print its results.

    A log of several runs one after another (cat patched.log pristine.log)
    shows each under its label (--json: a list of runs); two runs of one
    label are refused, naming the line.  Exit 0 only if every run
    completed, at least one case ran in each, and no case failed, broke,
    timed out or crashed (a log with an END but no BEGIN is a run that
    crashed); else exit 1 after the table, with one Error: line naming
    each run that did not pass and why; exit 2 for a LOG with no ==RXL== BEGIN or END line and no
    panic or WITNESS line: not a console log.  The RX queue placement is shown
    beside the order the own guest's rule expects for the core_spread the log
    reports (0 if none), and not judged: rxl run's verdict judges it, knowing
    the core_spread each boot was booted with and that the machine was its
    own guest (a target's NIC is not judged); a log alone says neither.
    """
    check_input(log, "LOG")  # a file, - (stdin) or the pipe of <(...); no named FIFO
    try:
        runs = parse.parse_runs(parse.decode(read_limited(log, "a console log")).splitlines())
    except OSError as exc:
        raise DataError(f"{show(log)}: {exc.strerror}") from None
    first = runs[0]
    if len(runs) == 1 and not (first.begin_seen or first.end_seen or first.panic_lines
                               or first.witness_lines):
        raise DataError(f"{show(log)}: no {parse.MARK} BEGIN: not a console log")
    stem = "stdin" if log == "-" else Path(log).stem
    by_label = {}
    for res in runs:
        label = res.label or stem
        if label in by_label:
            raise DataError(f"{show(log)} line {res.begin_line}: a second run labelled "
                            f"{label} (the first began at line {by_label[label].begin_line}): "
                            "one log per run, or runs of different labels")
        by_label[label] = res
    if as_json:
        docs = [res.to_dict() for res in runs]
        click.echo(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2, default=str))
    else:
        click.echo(report_mod.table(by_label))
    good = ("passed", "skipped", "expected_failure")
    failed = [(res.label or stem, why) for res in runs if (why := _not_passed(res, good))]
    if failed:
        raise RxlError(f"{len(failed)} of {len(runs)} run{'s' * (len(runs) > 1)} did not "
                       "pass: " + "; ".join(f"{label}: {why}" for label, why in failed))


def _not_passed(res: parse.RunResult, good: Tuple[str, ...]) -> str:
    """Why ``res`` did not pass (its outcome, no case, the cases that did not
    pass by status), or "" when it passed."""
    if res.outcome != "completed":
        return f"{res.outcome} (see its notes)"
    if not res.cases:
        learn = any(f"unknown sentinel: {parse.MARK} LEARN" in n for n in res.notes)
        return "no test case ran" + (": a log of rxl learn (read it with rxl learn "
                                     "--log)" if learn else "")
    bad: Dict[str, int] = {}
    for c in res.cases:
        if c.status not in good:
            bad[c.status] = bad.get(c.status, 0) + 1
    if not bad:
        return ""
    return (", ".join(f"{k} {v}" for k, v in bad.items()) +
            f" of {len(res.cases)} case{'s' * (len(res.cases) > 1)}")


@command("inspect")
@click.argument("source")
@click.option("--json", "as_json", is_flag=True,
              help="Print the groups as a JSON list instead of a table.")
def inspect_cmd(source, as_json):
    """Read net.inet.tcp.reuseport_lb.groups from SOURCE (a dump of the
    sysctl, or a console log holding one) and show each group's members,
    receiving CPUs, window counts and map ranges (docs/design.md).
    SOURCE may be - (stdin) or a pipe, e.g. <(ssh host sysctl -n ...); an
    empty one (no bytes) is refused: the sysctl prints a line even for no group.
    A line of the view that cannot be read is an error naming it; other
    lines are counted on stderr."""
    check_input(source, "SOURCE")
    try:
        text = read_input(source, "a groups view or a console log", inspect.MAX_BYTES)
    except OSError as exc:
        raise DataError(f"{show(source)}: {exc.strerror}") from None
    if not text:  # sysctl(8) ends even an empty string with a newline: no dump
        raise DataError(f"{show(source)}: empty (no bytes): not a groups view or a console "
                        f"log ({inspect.EMPTY_WHY})")
    groups, skipped = inspect.read(text.splitlines())
    if skipped:
        click.echo(f"{show(source)}: {skipped} other line{'s' * (skipped > 1)} (not the "
                   "view) skipped", err=True)
    if as_json:
        click.echo(json.dumps(inspect.as_json(groups), indent=2))
    else:
        click.echo(inspect.render(groups))
