"""``rxl vm`` (a bhyve command line), ``rxl targets`` (the targets file) and
``rxl guest up / down`` (the own guest kept running as an SSH target)."""

from __future__ import annotations

import os
import platform
import re
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import click

from rxl import paths
from rxl.cli.groups import refuse_given
from rxl.cli.options import EmptyIsNone, InputFile
from rxl.cli.surface import command, group
from rxl.decide.cpugroup import CPU_MAXSIZE
from rxl.errors import BadOption, RxlError, UsageError, counted, reason, show
from rxl.guest import bhyve, sshkeys, targets
from rxl.guest import up as guest_up
from rxl.tree import sshworld
from rxl.tree import world as tree_world


#: The option of ``rxl vm`` that sets each VMConfig field.
#: A raw disk image holds at least one 512-byte sector (its MBR or GPT header).
SECTOR = 512

VM_OPTIONS = {"image": "--image", "name": "--name", "sockets": "--sockets",
              "cores": "--cores", "threads": "--threads", "numa_nodes": "--numa-nodes",
              "memory_mib": "--memory", "tap": "--tap", "firmware": "--firmware"}


@command("vm")
@click.option("--image", required=True,
              type=InputFile(takes="a raw disk image file or a disk device"),
              help="FreeBSD VM disk image (raw) or disk device, e.g. "
                   "FreeBSD-15.x-RELEASE-amd64.raw or /dev/zvol/zroot/vm0.")
@click.option("--name", default="rxl", show_default=True, help="VM name (/dev/vmm/NAME).")
@click.option("--sockets", default=2, show_default=True, type=click.IntRange(1, 256))
@click.option("--cores", default=2, show_default=True, type=click.IntRange(1, 256),
              help="Cores per socket.")
@click.option("--threads", default=2, show_default=True, type=click.IntRange(1, 8),
              help="Threads per core.")
@click.option("--numa-nodes", default=0, show_default=True,
              type=click.IntRange(0, bhyve.MAX_NUMA_DOMAINS),
              help="NUMA domains (needs a bhyve with -n; not FreeBSD 14's).")
@click.option("--memory", "memory_mib", default=2048, show_default=True,
              type=click.IntRange(bhyve.MIN_DOMAIN_MIB, 16 * 1024 * 1024),
              help=f"MiB (>= {bhyve.MIN_DOMAIN_MIB} per NUMA domain, split evenly).")
@click.option("--tap", default="tap0", show_default=True, help="Host tap interface.")
@click.option("--firmware", default=bhyve.DEFAULT_FIRMWARE, show_default=True,
              help="UEFI firmware (edk2-bhyve package).")
