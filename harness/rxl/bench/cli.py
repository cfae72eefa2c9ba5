"""``rxl bench`` (benchmarks that run on the build host) and ``rxl kcount``
(a guest kernel's instructions, locks and atomics per call)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from rxl.bench import accept, accept_output, accept_run, ebpf, kcount
from rxl.bench import knobs as accept_knobs
from rxl.bench import lbsetsock, tables, wakeups
from rxl.cli.groups import given
from rxl.cli.options import (DIRECTORY, FILE, InputFile, PathOf, check_distinct_inputs,
                             check_out_file, check_out_not_input, program_reason)
from rxl.cli.surface import group
from rxl.decide import topology
from rxl.decide.topology import TOPOLOGY, TopologyError
from rxl.errors import BadOption, UsageError, counted, show
from rxl.learn.request import LearnUsage, name_values
from rxl.tree import build as tree_build


@group("bench")
def bench():
    """Benchmarks that run on this machine (no guest needed)."""


def _print_tables(tables, use_rich: bool) -> None:
    if not use_rich:
        click.echo("\n\n".join(accept_output.plain_table(h, r) for h, r in tables))
        return
    # Wide enough for eight workers' cells when stdout is not a tty;
    # Text() because "[u]" and "[E]" would otherwise be markup.
    con = Console(width=None if sys.stdout.isatty() else 200)
    for head, rows in tables:
        t = Table(show_edge=False, pad_edge=False)
        for h in head:
            t.add_column(h, overflow="fold")
        for r in rows:
            t.add_row(*(Text(c) for c in r))
        con.print(t)


def _echo_tables(summaries, use_rich: bool) -> None:
    dhead = ["setup", "accepts by registration rank: mean (min-max)",
             "median run"]
    items = accept_output.wakeup_items(summaries)
    # The request workload's clients are not the parent's: no client table.
    client = [] if items else [(list(tables.CLIENT_COLUMNS),
                                tables.client_rows(summaries))]
    _print_tables([(list(accept_output.SUMMARY_COLUMNS), accept_output.summary_rows(summaries)),
                   (list(tables.IMBALANCE_COLUMNS),
                    tables.imbalance_rows(summaries)),
                   (dhead, accept_output.distribution_rows(summaries)),
                   (list(tables.WORKER_COLUMNS), tables.worker_rows(summaries)),
                   *client], use_rich)
    for line in tables.ebpf_lines(summaries):
        click.echo(line)
    for note in accept_output.COLUMN_NOTES + tables.NOTES:
        click.echo("  " + note)
    click.echo("  [E] flagged EPOLLEXCLUSIVE (half), [u] untagged "
               "listener, [k] killed worker.")
    if items:
        _print_tables([(list(wakeups.COLUMNS), wakeups.rows(items)),
                       (list(wakeups.CPU_COLUMNS), wakeups.cpu_rows(items))],
                      use_rich)
        for note in wakeups.NOTES:
            click.echo("  " + note)


def _finite(option):
    """click callback: refuse NaN and infinity (they pass range checks)."""
    def check(ctx, param, value):
        vals = value if isinstance(value, tuple) else (value,)
        for v in vals:
            if v is not None and not math.isfinite(v):
                raise click.BadParameter(f"must be a finite number, got {v}")
        return value
    return check


def _parsed(fn):
    """click callback running a knobs parser (ValueError -> bad option)."""
    def check(ctx, param, value):
        try:
            return fn(value)
        except ValueError as e:
            raise click.BadParameter(str(e)) from None
    return check


@bench.command("accept")
@click.option("--setup", "setups", multiple=True,
              type=click.Choice(list(accept.SETUPS) + list(accept.ALIASES)),
              help="Setup to measure; repeatable (a repeat runs once). "
                   "Default: all but the eBPF ones.")
@click.option("--workers", type=int, default=accept.DEFAULT_WORKERS,
              show_default=True, help="Worker processes.")
@click.option("--connections", type=int, default=accept.DEFAULT_CONNECTIONS,
              show_default=True, help="Connections per run.")
@click.option("--spacing-ms", type=float, default=accept.DEFAULT_SPACING_MS,
              show_default=True, callback=_finite("--spacing-ms"),
              help="Gap between connections, ms (open-loop client).")
@click.option("--repetitions", type=int, default=accept.DEFAULT_REPETITIONS,
              show_default=True, help="Runs per setup.")
@click.option("--server", "server", type=click.Choice(accept_knobs.SERVERS),
              default="loop", show_default=True,
              help="loop: each worker an event loop that keeps accepting "
                   "while it holds connections; serial: accept, work, hold, "
                   "close, one at a time (the first rig's model).")
@click.option("--work-ms", "work_ms", type=float, multiple=True,
              callback=_finite("--work-ms"),
              help="Work per connection, ms; repeatable to make a matrix. "
                   "Default 0.")
@click.option("--work-kind", type=click.Choice(accept_knobs.WORK_KINDS),
              default="sleep", show_default=True,
              help="sleep, or cpu: a busy loop until that much CPU time "
                   "is used.")
@click.option("--hold-ms", "hold", default="0", show_default=True,
              callback=_parsed(accept_knobs.parse_hold),
              help="Keep each connection open this long after the "
                   "response, or 'client': until the client closes (the "
                   "client closes at the end of the run). No cap but the "
                   "run's deadline (one hour).")
@click.option("--accepts-per-wakeup", "batch", default="unlimited",
              show_default=True, callback=_parsed(accept_knobs.parse_batch),
              help="Accept at most this many per wakeup, then serve "
                   "(multi_accept off = 1), or 'unlimited' (drain, <= 64).")
@click.option("--client", "client", type=click.Choice(accept_knobs.CLIENTS),
              default="open", show_default=True,
              help="open: one connection every --spacing-ms; closed: "
                   "--concurrency connections in flight, each followed by "
                   "the next as soon as it is answered.")
@click.option("--concurrency", type=int, default=accept_knobs.DEFAULT_CONCURRENCY,
              show_default=True, help="Closed-loop connections in flight.")
@click.option("--abort-share", type=float, default=0.0, show_default=True,
              callback=_finite("--abort-share"),
              help="Share (0..1) of clients that close with a reset at "
                   "once, spread evenly over the run.")
@click.option("--abort-kind", type=click.Choice(accept_knobs.ABORT_KINDS),
              default="reset", show_default=True,
              help="reset: after the handshake; handshake: right after "
                   "connect(2) (over loopback the handshake is done by "
                   "then: see aborted_established).")
@click.option("--untagged", default="last", show_default=True,
              callback=_parsed(accept_knobs.parse_untagged),
              help="incoming-cpu: the rank left without SO_INCOMING_CPU, "
                   "'last' or 'none'.")
@click.option("--lag-ms", type=float, default=accept_knobs.DEFAULT_LAG_MS,
              show_default=True, callback=_finite("--lag-ms"),
              help="handoff-lc: how often the acceptor re-reads the "
                   "workers' open connection counts.")
@click.option("--mutex-delay-ms", type=float,
              default=accept_knobs.DEFAULT_MUTEX_DELAY_MS, show_default=True,
              callback=_finite("--mutex-delay-ms"),
              help="accept-mutex: nginx's accept_mutex_delay.")
@click.option("--order", default="forward", show_default=True,
              help="Registration order: forward, reverse, or worker ids "
                   "'3,1,0,2'.")
@click.option("--kill-first-at", type=int, default=None,
              help="SIGKILL the first registrant after this many "
                   "connections.")
@click.option("--reorder-every", type=int, default=accept.DEFAULT_REORDER_EVERY,
              show_default=True, help="reorder: accepts between DEL+ADD.")
@click.option("--pin/--no-pin", default=True, show_default=True,
              help="Pin the worker of rank r to CPU r mod ncpu.")
@click.option("--client-cpu", type=click.Choice(["rotate", "free"]),
              default="rotate", show_default=True,
              help="rotate: the client connects from CPU i mod ncpu for "
                   "connection i, so handshakes land on every CPU.")
@click.option("--requests", type=int, default=0, show_default=True,
              help="Request workload: this many requests per connection "
                   "over persistent connections, one client process "
                   "pinned per --rx-cpus CPU, with the cross-CPU wakeup "
                   "tables (0: the accept workload).")
@click.option("--rx-cpus", default=None,
              help="--requests: the receiving CPUs, where the clients "
                   "run (over loopback a send's softirq runs on its CPU); "
                   "default every CPU.")
@click.option("--in-flight", type=int, default=1, show_default=True,
              help="--requests: requests outstanding per client.")
@click.option("--think-us", type=float, default=0.0, show_default=True,
              callback=_finite("--think-us"),
              help="--requests: client sleep after each reply, us.")
@click.option("--idle-ms", type=float, default=accept_knobs.DEFAULT_IDLE_MS,
              show_default=True, callback=_finite("--idle-ms"),
              help="--requests: idle window before the requests that "
                   "measures the background IPI rate (0: none).")
@click.option("--deal-counts", type=click.Choice(accept_knobs.DEAL_COUNTS),
              default="tags", show_default=True,
              help="ebpf-deal: deal the map from the tags alone (nothing "
                   "counted) or from the receiving CPUs' connections "
                   "(what learning counts).")
@click.option("--topology", "topo", default=None, type=TOPOLOGY,
              help="ebpf-deal: the topology to deal on (default: this "
                   "host's, from sysfs).")
@click.option("--numa-map", default=None,
              help="ebpf-numa-rr: CPU:NODE,... (default: this host's "
                   "nodes), e.g. 0:0,1:1 to exercise two ranges.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON document instead of the tables.")
@click.option("--plot", type=PathOf(file_only=True, writable=True),
              default=None, help="Write per-worker shares to this PNG "
                                 "(needs matplotlib).")
@click.option("--raw-dir", type=DIRECTORY, default=None,
              help="Also keep each run's server JSON in this directory.")
@click.option("--build-dir", type=DIRECTORY, default=None,
              help="Where to cache the compiled server "
                   "(default $RXL_BUILD_DIR/bench or build/bench).")
@click.option("--cc", default=None,
              help="C compiler, split into words like $CC (default $CC, "
                   "else cc).")
@click.option("--plain", is_flag=True, help="Plain-text tables, no rich.")
@click.option("--dry-run", is_flag=True,
              help="Print the cc command and every server argv; run "
                   "nothing.")
@click.pass_context
def accept_cmd(ctx, setups, workers, connections, spacing_ms, repetitions,
               server, work_ms, work_kind, hold, batch, client, concurrency,
               abort_share, abort_kind, untagged, lag_ms, mutex_delay_ms,
               order, kill_first_at, reorder_every, pin, client_cpu,
               requests, rx_cpus, in_flight, think_us, idle_ms, deal_counts,
               topo, numa_map, as_json, plot, raw_dir, build_dir, cc, plain,
               dry_run):
    """Accept distribution of shared-listener, handoff and SO_REUSEPORT
    setups.

    Compiles acceptd.c (cached), runs each setup REPETITIONS times on
    127.0.0.1, and prints per setup the wakeups, CPU time, the spread of
    accepts over the workers (idle workers, top-k share, CV), per-worker
    CPU and open connections, and the client's rate and latencies.
    """
    works = work_ms or (accept.DEFAULT_WORK_MS,)
    try:  # every option value, before any build: a usage error (exit 2)
        _refuse_unread(ctx, accept.unique_setups(setups or accept.DEFAULT_SETUPS), works)
        knobs = accept_knobs.Knobs(
            server=server, work_kind=work_kind, hold_ms=hold,
            accepts_per_wakeup=batch, client=client, concurrency=concurrency,
            abort_share=abort_share, abort_kind=abort_kind, untagged=untagged,
            lag_ms=lag_ms, mutex_delay_ms=mutex_delay_ms, requests=requests,
            in_flight=in_flight, think_us=think_us, idle_ms=idle_ms,
            rx_cpus=_rx_cpus(rx_cpus), deal_counts=deal_counts)
        req = _accept_request(setups, workers, connections, spacing_ms, repetitions, works,
                              knobs, order, kill_first_at, reorder_every, pin, client_cpu,
                              topo, numa_map, as_json, plot, raw_dir, build_dir, cc, dry_run)
    except (accept.BenchError, ValueError, TopologyError) as e:
        raise UsageError(str(e)) from None
    try:  # this machine and the runs: a failure at run time (exit 1)
        if not dry_run:
            accept.check_platform(req.setups)
        plan: list = []  # a dry run's lines: printed as they come, or as JSON
        summaries, skipped = accept_run.run_all(
            req, plan.append if dry_run and as_json else click.echo,
            lambda m: click.echo(m, err=True))
    except (accept.BenchError, ValueError, TopologyError) as e:
        raise click.ClickException(str(e)) from None
    if dry_run:
        if as_json:
            click.echo(json.dumps({"dry_run": True, "lines": plan}, indent=1))
        return
    config = {"workers": workers, "connections": connections,
              "spacing_ms": spacing_ms, "repetitions": repetitions,
              "work_ms": list(dict.fromkeys(works)), "order": order,
              "kill_first_at": kill_first_at,
              "reorder_every": reorder_every, "pin": pin,
              "client_cpu": client_cpu, "knobs": dataclasses.asdict(knobs),
              "argv": sys.argv[1:]}
    if as_json:
        doc = accept_output.results_json(summaries, config)
        doc["skipped"] = skipped
        click.echo(json.dumps(doc, indent=1))
    elif summaries:
        _echo_tables(summaries, use_rich=not plain)
    if plot and summaries:
        accept_output.plot_shares(summaries, plot)
        if not as_json:
            click.echo(f"plot: {plot}")


def _rx_cpus(text):
    """--rx-cpus: a CPU list of this host's online CPUs, or None."""
    if text is None:
        return None
    cpus = tuple(topology.parse_cpu_list(text, "--rx-cpus"))
    ncpu = ebpf.host_ncpu()
    if max(cpus) >= ncpu:
        raise ValueError(f"--rx-cpus: CPU {max(cpus)} is not one of this "
                         f"host's {ncpu} (the clients are pinned there)")
    return cpus


