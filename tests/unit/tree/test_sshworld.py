"""rxl.tree.sshworld: the sshd userland's plan (not yet built)."""

from rxl.tree import sshworld as W
from rxl.tree.world import GENERIC_LIBS, PREBUILD_LIBS, SUBDIRS


def test_plan_widens_the_narrowed_world():
    v = W.ssh_make_vars()
    subdirs = v["SUBDIR_OVERRIDE"].split()
    assert subdirs[:len(SUBDIRS)] == list(SUBDIRS)
    for objpath in W.SSHD_PROGRAMS.values():
        assert objpath.rsplit("/", 1)[0] in subdirs
    assert len(subdirs) == len(set(subdirs))
    assert v["_prebuild_libs"].split() == list(PREBUILD_LIBS + W.SSHD_PREBUILD_LIBS)
    assert v["_generic_libs"].split() == list(GENERIC_LIBS + W.SSHD_GENERIC_LIBS)
    assert all(v[o] is None for o in W.SSHD_MAKE_OPTIONS)


def test_own_objdir_and_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path))
    stages = W.plan_ssh_world("/src", lock="/L")
    assert [s.name for s in stages] == ["world-ssh-includes", "world-ssh-build"]
    line = stages[1].shell()
    assert line.startswith("flock /L ") and f"MAKEOBJDIRPREFIX={tmp_path}/obj-ssh" in line
    assert "-DWITHOUT_KERBEROS" in line and "secure/usr.sbin/sshd" in line
    out = W.ssh_world_outputs("/src")
    assert out.programs["/usr/sbin/sshd"] == out.objtop / "secure/usr.sbin/sshd/sshd"
    assert "/bin/sh" in out.programs
