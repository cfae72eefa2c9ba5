"""``rxl run --target``: the run interface's machine reached over SSH.

The same pipeline (:meth:`rxl.verify.machine.Machine.stages`), other stages:

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
from typing import Dict, List, Optional

from rxl.cli.options import missing
from rxl.errors import BadOption, counted, quoted, show
from rxl.guest import console, ssh
from rxl.tree import world as tree_world
from rxl.verify import remote
from rxl.verify import report as report_mod
from rxl.verify.machine import BASE_PROGRAMS, Machine
from rxl.verify.pipeline import RunState, StageFailed, StageRecord
from rxl.verify.request import RunRequest, TargetRequest

#: Seconds the target stage waits for sshd to answer before giving up.
CONNECT_WAIT = 60.0
#: The run's label in the reports: the steering tests run only on the series' kernel.
LABEL = "patched"


def programs_in(directory: str) -> Dict[str, Path]:
    """``--programs DIR``: every executable regular file in it, by name.
    Raises rxl.errors.BadOption for a directory that is missing, not a
    directory, or holds no executable file."""
    d = Path(directory)
    if not d.exists():
        raise BadOption(f"{show(directory)}: {missing(d, 'directory')}", "--programs")
    if not d.is_dir():
        raise BadOption(f"{show(directory)}: {missing(d, 'directory')} (the test "
                        "programs' directory)", "--programs")
    try:
        found = {p.name: p for p in sorted(d.iterdir())
                 if p.is_file() and os.access(p, os.X_OK)}
    except OSError as exc:
        raise BadOption(f"{show(directory)}: {exc.strerror}", "--programs") from None
    if not found:
        raise BadOption(f"{show(directory)}: no executable files there (the ATF programs "
                        "the run copies to the target)", "--programs")
    for name, p in found.items():  # the rule of --test NAME and --atf-dir's programs
        if not tree_world.PROGRAM_NAME.fullmatch(name):
            raise BadOption(f"{show(str(p))}: the program name {quoted(name)} is not "
                            f"{tree_world.PROGRAM_NAME_RULE}, as --test NAME must be (it "
                            "goes unquoted into the target's commands and Kyuafile)",
                            "--programs")
    return found


class CommandLog:
    """Collects each remote action for the record and ``<out>/target-commands.log``."""

    def __init__(self, req: TargetRequest):
        self.lines: List[str] = []
        self.path: Optional[Path] = None if req.dry_run else Path(req.out) / "target-commands.log"

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        if self.path is not None:
            with open(self.path, "a") as fh:
                fh.write(line + "\n")


class Target(Machine):
    """A FreeBSD machine the harness did not boot, reached over SSH (``--target``)."""

    PREPARE, RUN, COLLECT = "target", "tests", None

    def series(self, req: RunRequest, st: RunState) -> StageRecord:
        """The tree (with the series applied, in a work clone if need be), when
        the world stage builds the test programs from it (no ``--programs``:
        they need the series' headers) or ``--install-kernel`` needs a kernel
        built."""
        if req.programs_dir is not None and (not req.install_kernel or req.kernel):
            return StageRecord("series", "skipped", detail="--programs given and no "
                                                           "kernel to build")
        return super().series(req, st)

    def build(self, req: RunRequest, st: RunState) -> StageRecord:
        """The patched kernel, only when ``--install-kernel`` needs one built."""
        if not req.install_kernel:
            return StageRecord("build", "skipped", detail="no --install-kernel: the target's "
                                                          "running kernel is used")
        return super().build(req, st)

    def world(self, req: RunRequest, st: RunState) -> StageRecord:
        """The ATF programs: from ``--programs DIR`` (every executable file), else built."""
        if not req.programs_dir:
            return super().world(req, st)
        d = Path(req.programs_dir)
        found = programs_in(str(d))
        st.tests = found
        return StageRecord("world", "skipped",
                           detail=f"--programs {d}: {', '.join(sorted(found))}")

    def session(self, req: TargetRequest, log: CommandLog):
        """The SSH session to the target (a :class:`rxl.guest.ssh.DryRun` in a dry run)."""
        if req.dry_run:
            return ssh.DryRun(req.target)
        return ssh.SSHSession(req.target, echo=log)

    @staticmethod
    def commands(st: RunState, log: CommandLog, since: int = 0) -> List[str]:
        """The remote actions since ``since``: a dry run's recorded lines, else the log's."""
        s = st.remote.s
        return list(s.commands[since:]) if isinstance(s, ssh.DryRun) else list(log.lines)

    def prepare(self, req: RunRequest, st: RunState) -> StageRecord:
        """Connect, probe and check; with ``--install-kernel`` switch the kernel."""
        log = CommandLog(req)
        session = self.session(req, log)
        job = remote.RemoteJob(out=req.out, tests={n: str(p) for n, p in st.tests.items()},
                               workdir=req.workdir, label=LABEL, kyua=req.kyua,
                               case_timeout=req.case_timeout, atf_vars=req.atf_vars)
        st.remote = remote.RemoteRun(session, job, echo=st.echo)
        name = req.target.label
        try:
            waited = session.wait_up(CONNECT_WAIT)
            info = st.remote.probe()
            if info is not None:
                remote.check_target(info, need_series=not req.install_kernel)
            details = [f"{name}: " + (info.summary() if info else "probe (dry run)")]
            if waited > 1:
                details.append(f"answered after {waited:.0f} s")
            if req.install_kernel:
                kernel = st.kernel or req.kernel
                if not kernel or (not req.dry_run and not Path(kernel).is_file()):
                    raise StageFailed(f"target: --install-kernel: no kernel ({kernel or 'none'})")
                details.append(st.remote.install_kernel(kernel))
                if st.remote.info is not None:
                    remote.check_target(st.remote.info)
        except (remote.RemoteError, ssh.SSHError) as exc:
            raise StageFailed(f"target: {exc}") from None
        details += remote.touched(req.workdir, st.remote.install)
        return StageRecord("target", "planned" if req.dry_run else "ok",
                           log="" if req.dry_run else str(log.path),
                           commands=self.commands(st, log), detail="; ".join(details))

    def run_cases(self, req: RunRequest, st: RunState) -> StageRecord:
        """Copy the programs and run script, run them, parse the streamed output."""
        run = st.remote
        before = len(run.s.commands) if isinstance(run.s, ssh.DryRun) else 0
        log = str(Path(req.out) / f"console-{LABEL}.log")
        st.logs[LABEL] = log
        try:
            where = run.upload()
            res = run.run_tests(log)
        except (remote.RemoteError, ssh.SSHError, console.GuestError) as exc:
            raise StageFailed(f"tests: {exc}") from None
        cmds = self.commands(st, CommandLog(req), before) if req.dry_run else []
        if res is None:
            return StageRecord("tests", "planned", commands=cmds, detail=where)
        res.notes.append(f"target: {req.target.label}")
        if run.info is not None:
            res.notes.append(f"kernel: {run.info.bootfile} ({run.info.version})")
        if run.install is not None and run.before is not None:
            res.notes.append(f"kernel before --install-kernel: {run.before.bootfile} "
                             f"({run.before.version})")
        st.runs[LABEL] = res
        return StageRecord("tests", "ok", log=log,
                           detail=f"{where}; {res.outcome}, {counted(len(res.cases), 'case')}"
                           + (" (kyua)" if run.use_kyua() else ""))

    def verdict(self, req: RunRequest, st: RunState) -> report_mod.Verdict:
        """The verdict on the one kernel that ran; each run notes the rule it cannot check."""
        v = report_mod.verdict(st.runs, pristine=None, spread=None,
                               new_programs=req.new_programs, base_programs=BASE_PROGRAMS)
        for r in st.runs.values():
            r.notes.append("one kernel on a target: the must-fail-on-pristine rule is not "
                           "checked here")
        return v