def _refuse_unread(ctx: click.Context, setups, works) -> None:
    """Refuse (usage error naming both options) an option that none of the runs
    asked for would read: a knob of a setup that is not measured, the other
    client's pacing, a flag of a value that is not given."""
    p = ctx.params
    rules = (
        ("spacing_ms", p["client"] == "open", "paces the open-loop client, not "
                                              "--client closed (its pace is --concurrency)"),
        ("concurrency", p["client"] == "closed", "is the closed-loop client's, not "
                                                 "--client open's (its pace is --spacing-ms)"),
        ("lag_ms", "handoff-lc" in setups, "is read by --setup handoff-lc only"),
        ("mutex_delay_ms", "accept-mutex" in setups, "is read by --setup accept-mutex only"),
        ("untagged", "incoming-cpu" in setups, "is read by --setup incoming-cpu only"),
        ("reorder_every", "reorder" in setups, "is read by --setup reorder only"),
        ("deal_counts", "ebpf-deal" in setups, "is read only by --setup ebpf-deal"),
        ("topo", "ebpf-deal" in setups, "is read only by --setup ebpf-deal"),
        ("numa_map", "ebpf-numa-rr" in setups, "is read only by --setup ebpf-numa-rr"),
        ("abort_kind", p["abort_share"] > 0, "says how the --abort-share clients abort; "
                                             "give --abort-share above 0"),
        ("work_kind", any(w > 0 for w in works), "says how --work-ms is spent; give "
                                                 "--work-ms above 0"),
        ("plain", not p["as_json"], "formats the tables, which --json replaces"),
    )  # the request workload's own knobs: rxl.bench.knobs refuses them without --requests
    for name, applies, why in rules:
        if not applies and given(ctx, name):
            opt = max(next(x for x in ctx.command.params if x.name == name).opts, key=len)
            raise BadOption(f"{opt} {why}", opt)
    if p["server"] == "serial":  # accept, work, hold, close: no event loop
        loop = [s for s in setups if s in accept_knobs.LOOP_ONLY]
        if loop:
            which = ("--setup " + ", ".join(loop) if p["setups"] else
                     f"the default setups {', '.join(loop)} (no --setup given)")
            raise BadOption(f"serial cannot run {which}: they are about how an event loop "
                            "accepts (give --server loop, or --setup without them)",
                            "--server")


