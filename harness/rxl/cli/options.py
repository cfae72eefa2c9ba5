"""Option types and the checks every command makes on its inputs before any slow stage.

Option types: :class:`FiniteFloat` (a float range that refuses ``nan`` and
``inf``, which pass every ``<``/``>`` test), :data:`PORT`, and the text
types (:class:`Text`: an empty value refused, the text parsed once, at the
command line): :class:`CInteger` (an integer in C syntax, in a range),
:data:`SMP` (``SOCKETS,CORES,THREADS``); ``--topology``'s is
rxl.decide.topology.TOPOLOGY.
Checks, each
raising :class:`rxl.errors.BadOption` naming the option and changing
nothing (:func:`check_work_root`: a UsageError naming ``RXL_WORK``):
:func:`check_out_dir` (an output directory that can be made: no
file, symlink loop or dangling link on its way; :func:`link_reason`, the
work root's too), :func:`check_out_file` (an output file's),
:func:`check_input` (a readable input: a file, ``-`` for stdin, the pipe
of ``<(...)``; a directory, a socket or a named FIFO is said to be one:
:func:`stream_reason`), :func:`program_reason` (a program that can be run),
:func:`check_guest` (a guest QEMU would boot).  Messages quote input
through :func:`rxl.errors.show` (escaped, cut).

Limits of the guest (measured on this host, QEMU 7.2.22):
``qemu-system-x86_64 -machine q35 -smp 300`` says "Invalid SMP CPUs 300.
The max CPUs supported by machine 'pc-q35-7.2' is 288"
(:data:`QEMU_Q35_MAX_CPUS`), and ``-m 200000000M`` fails with "cannot set
up guest memory 'pc.ram': Cannot allocate memory": a guest gets at most
the host's RAM (:func:`host_memory_mib`).
"""

from __future__ import annotations

import codecs
import errno
import math
import os
import re
import shutil
import stat
import sys
import tempfile
from pathlib import Path
from typing import Optional

import click

from rxl import paths
from rxl.errors import BadOption, DataError, RxlError, UsageError, os_reason, show

#: QEMU 7.2's q35 machine takes at most this many vCPUs (measured, above).
QEMU_Q35_MAX_CPUS = 288
#: A number as the command line writes one: ASCII digits only. Python's int()
#: and float() also take any Unicode digit ("٣" is 3, "５" is 5), "1_000" and
#: blanks around it; an option value is what the user typed, not that.
_DECIMAL = re.compile(r"[+-]?[0-9]+")
_REAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
                   r"|[+-]?(?:nan|inf|infinity)", re.IGNORECASE)


#: An integer as C writes one (what a header's #define holds): decimal, 0x hex
#: or 0 octal. Python's int(text, 0) also takes 0o17, 0b1 and 1_000.
_C_INT = re.compile(r"[+-]?(?:0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")
#: A sysctl MIB name (or a loader tunable's) as sysctl(8) prints one: dotted
#: components of letters, digits, '_', '-' and '%' (dev.igb.0.%desc).
SYSCTL_NAME = re.compile(r"[A-Za-z0-9_%-]+(?:\.[A-Za-z0-9_%-]+)*")
#: A value a guest's rc script or loader.conf takes as one shell word, unquoted:
#: no blank, quote, ';', '$', '`', '|', '&', '<', '>', '(', ')', '\\' or '*'.
SAFE_WORD = re.compile(r"[A-Za-z0-9_.,:/+@%=-]+")
#: INT_MAX of a 32-bit int (every FreeBSD ABI): the largest optname setsockopt(2) takes.
INT_MAX = 2**31 - 1


def decimal_int(value) -> int:
    """``value`` (text, or an int default) as an int: ASCII decimal digits with an
    optional sign, nothing else. Raises ValueError."""
    if isinstance(value, int):
        return value
    if not isinstance(value, str) or not _DECIMAL.fullmatch(value):
        raise ValueError(value)
    return int(value)


