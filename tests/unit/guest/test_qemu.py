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
    assert _opt(argv, "-cpu") == ["Skylake-Server"]
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
    (dict(root_dir="/a,b"), "comma"),
    (dict(serial="pty"), "serial"),
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