def _accept_request(setups, workers, connections, spacing_ms, repetitions, works,
                    knobs, order, kill_first_at, reorder_every, pin, client_cpu,
                    topo, numa_map, as_json, plot, raw_dir, build_dir, cc,
                    dry_run) -> accept_run.Request:
    """The options, checked (errors name the option) -> accept_run.Request."""
    if not 1 <= repetitions <= accept.MAX_REPETITIONS:
        raise BadOption(f"must be 1..{accept.MAX_REPETITIONS}, got {repetitions}",
                        "--repetitions")
    if not 1 <= workers <= accept.MAX_WORKERS:
        raise BadOption(f"must be 1..{accept.MAX_WORKERS}, got {workers}", "--workers")
    setups = accept.unique_setups(setups or accept.DEFAULT_SETUPS)
    cfgs = [accept.RunConfig(workers=workers, connections=connections,
                        spacing_ms=spacing_ms, work_ms=w,
                        order=accept.parse_order(order, workers),
                        kill_first_at=kill_first_at,
                        reorder_every=reorder_every, pin=pin,
                        client_rotate=client_cpu == "rotate", knobs=knobs)
            for w in dict.fromkeys(works)]
    for c in cfgs:
        c.validate()
        for s in setups:
            accept.server_argv("acceptd", s, c)      # refuse before any run
    # An option no setup reads is refused (--deal-counts given: _refuse_unread).
    if knobs.requests and connections < len(accept_run.rx_cpus(cfgs[0])):
        raise BadOption(f"--requests needs a connection per receiving CPU "
                        f"({len(accept_run.rx_cpus(cfgs[0]))}), got --connections "
                        f"{connections}", "--connections")
    if topo is not None:  # without --setup ebpf-deal: refused by _refuse_unread
        try:
            ebpf.pinned_cpus(workers, topo)
        except TopologyError as exc:
            raise BadOption(str(exc), "--topology") from None
    if numa_map is not None:  # without --setup ebpf-numa-rr: _refuse_unread
        try:
            ebpf.parse_node_map(numa_map)
        except (ValueError, TopologyError) as exc:
            raise BadOption(str(exc), "--numa-map") from None
    if plot:
        # Fail before minutes of runs, not after them.
        accept_output.check_plot_target(plot)
    if raw_dir:
        accept.check_dir(raw_dir, "--raw-dir", create=not dry_run)
    bdir = Path(build_dir) if build_dir else accept.default_build_dir()
    what = ("--build-dir" if build_dir else "build directory (from $RXL_BUILD_DIR)"
            if os.environ.get("RXL_BUILD_DIR") else "build directory")
    accept.check_dir(bdir, what, create=not dry_run)
    return accept_run.Request(setups=setups, cfgs=cfgs, repetitions=repetitions,
                      build_dir=bdir, cc=_compiler(cc),
                      raw_dir=Path(raw_dir) if raw_dir else None,
                      dry_run=dry_run, quiet=as_json, topology=topo,
                      numa_map=numa_map)