def decimal_float(value) -> float:
    """``value`` as a float: ASCII digits, one point, an exponent, or nan/inf
    (which :class:`FiniteFloat` then refuses by name). Raises ValueError."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, str) or not _REAL.fullmatch(value):
        raise ValueError(value)
    return float(value)


class FiniteFloat(click.ParamType):
    """A float in a range; ``nan``, ``inf`` and ``-inf`` are refused.

    ``min``/``max``: bounds (None: open); ``min_open``/``max_open``: the
    bound itself is excluded. Usage error (exit 2) naming the option.
    """

    name = "float"

    def __init__(self, min: Optional[float] = None, max: Optional[float] = None, *,
                 min_open: bool = False, max_open: bool = False):
        self.min, self.max, self.min_open, self.max_open = min, max, min_open, max_open

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            f = float(value)
        else:
            try:
                f = decimal_float(str(value).strip())
            except ValueError:
                self.fail(f"{show(value)}: not a number", param, ctx)
        if not math.isfinite(f):
            self.fail(f"{show(value)}: not a finite number", param, ctx)
        if self.min is not None and (f < self.min or (self.min_open and f == self.min)):
            self.fail(f"{f:g}: must be {'>' if self.min_open else '>='} {self.min:g}",
                      param, ctx)
        if self.max is not None and (f > self.max or (self.max_open and f == self.max)):
            self.fail(f"{f:g}: must be {'<' if self.max_open else '<='} {self.max:g}",
                      param, ctx)
        return f

    def __repr__(self) -> str:
        return f"FiniteFloat({self.min}, {self.max})"


def empty_reason(param) -> str:
    """Why an empty (or blank) value of ``param`` is refused, in the words of
    the error: "give one", and "or leave the option out" only for an option
    that may be left out (a required one left out is click's "Missing
    option"; an argument cannot be).  rxl.cli.surface.refuse_empty's and
    :class:`Text`'s refusals."""
    if isinstance(param, click.Option) and not param.required:
        return "an empty value: give one, or leave the option out"
    return "an empty value: give one"


class Text(click.ParamType):
    """A text value parsed once at the command line by :meth:`parse`.

    An empty or blank value is refused as rxl.cli.surface.refuse_empty
    refuses one; :meth:`parse` raises ValueError (or rxl.errors.RxlError)
    with the reason, which becomes a usage error (exit 2) naming the option.
    A value that is not text (a default already parsed) passes as it is.
    """

    name = "text"

    def parse(self, text: str):
        """``text`` parsed; raises ValueError saying why it is not one."""
        return text

    def convert(self, value, param, ctx):
        if not isinstance(value, str):
            return value
        if not value.strip():
            self.fail(empty_reason(param), param, ctx)
        try:
            return self.parse(value)
        except (ValueError, RxlError) as exc:
            self.fail(str(exc), param, ctx)


class CInteger(Text):
    """An integer as C writes it (``1027``, ``0x403``, ``02003``) in
    ``[min, max]``; -> int. ``what`` says what the number is, in the error."""

    name = "integer"

    def __init__(self, min: int, max: int, what: str):
        self.min, self.max, self.what = min, max, what

    def parse(self, text: str) -> int:
        t = text.strip()
        if not _C_INT.fullmatch(t):
            raise ValueError(f"{show(text)}: not an integer (as C writes one: 1027 or 0x403)")
        digits = t.lstrip("+-")
        v = int(t, 16 if digits[:2] in ("0x", "0X") else 8 if digits.startswith("0") else 10)
        if not self.min <= v <= self.max:
            raise ValueError(f"{show(text)}: not {self.what} from {self.min} to {self.max}")
        return v


class SmpType(Text):
    """``SOCKETS,CORES,THREADS``: three ASCII decimal integers, each at least 1,
    -> ``(sockets, cores, threads)``. At most :data:`QEMU_Q35_MAX_CPUS` vCPUs
    in all (QEMU's q35 refuses more)."""

    name = "sockets,cores,threads"

    def parse(self, text: str):
        parts = text.split(",")
        if len(parts) != 3 or not all(_DECIMAL.fullmatch(x.strip()) for x in parts):
            raise ValueError(f"{show(text)}: expected SOCKETS,CORES,THREADS (e.g. 2,2,2)")
        n = tuple(int(x) for x in parts)
        for what, v in zip(("SOCKETS", "CORES", "THREADS"), n):
            if v < 1:
                raise ValueError(f"{show(text)}: {what} {v}: each of SOCKETS,CORES,THREADS "
                                 "is at least 1")
        if n[0] * n[1] * n[2] > QEMU_Q35_MAX_CPUS:
            raise ValueError(f"{show(text)}: {n[0] * n[1] * n[2]} vCPUs: QEMU 7.2's q35 "
                             f"machine takes at most {QEMU_Q35_MAX_CPUS}")
        return n


#: The one type of a guest's ``--smp``.
SMP = SmpType()


def check_distinct_inputs(paths, option: str) -> None:
    """Refuse an input given twice (the same path, another name of the same
    file, or ``-`` twice: stdin is read once): a usage error naming ``option``
    (a repeatable one, as ``--log``). Paths that do not exist are left to the
    reader's own check."""
    seen = {}
    for p in paths:
        if p == "-":
            key = "-"
        else:
            try:
                st = os.stat(p)
            except OSError:
                continue
            key = (st.st_dev, st.st_ino)
        if key in seen:
            same = "" if seen[key] == p else f" (as {show(seen[key])})"
            raise BadOption(f"{show(p)}: given twice{same}: each input once", option)
        seen.setdefault(key, p)


def check_out_not_input(out: str, inputs, option: str, inputs_option: str) -> None:
    """Refuse an output file that is one of the command's inputs (the same
    path, or another name of the same regular file): writing it would replace
    an input the command is reading, as ``--out T`` with ``--trace ... T``
    did. BadOption naming ``option`` and ``inputs_option``; ``-`` and inputs
    not there are left to their own checks; changes nothing."""
    try:
        st = os.stat(out)
    except OSError:
        return  # not there yet: no input
    if not stat.S_ISREG(st.st_mode):
        return  # /dev/null: nothing is replaced
    for p in inputs:
        if p == "-":
            continue
        try:
            same = os.path.samestat(st, os.stat(p))
        except OSError:
            continue
        if same:
            also = "" if p == out else f" (as {show(p)})"
            raise BadOption(f"{show(out)}: one of the {inputs_option} inputs{also}: writing "
                            "it would replace what is read; write elsewhere", option)


def check_no_repeats(values, option: str, why: str) -> None:
    """Refuse a value of a repeatable choice option (``--policy``, ``--workers``)
    given more than once, which would otherwise be merged silently: a usage error
    ``<first repeated value> given twice: <why>`` naming ``option``."""
    twice = sorted({v for v in values if list(values).count(v) > 1})
    if twice:
        raise BadOption(f"{twice[0]} given twice: {why}", option)


class EmptyIsNone(click.Option):
    """An option whose empty value is a documented choice (``--atf-dir ''``: no
    directory), which rxl.cli.surface.refuse_empty lets through."""

    empty_ok = True


#: A TCP/UDP port: 1-65535.
PORT = click.IntRange(1, 65535)


def host_memory_mib() -> Optional[int]:
    """The host's physical RAM in MiB (``sysconf``), or None when unknown."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 20)
    except (ValueError, OSError, AttributeError):
        return None


def check_guest(vcpus: int, memory_mib: int, *, smp_option: str = "--smp",
                memory_option: str = "--memory", host_mib: Optional[int] = None) -> None:
    """Refuse a guest QEMU would refuse at boot: more than :data:`QEMU_Q35_MAX_CPUS`
    vCPUs, or more memory than the host has (usage error naming the option)."""
    if vcpus > QEMU_Q35_MAX_CPUS:
        raise BadOption(f"{vcpus} vCPUs: QEMU 7.2's q35 machine takes at most "
                        f"{QEMU_Q35_MAX_CPUS}", smp_option)
    host = host_memory_mib() if host_mib is None else host_mib
    if host is not None and memory_mib > host:
        raise BadOption(f"{memory_mib} MiB: more than this host's {host} MiB of RAM",
                        memory_option)


def link_reason(path) -> Optional[str]:
    """Why nothing can be made at ``path`` when it, or a directory on its way,
    is a symlink that cannot be followed (rxl.paths.broken_link): "a symlink
    loop, it cannot be resolved" (what an input that is one is called,
    :func:`os_reason`) or "a symlink to X, which does not exist", the link
    named when it is on the way; None otherwise. The one such check of every
    path a command makes: the work root, RXL_BUILD_DIR, :func:`check_out_dir`,
    :func:`check_out_file`, :func:`check_lock_file`."""
    link = paths.broken_link(Path(path))
    if link is None:
        return None
    try:
        os.stat(link)
        return None  # followed since: nothing in the way
    except OSError as exc:
        why = os_reason(exc) if exc.errno == errno.ELOOP else (
            f"a symlink to {show(os.readlink(link))}, which does not exist (a dangling link)")
    return why if link == Path(os.path.abspath(path)) else f"{show(str(link))} is {why}"


#: What stat(2) says a path is, as a message names it ("/dev/zero: a character
#: device, not a directory"): the one wording of a path of the wrong kind.
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISREG, "a file"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in a message's words: "a
    directory", "a file" (a regular one), "a character device", "a block
    device", "a FIFO", "a socket"."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "a file of no known kind"


def not_a(mode: int, noun: str) -> str:
    """``<what mode is>, not a <noun>``: "a character device, not a
    directory"; a ``noun`` "file" is "a regular file"."""
    return f"{file_kind(mode)}, not a {'regular file' if noun == 'file' else noun}"


