"""``rxl run`` (the main job), ``rxl parse`` and ``rxl doctor``.

``rxl run --src DIR`` goes through seven stages (functions of
:mod:`rxl.verify.stages`, chained by :mod:`rxl.verify.pipeline`), each
recorded with a status (``ok``, ``failed``, ``skipped``, ``planned``), wall
seconds and its log:

    series  the tree: a FreeBSD source tree with the series applied
            (``rxl series apply --src DIR``), its HEAD and local changes
    build   the patched kernel (rxl.tree.build, issue 3), unless --kernel is given
    world   the guest userland and the ATF programs (rxl.tree.world)
    image   one guest root per boot (rxl.guest.image): patched, spread, pristine
    boot    QEMU per root, console teed and watched (rxl.guest.qemu, rxl.guest.console)
    parse   console logs -> results (rxl.verify.parse)
    report  report.json, junit.xml, report.txt (rxl.verify.report)

A failing stage prints one line naming its log and the run exits non-zero;
nothing is deleted (``--out`` keeps every log and report). ``--dry-run``
prints every command the run would execute, in order, and exits 0.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import List, Optional, Tuple

import click

from rxl import paths
from rxl.verify import parse as parse_mod
from rxl.verify import pipeline, stages
from rxl.verify import report as report_mod
from rxl.verify.job import RunOptions, echo_err
from rxl.verify import doctor as doctor_mod
from rxl.verify.preflight import CHECKED, check_options

#: Default guest staging area and log root (this machine's layout).
DEFAULT_GUEST_DIR = paths.GUEST
DEFAULT_LOG_ROOT = paths.LOGS


# -------------------------------------------------------------------- click
def _default_out() -> str:
    return str(Path(DEFAULT_LOG_ROOT) / time.strftime("guest-run-%Y%m%d-%H%M%S"))


#: The series' own ATF tests in this repository (tests/atf/*_test.c).
REPO_ATF_DIR = Path(__file__).resolve().parents[3] / "tests" / "atf"


def series_tests(atf_dir: Optional[str]) -> List[Tuple[str, str]]:
    """(program name, C source) for every ``*_test.c`` in ``atf_dir`` (sorted).

    ``''`` (or None) means no series tests: []. A directory that does not
    exist or holds no ``*_test.c`` is an error (click.BadParameter): the
    series' own tests must never drop out of the verdict silently.
    """
    if not atf_dir:
        return []
    d = Path(atf_dir)
    if not d.is_dir():
        raise click.BadParameter(f"{atf_dir}: no such directory ('' for no series tests)",
                                 param_hint="'--atf-dir'")
    found = [(p.stem, str(p)) for p in sorted(d.glob("*_test.c"))]
    if not found:
        raise click.BadParameter(f"{atf_dir}: no *_test.c in it ('' for no series tests)",
                                 param_hint="'--atf-dir'")
    return found


def _parse_test(value: str) -> Tuple[str, str]:
    name, sep, path = value.partition("=")
    if not sep or not name or not path:
        raise click.BadParameter(f"{value!r}: expected NAME=PATH/TO/test.c", param_hint="'--test'")
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", name):
        raise click.BadParameter(f"{value!r}: NAME must be a plain file name "
                                 "(letters, digits, '_', '.', '-')", param_hint="'--test'")
    return name, os.path.abspath(path)


def _parse_atf_var(value: str) -> Tuple[str, str]:
    """``--atf-var NAME=VALUE`` -> (name, value); click.BadParameter if it cannot be passed."""
    from rxl.guest.image import check_atf_var
    name, sep, val = value.partition("=")
    try:
        if not sep:
            raise ValueError("expected NAME=VALUE")
        check_atf_var(name, val)
    except ValueError as exc:
        raise click.BadParameter(f"{value!r}: {exc}", param_hint="'--atf-var'") from None
    return name, val


def _target(spec: Optional[str], targets_file: Optional[str], install_kernel: bool):
    """``--target`` -> (rxl.guest.ssh.SSHTarget or None, own-guest Shape or None)."""
    if spec is None:
        if install_kernel:
            raise click.BadParameter("needs an SSH target (--target)",
                                     param_hint="'--install-kernel'")
        return None, None
    from rxl.guest import targets as targets_mod
    try:
        t = targets_mod.resolve(spec, targets_file)
    except targets_mod.TargetsError as exc:
        raise click.ClickException(str(exc)) from None
    except (KeyError, ValueError) as exc:  # no such name; a malformed ssh:// URL
        raise click.BadParameter(exc.args[0], param_hint="'--target'") from None
    if t.kind == "qemu":
        if install_kernel:
            raise click.BadParameter(f"{spec} is the own QEMU guest: it boots the kernel it "
                                     "is given (--kernel)", param_hint="'--install-kernel'")
        return None, t.shape
    try:
        import paramiko  # noqa: F401
    except ImportError:
        raise click.ClickException("an SSH target needs paramiko: pip install 'rxl[guest]' "
                                   "(or pip install paramiko)") from None
    st = t.ssh_target()
    from rxl.verify import guestup
    key = guestup.own_host_key(st.host, st.port)
    if key:  # the guest `rxl guest up` started: trust the key it generated
        import dataclasses
        st = dataclasses.replace(st, own_host_key=key, name=f"own guest {st.url}")
    return st, None


@click.command("run")
@click.option("--src", default=None,
              help="FreeBSD source tree: a git clone holding patches/BASE's commit (the "
                   "series is applied in a work clone under $RXL_WORK unless it already "
                   "is), or a tree with the series' files [default: fetch the base].")
@click.option("--base-url", default=None,
              help="Without --src: fetch the base from this URL or local repository "
                   "[default: $RXL_BASE_URL, else GitHub's copy of patches/BASE's "
                   "repository].")
@click.option("--check-only", is_flag=True,
              help="Check --src and every option, say where the trees come from, run "
                   "nothing (make run does this before installing anything).")
@click.option("--objdir", default=paths.OBJDIR, show_default=True, help="MAKEOBJDIRPREFIX.")
@click.option("--out", default=None, help="Directory for logs and reports "
              "[default: $RXL_WORK/logs/guest-run-<time>].")
@click.option("--guest-dir", default=DEFAULT_GUEST_DIR, show_default=True,
              help="Guest roots and test binaries go to <guest-dir>/<name of --out>/.")
@click.option("--kernel", default=None, help="Patched kernel to boot (skips the build stage).")
@click.option("--pristine-kernel", default=None, help="Kernel built from the base, for comparison.")
@click.option("--pristine-src", default=None,
              help="Checkout of the base (e.g. `git clone --branch main <repo> DIR`): its "
                   "kernel is built with the same config, objdir <guest-dir>/obj-<name of DIR>.")
@click.option("--auto-pristine/--no-auto-pristine", default=True, show_default=True,
              help="Without --pristine-kernel/--pristine-src: check out patches/BASE's "
                   "commit from --src (git clone --shared) and build it.")
@click.option("--spread/--no-spread", default=True, show_default=True,
              help="Also boot the patched kernel with dev.em.0.iflib.core_spread=1 "
                   "and =2 (boots spread, spread2).")
@click.option("--tests-on-spread", is_flag=True,
              help="Run the ATF suite on the spread boot too (default: placement only).")
@click.option("--case-timeout", default=300, show_default=True,
              help="Seconds per ATF case (1 to 86400).")
@click.option("--atf-var", "atf_vars", multiple=True, metavar="NAME=VALUE",
              help="ATF configuration variable for every case (-v NAME=VALUE), e.g. "
                   "churn_seconds=200 for the churn cases' duration (repeatable).")
@click.option("--new-program", "new_programs", multiple=True,
              help="Basename of a test program of the run (from --atf-dir or --test) "
                   "that must fail on pristine; the --atf-dir ones are already.")
@click.option("--test", "tests", multiple=True,
              help="Extra ATF C test: NAME=PATH.c (the file must exist).")
@click.option("--atf-dir", default=str(REPO_ATF_DIR), show_default=True,
              help="The series' ATF tests: every *_test.c is built and counted as new "
                   "(must pass patched, fail pristine). '' for none; a directory that does "
                   "not exist or holds no *_test.c is an error.")
@click.option("--memory", "memory_mib", default=1024, show_default=True,
              help="Guest MiB (>= 128 per NUMA node, 2 nodes).")
@click.option("--rebuild-world", is_flag=True, help="Ignore the world stamp.")
@click.option("--target", "target_spec", default=None, metavar="NAME|ssh://USER@HOST[:PORT]",
              help="Run on a FreeBSD 14 machine over SSH (a URL, or a bhyve/box target of "
                   "--targets), or the own guest in a named shape (a kind: qemu target).")
@click.option("--targets", "targets_file", default=None,
              help="Targets file [default: $RXL_WORK/targets.yaml].")
@click.option("--install-kernel", is_flag=True,
              help="With an SSH target: copy the patched kernel (--kernel, else built) to a "
                   "new /boot/kernel.rxl-<id>/, boot it once (nextboot -k), check it runs.")
@click.option("--workdir", default="/var/tmp/rxl", show_default=True,
              help="With an SSH target: its work directory (the only one the run writes).")
@click.option("--programs", "programs_dir", default=None,
              help="With an SSH target: ATF programs built already (every executable in "
                   "DIR) instead of the world stage.")
@click.option("--kyua/--no-kyua", default=None,
              help="With an SSH target: run the cases with kyua [default: when it has kyua].")
@click.option("--transport", type=click.Choice(["auto", "ssh", "serial"]), default="auto",
              show_default=True, help="The own guest: the cases over SSH after boot (sshd "
              "userland built on first use) or run by the rc on the serial console; auto: ssh "
              "if the userland is built, a boot whose SSH never answers (no panic) falling back.")
@click.option("--ssh-wait", default=300, show_default=True, type=click.IntRange(1, 3600),
              help="Over SSH: seconds a boot waits for sshd (then auto falls back).")
@click.option("--dry-run", is_flag=True, help="Print every command, run nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print report.json to stdout.")
def run(src, base_url, check_only, objdir, out, guest_dir, kernel, pristine_kernel,
        pristine_src, auto_pristine, spread, tests_on_spread, case_timeout,
        atf_vars, new_programs, tests, atf_dir, memory_mib, rebuild_world, target_spec,
        targets_file, install_kernel, workdir, programs_dir, kyua, transport, ssh_wait,
        dry_run, as_json):
    """Build, boot a two-socket QEMU guest and run the ATF suite, patched vs pristine.

    With --target ssh://... (or a named bhyve/box target) the suite runs on
    that machine instead: see rxl.verify.remote_stages and the README.
    """
    stests = series_tests(atf_dir)
    ssh_target, shape = _target(target_spec, targets_file, install_kernel)
    opts = RunOptions(
        src=os.path.abspath(src) if src else None, objdir=os.path.abspath(objdir),
        out=os.path.abspath(out or _default_out()), guest_dir=os.path.abspath(guest_dir),
        kernel=os.path.abspath(kernel) if kernel else None,
        pristine_kernel=os.path.abspath(pristine_kernel) if pristine_kernel else None,
        spread=spread, case_timeout=case_timeout,
        atf_vars=tuple(_parse_atf_var(v) for v in atf_vars),
        new_programs=tuple(new_programs) + tuple(n for n, _ in stests),
        extra_tests=tuple(stests) + tuple(_parse_test(t) for t in tests),
        memory_mib=memory_mib,
        dry_run=dry_run, rebuild_world=rebuild_world,
        pristine_src=os.path.abspath(pristine_src) if pristine_src else None,
        tests_on_spread=tests_on_spread, auto_pristine=auto_pristine and ssh_target is None,
        target=ssh_target, install_kernel=install_kernel, workdir=workdir, kyua=kyua,
        shape=shape, programs_dir=os.path.abspath(programs_dir) if programs_dir else None,
        base_url=base_url, work=str(paths.work_root()), lock=str(paths.work_root() / "build.lock"),
        ssh_wait=float(ssh_wait), ssh_fallback=transport == "auto")
    kind = check_options(opts)
    if check_only:
        if opts.src:
            click.echo(f"--src {opts.src}: {CHECKED[kind]}")
        else:
            from rxl.tree import base as base_mod
            from rxl.tree.patch import parse_base
            b = parse_base((base_mod.REPO_PATCHES / "BASE").read_text())
            click.echo(f"no --src: the base {b.commit[:12]} will be fetched from "
                       f"{base_mod.base_url(b.repository, base_url)} into {opts.work}")
        click.echo("options checked: nothing run")
        return
    if ssh_target is not None:
        from rxl.verify import remote_stages
        ok, st = pipeline.run(opts, steps=remote_stages.ALL)
    else:
        from rxl.verify import sshrun
        ssh = sshrun.resolve(transport, opts.src, echo_err) == "ssh"
        ok, st = pipeline.run(opts, steps=sshrun.ALL) if ssh else pipeline.run(opts)
    if dry_run:
        for rec in st.records:
            click.echo(f"# {rec.name}: {rec.status}" + (f" ({rec.detail})" if rec.detail else ""))
            for c in rec.commands:
                click.echo(c)
        sys.exit(0 if ok else 1)
    if as_json:
        click.echo(stages.json_text(st))
    elif st.runs:
        click.echo(report_mod.table(st.runs, st.verdict, st.fallbacks))
    click.echo(f"logs and reports: {opts.out}", err=True)
    sys.exit(0 if ok and st.verdict is not None and st.verdict.ok else 1)


@click.group("guest")
def guest():
    """The own QEMU guest left running as an SSH target (needs the sshd userland)."""


@guest.command("up")
@click.option("--src", default="/usr/src", show_default=True, help="FreeBSD source tree.")
@click.option("--kernel", required=True, help="Kernel to boot.")
@click.option("--build", is_flag=True, help="Build the sshd userland first (under the lock).")
@click.option("--kyua", is_flag=True, help="With --build: kyua too (lutok, lua, sqlite3, libc++).")
@click.option("--atf-dir", default=str(REPO_ATF_DIR), show_default=True,
              help="The series' ATF tests put in the guest ('' for FreeBSD's own only).")
@click.option("--dry-run", is_flag=True, help="Print what would run.")
def guest_up(src, kernel, build, kyua, atf_dir, dry_run):
    """Boot the guest with sshd, wait for SSH, print its ssh:// address."""
    from rxl.verify import guestup
    src, kernel = os.path.abspath(src), os.path.abspath(kernel)
    bad = guestup.check_up(src, kernel, build=build, kyua=kyua)
    if bad:
        raise click.BadParameter(bad[1], param_hint=f"'{bad[0]}'")
    if dry_run:
        click.echo("\n".join(guestup.dry_run_lines(src, kernel, build=build, kyua=kyua)))
        return
    from rxl.tree import sshworld
    from rxl.tree import world as world_mod
    tests_dir = Path(paths.GUEST) / "up" / "tests"
    try:
        if build:
            guestup.build(src, echo=echo_err, kyua=kyua)
        built = world_mod.build_tests(src, sshworld.default_objdir(), str(tests_dir),
                                      logdir=str(tests_dir),
                                      extra_sources=series_tests(atf_dir),
                                      echo=echo_err)
        st = guestup.up(src, kernel, echo=echo_err,
                        tests={n: str(b) for n, b in built.items()})
    except (guestup.GuestUpError, RuntimeError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{st['url']}  (SSH after {st['boot_to_ssh_seconds']} s; console {st['log']})")


@guest.command("down")
def guest_down():
    """Stop the guest `rxl guest up` started."""
    from rxl.verify import guestup
    try:
        for line in guestup.down():
            click.echo(line)
    except guestup.GuestUpError as exc:
        raise click.ClickException(str(exc)) from None


@click.command("parse")
@click.argument("log")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of the table.")
def parse(log, as_json):
    """Re-read a saved guest console LOG (a file, - for stdin, or a FIFO) and print its results.

    Exit 0 only if the run completed, at least one case ran, and no case
    failed, broke, timed out or crashed.
    """
    from rxl.decide import checks
    checks.check_input(log, "LOG")  # a file, - (stdin) or a FIFO such as <(...)
    try:
        res = parse_mod.parse_console(checks.read_input(log).splitlines())
    except OSError as exc:
        raise click.ClickException(f"{checks.show(log)}: {exc.strerror}") from None
    label = res.label or ("stdin" if log == "-" else Path(log).stem)
    if as_json:
        click.echo(json.dumps(res.to_dict(), indent=2, default=str))
    else:
        click.echo(report_mod.table({label: res}))
    good = ("passed", "skipped", "expected_failure")
    if res.outcome == "completed" and not res.cases:
        click.echo(f"{log}: no test case ran", err=True)
    sys.exit(0 if res.outcome == "completed" and res.cases
             and all(c.status in good for c in res.cases) else 1)


@click.command("doctor")
@click.option("--install", is_flag=True,
              help="Install every missing host package: apt-get update once, then one "
                   "apt-get install (as root); otherwise print the exact commands.")
@click.option("--json", "as_json", is_flag=True,
              help='Print [{"name", "ok", "package", "stages", "note", "install"}] as JSON '
                   "(exit 1 if any is missing).")
@click.option("--for", "mode", type=click.Choice(doctor_mod.MODES), default="guest",
              show_default=True,
              help="guest: rxl run with the own QEMU guest; ssh: rxl run --target (adds "
                   "paramiko); bhyve: rxl vm --start (a FreeBSD host's bhyve only); bench: "
                   "rxl bench accept's eBPF setups (adds root and Linux >= 5.12).")
def doctor(install, as_json, mode):
    """Check what every stage needs on the host; print how to install what is missing."""
    results = doctor_mod.check(mode=mode)
    if install:
        results, why = doctor_mod.install_missing(results, mode=mode,
                                                  echo=lambda s: click.echo(s, err=True))
        if why:
            raise click.ClickException(why)
    missing = [r for r in results if not r.ok]
    if as_json:
        click.echo(json.dumps([{"name": r.need.name, "ok": r.ok, "package": r.need.package,
                                "stages": list(r.need.stages), "note": r.note,
                                "install": r.install_line()} for r in results], indent=2))
        sys.exit(1 if missing else 0)
    for r in results:
        click.echo(doctor_mod.row(r))
    if not missing:
        return
    for line in doctor_mod.advice(missing, python=sys.executable):
        click.echo(line, err=True)
    raise click.ClickException(f"{len(missing)} missing: "
                               + ", ".join(r.need.name for r in missing))


@click.command("inspect")
@click.argument("source")
@click.option("--json", "as_json", is_flag=True,
              help="Print the groups as a JSON list instead of a table.")
def inspect_cmd(source, as_json):
    """Read net.inet.tcp.reuseport_lb.groups from SOURCE (a dump of the
    sysctl, or a console log holding one) and show each group's members,
    receiving CPUs, window counts and map ranges (docs/design.md).
    SOURCE may be - (stdin) or a FIFO, e.g. <(ssh host sysctl -n ...)."""
    from rxl.decide import checks
    from rxl.verify import inspect as inspect_mod
    checks.check_input(source, "SOURCE")
    try:
        groups = inspect_mod.parse(checks.read_input(source).splitlines())
    except OSError as exc:
        raise click.ClickException(f"{checks.show(source)}: {exc.strerror}") from None
    except inspect_mod.InspectError as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(json.dumps(inspect_mod.as_json(groups), indent=2))
    else:
        click.echo(inspect_mod.render(groups))
