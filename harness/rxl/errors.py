"""Every error the harness raises on purpose, under one base.

:class:`RxlError` carries a one-line message.  The command line
(:mod:`rxl.cli.surface`) catches it wherever it is raised, prints
``Error: <message>`` on stderr and exits with its :attr:`~RxlError.exit_code`:
2 for bad input (:class:`UsageError`, and :class:`DataError`: data given to
the command that it cannot read or use), 1 for a failure at run time, 130
(128 + SIGINT, what a shell reports) for :class:`Interrupted`, 143 (128 +
SIGTERM) for :class:`Terminated`.  Inside
a run's stage any of them fails the stage (rxl.verify.pipeline: exit 1).
Below the base, one category per kind of thing that can be wrong:

==================  =========================================================
:class:`UsageError`  an option value or an input refused before anything runs
                     (exit 2); :class:`BadOption` names the option
:class:`DataError`   data given to a command that cannot be read or used: a
                     topology, a targets file, a trace, a dump (exit 2)
:class:`SourceError` the FreeBSD source tree, the patch series, rig kernels
:class:`HostError`   this build host: a make.py build, a compiler, a download,
                     a tool that is missing
:class:`MachineError` a guest or a target: staging its root, booting it, its
                     console, reaching it over SSH, driving a run there
:class:`Interrupted` ``^C`` (SIGINT) while a command ran (exit 130)
:class:`Terminated`  SIGTERM while a command ran (exit 143)
==================  =========================================================

A module's own errors derive from one of these, so ``except RxlError``
catches every one, and each module's ``except`` names what it expects.
:func:`show` quotes user input for such messages, :func:`counted` counts in
them ("1 member", "2 members"), :func:`reason` words an exception the harness
did not make (an OSError as ``PATH: no such file``, never ``[Errno 2] ...``).
"""

from __future__ import annotations

import errno
import os
import re
from typing import Optional

#: Messages quote at most this many characters of user input.
SHOW_MAX = 80


def _escape_char(c: str) -> str:
    """One unprintable character as an escape: a byte that was not UTF-8 (a
    file name's, decoded with ``surrogateescape``: U+DC80-U+DCFF) as that byte,
    ``\\xe9``; another ``repr`` style (``\\n``, ``\\x1b``, ``\\u200b``)."""
    if "\udc80" <= c <= "\udcff":
        return f"\\x{ord(c) - 0xdc00:02x}"
    return c.encode("unicode_escape").decode("ascii")


#: The letters an escape of :func:`_escape_char` has after its backslash.
_ESCAPE_LETTERS = frozenset("xuUnrt")


def _escaped(text: str, limit: int, backslash: bool) -> str:
    """``text`` with each character that is not printable escaped (``repr``
    style: ``\\n``, ``\\x1b``, a file name's byte ``\\xe9``); with ``backslash``
    a run of backslashes doubled where it would read as (part of) an escape:
    before an escape's letter (``a\\nb`` typed is ``a\\\\nb``) or before a
    character escaped (a newline); elsewhere (``a\\b``, ``C:\\dir``) it is
    shown as typed. Cut to ``limit`` characters with the number left off said."""
    out, after = [], ""  # after: the character after the run of backslashes at c
    for c in reversed(text):
        if c == "\\" and backslash:
            out.append("\\\\" if after and (after in _ESCAPE_LETTERS
                                          or not after.isprintable()) else c)
            continue
        after = c
        out.append(c if c.isprintable() else _escape_char(c))
    esc = "".join(reversed(out))
    if len(esc) > limit:
        return f"{esc[:limit]}... ({len(esc) - limit} more characters)"
    return esc


