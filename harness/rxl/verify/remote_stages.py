"""``rxl run --target``: the pipeline's stages for a machine reached over SSH.

The same pipeline (:func:`rxl.verify.pipeline.run`), other stages:

    series  only with ``--install-kernel`` and no ``--kernel`` (the kernel is built)
    build   the patched kernel, same condition; no pristine kernel
    world   the ATF programs (and the userland they are linked against), or
            ``--programs DIR`` (built already)
    target  connect, probe (:data:`rxl.verify.remote.PROBE_COMMAND`), refuse a
            kernel without the series; with ``--install-kernel`` install it,
            reboot into it once and check it runs
    tests   copy the programs and the run script, run it (kyua when present),
            collect topology, rxq CPUs, core_spread and netisr settings
    report  report.json, junit.xml, report.txt as the guest run writes them

One kernel runs on a target, so the must-fail-on-pristine half of the
verdict is not checked (the report says so); to see it, run the same
command against the target booted with the pristine kernel and compare.
Every remote action is written to ``<out>/target-commands.log``; with
``--dry-run`` they are the stage's printed commands.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Tuple

from rxl.verify import remote as R
from rxl.verify import report as report_mod
from rxl.verify import stages
from rxl.verify.job import BASE_PROGRAMS, RunOptions, RunState, StageFailed, StageRecord

#: Seconds the target stage waits for sshd to answer before giving up.
CONNECT_WAIT = 60.0
#: The run's label in the reports: the steering tests run only on the series' kernel.
LABEL = "patched"


class _Recorder:
    """Collects each remote action for the record and ``<out>/target-commands.log``."""

    def __init__(self, opts: RunOptions):
        self.lines: List[str] = []
        self.path = None if opts.dry_run else Path(opts.out) / "target-commands.log"

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        if self.path is not None:
            with open(self.path, "a") as fh:
                fh.write(line + "\n")


def _session(opts: RunOptions, rec: _Recorder):
    from rxl.guest import ssh
    if opts.dry_run:
        return ssh.DryRun(opts.target)
    return ssh.SSHSession(opts.target, echo=rec)


def _commands(st: RunState, rec: _Recorder, since: int = 0) -> List[str]:
    s = st.remote.s
    return list(s.commands[since:]) if hasattr(s, "commands") else list(rec.lines)


def build(opts: RunOptions, st: RunState) -> StageRecord:
    """The patched kernel, only when ``--install-kernel`` needs one built."""
    if not opts.install_kernel:
        return StageRecord("build", "skipped", detail="no --install-kernel: the target's "
                                                      "running kernel is used")
    return stages.build(opts, st)


def series(opts: RunOptions, st: RunState) -> StageRecord:
    if not opts.install_kernel or opts.kernel:
        return StageRecord("series", "skipped", detail="no kernel to build")
    return stages.series(opts, st)


def world(opts: RunOptions, st: RunState) -> StageRecord:
    """The ATF programs: from ``--programs DIR`` (every executable file), else built."""
    if not opts.programs_dir:
        return stages.world(opts, st)
    d = Path(opts.programs_dir)
    found = {p.name: p for p in sorted(d.iterdir()) if p.is_file() and os.access(p, os.X_OK)} \
        if d.is_dir() else {}
    if not found:
        raise StageFailed(f"world: --programs {d}: no executable files there")
    st.tests = found
    return StageRecord("world", "skipped",
                       detail=f"--programs {d}: {', '.join(sorted(found))}")


def target(opts: RunOptions, st: RunState) -> StageRecord:
    """Connect, probe and check; with ``--install-kernel`` switch the kernel."""
    from rxl.guest.ssh import SSHError
    rec = _Recorder(opts)
    session = _session(opts, rec)
    job = R.RemoteJob(out=opts.out, tests={n: str(p) for n, p in st.tests.items()},
                      workdir=opts.workdir, label=LABEL, kyua=opts.kyua,
                      case_timeout=opts.case_timeout, atf_vars=opts.atf_vars)
    st.remote = R.RemoteRun(session, job, echo=st.echo)
    name = opts.target.label
    try:
        waited = session.wait_up(CONNECT_WAIT)
        info = st.remote.probe()
        if info is not None:
            R.check_target(info, need_series=not opts.install_kernel)
        details = [f"{name}: " + (info.summary() if info else "probe (dry run)")]
        if waited > 1:
            details.append(f"answered after {waited:.0f} s")
        if opts.install_kernel:
            kernel = st.kernel or opts.kernel
            if not kernel or (not opts.dry_run and not Path(kernel).is_file()):
                raise StageFailed(f"target: --install-kernel: no kernel ({kernel or 'none'})")
            details.append(st.remote.install_kernel(kernel))
            if st.remote.info is not None:
                R.check_target(st.remote.info)
    except (R.RemoteError, SSHError) as exc:
        raise StageFailed(f"target: {exc}") from None
    details += R.touched(opts.workdir, st.remote.install)
    return StageRecord("target", "planned" if opts.dry_run else "ok",
                       log="" if opts.dry_run else str(rec.path),
                       commands=_commands(st, rec), detail="; ".join(details))


def tests(opts: RunOptions, st: RunState) -> StageRecord:
    """Copy the programs and run script, run them, parse the streamed output."""
    from rxl.guest.ssh import SSHError
    from rxl.guest.console import GuestError
    run = st.remote
    before = len(run.s.commands) if hasattr(run.s, "commands") else 0
    log = str(Path(opts.out) / f"console-{LABEL}.log")
    st.logs[LABEL] = log
    try:
        where = run.upload()
        res = run.run_tests(log)
    except (R.RemoteError, SSHError, GuestError) as exc:
        raise StageFailed(f"tests: {exc}") from None
    cmds = _commands(st, _Recorder(opts), before) if opts.dry_run else []
    if res is None:
        return StageRecord("tests", "planned", commands=cmds, detail=where)
    res.notes.append(f"target: {opts.target.label}")
    if run.info is not None:
        res.notes.append(f"kernel: {run.info.bootfile} ({run.info.version})")
    if run.install is not None and run.before is not None:
        res.notes.append(f"kernel before --install-kernel: {run.before.bootfile} "
                         f"({run.before.version})")
    st.runs[LABEL] = res
    return StageRecord("tests", "ok", log=log,
                       detail=f"{where}; {res.outcome}, {len(res.cases)} cases"
                       + (" (kyua)" if run.use_kyua() else ""))


def report(opts: RunOptions, st: RunState) -> StageRecord:
    """The verdict on the one kernel that ran; the three report files."""
    out = Path(opts.out)
    files = f"{out}/report.json, {out}/junit.xml, {out}/report.txt"
    if opts.dry_run:
        return StageRecord("report", "planned", detail=files)
    st.verdict = report_mod.verdict(st.runs, pristine=None, spread=None,
                                    new_programs=opts.new_programs,
                                    base_programs=BASE_PROGRAMS)
    for r in st.runs.values():
        r.notes.append("one kernel on a target: the must-fail-on-pristine rule is not "
                       "checked here")
    (out / "report.json").write_text(stages.json_text(st))
    (out / "junit.xml").write_text(report_mod.to_junit(st.runs))
    (out / "report.txt").write_text(report_mod.table(st.runs, st.verdict))
    return StageRecord("report", "ok", log=str(out / "report.txt"), detail=files)


#: The stages of a run on an SSH target, in order.
ALL: Tuple = (("series", series), ("build", build), ("world", world),
              ("target", target), ("tests", tests), ("report", report))
