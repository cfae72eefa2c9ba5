"""rxl guest up/down (rxl.guest.up): dry run, state, stopping only our QEMU.

The real `up` needs the sshd userland (built and booted for real:
docs/results/ssh.md); these tests cover the plan, the state file and `down`.
"""

import json
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from rxl.cli.main import main
from rxl.guest import up as guestup
from rxl.guest.sshguest import NoSSHWorld
from fakefreebsd import kernel_bytes


def test_dry_run_plans_world_and_hostfwd(tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path))
    k = tmp_path / "kernel"
    k.write_bytes(kernel_bytes())
    p = guestup.plan("/src", str(k), port=2222)
    argv = " ".join(p["argv"])
    assert "hostfwd=tcp:127.0.0.1:2222-:22" in argv
    assert f"-serial file:{tmp_path}/guest/up/console-up.log" in argv
    world = [ln for ln in p["world"] if not ln.startswith(("# bmake bootstrap", "cd "))]
    assert any("boot-strap" in ln for ln in p["world"])     # printed, as run_stage runs it
    assert world[1].endswith(" _build-tools") and "secure/usr.sbin/sshd" in world[-1]
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
    k.write_bytes(kernel_bytes())
    (tmp_path / "empty").write_bytes(b"")
    src = _tree(tmp_path)
    for args, opt, why in (
            (["--kernel", str(tmp_path / "nokernel")], "--kernel", "no such kernel"),
            (["--kernel", str(tmp_path / "empty")], "--kernel", "an empty file, no kernel"),
            (["--kernel", str(tmp_path)], "--kernel", "not a regular file, no kernel"),
            (["--src", str(tmp_path / "nosrc")], "--src", "nosrc: no such directory"),
            (["--kyua"], "--kyua", "only with --build"),
            ([], "--src", "add --build")):
        for dry in ([], ["--dry-run"]):
            given = ([] if "--kernel" in args else ["--kernel", str(k)]) + \
                ([] if "--src" in args else ["--src", src])  # each option once
            argv = ["guest", "up", *given, *args, *dry]
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
    k.write_bytes(kernel_bytes())
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
    k.write_bytes(kernel_bytes())
    try:
        guestup.up("/nonexistent-src", str(k), tests={}, echo=lambda s: None)
    except NoSSHWorld as exc:
        assert "the sshd userland is not built" in str(exc) and "--build" in str(exc)
    else:
        raise AssertionError("up without the userland must fail")


def _fake_qemu(root, drive=None):
    """A process standing in for the guest's QEMU: argv[0] qemu-system-x86_64 and
    the root's -drive argument, as rxl.guest.qemu.build_argv writes them."""
    drive = drive or f"if=none,id=root,format=raw,file=fat:rw:{root}"
    proc = subprocess.Popen(["bash", "-c", 'exec -a qemu-system-x86_64 "$0" -c "$1" "$@"',
                             sys.executable, "import time; time.sleep(60)", "-drive", drive],
                            start_new_session=True)
    for _ in range(200):  # until the child has exec'd (its cmdline is bash's before)
        if open(f"/proc/{proc.pid}/cmdline", "rb").read().startswith(b"qemu-system"):
            break
        time.sleep(0.02)
    return proc


def test_down_stops_only_the_recorded_qemu(tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path))
    root = str(tmp_path / "guest/up/root")
    proc = _fake_qemu(root)
    other = subprocess.Popen(["sleep", "60"])
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


