"""The pipeline of ``rxl run``: one record type, the state stages hand on, the chain.

Every stage, whichever machine runs the cases (:mod:`rxl.verify.machine`),
is ``stage(request, state) -> StageRecord``: it reads the request
(:class:`rxl.verify.request.RunRequest`, never rewritten) and what earlier
stages left in :class:`RunState`, adds its own products there, and returns
its :class:`StageRecord` (status, wall time, the log to read, the commands it
ran) or raises :class:`StageFailed` with a one-line message naming that log.
With ``dry_run`` a stage only plans: status ``planned`` and the commands it
would run.

:func:`run` calls the machine's stages in order, sets each record's wall
time, writes ``<out>/stage-<name>.log`` per stage, and returns at the first
:class:`StageFailed` (an :class:`rxl.errors.RxlError`, OSError or ValueError a
stage lets through counts as one) after writing report.json with a failed verdict naming
the stage's error.  A dry run writes nothing.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import click

from rxl.errors import RxlError, reason
from rxl.tree import progress
from rxl.verify import report
from rxl.verify.request import ReportRequest, RunRequest


@dataclass
class StageRecord:
    """One stage's outcome: ``status`` (``ok``, ``planned`` in a dry run,
    ``skipped``, ``failed``); ``seconds``: wall time; ``log``: the file to
    read on failure; ``commands``: what it ran (or would run), in order."""

    name: str
    status: str
    seconds: float = 0.0
    log: str = ""
    detail: str = ""
    commands: List[str] = field(default_factory=list)


class StageFailed(RxlError):
    """A stage failed; the message is the one-line error (it names the log)."""


@dataclass
class RunState:
    """What the stages of one run hand on, in order of filling.

    ``src``: the tree the patched kernel and the userland are built from
    (series: ``--src``, or a work clone with the series applied);
    ``kernel``: the patched kernel (build); ``pristine_src`` /
    ``pristine_kernel``: the base's checkout and kernel, when there is one
    (build); ``world``: :class:`rxl.tree.world.WorldOutputs` and ``tests``:
    program -> binary (world); ``roots``: boot label -> staged root (image);
    ``logs``: boot label -> console log (boot); ``runs``: boot label ->
    :class:`rxl.verify.parse.RunResult` (parse); ``verdict`` (report);
    ``records``: one :class:`StageRecord` per stage run so far.
    ``stage_dir``: one staging directory per run, named like ``--out``:
    QEMU's vvfat reads file contents lazily, so a root must not change
    under a running guest.
    """

    stage_dir: Path
    echo: Callable[[str], None]
    src: Optional[str] = None
    kernel: Optional[str] = None
    pristine_src: Optional[str] = None
    pristine_kernel: Optional[str] = None
    world: Any = None
    tests: Dict[str, Path] = field(default_factory=dict)
    roots: Dict[str, str] = field(default_factory=dict)
    logs: Dict[str, str] = field(default_factory=dict)
    runs: Dict[str, Any] = field(default_factory=dict)
    verdict: Any = None
    records: List[StageRecord] = field(default_factory=list)
    #: An SSH target's driver (rxl.verify.remote.RemoteRun), set by the target stage.
    remote: Any = None
    #: Boot label -> the SSH guest's host key line (the SSH guest's image stage).
    host_keys: Dict[str, str] = field(default_factory=dict)
    #: Boot label -> why it fell back from SSH to the serial console (the SSH guest).
    fallbacks: Dict[str, str] = field(default_factory=dict)
    #: Stage name -> the outcome of its work done ahead, beside the boots
    #: (rxl.verify.schedule: the module boot with ``--boot-jobs`` above 1); the
    #: stage itself then hands it on in its place in the chain.
    ahead: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def start(cls, req: RunRequest, echo: Callable[[str], None]) -> "RunState":
        """The state before the first stage: the kernels the request gives."""
        return cls(stage_dir=Path(req.guest_dir) / Path(req.out).name, echo=echo,
                   src=req.src, kernel=req.kernel, pristine_src=req.pristine_src,
                   pristine_kernel=req.pristine_kernel)


#: An exception as one line: ``PATH: reason`` for an OSError (rxl.errors.reason).
one_line = reason


def echo_err(msg: str) -> None:
    """A progress line on stderr (stdout keeps what --dry-run and --json print)."""
    click.echo(msg, err=True)


#: A stage: ``stage(request, state) -> StageRecord``.
Stage = Callable[[RunRequest, RunState], StageRecord]


def json_text(st: RunState) -> str:
    """report.json's text: the runs, every stage's record so far, the verdict."""
    return report.to_json(st.runs, stages=[asdict(r) for r in st.records],
                          verdict_=st.verdict)


def timed(name: str, stage: Stage, req: RunRequest,
          st: RunState) -> Tuple[StageRecord, Optional[str]]:
    """Run one stage: ``(record with seconds set, None)``, or, when it raised
    StageFailed (or let an RxlError, OSError or ValueError through), ``(a failed
    record, the one-line error)``."""
    t0 = time.monotonic()
    error = None
    try:
        try:
            rec = stage(req, st)
        except StageFailed:
            raise
        except (RxlError, OSError, ValueError) as exc:
            # an OSError: a file the stage needed; a ValueError: a value the stage's
            # own checks refused (a program name, a loader tunable)
            raise StageFailed(f"{name}: {one_line(exc)}") from None
    except StageFailed as exc:
        error = str(exc)
        rec = StageRecord(name, "failed", detail=error)
    rec.seconds = time.monotonic() - t0
    return rec, error


def stage_log(req: ReportRequest, rec: StageRecord) -> None:
    """Write ``<out>/stage-<name>.log`` (status, time, detail, commands, logs);
    it becomes the record's log when the stage named none."""
    if req.dry_run:
        return
    path = Path(req.out) / f"stage-{rec.name}.log"
    lines = [f"stage: {rec.name}", f"status: {rec.status}", f"seconds: {rec.seconds:.1f}",
             f"detail: {rec.detail}", f"logs: {rec.log or '-'}", "commands:"]
    lines += [f"  {c}" for c in rec.commands]
    path.write_text("\n".join(lines) + "\n")
    if not rec.log:
        rec.log = str(path)