def show(value: object, limit: int = SHOW_MAX) -> str:
    """``value`` for a one-line message: control and non-ASCII-printable
    characters escaped (``repr`` style), a backslash doubled only where it
    would read as an escape (so an escape in the output is one :func:`show`
    made; ``a\\b`` is shown as typed), cut to ``limit`` characters with the
    number left off said. Bytes are decoded as UTF-8, a byte that is not UTF-8
    shown as ``\\xNN`` (as is one in a str decoded with ``surrogateescape``,
    a file name's).

    The one escaping of user input in messages; the error surface's line
    (:func:`message`) escapes only what is still unprintable, never a
    second time."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="surrogateescape")  # a bad byte: \\xNN
    return _escaped(str(value), limit, backslash=True)


def quoted(value: object, limit: int = SHOW_MAX) -> str:
    """:func:`show`'s ``value`` in single quotes: a value quoted as ``{value!r}``
    would be, without repr doubling every backslash (``'a\\\\b'`` for ``a\\b``)."""
    return f"'{show(value, limit)}'"


def json_reason(exc: ValueError) -> str:
    """Why a text is not JSON, in a message's words: json's own reason ("Unterminated
    string starting at", which ends where its position was cut off) and where,
    as "line L, column C" ("unterminated string starting at line 1, column 39").
    A ValueError that is not json's: its own words."""
    msg, line, col = (getattr(exc, k, None) for k in ("msg", "lineno", "colno"))
    if not msg or line is None:
        return str(exc)
    msg = msg[0].lower() + msg[1:]
    return f"{msg.removesuffix(' at')} at line {line}, column {col}"


def os_reason(exc: OSError) -> str:
    """Why ``exc`` says a file cannot be used, in a message's words, without
    the path: "no such file" (ENOENT, as every reader of an input says it), a
    symlink loop named as one (ELOOP), else the system's reason
    ("Permission denied"). Never Python's ``[Errno 2] ...: 'x'``."""
    if exc.errno == errno.ENOENT:
        return "no such file"
    if exc.errno == errno.ELOOP:
        return f"a symlink loop, it cannot be resolved ({exc.strerror})"
    return exc.strerror or " ".join(str(exc).split()) or type(exc).__name__


def reason(exc: BaseException) -> str:
    """Any exception as a message's one line: an OSError as ``PATH: why``
    (:func:`os_reason`; two paths, a rename's, ``A -> B: why``; no path: the
    reason alone) where ``str()`` would say ``[Errno 2] No such file or
    directory: 'x'``; any other its own words on one line. The one way a
    message shows an exception it did not make (a stage's, a tool's)."""
    if isinstance(exc, OSError) and (exc.strerror or exc.errno):
        why = os_reason(exc)
        names = [show(os.fsdecode(f)) for f in (exc.filename, exc.filename2)
                 if isinstance(f, (str, bytes, os.PathLike))]
        return f"{' -> '.join(names)}: {why}" if names else why
    return " ".join(str(exc).split()) or type(exc).__name__


def counted(n: int, noun: str, plural: Optional[str] = None) -> str:
    """``n`` and its noun for a message: "1 member", "2 members" (``plural``
    for a noun whose plural is not noun + "s"). The one way a message counts,
    so that no count of one reads "1 members"."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


#: A file name's byte that is not UTF-8 as ``repr`` writes it (``'caf\\udce9'``:
#: click's own messages quote values with repr, as does ``{value!r}``): the
#: surrogate's escape after an even number of backslashes (repr doubles a
#: backslash given, so one given before ``udce9`` is never taken for it).
_REPR_SURROGATE = re.compile(r"(?<!\\)((?:\\\\)*)\\udc([89a-f][0-9a-f])")


def message(text: str, limit: int) -> str:
    """A whole message for its one line, whose values :func:`show` escaped
    already: characters still unprintable (a value given without ``show``)
    escaped, backslashes left as they are (doubling them showed each escape
    twice: ``caf\\\\udce9.log``, ``'A\\\\nB'``); a byte that is not UTF-8
    written by ``repr`` (``\\udce9``: click's messages, ``{value!r}``) written as
    :func:`show` writes it, ``\\xe9``, so that every message names such a
    path alike; cut to ``limit``."""
    return _escaped(_REPR_SURROGATE.sub(r"\1\\x\2", text), limit, backslash=False)


class RxlError(Exception):
    """An error the harness raises on purpose; ``str()`` is its one-line message.

    ``exit_code``: the status ``rxl`` exits with when this error ends a command.
    """

    exit_code = 1


class UsageError(RxlError):
    """Bad input found while reading it (a topology, a CPU list, a log path):
    exit 2, printed as one ``Error:`` line."""

    exit_code = 2


class BadOption(UsageError):
    """A bad option value: exit 2, printed as ``Error: Invalid value for
    '--OPTION': <message>``.

    ``option``: the option (``--memory``) or argument (``LOG``) at fault.
    """

    def __init__(self, message: str, option: Optional[str] = None):
        super().__init__(message)
        self.message = message
        self.option = option

    @property
    def hint(self) -> Optional[str]:
        """How click names the option: ``'--memory'`` quoted, an argument (``LOG``) bare."""
        if self.option is None:
            return None
        return f"'{self.option}'" if self.option.startswith("-") else self.option


class DataError(RxlError):
    """Data given to a command that cannot be read or used (a topology, a
    targets file, a trace): exit 2, as bad input is."""

    exit_code = 2


class Interrupted(RxlError):
    """The user interrupted the command (SIGINT, ``^C``): exit 130, 128 +
    SIGINT, as a shell reports a command SIGINT ended; one ``Error:`` line."""

    exit_code = 130


class Terminated(RxlError):
    """The command was sent SIGTERM (``kill PID``, a service manager stopping it):
    exit 143, 128 + SIGTERM, as a shell reports a command SIGTERM ended; one
    ``Error:`` line saying it was stopped. Its child processes are stopped and
    what it wrote (logs, a run's directory) is left as it was."""

    exit_code = 143


class SourceError(RxlError):
    """The FreeBSD source tree, the patch series or a rig kernel's tree."""


class HostError(RxlError):
    """This build host: a build that failed, a compiler, a download, a missing tool."""


class MachineError(RxlError):
    """A guest or a target: its root, its boot, its console, SSH, a run there."""
