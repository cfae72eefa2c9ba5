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

NIC placement: by default every NIC sits on q35's root bus ``pcie.0``, whose
ACPI host bridge ``PCI0`` has no ``_PXM``, so FreeBSD does not know the
NIC's NUMA domain. With ``nic_numa_node`` the first NIC sits behind its
own host bridge instead: a ``pxb-pcie`` expander with that ``numa_node``
(QEMU's ACPI tables give the bridge ``Name (_PXM, N)``) and a
``pcie-root-port`` on it. FreeBSD's ``acpi_get_cpus()`` then ANDs the
NIC's interrupt CPUs with that domain and ``dev.<nic>.0.%domain`` reports
it (measured with QEMU 10.0.2, docs/results/guest-numa.md).

QEMU 10.0.2 aborts (``encode_topo_cpuid1f`` assertion) when a ``dies > 1``
guest with an Intel CPU model asks CPUID leaf 0x1f for a sub-leaf past its
levels, which SeaBIOS and FreeBSD 15's kernel both do; :func:`cpu_arg` keeps
the leaf out of reach (:data:`DIES_CPUID_LEVEL`).

Accelerator: TCG. KVM fails on the machines this was written on,
so ``tcg`` is the default; ``kvm`` is accepted but never chosen silently.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from rxl.errors import DataError

#: Debian's ``ovmf`` package paths, newest layout first; the 4M build is the
#: one Debian 12 ships as the default ``OVMF_CODE`` (package ovmf 2022.11).
OVMF_CANDIDATES: Tuple[str, ...] = (
    "/usr/share/OVMF/OVMF_CODE_4M.fd",
    "/usr/share/OVMF/OVMF_CODE.fd",
    "/usr/share/ovmf/OVMF.fd",
    "/usr/share/qemu/OVMF.fd",
)

#: NIC models of the guest. ``e1000e`` (82574L) attaches as ``em0`` with two
#: RX queues under MSI-X; ``igb`` (82576) as ``igb0`` with up to 8
#: (``em_set_num_queues()`` in FreeBSD's sys/dev/e1000/if_em.c), at most one
#: per interrupt CPU; ``e1000`` as ``em0`` (lem, one queue); ``virtio-net-pci``
#: as ``vtnet0``, which is not an iflib driver (the SSH NIC: it shares no
#: iflib CPU offset with the NIC under test).
NIC_MODELS = ("e1000e", "e1000", "igb", "virtio-net-pci")
#: The NIC models a NIC under test may be (a shape's ``nic``): the iflib ones,
#: whose driver has the ``dev.<driver>.0.iflib.core_spread`` tunable and the
#: ``iflib.rxq<N>.cpu`` sysctls the series' commit 1 and the placement rows
#: need; vtnet(4) has neither (the SSH NIC alone is virtio).
IFLIB_NIC_MODELS = tuple(m for m in NIC_MODELS if m != "virtio-net-pci")

#: The oldest QEMU with each NIC model: igb appeared in QEMU 8.0 (its
#: changelog, "New igb device"); the others are older than QEMU 7.2, the
#: oldest QEMU the harness runs (Debian 12's).
NIC_MIN_QEMU: Dict[str, Tuple[int, int]] = {
    "e1000e": (7, 2), "e1000": (7, 2), "igb": (8, 0), "virtio-net-pci": (7, 2)}

#: The FreeBSD driver of each NIC model (the ``dev.<driver>.<unit>`` sysctl
#: node): igb(4) for the 82576, em(4) for e1000e and e1000, vtnet(4).
NIC_DRIVERS: Dict[str, str] = {
    "e1000e": "em", "e1000": "em", "igb": "igb", "virtio-net-pci": "vtnet"}

#: NIC models whose emulation needs the rig's driver change (patches/guest/, not
#: the series) in QEMUs older than the version given: QEMU 7.2's e1000e does not
#: clear ICR on a read under MSI-X, and em(4)'s link vector storms (783,255 link
#: interrupts in 95 s on 7.2.22, the NIC never up); QEMU 10.0.2's clears it (5
#: in 30 s, link up); igb needs nothing (docs/results/guest-numa.md). The
#: versions between were not measured and count as needing it.
RIG_PATCH_BELOW: Dict[str, Tuple[int, int]] = {"e1000e": (10, 0)}

#: First bus number of the NIC's expander bridge (``pxb-pcie`` ``bus_nr``):
#: buses 0-127 stay ``pcie.0``'s; the root port behind it takes 129.
PXB_BUS_NR = 128

ACCELS = ("tcg", "kvm")


class QemuConfigError(DataError):
    """A guest configuration that cannot produce a valid QEMU command line."""


class QemuMemoryError(QemuConfigError):
    """A ``memory_mib`` the guest cannot have. ``str()`` is ``memory_mib=M:
    why``; ``why`` alone names M, for a command to say of its ``--memory``."""

    def __init__(self, mib: int, why: str):
        super().__init__(f"memory_mib={mib}: {why}")
        self.why = why


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
      nic_numa_node: None: every NIC on ``pcie.0`` (no ``_PXM``: the NIC's
        domain is unknown to the guest); N (0 <= N < numa_nodes): the first
        NIC behind a ``pxb-pcie`` bridge with ``numa_node=N`` (``_PXM`` N).
      data_dirs: extra QEMU data directories (``-L DIR`` each, before QEMU's
        own), for a QEMU unpacked outside its install prefix.
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
    nic_numa_node: Optional[int] = None
    data_dirs: Tuple[str, ...] = ()
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
    m = cfg.memory_mib
    if m < 1:  # no share to speak of ("-0.5 MiB per node")
        raise QemuMemoryError(m, f"{m} MiB: not a memory size, below 128 MiB per "
                                 f"NUMA node (at least {128 * nodes} MiB)")
    if m < 128 * nodes:  # the per-node share is what is below, not the total
        share = (f"{m} MiB over {nodes} NUMA nodes is {m / nodes:g} MiB per node, below"
                 if nodes > 1 else f"{m} MiB (one NUMA node) is below")
        raise QemuMemoryError(m, f"{share} 128 MiB per NUMA node (at least "
                                 f"{128 * nodes} MiB)")
    if cfg.numa_nodes and m % nodes:
        raise QemuMemoryError(m, f"{m} MiB does not split evenly over {nodes} NUMA nodes")
    if cfg.accel not in ACCELS:
        raise QemuConfigError(f"accel must be one of {ACCELS}, got {cfg.accel!r}")
    if not cfg.nics and not cfg.mgmt_nic and cfg.hostfwd:
        raise QemuConfigError("hostfwd given but the guest has no NIC")
    for model in cfg.nics + ((cfg.mgmt_nic,) if cfg.mgmt_nic else ()):
        if model not in NIC_MODELS:
            raise QemuConfigError(f"unknown NIC model {model!r}; one of {NIC_MODELS}")
    if cfg.nic_numa_node is not None:
        if not cfg.nics:
            raise QemuConfigError("nic_numa_node given but the guest has no NIC")
        if not isinstance(cfg.nic_numa_node, int) or isinstance(cfg.nic_numa_node, bool) \
                or not 0 <= cfg.nic_numa_node < max(cfg.numa_nodes, 1) or not cfg.numa_nodes:
            raise QemuConfigError(
                f"nic_numa_node={cfg.nic_numa_node!r} is not a NUMA node of the guest "
                f"(numa_nodes={cfg.numa_nodes})")
    if not cfg.root_dir:
        raise QemuConfigError("root_dir is required (the staged guest root)")
    if not (cfg.serial == "stdio" or cfg.serial.startswith("file:")):
        raise QemuConfigError(f"serial must be 'stdio' or 'file:PATH', got {cfg.serial!r}")


def required_qemu(cfg: GuestConfig) -> Tuple[int, int]:
    """The oldest QEMU (major, minor) that can run ``cfg``: the newest of its
    NIC models' :data:`NIC_MIN_QEMU`. Pure."""
    models = cfg.nics + ((cfg.mgmt_nic,) if cfg.mgmt_nic else ())
    return max([NIC_MIN_QEMU.get(m, (7, 2)) for m in models] + [(7, 2)])


def check_qemu(cfg: GuestConfig, version: Optional[Tuple[int, int]], *, shape: str = "",
               advice: str = "") -> None:
    """Refuse ``cfg`` when the installed QEMU ``version`` (None: unknown, then
    nothing is refused) is older than :func:`required_qemu`. Raises
    :class:`QemuConfigError`, one line naming the shape, what needs the newer
    QEMU and ``advice`` (what to do)."""
    need = required_qemu(cfg)
    if version is None or tuple(version) >= need:
        return
    models = cfg.nics + ((cfg.mgmt_nic,) if cfg.mgmt_nic else ())
    why = ", ".join(sorted({m for m in models if NIC_MIN_QEMU.get(m, (7, 2)) > tuple(version)}))
    name = f"guest shape {shape!r}" if shape else "the guest"
    raise QemuConfigError(
        f"{name} needs QEMU >= {need[0]}.{need[1]} (its {why} NIC); this host has "
        f"{version[0]}.{version[1]}" + (f": {advice}" if advice else ""))


def needs_rig_patch(cfg: GuestConfig, version: Optional[Tuple[int, int]]) -> bool:
    """Whether the first NIC of ``cfg`` (the NIC under test) needs the rig's driver
    change under QEMU ``version`` (:data:`RIG_PATCH_BELOW`; None, unknown: the
    version is assumed old). Pure."""
    below = RIG_PATCH_BELOW.get(cfg.nics[0]) if cfg.nics else None
    return below is not None and (version is None or tuple(version) < below)


_VERSION = re.compile(r"QEMU emulator version (\d+)\.(\d+)")


def installed_version(binary: str = "qemu-system-x86_64",
                      run: Callable[..., subprocess.CompletedProcess] = subprocess.run
                      ) -> Optional[Tuple[int, int]]:
    """(major, minor) of ``binary --version`` (``QEMU emulator version 10.0.2 (Debian
    ...)``: (10, 0)); None when it does not run or says something else."""
    try:
        cp = run([binary, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    m = _VERSION.search(cp.stdout or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


#: CPUID's highest basic leaf for a guest with dies (``level``): Skylake-Server's own
#: (0xd). With ``dies > 1`` QEMU raises it to 0x1f, and QEMU 10.0.2 aborts
#: (``encode_topo_cpuid1f``: ``count <= CPU_TOPOLOGY_LEVEL_SOCKET``) when a guest asks
#: leaf 0x1f for a sub-leaf past the last level: SeaBIOS does at once, FreeBSD 15's
#: GENERIC right after the loader starts it (measured, docs/results/guest-numa.md).
#: Without leaf 0x1f FreeBSD reads the same topology from leaves 0xb and 4 (its
#: topology_spec is unchanged: two L3 groups per socket).
DIES_CPUID_LEVEL = 0xd


#: The CPUID feature a TCG guest is not shown (``-avx2``). QEMU 10.0.2's TCG runs
#: a 256-bit ``vinserti128`` with a memory operand as a 32-byte load, so an
#: operand in the last 16 bytes of a mapped page faults: the 15.0 guest's sshd
#: died with SIGSEGV in libcrypto's ``sha512_block_data_order`` AVX2 path at a
#: page's first byte, and ran with ``OPENSSL_ia32cap=0:0`` (measured,
#: docs/results/run-15.md). Without AVX2, OpenSSL and libc take their SSE paths.
TCG_HIDDEN_FEATURES = ("avx2",)


def cpu_arg(cfg: GuestConfig) -> str:
    """``-cpu``'s value: ``cfg.cpu_model``, with ``level=`` :data:`DIES_CPUID_LEVEL`
    added when the guest has dies and the model names no level, and under TCG
    each of :data:`TCG_HIDDEN_FEATURES` the model does not name turned off
    (``,-avx2``). Pure."""
    arg = cfg.cpu_model
    if cfg.dies > 1 and "level=" not in arg:
        arg += f",level={DIES_CPUID_LEVEL:#x}"
    if cfg.accel == "tcg":
        for feature in TCG_HIDDEN_FEATURES:
            if feature not in arg:
                arg += f",-{feature}"
    return arg


def opt_value(text: str) -> str:
    """``text`` as the value of a QEMU option (``file=...`` of ``-drive`` or
    ``-object``): each comma doubled, QEMU's escape of one; a single comma
    would end the value and make the rest a key ("Invalid parameter"), so a
    guest root, an output or a work root with a comma in its path would fail
    at boot (QEMU unescapes ``fat:/a,,b`` to the directory ``/a,b``)."""
    return text.replace(",", ",,")


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

    argv = [cfg.qemu]
    for d in cfg.data_dirs:
        argv += ["-L", d]
    argv += [
        "-machine", f"q35,accel={cfg.accel}",
        "-cpu", cpu_arg(cfg),
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
        "-drive", f"if=pflash,format=raw,readonly=on,file={opt_value(fw)}",
        "-nodefaults", "-nographic", "-vga", "none", "-monitor", "none",
        "-serial", cfg.serial,
    ]
    # QEMU 7.2 refuses fat:rw: under snapshot=on ("Unable to set VVFAT to 'rw'
    # when drive is read-only"); a snapshot overlay is writable anyway.
    root = opt_value(cfg.root_dir)
    if cfg.snapshot:
        drive = f"if=none,id=root,format=raw,file=fat:{root},snapshot=on"
    elif cfg.root_rw:
        drive = f"if=none,id=root,format=raw,file=fat:rw:{root}"
    else:
        drive = f"if=none,id=root,format=raw,file=fat:{root}"
    # q35's ICH9 AHCI controller exposes buses ide.0..ide.5; port 0 -> ada0.
    argv += ["-drive", drive, "-device", "ide-hd,drive=root,bus=ide.0"]
    nics = cfg.nics + ((cfg.mgmt_nic,) if cfg.mgmt_nic else ())
    fwd = len(nics) - 1 if cfg.mgmt_nic else 0
    if cfg.nic_numa_node is not None:
        # Its own host bridge in the NIC's node, and a root port for the NIC.
        argv += ["-device", f"pxb-pcie,id=pxb0,bus_nr={PXB_BUS_NR},"
                            f"numa_node={cfg.nic_numa_node},bus=pcie.0",
                 "-device", "pcie-root-port,id=rp0,bus=pxb0,chassis=1"]
    for i, model in enumerate(nics):
        netdev = f"user,id=net{i}"
        if i == fwd:
            for rule in cfg.hostfwd:
                netdev += f",hostfwd={rule}"
        # With an expander, QEMU would put a NIC without bus= on the expander's
        # bus, which takes bridges only: the others go on the root complex.
        bus = ("" if cfg.nic_numa_node is None else ",bus=rp0" if i == 0
               else ",bus=pcie.0")
        argv += ["-netdev", netdev, "-device", f"{model},netdev=net{i}{bus}"]
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
