"""The ``rxl`` command line: one click group, one module per subject."""

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rxl")
def main():
    """End-to-end receive locality: model, cores, series, guest runs."""


# Subcommand groups register here, one line each.
