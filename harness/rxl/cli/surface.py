"""The one error surface of every ``rxl`` command.

Errors: every command reports an error as exactly one line on stderr,
``Error: <message>``, and nothing else: exit status 2 when the command was
asked something it cannot do (a bad or missing option, an option that
cannot apply with another, an input file that is not what it should be)
and 1 for a failure while doing it (a build, a boot, a remote command).
``--json`` changes only what a successful command prints on stdout.  A
group given no command is a usage error too (:func:`needs_command`: one
line listing its commands, exit 2), not click's page of help.

Commands are made with :func:`command` and :func:`group` (click's own, with
the classes below).  Both classes share :class:`Surface`:

* ``invoke`` turns an :class:`rxl.errors.RxlError` escaping the command
  into click's exception of the same meaning (:func:`as_click`): a
  :class:`~rxl.errors.BadOption` into :class:`click.BadParameter`
  (``Invalid value for '--OPTION': ...``, exit 2), any other into
  :class:`click.ClickException` with the error's exit status;
* ``main`` (what the console script and click's test runner call) prints
  every :class:`click.ClickException`, click's own usage errors included
  (``No such option``, ``Missing option``, ``Invalid value``), as the one
  line :func:`error_line` makes: no usage text, no ``Try --help`` line;
* ``make_context`` and ``invoke`` turn ``^C`` (KeyboardInterrupt, which
  click would print as an empty line and ``Aborted!``) into
  :class:`rxl.errors.Interrupted`: ``Error: interrupted``, exit 130;
* ``main`` takes SIGTERM (which ended Python without a word) the way ^C is
  taken (:class:`TermSignal`): every descendant process is sent SIGTERM too
  (a build's make and compilers, which a ^C at the terminal reaches by its
  process group and a ``kill PID`` does not), the cleanup ^C makes runs,
  and the command ends with ``Error: stopped by SIGTERM``, exit 143
  (:class:`rxl.errors.Terminated`), what it wrote left in place.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import signal
import sys

import click
from click.core import ParameterSource

from rxl.cli import processes
from rxl.cli.options import decimal_float, decimal_int, empty_reason
from rxl.errors import (BadOption, DataError, Interrupted, RxlError, Terminated, message,
                        quoted, show)

# click's INT, FLOAT and their ranges read a value with int()/float(), which
# take any Unicode digit ("٣" is 3), "1_000" and blanks: every rxl option
# number is read as written, ASCII (rxl.cli.options.decimal_int).
click.types.IntParamType._number_class = staticmethod(decimal_int)
click.types.FloatParamType._number_class = staticmethod(decimal_float)

#: errno of a write to stdout that cannot be done (``> /dev/full``, a closed
#: pipe's EPIPE is click's own: it exits quietly as ``| head`` wants).
OUTPUT_ERRNOS = (errno.ENOSPC, errno.EIO, errno.EBADF, errno.EDQUOT, errno.EFBIG)
#: The longest error message printed, in characters (the rest is said cut):
#: room for two long paths and a reason.
MESSAGE_MAX = 1000


def as_click(exc: RxlError, ctx: click.Context) -> click.ClickException:
    """The click exception that prints ``exc`` as its category says."""
    if isinstance(exc, BadOption):
        return click.BadParameter(exc.message, ctx=ctx, param_hint=exc.hint)
    out = click.ClickException(str(exc))
    out.exit_code = exc.exit_code
    return out


def error_line(exc: click.ClickException) -> str:
    """``Error: <message>``: the message on one line (each line break and the
    blanks around it folded into one space), other control characters
    escaped and cut at :data:`MESSAGE_MAX` by :func:`rxl.errors.message`
    (the values in it were escaped once, by :func:`rxl.errors.show`)."""
    text = re.sub(r"\s*[\r\n]+\s*", " ", str(exc.format_message()).strip())
    return "Error: " + message(text, limit=MESSAGE_MAX)


def needs_command(ctx: click.Context) -> str:
    """The one line for group ``ctx.command`` given no command: ``Error: rxl
    series needs a command: apply, check, export, sync`` (its visible
    commands, in click's order; ``--help`` shows what each does)."""
    group = ctx.command
    names = [n for n in group.list_commands(ctx)
             if not getattr(group.get_command(ctx, n), "hidden", False)]
    return f"Error: {ctx.command_path} needs a command: {', '.join(names)}"


def refuse_empty(ctx: click.Context) -> None:
    """Refuse an option or argument given an empty (or blank) value: a usage
    error naming it.  ``--counts ''`` or ``--targets ''`` is a slip (an unset
    shell variable), not "none": leaving the option out says that.  An
    option whose help gives '' a meaning is an rxl.cli.options.EmptyIsNone."""
    for param in ctx.command.params:
        if getattr(param, "empty_ok", False):  # rxl.cli.options.EmptyIsNone
            continue
        if ctx.get_parameter_source(param.name) not in (ParameterSource.COMMANDLINE,
                                                         ParameterSource.ENVIRONMENT):
            continue
        values, value = [], ctx.params.get(param.name)
        stack = [value]
        while stack:  # multiple=True, nargs=N, both: tuples of tuples
            v = stack.pop()
            if isinstance(v, (tuple, list)):
                stack.extend(v)
            else:
                values.append(v)
        if any(isinstance(v, str) and not v.strip() for v in values):
            raise click.BadParameter(empty_reason(param), ctx=ctx, param=param)


def refuse_repeated(ctx: click.Context, order) -> None:
    """Refuse an option that takes one value given more than once (``--members
    0 --members 1``: click keeps the last and drops the first without a word):
    a usage error naming it.  ``order``: the parameters as the command line
    gave them, one entry per occurrence (click's parser's ``param_order``).
    Options that are ``multiple`` or count occurrences (``-vv``) repeat by
    design; eager ones (``--help``, ``--version``) end the command anyway."""
    seen = set()
    for param in order:
        if not isinstance(param, click.Option) or param.multiple or param.count \
                or param.is_eager:
            continue
        if param.name in seen:
            opts = "/".join(param.opts + param.secondary_opts)
            raise click.BadParameter(f"{opts} given twice: give it once (the second "
                                     "value would silently replace the first)",
                                     ctx=ctx, param=param)
        seen.add(param.name)


def refuse_option_as_value(ctx: click.Context, args) -> None:
    """Refuse a value that is one of the command's own option names (``rxl run
    --out --check-only``: ``--out``'s value forgotten, click takes
    ``--check-only`` as the directory and the check becomes a run): a usage
    error naming the option whose value it took.  A value given with ``=``
    (``--out=--x``) is taken as written; nothing after ``--`` is looked at."""
    names = {n: p for p in ctx.command.params if isinstance(p, click.Option)
             for n in p.opts + p.secondary_opts}
    args = list(args)
    for i, arg in enumerate(args):
        if arg == "--":
            return
        param = names.get(arg)
        if param is None or param.is_flag or param.count:
            continue
        for value in args[i + 1:i + 1 + max(param.nargs, 1)]:
            if value in names:
                raise click.BadParameter(f"{quoted(value)} is an option of this command, "
                                         f"not a value: give {arg} its value (was it left "
                                         "out?)", ctx=ctx, param=param)


def refuse_beside_eager(ctx: click.Context, order, rest) -> None:
    """Refuse arguments beside an eager option that ends the command
    (``rxl --version extra``: click prints the version and drops ``extra``): a
    usage error naming them, as click's ``Got unexpected extra argument``.
    ``order``: the parameters as given (click's ``param_order``); ``rest``:
    the arguments left after the options.  ``--help`` is left alone: help
    asked anywhere on a command line is shown."""
    help_option = ctx.command.get_help_option(ctx)
    if not rest or not any(isinstance(p, click.Option) and p.is_eager and p is not help_option
                           for p in order):
        return
    raise click.UsageError(f"Got unexpected extra argument{'s' if len(rest) > 1 else ''} "
                           f"({show(' '.join(rest))})", ctx=ctx)


class TermSignal(KeyboardInterrupt):
    """SIGTERM, raised in the main thread where ^C raises KeyboardInterrupt, so
    that what ^C stops SIGTERM stops too (a boot's QEMU,
    rxl.verify.schedule.run_jobs; subprocess.run's child); the surface turns
    it into :class:`rxl.errors.Terminated`, not Interrupted."""


#: What a SIGTERM ends a command with.
TERMINATED = "stopped by SIGTERM"


def on_sigterm(signum, frame) -> None:
    """SIGTERM's handler while a command runs: SIGTERM to every descendant
    (a ``kill PID`` reaches rxl alone, and a build's make and compilers would
    outlive it, holding its lock), then :class:`TermSignal`. A second SIGTERM
    ends rxl at once (the default again), for a cleanup that hangs."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    processes.terminate(processes.descendants(os.getpid()))
    raise TermSignal()


class ClosedStdin:
    """``sys.stdin`` when fd 0 is closed (``rxl parse - <&-``): Python leaves it
    None, and a read of ``-`` (a log, a topology, a trace) was an
    AttributeError traceback. Every read here is one error line (exit 2)."""

    def _closed(self, *args, **kwargs):
        raise DataError("stdin is closed (<&-): nothing to read for '-'")

    read = readline = readlines = fileno = __iter__ = _closed

    @property
    def buffer(self) -> "ClosedStdin":
        return self

    def isatty(self) -> bool:
        return False


class Surface:
    """What every rxl command and group shares: errors through one surface,
    and the checks every command's values get (:func:`refuse_repeated`,
    :func:`refuse_empty`)."""

    def parse_args(self, ctx, args):
        try:  # the parse click makes next, kept to see each occurrence
            _, rest, order = self.make_parser(ctx).parse_args(args=list(args))
        except click.UsageError:
            rest, order = [], []  # click's own parse below says what is wrong
        refuse_option_as_value(ctx, args)
        refuse_repeated(ctx, order)
        refuse_beside_eager(ctx, order, rest)
        return super().parse_args(ctx, args)

    def make_context(self, info_name, args, parent=None, **extra):
        # click's main catches KeyboardInterrupt itself and prints an empty
        # line before its Abort: ^C while an option is read (--topology FIFO)
        # is an Interrupted here, before click sees it.
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except TermSignal:
            raise Terminated(TERMINATED) from None
        except KeyboardInterrupt:
            raise Interrupted("interrupted") from None

    def invoke(self, ctx):
        refuse_empty(ctx)
        try:
            try:
                return super().invoke(ctx)
            except TermSignal:  # kill PID while the command runs
                raise Terminated(TERMINATED) from None
            except KeyboardInterrupt:  # ^C while the command runs (a read of a FIFO)
                raise Interrupted("interrupted") from None
        except RxlError as exc:
            raise as_click(exc, ctx) from None

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True,
             **extra):
        """click's ``main``; in standalone mode every error is :func:`error_line`'s
        one line on stderr and the exit status its category's (2 usage, 1 runtime)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:  # SIGTERM taken as ^C is while the command runs; the handler before, after
            before = signal.signal(signal.SIGTERM, on_sigterm)
        except ValueError:  # not the main thread: signals are the main thread's
            before = None
        try:
            self._standalone(args, prog_name, complete_var, **extra)
        finally:
            if before is not None:
                signal.signal(signal.SIGTERM, before)

    def _standalone(self, args, prog_name, complete_var, **extra):
        """:meth:`main` in standalone mode, SIGTERM's handler in place."""
        if sys.stdin is None:  # fd 0 closed (<&-): a read of '-' says so in one line
            sys.stdin = ClosedStdin()
        if sys.stdout is None:  # fd 1 closed (>&-): whatever the command says is lost
            click.echo("Error: stdout is closed: the output would go nowhere", err=True)
            sys.exit(1)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
            sys.stdout.flush()  # a full disk says so here, not at interpreter exit
        except OSError as exc:
            if exc.errno not in OUTPUT_ERRNOS:
                raise
            click.echo(f"Error: cannot write the output: {exc.strerror}", err=True)
            sys.exit(1)
        except click.exceptions.NoArgsIsHelpError as exc:  # a group with no command
            click.echo(needs_command(exc.ctx), err=True)
            sys.exit(2)
        except click.ClickException as exc:
            click.echo(error_line(exc), err=True)
            sys.exit(exc.exit_code)
        except RxlError as exc:  # raised while click parsed the root's own options
            click.echo(error_line(click.ClickException(str(exc))), err=True)
            sys.exit(exc.exit_code)
        except click.Abort as exc:  # end of input (or ^C) at a click prompt
            if isinstance(exc.__context__, TermSignal):
                click.echo(f"Error: {TERMINATED}", err=True)
                sys.exit(Terminated.exit_code)
            click.echo("Error: interrupted", err=True)
            sys.exit(Interrupted.exit_code if isinstance(exc.__context__, KeyboardInterrupt)
                     else 1)
        except TermSignal:  # between the command's end and its last output
            click.echo(f"Error: {TERMINATED}", err=True)
            sys.exit(Terminated.exit_code)
        # Not standalone, click returns an Exit's status (--help, --version) or
        # the callback's value; rxl's callbacks return nothing (they sys.exit).
        sys.exit(rv if type(rv) is int else 0)


class Command(Surface, click.Command):
    """A command whose errors reach the user through the one surface."""


class Group(Surface, click.Group):
    """A group of :class:`Command` (and :class:`Group`): every error through one surface."""

    command_class = Command


Group.group_class = Group

#: ``@command(name, ...)``: :func:`click.command` with :class:`Command`.
command = functools.partial(click.command, cls=Command)
#: ``@group(name, ...)``: :func:`click.group` with :class:`Group`.
group = functools.partial(click.group, cls=Group)
