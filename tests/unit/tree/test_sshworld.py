"""rxl.tree.sshworld: the sshd userland's plan and its host build tools."""

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
    assert [s.name for s in stages] == ["world-ssh-includes", "world-ssh-build-tools",
                                        "world-ssh-libs", "world-ssh-build"]
    assert stages[1].argv[-1] == "_build-tools" and stages[1].argv[:2] == ("flock", "/L")
    assert W.plan_ssh_world("/src", lock=None)[2].argv[0] == "env"  # the caller holds it
    libs = stages[2].shell()  # /src lacks crypto/openssh/config.h: libraries, no libssh
    assert "SUBDIR_OVERRIDE=secure/lib/libcrypto" in libs and "secure/lib/libssh" not in libs
    assert "secure/lib/libcrypto" in libs.split("_prebuild_libs=")[1].split(" -D")[0]
    line = stages[3].shell()
    assert line.startswith("flock /L ") and f"MAKEOBJDIRPREFIX={tmp_path}/obj-ssh" in line
    assert "-DWITHOUT_KERBEROS" in line and "secure/usr.sbin/sshd" in line
    out = W.ssh_world_outputs("/src")
    assert out.programs["/usr/sbin/sshd"] == out.objtop / "secure/usr.sbin/sshd/sshd"
    assert "/bin/sh" in out.programs


def test_cross_built_tools_found_by_their_freebsd_marks(tmp_path):
    """A tool built for the guest (rtld-elf interpreter, FreeBSD ABI note) is found;
    the host's own ELF and a missing file are not (clang sets EI_OSABI 0 for both)."""
    elf = b"\x7fELF\x02\x01\x01\x00" + bytes(8)
    tinfo = tmp_path / "lib/ncurses/tinfo"
    tinfo.mkdir(parents=True)
    (tinfo / "make_keys").write_bytes(elf + b"\0" * 100 + b"/libexec/ld-elf.so.1\0")
    (tinfo / "make_hash").write_bytes(elf + b"\0" * 100 + b"/lib64/ld-linux-x86-64.so.2\0")
    (tmp_path / "bin/sh").mkdir(parents=True)
    (tmp_path / "bin/sh/mknodes").write_bytes(elf + b"\0" * 300 + b"FreeBSD\0")
    assert W.cross_built_tools(tmp_path) == [tinfo / "make_keys", tmp_path / "bin/sh/mknodes"]


def test_foreign_depends_name_another_trees_sources(tmp_path):
    """A seeded objdir's .depend naming the same file in another tree is found (bmake
    would link both copies); one naming this tree's, the host's headers or a
    generated file in the objdir is kept."""
    src = tmp_path / "src"
    (src / "contrib/file/src").mkdir(parents=True)
    (src / "contrib/file/src/print.c").write_text("")
    top = tmp_path / "obj/amd64.amd64"
    (top / "lib/libmagic").mkdir(parents=True)
    (top / "lib/libmagic/.depend.mkmagic").write_text(
        "mkmagic: /work/freebsd/contrib/file/src/print.c \\\n /usr/include/stdint.h\n")
    (src / "include").mkdir()
    (src / "include/stdio.h").write_text("")
    (top / "lib/libmagic/.depend.ok").write_text(
        f"mkmagic: {src}/contrib/file/src/print.c \\\n /usr/include/stdint.h "
        f"{top}/lib/libmagic/magic.h {top}/tmp/usr/include/stdio.h\n")
    (top / "usr.bin/awk").mkdir(parents=True)
    (top / "usr.bin/awk/.depend.maketab").write_text(
        "maketab: /elsewhere/contrib/one-true-awk/maketab.c\n")  # not a file of src
    assert W.foreign_depends(top, str(src)) == [top / "lib/libmagic/.depend.mkmagic"]


def test_openssh_config_present_needs_no_libraries_pass(tmp_path):
    """A tree with crypto/openssh/config.h (FreeBSD's own commits it) builds in three
    stages; the configure commands are freebsd-configure.sh's, cross, on the sysroot."""
    (tmp_path / "crypto/openssh").mkdir(parents=True)
    assert W.openssh_config_missing(str(tmp_path))
    (tmp_path / W.OPENSSH_CONFIG_H).write_text("/* config.h */\n")
    assert not W.openssh_config_missing(str(tmp_path))
    names = [s.name for s in W.plan_ssh_world(str(tmp_path), lock=None)]
    assert names == ["world-ssh-includes", "world-ssh-build-tools", "world-ssh-build"]
    cmds = W.openssh_configure_argv("/SR")
    assert [c[0] for c in cmds] == ["aclocal", "autoheader", "autoconf", "env"]
    conf = cmds[-1]
    assert "--host=x86_64-unknown-freebsd14.0" in conf and "--with-ssl-dir=/SR/usr" in conf
    assert any(a.startswith("CC=") and "--sysroot=/SR" in a for a in conf)
    assert "--without-kerberos5" in conf and "--with-pam" in conf


