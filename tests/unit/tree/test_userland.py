"""rxl.tree.userland: one userland per base and compiler, the tree's headers on top."""

import os
import subprocess
from pathlib import Path

import pytest

from fakefreebsd import _git, _tree
from rxl.tree import patch as P
from rxl.tree import toolchain as T
from rxl.tree import userland as U


@pytest.mark.parametrize("rel,want", [
    ("sys/netinet/tcp.h", "netinet/tcp.h"),
    ("sys/sys/socket.h", "sys/socket.h"),
    ("sys/netinet/cc/cc.h", "netinet/cc/cc.h"),
    ("sys/amd64/include/param.h", "machine/param.h"),
    ("sys/x86/include/apicreg.h", "x86/apicreg.h"),
    ("sys/netinet/in_pcb.c", None),
    ("sys/kern/kern_x.h", None),        # sys/kern is not installed
    ("lib/libc/include/x.h", None),
    ("sys/param.h", None),
])
def test_installed_header(rel, want):
    assert U.installed_header(rel) == want


def test_unshared_reason():
    assert U.unshared_reason(["sys/netinet/in_pcb.c", "sys/netinet/tcp.h",
                              "tests/sys/netinet/Makefile", "share/man/man4/tcp.4",
                              "sys/net/iflib.c"]) is None
    assert "lib/libc/gen/x.c" in U.unshared_reason(["sys/net/iflib.c", "lib/libc/gen/x.c"])
    assert "sys/kern/kern_x.h" in U.unshared_reason(["sys/kern/kern_x.h"])
    assert U.unshared_reason(None).startswith("git cannot say")


def test_plan_key_ignores_where_the_tree_and_objdir_are():
    a = U.plan_key([["env", "MAKEOBJDIRPREFIX=/o1", "python3", "/t1/tools/build/make.py",
                     "buildworld"]], "/t1", "/o1")
    b = U.plan_key([["env", "MAKEOBJDIRPREFIX=/o2", "python3", "/t2/tools/build/make.py",
                     "buildworld"]], "/t2", "/o2")
    c = U.plan_key([["env", "MAKEOBJDIRPREFIX=/o2", "python3", "/t2/tools/build/make.py",
                     "-DX", "buildworld"]], "/t2", "/o2")
    assert a == b != c and len(a) == 12


def _base(tmp_path, monkeypatch):
    src = tmp_path / "src"
    (src / "sys/netinet").mkdir(parents=True)
    (src / "sys/netinet/tcp.h").write_text("#define TCP_BASE 1\n")
    base = _tree(src, major=15)
    bf = tmp_path / "BASE"
    bf.write_text(P.Base("owner/repo", base, "1500068").text())
    monkeypatch.setattr(T, "BASE_FILE", bf)
    return src, base


def _built(src, obj, tcp_h: str):
    """What a userland build leaves in OBJTOP: the sysroot and one program."""
    top = U._objtop(str(src), str(obj))
    (top / "tmp/usr/include/netinet").mkdir(parents=True)
    (top / "tmp/usr/include/netinet/tcp.h").write_text(tcp_h)
    (top / "tmp/usr/lib").mkdir(parents=True)
    (top / "tmp/usr/lib/libc.a").write_text("libc")
    (top / "bin/sh").mkdir(parents=True)
    (top / "bin/sh/sh").write_text("sh")
    (top / "bin/sh/sh.o").write_text("an object: not stored")
    return top


def test_a_series_tree_stores_the_base_s_headers_and_a_clone_gets_its_own(tmp_path,
                                                                          monkeypatch):
    src, base = _base(tmp_path, monkeypatch)
    work = str(tmp_path / "work")
    # the series' tree: a kernel file and tcp.h changed, committed on top of the base
    (src / "sys/kern/kern_x.c").write_text("int x2;\n")
    (src / "sys/netinet/tcp.h").write_text("#define TCP_BASE 1\n#define TCP_NEW 2\n")
    _git(src, "commit", "-qam", "series")
    top = _built(src, tmp_path / "obj1", (src / "sys/netinet/tcp.h").read_text())
    store = U.save(str(src), str(tmp_path / "obj1"), "p1", [top / "bin/sh/sh"],
                   echo=lambda s: None, work=work)
    assert store.name == f"{base[:12]}-llvm19-p1"
    assert (store / "objtop/tmp/usr/include/netinet/tcp.h").read_text() == \
        "#define TCP_BASE 1\n"                               # the base's, not the series'
    assert (store / "objtop/bin/sh/sh").is_file() and not (store / "objtop/bin/sh/sh.o").exists()
    assert U.save(str(src), str(tmp_path / "obj1"), "p1", [], lambda s: None, work) is None
    # a clone of the base (the pristine tree): seeded with the base's header
    pristine = tmp_path / "pristine"
    subprocess.run(["git", "clone", "-q", str(src), str(pristine)], check=True)
    _git(pristine, "checkout", "-q", base)
    lines = []
    assert U.seed(str(pristine), str(tmp_path / "obj2"), "p1", lines.append, work)
    ptop = U._objtop(str(pristine), str(tmp_path / "obj2"))
    assert (ptop / "bin/sh/sh").read_text() == "sh"
    assert (ptop / "tmp/usr/include/netinet/tcp.h").read_text() == "#define TCP_BASE 1\n"
    # the series' tree seeded elsewhere: its own tcp.h goes on top
    assert U.seed(str(src), str(tmp_path / "obj3"), "p1", lines.append, work)
    stop = U._objtop(str(src), str(tmp_path / "obj3"))
    assert "TCP_NEW" in (stop / "tmp/usr/include/netinet/tcp.h").read_text()
    assert any("netinet/tcp.h copied" in ln for ln in lines)
    assert not U.seed(str(src), str(tmp_path / "obj4"), "other-plan", lines.append, work)


