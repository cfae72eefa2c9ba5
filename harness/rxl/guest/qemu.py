"""QEMU guest configuration -> argv, as one pure function.

The guest is a q35 PC booted by OVMF (UEFI) from a root directory that QEMU
presents as a FAT disk (``vvfat``) on the chipset's AHCI controller, so
FreeBSD sees it as ``ada0`` and mounts ``/dev/ada0s1`` (msdosfs) as root.
The kernel is not passed to QEMU: the loader in the root directory
(``efi/boot/BOOTx64.EFI``) loads ``/boot/kernel/kernel`` from the same disk
(see :mod:`rxl.guest.image`).

Topology: ``-smp`` with sockets x dies x cores x threads, and, when
``numa_nodes`` is non-zero, one ``-numa node`` per group of sockets with its
own RAM backend.  QEMU describes one L3 cache per die (CPUID leaf 4), so
``dies=2`` gives every socket two L3 groups in FreeBSD's topology (the
built-in ``guest-2l3`` target of :mod:`rxl.guest.targets`).
``-cpu Skylake-Server`` is the default because ``qemu64`` hides SMT from
FreeBSD's topology detection (measured, docs/results/guest-boot.md).

Accelerator: TCG. KVM fails on the machines this was written on,
so ``tcg`` is the default; ``kvm`` is accepted but never chosen silently.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from rxl.errors import DataError

#: Debian's ``ovmf`` package paths, newest layout first; the 4M build is the
#: one Debian 12 ships as the default ``OVMF_CODE`` (package ovmf 2022.11).
OVMF_CANDIDATES: Tuple[str, ...] = (
    "/usr/share/OVMF/OVMF_CODE_4M.fd",
    "/usr/share/OVMF/OVMF_CODE.fd",
    "/usr/share/ovmf/OVMF.fd",
    "/usr/share/qemu/OVMF.fd",
)

#: NIC models FreeBSD drives with iflib (``em``) and that QEMU 7.2 offers.
#: ``e1000e`` (82574L) attaches as ``em0`` with two RX queues under MSI-X.
NIC_MODELS = ("e1000e", "e1000", "igb", "virtio-net-pci")

ACCELS = ("tcg", "kvm")


class QemuConfigError(DataError):
    """A guest configuration that cannot produce a valid QEMU command line."""


@dataclass(frozen=True)
class GuestConfig:
    """One guest, as QEMU should build it.

    Fields (units in the names):
      sockets, dies, cores, threads: CPU topology; vCPUs = product (each
        >= 1); ``dies`` appears in ``-smp`` only when it is not 1.
      numa_nodes: 0 for no ``-numa`` options, else a divisor of ``sockets``;
        each node gets ``sockets // numa_nodes`` whole sockets and an equal
        share of ``memory_mib``.
      memory_mib: guest RAM in MiB (>= 128 per NUMA node).
      cpu_model: QEMU ``-cpu`` value.
      nics: one NIC model per NIC, from :data:`NIC_MODELS`; user-mode
        networking, the first NIC carries ``hostfwd``.
      hostfwd: ``"tcp::2222-:22"`` style rules for the first NIC (or ``mgmt_nic``).
      mgmt_nic: a NIC model from :data:`NIC_MODELS` added after ``nics`` for the
        SSH transport alone; it carries ``hostfwd``, so the first NIC (em0, whose
        two RX queues the tests read) is never brought up: QEMU 7.2's e1000e storms
        em(4)'s MSI-X link vector once it is (docs/results/learning.md, ssh.md).
      root_dir: host directory served as the FAT root disk (required).
      snapshot: guest writes go to a temporary overlay; the host directory
        is never written (default). Takes precedence over ``root_rw``.
      root_rw: without ``snapshot``, ``fat:rw:`` (guest writes reach the host
        directory); false: a read-only disk.
      firmware: OVMF code image; ``None`` means :func:`find_ovmf`.
      accel: ``tcg`` (default) or ``kvm``.
      serial: ``"stdio"`` or ``"file:PATH"`` (QEMU chardev syntax).
      qemu: the QEMU binary.
      no_reboot: ``-no-reboot`` (a guest reset stops QEMU: the serial run's
        guests power off once); false for a guest that reboots into another
        kernel (the SSH guest's ``--install-kernel``), whose snapshot overlay
        lives as long as the QEMU process.
    """

    root_dir: str
    sockets: int = 2
    dies: int = 1
    cores: int = 2
    threads: int = 2
    numa_nodes: int = 2
    memory_mib: int = 1024
    cpu_model: str = "Skylake-Server"
    nics: Tuple[str, ...] = ("e1000e",)
    hostfwd: Tuple[str, ...] = ()
    mgmt_nic: str = ""
    root_rw: bool = True
    snapshot: bool = True
    firmware: Optional[str] = None
    accel: str = "tcg"
    serial: str = "stdio"
    qemu: str = "qemu-system-x86_64"
    no_reboot: bool = True
    extra: Tuple[str, ...] = field(default=())

    @property
    def vcpus(self) -> int:
        """Number of vCPUs: sockets * dies * cores * threads."""
        return self.sockets * self.dies * self.cores * self.threads


def find_ovmf(candidates: Sequence[str] = OVMF_CANDIDATES) -> Optional[str]:
    """Return the first readable OVMF code image among ``candidates``, or None."""
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.R_OK):
            return path
    return None


def validate(cfg: GuestConfig) -> None:
    """Check ``cfg`` as :func:`build_argv` does, without building anything.

    Raises :class:`QemuConfigError` with a one-line message; callers use it
    to refuse a bad guest before any build or checkout.
    """
    for name in ("sockets", "dies", "cores", "threads"):
        value = getattr(cfg, name)
        if not isinstance(value, int) or value < 1:
            raise QemuConfigError(f"{name} must be a positive integer, got {value!r}")
    if not isinstance(cfg.numa_nodes, int) or cfg.numa_nodes < 0:
        raise QemuConfigError(f"numa_nodes must be >= 0, got {cfg.numa_nodes!r}")
    if cfg.numa_nodes and cfg.sockets % cfg.numa_nodes:
        raise QemuConfigError(
            f"numa_nodes={cfg.numa_nodes} does not divide sockets={cfg.sockets}")
    nodes = max(cfg.numa_nodes, 1)
    if cfg.memory_mib < 128 * nodes:
        raise QemuConfigError(
            f"memory_mib={cfg.memory_mib} is below 128 MiB per NUMA node ({nodes} nodes)")
    if cfg.numa_nodes and cfg.memory_mib % nodes:
        raise QemuConfigError(
            f"memory_mib={cfg.memory_mib} does not split evenly over {nodes} NUMA nodes")
    if cfg.accel not in ACCELS:
        raise QemuConfigError(f"accel must be one of {ACCELS}, got {cfg.accel!r}")
    if not cfg.nics and not cfg.mgmt_nic and cfg.hostfwd:
        raise QemuConfigError("hostfwd given but the guest has no NIC")
    for model in cfg.nics + ((cfg.mgmt_nic,) if cfg.mgmt_nic else ()):
        if model not in NIC_MODELS:
            raise QemuConfigError(f"unknown NIC model {model!r}; one of {NIC_MODELS}")
    if not cfg.root_dir:
        raise QemuConfigError("root_dir is required (the staged guest root)")
    if "," in cfg.root_dir:
        raise QemuConfigError(f"root_dir may not contain a comma: {cfg.root_dir!r}")
    if not (cfg.serial == "stdio" or cfg.serial.startswith("file:")):
        raise QemuConfigError(f"serial must be 'stdio' or 'file:PATH', got {cfg.serial!r}")


def build_argv(cfg: GuestConfig, firmware: Optional[str] = None) -> list:
    """Build the QEMU argv (a list of str) for ``cfg``. Pure: no I/O.

    ``firmware`` overrides ``cfg.firmware``; one of them must be set (callers
    resolve it with :func:`find_ovmf`). Raises :class:`QemuConfigError` with a
    one-line message on an invalid configuration.
    """
    validate(cfg)
    fw = firmware or cfg.firmware
    if not fw:
        raise QemuConfigError("no OVMF firmware: install the 'ovmf' package or set firmware")

    argv = [
        cfg.qemu,
        "-machine", f"q35,accel={cfg.accel}",
        "-cpu", cfg.cpu_model,
        "-smp", f"{cfg.vcpus},sockets={cfg.sockets}"
                + (f",dies={cfg.dies}" if cfg.dies != 1 else "")
                + f",cores={cfg.cores},threads={cfg.threads}",
        "-m", f"{cfg.memory_mib}M",
    ]
    if cfg.numa_nodes:
        per_node_mib = cfg.memory_mib // cfg.numa_nodes
        cpus_per_node = cfg.vcpus // cfg.numa_nodes
        for node in range(cfg.numa_nodes):
            first = node * cpus_per_node
            last = first + cpus_per_node - 1
            argv += [
                "-object", f"memory-backend-ram,id=ram{node},size={per_node_mib}M",
                "-numa", f"node,nodeid={node},cpus={first}-{last},memdev=ram{node}",
            ]
    argv += [
        "-drive", f"if=pflash,format=raw,readonly=on,file={fw}",
        "-nodefaults", "-nographic", "-vga", "none", "-monitor", "none",
        "-serial", cfg.serial,
    ]
    # QEMU 7.2 refuses fat:rw: under snapshot=on ("Unable to set VVFAT to 'rw'
    # when drive is read-only"); a snapshot overlay is writable anyway.
    if cfg.snapshot:
        drive = f"if=none,id=root,format=raw,file=fat:{cfg.root_dir},snapshot=on"
    elif cfg.root_rw:
        drive = f"if=none,id=root,format=raw,file=fat:rw:{cfg.root_dir}"
    else:
        drive = f"if=none,id=root,format=raw,file=fat:{cfg.root_dir}"
    # q35's ICH9 AHCI controller exposes buses ide.0..ide.5; port 0 -> ada0.
    argv += ["-drive", drive, "-device", "ide-hd,drive=root,bus=ide.0"]
    nics = cfg.nics + ((cfg.mgmt_nic,) if cfg.mgmt_nic else ())
    fwd = len(nics) - 1 if cfg.mgmt_nic else 0
    for i, model in enumerate(nics):
        netdev = f"user,id=net{i}"
        if i == fwd:
            for rule in cfg.hostfwd:
                netdev += f",hostfwd={rule}"
        argv += ["-netdev", netdev, "-device", f"{model},netdev=net{i}"]
    if cfg.no_reboot:
        argv += ["-no-reboot"]
    argv += list(cfg.extra)
    return argv


def launch(argv: List[str], qemu_log: str) -> subprocess.Popen:
    """Start QEMU ``argv`` in its own session, its stdout and stderr to ``qemu_log``."""
    Path(qemu_log).parent.mkdir(parents=True, exist_ok=True)
    with open(qemu_log, "wb") as qlog:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=qlog,
                                stderr=subprocess.STDOUT, start_new_session=True)


def stop(proc: subprocess.Popen) -> None:
    """Stop a QEMU :func:`launch` started: SIGTERM, SIGKILL after 10 s; reaped."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