def test_openssh_config_drops_what_the_build_host_has():
    text = ('#define CONF_LASTLOG_FILE "/var/log/lastlog"\n#define HAVE_UTMPX_H 1\n'
            '#define CONF_WTMP_FILE "/var/log/wtmp"\n/* #undef CONF_UTMP_FILE */\n')
    got = W.openssh_config_for_freebsd(text).splitlines()
    assert got[1] == "#define HAVE_UTMPX_H 1" and got[3] == "/* #undef CONF_UTMP_FILE */"
    assert not any(l.startswith("#define CONF_") for l in got)


def test_openssh_config_drops_the_cross_assumptions_and_linux_proc():
    """configure.ac: ``test -d "/proc/$$/fd"`` (true in the Linux shell that runs it) and
    the struct dirent run test's cross default; FreeBSD has neither (procfs(5) has no fd
    directory; d_name is MAXNAMLEN + 1 = 256 bytes): both undefined, the rest kept."""
    text = ("#define HAVE_PROC_PID 1\n#define BROKEN_ONE_BYTE_DIRENT_D_NAME 1\n"
            "#define BROKEN_STRNVIS 1\n#define HAVE_PROC_PIDINFO 1\n")
    got = W.openssh_config_for_freebsd(text).splitlines()
    assert got == [
        "/* #undef HAVE_PROC_PID (found on the build host; FreeBSD has none) */",
        "/* #undef BROKEN_ONE_BYTE_DIRENT_D_NAME (assumed when cross compiling; "
        "not so on FreeBSD) */",
        "#define BROKEN_STRNVIS 1", "#define HAVE_PROC_PIDINFO 1"]


def test_openssh_10_trees_build_and_stage_sshd_session_and_auth(tmp_path):
    """15.0's sshd (OpenSSH 10.0) execs /usr/libexec/sshd-session and sshd-auth; a 14
    tree has neither directory and builds neither."""
    fourteen = tmp_path / "14"
    fifteen = tmp_path / "15"
    for t in (fourteen, fifteen):
        (t / "secure/usr.sbin/sshd").mkdir(parents=True)
    for d in ("sshd-session", "sshd-auth"):
        (fifteen / "secure/libexec" / d).mkdir(parents=True)
    sub15 = W.ssh_make_vars(src=str(fifteen))["SUBDIR_OVERRIDE"].split()
    sub14 = W.ssh_make_vars(src=str(fourteen))["SUBDIR_OVERRIDE"].split()
    assert {"secure/libexec/sshd-session", "secure/libexec/sshd-auth"} <= set(sub15)
    assert not [d for d in sub14 if d.startswith("secure/libexec/sshd-")]
    progs = W.ssh_world_outputs(str(fifteen), str(tmp_path / "obj")).programs
    assert str(progs["/usr/libexec/sshd-session"]).endswith(
        "secure/libexec/sshd-session/sshd-session")
    assert "/usr/libexec/sshd-auth" in progs
    assert "/usr/libexec/sshd-session" not in W.ssh_world_outputs(
        str(fourteen), str(tmp_path / "obj")).programs


def test_the_lua_loader_is_a_product_of_the_ssh_userland(tmp_path):
    """An SSH root boots loader_lua.efi: a userland without it (a tree seeded from a
    store that kept only the programs and loader_simp.efi) is not built, so the world
    stage builds it rather than the image stage failing (2026-12-04, 15 as SRC)."""
    out = W.ssh_world_outputs("/src", str(tmp_path / "obj"))
    for p in [out.loader_efi, *out.programs.values()]:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x")
    lua = out.objtop / "stand/efi/loader_lua/loader_lua.efi"
    assert out.missing() == [str(lua)]
    lua.parent.mkdir(parents=True)
    lua.write_bytes(b"x")
    assert out.missing() == []
