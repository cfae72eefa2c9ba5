"""The ``rxl`` command line: the root group only.

Each package's ``cli`` module holds its commands (they parse options, call
the package and print); this module only gathers them under one group,
whose error surface is :mod:`rxl.cli.surface`'s.
"""

import os
import sys

try:  # ^C while the commands load (a few tenths of a second): the line ^C gets later
    import click

    from rxl.bench.cli import bench, kcount_group
    from rxl.cli.options import check_work_root
    from rxl.cli.surface import Group
    from rxl.decide import core
    from rxl.decide.cli import deal, outcomes_cmd, spread
    from rxl.guest.cli import guest, targets_cmd, vm
    from rxl.host.cli import doctor_cmd
    from rxl.learn.cli import learn
    from rxl.tree.cli import build, series
    from rxl.verify.cli import inspect_cmd, parse_cmd, run
except KeyboardInterrupt:  # not a traceback: Error: interrupted, exit 130 (README)
    sys.stderr.write("Error: interrupted\n")
    raise SystemExit(130) from None  # rxl.errors.Interrupted.exit_code


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rxl")
def main():
    """End-to-end receive locality: model, cores, series, guest runs.

    Errors: one line on stderr, "Error: ...", exit 2 for a usage error (a
    bad option value) and 1 for a failure at run time; --json changes only
    what a successful command prints.
    """
    # git's optional locks off for every git the commands start: a read-only
    # query (git status, git diff) of a --src would otherwise rewrite that
    # tree's .git/index to refresh stat data of files touched since, and --src
    # is never written (README); git am, commit and checkout still lock.
    os.environ["GIT_OPTIONAL_LOCKS"] = "0"
    check_work_root()  # RXL_WORK relative, not a directory, under a file
    core.build_dir()  # RXL_BUILD_DIR relative, a file: refused as RXL_WORK is


for _command in (deal, spread, outcomes_cmd,   # decide
                 series, build,                # tree
                 vm, targets_cmd, guest,       # guest
                 run, parse_cmd, inspect_cmd,  # verify
                 learn,                        # learn
                 bench, kcount_group,          # bench
                 doctor_cmd):                  # host
    main.add_command(_command)
