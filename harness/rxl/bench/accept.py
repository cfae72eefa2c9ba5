"""Accept-distribution rig: the pure parts.

Everything here is side-effect free except :func:`ensure_built` and
:func:`run_server`, which are thin wrappers around ``cc`` and the server;
the rest (argv building, parsing the server's JSON, summarising, the plain
table) is unit-tested on recorded runs under ``tests/data/bench/``.

The workload is the one of seed 004 ("The rig"): N workers, one
connection at a time from loopback, a fixed spacing, repeated runs, and per
worker the wakeups, accepts, empty wakeups and CPU time.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import statistics
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence

SOURCE = Path(__file__).with_name("acceptd.c")

#: Compiler flags; the file must build with exactly these on Linux (issue 5)
#: and, minus nothing, on FreeBSD.  -O2 is ours: the rig's own CPU time
#: should not dominate the figures it reports.
CFLAGS = ("-std=c99", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror",
          "-pthread", "-O2")

#: Setup name -> (server mode, one-line description).  The names are the
#: issue's; the modes are ``acceptd -m``.  Order is the table's order.
SETUPS: Dict[str, tuple] = {
    "noflag": ("noflag", "shared listener, epoll, no flag"),
    "exclusive": ("exclusive", "shared listener, all EPOLLEXCLUSIVE"),
    "half": ("half", "shared listener, even ranks EPOLLEXCLUSIVE"),
    "reorder16": ("reorder16",
                  "EPOLLEXCLUSIVE, DEL+ADD every 16 accepts (nginx 1.21.6)"),
    "reuseport": ("reuseport", "listener per worker, SO_REUSEPORT hash"),
    "incoming-cpu": ("incoming-cpu",
                     "SO_REUSEPORT + SO_INCOMING_CPU, last rank untagged"),
    "cbpf-cpu": ("cbpf-cpu", "SO_REUSEPORT + cBPF returning the CPU"),
}

#: Setups that need Linux (epoll flags, SO_INCOMING_CPU, reuseport cBPF).
LINUX_ONLY = frozenset(SETUPS) - {"noflag", "reuseport"}

# Defaults: seed 004, "The rig": eight workers, 500 connections 2 ms apart,
# five repetitions, zero work (fake work of 2, 5 and 10 ms in "The kernel
# skips a busy worker").  The re-add interval is nginx 1.21.6's
# (ngx_reorder_accept_events, seed 004 "nginx hit this wall in 2022").
DEFAULT_WORKERS = 8
DEFAULT_CONNECTIONS = 500
DEFAULT_SPACING_MS = 2.0
DEFAULT_REPETITIONS = 5
DEFAULT_WORK_MS = 0.0
DEFAULT_REORDER_EVERY = 16

#: Limits of acceptd.c (MAXWORKERS, MAXCONNS).
MAX_WORKERS = 256
MAX_CONNECTIONS = 100000

#: Slack added to a run's expected length to make the server's deadline:
#: registration, settling (500 ms + 4 x work) and worker exit (<= 1 s).
DEADLINE_SLACK_MS = 5000


class BenchError(Exception):
    """A one-line, user-facing error of the accept rig."""


# --------------------------------------------------------------- config


@dataclass(frozen=True)
class RunConfig:
    """One server invocation's knobs.

    Units: ``spacing_ms`` and ``work_ms`` in milliseconds (the server takes
    microseconds, rounded); ``order`` is the registration order as worker
    ids, or None for 0..workers-1; ``kill_first_at`` is a 1-based connection
    count after which the first registrant gets SIGKILL, or None.
    """

    workers: int = DEFAULT_WORKERS
    connections: int = DEFAULT_CONNECTIONS
    spacing_ms: float = DEFAULT_SPACING_MS
    work_ms: float = DEFAULT_WORK_MS
    order: Optional[tuple] = None
    kill_first_at: Optional[int] = None
    reorder_every: int = DEFAULT_REORDER_EVERY
    pin: bool = True
    client_rotate: bool = True

    def validate(self) -> None:
        """Raise BenchError on a value the server would refuse."""
        if not 1 <= self.workers <= MAX_WORKERS:
            raise BenchError(f"--workers must be 1..{MAX_WORKERS}, "
                             f"got {self.workers}")
        if not 1 <= self.connections <= MAX_CONNECTIONS:
            raise BenchError(f"--connections must be 1..{MAX_CONNECTIONS}, "
                             f"got {self.connections}")
        if self.spacing_ms < 0 or self.spacing_ms > 10000:
            raise BenchError(f"--spacing-ms must be 0..10000, "
                             f"got {self.spacing_ms}")
        if self.work_ms < 0 or self.work_ms > 10000:
            raise BenchError(f"--work-ms must be 0..10000, got {self.work_ms}")
        if self.reorder_every < 1:
            raise BenchError("--reorder-every must be >= 1")
        if self.kill_first_at is not None and not (
                1 <= self.kill_first_at < self.connections):
            raise BenchError(f"--kill-first-at must be 1..connections-1 "
                             f"({self.connections - 1}), "
                             f"got {self.kill_first_at}")
        if self.order is not None and sorted(self.order) != list(
                range(self.workers)):
            raise BenchError(f"--order must be a permutation of "
                             f"0..{self.workers - 1}, got "
                             f"{','.join(map(str, self.order))}")


def parse_order(spec: str, workers: int) -> Optional[tuple]:
    """Registration order from ``forward``, ``reverse`` or ``3,1,0,2``.

    Returns a tuple of worker ids in registration order, or None for
    ``forward`` (the server's default).  Raises BenchError when the list is
    not a permutation of 0..workers-1.  ``reverse`` is seed 004's control
    ("does the winner follow registration order?").
    """
    spec = spec.strip()
    if spec == "forward":
        return None
    if spec == "reverse":
        return tuple(range(workers - 1, -1, -1))
    try:
        ids = tuple(int(x) for x in spec.split(","))
    except ValueError:
        raise BenchError(f"--order must be forward, reverse or a comma "
                         f"list of worker ids, got {spec!r}") from None
    if sorted(ids) != list(range(workers)):
        raise BenchError(f"--order must be a permutation of "
                         f"0..{workers - 1}, got {spec!r}")
    return ids


def deadline_ms(cfg: RunConfig) -> int:
    """The server's own deadline for one run, in ms.

    Connections x (spacing + a 1 ms allowance for connect), plus the work
    spread over the workers, plus DEADLINE_SLACK_MS.  The server stops by
    itself at this deadline whatever happens.
    """
    run = cfg.connections * (cfg.spacing_ms + 1.0)
    work = cfg.connections * cfg.work_ms / max(1, cfg.workers)
    return int(run + work + DEADLINE_SLACK_MS)


def server_argv(binary: os.PathLike, setup: str, cfg: RunConfig) -> List[str]:
    """argv of one acceptd run for ``setup``; raises BenchError if unknown."""
    if setup not in SETUPS:
        raise BenchError(f"unknown setup {setup!r}; known: "
                         f"{', '.join(SETUPS)}")
    cfg.validate()
    argv = [str(binary), "-m", SETUPS[setup][0],
            "-w", str(cfg.workers),
            "-n", str(cfg.connections),
            "-s", str(int(round(cfg.spacing_ms * 1000))),
            "-t", str(int(round(cfg.work_ms * 1000))),
            "-d", str(deadline_ms(cfg)),
            "-r", str(cfg.reorder_every)]
    if cfg.order is not None:
        argv += ["-o", ",".join(str(i) for i in cfg.order)]
    if cfg.kill_first_at is not None:
        argv += ["-k", str(cfg.kill_first_at)]
    if cfg.pin:
        argv.append("-p")
    if cfg.client_rotate:
        argv.append("-c")
    return argv


# ---------------------------------------------------------------- build


def default_build_dir() -> Path:
    """Where the compiled server is cached.

    ``$RXL_BUILD_DIR/bench`` if set, else ``build/bench`` under the repo
    root when running from a checkout, else ``~/.cache/rxl/bench``.
    """
    env = os.environ.get("RXL_BUILD_DIR")
    if env:
        return Path(env) / "bench"
    root = Path(__file__).resolve().parents[3]
    if (root / "pyproject.toml").is_file():
        return root / "build" / "bench"
    return Path.home() / ".cache" / "rxl" / "bench"


def binary_path(build_dir: Path, source: Path = SOURCE,
                cflags: Sequence[str] = CFLAGS) -> Path:
    """Cached binary name: keyed on the source and flags, so an edit
    rebuilds and an unchanged source never does."""
    h = hashlib.sha256(Path(source).read_bytes())
    h.update("\0".join(cflags).encode())
    return Path(build_dir) / f"acceptd-{h.hexdigest()[:12]}"


def compile_argv(out: Path, cc: str = "cc", source: Path = SOURCE,
                 cflags: Sequence[str] = CFLAGS) -> List[str]:
    """argv that compiles the server to ``out``."""
    return [cc, *cflags, "-o", str(out), str(source)]


def ensure_built(build_dir: Path, cc: str = "cc", dry_run: bool = False,
                 echo: Callable[[str], None] = print) -> Path:
    """Compile the server unless a binary of this source exists.

    Returns the binary's path.  With ``dry_run`` prints the cc command
    instead of running it.  Raises BenchError when cc fails or is missing.
    """
    out = binary_path(build_dir)
    if out.exists() and not dry_run:
        return out
    argv = compile_argv(out, cc)
    if dry_run:
        echo(" ".join(argv))
        return out
    check_dir(out.parent, "build directory")
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    try:
        res = subprocess.run(compile_argv(tmp, cc), capture_output=True,
                             text=True, timeout=120)
    except FileNotFoundError:
        raise BenchError(f"compiler {cc!r} not found") from None
    if res.returncode != 0:
        first = (res.stderr.strip().splitlines() or ["?"])[0]
        raise BenchError(f"{cc} failed on {SOURCE.name}: {first}")
    os.replace(tmp, out)     # atomic: a concurrent run never sees half a file
    return out


def check_platform(setups: Iterable[str],
                   system: Optional[str] = None) -> None:
    """Raise BenchError if a setup needs Linux and this is not Linux."""
    system = system or platform.system()
    if system == "Linux":
        return
    bad = [s for s in setups if s in LINUX_ONLY]
    if bad:
        raise BenchError(f"setup(s) {', '.join(bad)} need Linux "
                         f"(this is {system})")


def run_server(argv: Sequence[str], timeout_s: float) -> str:
    """Run one server; return its stdout (one JSON object).

    Raises BenchError on a non-zero exit (with the server's first stderr
    line) or when it outlives ``timeout_s``.
    """
    try:
        res = subprocess.run(list(argv), capture_output=True, text=True,
                             timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise BenchError(f"server ran past {timeout_s:.0f} s: "
                         f"{' '.join(argv)}") from None
    if res.returncode != 0:
        first = (res.stderr.strip().splitlines() or ["no message"])[0]
        raise BenchError(f"server exited {res.returncode}: {first}")
    return res.stdout


# --------------------------------------------------------------- parsing

_PER_WORKER_KEYS = ("rank", "id", "wakeups", "accepts", "empty_wakeups",
                    "cpu_ms")


@dataclass
class Run:
    """One server run, workers in registration order.

    Lists are indexed by registration rank.  ``cpu_ms`` is user+system CPU
    of each worker process in ms (wait4(2)); ``vcsw`` its voluntary context
    switches, i.e. how often it went to sleep, which counts the wakeups the
    kernel delivered even when epoll_wait then found nothing and went back
    to sleep without returning.
    """

    setup: str
    workers: int
    connections: int
    work_ms: float
    connect_ok: int
    connect_failed: int
    accepted: int
    order: List[int]
    accepts: List[int]
    wakeups: List[int]
    empty_wakeups: List[int]
    cpu_ms: List[float]
    vcsw: List[int]
    local: List[int]
    killed: List[bool]
    tagged: List[bool]
    exclusive: List[bool]
    elapsed_ms: int = 0
    deadline_hit: bool = False
    raw: dict = field(default_factory=dict, repr=False)

    @property
    def lost(self) -> int:
        """Connections the client completed that no worker accepted."""
        return self.connect_ok - self.accepted

    def share(self, rank: int) -> float:
        """Fraction (0..1) of accepted connections taken by ``rank``."""
        total = sum(self.accepts)
        return self.accepts[rank] / total if total else 0.0

    def as_json(self) -> dict:
        """The --json per-run record: lists in registration order."""
        return {"accepts": self.accepts, "wakeups": self.wakeups,
                "empty_wakeups": self.empty_wakeups, "cpu_ms": self.cpu_ms,
                "vcsw": self.vcsw, "local": self.local, "order": self.order,
                "killed": self.killed, "connect_ok": self.connect_ok,
                "connect_failed": self.connect_failed,
                "accepted": self.accepted, "elapsed_ms": self.elapsed_ms}


def parse_run(text: str) -> Run:
    """Parse acceptd's stdout into a Run.

    Raises BenchError if the text is not one JSON object of acceptd
    version 1 or lacks a per-worker field.  The server already orders
    ``per_worker`` by registration rank; that order is checked, not trusted.
    """
    try:
        d = json.loads(text)
    except ValueError as e:
        raise BenchError(f"server output is not JSON: {e}") from None
    if not isinstance(d, dict) or d.get("tool") != "acceptd":
        raise BenchError("server output is not an acceptd summary")
    if d.get("version") != 1:
        raise BenchError(f"acceptd summary version {d.get('version')!r}, "
                         f"want 1")
    pw = d.get("per_worker")
    if not isinstance(pw, list) or len(pw) != d.get("workers"):
        raise BenchError("acceptd summary: per_worker does not match "
                         "workers")
    for i, w in enumerate(pw):
        missing = [k for k in _PER_WORKER_KEYS if k not in w]
        if missing:
            raise BenchError(f"acceptd summary: worker {i} lacks "
                             f"{', '.join(missing)}")
        if w["rank"] != i:
            raise BenchError("acceptd summary: per_worker not in rank order")
    return Run(
        setup=d["setup"], workers=d["workers"],
        connections=d["connections"], work_ms=d.get("work_us", 0) / 1000.0,
        connect_ok=d["connect_ok"], connect_failed=d["connect_failed"],
        accepted=d["accepted"], order=[w["id"] for w in pw],
        accepts=[w["accepts"] for w in pw],
        wakeups=[w["wakeups"] for w in pw],
        empty_wakeups=[w["empty_wakeups"] for w in pw],
        cpu_ms=[round(float(w["cpu_ms"]), 3) for w in pw],
        vcsw=[w.get("vcsw", 0) for w in pw],
        local=[w.get("local", 0) for w in pw],
        killed=[bool(w.get("killed")) for w in pw],
        tagged=[bool(w.get("tagged")) for w in pw],
        exclusive=[bool(w.get("exclusive")) for w in pw],
        elapsed_ms=d.get("elapsed_ms", 0),
        deadline_hit=bool(d.get("deadline_hit")), raw=d)


def run_warnings(run: Run) -> List[str]:
    """Why a run's figures may not mean what the table implies.

    Returns human-readable strings (empty when the run is clean): the
    deadline cut the client short, connects failed, or connected clients
    were never accepted (on Linux a killed SO_REUSEPORT listener's queue
    is dropped unless net.ipv4.tcp_migrate_req is set).
    """
    out = []
    if run.deadline_hit:
        out.append("server deadline hit; the client stopped early")
    if run.connect_ok + run.connect_failed < run.connections:
        out.append(f"only {run.connect_ok + run.connect_failed} of "
                   f"{run.connections} connections attempted")
    if run.connect_failed:
        out.append(f"{run.connect_failed} connects failed")
    if run.lost:
        out.append(f"{run.lost} connected clients never accepted")
    return out


# ------------------------------------------------------------ summarising


@dataclass(frozen=True)
class Stat:
    """Mean and min-max of one figure over repetitions."""

    mean: float
    lo: float
    hi: float

    @classmethod
    def of(cls, values: Sequence[float]) -> "Stat":
        """Raises BenchError on an empty sequence."""
        if not values:
            raise BenchError("no repetitions to summarise")
        return cls(statistics.fmean(values), min(values), max(values))

    def fmt(self, digits: int = 0, pct: bool = False) -> str:
        """``mean (lo-hi)``; ``pct`` renders fractions as percent."""
        k = 100.0 if pct else 1.0
        unit = "%" if pct else ""
        m, a, b = (f"{v * k:.{digits}f}"
                   for v in (self.mean, self.lo, self.hi))
        if a == b:
            return f"{m}{unit}"
        return f"{m}{unit} ({a}-{b})"

    def as_json(self) -> dict:
        """``{"mean", "min", "max"}``, same units as the figure."""
        return {"mean": self.mean, "min": self.lo, "max": self.hi}


@dataclass
class Summary:
    """One setup at one work time, over its repetitions.

    Totals are over all workers of a run; shares are fractions 0..1 of the
    accepted connections; ``per_rank`` holds each rank's accepts as a Stat.
    ``median_run`` is the run whose top share is the median, the single run
    whose distribution the table shows (seed 004 shows single runs).
    """

    setup: str
    work_ms: float
    runs: List[Run]
    wakeups: Stat
    accepts: Stat
    empty: Stat
    vcsw: Stat
    cpu_ms: Stat
    first_share: Stat
    last_share: Stat
    top_share: Stat
    local_share: Stat
    lost: Stat
    per_rank: List[Stat]
    median_run: Run

    @property
    def label(self) -> str:
        """Table label: the setup, plus the work time when non-zero."""
        if self.work_ms:
            return f"{self.setup} work={self.work_ms:g}ms"
        return self.setup

    def as_json(self) -> dict:
        """The --json record of this setup: its runs and the summary."""
        return {"setup": self.setup, "work_ms": self.work_ms,
                "runs": [r.as_json() for r in self.runs],
                "summary": {
                    "wakeups": self.wakeups.as_json(),
                    "accepts": self.accepts.as_json(),
                    "empty_wakeups": self.empty.as_json(),
                    "vcsw": self.vcsw.as_json(),
                    "cpu_ms": self.cpu_ms.as_json(),
                    "first_share": self.first_share.as_json(),
                    "last_share": self.last_share.as_json(),
                    "top_share": self.top_share.as_json(),
                    "local_share": self.local_share.as_json(),
                    "lost": self.lost.as_json(),
                    "accepts_by_rank": [s.as_json() for s in self.per_rank],
                }}


def summarise(runs: Sequence[Run]) -> Summary:
    """Summarise repetitions of one setup at one work time.

    Raises BenchError if ``runs`` is empty or mixes setups, worker counts
    or work times.
    """
    if not runs:
        raise BenchError("no runs to summarise")
    r0 = runs[0]
    for r in runs:
        if (r.setup, r.workers, r.work_ms) != (r0.setup, r0.workers,
                                               r0.work_ms):
            raise BenchError("runs of different setups cannot be "
                             "summarised together")

    def local_share(r: Run) -> float:
        total = sum(r.accepts)
        return sum(r.local) / total if total else 0.0

    def top(r: Run) -> float:
        return max(r.share(i) for i in range(r.workers))

    ranked = sorted(runs, key=top)
    return Summary(
        setup=r0.setup, work_ms=r0.work_ms, runs=list(runs),
        wakeups=Stat.of([sum(r.wakeups) for r in runs]),
        accepts=Stat.of([sum(r.accepts) for r in runs]),
        empty=Stat.of([sum(r.empty_wakeups) for r in runs]),
        vcsw=Stat.of([sum(r.vcsw) for r in runs]),
        cpu_ms=Stat.of([sum(r.cpu_ms) for r in runs]),
        first_share=Stat.of([r.share(0) for r in runs]),
        last_share=Stat.of([r.share(r.workers - 1) for r in runs]),
        top_share=Stat.of([top(r) for r in runs]),
        local_share=Stat.of([local_share(r) for r in runs]),
        lost=Stat.of([r.lost for r in runs]),
        per_rank=[Stat.of([r.accepts[i] for r in runs])
                  for i in range(r0.workers)],
        median_run=ranked[(len(ranked) - 1) // 2])


# ---------------------------------------------------------------- output

SUMMARY_COLUMNS = ("setup", "accepts", "wakeups", "empty", "sleeps",
                   "cpu ms", "first", "last", "top", "local")

#: What each summary column means; printed under the table.
COLUMN_NOTES = (
    "mean (min-max) over repetitions; totals over all workers.",
    "wakeups: epoll_wait/poll returns with an event; empty: of those, "
    "accept got EAGAIN.",
    "sleeps: voluntary context switches (getrusage ru_nvcsw), which also "
    "count wakeups epoll_wait swallowed (event gone by the time it ran) "
    "and the 100 ms wait-slice timeouts.",
    "first/last/top: share of accepts of the first registrant, the last "
    "registrant, the busiest worker.",
    "local: accepts whose handshake CPU (SO_INCOMING_CPU) is the worker's "
    "CPU.",
)


def summary_rows(summaries: Sequence[Summary]) -> List[List[str]]:
    """Rows of the summary table, one per setup (and work time)."""
    rows = []
    for s in summaries:
        rows.append([s.label, s.accepts.fmt(), s.wakeups.fmt(), s.empty.fmt(),
                     s.vcsw.fmt(), s.cpu_ms.fmt(), s.first_share.fmt(1, True),
                     s.last_share.fmt(1, True), s.top_share.fmt(1, True),
                     s.local_share.fmt(0, True)])
    return rows


def distribution_rows(summaries: Sequence[Summary]) -> List[List[str]]:
    """Rows of the distribution table: per rank mean (min-max) accepts,
    then the median run's list, in registration order."""
    rows = []
    for s in summaries:
        marks = []
        mr = s.median_run
        for i in range(mr.workers):
            m = ""
            if mr.exclusive[i] and s.setup == "half":
                m = "E"
            if s.setup == "incoming-cpu" and not mr.tagged[i]:
                m = "u"
            if mr.killed[i]:
                m += "k"
            marks.append(m)
        per_rank = " ".join(f"{st.fmt()}{marks[i] and '[' + marks[i] + ']'}"
                            for i, st in enumerate(s.per_rank))
        rows.append([s.label, per_rank, str(mr.accepts)])
    return rows


def plain_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A fixed-width text table (the fallback when rich is absent)."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths)),
             "  ".join("-" * w for w in widths)]
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    return "\n".join(line.rstrip() for line in lines)