def test_a_tree_that_changes_the_userland_neither_seeds_nor_stores(tmp_path, monkeypatch):
    src, base = _base(tmp_path, monkeypatch)
    (src / "tools/build/make.py").write_text("# changed\n")
    _git(src, "commit", "-qam", "change the build")
    top = _built(src, tmp_path / "obj", "x")
    lines = []
    assert U.save(str(src), str(tmp_path / "obj"), "p", [top / "bin/sh/sh"], lines.append,
                  str(tmp_path / "w")) is None
    assert "tools/build/make.py" in lines[0]
    assert not U.seed(str(src), str(tmp_path / "o2"), "p", lines.append, str(tmp_path / "w"))


def test_absent_files_and_what_the_harness_writes_are_no_change(tmp_path, monkeypatch):
    src, base = _base(tmp_path, monkeypatch)
    (src / "tools/build/make.py").unlink()          # as a snapshot's missing blob
    (src / "contrib/sqlite3").mkdir(parents=True)
    (src / "contrib/sqlite3/sqlite3.h").write_text("3.53.0\n")
    _git(src, "add", "contrib/sqlite3/sqlite3.h")
    _git(src, "commit", "-qm", "as kyuaworld leaves it, committed or not")
    assert U.changed_files(str(src), base) == []


def _built_linked(src, obj):
    """Makefile.inc1's sysroot: WORLDTMP/sys links to the tree's sys/ and the kernel
    headers are installed as relative links through it."""
    top = _built(src, obj, "unused")
    (top / "tmp/usr/include/netinet/tcp.h").unlink()
    (top / "tmp/sys").symlink_to(Path(os.path.abspath(src)) / "sys")
    (top / "tmp/usr/include/netinet/tcp.h").symlink_to("../../../sys/netinet/tcp.h")
    return top


def test_storing_a_linked_sysroot_leaves_the_tree_alone(tmp_path, monkeypatch):
    """The store of a series tree whose sysroot links into its sys/ must not write the
    base's headers through the links (that reverted the series' tcp.h in the tree on
    2026-12-02), and each seeded tree must see its own headers."""
    src, base = _base(tmp_path, monkeypatch)
    work = str(tmp_path / "work")
    series_tcp = "#define TCP_BASE 1\n#define TCP_NEW 2\n"
    (src / "sys/netinet/tcp.h").write_text(series_tcp)
    _git(src, "commit", "-qam", "series")
    top = _built_linked(src, tmp_path / "obj1")
    assert U.save(str(src), str(tmp_path / "obj1"), "p1", [top / "bin/sh/sh"],
                  echo=lambda s: None, work=work) is not None
    assert (src / "sys/netinet/tcp.h").read_text() == series_tcp
    assert (top / "tmp/usr/include/netinet/tcp.h").read_text() == series_tcp
    pristine = tmp_path / "pristine"
    subprocess.run(["git", "clone", "-q", str(src), str(pristine)], check=True)
    _git(pristine, "checkout", "-q", base)
    assert U.seed(str(pristine), str(tmp_path / "obj2"), "p1", lambda s: None, work)
    ptop = U._objtop(str(pristine), str(tmp_path / "obj2"))
    assert (ptop / "tmp/usr/include/netinet/tcp.h").read_text() == "#define TCP_BASE 1\n"
    assert os.readlink(ptop / "tmp/sys") == str(pristine.resolve() / "sys")
    assert (src / "sys/netinet/tcp.h").read_text() == series_tcp


def test_refresh_never_writes_through_a_link_into_another_tree(tmp_path, monkeypatch):
    src, base = _base(tmp_path, monkeypatch)
    (src / "sys/netinet/tcp.h").write_text("#define TCP_NEW 2\n")
    other = tmp_path / "other"
    (other / "sys/netinet").mkdir(parents=True)
    (other / "sys/netinet/tcp.h").write_text("#define OTHER 1\n")
    sysroot = tmp_path / "sysroot"
    (sysroot / "usr/include/netinet").mkdir(parents=True)
    (sysroot / "usr/include/netinet/tcp.h").symlink_to(other / "sys/netinet/tcp.h")
    assert U.refresh_headers(str(src), str(sysroot), lambda s: None) == ["netinet/tcp.h"]
    assert (other / "sys/netinet/tcp.h").read_text() == "#define OTHER 1\n"
    assert (sysroot / "usr/include/netinet/tcp.h").read_text() == "#define TCP_NEW 2\n"