def missing(path, noun: str = "file") -> str:
    """Why an input ``path`` is no ``noun`` (a file, directory, kernel), in a
    message's words, for a check that found it is not one: a symlink loop or
    a dangling link at it or on its way (:func:`link_reason`: Path.exists()
    and stat(2) call both missing); a path that is there but of another kind
    said to be what it is (:func:`not_a`: "/dev/zero: a character device, not
    a directory", not "no such directory"); else "no such ``noun``". The one
    wording of every input check's path that is not what it should be: an
    option's file or directory, an argument, a key file."""
    why = link_reason(path)
    if why:
        return why
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return f"no such {noun}"
    except OSError as exc:  # unreadable on its way, a name too long
        return os_reason(exc)
    want = stat.S_ISDIR if noun == "directory" else stat.S_ISREG
    if want(st.st_mode):  # it is one after all: not for want of a kind
        return f"no such {noun}"
    return not_a(st.st_mode, noun)


def _work_name() -> str:
    """How an error names the work root: ``RXL_WORK '/x'``, or the default."""
    env = os.environ.get("RXL_WORK")
    return f"RXL_WORK {show(env)}" if env else \
        f"the work root {show(str(paths.work_root()))} (RXL_WORK unset)"


def check_work_root() -> None:
    """Refuse a work root no command could use, before any command runs:
    ``$RXL_WORK`` (else the default, rxl.paths.work_root, from a relative
    ``$HOME``) relative (each directory would make its own harness key), not a directory (``/dev/null``,
    a regular file: ``targets`` read ``/dev/null/targets.yaml`` and said "no
    such file"), or a path under a file.  A work root that does not exist yet
    passes: the first stage makes it; one that is, or lies under, a symlink
    loop or a dangling link does not (:func:`link_reason`: no directory can be
    made there; run's plan resolved a loop into a traceback).  Raises
    :class:`rxl.errors.UsageError` (exit 2, one line naming ``RXL_WORK``);
    changes nothing."""
    env = os.environ.get("RXL_WORK")
    if env and not os.path.isabs(env):
        raise UsageError(f"RXL_WORK {show(env)}: not an absolute path (every command "
                         "of every directory must find the same work root)")
    root = paths.work_root()
    name = _work_name()
    if not root.is_absolute():  # RXL_WORK unset, HOME relative (XDG_CACHE_HOME is ignored)
        raise UsageError(f"{name}: not an absolute path, as HOME "
                         f"{show(os.environ.get('HOME', ''))} is not (every command of every "
                         "directory must find the same work root; set RXL_WORK)")
    why = link_reason(root)
    if why:
        raise UsageError(f"{name}: {why}")
    try:
        if root.exists() and not root.is_dir():
            raise UsageError(f"{name}: {not_a(root.stat().st_mode, 'directory')} (where "
                             "object trees, logs, guests and the targets file are kept)")
        anc = paths.existing_ancestor(root)
    except OSError as exc:  # a component unreadable, a name too long
        raise UsageError(f"{name}: {exc.strerror}") from None
    if not anc.is_dir():
        raise UsageError(f"{name}: cannot be created, {show(str(anc))} is not a directory")