def failure_report(req: ReportRequest, st: RunState, reason: str) -> None:
    """report.json of a run stopped by a failed stage: every stage so far,
    the runs parsed so far and a failed verdict naming the stage's error."""
    if req.dry_run:
        return
    st.verdict = report.Verdict(False, [reason])
    try:
        (Path(req.out) / "report.json").write_text(json_text(st))
    except OSError as exc:
        st.echo(f"Error: cannot write {req.out}/report.json: {exc.strerror}")


def run(req: RunRequest, steps: Sequence[Tuple[str, Stage]],
        echo: Callable[[str], None] = echo_err) -> Tuple[bool, RunState]:
    """Run every stage of ``steps`` (a machine's :meth:`~rxl.verify.machine.Machine.stages`)
    in order; ``(ok, state)``.  ``ok`` is False at the first failed stage
    (recorded, report.json written with a failed verdict), and after a stage
    that reports ``failed`` without stopping the run (the boot: its failures
    are still parsed and reported).  Raises StageFailed when ``--out`` cannot be
    created."""
    st = RunState.start(req, echo)
    if not req.dry_run:  # a dry run writes nothing
        try:
            Path(req.out).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StageFailed(f"cannot create --out {req.out}: {exc.strerror}") from None
    ok = True
    timings = progress.load()
    for name, stage in steps:
        expect = "" if req.dry_run else progress.expectation(name, timings)
        echo(f"== {name}" + (f" ({expect})" if expect else ""))
        rec, error = timed(name, stage, req, st)
        if error is None and not req.dry_run and rec.status == "ok" and name not in st.ahead:
            progress.record(name, rec.seconds)  # not a stage whose work ran earlier
        st.records.append(rec)
        stage_log(req, rec)
        if error is not None:
            failure_report(req, st, error)
            echo(f"Error: {error}")
            return False, st
        echo(f"   {rec.status} in {rec.seconds:.0f} s" + (f": {rec.detail}" if rec.detail else ""))
        if rec.status == "failed":
            ok = False  # boot failures: still parse and report them
    if (Path(req.out) / "report.json").exists():  # now with the report stage's record
        (Path(req.out) / "report.json").write_text(json_text(st))
    return ok, st
