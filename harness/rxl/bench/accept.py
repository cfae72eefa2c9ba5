"""Accept-distribution rig: the run configuration, building and running the server.

Everything here is side-effect free except :func:`ensure_built` and
:func:`run_server`, which are thin wrappers around ``cc`` and the server;
the rest (the setups, the configuration, the server's argv) is unit-tested.
Parsing and summarising the server's JSON is :mod:`rxl.bench.accept_stats`,
the tables, JSON document and plot :mod:`rxl.bench.accept_output`.

The workload is the one of seed 004 ("The rig"): N workers, one
connection at a time from loopback, a fixed spacing, repeated runs, and per
worker the wakeups, accepts, empty wakeups and CPU time.  With
``Knobs.requests`` it is the request workload instead: persistent
connections, each carrying that many requests, and the cross-CPU wakeups
they cost (:mod:`rxl.bench.wakeups`).
"""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Union

from rxl import paths
from rxl.bench.knobs import Knobs, finite
from rxl.cli.options import check_out_dir, link_reason
from rxl.decide import core
from rxl.errors import DataError, UsageError, os_reason

SOURCE = Path(__file__).with_name("acceptd.c")

#: Compiler flags; the file must build with exactly these on Linux
#: and, minus nothing, on FreeBSD.  -O2 is ours: the rig's own CPU time
#: should not dominate the figures it reports.
CFLAGS = ("-std=c99", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror",
          "-pthread", "-O2")

#: Setup name -> (server mode, one-line description).  The names are the
#: results' (docs/results/bench-accept.md); the modes are ``acceptd -m``.  Order is the table's order.
SETUPS: Dict[str, tuple] = {
    "noflag": ("noflag", "shared listener, epoll, no flag"),
    "exclusive": ("exclusive", "shared listener, all EPOLLEXCLUSIVE"),
    "half": ("half", "shared listener, even ranks EPOLLEXCLUSIVE"),
    "reorder": ("reorder", "EPOLLEXCLUSIVE, DEL+ADD every --reorder-every "
                           "accepts (nginx 1.21.6: 16)"),
    "et": ("et", "shared listener, EPOLLET (edge-triggered, as mio/tokio)"),
    "exclusive-et": ("exclusive-et",
                     "shared listener, EPOLLEXCLUSIVE | EPOLLET"),
    "accept-mutex": ("accept-mutex", "shared listener, nginx accept_mutex: "
                                     "only the holder waits on it"),
    "reuseport-prefork": ("reuseport-prefork",
                          "SO_REUSEPORT set on one listener shared by fork: "
                          "one socket, one queue, behaves as noflag"),
    "handoff-rr": ("handoff-rr", "one acceptor process hands descriptors "
                                 "round-robin to the workers"),
    "handoff-lc": ("handoff-lc", "one acceptor, least open connections, "
                                 "counts re-read every --lag-ms"),
    "reuseport": ("reuseport", "listener per worker, SO_REUSEPORT hash"),
    "incoming-cpu": ("incoming-cpu", "SO_REUSEPORT + SO_INCOMING_CPU, "
                                     "--untagged rank (default last)"),
    "cbpf-cpu": ("cbpf-cpu", "SO_REUSEPORT + cBPF returning the CPU"),
    "ebpf-numa-rr": ("ebpf", "SO_REUSEPORT + eBPF: seed 003's per-node "
                             "round robin (root, libbpf)"),
    "ebpf-deal": ("ebpf", "SO_REUSEPORT + eBPF: the dealt map from sys/ "
                          "(root, libbpf)"),
}

#: Old names still accepted by --setup: the label now comes from
#: --reorder-every (reorder16 is reorder at its default).
ALIASES = {"reorder16": "reorder"}

#: The eBPF setups: they need root, clang and libbpf (rxl.bench.ebpf) and
#: are run only when asked for.
EBPF_SETUPS = ("ebpf-numa-rr", "ebpf-deal")

#: What a bare ``rxl bench accept`` runs: every setup but the eBPF ones.
DEFAULT_SETUPS = tuple(s for s in SETUPS if s not in EBPF_SETUPS)

#: Setups that need Linux (epoll flags, SO_INCOMING_CPU, reuseport BPF);
#: the others run on FreeBSD, the event loop waiting with poll(2).
LINUX_ONLY = frozenset(SETUPS) - {"noflag", "reuseport", "accept-mutex",
                                  "reuseport-prefork", "handoff-rr",
                                  "handoff-lc"}

#: acceptd's -d limit, ms: no run is longer than an hour.
MAX_DEADLINE_MS = 3600000

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