def check_out_dir(path: str, option: str = "--out") -> None:
    """Refuse an output directory that cannot be made, before anything runs.

    No symlink loop or dangling link at it or on its way (:func:`link_reason`:
    Path.exists() calls both missing, and mkdir then fails). The path itself,
    or its nearest existing ancestor, must be a writable directory, one a
    directory can be made in (tried: made and removed, as root's access(2)
    passes /proc or a read-only mount); a file on the way is named. Changes
    nothing.
    """
    p = Path(os.path.abspath(path))
    why = link_reason(p)
    if why:
        raise BadOption(f"{show(path)}: {why}", option)
    if p.exists():
        if not p.is_dir():  # a FIFO or a device is said to be one, not "a file"
            raise BadOption(f"{show(path)}: {not_a(p.stat().st_mode, 'directory')}", option)
        anc = p
    else:
        anc = paths.existing_ancestor(p)
        if not anc.is_dir():
            raise BadOption(f"{show(path)}: cannot be created, {anc} is a file", option)
    # A path under the work root that fails there (the default --out, or any
    # path, when the work root or where it would be made cannot be written)
    # names RXL_WORK, the setting at fault, not an option perhaps not given.
    root = Path(os.path.abspath(paths.work_root()))
    at_root = p.is_relative_to(root) and root.is_relative_to(anc)

    def refuse(why: str) -> None:
        if at_root:
            raise UsageError(f"{_work_name()}: {why}" + (
                "" if p == root else f" ({option} {show(path)} is made under it)"))
        raise BadOption(f"{show(path)}: {why}", option)

    if not os.access(anc, os.W_OK | os.X_OK):
        refuse(f"{anc} is not writable")
    # access(2) says yes to root everywhere, /proc and a read-only mount
    # included: make a directory there and remove it, as the run would.
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".rxl-probe-", dir=anc))
    except OSError as exc:
        refuse(f"cannot be created in {anc}: {exc.strerror}")


