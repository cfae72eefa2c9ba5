"""The userland stamp (rxl.tree.world.USERLAND_PATHS): what forces a rebuild.

The world stage installs kernel headers from sys/ into its sysroot and
compiles the ATF programs against them; a series commit that changes only
sys/sys/socket.h must give a new stamp, a change to kernel C or a manual
page must not (the userland is ~10 min of both cores).
"""

from pathlib import Path

from fakefreebsd import _git
from rxl.tree import world as W


def _commit(src: Path, rel: str, text: str) -> str:
    p = src / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    _git(src, "add", "--", rel)
    _git(src, "commit", "-q", "-m", f"change {rel}")
    return _git(src, "rev-parse", "HEAD")


def test_sys_headers_key_the_userland_stamp(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    _git(src, "init", "-q")
    first = _commit(src, "lib/libc/x.c", "int x;\n")
    assert W.head_of(str(src), W.USERLAND_PATHS) == first
    hdr = _commit(src, "sys/sys/socket.h", "#define SO_REUSEPORT_LB_CPU 0x10001\n")
    assert W.head_of(str(src), W.USERLAND_PATHS) == hdr
    machine = _commit(src, "sys/x86/include/x.h", "#define X 1\n")
    assert W.head_of(str(src), W.USERLAND_PATHS) == machine
    # Kernel C, a kernel config and a manual page leave the stamp alone.
    _commit(src, "sys/netinet/in_pcb.c", "int lookup;\n")
    _commit(src, "sys/amd64/conf/RXL", "include GENERIC\n")
    _commit(src, "lib/libc/sys/getsockopt.2", ".Dd\n")
    assert W.head_of(str(src), W.USERLAND_PATHS) == machine


def test_a_header_commit_changes_the_stamp_text(tmp_path):
    """build_world compares the whole plan text: the header commit is in it."""
    src = tmp_path / "src"
    src.mkdir()
    _git(src, "init", "-q")
    _commit(src, "include/stdio.h", "\n")
    before = W.head_of(str(src), W.USERLAND_PATHS)
    _commit(src, "sys/netinet/in.h", "#define IPPROTO_X 1\n")
    assert W.head_of(str(src), W.USERLAND_PATHS) != before


def test_build_world_says_started_and_done_once_per_stage(tmp_path, monkeypatch):
    """A cold run printed 'world-includes: started' and '...: done in 30 s' twice
    each: once from build_world, once from run_stage's progress line."""
    from rxl.tree import build as B
    from rxl.tree import progress
    monkeypatch.setattr(progress, "timings_path", lambda: tmp_path / "timings.json")
    monkeypatch.setattr(B, "toolchain_done", lambda objdir: True)
    monkeypatch.setattr(W, "plan_world", lambda src, objdir, jobs, lock: [
        B.Stage("world-includes", ("sh", "-c", "echo '>>> includes'")),
        B.Stage("world-build", ("sh", "-c", "echo '>>> build'"))])
    monkeypatch.setattr(W, "head_of", lambda src, paths: "h")
    monkeypatch.setattr(W, "ensure_atf_headers", lambda src, objdir, echo: None)
    monkeypatch.setattr(W.WorldOutputs, "missing", lambda self: [])
    W.objtop(str(tmp_path / "src"), str(tmp_path / "obj")).mkdir(parents=True)
    seen = []
    res = W.build_world(str(tmp_path / "src"), str(tmp_path / "obj"),
                        logdir=str(tmp_path / "logs"), lock=None, echo=seen.append)
    assert [r.name for r in res["stages"]] == ["world-includes", "world-build"]
    for name in ("world-includes", "world-build"):
        assert len([s for s in seen if s.startswith(f"{name}: started")]) == 1, seen
        assert len([s for s in seen if s.startswith(f"{name}: done in")]) == 1, seen
        assert f"{name}: log {tmp_path / 'logs' / name}.log" in seen
