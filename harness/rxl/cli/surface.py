"""The one error surface of every ``rxl`` command.

Errors: every command reports an error as one line on stderr, ``Error:
<message>`` (click's prefix), exit status 2 for a usage error (a bad option
value) and 1 for a failure at run time; ``--json`` changes only what a
*successful* command prints.

Commands are made with :func:`command` and :func:`group` (click's own, with
the classes below).  :class:`Command` turns an :class:`rxl.errors.RxlError`
escaping the command into click's exception of the same meaning: a
:class:`~rxl.errors.BadOption` into :class:`click.BadParameter` (usage
text, ``Invalid value for '--OPTION'``, exit 2), any other into
:class:`click.ClickException` with the error's exit status.  :class:`Group`
makes every message one line (newlines folded) and escapes and cuts it with
:func:`rxl.errors.show` (limit 400) before click prints it.
"""

from __future__ import annotations

import functools

import click

from rxl.errors import BadOption, RxlError, show

#: The longest error message printed, in characters (the rest is said cut).
MESSAGE_MAX = 400


def as_click(exc: RxlError, ctx: click.Context) -> click.ClickException:
    """The click exception that prints ``exc`` as its category says."""
    if isinstance(exc, BadOption):
        return click.BadParameter(exc.message, ctx=ctx, param_hint=exc.hint)
    out = click.ClickException(str(exc))
    out.exit_code = exc.exit_code
    return out


class Command(click.Command):
    """A command whose :class:`~rxl.errors.RxlError` is shown through click."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except RxlError as exc:
            raise as_click(exc, ctx) from None


class Group(click.Group):
    """A group of :class:`Command` (and :class:`Group`): every error through one surface.

    A :class:`click.ClickException` escaping a command has its message made
    one line and escaped/cut by :func:`rxl.errors.show` before click prints
    it; exit codes stay click's (2 usage, 1 runtime).
    """

    command_class = Command

    def invoke(self, ctx):
        try:
            try:
                return super().invoke(ctx)
            except RxlError as exc:
                raise as_click(exc, ctx) from None
        except click.ClickException as exc:
            exc.message = show(" ".join(str(exc.message).split()), limit=MESSAGE_MAX)
            raise


Group.group_class = Group

#: ``@command(name, ...)``: :func:`click.command` with :class:`Command`.
command = functools.partial(click.command, cls=Command)
#: ``@group(name, ...)``: :func:`click.group` with :class:`Group`.
group = functools.partial(click.group, cls=Group)