def check_out_file(path: str, option: str = "--out") -> None:
    """Refuse an output file that cannot be written, before anything runs: a
    symlink loop or dangling link at it or on its way (:func:`link_reason`;
    Path.resolve() raised RuntimeError at a loop), a directory, a FIFO, a
    socket or a device other than /dev/null (each said to be what it is), or
    a directory that does not exist. BadOption naming ``option``; changes
    nothing."""
    p = Path(os.path.abspath(path))
    why = link_reason(p)
    if why:
        raise BadOption(f"{show(path)}: {why}", option)
    try:
        st = os.stat(p)
    except OSError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise BadOption(f"{show(path)}: a directory, not a file", option)
    # A FIFO blocks the writer's open for ever, a socket cannot be opened and
    # a device is shared; only /dev/null (output thrown away) is taken.
    if st is not None and not stat.S_ISREG(st.st_mode) and not _is_devnull(st):
        raise BadOption(f"{show(path)}: {not_a(st.st_mode, 'file')}", option)
    if not p.parent.is_dir():
        raise BadOption(f"{show(path)}: its directory does not exist", option)


def _is_devnull(st: os.stat_result) -> bool:
    """``st`` is /dev/null's (the same device node)."""
    try:
        null = os.stat(os.devnull)
    except OSError:
        return False
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == null.st_rdev


