"""rxl.guest.qemu: GuestConfig -> argv (pure)."""

import pytest

from rxl.guest.qemu import GuestConfig, QemuConfigError, build_argv, find_ovmf

FW = "/usr/share/OVMF/OVMF_CODE_4M.fd"


def _opt(argv, flag):
    """All values following ``flag`` in argv."""
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_two_socket_guest_topology_and_numa():
    argv = build_argv(GuestConfig(root_dir="/work/guest/root"), firmware=FW)
    assert argv[0] == "qemu-system-x86_64"
    assert _opt(argv, "-machine") == ["q35,accel=tcg"]
    assert _opt(argv, "-cpu") == ["Skylake-Server,-avx2"]
    assert _opt(argv, "-smp") == ["8,sockets=2,cores=2,threads=2"]
    assert _opt(argv, "-numa") == ["node,nodeid=0,cpus=0-3,memdev=ram0",
                                   "node,nodeid=1,cpus=4-7,memdev=ram1"]
    assert _opt(argv, "-object") == ["memory-backend-ram,id=ram0,size=512M",
                                     "memory-backend-ram,id=ram1,size=512M"]
    assert _opt(argv, "-m") == ["1024M"]


def test_firmware_root_disk_nic_serial():
    argv = build_argv(GuestConfig(root_dir="/r", hostfwd=("tcp::2222-:22",)), firmware=FW)
    drives = _opt(argv, "-drive")
    assert f"if=pflash,format=raw,readonly=on,file={FW}" in drives
    assert "if=none,id=root,format=raw,file=fat:/r,snapshot=on" in drives
    assert "ide-hd,drive=root,bus=ide.0" in _opt(argv, "-device")
    assert "e1000e,netdev=net0" in _opt(argv, "-device")
    assert _opt(argv, "-netdev") == ["user,id=net0,hostfwd=tcp::2222-:22"]
    assert _opt(argv, "-serial") == ["stdio"]
    assert "-no-reboot" in argv and "-nographic" in argv
    # the SSH guest reboots into an installed kernel inside the same QEMU
    assert "-no-reboot" not in build_argv(GuestConfig(root_dir="/r", no_reboot=False),
                                          firmware=FW)


def test_rw_fat_without_snapshot():
    argv = build_argv(GuestConfig(root_dir="/r", snapshot=False), firmware=FW)
    assert "if=none,id=root,format=raw,file=fat:rw:/r" in _opt(argv, "-drive")


def test_no_numa_and_readonly_fat_and_serial_file():
    cfg = GuestConfig(root_dir="/r", numa_nodes=0, root_rw=False, snapshot=False,
                      serial="file:/tmp/c.log", nics=())
    argv = build_argv(cfg, firmware=FW)
    assert "-numa" not in argv and "-netdev" not in argv
    assert "if=none,id=root,format=raw,file=fat:/r" in _opt(argv, "-drive")
    assert _opt(argv, "-serial") == ["file:/tmp/c.log"]


def test_config_is_frozen():
    cfg = GuestConfig(root_dir="/r")
    with pytest.raises(Exception):
        cfg.sockets = 4  # type: ignore[misc]
    assert cfg.vcpus == 8


@pytest.mark.parametrize("kw,msg", [
    (dict(sockets=0), "sockets"),
    (dict(numa_nodes=3), "does not divide"),
    (dict(memory_mib=200), "128 MiB"),
    (dict(memory_mib=1025), "evenly"),
    (dict(accel="hvf"), "accel"),
    (dict(nics=("rtl8139",)), "unknown NIC"),
    (dict(nics=(), hostfwd=("tcp::1-:2",)), "no NIC"),
    (dict(serial="pty"), "serial"),
    (dict(nic_numa_node=2), "not a NUMA node"),
    (dict(nic_numa_node=0, numa_nodes=0), "not a NUMA node"),
    (dict(nic_numa_node=True), "not a NUMA node"),
    (dict(nic_numa_node=0, nics=()), "no NIC"),
])
def test_bad_config_is_one_clear_error(kw, msg):
    args = dict(root_dir="/r")
    args.update(kw)
    with pytest.raises(QemuConfigError, match=msg):
        build_argv(GuestConfig(**args), firmware=FW)


