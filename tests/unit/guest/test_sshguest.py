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


def _digest(data: bytes) -> str:
    import hashlib
    return hashlib.sha256(data).hexdigest()


def test_rc_runs_the_diagnostics_only_when_sshd_fails():
    d = {"/usr/sbin/sshd": "a" * 64, "/lib/libcrypto.so.35": "b" * 64}
    lines = G.rc_lines(digests=d)
    start = next(ln for ln in lines if ln.startswith("/usr/sbin/sshd -E /dev/console"))
    # sh: `a && b || { c; d; }` runs c and d only when a fails ($? is still a's status)
    assert start.endswith('|| { first=$?; echo "$M NOTE sshd exited ($first) at start"; '
                          'sshd_diag /usr/sbin/sshd; ' + G.retry_line() + '; }')
    assert lines.index("sshd_diag() {") < lines.index(start)
    # the digests are the here-document's lines, at column 0, sorted by path
    i = lines.index("\tdone <<RXL_DIGESTS")
    assert lines[i + 1:i + 4] == ["/lib/libcrypto.so.35 " + "b" * 64,
                                  "/usr/sbin/sshd " + "a" * 64, "RXL_DIGESTS"]
    # no digests: the function is still there, the here-document empty
    assert "sshd_diag() {" in G.rc_lines() and "RXL_DIGESTS" in G.rc_lines()


@pytest.mark.parametrize("bad", [{"lib/x": "a" * 64}, {"/a b": "a" * 64},
                                 {"/x": "A" * 64}, {"/x": "a" * 63}, {"/x": ""}])
def test_diag_lines_refuse_bad_entries(bad):
    with pytest.raises(ValueError, match="diagnostics: "):
        G.diag_lines(bad)


def test_sshd_diag_runs_under_sh(tmp_path):
    """The function itself, run by the host's /bin/sh with stand-ins for FreeBSD's
    sha256(1) (-q: the digest only), sysctl(8) and an sshd that segfaults (exit 139)
    except with -V: what it prints and that it puts both sysctls back."""
    import os
    import subprocess
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "sha256").write_text('#!/bin/sh\n[ "$1" = -q ] && sha256sum "$2" | cut -d" " -f1\n')
    state = tmp_path / "sysctl.log"
    (bin_ / "sysctl").write_text(
        '#!/bin/sh\nif [ "$1" = -n ]; then case "$2" in hw.model) echo QEMU;; '
        'kern.elf64.aslr.enable) echo 1;; *) echo 0;; esac; else echo "$*" >> ' + str(state)
        + "; fi\n")
    sshd = tmp_path / "sshd"
    calls = tmp_path / "calls.log"
    sshd.write_text('#!/bin/sh\necho "${LD_TRACE_LOADED_OBJECTS:-}|${OPENSSL_ia32cap:-}'
                    '|${ARCHLEVEL:-}|$*" >> '
                    + str(calls) + '\n[ "$1" = -V ] && exit 0\nexit 139\n')
    for f in bin_.iterdir():
        f.chmod(0o755)
    sshd.chmod(0o755)
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.write_bytes(b"staged")
    bad.write_bytes(b"damaged")
    lines = G.diag_lines({str(good): _digest(b"staged"), str(bad): _digest(b"staged")})
    script = "M=@@\n" + "\n".join(lines) + f"\nsshd_diag {sshd}\n"
    p = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PATH=f"{bin_}:{os.environ['PATH']}"))
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert not any(str(good) in ln for ln in out)  # only a file that differs is named
    assert "@@ NOTE sshd_diag: sha256 of the staged sshd files: 1 as staged, 1 differ" in out
    assert (f"@@ NOTE sshd_diag: sha256 DIFFERS {bad}: staged {_digest(b'staged')}, "
            f"read {_digest(b'damaged')}") in out
    assert "@@ NOTE sshd_diag: hw.model QEMU" in out
    assert "@@ NOTE sshd_diag: -V exit 0" in out
    assert "@@ NOTE sshd_diag: -t -ddd -e exit 139" in out
    assert "@@ NOTE sshd_diag: OPENSSL_ia32cap=0:0 -t -ddd -e exit 139" in out
    assert "@@ NOTE sshd_diag: ARCHLEVEL=baseline -t -ddd -e exit 139" in out
    assert any(ln.startswith("@@ NOTE sshd_diag: -ddd -D -e -p 2222 exit 139") for ln in out)
    # (LD_TRACE_LOADED_OBJECTS=1 makes the host's ld.so list the stand-in's sh instead of
    # running it, so that step is not among the calls; it is in the text)
    assert 'LD_TRACE_LOADED_OBJECTS=1 "$1"' in script
    assert calls.read_text().splitlines() == [
        "|||-V", "|||-t -ddd -e", "|0:0||-t -ddd -e", "||baseline|-t -ddd -e",
        "|||-ddd -D -e -p 2222"]
    # ASLR off and fault reports on for the runs, then both put back
    assert state.read_text().splitlines() == [
        "kern.elf64.aslr.enable=0 machdep.uprintf_signal=1",
        "kern.elf64.aslr.enable=1 machdep.uprintf_signal=0"]


