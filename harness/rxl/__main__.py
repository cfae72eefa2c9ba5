"""``python -m rxl``: the same as the ``rxl`` console script."""

from rxl.cli.main import main

main(prog_name="rxl")
