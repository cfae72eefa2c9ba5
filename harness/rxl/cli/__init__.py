"""The command line's shared home: what every package's ``cli`` module uses.

``surface``: the one error surface (:func:`~rxl.cli.surface.command` and
:func:`~rxl.cli.surface.group` make commands whose :class:`rxl.errors.RxlError`
becomes one ``Error:`` line and its exit status); ``options``: option types
and the checks of inputs and output directories; ``groups``: the option
groups ``rxl run`` is made of, each filling one request type; ``main``: the
root group (the ``rxl`` console script), which gathers every package's
commands.

May import: ``rxl.errors`` and ``rxl.paths`` (``main`` alone: every
package's ``cli``); every package may import it.
"""
