"""``rxl doctor``: what every stage needs on this host, and how to install it."""

from __future__ import annotations

import json
import platform
import sys

import click

from rxl.cli.surface import command
from rxl.errors import HostError, UsageError
from rxl.host import doctor


@command("doctor")
@click.option("--install", is_flag=True,
              help="Install every missing host package: apt-get update once, then one "
                   "apt-get install (as root); otherwise print the exact commands. Debian "
                   "packages only: --for bhyve's are FreeBSD's.")
@click.option("--json", "as_json", is_flag=True,
              help='Print [{"name", "ok", "package", "stages", "note", "install"}] as JSON '
                   "(if any is missing: the Error line too, exit 1).")
@click.option("--for", "mode", type=click.Choice(doctor.MODES), default="guest",
              show_default=True,
              help="guest: rxl run with the own QEMU guest; ssh: rxl run --target (adds "
                   "paramiko); bhyve: rxl vm --start (a FreeBSD host's bhyve only); bench: "
                   "rxl bench accept's eBPF setups (adds root and Linux >= 5.12).")
def doctor_cmd(install, as_json, mode):
    """Check what every stage needs on the host; print how to install what is missing.

    The table and the install lines go to stdout; if anything is missing,
    ``Error: N missing: ...`` is the one line on stderr (exit 1), --json or not."""
    if install and mode == "bhyve" and platform.system() != "FreeBSD":
        # asked what this host cannot do, before anything runs: exit 2, as vm --start
        raise UsageError(f"--install --for bhyve needs a FreeBSD host (this is "
                         f"{platform.system()}): bhyve and its firmware are FreeBSD's; drop "
                         "--install to list what rxl vm --start needs")
    results = doctor.check(mode=mode)
    if install:
        results, why = doctor.install_missing(results, mode=mode,
                                              echo=lambda s: click.echo(s, err=True))
        if why:
            raise HostError(why)
    missing = [r for r in results if not r.ok]
    if as_json:
        click.echo(json.dumps([{"name": r.need.name, "ok": r.ok, "package": r.need.package,
                                "stages": list(r.need.stages), "note": r.note,
                                "install": r.install_line()} for r in results], indent=2))
    else:
        # the report, what to type included, is stdout; stderr holds the one Error line
        for r in results:
            click.echo(doctor.row(r))
        for line in doctor.advice(missing, python=sys.executable) if missing else ():
            click.echo(line)
    if missing:
        # --install runs apt-get (and nothing else): say so of what it left
        left = [r.need.name for r in missing if install and ":" in r.need.package]
        raise HostError(f"{len(missing)} missing: " + ", ".join(r.need.name for r in missing)
                        + (f" (not by --install, which installs Debian packages: "
                           f"{', '.join(left)}; see the lines above)" if left else ""))
