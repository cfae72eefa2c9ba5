"""rxl.tree.toolchain: a kernel-toolchain stored once per base, seeded into other trees."""

import subprocess
from pathlib import Path

from fakefreebsd import _git, _tree
from rxl.tree import build as B
from rxl.tree import patch as P
from rxl.tree import toolchain as T


def _setup(tmp_path, monkeypatch):
    src = tmp_path / "src"
    base = _tree(src)
    bf = tmp_path / "BASE"
    bf.write_text(P.Base("owner/repo", base, "1400507").text())
    monkeypatch.setattr(T, "BASE_FILE", bf)
    return src, base


def _built(src: Path, objdir: Path) -> Path:
    """What kernel-toolchain leaves: OBJTOP/tmp, toolchain-metadata.mk, the marker;
    plus a kernel object under OBJTOP/sys that must not be shared."""
    top = objdir / str(src.resolve()).lstrip("/") / "amd64.amd64"
    (top / "tmp/usr/bin").mkdir(parents=True)
    (top / "tmp/usr/bin/config").write_text("tool")
    (top / "toolchain-metadata.mk").write_text("X=1\n")
    (top / "sys/RXL").mkdir(parents=True)
    (top / "sys/RXL/kernel").write_text("kernel")
    (objdir / B.TOOLCHAIN_DONE).touch()
    return top


def test_save_then_seed_another_clone_of_the_base(tmp_path, monkeypatch):
    src, base = _setup(tmp_path, monkeypatch)
    work = str(tmp_path / "work")
    obj1 = tmp_path / "obj1"
    _built(src, obj1)
    assert T.seedable(str(src), str(obj1), work) is None
    store = T.save(str(src), str(obj1), echo=lambda s: None, work=work)
    assert store == tmp_path / "work" / "toolchain" / f"{base[:12]}-llvm16"
    assert (store / "objtop/tmp/usr/bin/config").read_text() == "tool"
    assert not (store / "objtop/sys").exists()          # kernel objects stay out
    assert T.save(str(src), str(obj1), echo=lambda s: None, work=work) is None  # once
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(src), str(clone)], check=True)
    obj2 = tmp_path / "obj2"
    assert not B.toolchain_done(obj2, clone)
    lines = []
    assert T.seed(str(clone), str(obj2), echo=lines.append, work=work)
    assert B.toolchain_done(obj2, clone)                # build_kernel now skips it
    assert not (obj2 / "bmake-install").exists()        # bootstrapped per objdir
    assert "copied from" in lines[0]
    plan = B.plan_stages(clone, obj2, toolchain=not B.toolchain_done(obj2, clone))
    assert [s.name for s in plan] == ["buildkernel-RXL"]


def test_no_sharing_across_histories_or_without_a_store(tmp_path, monkeypatch):
    src, base = _setup(tmp_path, monkeypatch)
    work = str(tmp_path / "work")
    other = tmp_path / "other"
    _tree(other, salt="# another history\n")
    assert T.base_key(str(other)) is None
    assert T.base_key(str(src)) == base
    assert T.base_key(str(tmp_path / "absent")) is None
    assert not T.seed(str(src), str(tmp_path / "o"), echo=lambda s: None, work=work)
    _git(src, "commit", "-q", "--allow-empty", "-m", "series")
    assert T.base_key(str(src)) == base                 # a descendant shares it


def test_seeding_over_an_earlier_seed_replaces_its_symlinks(tmp_path, monkeypatch):
    """A second seed into the same objdir: copytree stopped at every symlink already
    there (EEXIST) and the build fell back to kernel-toolchain."""
    src, base = _setup(tmp_path, monkeypatch)
    work = str(tmp_path / "work")
    obj1 = tmp_path / "obj1"
    top = _built(src, obj1)
    (top / "tmp/usr/bin/cc").symlink_to("clang")
    (top / "tmp/usr/bin/clang").write_text("clang")
    T.save(str(src), str(obj1), echo=lambda s: None, work=work)
    obj2 = tmp_path / "obj2"
    assert T.seed(str(src), str(obj2), echo=lambda s: None, work=work)
    lines = []
    assert T.seed(str(src), str(obj2), echo=lines.append, work=work), lines
    cc = obj2 / str(src.resolve()).lstrip("/") / "amd64.amd64/tmp/usr/bin/cc"
    assert cc.is_symlink() and str(cc.readlink()) == "clang"
    assert "copied from" in lines[0]


def test_a_failed_seed_copy_is_said_in_one_short_line(tmp_path, monkeypatch):
    """shutil.Error lists every failed path; the seed says the count and the first."""
    import os
    src, base = _setup(tmp_path, monkeypatch)
    work = str(tmp_path / "work")
    obj1 = tmp_path / "obj1"
    _built(src, obj1)
    store = T.save(str(src), str(obj1), echo=lambda s: None, work=work)
    for i in range(200):        # copyfile refuses named pipes (SpecialFileError)
        os.mkfifo(store / f"objtop/tmp/usr/bin/p{i}")
    lines = []
    assert not T.seed(str(src), str(tmp_path / "obj2"), echo=lines.append, work=work)
    import re
    assert len(lines) == 1, lines
    assert len(set(re.findall(r"/p\d+", lines[0]))) == 1, lines    # the first only
    assert "200 path(s) not copied" in lines[0] and "building it" in lines[0]