#: Limits of acceptd.c (MAXWORKERS, MAXCONNS, the -r bound).
MAX_WORKERS = 256
MAX_CONNECTIONS = 100000
MAX_REORDER_EVERY = 1000000
#: Most runs of one setup (--repetitions): a bound of the harness, not of
#: acceptd.c: 1000 runs of the default 500 connections 2 ms apart take at
#: least 1000 s per setup and work time, and a dry run prints every run's argv.
MAX_REPETITIONS = 1000

#: Slack added to a run's expected length to make the server's deadline:
#: registration, settling (500 ms + 4 x work) and worker exit (<= 1 s).
DEADLINE_SLACK_MS = 5000


class BenchError(DataError):
    """A one-line, user-facing error of the accept rig."""


class Unloadable(BenchError):
    """acceptd could not load a BPF selector (exit 5): the setup is skipped
    with this reason, the others still run."""


# --------------------------------------------------------------- config


@dataclass(frozen=True)
class RunConfig:
    """One server invocation's knobs.

    Units: ``spacing_ms`` and ``work_ms`` in milliseconds (the server takes
    microseconds, rounded); ``order`` is the registration order as worker
    ids, or None for 0..workers-1; ``kill_first_at`` is a 1-based connection
    count after which the first registrant gets SIGKILL, or None;
    ``knobs`` the server model and client (:class:`rxl.bench.knobs.Knobs`).
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
    knobs: Knobs = field(default_factory=Knobs)

    def validate(self) -> None:
        """Raise BenchError on a value the server would refuse."""
        if not 1 <= self.workers <= MAX_WORKERS:
            raise BenchError(f"--workers must be 1..{MAX_WORKERS}, "
                             f"got {self.workers}")
        if not 1 <= self.connections <= MAX_CONNECTIONS:
            raise BenchError(f"--connections must be 1..{MAX_CONNECTIONS}, "
                             f"got {self.connections}")
        try:
            # NaN and infinity pass plain comparisons: finite() refuses.
            finite(self.spacing_ms, "--spacing-ms", 0, 10000)
            finite(self.work_ms, "--work-ms", 0, 10000)
            self.knobs.validate(self.workers)
            finite(self.reorder_every, "--reorder-every", 1,
                   MAX_REORDER_EVERY)
        except ValueError as e:
            raise BenchError(str(e)) from None
        if self.kill_first_at is not None and self.knobs.requests:
            raise BenchError("--kill-first-at does not apply with "
                             "--requests")
        if self.knobs.requests and self.knobs.rx_cpus is not None and \
                len(self.knobs.rx_cpus) > self.connections:
            raise BenchError(f"--requests needs a connection per "
                             f"receiving CPU: --connections "
                             f"{self.connections} < "
                             f"{len(self.knobs.rx_cpus)} --rx-cpus")
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

    Connections x (spacing + a 1 ms allowance for connect; a closed loop
    has no spacing), plus the work spread over the workers, plus what the
    knobs add (holding: no cap of its own, only this deadline), plus
    DEADLINE_SLACK_MS.  The server stops by itself at this deadline
    whatever happens.  Raises BenchError past an hour (acceptd's limit).
    """
    spacing = 0.0 if cfg.knobs.client == "closed" else cfg.spacing_ms
    run = cfg.connections * (spacing + 1.0)
    work = cfg.connections * cfg.work_ms / max(1, cfg.workers)
    total = int(run + work + cfg.knobs.extra_ms(cfg.connections) +
                DEADLINE_SLACK_MS)
    if total > MAX_DEADLINE_MS:
        raise BenchError(f"a run would take up to {total / 1000:.0f} s, "
                         f"past the rig's limit of one hour: fewer "
                         f"--connections or a shorter --hold-ms")
    return total


def canonical(setup: str) -> str:
    """The setup's name, aliases resolved; BenchError if unknown."""
    setup = ALIASES.get(setup, setup)
    if setup not in SETUPS:
        raise BenchError(f"unknown setup {setup!r}; known: "
                         f"{', '.join(SETUPS)}")
    return setup


def unique_setups(setups: Iterable[str]) -> List[str]:
    """Setups in the order given, aliases resolved, each once (a setup
    repeated on the command line is not run twice)."""
    out: List[str] = []
    for s in setups:
        s = canonical(s)
        if s not in out:
            out.append(s)
    return out