@click.option("--start", is_flag=True, help="Run it (FreeBSD host, as root); default: print.")
def vm(image, name, sockets, cores, threads, numa_nodes, memory_mib, tap, firmware, start):
    """Print (or --start) a bhyve command line for a two-socket FreeBSD guest.

    UNTESTED ON HARDWARE. Commit 1 (iflib queue spread) cannot be shown in
    bhyve: it has no multi-queue iflib NIC; commits 2 to 4 are tested over
    loopback, reaching the guest with rxl run --target ssh://root@ADDRESS.
    """
    mode = os.stat(image).st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode)):
        raise BadOption(f"{show(image)}: not a regular file or disk device (a raw disk "
                        "image, or a zvol or md device)", "--image")
    if stat.S_ISCHR(mode) and not is_disk_device(image):
        raise BadOption(f"{show(image)}: a character device that is no disk (a disk is "
                        "a zvol, md or disk device, e.g. /dev/zvol/zroot/vm0, /dev/md0, "
                        "/dev/ada0): no disk image", "--image")
    if stat.S_ISREG(mode) and os.path.getsize(image) < SECTOR:  # a device's st_size is 0
        raise BadOption(f"{show(image)}: {os.path.getsize(image)} bytes, less than one "
                        f"{SECTOR}-byte sector: no disk image", "--image")
    vcpus = sockets * cores * threads
    if vcpus > CPU_MAXSIZE:
        raise BadOption(f"{sockets} x {cores} x {threads} = {vcpus} vCPUs: a FreeBSD "
                        f"guest has at most {CPU_MAXSIZE} CPUs (CPU_MAXSIZE)",
                        "--sockets', '--cores', '--threads")
    numa_ok = False
    usage = ""
    if shutil.which("bhyve"):
        p = subprocess.run(["bhyve", "-h"], capture_output=True, text=True)
        usage = p.stdout + p.stderr
        numa_ok = bhyve.supports_numa(usage)
    cfg = bhyve.VMConfig(image=image, name=name, sockets=sockets, cores=cores,
                             threads=threads, numa_nodes=numa_nodes, memory_mib=memory_mib,
                             tap=tap, firmware=firmware)
    try:
        argv = bhyve.build_argv(cfg, numa_supported=numa_ok or (not usage and not start))
    except bhyve.BhyveConfigError as exc:
        raise BadOption(str(exc), VM_OPTIONS.get(exc.field)) from None
    note = None if usage else "no bhyve on this host: -n (NUMA) support not checked"
    if not start:
        click.echo(bhyve.describe(cfg, argv, note))
        return
    if platform.system() != "FreeBSD" or not usage:
        # asked what this host cannot do, before anything runs: exit 2 (README)
        raise UsageError("--start needs a FreeBSD host with bhyve (this is "
                         f"{platform.system()}" + ("" if platform.system() != "FreeBSD"
                                                   else ", no bhyve found")
                         + "); drop --start to print the commands")
    for cmd in bhyve.setup_commands(cfg):
        click.echo(f"running: {shlex.join(cmd)}", err=True)
        subprocess.run(cmd)  # kldload -n / an existing tap: not errors
    click.echo(f"running: {shlex.join(argv)}", err=True)
    rc = subprocess.run(argv).returncode
    for cmd in bhyve.teardown_commands(cfg):
        subprocess.run(cmd)
    sys.exit(rc)


#: FreeBSD's disks are character devices (no block devices since 4.0), told from
#: /dev/null or a tty by name: zvols, md(4), the disk drivers (ada, da, nvd, nda,
#: vtbd, mmcsd, xbd, ...) with their partitions, and the GEOM labels and classes.
DISK_DEVICE = re.compile(
    r"/dev/(?:zvol/.+|(?:ada|da|nvd|nda|vtbd|md|mmcsd|sdda|xbd|ad|mfid|mfisyspd|"
    r"aacd|twed|ipsd|amrd|mlxd|idad)\d+(?:[ps]\d+[a-h]?|[a-h])?|"
    r"(?:gpt|gptid|diskid|label|ufs|ufsid|mirror|raid|stripe|concat|raid3|"
    r"iso9660)/.+)(?:\.eli|\.nop)?")


def is_disk_device(path: str) -> bool:
    """Whether the character device ``path`` is named as a disk (:data:`DISK_DEVICE`),
    as given or where its links lead."""
    return any(DISK_DEVICE.fullmatch(p) for p in
               (os.path.abspath(path), os.path.realpath(path)))


@command("targets")
@click.option("--targets", "path", default=None,
              help="Targets file [default: $RXL_WORK/targets.yaml].")
@click.option("--key", "show_key", is_flag=True,
              help="Print the harness's public key (made if absent) for a target's "
                   "authorized_keys, and how to let root log in with it; then stop.")
