"""Option groups: options that go together, applied as one decorator.

As Linux KUnit's ``add_build_opts`` / ``add_exec_opts`` add their options to
every subcommand that builds or runs, an :class:`OptionGroup` adds its options
to a command and names them, so the command can build the request type the
group fills (``rxl run``'s groups: :mod:`rxl.verify.cli`, its requests:
:mod:`rxl.verify.request`) and refuse a group that cannot apply to what was
asked (:func:`refuse_given`): an option of another mode is refused, naming
the option, rather than ignored.  Options several commands share with the
same meaning are here too (:data:`objdir_option`).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Sequence, Tuple

import click
from click.core import ParameterSource

from rxl import paths

#: One option: click's parameter declarations and its keyword arguments.
OptionSpec = Tuple[Tuple[str, ...], Dict[str, Any]]


def option(*decls: str, **attrs: Any) -> OptionSpec:
    """An option of a group: the arguments :func:`click.option` would take."""
    return decls, attrs


class OptionGroup:
    """A named group of options, added to a command by decorating it.

    ``params``: the parameter names the group adds (what the command's
    callback receives), in order.
    """

    def __init__(self, name: str, *options: OptionSpec):
        self.name = name
        self.options = options
        self.params = tuple(
            attrs.get("cls", click.Option)(list(decls), **{k: v for k, v in attrs.items()
                                                           if k != "cls"}).name
            for decls, attrs in options)

    def __call__(self, f: Callable) -> Callable:
        for decls, attrs in reversed(self.options):
            f = click.option(*decls, **attrs)(f)
        return f

    def __repr__(self) -> str:
        return f"OptionGroup({self.name!r}, {', '.join(self.params)})"


def given(ctx: click.Context, name: str) -> bool:
    """Whether parameter ``name`` was given (command line or environment), not defaulted."""
    return ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE,
                                              ParameterSource.ENVIRONMENT)


def refuse_given(ctx: click.Context, names: Sequence[str], why: str) -> None:
    """Refuse the first of parameters ``names`` that was given: a usage error
    (exit 2) naming the option, ``why`` as its reason. Nothing when none was."""
    for name in names:
        if given(ctx, name):
            param = next(p for p in ctx.command.params if p.name == name)
            raise click.BadParameter(why, ctx=ctx, param_hint=f"'{spelled(ctx, param)}'")


def spelled(ctx: click.Context, param: click.Parameter) -> str:
    """The option as the command line gave it: ``--no-auto-pristine`` for the
    off side of ``--auto-pristine/--no-auto-pristine``, else its longest name."""
    if getattr(param, "secondary_opts", None) and ctx.params.get(param.name) is False:
        return max(param.secondary_opts, key=len)
    return max(param.opts, key=len)


#: ``--objdir``: MAKEOBJDIRPREFIX of every make.py build a command runs.
objdir_option = click.option("--objdir", default=paths.OBJDIR, show_default=True,
                             help="MAKEOBJDIRPREFIX.")
