"""Every error the harness raises on purpose, under one base.

:class:`RxlError` carries a one-line message.  The command line
(:mod:`rxl.cli.surface`) catches it wherever it is raised, prints
``Error: <message>`` on stderr and exits with its :attr:`~RxlError.exit_code`:
2 for bad input (:class:`UsageError`, and :class:`DataError`: data given to
the command that it cannot read or use), 1 for a failure at run time, 130
(128 + SIGINT, what a shell reports) for :class:`Interrupted`.  Inside
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
==================  =========================================================

A module's own errors derive from one of these, so ``except RxlError``
catches every one, and each module's ``except`` names what it expects.
:func:`show` quotes user input for such messages.
"""

from __future__ import annotations

from typing import Optional

#: Messages quote at most this many characters of user input.
SHOW_MAX = 80


def show(value: object, limit: int = SHOW_MAX) -> str:
    """``value`` quoted for a one-line message: control and non-ASCII-printable
    characters escaped (``repr`` style), cut to ``limit`` characters with the
    number left off said. Bytes are decoded as UTF-8 with escapes."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="backslashreplace")
    text = str(value)
    esc = "".join(c if c.isprintable() and c != "\\" else
                  (c.encode("unicode_escape").decode("ascii") if c != "\\" else "\\\\")
                  for c in text)
    if len(esc) > limit:
        return f"{esc[:limit]}... ({len(esc) - limit} more characters)"
    return esc


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


class SourceError(RxlError):
    """The FreeBSD source tree, the patch series or a rig kernel's tree."""


class HostError(RxlError):
    """This build host: a build that failed, a compiler, a download, a missing tool."""


class MachineError(RxlError):
    """A guest or a target: its root, its boot, its console, SSH, a run there."""