def _compiler(cc):
    """``--cc`` (else ``$CC``, else ``cc``) as argv words (accept.cc_words),
    its first word checked to be a program (options.program_reason), dry run
    or not: a device, a directory, a missing path or a name not on PATH was
    printed into a dry run's plan (exit 0) and failed a run's compile (exit
    1). A usage error naming ``--cc``, or ``CC`` when it came from there; the
    built-in ``cc`` is this host's tool (rxl doctor), left to the build."""
    words = accept.cc_words(cc)
    value = cc if cc is not None else os.environ.get("CC", "")
    if not value.strip():
        return words
    why = program_reason(words[0], "compiler")
    if why is None:
        return words
    said = f"{show(value)}: " + (why if value.strip() == words[0] else
                                 f"{show(words[0])}: {why}")
    if cc is not None:
        raise BadOption(said, "--cc")
    raise UsageError(f"CC {said} (bench accept's compiler when --cc is not given)")


@group("kcount")
def kcount_group() -> None:
    """Count a guest kernel's instructions, locks and atomics per call through QEMU's gdbstub."""


@kcount_group.command()
@click.option("--kernel", required=True, type=InputFile(),
              help="The kernel the guest booted (symbols).")
@click.option("--port", default=1234, show_default=True, type=click.IntRange(1, 65535),
              help="QEMU -gdb tcp:127.0.0.1:PORT.")
