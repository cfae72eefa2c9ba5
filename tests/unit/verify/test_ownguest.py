"""rxl.verify.ownguest: the own guest over SSH. The SSH stream carries the sentinel
lines, the serial log the kernel's messages; together they must read as the
console did (real console logs of earlier guest runs, tests/data/console)."""

from pathlib import Path

import pytest

from rxl.guest.protocol import MARK
from rxl.verify import parse
from rxl.tree import sshworld
from rxl.verify import ownguest
from rxl.verify.ownguest import kernel_messages

DATA = Path(__file__).resolve().parents[2] / "data" / "console"


@pytest.mark.parametrize("name", ["real-c1-patched.log", "real-panic.log",
                                  "real-c3-panic.log", "real-exp-patched.log"])
def test_stream_plus_serial_reads_as_the_console(tmp_path, name):
    whole = (DATA / name).read_text(errors="replace")
    ssh_log = tmp_path / "console.log"
    ssh_log.write_text("\n".join(ln for ln in whole.splitlines()
                                 if ln.replace("\r", "").startswith(MARK)) + "\n")
    serial = tmp_path / "serial.log"
    serial.write_text(whole)
    want = parse.parse_file(str(DATA / name))
    got = kernel_messages(parse.parse_file(str(ssh_log)), str(serial))
    assert got.outcome == want.outcome
    assert got.panic_lines == want.panic_lines and got.witness_lines == want.witness_lines
    assert [c.status for c in got.cases] == [c.status for c in want.cases]
    known = [n for n in want.notes if n.startswith("known lock order reversal")]
    assert [n for n in got.notes if n.startswith("known lock order reversal")] == known


def test_missing_serial_log_is_said(tmp_path):
    ssh_log = tmp_path / "console.log"
    ssh_log.write_text(f"{MARK} BEGIN x\n{MARK} END x\n")
    res = kernel_messages(parse.parse_file(str(ssh_log)), str(tmp_path / "none.log"))
    assert res.outcome == "completed"
    assert any("kernel messages unchecked" in n for n in res.notes)


def test_auto_transport_is_ssh_and_builds_the_userland_first(tmp_path, monkeypatch):
    """--transport auto (make run's default): SSH whenever paramiko imports; the
    reason says whether the world stage builds the sshd userland with kyua first
    (any product missing) or finds it built; serial only without paramiko."""
    import builtins
    monkeypatch.setenv("RXL_WORK", str(tmp_path))
    src = str(tmp_path / "src")
    got, why = ownguest.choose(src)
    assert got == "ssh" and why.startswith(
        f"the world stage builds the sshd userland with kyua for {src} first (")
    out = sshworld.ssh_world_outputs(src, kyua=True)
    assert "/usr/bin/kyua" in out.programs
    for p in [out.loader_efi, *out.others, *out.programs.values()][:-1]:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"")
    assert "builds the sshd userland" in ownguest.choose(src)[1]  # one still missing
    last = list(out.programs.values())[-1]
    last.parent.mkdir(parents=True, exist_ok=True)
    last.write_bytes(b"")
    assert ownguest.choose(src) == ("ssh", f"the sshd userland of {src} is built")
    real = builtins.__import__

    def no_paramiko(name, *a, **k):
        if name == "paramiko":
            raise ImportError(name)
        return real(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", no_paramiko)
    assert ownguest.choose(src) == ("serial",
                                    "paramiko is not installed: pip install 'rxl[guest]'")


def test_the_guests_nic_names_the_spread_tunable_and_old_qemu_is_refused():
    """The default guest's NIC is igb0 (its tunable under dev.igb.0); a QEMU without
    igb (7.2) is refused in one line naming rxl doctor --install; e1000e runs there."""
    from rxl.guest import qemu
    from rxl.guest.targets import BUILTIN_SHAPES, Shape
    from rxl.verify.request import RunRequest
    req = RunRequest()
    assert ownguest.spread_tunable(req) == "dev.igb.0.iflib.core_spread"
    old = RunRequest(shape=Shape(**BUILTIN_SHAPES["two-l3"]))
    assert ownguest.spread_tunable(old) == "dev.em.0.iflib.core_spread"
    cfg = ownguest.guest_config("/r", req)
    assert (cfg.vcpus, cfg.nics, cfg.nic_numa_node, cfg.memory_mib) == (32, ("igb",), 0, 1024)
    ownguest.check_qemu(cfg, (10, 0))
    ownguest.check_qemu(ownguest.guest_config("/r", old), (7, 2))
    with pytest.raises(qemu.QemuConfigError) as e:
        ownguest.check_qemu(cfg, (7, 2))
    msg = str(e.value)
    assert msg.startswith("the guest needs QEMU >= 8.0 (its igb NIC); this host has 7.2: "
                          "run `rxl doctor --install`") and "--target guest-e1000e" in msg


def test_auto_finds_the_userland_where_ssh_builds_it(tmp_path, monkeypatch):
    """No --src (or a base-only tree): the run builds in the work clone
    $RXL_WORK/src-<base12>, so --transport ssh builds the sshd userland for that
    path and auto must look there, not for the --src path."""
    from rxl.tree import base as tree_base
    from rxl.tree import patch as tree_patch
    monkeypatch.setenv("RXL_WORK", str(tmp_path))
    base = tree_patch.parse_base((tree_base.REPO_PATCHES / "BASE").read_text())
    clone = str(tmp_path.resolve() / f"src-{base.commit[:12]}")
    assert ownguest.run_tree(None) == clone
    assert ownguest.run_tree(None, work="/w") == f"/w/src-{base.commit[:12]}"
    out = sshworld.ssh_world_outputs(clone, kyua=True)
    for p in [out.loader_efi, *out.others, *out.programs.values()]:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"")
    assert ownguest.choose(None) == ("ssh", f"the sshd userland of {clone} is built")