def check_lock_file(path: str, option: str = "--lock") -> None:
    """Refuse a flock(1) lock file that cannot be made or opened: flock makes
    the file, not its directory (a missing directory fails the first command
    of the run, after the plan), and only a regular file is a lock file (a
    directory; a FIFO, whose open blocks flock(1) for ever; a device or a
    socket, shared with what else uses it: each said to be what it is).
    BadOption naming ``option``; changes nothing."""
    p = Path(os.path.abspath(path))
    why = link_reason(p)
    if why:
        raise BadOption(f"{show(path)}: {why}", option)
    try:
        st = os.stat(p)
    except (FileNotFoundError, NotADirectoryError):
        st = None  # flock(1) makes it; its directory is checked below
    except OSError as exc:
        raise BadOption(f"{show(path)}: {os_reason(exc)}", option) from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise BadOption(f"{show(path)}: {file_kind(st.st_mode)}, not a lock file", option)
    if not p.parent.is_dir():
        raise BadOption(f"{show(path)}: its directory {show(str(p.parent))} does not exist "
                        "(flock(1) makes the lock file, not its directory)", option)
    if not p.exists() and not os.access(p.parent, os.W_OK | os.X_OK):
        raise BadOption(f"{show(path)}: {show(str(p.parent))} is not writable: the lock "
                        "cannot be made there", option)


def stat_input(path: str, what: str) -> os.stat_result:
    """``os.stat(path)``, or BadOption naming ``what``: "no such file" for a
    path that is not there, a symlink loop or a dangling link (at it or on
    its way) said to be one (:func:`link_reason`: click's ``exists`` called both
    missing), else the system's reason."""
    try:
        return os.stat(path)
    except OSError as exc:
        why = link_reason(path) if exc.errno in (errno.ENOENT, errno.ELOOP) else None
        if why is None:
            why = "no such file" if exc.errno == errno.ENOENT else os_reason(exc)
        raise BadOption(f"{show(path)}: {why}", what) from None


class InputFile(click.ParamType):
    """A file given to read (a trace, a kernel, a disk image): it must exist
    and be readable, and not be a directory (:func:`check_input`; ``-`` is
    stdin only with ``allow_dash``). Replaces ``click.Path(exists=True)``,
    which calls a symlink loop "does not exist"."""

    name = "file"

    def __init__(self, allow_dash: bool = False, takes: Optional[str] = None):
        self.allow_dash = allow_dash
        #: What it may be, for the advice of a FIFO or of ``-`` where stdin is not read.
        self.takes = takes or (TAKES_STREAM if allow_dash else TAKES_NO_STDIN)

    def convert(self, value, param, ctx):
        if value == "":
            self.fail("'': empty, no file", param, ctx)
        path = value if value != "-" or self.allow_dash else os.path.join(".", value)
        if path == "./-" and not os.path.lexists(path):  # - is no stdin here
            self.fail(f"-: not read from standard input; give {self.takes}", param, ctx)
        try:
            check_input(path, "", takes=self.takes)
        except BadOption as exc:
            self.fail(exc.message, param, ctx)
        return value


class PathOf(click.ParamType):
    """A path option's value (returned as given) that must be a directory
    (``dir_only``) or must not be one (``file_only``) when it is there; one
    that is not there is left to the command's own check (an input's
    :func:`missing`, an output's :func:`check_out_dir`). ``writable``: one
    that is there must be writable. Replaces ``click.Path(file_okay=False)``
    and ``click.Path(dir_okay=False)``, whose messages wrote a byte of the
    name that is not UTF-8 as U+FFFD (``Directory 'caf\ufffd.bin' is a
    file.``) and let a FIFO or a device through as a directory: the path is
    shown by :func:`rxl.errors.show` (``caf\\xe9.bin``, as every other
    message has it) and said to be what it is (:func:`not_a`)."""

    name = "path"

    def __init__(self, *, dir_only: bool = False, file_only: bool = False,
                 writable: bool = False):
        assert dir_only != file_only
        self.dir_only, self.writable = dir_only, writable

    def convert(self, value, param, ctx):
        if not isinstance(value, str):  # a default that is a Path
            value = os.fspath(value)
        try:
            st = os.stat(value)
        except OSError:
            return value  # not there, a loop: the command says which
        if self.dir_only and not stat.S_ISDIR(st.st_mode):
            self.fail(f"{show(value)}: {not_a(st.st_mode, 'directory')}", param, ctx)
        if not self.dir_only and stat.S_ISDIR(st.st_mode):
            self.fail(f"{show(value)}: is a directory, not a file", param, ctx)
        if self.writable and not os.access(value, os.W_OK):
            self.fail(f"{show(value)}: not writable", param, ctx)
        return value