@click.option("--samples", default=40, show_default=True,
              type=click.IntRange(1, kcount.SAMPLES_MAX),
              help=f"Calls to record (at most {kcount.SAMPLES_MAX:,}: a trace of more would "
                   "pass the size analyze reads).")
@click.option("--outer", default=kcount.OUTER, show_default=True,
              help="Function to trace (kern_accept4: accept(2); tcp_input: a segment).")
@click.option("--inner", multiple=True, default=kcount.INNER, show_default=True,
              help="Functions whose frames are counted inside it (repeatable); "
                   "the outer's marks are added.")
@click.option("--out", required=True, type=FILE,
              help="Trace file (JSON).")
@click.option("--only-syn", is_flag=True,
              help="With --outer tcp_input: step only segments with SYN set and ACK clear.")
@click.option("--others-run", is_flag=True, help="Let the other vCPUs run while stepping.")
@click.option("--limit", default=kcount.STEP_LIMIT, show_default=True,
              type=click.IntRange(1, 10 ** 9), help="Steps per call at most.")
@click.option("--dry-run", is_flag=True, help="Print the gdb command, run nothing.")
def record(kernel, port, samples, outer, inner, out, only_syn, others_run, limit, dry_run):
    """Record --samples invocations of --outer, every instruction."""
    check_out_file(out)  # checked before gdb attaches
    tree_build.check_kernel_file(kernel)  # the one check of a kernel file
    for name, opt in [(outer, "--outer")] + [(n, "--inner") for n in inner]:
        try:
            kcount.check_function(name, "function")
        except kcount.KcountError as exc:
            raise BadOption(str(exc), opt) from None
    names = kcount.record_names(outer, inner)
    kw = dict(only_syn=only_syn, others_run=others_run, limit=limit)
    try:
        if dry_run:
            click.echo("\n".join(kcount.dry_run_lines(kernel, port, samples, outer, names, out, **kw)))
        else:
            kcount.record(kernel, port, samples, outer, names, out, **kw)
    except OSError as exc:  # nm or gdb missing (rxl doctor names their packages)
        raise click.ClickException(f"{exc.filename}: {exc.strerror}; see rxl doctor") from None


