"""A bhyve command line for a two-socket FreeBSD guest, as one pure function.

UNTESTED ON HARDWARE: this machine is Linux and cannot run bhyve; the argv is
built from bhyve(8) and unit-tested for its shape only.

The guest boots a FreeBSD VM image the user supplies (a raw disk image, e.g.
FreeBSD-15.x-RELEASE-amd64.raw from the project's VM-IMAGES directory) with
the UEFI firmware of the ``edk2-bhyve`` package, a virtio-net NIC on a tap
interface and its console on stdio. Once it runs sshd, it is an SSH target
(``rxl run --target ssh://root@ADDRESS``; :mod:`rxl.guest.ssh`).

What bhyve can and cannot show of the series:

* the CPU topology: ``-c cpus=N,sockets=S,cores=C,threads=T`` (bhyve(8));
  FreeBSD's scheduler sees S packages, so commits 2 to 4 (the lbgroup code
  in in_pcblb.c, its CPU deal and learning) are exercised over loopback, as
  in the QEMU guest;
* NUMA domains only where the host's bhyve has ``-n id,size,cpus``
  (newer than FreeBSD 14; :func:`supports_numa` looks for ``-n`` in bhyve's
  usage text; UEFI boot only; at most :data:`MAX_NUMA_DOMAINS`);
* commit 1 (iflib spreading RX queues over cache groups) CANNOT be shown:
  bhyve offers no multi-queue iflib NIC (virtio-net is not iflib, and e1000 is
  emulated with one queue), so there are no ``dev.*.*.iflib.rxq*.cpu`` to
  spread. A machine with a real multi-queue NIC (``kind: box``) or the QEMU
  guest (e1000e, two RX queues) shows it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import List, Optional, Sequence

from rxl.errors import DataError

#: Where the ``edk2-bhyve`` package installs the UEFI firmware (FreeBSD ports).
DEFAULT_FIRMWARE = "/usr/local/share/uefi-firmware/BHYVE_UEFI.fd"
#: bhyve's NUMA domain limit (libvirt's bhyve driver enforces the same 8).
MAX_NUMA_DOMAINS = 8
#: Disk emulations bhyve offers for a raw image.
DISK_MODELS = ("virtio-blk", "nvme", "ahci-hd")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,30}")
#: An interface name's buffer, NUL included (IFNAMSIZ, sys/net/if.h): a tap
#: name has at most 15 characters.
IFNAMSIZ = 16


class BhyveConfigError(DataError):
    """A VM configuration that cannot give a valid bhyve command line.

    ``field``: the :class:`VMConfig` field at fault (``name``, ``tap``, ...),
    so a command line can name its option.
    """

    def __init__(self, message: str, field: str = ""):
        super().__init__(message)
        self.field = field


#: The least RAM, MiB, a bhyve guest is given per NUMA domain (one domain
#: without -n): what validate() refuses below.
MIN_DOMAIN_MIB = 256


@dataclass(frozen=True)
class VMConfig:
    """One bhyve guest.

    name: VM name (letters, digits, ``_.-``; /dev/vmm/NAME);
    image: the FreeBSD disk image (raw), required;
    sockets, cores, threads: topology, vCPUs = product;
    numa_nodes: 0 for none, else a divisor of sockets (needs ``-n`` support);
    memory_mib: guest RAM in MiB (>= MIN_DOMAIN_MIB per NUMA domain, divisible by the count);
    tap: host tap interface for virtio-net (create it first: ``ifconfig tap0 create``);
    disk: one of :data:`DISK_MODELS`; firmware: UEFI code image.
    """

    image: str
    name: str = "rxl"
    sockets: int = 2
    cores: int = 2
    threads: int = 2
    numa_nodes: int = 0
    memory_mib: int = 2048
    tap: str = "tap0"
    disk: str = "virtio-blk"
    firmware: str = DEFAULT_FIRMWARE
    bhyve: str = "bhyve"

    @property
    def vcpus(self) -> int:
        return self.sockets * self.cores * self.threads


def supports_numa(usage_text: str) -> bool:
    """True if a bhyve usage text (``bhyve -h`` output) lists the ``-n`` option."""
    return re.search(r"(^|[\s\[])-n\b", usage_text) is not None or \
        re.search(r"\[-[A-Za-z]*n[A-Za-z]*\]", usage_text) is not None


def validate(cfg: VMConfig, *, numa_supported: bool = False) -> None:
    """Raise BhyveConfigError (one line) for a configuration bhyve would refuse."""
    if not cfg.image:
        raise BhyveConfigError("image is required (a FreeBSD VM disk image)", "image")
    if "," in cfg.image:
        raise BhyveConfigError(f"image path may not contain a comma: {cfg.image!r}", "image")
    if "," in cfg.firmware or not cfg.firmware:
        raise BhyveConfigError(f"firmware path must be given and may not contain a comma: "
                               f"{cfg.firmware!r}", "firmware")
    if not _NAME.fullmatch(cfg.name):
        raise BhyveConfigError(f"name {cfg.name!r}: 1-31 of letters, digits, '_', '.', '-'",
                                "name")
    for k in ("sockets", "cores", "threads"):
        v = getattr(cfg, k)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise BhyveConfigError(f"{k} must be a positive integer, got {v!r}", k)
    if cfg.disk not in DISK_MODELS:
        raise BhyveConfigError(f"disk {cfg.disk!r} is not one of {', '.join(DISK_MODELS)}",
                                "disk")
    if not re.fullmatch(r"tap[0-9]+", cfg.tap):
        raise BhyveConfigError(f"tap {cfg.tap!r}: expected tapN", "tap")
    if len(cfg.tap) >= IFNAMSIZ:
        raise BhyveConfigError(f"tap {cfg.tap!r}: {len(cfg.tap)} characters; an interface "
                               f"name has at most {IFNAMSIZ - 1} (IFNAMSIZ, net/if.h)", "tap")
    n = cfg.numa_nodes
    if not isinstance(n, int) or n < 0:
        raise BhyveConfigError(f"numa_nodes must be >= 0, got {n!r}", "numa_nodes")
    if n:
        if not numa_supported:
            raise BhyveConfigError("this host's bhyve has no -n (NUMA domains; newer than "
                                   "FreeBSD 14): use numa_nodes=0", "numa_nodes")
        if n > MAX_NUMA_DOMAINS:
            raise BhyveConfigError(f"numa_nodes={n}: bhyve allows at most {MAX_NUMA_DOMAINS}",
                                   "numa_nodes")
        if cfg.sockets % n:
            raise BhyveConfigError(f"numa_nodes={n} does not divide sockets={cfg.sockets}",
                                   "numa_nodes")
    nodes = max(n, 1)
    m = cfg.memory_mib
    if m < MIN_DOMAIN_MIB * nodes:
        raise BhyveConfigError(
            f"memory_mib={m}: below {MIN_DOMAIN_MIB * nodes} MiB, the least for "
            + (f"{nodes} NUMA domains ({MIN_DOMAIN_MIB} MiB per domain x {nodes})"
               if n else f"a guest ({MIN_DOMAIN_MIB} MiB)"), "memory_mib")
    if m % nodes:
        raise BhyveConfigError(f"memory_mib={m} does not split evenly over {nodes} NUMA "
                               f"domains ({m} / {nodes} = {m / nodes:g} MiB each)",
                               "memory_mib")


def build_argv(cfg: VMConfig, *, numa_supported: bool = False) -> List[str]:
    """The bhyve argv (list of str) for ``cfg``. Pure: no I/O.

    Slots: 0 hostbridge, 1 lpc (com1 on stdio, the UEFI bootrom), 2 the disk,
    3 virtio-net on ``cfg.tap``. Flags: -A ACPI tables, -H yield the CPU on
    HLT, -P exit on PAUSE, -w ignore unimplemented MSRs, -u RTC in UTC.
    Raises BhyveConfigError.
    """
    validate(cfg, numa_supported=numa_supported)
    argv = [cfg.bhyve, "-A", "-H", "-P", "-w", "-u",
            "-c", f"cpus={cfg.vcpus},sockets={cfg.sockets},cores={cfg.cores},"
                  f"threads={cfg.threads}",
            "-m", f"{cfg.memory_mib}M"]
    if cfg.numa_nodes:
        per_cpus = cfg.vcpus // cfg.numa_nodes
        per_mib = cfg.memory_mib // cfg.numa_nodes
        for d in range(cfg.numa_nodes):
            first = d * per_cpus
            argv += ["-n", f"id={d},size={per_mib}M,cpus={first}-{first + per_cpus - 1}"]
    argv += ["-s", "0,hostbridge", "-s", "1,lpc",
             "-s", f"2,{cfg.disk},{cfg.image}",
             "-s", f"3,virtio-net,{cfg.tap}",
             "-l", "com1,stdio", "-l", f"bootrom,{cfg.firmware}",
             cfg.name]
    return argv


def setup_commands(cfg: VMConfig) -> List[List[str]]:
    """What the host needs before :func:`build_argv` (each an argv): vmm, the
    tap, and taps that come up when bhyve opens them (the handbook's
    ``net.link.tap.up_on_open=1``)."""
    return [["kldload", "-n", "vmm"], ["sysctl", "net.link.tap.up_on_open=1"],
            ["ifconfig", cfg.tap, "create"]]


def teardown_commands(cfg: VMConfig) -> List[List[str]]:
    """What frees the VM after it exits (bhyve leaves /dev/vmm/NAME behind)."""
    return [["bhyvectl", "--destroy", f"--vm={cfg.name}"]]


def describe(cfg: VMConfig, argv: Sequence[str], numa_note: Optional[str] = None) -> str:
    """Text printed by ``rxl vm``: the commands and what the guest can show."""
    lines = ["# UNTESTED ON HARDWARE: built from bhyve(8), never run by rxl's authors.",
             "# as root on a FreeBSD host:"]
    lines += [shlex.join(c) for c in setup_commands(cfg)]
    lines.append(shlex.join(argv))
    lines += [shlex.join(c) for c in teardown_commands(cfg)]
    lines += ["# the tap reaches nothing by itself: bridge it to a host NIC on a LAN with DHCP,",
              f"#   ifconfig bridge0 create addm <host NIC> addm {cfg.tap} up",
              "# in the guest (its console is this terminal): sysrc ifconfig_vtnet0=DHCP "
              "sshd_enable=YES;",
              "#   PermitRootLogin prohibit-password in /etc/ssh/sshd_config; the line "
              "`rxl targets --key` prints",
              "#   in ~root/.ssh/authorized_keys; service netif restart; service sshd start;",
              "#   GUEST-ADDRESS is vtnet0's inet address (ifconfig vtnet0)",
              "# then: rxl run --target ssh://root@GUEST-ADDRESS",
              "# commit 1 (iflib spread) cannot be shown in bhyve: no multi-queue iflib NIC;",
              "# commits 2 to 4 are tested over loopback."]
    if numa_note:
        lines.append(f"# {numa_note}")
    return "\n".join(lines)
