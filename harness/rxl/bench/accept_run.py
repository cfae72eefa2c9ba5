"""Running the accept rig: every configuration x setup x repetition.

:func:`run_all` builds the server (and, for the eBPF setups, the
libbpf-enabled server, the BPF object and the map file), runs each setup
``repetitions`` times, keeps raw JSON when asked, prints progress and
warnings through the callbacks, and returns the summaries plus the setups
it had to skip and why (an eBPF setup that cannot load here is skipped
with the reason; the rest still run).  ``rxl bench accept`` only parses
options and prints.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

from rxl.bench import accept, accept_stats, ebpf, wakeups
from rxl.bench.counters import CounterError
from rxl.decide import topology
from rxl.decide.cpugroup import Topology


@dataclass
class Request:
    """What to run.  ``setups`` are canonical names (accept.unique_setups);
    ``topology`` a Topology (``--topology``'s, loaded once), a spec for
    :func:`rxl.decide.topology.load`, or None for the host's (sysfs); ``numa_map`` a ``CPU:NODE,...`` string or None for
    the host's nodes."""

    setups: Sequence[str]
    cfgs: Sequence[accept.RunConfig]
    repetitions: int
    build_dir: Path
    cc: List[str]
    raw_dir: Optional[Path] = None
    dry_run: bool = False
    quiet: bool = False
    topology: Union[Topology, str, None] = None
    numa_map: Optional[str] = None
    skipped: Dict[str, str] = field(default_factory=dict)


@dataclass
class _Ebpf:
    server: Path
    obj: Path
    maps: Dict[str, Path]
    deal: Optional[object] = None
    index: Optional[List[int]] = None      # numa-rr: rank -> sockarray
    nodes: Optional[Dict[int, int]] = None  # numa-rr: cpu -> node


def _ebpf_prepare(req: Request, cfg: accept.RunConfig, echo) -> Optional[_Ebpf]:
    """Build and write the maps for cfg's worker count; None (with
    req.skipped filled) when the eBPF setups cannot run here."""
    want = [s for s in req.setups if s in accept.EBPF_SETUPS]
    if not want:
        return None
    if "ebpf-deal" in want and cfg.connections > ebpf.LOG_ENTRIES:
        raise accept.BenchError(f"ebpf-deal checks every connection against the "
                           f"model from a log of {ebpf.LOG_ENTRIES}: use "
                           f"--connections <= {ebpf.LOG_ENTRIES}")
    why = None if req.dry_run else ebpf.unavailable()
    if why is None and not cfg.pin:
        why = "the eBPF setups need --pin (the map is built from the " \
              "workers' CPUs)"
    try:
        if why is None:
            server, obj = ebpf.build(req.build_dir, req.cc,
                                     list(accept.CFLAGS),
                                     dry_run=req.dry_run, echo=echo)
    except ebpf.Unavailable as e:
        why = str(e)
    if why is not None:
        for s in want:
            req.skipped[s] = why
        return None
    topo = (ebpf.host_topology() if req.topology is None else req.topology
            if isinstance(req.topology, Topology) else topology.load(req.topology))
    # acceptd pins rank r to CPU r mod (this host's CPUs), whatever the
    # topology says: the map must be dealt for those CPUs.
    cpus = ebpf.pinned_cpus(cfg.workers, topo)
    # --deal-counts rx: dealt from the receiving CPUs' connections, as
    # learning would have counted them; tags: nothing counted yet.
    counts = (wakeups.client_conns(cfg.connections, rx_cpus(cfg))
              if cfg.knobs.deal_counts == "rx" else None)
    lines, d = ebpf.deal_lines(topo, cpus, counts=counts)
    nodes = (ebpf.parse_node_map(req.numa_map) if req.numa_map is not None
             else ebpf.host_nodes() or {c: 0 for c in topo.cpus})
    maps = {}
    for setup, content in (("ebpf-deal", lines),
                           ("ebpf-numa-rr", ebpf.numa_lines(cpus, nodes))):
        # Kept beside the raw JSON, else per process in the build
        # directory (two runs may deal different topologies) and removed
        # after the run.
        p = (Path(req.raw_dir) / f"maps-{setup}-w{cfg.workers}.txt"
             if req.raw_dir else req.build_dir /
             f"maps-{setup}-w{cfg.workers}-{os.getpid()}.txt")
        if not req.dry_run:
            p.write_text("\n".join(content) + "\n")
        maps[setup] = p
    return _Ebpf(server, obj, maps, d, ebpf.numa_layout(cpus, nodes)[0],
                 nodes)


def rx_cpus(cfg: accept.RunConfig) -> List[int]:
    """The request workload's receiving (client) CPUs: --rx-cpus, else
    every CPU acceptd sees."""
    if cfg.knobs.rx_cpus is not None:
        return list(cfg.knobs.rx_cpus)
    return list(range(ebpf.host_ncpu()))


def prediction(setup: str, cfg: accept.RunConfig,
               eb: Optional[_Ebpf]) -> Optional[dict]:
    """What the setup's rule predicts for the request workload
    (:func:`rxl.bench.wakeups.predict`, as JSON), or None: no request
    workload, unpinned workers, or a setup without a rule."""
    if not cfg.knobs.requests or not cfg.pin:
        return None
    ncpu = ebpf.host_ncpu()
    untagged = cfg.knobs.untagged
    if untagged is None:
        untagged = cfg.workers - 1          # acceptd's default: the last
    p = wakeups.predict(setup, ebpf.worker_cpus(cfg.workers, ncpu),
                        wakeups.client_conns(cfg.connections, rx_cpus(cfg)),
                        ncpu=ncpu, deal=eb.deal if eb else None,
                        untagged=None if untagged < 0 else untagged,
                        nodes=eb.nodes if eb else None)
    return p.as_json() if p is not None else None


def _argv(req: Request, binary: Path, setup: str, cfg: accept.RunConfig,
          eb: Optional[_Ebpf]) -> List[str]:
    argv = accept.server_argv(binary, setup, cfg)
    if setup in accept.EBPF_SETUPS and eb is not None:
        argv[0] = str(eb.server)
        argv += ["-B", f"{eb.obj}:{ebpf.PROGRAMS[setup]}",
                 "-b", str(eb.maps[setup]), "-C"]
    return argv


def _keep_raw(req: Request, setup: str, cfg: accept.RunConfig, rep: int,
              out: str, warn) -> None:
    if not req.raw_dir:
        return
    raw = Path(req.raw_dir) / f"{setup}-work{cfg.work_ms:g}-r{rep}.json"
    try:
        raw.write_text(out)
    except OSError as e:
        # The run is done: keep it, say what was not kept.
        warn(f"warning: cannot write {raw}: {e.strerror}")


def _run_setup(req: Request, argv: List[str], setup: str,
               cfg: accept.RunConfig, eb: Optional[_Ebpf],
               warn) -> Optional[accept_stats.Summary]:
    """Run one setup ``req.repetitions`` times; its summary, or None
    (with ``req.skipped`` filled) when acceptd cannot load its BPF."""
    runs = []
    try:
        for rep in range(req.repetitions):
            out = accept.run_server(argv, accept.deadline_ms(cfg) / 1000.0 + 15)
            _keep_raw(req, setup, cfg, rep, out, warn)
            run = accept_stats.parse_run(out)
            # acceptd names the mode ("ebpf"); label by setup.
            run.setup = run.raw["setup"] = setup
            if setup == "ebpf-deal":
                run.raw["deal_counts"] = cfg.knobs.deal_counts
            if cfg.knobs.requests:
                run.raw["wakeups_prediction"] = prediction(setup, cfg, eb)
                try:     # fail closed: a run whose counts do not add up
                    wakeups.run_wakeups(run.raw)
                except CounterError as e:
                    raise accept.BenchError(f"{setup} run {rep + 1}: "
                                            f"{e}") from None
            if setup in accept.EBPF_SETUPS:
                run.raw["ebpf_summary"] = ebpf.summary(
                    run.raw, eb.index if setup == "ebpf-numa-rr"
                    and eb is not None else None)
            if setup == "ebpf-deal" and eb is not None:
                run.raw["model_agreement"] = ebpf.model_agreement(
                    run.raw, eb.deal)
            runs.append(run)
            for w in accept_stats.run_warnings(run):
                warn(f"warning: {run.label} run {rep + 1}: {w}")
            if not req.quiet:
                warn(f"{run.label} run {rep + 1}/{req.repetitions}:"
                     f" {run.accepts}")
    except accept.Unloadable as e:
        req.skipped[setup] = str(e)
        return None
    return accept_stats.summarise(runs)


def run_all(req: Request, echo: Callable[[str], None],
            warn: Callable[[str], None]) -> Tuple[List[accept_stats.Summary],
                                                  Dict[str, str]]:
    """Run everything; returns (summaries, {skipped setup: reason}).

    ``echo`` gets the dry run's commands, ``warn`` progress and warnings.
    Raises BenchError on a failed build or run (other than an eBPF load).
    """
    binary = accept.ensure_built(req.build_dir, cc=req.cc, dry_run=req.dry_run,
                            echo=echo)
    summaries = []
    for cfg in req.cfgs:
        eb = _ebpf_prepare(req, cfg, echo)
        try:
            for setup in req.setups:
                if setup in req.skipped:
                    continue
                argv = _argv(req, binary, setup, cfg, eb)
                if req.dry_run:
                    for _ in range(req.repetitions):
                        echo(shlex.join(argv))
                    continue
                s = _run_setup(req, argv, setup, cfg, eb, warn)
                if s is not None:
                    summaries.append(s)
        finally:
            # A failed or interrupted run must not leave map files behind.
            if eb is not None and not req.raw_dir and not req.dry_run:
                for p in eb.maps.values():
                    p.unlink(missing_ok=True)
    for setup, why in req.skipped.items():
        warn(f"skipped {setup}: {why}")
    return summaries, dict(req.skipped)