def test_sshd_digests_cover_the_programs_and_their_libraries(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "usr/lib").mkdir(parents=True)
    files = {"sshd": b"S", "sess": b"E", "rtld": b"R", "lib/libc.so.7": b"C",
             "usr/lib/libprivatessh.so.5": b"P", "lib/libunused.so.1": b"U"}
    for rel, data in files.items():
        (tmp_path / rel).write_bytes(data)
    needed = {str(tmp_path / "sshd"): ["libprivatessh.so.5", "libc.so.7"],
              str(tmp_path / "sess"): ["libc.so.7"],
              str((tmp_path / "usr/lib/libprivatessh.so.5").resolve()): ["libc.so.7"]}
    progs = {"/usr/sbin/sshd": str(tmp_path / "sshd"),
             "/usr/libexec/sshd-session": str(tmp_path / "sess"),
             "/libexec/ld-elf.so.1": str(tmp_path / "rtld"), "/bin/sh": str(tmp_path / "x")}
    got = G.sshd_digests(progs, str(tmp_path), lambda p: needed.get(p, []))
    assert got == {"/usr/sbin/sshd": _digest(b"S"), "/usr/libexec/sshd-session": _digest(b"E"),
                   "/libexec/ld-elf.so.1": _digest(b"R"), "/lib/libc.so.7": _digest(b"C"),
                   "/usr/lib/libprivatessh.so.5": _digest(b"P")}


def test_rc_starts_sshd_again_with_baseline_string_functions(tmp_path):
    """The rc's sshd line, run by the host's /bin/sh with /usr/sbin/sshd replaced by a
    stand-in: it starts once when that works; after a failure (here: a stand-in that
    segfaults unless ARCHLEVEL=baseline) the diagnostics run and sshd starts again with
    ARCHLEVEL=baseline and SetEnv passing it to its sessions."""
    import os
    import subprocess
    line = next(ln for ln in G.rc_lines() if ln.startswith("/usr/sbin/sshd -E"))
    calls = tmp_path / "calls.log"
    for name, body in (("works", "exit 0"),
                       ("needs_baseline", '[ "${ARCHLEVEL:-}" = baseline ] || exit 139'),
                       ("broken", "exit 139")):
        calls.write_text("")
        stub = tmp_path / name
        stub.write_text(f'#!/bin/sh\necho "${{ARCHLEVEL:-}}|$*" >> {calls}\n{body}\n')
        stub.chmod(0o755)
        script = ("M=@@\nsshd_diag() { echo \"diag $1\"; }\n"
                  + line.replace("/usr/sbin/sshd", str(stub)) + "\n")
        p = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30,
                           env=dict(os.environ))
        out = p.stdout.splitlines()
        if name == "works":
            assert out == ["@@ SSHD up"] and calls.read_text() == "|-E /dev/console\n"
            continue
        assert calls.read_text().splitlines() == [
            "|-E /dev/console", "baseline|-E /dev/console -o SetEnv ARCHLEVEL=baseline"]
        # "SSHD failed" (what rxl.verify.ownguest.sshd_gone ends the wait on) comes only
        # when the second start fails too, after the diagnostics
        assert out[:2] == ["@@ NOTE sshd exited (139) at start", f"diag {stub}"]
        assert out[2:] == (["@@ SSHD up with ARCHLEVEL=baseline (libc without its x86-64-v2 "
                            "string functions; the first start exited 139)"]
                           if name == "needs_baseline" else
                           ["@@ SSHD failed (139; 139 again with ARCHLEVEL=baseline)"])