def test_missing_firmware():
    with pytest.raises(QemuConfigError, match="OVMF"):
        build_argv(GuestConfig(root_dir="/r"))


def test_find_ovmf(tmp_path):
    fw = tmp_path / "OVMF.fd"
    assert find_ovmf([str(fw)]) is None
    fw.write_bytes(b"x")
    assert find_ovmf([str(tmp_path / "none"), str(fw)]) == str(fw)


def test_dies_in_smp_only_when_not_one():
    from rxl.guest.qemu import GuestConfig, build_argv
    one = build_argv(GuestConfig(root_dir="/r"), firmware="/fw")
    assert one[one.index("-smp") + 1] == "8,sockets=2,cores=2,threads=2"
    two = build_argv(GuestConfig(root_dir="/r", dies=2), firmware="/fw")
    assert two[two.index("-smp") + 1] == "16,sockets=2,dies=2,cores=2,threads=2"
    # NUMA nodes still take whole sockets: 8 vCPUs each
    assert "node,nodeid=1,cpus=8-15,memdev=ram1" in two


def test_nic_behind_a_numa_local_host_bridge():
    """The shape measured on QEMU 10.0.2 (docs/results/guest-numa.md): the first NIC
    behind its own pxb-pcie host bridge in node 0 (ACPI: PC80 with _PXM 0) and a
    root port; the SSH NIC stays on pcie.0 and carries hostfwd."""
    cfg = GuestConfig(root_dir="/r", dies=2, cores=4, memory_mib=2048, nics=("igb",),
                      mgmt_nic="virtio-net-pci", hostfwd=("tcp::2222-:22",), nic_numa_node=0)
    argv = build_argv(cfg, firmware=FW)
    assert _opt(argv, "-smp") == ["32,sockets=2,dies=2,cores=4,threads=2"]
    # dies: CPUID's max basic leaf stays Skylake-Server's 0xd (QEMU 10.0.2 aborts on 0x1f)
    assert _opt(argv, "-cpu") == ["Skylake-Server,level=0xd,-avx2"]
    assert _opt(argv, "-numa") == ["node,nodeid=0,cpus=0-15,memdev=ram0",
                                   "node,nodeid=1,cpus=16-31,memdev=ram1"]
    dev = _opt(argv, "-device")
    bridge = dev.index("pxb-pcie,id=pxb0,bus_nr=128,numa_node=0,bus=pcie.0")
    assert dev[bridge + 1] == "pcie-root-port,id=rp0,bus=pxb0,chassis=1"
    # without bus=, QEMU 10.0.2 puts it on pxb0: "Only PCI/PCIe bridges can be plugged"
    assert dev[bridge + 2:] == ["igb,netdev=net0,bus=rp0", "virtio-net-pci,netdev=net1,bus=pcie.0"]
    assert _opt(argv, "-netdev") == ["user,id=net0", "user,id=net1,hostfwd=tcp::2222-:22"]
    node1 = build_argv(GuestConfig(root_dir="/r", nics=("igb",), nic_numa_node=1), firmware=FW)
    assert "pxb-pcie,id=pxb0,bus_nr=128,numa_node=1,bus=pcie.0" in _opt(node1, "-device")
    # without it: no bridge, the NIC on pcie.0 (no _PXM: domain unknown)
    flat = build_argv(GuestConfig(root_dir="/r", nics=("igb",)), firmware=FW)
    assert not [d for d in _opt(flat, "-device") if d.startswith(("pxb", "pcie-root"))]
    assert "igb,netdev=net0" in _opt(flat, "-device")


def test_data_dirs_come_first():
    """A QEMU unpacked with dpkg -x (the 7.2 fallback's recorded boot) needs -L."""
    argv = build_argv(GuestConfig(root_dir="/r", qemu="/q72/usr/bin/qemu-system-x86_64",
                                  data_dirs=("/q72/usr/share/qemu", "/usr/lib/ipxe/qemu")),
                      firmware=FW)
    assert argv[:5] == ["/q72/usr/bin/qemu-system-x86_64", "-L", "/q72/usr/share/qemu",
                        "-L", "/usr/lib/ipxe/qemu"]