@kcount_group.command()
@click.argument("traces", nargs=-1, required=True,
                type=InputFile(allow_dash=True))
@click.option("--mark", help="Which marked calls (default: each of the outer's marks "
                             "a complete call entered).")
@click.option("--json", "as_json", is_flag=True)
def analyze(traces, mark, as_json):
    """Instructions (locks, atomics) per function over each trace's marked calls (-: stdin)."""
    check_distinct_inputs(traces, "TRACES")  # the rows are keyed by trace: one hid the other
    rows = {}
    for t in traces:
        doc = kcount.load(t)
        samples = kcount.samples_of(doc)
        for m in kcount.marked(doc, mark, samples):  # the check sites, diff, table make
            rows[f"{t} [{m}]"] = kcount.summarize(samples, m)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for t, res in rows.items():
        click.echo(f"{t}: {counted(res['total']['n'], 'marked call')} "
                   f"({counted(res['other']['n'], 'other')})")
        for name, st in res.items():
            if name == "other" or not st["n"]:
                continue
            click.echo(f"  {name:28} median {st['median']:>7g}  min {st['min']:>5}  "
                       f"max {st['max']:>5}  (n={st['n']})")


@kcount_group.command()
@click.option("--trace", "traces", multiple=True, required=True, nargs=3,
              metavar="CASE VARIANT FILE",
              help=f"A trace of CASE ({', '.join(kcount.CASES)}) on VARIANT "
                   f"({', '.join(kcount.VARIANTS)}); repeatable.")
@click.option("--out", type=FILE,
              help="Write the JSON here (default: stdout).")
def table(traces, out):
    """The kernel cost table's JSON: {case: {variant: {instructions, locks, atomics}}}.

    syn-on may take two traces per variant: tcp_input --only-syn (the SYN)
    and syncache_expand (the ACK); their values are added.
    """
    if out:
        check_out_file(out)  # before the traces are read
        check_out_not_input(out, [path for _, _, path in traces], "--out", "--trace")
    docs: dict = {}
    for case, variant, path in traces:
        if case not in kcount.CASES:
            raise UsageError(f"--trace: case {case!r}: one of {', '.join(kcount.CASES)}")
        if variant not in kcount.VARIANTS:
            raise UsageError(f"--trace: variant {variant!r}: one of {', '.join(kcount.VARIANTS)}")
        docs.setdefault((case, variant), []).append(kcount.load(path))
    ordered = kcount.table_doc(docs)
    text = json.dumps(ordered, indent=2) + "\n"
    if out:
        try:
            Path(out).write_text(text)
        except OSError as exc:
            raise click.ClickException(f"--out {out}: cannot write it: {exc.strerror}") \
                from None
    else:
        click.echo(text, nl=False)


def _marked_pcs(doc: dict, mark: str) -> list:
    """Every pc of the samples of ``doc`` that entered ``mark``."""
    return [p for i in kcount.marked(doc, mark)[mark] for p in doc["samples"][i]["pc"]]


def _symbols(kernel: str, option: str, trace: str, pcs):
    """The symbolizer of ``kernel`` (rxl.bench.kcount.kernel_symbols: the one
    kernel check, record's), refusing a trace with an address no text symbol
    of it holds: the trace was recorded on another kernel."""
    name = kcount.symbolizer(kcount.kernel_symbols(kernel, option))
    lost = sorted({int(p) & ((1 << 64) - 1) for p in pcs if name(int(p) & ((1 << 64) - 1)) == "?"})
    if lost:
        raise kcount.KcountError(
            f"{trace}: {counted(len(lost), 'address', 'addresses')} of the trace "
            f"({lost[0]:#x}{' ...' if len(lost) > 1 else ''}) in no text symbol of "
            f"{show(kernel)}: not the kernel it was recorded on")
    return name


@kcount_group.command("sites")
@click.argument("trace", type=InputFile())
@click.option("--kernel", required=True, type=InputFile(),
              help="The kernel the trace was recorded on (symbols).")
@click.option("--mark", help="Which marked calls (default: the outer's first mark a "
                             "complete call entered).")