@pytest.mark.parametrize("state, why", [
    ("[1, 2]", "a JSON list, not an object"),
    ('"abc"', "a JSON str, not an object"),
    ("5", "a JSON int, not an object"),
    ("{", "not JSON"),
    ('{"pid": "PID", "root": "ROOT", "url": "u"}', "not a process id above 1"),
    ('{"pid": 1, "root": "ROOT", "url": "u"}', "pid 1: not a process id above 1"),
    ('{"pid": true, "root": "ROOT", "url": "u"}', "pid true: not a process id above 1"),
    ('{"pid": 99999999999999999999999, "root": "ROOT", "url": "u"}',
     "pid 99999999999999999999999: not a process id above 1 (and at most 4194304)"),
    ('{"pid": PID, "root": "", "url": "u"}', 'root "": not '),
    ('{"pid": PID, "url": "u"}', "no root"),
    ('{"pid": PID, "root": "/", "url": "u"}', 'root "/": not '),
    ('{"pid": PID, "root": "ROOT/..", "url": "u"}', 'root "'),
    ('{"pid": PID, "root": "ROOT"}', "no url"),
    ('{"pid": PID, "root": "ROOT", "url": 5}', "url 5: not a string"),
    ('{"root": "ROOT", "url": "u"}', "no pid"),
    ('{"pid": PID, "root": "ROOT", "url": "u", "port": 70000}', "port 70000: not a TCP port"),
])
def test_down_refuses_a_damaged_state_file_and_stops_nothing(tmp_path, monkeypatch, state, why):
    """A state file that is not what up writes (another JSON value, a pid of no
    process of ours, a root that is not the one up stages: '' is in every command
    line) is refused in one line, exit 2; the process it names and the file stay."""
    monkeypatch.setenv("RXL_WORK", str(tmp_path))
    root = str(guestup.root_path())
    victim = _fake_qemu(root)  # even a QEMU of our root survives a damaged file
    try:
        guestup.state_path().parent.mkdir(parents=True)
        text = state.replace("PID", str(victim.pid)).replace("ROOT", root)
        guestup.state_path().write_text(text)
        r = CliRunner().invoke(main, ["guest", "down"])
        assert r.exit_code == 2, r.output
        (line,) = r.output.strip().splitlines()
        assert line.startswith(f"Error: {guestup.state_path()}: not the state rxl guest up "
                               "writes (") and why in line and "nothing stopped" in line
        time.sleep(0.1)
        assert victim.poll() is None and guestup.state_path().read_text() == text
    finally:
        victim.kill()
        victim.wait()


def test_down_leaves_a_process_that_is_not_the_roots_qemu(tmp_path, monkeypatch):
    """The pid's command line must be a QEMU whose -drive is the recorded root: a
    process naming the root elsewhere, or another root's QEMU, is left alone."""
    monkeypatch.setenv("RXL_WORK", str(tmp_path))
    root = str(guestup.root_path())
    others = [subprocess.Popen(["sh", "-c", "sleep 60", root], start_new_session=True),
              _fake_qemu(root, drive=f"if=none,id=root,format=raw,file=fat:rw:{root}x")]
    time.sleep(0.1)
    try:
        guestup.state_path().parent.mkdir(parents=True)
        for p in others:
            guestup.state_path().write_text(json.dumps({"pid": p.pid, "root": root,
                                                        "url": "u"}))
            assert "nothing stopped" in guestup.down()[0]
            time.sleep(0.1)
            assert p.poll() is None
    finally:
        for p in others:
            p.kill()
            p.wait()


def test_down_of_a_state_path_that_is_a_directory_refuses(tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path))
    guestup.state_path().mkdir(parents=True)
    r = CliRunner().invoke(main, ["guest", "down"])
    assert r.exit_code == 2 and "not a regular file" in r.output, r.output
    assert guestup.state_path().is_dir()


def test_run_target_uses_the_up_guests_key(tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path))
    guestup.state_path().parent.mkdir(parents=True)
    guestup.state_path().write_text(json.dumps(
        {"pid": 12345, "port": 40022, "root": str(guestup.root_path()),
         "url": "ssh://root@127.0.0.1:40022",
         "own_host_key": "ssh-ed25519 AAAA"}))
    from rxl.verify.cli import resolve_target as _target
    st, shape = _target("ssh://root@127.0.0.1:40022", None, False)
    assert st.own_host_key == "ssh-ed25519 AAAA" and st.label.startswith("own guest")
    st, _ = _target("ssh://root@127.0.0.1:40023", None, False)
    assert st.own_host_key is None