def server_argv(binary: os.PathLike, setup: str, cfg: RunConfig) -> List[str]:
    """argv of one acceptd run for ``setup``; raises BenchError if unknown
    or not possible in the configured server model.  The eBPF setups'
    object and map file are added by :mod:`rxl.bench.accept_run`."""
    setup = canonical(setup)
    cfg.validate()
    try:
        cfg.knobs.check_setup(setup)
    except ValueError as e:
        raise BenchError(str(e)) from None
    argv = [str(binary), "-m", SETUPS[setup][0],
            "-w", str(cfg.workers),
            "-n", str(cfg.connections),
            "-s", str(int(round(cfg.spacing_ms * 1000))),
            "-t", str(int(round(cfg.work_ms * 1000))),
            "-d", str(deadline_ms(cfg)),
            "-r", str(cfg.reorder_every)] + cfg.knobs.argv()
    if cfg.order is not None:
        argv += ["-o", ",".join(str(i) for i in cfg.order)]
    if cfg.kill_first_at is not None:
        argv += ["-k", str(cfg.kill_first_at)]
    if cfg.pin:
        argv.append("-p")
    if cfg.client_rotate and not cfg.knobs.requests:
        argv.append("-c")
    return argv


# ---------------------------------------------------------------- build


def default_build_dir() -> Path:
    """Where the compiled server is cached.

    ``$RXL_BUILD_DIR/bench`` if set, else ``build/bench`` under the repo
    root when running from a checkout, else ``~/.cache/rxl/bench``.
    """
    if os.environ.get(core.BUILD_DIR_ENV):
        return core.build_dir() / "bench"  # the one reader: a relative path or a file refused
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


CC = Union[str, Sequence[str]]


def cc_words(cc: Optional[CC] = None) -> List[str]:
    """The compiler as argv words: ``--cc`` split like ``$CC`` is (shell
    words, so ``"ccache cc"`` works), defaulting to ``$CC``, then ``cc``
    (a blank ``$CC`` is unset, as the C cores' build takes it). Raises
    BenchError on an empty or unbalanced value."""
    if cc is None:
        cc = os.environ.get("CC", "") if os.environ.get("CC", "").strip() else "cc"
    if not isinstance(cc, str):
        return list(cc)
    try:
        words = shlex.split(cc)
    except ValueError as e:
        raise BenchError(f"--cc {cc!r}: {e}") from None
    if not words:
        raise BenchError("--cc is empty")
    return words


def compile_argv(out: Path, cc: CC = "cc", source: Path = SOURCE,
                 cflags: Sequence[str] = CFLAGS) -> List[str]:
    """argv that compiles the server to ``out``."""
    return [*cc_words(cc), *cflags, "-o", str(out), str(source)]


def ensure_built(build_dir: Path, cc: CC = "cc", dry_run: bool = False,
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
    except OSError as e:  # a symlink loop or dangling link said to be one: no traceback
        word = cc_words(cc)[0]
        why = link_reason(word) if os.sep in word else None
        if why is None and isinstance(e, FileNotFoundError):
            raise BenchError(f"compiler {word!r} not found") from None
        raise BenchError(f"compiler {word!r}: {why or os_reason(e)}") from None
    if res.returncode != 0:
        first = (res.stderr.strip().splitlines() or ["?"])[0]
        raise BenchError(f"{shlex.join(cc_words(cc))} failed on "
                         f"{SOURCE.name}: {first}")
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
    if res.returncode == 5:
        raise Unloadable((res.stderr.strip().splitlines() or ["?"])[0])
    if res.returncode != 0:
        first = (res.stderr.strip().splitlines() or ["no message"])[0]
        raise BenchError(f"server exited {res.returncode}: {first}")
    return res.stdout


def check_dir(path: os.PathLike, what: str, create: bool = True) -> Path:
    """Make ``path`` a writable directory, or raise BenchError naming ``what``.

    With ``create`` false (a dry run) nothing is made: the nearest existing
    ancestor must be a writable directory.  Returns the path.
    """
    p = Path(path)
    if create:
        why = link_reason(p)  # mkdir said "File exists" at a loop or dangling link
        if why:
            raise BenchError(f"{what} {path}: {why}")
        try:
            p.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BenchError(f"{what} {path}: cannot create it: "
                             f"{e.strerror}") from None
        near = p
    else:  # the one check of an output directory: it is tried, not only access(2)
        try:
            check_out_dir(str(p), what)
        except UsageError as exc:
            raise BenchError(f"{what} {exc}") from None
        near = paths.existing_ancestor(p)
    if not near.is_dir():
        raise BenchError(f"{what} {path}: {near} is not a directory")
    if not os.access(near, os.W_OK | os.X_OK):
        raise BenchError(f"{what} {path}: {near} is not writable")
    return p


