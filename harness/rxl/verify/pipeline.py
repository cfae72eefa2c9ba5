"""The pipeline of ``rxl run``: the stages in order, timed, logged, stopped at a failure.

:func:`run` calls each stage of :data:`rxl.verify.stages.ALL` with the
request and the run's :class:`~rxl.verify.job.RunState`, sets the record's
wall time, writes ``<out>/stage-<name>.log`` per stage, and returns at the
first :class:`~rxl.verify.job.StageFailed` (an OSError, RuntimeError or
ValueError a stage lets through counts as one) after writing report.json
with a failed verdict naming the stage's error.  A dry run writes nothing.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Optional, Sequence, Tuple

import click

from rxl.verify import report as report_mod
from rxl.verify import stages
from rxl.verify.job import RunOptions, RunState, StageFailed, StageRecord, echo_err, one_line

Stage = Callable[[RunOptions, RunState], StageRecord]


def timed(name: str, stage: Stage, opts: RunOptions,
          st: RunState) -> Tuple[StageRecord, Optional[str]]:
    """Run one stage: ``(record with seconds set, None)``, or, when it raised
    StageFailed (or let an OSError, RuntimeError or ValueError through),
    ``(a failed record, the one-line error)``."""
    t0 = time.monotonic()
    error = None
    try:
        try:
            rec = stage(opts, st)
        except StageFailed:
            raise
        except (OSError, RuntimeError, ValueError) as exc:
            # rxl.tree.build's errors (BuildError, BuildSetupError) are
            # RuntimeErrors; an OSError is a file the stage needed.
            raise StageFailed(f"{name}: {one_line(exc)}") from None
    except StageFailed as exc:
        error = str(exc)
        rec = StageRecord(name, "failed", detail=error)
    rec.seconds = time.monotonic() - t0
    return rec, error


def stage_log(opts: RunOptions, rec: StageRecord) -> None:
    """Write ``<out>/stage-<name>.log`` (status, time, detail, commands, logs);
    it becomes the record's log when the stage named none."""
    if opts.dry_run:
        return
    path = Path(opts.out) / f"stage-{rec.name}.log"
    lines = [f"stage: {rec.name}", f"status: {rec.status}", f"seconds: {rec.seconds:.1f}",
             f"detail: {rec.detail}", f"logs: {rec.log or '-'}", "commands:"]
    lines += [f"  {c}" for c in rec.commands]
    path.write_text("\n".join(lines) + "\n")
    if not rec.log:
        rec.log = str(path)


def failure_report(opts: RunOptions, st: RunState, reason: str) -> None:
    """report.json of a run stopped by a failed stage: every stage so far,
    the runs parsed so far and a failed verdict naming the stage's error."""
    if opts.dry_run:
        return
    st.verdict = report_mod.Verdict(False, [reason])
    try:
        (Path(opts.out) / "report.json").write_text(stages.json_text(st))
    except OSError as exc:
        st.echo(f"Error: cannot write {opts.out}/report.json: {exc.strerror}")


def run(opts: RunOptions, echo: Callable[[str], None] = echo_err,
        steps: Sequence[Tuple[str, Stage]] = stages.ALL) -> Tuple[bool, RunState]:
    """Run every stage in order; ``(ok, state)``.  ``ok`` is False at the
    first failed stage (recorded, report.json written with a failed verdict),
    and after a stage that reports ``failed`` without stopping the run (the
    boot: its failures are still parsed and reported).  Raises
    click.ClickException when ``--out`` cannot be created."""
    st = RunState.start(opts, echo)
    if not opts.dry_run:  # a dry run writes nothing
        try:
            Path(opts.out).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise click.ClickException(f"cannot create --out {opts.out}: {exc.strerror}")
    ok = True
    from rxl.tree import progress
    timings = progress.load()
    for name, stage in steps:
        expect = "" if opts.dry_run else progress.expectation(name, timings)
        echo(f"== {name}" + (f" ({expect})" if expect else ""))
        rec, error = timed(name, stage, opts, st)
        if error is None and not opts.dry_run and rec.status == "ok":
            progress.record(name, rec.seconds)
        st.records.append(rec)
        stage_log(opts, rec)
        if error is not None:
            failure_report(opts, st, error)
            echo(f"Error: {error}")
            return False, st
        echo(f"   {rec.status} in {rec.seconds:.0f} s" + (f": {rec.detail}" if rec.detail else ""))
        if rec.status == "failed":
            ok = False  # boot failures: still parse and report them
    if (Path(opts.out) / "report.json").exists():  # now with the report stage's record
        (Path(opts.out) / "report.json").write_text(stages.json_text(st))
    return ok, st