#: A directory option's type (``--src``, ``--objdir``, ``--patches``).
DIRECTORY = PathOf(dir_only=True)
#: A file option's type (``--lock``, ``--log``, ``--out FILE``).
FILE = PathOf(file_only=True)


#: st_dev of an anonymous pipe, once :func:`_pipe_dev` has made one.
_PIPE_DEV: Optional[int] = None


def _pipe_dev() -> Optional[int]:
    """The st_dev of an anonymous pipe on this system (Linux: pipefs; FreeBSD:
    one device for every pipe), or None when none can be made."""
    global _PIPE_DEV
    if _PIPE_DEV is None:
        try:
            r, w = os.pipe()
        except OSError:
            return None
        try:
            _PIPE_DEV = os.fstat(r).st_dev
        finally:
            os.close(r)
            os.close(w)
    return _PIPE_DEV


def named_fifo(st: os.stat_result) -> bool:
    """``st`` is a FIFO on a file system (mkfifo(1)), whose open(2) for
    reading waits until a writer opens it, for ever if none comes; not the
    anonymous pipe a shell's ``<(...)`` hands over as ``/dev/fd/N`` (or a
    pipe on stdin), whose open never waits (its writer is there, or was)."""
    return stat.S_ISFIFO(st.st_mode) and st.st_dev != _pipe_dev()


#: What an input read as a stream takes, for the advice a FIFO gets: a file,
#: ``-`` (stdin) or the pipe of ``<(...)``; one that takes no stdin says
#: :data:`TAKES_NO_STDIN`, and one that takes neither says its own.
TAKES_STREAM = "a file, - or <(...)"
TAKES_NO_STDIN = "a file or <(...)"


def stream_reason(st: os.stat_result, noun: str = "file",
                  takes: str = TAKES_STREAM) -> Optional[str]:
    """Why an input of ``st`` is not read, before it is opened, or None: a
    socket (open(2) fails with ENXIO, "No such device or address") or a named
    FIFO (:func:`named_fifo`: the open would block for ever with no writer),
    each said to be what it is (:func:`not_a`; ``noun`` what the input should
    be). A directory is left to the caller's own words. The one such check of
    every reader of an input file: :func:`check_input`, :func:`read_limited`,
    a ``--topology`` dump (rxl.decide.dump.read_source)."""
    if stat.S_ISSOCK(st.st_mode):
        return not_a(st.st_mode, noun)
    if named_fifo(st):
        return f"{not_a(st.st_mode, noun)} (its open waits for a writer; give {takes})"
    return None


def program_reason(word: str, noun: str = "program") -> Optional[str]:
    """Why ``word`` (the first word of a command, as ``--cc`` or ``$CC``
    give one) names no program that can be run, or None. A word with a
    ``/`` is a path: a symlink loop or dangling link (:func:`link_reason`),
    missing ("no such file"), not a regular file (:func:`not_a`: "a
    character device, not a compiler"), not executable; a bare name is
    looked up on ``$PATH`` as execvp(3) would (shutil.which: an executable
    file there), else "not found on PATH"."""
    if os.sep not in word:
        return None if shutil.which(word) else "not found on PATH"
    why = link_reason(word)
    if why:
        return why
    try:
        st = os.stat(word)
    except (FileNotFoundError, NotADirectoryError):
        return "no such file"
    except OSError as exc:
        return os_reason(exc)
    if not stat.S_ISREG(st.st_mode):
        return not_a(st.st_mode, noun)
    if not os.access(word, os.X_OK):
        return "not executable"
    return None


#: The key of click's Context.meta (shared by every context of a command line)
#: naming the option that read standard input while the options were parsed.
_STDIN_READER = "rxl.stdin_reader"