def results_json(summaries: Sequence[Summary], config: dict) -> dict:
    """The --json document: config, then per setup its runs and summary."""
    return {"config": config,
            "results": [s.as_json() for s in summaries]}


def check_dir(path: os.PathLike, what: str, create: bool = True) -> Path:
    """Make ``path`` a writable directory, or raise BenchError naming ``what``.

    With ``create`` false (a dry run) nothing is made: the nearest existing
    ancestor must be a writable directory.  Returns the path.
    """
    p = Path(path)
    if create:
        try:
            p.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BenchError(f"{what} {path}: cannot create it: "
                             f"{e.strerror}") from None
        near = p
    else:
        near = p
        while not near.exists() and near != near.parent:
            near = near.parent
    if not near.is_dir():
        raise BenchError(f"{what} {path}: {near} is not a directory")
    if not os.access(near, os.W_OK | os.X_OK):
        raise BenchError(f"{what} {path}: {near} is not writable")
    return p


def check_plot_target(path: os.PathLike) -> None:
    """Raise BenchError unless matplotlib imports and ``path``'s
    directory exists."""
    if importlib.util.find_spec("matplotlib") is None:
        raise BenchError("--plot needs matplotlib: pip install 'rxl[plot]'")
    parent = Path(path).resolve().parent
    if not parent.is_dir():
        raise BenchError(f"--plot: directory {parent} does not exist")


