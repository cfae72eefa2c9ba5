"""The ``rxl`` command line: one click group, one module per subject."""

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rxl")
def main():
    """End-to-end receive locality: model, cores, series, guest runs."""


# Subcommand groups register here, one line each.
from rxl.decide.cli import deal, outcomes_cmd, spread  # noqa: E402

main.add_command(deal)
main.add_command(spread)
main.add_command(outcomes_cmd)
from rxl.bench.cli import bench  # noqa: E402
main.add_command(bench)

from rxl.verify.cli import run, parse, doctor  # noqa: E402
main.add_command(run)
main.add_command(parse)
main.add_command(doctor)
from rxl.tree.cli import series  # noqa: E402
main.add_command(series)
from rxl.tree.cli import build  # noqa: E402
main.add_command(build)
from rxl.learn.cli import learn  # noqa: E402
main.add_command(learn)
from rxl.bench.kcount import main as kcount  # noqa: E402
main.add_command(kcount)