def note_stdin_read(option: str) -> None:
    """Record that ``option`` reads standard input as the command line is
    parsed (``--topology -``: rxl.decide.topology.TopologyOption): stdin can
    be read only once, so :func:`check_input` refuses ``-`` for any other
    input of the command. Outside a click command: nothing."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.meta.setdefault(_STDIN_READER, option)


def stdin_reader() -> Optional[str]:
    """The option :func:`note_stdin_read` recorded in this command, or None."""
    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.meta.get(_STDIN_READER)


def check_input(path: str, what: str = "LOG", takes: str = TAKES_STREAM) -> None:
    """Refuse an input that cannot be read as a stream; ``-`` (stdin) passes.

    The pipe of ``<(...)`` or a character device passes; a directory is "is
    a directory", a socket or a named FIFO said to be one
    (:func:`stream_reason`: a FIFO's open would wait for a writer for ever),
    a missing path "no such file". ``what``: the option (``--log``) or
    argument (``LOG``) it was given as. ``-`` when another option of the
    command read stdin (:func:`stdin_reader`: ``--topology -``) is refused:
    it would read it empty.
    """
    if path == "-":
        reader = stdin_reader()
        if reader is not None and reader != what:
            raise BadOption(f"-: standard input is read by {reader} - already (it can be "
                            "read only once); give a file", what)
        return
    st = stat_input(path, what)
    if stat.S_ISDIR(st.st_mode):
        raise BadOption(f"{show(path)}: is a directory, not a file", what)
    why = stream_reason(st, takes=takes)  # ``takes``: what the input may be, for a FIFO
    if why:
        raise BadOption(f"{show(path)}: {why}", what)
    if not os.access(path, os.R_OK):
        raise BadOption(f"{show(path)}: not readable", what)


#: Largest input a command reads whole, in bytes: a guest's console log is tens
#: of KiB, a groups view or a topology dump under 1 MiB; more is not one (and
#: /dev/zero or an endless FIFO must end).
INPUT_MAX = 64 << 20
#: Bytes read at a time.
_CHUNK = 1 << 20


def read_limited(path: str, what: str, limit: int = INPUT_MAX, *,
                 text: bool = False, takes: str = TAKES_STREAM) -> bytes:
    """At most ``limit`` bytes of ``path`` (``-``: stdin; the pipe of
    ``<(...)`` and devices work), read in chunks. Raises rxl.errors.DataError
    (one line naming ``what`` the input should be) for a socket or a named
    FIFO, before it is opened (:func:`stream_reason`), for more than
    ``limit`` bytes, and with ``text`` at the first NUL byte or bytes that
    are not UTF-8, so a device such as /dev/zero ends at once. OSError when
    it cannot be read."""
    name = "-" if path == "-" else show(path)
    if path != "-":
        try:
            why = stream_reason(os.stat(path), takes=takes)
        except OSError:
            why = None  # open() says why
        if why:
            raise DataError(f"{name}: {why}: not {what}")
    stream = sys.stdin.buffer if path == "-" else open(path, "rb")
    decoder = codecs.getincrementaldecoder("utf-8")()
    parts = []
    size = 0
    try:
        while True:
            chunk = stream.read(_CHUNK)
            if not chunk:
                break
            size += len(chunk)
            if size > limit:
                raise DataError(f"{name}: more than {limit >> 20} MiB: not {what}")
            if text:
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError:
                    raise DataError(f"{name}: not UTF-8 text: not {what}") from None
                if b"\0" in chunk:
                    raise DataError(f"{name}: holds NUL bytes, not text: not {what}")
            parts.append(chunk)
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    return b"".join(parts)


#: A byte-order mark, as an editor (Notepad) may put before UTF-8 text: no content
#: of any input rxl reads (the topology dump, the groups view, a console log all
#: come from FreeBSD, which writes none); every text reader drops a leading one.
BOM = "\ufeff"


def read_input(path: str, what: str = "a console log", limit: int = INPUT_MAX) -> str:
    """The text of ``path`` (``-``: stdin; the pipe of ``<(...)``), at most ``limit`` bytes
    (:func:`read_limited`), UTF-8 with replacement, a leading :data:`BOM` dropped."""
    return read_limited(path, what, limit).decode("utf-8", errors="replace").removeprefix(BOM)