def plot_shares(summaries: Sequence[Summary], path: os.PathLike) -> None:
    """Draw per-worker accept shares per setup to ``path`` (PNG).

    One panel per setup; bars are the mean share per registration rank,
    whiskers the min-max over repetitions.  Raises BenchError when
    matplotlib (optional dependency ``plot``) is missing.
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise BenchError("--plot needs matplotlib: pip install "
                         "'rxl[plot]'") from None
    n = len(summaries)
    cols = min(4, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows),
                             squeeze=False, sharey=True)
    for ax, s in zip(axes.flat, summaries):
        tot = [sum(r.accepts) or 1 for r in s.runs]
        shares = [[r.accepts[i] / t for r, t in zip(s.runs, tot)]
                  for i in range(len(s.per_rank))]
        means = [statistics.fmean(v) for v in shares]
        # max(0, .): fmean of equal values can differ from them by an ulp.
        lo = [max(0.0, m - min(v)) for m, v in zip(means, shares)]
        hi = [max(0.0, max(v) - m) for m, v in zip(means, shares)]
        ax.bar(range(len(means)), means, yerr=[lo, hi], capsize=2,
               color="tab:blue")
        ax.axhline(1.0 / len(means), color="grey", lw=0.8, ls="--")
        ax.set_title(s.label, fontsize=9)
        ax.set_xticks(range(len(means)))
        ax.set_xlabel("registration rank", fontsize=8)
        ax.set_ylim(0, 1)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    axes[0][0].set_ylabel("share of accepts")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as e:
        raise BenchError(f"--plot: cannot write {path}: {e}") from None
    finally:
        plt.close(fig)