@click.pass_context
def targets_cmd(ctx, path, show_key):
    """Check the targets file (every mistake, one line each) and list its targets."""
    if show_key:
        refuse_given(ctx, ("path",), "not with --key: the harness key is the same for "
                                     "every target")
        key = sshkeys.harness_key()
        pub = sshkeys.public_file(key)  # a removed .pub made again: the file named below
        click.echo(sshkeys.public_line(key))
        click.echo(f"# {pub}: append the line above to ~root/.ssh/authorized_keys on the "
                   "target, and allow root's key login there: PermitRootLogin "
                   "prohibit-password in /etc/ssh/sshd_config, then service sshd restart",
                   err=True)
        return
    try:
        ts = targets.load(path, keys=True)  # every unusable key among the mistakes
    except targets.TargetsError as exc:  # every mistake on stdout, then the one error line
        for line in exc.errors:
            click.echo(line)
        n = len(exc.errors)
        raise targets.TargetsError([f"{exc.path or path or targets.default_path()}: {n} "
                                    f"mistake{'s' * (n > 1)} (listed above)"]) from None
    if not ts.targets:
        click.echo(f"{show(ts.path)}: no targets")
        return
    bad = []
    for t in ts.targets.values():
        if t.kind == "qemu":
            s = t.shape
            where = (f"own QEMU guest: {counted(s.sockets, 'socket')} x "
                     f"{counted(s.dies, 'die')} x {counted(s.cores, 'core')} x "
                     f"{counted(s.threads, 'thread')}, {counted(s.numa_nodes, 'NUMA node')}, "
                     f"{s.memory_mib} MiB, {s.nic}")
        else:
            where = f"{t.kind}: {t.ssh_target().url}"
            if t.key:
                where += f" key {show(t.key)}"
                try:  # missing: needed later; unusable only if it changed since load
                    sshkeys.check_key_file(t.key)
                except sshkeys.KeyFileError as exc:
                    if not exc.missing:
                        bad.append(f"{show(ts.path)}: targets.{t.name}.key: {exc}")
                    where += (" (no such file yet: needed when it is used)" if exc.missing
                              else f" (unusable: {exc})")
        click.echo(f"{t.name:16s} {where}")
    if bad:
        n = len(bad)
        raise targets.TargetsError([f"{bad[0]}" if n == 1 else
                                    f"{ts.path}: {n} unusable keys (listed above)"]) from None


def _echo_err(line: str) -> None:
    click.echo(line, err=True)


@group("guest")
def guest():
    """The own QEMU guest left running as an SSH target (needs the sshd userland)."""


@guest.command("up")
@click.option("--src", default="/usr/src", show_default=True, help="FreeBSD source tree.")
@click.option("--kernel", required=True, help="Kernel to boot.")
@click.option("--build", is_flag=True, help="Build the sshd userland first (under the lock).")
@click.option("--kyua", is_flag=True, help="With --build: kyua too (lutok, lua, sqlite3, libc++).")
@click.option("--atf-dir", default=str(tree_world.REPO_ATF_DIR), show_default=True,
              cls=EmptyIsNone,
              help="The series' ATF tests put in the guest ('' for none: FreeBSD's own only).")
@click.option("--dry-run", is_flag=True, help="Print what would run.")
def up_cmd(src, kernel, build, kyua, atf_dir, dry_run):
    """Boot the guest with sshd, wait for SSH, print its ssh:// address."""
    src, kernel = os.path.abspath(src), os.path.abspath(kernel)
    bad = guest_up.check_up(src, kernel, build=build, kyua=kyua,
                            series_tests=bool(atf_dir))
    if bad:
        raise click.BadParameter(bad[1], param_hint=f"'{bad[0]}'")
    extra = tree_world.check_atf_dir(atf_dir)  # rxl run's check, before any plan
    if dry_run:
        click.echo("\n".join(guest_up.dry_run_lines(src, kernel, build=build, kyua=kyua)))
        return
    tests_dir = Path(paths.GUEST) / "up" / "tests"
    try:
        if build:
            sshworld.build_ssh_world(src, echo=_echo_err, kyua=kyua)
        built = tree_world.build_tests(src, sshworld.default_objdir(), str(tests_dir),
                                       logdir=str(tests_dir), extra_sources=extra,
                                       echo=_echo_err)
        st = guest_up.up(src, kernel, echo=_echo_err,
                         tests={n: str(b) for n, b in built.items()})
    except (RxlError, OSError) as exc:
        raise click.ClickException(reason(exc)) from None
    click.echo(f"{st['url']}  (SSH after {st['boot_to_ssh_seconds']} s; console {st['log']})")


@guest.command("down")
def down_cmd():
    """Stop the guest `rxl guest up` started."""
    for line in guest_up.down():
        click.echo(line)
