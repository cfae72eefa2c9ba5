"""What one ``rxl run`` is asked to do, and what each of its stages reports.

:class:`RunOptions` is the request (one field per option of ``rxl run``);
:func:`boots` plans the guest boots it makes (patched, spread, pristine);
every stage returns a :class:`StageRecord` (status, wall time, the log to
read, the commands it ran) or raises :class:`StageFailed` with a one-line
message naming that log.  :data:`STAGES` is their order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import click


#: Loader tunable that turns on commit 1's spread for the guest's em0
#: (iflib device tunable, CTLFLAG_RDTUN under dev.em.0.iflib).
SPREAD_TUNABLE = ("dev.em.0.iflib.core_spread", "1")


#: FreeBSD's own test programs: must pass on patched and pristine.
BASE_PROGRAMS = ("so_reuseport_lb_test",)


STAGES = ("series", "build", "world", "image", "boot", "parse", "report")


@dataclass
class StageRecord:
    """One stage's outcome. ``seconds``: wall time; ``log``: file to read on failure."""

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
    src: str
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


def one_line(exc: BaseException) -> str:
    """An exception as one line: ``PATH: reason`` for an OSError."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return " ".join(str(exc).split()) or type(exc).__name__


def echo_err(msg: str) -> None:
    """A progress line on stderr (stdout keeps what --dry-run and --json print)."""
    click.echo(msg, err=True)


def boots(opts: RunOptions, patched_kernel: str) -> List[Tuple[str, str, Dict[str, str]]]:
    """The guest boots of a run: (label, kernel path, loader tunables). Pure."""
    out = [("patched", patched_kernel, {})]
    if opts.spread:
        out.append(("spread", patched_kernel, dict([SPREAD_TUNABLE])))
    if opts.pristine_kernel:
        out.append(("pristine", opts.pristine_kernel, {}))
    return out


def guest_config(root: str, opts: RunOptions):
    """The QEMU guest of one boot (rxl.guest.qemu.GuestConfig), staged root ``root``."""
    from rxl.guest import qemu as qemu_mod
    return qemu_mod.GuestConfig(root_dir=root, memory_mib=opts.memory_mib)
