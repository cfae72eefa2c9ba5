"""rxl.tree.snapshot: the mode rule and the stand-ins, on small git trees."""

import os
import subprocess

import pytest

from fakefreebsd import GIT, _git
from rxl.tree import snapshot as S


def _flat(tmp_path, files):
    """A git tree whose every file is committed 100644, as the 15.0 snapshot is."""
    for rel, data in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    subprocess.run(GIT + ["init", "-q", str(tmp_path)], check=True)
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "flat")
    return tmp_path


@pytest.mark.parametrize("name,head,want", [
    ("configure", b"#! /bin/sh\n", True),
    ("machine.sh", b"# no shebang\n", True),
    ("boot-strap", b":\n# sh script run with sh\n", False),
    ("x.c", b"#include <a.h>\n", False),
    ("t.a", b"#", False),
])
def test_by_rule(name, head, want):
    assert S.by_rule(name, head) is want


def test_a_flattened_snapshot_gets_its_scripts_executable_and_git_stays_clean(tmp_path):
    src = _flat(tmp_path, {"contrib/bmake/configure": b"#!/bin/sh\nexit 0\n",
                           "contrib/bmake/machine.sh": b"echo amd64\n",
                           "sys/kern/kern_x.c": b"int x;\n"})
    assert S.needs_modes(str(src))
    lines = []
    assert S.restore_modes(str(src), lines.append) == 2
    assert os.access(src / "contrib/bmake/configure", os.X_OK)
    assert os.access(src / "contrib/bmake/machine.sh", os.X_OK)
    assert not os.access(src / "sys/kern/kern_x.c", os.X_OK)
    assert "2 files made executable" in lines[0]
    assert _git(src, "status", "--porcelain") == ""         # core.fileMode=false
    assert S.needs_modes(str(src))           # still flat in the index: re-run after checkouts
    assert S.restore_modes(str(src), lines.append) == 0 and len(lines) == 1


def test_a_tree_with_real_modes_is_left_alone(tmp_path):
    src = _flat(tmp_path, {"contrib/bmake/configure": b"#!/bin/sh\n"})
    _git(src, "update-index", "--chmod=+x", "contrib/bmake/configure")
    _git(src, "commit", "-qm", "modes")
    assert not S.needs_modes(str(src))
    assert S.prepare(str(src), lambda s: None)["modes"] == 0


def test_needs_modes_on_a_plain_tree_reads_the_probe(tmp_path):
    p = tmp_path / S.MODE_PROBE
    p.parent.mkdir(parents=True)
    p.write_text("#!/bin/sh\n")
    p.chmod(0o644)
    assert S.needs_modes(str(tmp_path))
    p.chmod(0o755)
    assert not S.needs_modes(str(tmp_path))
    assert not S.needs_modes(str(tmp_path / "absent"))


def test_subdir_words():
    text = ("SUBDIR=\tbin \\\n\tid \\\n\tls # comment words\n"
            "SUBDIR.${MK_OPENSSH}+=\tssh-copy-id\n"
            "SUBDIR+= ${_lib} .WAIT tests\n"
            "SUBDIR_PARALLEL=\n"
            "SUBDIR_DEPEND_x= y\n")
    assert S.subdir_words(text) == ["bin", "id", "ls", "ssh-copy-id", "tests"]


def test_absent_subdirs_get_a_stand_in_that_the_programs_list_knows(tmp_path):
    (tmp_path / "usr.bin/ls").mkdir(parents=True)
    (tmp_path / "usr.bin/Makefile").write_text("SUBDIR= id ls\n")
    (tmp_path / "usr.bin/ls/Makefile").write_text("PROG= ls\n")
    assert S.absent_subdirs(str(tmp_path)) == ["usr.bin/id"]
    lines = []
    out = S.prepare(str(tmp_path), lines.append)
    assert out["stand_ins"] == ["usr.bin/id"]
    mk = (tmp_path / "usr.bin/id/Makefile").read_text()
    assert mk.startswith(S.STAND_IN_MARK) and ".include <bsd.prog.mk>" in mk
    assert "lacks usr.bin/id" in lines[0]
    assert S.stand_ins(str(tmp_path), ["usr.bin/id", "usr.bin/ls", "usr.bin/x"]) == \
        ["usr.bin/id"]
    assert S.absent_subdirs(str(tmp_path)) == []
    assert S.prepare(str(tmp_path), lines.append)["stand_ins"] == [] and len(lines) == 1