def sites_cmd(trace, kernel, mark):
    """Atomics and locks per function in the median marked call of TRACE."""
    doc = kcount.load(trace)
    if doc.get("asm") is None:
        raise kcount.KcountError(f"{doc['path']}: the trace has no disassembly (recorded "
                                 "before locks and atomics were counted); record it again")
    mark = kcount.default_mark(doc, mark)
    i = kcount.median_sample(doc, mark)
    name = _symbols(kernel, "--kernel", doc["path"], doc["samples"][i]["pc"])
    got = kcount.sites(doc["samples"][i], doc["asm"], name)
    click.echo(f"{trace}: sample {i + 1} (median of the calls entering {mark})")
    for f, (a, lk) in got.items():
        click.echo(f"  {f:36} atomics {a:3}  locks {lk:3}")
    click.echo(f"  {'total':36} atomics {sum(a for a, _ in got.values()):3}  "
               f"locks {sum(lk for _, lk in got.values()):3}")


@kcount_group.command("diff")
@click.argument("base", type=InputFile())
@click.argument("base_kernel", type=InputFile())
@click.argument("other", type=InputFile())
@click.argument("other_kernel", type=InputFile())
@click.option("--mark", help="Which marked calls (default: the outer's first mark a "
                             "complete call entered).")
@click.option("--top", default=25, show_default=True, type=click.IntRange(min=0),
              help="Rows to print.")
def diff_cmd(base, base_kernel, other, other_kernel, mark, top):
    """Per function, the median own instructions of the marked calls of
    BASE (on BASE_KERNEL) and OTHER: the functions that differ."""
    da, db = kcount.load(base), kcount.load(other)
    given = mark
    mark = kcount.default_mark(da, given)
    if mark not in kcount.marked(db, given):  # without --mark: OTHER's own marks
        raise kcount.KcountError(f"{db['path']}: no complete sample entered {mark} (the "
                                 f"mark read in {da['path']}); give --mark FUNCTION")
    a = kcount.self_counts(da, mark, _symbols(base_kernel, "BASE_KERNEL", da["path"],
                                              _marked_pcs(da, mark)))
    b = kcount.self_counts(db, mark, _symbols(other_kernel, "OTHER_KERNEL", db["path"],
                                              _marked_pcs(db, mark)))
    rows = kcount.self_diff(a, b)
    click.echo(f"{'function':36} {'base':>7} {'other':>7} {'delta':>7}  ({mark})")
    for f, x, y in rows[:top]:
        click.echo(f"{f:36} {x:7} {y:7} {y - x:+7}")
    click.echo(f"{'sum of the medians':36} {sum(a.values()):7} {sum(b.values()):7} "
               f"{sum(b.values()) - sum(a.values()):+7}")


@kcount_group.command("setsockopt")
@click.option("--kernel", required=True, help="The kernel to boot (the series', or pristine).")
@click.option("--src", required=True, help="FreeBSD tree whose world the root takes.")
@click.option("--objdir", required=True, help="MAKEOBJDIRPREFIX of that world.")
@click.option("--out", required=True, help="Directory for the binary, root and log.")
@click.option("--calls", default=lbsetsock.CALLS, show_default=True,
              type=click.IntRange(0, 2**31 - 1),
              help="setsockopt(TCP_REUSPORT_LB_CPU) calls (0: time the creation only).")
@click.option("--change", is_flag=True,
              help="Real tag changes: member k alternates between two CPUs, so every "
                   "call changes the group's deal inputs (the series drops the map and "
                   "deals at the group's next accept(2)); default: the tag it has "
                   "(no change).")
@click.option("--accept", is_flag=True,
              help="After each call of the loop and of the control, one connection to "
                   "the group, accepted (needs --calls > 0): with --change every "
                   "accept(2) deals the group (review 15l MINOR-3); a measurement, "
                   "no target.")
@click.option("--untagged", is_flag=True,
              help="Create the members untagged (the pristine baseline; needs --calls 0).")
@click.option("--control", is_flag=True,
              help="With --untagged: each member makes one setsockopt(TCP_NODELAY) "
                   "where the tag would be (the syscall tagging costs, with nothing "
                   "of the series).")
@click.option("--create-reps", default=lbsetsock.CREATE_REPS, show_default=True,
              type=click.IntRange(1, lbsetsock.MAX_CREATE_REPS),
              help="Times the group is created (the median is reported).")
@click.option("--members", default=lbsetsock.MEMBERS, show_default=True,
              type=click.IntRange(1, lbsetsock.MEMBERS), help="Group members.")
@click.option("--rounds", default=2000, show_default=True,
              type=click.IntRange(1, lbsetsock.MAX_ROUNDS),
              help="Idle bystander connect+accept rounds, over all blocks.")
@click.option("--blocks", default=10, show_default=True,
              type=click.IntRange(1, lbsetsock.MAX_ROUNDS),
              help="Blocks of idle, control and loop, interleaved.")
