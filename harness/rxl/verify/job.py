"""What one ``rxl run`` is asked to do, what its stages hand on, and what each reports.

:class:`RunOptions` is the request (one field per option of ``rxl run``);
:class:`RunState` is what earlier stages hand to later ones (the kernels,
the world, the staged roots, the console logs, the parsed runs);
:func:`boots` plans the guest boots (patched, spread, pristine).  Every
stage (:mod:`rxl.verify.stages`) returns a :class:`StageRecord` (status,
wall time, the log to read, the commands it ran) or raises
:class:`StageFailed` with a one-line message naming that log.
:data:`STAGES` is their order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import click


#: Loader tunable that turns on commit 1's spread for the guest's em0
#: (iflib device tunable, CTLFLAG_RDTUN under dev.em.0.iflib).
SPREAD_TUNABLE = ("dev.em.0.iflib.core_spread", "1")
#: The boots with commit 1's tunable and its value: spread (core_spread=1,
#: the L3 groups of the local domain) and spread2 (2, across domains).
SPREAD_BOOTS = {"spread": "1", "spread2": "2"}

#: FreeBSD's own test programs: must pass on patched and pristine.
BASE_PROGRAMS = ("so_reuseport_lb_test",)

STAGES = ("series", "build", "world", "image", "boot", "parse", "report")


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


class StageFailed(Exception):
    """A stage failed; the message is the one-line error (it names the log)."""


@dataclass
class RunOptions:
    """The request of one ``rxl run``: absolute paths, one field per option.

    ``kernel`` / ``pristine_kernel``: kernels to boot instead of building;
    ``case_timeout``: seconds per ATF case; ``new_programs``: test programs
    that must fail on the pristine kernel; ``extra_tests``: (name, C
    source) built besides FreeBSD's own; ``memory_mib``: guest memory;
    ``src``: the FreeBSD tree given (None: fetch the base); ``base_url``:
    where to fetch it from (rxl.tree.base.base_url); ``work``: the root of
    fetched trees and work clones ($RXL_WORK); ``lock``: the build lock,
    held while a tree there changes; ``atf_vars``: (name, value) ATF
    configuration variables every case gets as ``-v name=value``.
    """

    src: Optional[str]
    objdir: str
    out: str
    guest_dir: str
    kernel: Optional[str]
    pristine_kernel: Optional[str]
    spread: bool
    case_timeout: int
    new_programs: Tuple[str, ...]
    extra_tests: Tuple[Tuple[str, str], ...]
    memory_mib: int
    dry_run: bool
    rebuild_world: bool
    pristine_src: Optional[str] = None
    tests_on_spread: bool = False
    auto_pristine: bool = True
    #: ``--target``: an rxl.guest.ssh.SSHTarget (the run goes over SSH, see
    #: rxl.verify.remote_stages), or None for the own QEMU guest.
    target: Any = None
    install_kernel: bool = False
    workdir: str = "/var/tmp/rxl"
    kyua: Optional[bool] = None
    #: The own guest's shape (rxl.guest.targets.Shape) from a named target, or None.
    shape: Any = None
    #: ``--programs``: a directory of ATF programs built already (SSH targets only).
    programs_dir: Optional[str] = None
    base_url: Optional[str] = None
    work: str = ""
    lock: Optional[str] = None
    atf_vars: Tuple[Tuple[str, str], ...] = ()
    #: ``--ssh-wait``: seconds an own-guest boot over SSH waits for sshd
    #: (rxl.verify.guestup.UP_TIMEOUT by default).
    ssh_wait: float = 300.0
    #: Whether a boot whose SSH never answers (and whose console shows no panic)
    #: runs again on the serial console (rxl.verify.sshrun): with ``--transport auto``,
    #: not when ``--transport ssh`` was asked for (docs/design.md).
    ssh_fallback: bool = True


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
    #: Boot label -> the SSH guest's host key line (rxl.verify.sshrun's image stage).
    host_keys: Dict[str, str] = field(default_factory=dict)
    #: Boot label -> why it fell back from SSH to the serial console (rxl.verify.sshrun).
    fallbacks: Dict[str, str] = field(default_factory=dict)

    @classmethod
    def start(cls, opts: RunOptions, echo: Callable[[str], None]) -> "RunState":
        """The state before the first stage: the kernels the options give."""
        return cls(stage_dir=Path(opts.guest_dir) / Path(opts.out).name, echo=echo,
                   src=opts.src, kernel=opts.kernel, pristine_src=opts.pristine_src,
                   pristine_kernel=opts.pristine_kernel)


def one_line(exc: BaseException) -> str:
    """An exception as one line: ``PATH: reason`` for an OSError."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return " ".join(str(exc).split()) or type(exc).__name__


def echo_err(msg: str) -> None:
    """A progress line on stderr (stdout keeps what --dry-run and --json print)."""
    click.echo(msg, err=True)


def boots(opts: RunOptions, patched_kernel: str,
          pristine_kernel: Optional[str] = None) -> List[Tuple[str, str, Dict[str, str]]]:
    """The guest boots of a run: (label, kernel path, loader tunables). Pure.

    ``pristine_kernel``: the base's kernel (default ``opts.pristine_kernel``);
    none means no pristine boot.
    """
    pristine_kernel = pristine_kernel or opts.pristine_kernel
    out = [("patched", patched_kernel, {})]
    if opts.spread:
        for label, value in SPREAD_BOOTS.items():
            out.append((label, patched_kernel, {SPREAD_TUNABLE[0]: value}))
    if pristine_kernel:
        out.append(("pristine", pristine_kernel, {}))
    return out


def guest_config(root: str, opts: RunOptions):
    """The QEMU guest of one boot (rxl.guest.qemu.GuestConfig), staged root ``root``."""
    from rxl.guest.targets import Shape
    return (opts.shape or Shape(memory_mib=opts.memory_mib)).config(root)