def test_required_qemu_is_the_newest_nic_model():
    from rxl.guest.qemu import NIC_DRIVERS, NIC_MODELS, check_qemu, required_qemu
    assert required_qemu(GuestConfig(root_dir="/r")) == (7, 2)
    igb = GuestConfig(root_dir="/r", nics=("igb",), mgmt_nic="virtio-net-pci")
    assert required_qemu(igb) == (8, 0)
    assert required_qemu(GuestConfig(root_dir="/r", mgmt_nic="igb")) == (8, 0)
    check_qemu(igb, (10, 0))
    check_qemu(igb, (8, 0))
    check_qemu(igb, None)          # unknown: nothing refused here (rxl doctor says it)
    with pytest.raises(QemuConfigError) as e:
        check_qemu(igb, (7, 2), shape="numa", advice="run: rxl doctor --install")
    assert str(e.value) == ("guest shape 'numa' needs QEMU >= 8.0 (its igb NIC); this host "
                            "has 7.2: run: rxl doctor --install")
    assert "\n" not in str(e.value)
    assert set(NIC_DRIVERS) == set(NIC_MODELS) and NIC_DRIVERS["igb"] == "igb"


def test_installed_version_reads_qemus_own_line():
    from rxl.guest.qemu import installed_version

    class CP:
        def __init__(self, stdout):
            self.stdout = stdout
    assert installed_version(run=lambda *a, **k: CP(
        "QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)\n")) == (10, 0)
    assert installed_version(run=lambda *a, **k: CP(
        "QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18)\n")) == (7, 2)
    assert installed_version(run=lambda *a, **k: CP("qemu 7.2\n")) is None

    def missing(*a, **k):
        raise FileNotFoundError(2, "No such file or directory")
    assert installed_version(run=missing) is None


def test_cpu_level_only_for_dies_and_never_twice():
    from rxl.guest.qemu import cpu_arg
    kvm = dict(root_dir="/r", accel="kvm")
    assert cpu_arg(GuestConfig(**kvm)) == "Skylake-Server"
    assert cpu_arg(GuestConfig(dies=2, **kvm)) == "Skylake-Server,level=0xd"
    assert cpu_arg(GuestConfig(dies=2, cpu_model="Icelake-Server,level=0x1b", **kvm)
                   ) == "Icelake-Server,level=0x1b"


def test_tcg_guest_is_not_shown_avx2_unless_the_model_names_it():
    """TCG's 32-byte load of vinserti128's m128 operand killed the guest's sshd
    (run-15.md): a TCG guest gets -avx2, a KVM guest its model's CPUID, and a
    model that says avx2 itself (either way) is left as written."""
    from rxl.guest.qemu import cpu_arg
    assert cpu_arg(GuestConfig(root_dir="/r")) == "Skylake-Server,-avx2"
    assert cpu_arg(GuestConfig(root_dir="/r", dies=2)) == "Skylake-Server,level=0xd,-avx2"
    assert cpu_arg(GuestConfig(root_dir="/r", cpu_model="Skylake-Server,+avx2")
                   ) == "Skylake-Server,+avx2"
    assert cpu_arg(GuestConfig(root_dir="/r", accel="kvm")) == "Skylake-Server"


def test_only_qemu72s_e1000e_needs_the_rig_patch():
    """The em(4) rig change of patches/guest/: the link vector storm was measured
    on QEMU 7.2.22's e1000e and not on 10.0.2's; igb never needs it; an e1000e
    under an unknown QEMU is taken as an old one."""
    from rxl.guest.qemu import needs_rig_patch
    e1000e, igb = GuestConfig(root_dir="/r"), GuestConfig(root_dir="/r", nics=("igb",))
    assert needs_rig_patch(e1000e, (7, 2)) and needs_rig_patch(e1000e, (9, 2))
    assert needs_rig_patch(e1000e, None)
    assert not needs_rig_patch(e1000e, (10, 0)) and not needs_rig_patch(e1000e, (11, 1))
    assert not needs_rig_patch(igb, (8, 0)) and not needs_rig_patch(igb, None)
    assert not needs_rig_patch(GuestConfig(root_dir="/r", nics=()), None)
