"""rxl.guest.sshguest: the own guest's sshd pieces (content only; not yet booted)."""

import socket

import pytest

from rxl.guest import sshguest as G


def test_sshd_config_key_only_root():
    text = G.sshd_config()
    lines = set(text.splitlines())
    assert {"PermitRootLogin prohibit-password", "PasswordAuthentication no", "UsePAM no",
            "HostKey /etc/ssh/ssh_host_ed25519_key"} <= lines


def test_image_files_and_passwd():
    files = G.image_files("ssh-ed25519 HOST", "ssh-ed25519 CLIENT rxl@h\n")
    assert files["etc/ssh/authorized_keys/root"] == "ssh-ed25519 CLIENT rxl@h\n"
    mp = files["etc/master.passwd"].splitlines()
    # master.passwd has 10 colon-separated fields (passwd(5))
    assert all(len(line.split(":")) == 10 for line in mp)
    assert mp[1].split(":")[2] == "22" and mp[1].split(":")[8] == "/var/empty"


def test_rc_lines_order():
    lines = G.rc_lines("em0")
    # the key's mode is set on the tmpfs copy, and pwd.db is made, before sshd starts
    idx = {k: next(i for i, ln in enumerate(lines) if k in ln)
           for k in ("mount -t tmpfs tmpfs /etc", "chmod 600", "pwd_mkdb", "/usr/sbin/sshd")}
    assert idx["mount -t tmpfs tmpfs /etc"] < idx["chmod 600"] < idx["/usr/sbin/sshd"]
    assert idx["pwd_mkdb"] < idx["/usr/sbin/sshd"]
    assert "ifconfig em0 inet 10.0.2.15/24 up" in lines
    assert lines[0].startswith("mount -u -o rw / ")  # --install-kernel writes /boot
    # the default is the SSH NIC of its own; sshd logs to the serial console, after
    # the wait for the link
    lines = G.rc_lines()
    assert "ifconfig vtnet0 inet 10.0.2.15/24 up" in lines and not any("em0" in l for l in lines)
    wait = next(i for i, ln in enumerate(lines) if "status: active" in ln)
    assert wait < next(i for i, ln in enumerate(lines) if "sshd -E /dev/console" in ln)


def test_mgmt_nic_carries_hostfwd_and_leaves_em0_alone():
    """The SSH guest's QEMU: e1000e first (em0, the tests' RX queues, no forward),
    then the virtio NIC with the hostfwd (vtnet0)."""
    from rxl.guest import qemu
    cfg = qemu.GuestConfig(root_dir="/r", hostfwd=(G.hostfwd(2222),),
                           mgmt_nic=G.MGMT_NIC_MODEL)
    argv = qemu.build_argv(cfg, firmware="/fw")
    nets = [argv[i + 1] for i, a in enumerate(argv) if a in ("-netdev", "-device")
            and "net" in argv[i + 1] and "ide" not in argv[i + 1]]
    assert nets == ["user,id=net0", "e1000e,netdev=net0",
                    "user,id=net1,hostfwd=tcp:127.0.0.1:2222-:22",
                    "virtio-net-pci,netdev=net1"]
    # without it the first NIC carries the forward, as rxl learn uses it
    plain = qemu.build_argv(qemu.GuestConfig(root_dir="/r", hostfwd=("tcp::1-:2",)),
                            firmware="/fw")
    assert "user,id=net0,hostfwd=tcp::1-:2" in plain and "virtio-net-pci,netdev=net1" not in plain
    with pytest.raises(qemu.QemuConfigError):
        qemu.build_argv(qemu.GuestConfig(root_dir="/r", mgmt_nic="rtl8139"), firmware="/fw")


def test_free_port_and_hostfwd():
    p = G.free_port()
    s = socket.socket()
    s.bind(("127.0.0.1", p))  # free indeed
    s.close()
    assert G.hostfwd(p) == f"tcp:127.0.0.1:{p}-:22"
    with pytest.raises(ValueError):
        G.hostfwd(0)


def test_stage_ssh_writes_a_loadable_host_key(tmp_path):
    import paramiko

    from rxl.guest.ssh import key_from_line
    line = G.stage_ssh(str(tmp_path), "ssh-ed25519 CLIENT rxl@h")
    k = paramiko.Ed25519Key.from_private_key_file(str(tmp_path / "etc/ssh/ssh_host_ed25519_key"))
    assert key_from_line(line) == k
    assert (tmp_path / "etc/ssh/ssh_host_ed25519_key.pub").read_text().strip() == line
    assert (tmp_path / "etc/ssh/authorized_keys/root").read_text() == "ssh-ed25519 CLIENT rxl@h\n"
    assert "UsePAM no" in (tmp_path / "etc/ssh/sshd_config").read_text()
    assert G.stage_ssh(str(tmp_path), "x") != line  # a new key per staging


def test_loader_conf_for_the_lua_loader():
    text = G.loader_conf({"dev.em.0.iflib.core_spread": "1"})
    lines = text.splitlines()
    assert 'vfs.root.mountfrom="msdosfs:/dev/ada0s1"' in lines
    assert 'beastie_disable="YES"' in lines and 'autoboot_delay="-1"' in lines
    assert lines[-1] == 'dev.em.0.iflib.core_spread="1"'
    with pytest.raises(ValueError, match="no quote"):
        G.loader_conf({"a": 'x"y'})


def test_boot_files_from_the_tree(tmp_path):
    with pytest.raises(FileNotFoundError, match="stand/lua/loader.lua"):
        G.boot_files(str(tmp_path))
    for rel in ("stand/lua/loader.lua", "stand/lua/config.lua", "stand/defaults/loader.conf",
                "sbin/reboot/nextboot.sh"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    files = G.boot_files(str(tmp_path))
    assert files["boot/lua/config.lua"] == str(tmp_path / "stand/lua/config.lua")
    assert files["sbin/nextboot"] == str(tmp_path / "sbin/reboot/nextboot.sh")
    assert files["boot/defaults/loader.conf"].endswith("stand/defaults/loader.conf")
    (tmp_path / "sbin/reboot/nextboot.sh").unlink()
    with pytest.raises(FileNotFoundError, match="nextboot.sh"):
        G.boot_files(str(tmp_path))
    # 15.0: no nextboot.sh; reboot(8) is nextboot(8) by its name
    reboot = tmp_path / "obj/sbin/reboot/reboot"
    reboot.parent.mkdir(parents=True)
    reboot.write_text("elf")
    assert G.boot_files(str(tmp_path), str(reboot))["sbin/nextboot"] == str(reboot)
    with pytest.raises(FileNotFoundError, match="obj/sbin/reboot/reboot"):
        G.boot_files(str(tmp_path), str(reboot) + "-absent")
