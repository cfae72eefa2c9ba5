"""The steps of ``rxl learn`` that are neither options nor printing.

:class:`Conductor` drives the host's connections whenever the guest says
``LEARN READY``; :func:`world_lines` / :func:`build_guest_world` plan and
build the guest userland as ``rxl run`` does; :func:`single_thread` turns a
QEMU argv to one TCG thread; :func:`analyze_log` turns one saved console
log into the run's metrics.
"""

from __future__ import annotations

import queue
import re
import threading
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from rxl.learn import plan as L
from rxl.learn import results as R
from rxl.learn import metrics as M
from rxl.learn import drive as D
from rxl.learn import groups as G
from rxl.verify import parse as parse_mod
from rxl.decide import topology
from rxl.decide import cpugroup


_READY = re.compile(re.escape(parse_mod.MARK) + r" LEARN READY (\S+)")


class Conductor:
    """Drives the host's connections whenever the guest prints ``LEARN READY <label>``.

    ``on_line`` is given to :func:`rxl.guest.console.watch` as its ``echo``; a
    daemon thread waits (bounded by ``wait_s`` per run) for the next ready
    label and runs :func:`rxl.learn.drive.drive_run` against ``port``.
    """

    def __init__(self, port: int, phases: Sequence[L.Phase], nruns: int, *,
                 concurrency: int, wait_s: float, echo: Callable[[str], None],
                 connect: Callable[[int, str], bool] = D.connect_once):
        self.port, self.phases, self.nruns = port, list(phases), nruns
        self.connect = connect
        self.concurrency, self.wait_s, self.echo = concurrency, wait_s, echo
        self.q: "queue.Queue[Optional[str]]" = queue.Queue()
        self.results: Dict[str, List[D.PhaseResult]] = {}
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def on_line(self, line: str) -> None:
        self.echo(f"  {line}")
        m = _READY.match(line)
        if m:
            self.q.put(m.group(1))

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.q.put(None)
        self.thread.join(30)

    def _loop(self) -> None:
        for _ in range(self.nruns):
            try:
                label = self.q.get(timeout=self.wait_s)
            except queue.Empty:
                self.echo("  driver: no LEARN READY line in time; stopping the driver")
                return
            if label is None:
                return
            before = getattr(self.connect, "retries", 0)
            res = D.drive_run(self.port, self.phases, concurrency=self.concurrency,
                              connect=self.connect)
            self.results[label] = res
            retried = getattr(self.connect, "retries", 0) - before
            self.echo("  driver: " + label + ": " + "; ".join(
                f"{r.name} {r.ok}/{r.attempts} ok in {r.seconds:.0f} s"
                + (f" ({r.stopped_by})" if r.stopped_by else "") for r in res)
                + f"; {retried} tries retried on a fresh client port")


def qemu_extra(pcap: bool, qemu_args: Sequence[str], out: str, boot: str) -> Tuple[str, ...]:
    """QEMU arguments a boot adds: the ``--pcap`` dump to ``<out>/<boot>.pcap``,
    then ``--qemu-arg``s."""
    dump = ("-object", f"filter-dump,id=dump0,netdev=net0,"
            f"file={Path(out) / (boot + '.pcap')}") if pcap else ()
    return dump + tuple(qemu_args)


def single_thread(argv: List[str]) -> List[str]:
    """``argv`` with ``-machine q35,accel=tcg`` turned into ``-machine q35 -accel tcg,thread=single``.

    QEMU refuses both spellings at once. Raises ValueError if the argv has
    no ``accel=tcg`` machine option.
    """
    out = list(argv)
    for i, a in enumerate(out[:-1]):
        if a == "-machine" and ",accel=tcg" in out[i + 1]:
            out[i + 1] = out[i + 1].replace(",accel=tcg", "")
            return out[:i + 2] + ["-accel", "tcg,thread=single"] + out[i + 2:]
    raise ValueError("no '-machine ...,accel=tcg' in the QEMU argv")


def world_lines(src: str, objdir: str) -> List[str]:
    """Shell lines of the guest userland build (kernel-toolchain first if the objdir lacks it)."""
    from rxl.tree import build as build_mod
    from rxl.tree import world as world_mod
    lines = []
    if not build_mod.toolchain_done(objdir, src):
        lines.append(build_mod.plan_stages(src, objdir, toolchain=True)[0].shell())
    return lines + world_mod.shell_lines(src, objdir)


def build_guest_world(src: str, objdir: str, logdir: str, echo: Callable[[str], None]) -> None:
    """Build the guest userland as ``rxl run`` does (kernel-toolchain first if needed).

    Raises rxl.tree.build.BuildError naming the failed stage's log, RuntimeError
    when a product is missing afterwards.
    """
    from rxl.tree import build as build_mod
    from rxl.tree import world as world_mod
    Path(objdir).mkdir(parents=True, exist_ok=True)
    if not build_mod.toolchain_done(objdir, src):
        st = build_mod.plan_stages(src, objdir, toolchain=True)[0]
        echo(f"$ {st.shell()}")
        res = build_mod.run_stage(st, logdir, echo)
        (Path(objdir) / build_mod.TOOLCHAIN_DONE).touch()
        echo(f"{st.name}: done in {res.seconds:.0f} s")
    for line in world_mod.shell_lines(src, objdir):
        echo(f"$ {line}")
    world_mod.build_world(src, objdir, logdir=logdir, echo=echo)


def analyze_log(path: str, topo_override: Optional[str] = None) -> dict:
    """Parse one console log: console result, learn runs, topology, metrics.

    Returns ``{"log", "outcome", "topology", "rxq", "runs": {label: metrics
    dict}, "errors": [...], "metrics": [RunMetrics]}``. Raises OSError when
    the log cannot be read.
    """
    text = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    con = parse_mod.parse_console(text)
    runs = R.parse_learn(text)
    errors: List[str] = []
    if topo_override:
        topo = topology.load(topo_override)
    elif con.topology_xml:
        try:
            topo = topology.parse_spec(con.topology_xml, name=f"guest ({Path(path).name})")
        except cpugroup.TopologyError as exc:
            errors.append(f"{path}: {exc}; using qemu-2s")
            topo = topology.load("qemu-2s")
    else:
        errors.append(f"{path}: no topology in the log; using qemu-2s")
        topo = topology.load("qemu-2s")
    rxq = M.rxq_cpus(con.rxq)
    metrics = []
    for label, run in runs.items():
        if not run.complete:
            errors.append(f"{path}: run {label}: no DONE line (learnd did not finish)")
            continue
        try:
            metrics.append(M.analyze(run, topo, rxq))
        except L.LearnError as exc:
            errors.append(f"{path}: {exc}")
    if con.outcome != "completed":
        errors.append(f"{path}: guest {con.outcome} ({con.last_line!r})")
    return {"log": path, "outcome": con.outcome, "topology": topo.name,
            "topology_xml": con.topology_xml, "rxq": rxq,
            "sysctls": {**con.sysctls, **con.rxq},
            "runs": {lbl: {"info": r.info, "sets": r.sets, "sysctls": r.sysctls,
                           "done": r.done, "ftypes": r.ftypes, "notes": r.notes,
                           "workers": r.workers}
                     for lbl, r in runs.items()},
            "views": {lbl: G.views(r.views) for lbl, r in runs.items() if r.views},
            "errors": errors, "metrics": metrics}
