"""``python -m rxl``: the same as the ``rxl`` console script."""

from rxl.cli import main

main(prog_name="rxl")
