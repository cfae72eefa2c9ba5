"""``rxl bench`` (benchmarks that run on the build host) and ``rxl kcount``
(a guest kernel's instructions per lookup)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import click

from rxl.bench import accept as A
from rxl.bench import accept_stats as AS
from rxl.bench import accept_output as AO
from rxl.bench import kcount as K


@click.group("bench")
def bench():
    """Benchmarks that run on this machine (no guest needed)."""


def _echo_tables(summaries, use_rich: bool) -> None:
    shead = list(AO.SUMMARY_COLUMNS)
    srows = AO.summary_rows(summaries)
    dhead = ["setup", "accepts by registration rank: mean (min-max)",
             "median run"]
    drows = AO.distribution_rows(summaries)
    if use_rich:
        try:
            from rich.console import Console
            from rich.table import Table
        except ImportError:
            use_rich = False
    if not use_rich:
        click.echo(AO.plain_table(shead, srows))
        click.echo("")
        click.echo(AO.plain_table(dhead, drows))
    else:
        from rich.text import Text

        # Wide enough for eight workers' cells when stdout is not a tty;
        # Text() because "[u]" and "[E]" would otherwise be markup.
        con = Console(width=None if sys.stdout.isatty() else 200)
        for head, rows in ((shead, srows), (dhead, drows)):
            t = Table(show_edge=False, pad_edge=False)
            for h in head:
                t.add_column(h, overflow="fold")
            for r in rows:
                t.add_row(*(Text(c) for c in r))
            con.print(t)
    for note in AO.COLUMN_NOTES:
        click.echo("  " + note)
    click.echo("  [E] flagged EPOLLEXCLUSIVE (half), [u] untagged "
               "listener, [k] killed worker.")


@bench.command("accept")
@click.option("--setup", "setups", multiple=True,
              type=click.Choice(list(A.SETUPS)),
              help="Setup to measure; repeatable. Default: all seven.")
@click.option("--workers", type=int, default=A.DEFAULT_WORKERS,
              show_default=True, help="Worker processes.")
@click.option("--connections", type=int, default=A.DEFAULT_CONNECTIONS,
              show_default=True, help="Connections per run.")
@click.option("--spacing-ms", type=float, default=A.DEFAULT_SPACING_MS,
              show_default=True, help="Gap between connections, ms.")
@click.option("--repetitions", type=int, default=A.DEFAULT_REPETITIONS,
              show_default=True, help="Runs per setup.")
@click.option("--work-ms", "work_ms", type=float, multiple=True,
              help="Fake work per accept, ms (sleep); repeatable to make a "
                   "matrix. Default 0.")
@click.option("--order", default="forward", show_default=True,
              help="Registration order: forward, reverse, or worker ids "
                   "'3,1,0,2'.")
@click.option("--kill-first-at", type=int, default=None,
              help="SIGKILL the first registrant after this many "
                   "connections.")
@click.option("--reorder-every", type=int, default=A.DEFAULT_REORDER_EVERY,
              show_default=True, help="reorder16: accepts between DEL+ADD.")
@click.option("--pin/--no-pin", default=True, show_default=True,
              help="Pin the worker of rank r to CPU r mod ncpu.")
@click.option("--client-cpu", type=click.Choice(["rotate", "free"]),
              default="rotate", show_default=True,
              help="rotate: the client connects from CPU i mod ncpu for "
                   "connection i, so handshakes land on every CPU.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON document instead of the tables.")
@click.option("--plot", type=click.Path(dir_okay=False, writable=True),
              default=None, help="Write per-worker shares to this PNG "
                                 "(needs matplotlib).")
@click.option("--raw-dir", type=click.Path(file_okay=False), default=None,
              help="Also keep each run's server JSON in this directory.")
@click.option("--build-dir", type=click.Path(file_okay=False), default=None,
              help="Where to cache the compiled server "
                   "(default $RXL_BUILD_DIR/bench or build/bench).")
@click.option("--cc", default="cc", show_default=True, help="C compiler.")
@click.option("--plain", is_flag=True, help="Plain-text tables, no rich.")
@click.option("--dry-run", is_flag=True,
              help="Print the cc command and every server argv; run "
                   "nothing.")
def accept_cmd(setups, workers, connections, spacing_ms, repetitions,
               work_ms, order, kill_first_at, reorder_every, pin, client_cpu,
               as_json, plot, raw_dir, build_dir, cc, plain, dry_run):
    """Accept distribution of EPOLLEXCLUSIVE and SO_REUSEPORT setups.

    Compiles acceptd.c (cached), runs each setup REPETITIONS times on
    127.0.0.1, and prints per setup the wakeups, empty wakeups, CPU time and
    the distribution of accepts in registration order (seed 004's table).
    """
    try:
        _accept(setups or tuple(A.SETUPS), workers, connections, spacing_ms,
                repetitions, work_ms or (A.DEFAULT_WORK_MS,), order,
                kill_first_at, reorder_every, pin, client_cpu, as_json, plot,
                raw_dir, build_dir, cc, plain, dry_run)
    except A.BenchError as e:
        raise click.ClickException(str(e)) from None


def _accept(setups, workers, connections, spacing_ms, repetitions, works,
            order, kill_first_at, reorder_every, pin, client_cpu, as_json,
            plot, raw_dir, build_dir, cc, plain, dry_run):
    if repetitions < 1:
        raise A.BenchError(f"--repetitions must be >= 1, got {repetitions}")
    if not 1 <= workers <= A.MAX_WORKERS:
        raise A.BenchError(f"--workers must be 1..{A.MAX_WORKERS}, "
                           f"got {workers}")
    if "incoming-cpu" in setups and workers < 2:
        raise A.BenchError("incoming-cpu needs --workers >= 2 (one "
                           "listener stays untagged)")
    cfgs = [A.RunConfig(workers=workers, connections=connections,
                        spacing_ms=spacing_ms, work_ms=w,
                        order=A.parse_order(order, workers),
                        kill_first_at=kill_first_at,
                        reorder_every=reorder_every, pin=pin,
                        client_rotate=client_cpu == "rotate")
            for w in works]
    for c in cfgs:
        c.validate()
    if not dry_run:
        A.check_platform(setups)
    if plot:
        # Fail before minutes of runs, not after them.
        AO.check_plot_target(plot)
    if raw_dir:
        A.check_dir(raw_dir, "--raw-dir", create=not dry_run)
    bdir = Path(build_dir) if build_dir else A.default_build_dir()
    A.check_dir(bdir, "--build-dir" if build_dir else
                "build directory (from $RXL_BUILD_DIR)"
                if os.environ.get("RXL_BUILD_DIR") else "build directory",
                create=not dry_run)
    binary = A.ensure_built(bdir, cc=cc, dry_run=dry_run, echo=click.echo)
    summaries = []
    for cfg in cfgs:
        for setup in setups:
            argv = A.server_argv(binary, setup, cfg)
            if dry_run:
                for _ in range(repetitions):
                    click.echo(shlex.join(argv))
                continue
            runs = []
            for rep in range(repetitions):
                out = A.run_server(argv, A.deadline_ms(cfg) / 1000.0 + 15)
                if raw_dir:
                    raw = (Path(raw_dir) /
                           f"{setup}-work{cfg.work_ms:g}-r{rep}.json")
                    try:
                        raw.write_text(out)
                    except OSError as e:
                        # The run is done: keep it, say what was not kept.
                        click.echo(f"warning: cannot write {raw}: "
                                   f"{e.strerror}", err=True)
                run = AS.parse_run(out)
                runs.append(run)
                for w in AS.run_warnings(run):
                    click.echo(f"warning: {setup} run {rep + 1}: {w}",
                               err=True)
                if not as_json:
                    click.echo(f"{setup} work={cfg.work_ms:g}ms run "
                               f"{rep + 1}/{repetitions}: {run.accepts}",
                               err=True)
            summaries.append(AS.summarise(runs))
    if dry_run:
        return
    config = {"workers": workers, "connections": connections,
              "spacing_ms": spacing_ms, "repetitions": repetitions,
              "work_ms": list(works), "order": order,
              "kill_first_at": kill_first_at,
              "reorder_every": reorder_every, "pin": pin,
              "client_cpu": client_cpu, "argv": sys.argv[1:]}
    if as_json:
        click.echo(json.dumps(AO.results_json(summaries, config), indent=1))
    else:
        _echo_tables(summaries, use_rich=not plain)
    if plot:
        AO.plot_shares(summaries, plot)
        if not as_json:
            click.echo(f"plot: {plot}")


@click.group("kcount")
def kcount() -> None:
    """Count a guest kernel's instructions per lookup through QEMU's gdbstub."""


@kcount.command()
@click.option("--kernel", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The kernel the guest booted (symbols).")
@click.option("--port", default=1234, show_default=True, help="QEMU -gdb tcp:127.0.0.1:PORT.")
@click.option("--samples", default=40, show_default=True, help="Lookups to record.")
@click.option("--outer", default=K.OUTER, show_default=True, help="Function to trace.")
@click.option("--inner", multiple=True, default=K.INNER, show_default=True,
              help="Functions whose frames are counted inside it (repeatable).")
@click.option("--out", required=True, help="Trace file (JSON).")
@click.option("--dry-run", is_flag=True, help="Print the gdb command, run nothing.")
def record(kernel, port, samples, outer, inner, out, dry_run):
    """Record --samples invocations of --outer, every instruction."""
    if samples < 1:
        raise click.ClickException(f"--samples must be >= 1, got {samples}")
    nm = ["nm", "-P", kernel]
    names = [outer] + [n for n in inner if n != outer]
    if dry_run:
        script = str(Path(tempfile.gettempdir()) / "rxl-kcount-XXXXXX.py")
        click.echo(shlex.join(nm))
        click.echo(f"# {script}: rxl.bench.kcount.GDB_SCRIPT; <addresses> from nm")
        click.echo(shlex.join(K.gdb_argv(kernel, f"127.0.0.1:{port}", str(Path(out).resolve()),
                                       script, samples=samples, outer=outer,
                                       entries={n: 0 for n in names})))
        return
    r = subprocess.run(nm, capture_output=True, text=True)
    if r.returncode != 0:
        raise click.ClickException(f"nm -P {kernel} failed: {r.stderr.strip()}")
    try:
        entries = K.symbol_addresses(r.stdout, names)
    except K.KcountError as exc:
        raise click.ClickException(str(exc))
    with tempfile.NamedTemporaryFile("w", prefix="rxl-kcount-", suffix=".py") as f:
        f.write(K.GDB_SCRIPT)
        f.flush()
        argv = K.gdb_argv(kernel, f"127.0.0.1:{port}", str(Path(out).resolve()), f.name,
                        samples=samples, outer=outer, entries=entries)
        r = subprocess.run(argv)
    if r.returncode != 0 or not Path(out).is_file():
        raise click.ClickException(f"gdb exited {r.returncode}; no trace in {out}")


@kcount.command()
@click.argument("traces", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True)
def analyze(traces, as_json):
    """Instructions per function over the group lookups of each trace file."""
    rows = {}
    for t in traces:
        try:
            rows[t] = K.summarize(K.samples_of(K.load(t)))
        except K.KcountError as exc:
            raise click.ClickException(str(exc))
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for t, res in rows.items():
        click.echo(f"{t}: {res['total']['n']} group lookups ({res['other']['n']} others)")
        for name, st in res.items():
            if name == "other" or not st["n"]:
                continue
            click.echo(f"  {name:28} median {st['median']:>7g}  min {st['min']:>5}  "
                       f"max {st['max']:>5}  (n={st['n']})")
