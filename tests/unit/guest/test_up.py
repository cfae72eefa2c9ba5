"""rxl guest up/down (rxl.guest.up): dry run, state, stopping only our QEMU.

The real `up` needs the sshd userland (built and booted for real:
docs/results/ssh.md); these tests cover the plan, the state file and `down`.
"""

import json
import subprocess
import time

from click.testing import CliRunner

from rxl.cli.main import main
from rxl.guest import up as guestup
from rxl.guest.sshguest import NoSSHWorld


def test_dry_run_plans_world_and_hostfwd(tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path))
    k = tmp_path / "kernel"
    k.write_bytes(b"k")
    p = guestup.plan("/src", str(k), port=2222)
    argv = " ".join(p["argv"])
    assert "hostfwd=tcp:127.0.0.1:2222-:22" in argv
    assert f"-serial file:{tmp_path}/guest/up/console-up.log" in argv
    assert p["world"][1].endswith(" _build-tools") and "secure/usr.sbin/sshd" in p["world"][-1]
    src = _tree(tmp_path)
    r = CliRunner().invoke(main, ["guest", "up", "--src", src, "--kernel", str(k),
                                  "--build", "--dry-run"])
    assert r.exit_code == 0 and "hostfwd=tcp:127.0.0.1:" in r.output
    assert "secure/usr.sbin/sshd" in r.output           # --build: the world's lines
    assert not (tmp_path / "guest").exists()  # a dry run writes nothing


def _tree(tmp_path):
    """A directory that passes for a FreeBSD tree (tools/build/make.py)."""
    src = tmp_path / "src"
    (src / "tools/build").mkdir(parents=True)
    (src / "tools/build/make.py").write_text("")
    return str(src)


def test_up_checks_its_options_before_any_work(tmp_path, monkeypatch):
    """A dry run without --build lists no world build; a missing
    kernel or tree, --kyua without --build and a tree without the sshd userland
    are usage errors (exit 2) before anything is compiled, dry run or not."""
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "work"))
    k = tmp_path / "kernel"
    k.write_bytes(b"k")
    src = _tree(tmp_path)
    for args, opt, why in (
            (["--kernel", str(tmp_path / "nokernel")], "--kernel", "no such kernel"),
            (["--src", str(tmp_path / "nosrc")], "--src", "not a FreeBSD source tree"),
            (["--kyua"], "--kyua", "only with --build"),
            ([], "--src", "add --build")):
        for dry in ([], ["--dry-run"]):
            argv = ["guest", "up", "--src", src, "--kernel", str(k), *args, *dry]
            r = CliRunner().invoke(main, argv)
            assert r.exit_code == 2 and opt in r.output and why in r.output, (argv, r.output)
    assert not (tmp_path / "work").exists()
    monkeypatch.setattr("rxl.tree.sshworld.ssh_world_outputs",
                        lambda *a, **k: type("O", (), {"missing": lambda self: []})())
    r = CliRunner().invoke(main, ["guest", "up", "--src", src, "--kernel", str(k), "--dry-run"])
    assert r.exit_code == 0, r.output
    assert "buildworld" not in r.output and "# sshd userland: built in" in r.output


def test_dry_run_with_kyua_shows_the_amalgamation_and_kyua(tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path))
    k = tmp_path / "kernel"
    k.write_bytes(b"k")
    src = _tree(tmp_path)
    r = CliRunner().invoke(main, ["guest", "up", "--src", src, "--kernel", str(k),
                                  "--build", "--kyua", "--dry-run"])
    assert r.exit_code == 0, r.output
    first = r.output.splitlines()[0]
    assert first.startswith(f"# kyua: unless {src}/contrib/sqlite3/sqlite3.c exists: GET "
                            "https://registry.npmjs.org/better-sqlite3/12.9.0")
    assert f"into {tmp_path}/guest/up/kyua-deps" in first
    assert "usr.bin/kyua" in r.output and "lib/libsqlite3" in r.output
    plain = CliRunner().invoke(main, ["guest", "up", "--src", src, "--kernel", str(k),
                                      "--build", "--dry-run"])
    assert "usr.bin/kyua" not in plain.output and "# kyua" not in plain.output
    assert not (tmp_path / "guest").exists()


def test_up_refuses_without_the_sshd_userland(tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path))
    k = tmp_path / "kernel"
    k.write_bytes(b"k")
    try:
        guestup.up("/nonexistent-src", str(k), tests={}, echo=lambda s: None)
    except NoSSHWorld as exc:
        assert "the sshd userland is not built" in str(exc) and "--build" in str(exc)
    else:
        raise AssertionError("up without the userland must fail")


def test_down_stops_only_the_recorded_qemu(tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path))
    root = str(tmp_path / "guest/up/root")
    # stands in for QEMU: its command line holds the root path, as QEMU's -drive does
    proc = subprocess.Popen(["sh", "-c", "sleep 60", root], start_new_session=True)
    other = subprocess.Popen(["sleep", "60"])
    for _ in range(100):  # until the child has exec'd (its cmdline is ours before)
        if root.encode() in open(f"/proc/{proc.pid}/cmdline", "rb").read():
            break
        time.sleep(0.02)
    try:
        guestup.state_path().parent.mkdir(parents=True)
        guestup.state_path().write_text(json.dumps(
            {"pid": proc.pid, "port": 40022, "root": root, "url": "ssh://root@127.0.0.1:40022",
             "own_host_key": "ssh-ed25519 AAAA"}))
        assert guestup.own_host_key("127.0.0.1", 40022) == "ssh-ed25519 AAAA"
        assert guestup.own_host_key("127.0.0.1", 40023) is None
        assert guestup.own_host_key("192.0.2.1", 40022) is None
        r = CliRunner().invoke(main, ["guest", "down"])
        assert r.exit_code == 0 and f"stopped QEMU pid {proc.pid}" in r.output
        proc.wait(timeout=15)
        assert other.poll() is None  # nothing else was touched
        assert not guestup.state_path().exists()
        # a recorded pid that is no longer the guest's QEMU is left alone
        guestup.state_path().write_text(json.dumps({"pid": other.pid, "root": root,
                                                    "url": "u"}))
        assert "nothing stopped" in guestup.down()[0]
        time.sleep(0.1)
        assert other.poll() is None
    finally:
        for p in (proc, other):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_run_target_uses_the_up_guests_key(tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path))
    guestup.state_path().parent.mkdir(parents=True)
    guestup.state_path().write_text(json.dumps(
        {"pid": 1, "port": 40022, "root": "/x", "url": "ssh://root@127.0.0.1:40022",
         "own_host_key": "ssh-ed25519 AAAA"}))
    from rxl.verify.cli import resolve_target as _target
    st, shape = _target("ssh://root@127.0.0.1:40022", None, False)
    assert st.own_host_key == "ssh-ed25519 AAAA" and st.label.startswith("own guest")
    st, _ = _target("ssh://root@127.0.0.1:40023", None, False)
    assert st.own_host_key is None
