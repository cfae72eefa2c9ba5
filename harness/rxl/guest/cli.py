"""``rxl vm`` (a bhyve command line) and ``rxl targets`` (the targets file)."""

from __future__ import annotations

import os
import platform
import shlex
import shutil
import subprocess
import sys

import click

from rxl.guest import bhyve as bhyve_mod
from rxl.guest import targets as targets_mod


@click.command("vm")
@click.option("--image", required=True,
              type=click.Path(exists=True, dir_okay=False, readable=True),
              help="FreeBSD VM disk image (raw), e.g. FreeBSD-14.x-RELEASE-amd64.raw.")
@click.option("--name", default="rxl", show_default=True, help="VM name (/dev/vmm/NAME).")
@click.option("--sockets", default=2, show_default=True, type=click.IntRange(1, 256))
@click.option("--cores", default=2, show_default=True, type=click.IntRange(1, 256),
              help="Cores per socket.")
@click.option("--threads", default=2, show_default=True, type=click.IntRange(1, 8),
              help="Threads per core.")
@click.option("--numa-nodes", default=0, show_default=True,
              type=click.IntRange(0, bhyve_mod.MAX_NUMA_DOMAINS),
              help="NUMA domains (needs a bhyve with -n; not FreeBSD 14's).")
@click.option("--memory", "memory_mib", default=2048, show_default=True,
              type=click.IntRange(128, 16 * 1024 * 1024), help="MiB.")
@click.option("--tap", default="tap0", show_default=True, help="Host tap interface.")
@click.option("--firmware", default=bhyve_mod.DEFAULT_FIRMWARE, show_default=True,
              help="UEFI firmware (edk2-bhyve package).")
@click.option("--start", is_flag=True, help="Run it (FreeBSD host, as root); default: print.")
def vm(image, name, sockets, cores, threads, numa_nodes, memory_mib, tap, firmware, start):
    """Print (or --start) a bhyve command line for a two-socket FreeBSD guest.

    UNTESTED ON HARDWARE. Commit 1 (iflib queue spread) cannot be shown in
    bhyve: it has no multi-queue iflib NIC; commits 2 and 3 are tested over
    loopback, reaching the guest with rxl run --target ssh://root@ADDRESS.
    """
    numa_ok = False
    usage = ""
    if shutil.which("bhyve"):
        p = subprocess.run(["bhyve", "-h"], capture_output=True, text=True)
        usage = p.stdout + p.stderr
        numa_ok = bhyve_mod.supports_numa(usage)
    cfg = bhyve_mod.VMConfig(image=image, name=name, sockets=sockets, cores=cores,
                             threads=threads, numa_nodes=numa_nodes, memory_mib=memory_mib,
                             tap=tap, firmware=firmware)
    try:
        argv = bhyve_mod.build_argv(cfg, numa_supported=numa_ok or (not usage and not start))
    except bhyve_mod.BhyveConfigError as exc:
        raise click.BadParameter(str(exc)) from None
    note = None if usage else "no bhyve on this host: -n (NUMA) support not checked"
    if not start:
        click.echo(bhyve_mod.describe(cfg, argv, note))
        return
    if platform.system() != "FreeBSD" or not usage:
        raise click.ClickException("--start needs a FreeBSD host with bhyve (this is "
                                   f"{platform.system()}); drop --start to print the commands")
    for cmd in bhyve_mod.setup_commands(cfg):
        click.echo(f"running: {shlex.join(cmd)}", err=True)
        subprocess.run(cmd)  # kldload -n / an existing tap: not errors
    click.echo(f"running: {shlex.join(argv)}", err=True)
    rc = subprocess.run(argv).returncode
    for cmd in bhyve_mod.teardown_commands(cfg):
        subprocess.run(cmd)
    sys.exit(rc)


@click.command("targets")
@click.option("--targets", "path", default=None,
              help="Targets file [default: $RXL_WORK/targets.yaml].")
@click.option("--key", "show_key", is_flag=True,
              help="Print the harness's public key (made if absent) for a target's "
                   "authorized_keys, and how to let root log in with it; then stop.")
def targets(path, show_key):
    """Check the targets file (every mistake, one line each) and list its targets."""
    if show_key:
        from rxl.guest import sshbase
        key = sshbase.harness_key()
        click.echo(sshbase.public_line(key))
        click.echo(f"# {key}.pub: append the line above to ~root/.ssh/authorized_keys on the "
                   "target, and allow root's key login there: PermitRootLogin "
                   "prohibit-password in /etc/ssh/sshd_config, then service sshd restart",
                   err=True)
        return
    try:
        ts = targets_mod.load(path)
    except targets_mod.TargetsError as exc:
        for line in exc.errors:
            click.echo(line, err=True)
        sys.exit(1)
    if not ts.targets:
        click.echo(f"{ts.path}: no targets")
        return
    for t in ts.targets.values():
        if t.kind == "qemu":
            s = t.shape
            where = (f"own QEMU guest: {s.sockets} sockets x {s.dies} dies x {s.cores} cores x "
                     f"{s.threads} threads, {s.numa_nodes} NUMA nodes, {s.memory_mib} MiB, "
                     f"{s.nic}")
        else:
            where = f"{t.kind}: {t.ssh_target().url}"
            if t.key:
                where += f" key {t.key}" + ("" if os.path.isfile(t.key) else
                                            " (no such file yet: needed when it is used)")
        click.echo(f"{t.name:16s} {where}")