@click.option("--tunable", "tunables", multiple=True, metavar="NAME=VALUE",
              help="Loader tunable for the boot (repeatable), e.g. "
                   "net.isr.bindthreads=1 to keep the loopback netisr on CPU 0.")
@click.option("--dry-run", is_flag=True, help="Print the commands, run nothing.")
def setsockopt(kernel, src, objdir, out, calls, change, accept, untagged, control,
               create_reps, members, rounds, blocks, tunables, dry_run):
    """The tagging targets on a MEMBERS group: the creation time of its tagged
    members, then CALLS setsockopt(TCP_REUSPORT_LB_CPU) by an unprivileged
    process (unchanged tags, or --change), its rebuilds and a bystander's
    connect+accept latency against idle (target <= 1.2x). Compare the creation
    with a pristine kernel's run with --untagged --calls 0 (and --control for
    the share of the one more syscall per member). With --accept each call
    is followed by a connect+accept to the group (with --change: a deal per
    call). It reads the
    tree's world and boots: hold the build lock around it (flock
    $RXL_WORK/build.lock, the lock rxl build takes)."""
    args = lbsetsock.program_args(members=members, calls=calls, rounds=rounds,
                                  blocks=blocks, change=change, untagged=untagged,
                                  control=control, accept=accept,
                                  create_reps=create_reps)  # BadOption naming the option
    try:
        tun = dict(name_values(tunables, "--tunable"))
    except LearnUsage as exc:
        raise click.BadParameter(str(exc), param_hint="--tunable")
    v = lbsetsock.run(kernel, src, objdir, out, args, tunables=tun, dry_run=dry_run,
                      echo=click.echo)
    if v:
        click.echo(json.dumps(v, indent=2))
        c = v["create"]
        kind = ("tagged" if c["tagged"] else
                "untagged, one setsockopt(TCP_NODELAY) each" if c.get("control")
                else "untagged")
        click.echo(f"creation of {c['members']} {kind} "
                   f"members: p50 {c['p50_ns']} ns over {c['reps']}, "
                   f"{c['nvcsw']} voluntary context switches")
        if "total_p50_ns" in c:
            click.echo(f"first connection after it: p50 {c['first_p50_ns']} ns; creation "
                       f"and first connection: p50 {c['total_p50_ns']} ns")
    if v.get("calls") and v.get("accept"):
        _report_accept(v)
    elif v.get("calls"):
        reb = ("not counted by this kernel's groups view"
               if v["rebuilds_ok"] is None else
               f"{'met' if v['rebuilds_ok'] else 'NOT met'}")
        click.echo(f"rebuilds {v['rebuilds']} (target {v['rebuilds_expected']}): "
                   f"{reb}; latency "
                   f"{v['ratio']}x idle (target <= {lbsetsock.MAX_RATIO}x): "
                   f"{'met' if v['ratio_ok'] else 'NOT met'}")
        if "loop_vs_control" in v:
            click.echo(f"control loop (SO_SNDBUF): {v['control_ratio']}x idle; "
                       f"the series' loop is {v['loop_vs_control']}x the control")


def _us(ns):
    """ns as microseconds, one decimal ("?" for None)."""
    return "?" if ns is None else f"{ns / 1000:.1f} us"


def _ms(ns):
    """ns as milliseconds, three decimals."""
    return f"{ns / 1e6:.3f}"


def _report_accept(v):
    """The --accept run's lines: per-call times, the bystander, the deals seen."""
    us, ms = _us, _ms
    kind = "tag change" if v["change"] else "unchanged tag"
    click.echo(f"{kind} + connect + accept(2), {v['calls']} calls: loop "
               f"{us(v['loop_per_call_ns'])} per call, control (SO_SNDBUF + the same "
               f"connection) {us(v['control_per_call_ns'])} per call")
    click.echo(f"bystander p50 idle / control / loop: {ms(v['idle_p50_ns'])} / "
               f"{ms(v['control_p50_ns'])} / {ms(v['loop_p50_ns'])} ms; loop "
               f"{v['ratio']}x idle, {v['loop_vs_control']}x the control (a measurement, "
               f"no target)")
    d = v["deals"]
    seen = ("the view shows no deal flag" if v["deals_ok"] is None else
            f"{'as expected' if v['deals_ok'] else 'NOT as expected'} "
            f"({'one deal per change' if v['change'] else 'no deal'})")
    click.echo(f"deals checked in the groups view: {d['marked']} of {d['checks']} calls "
               f"marked the group, {d['dealt']} dealt at accept(2): {seen}")
    if v["rebuilds"] is not None:
        click.echo(f"rebuilds {v['rebuilds']} (expected {v['rebuilds_expected']})")
