"""Unit tests for rxl.tree.build's pure parts (no FreeBSD tree needed)."""

import shlex
from pathlib import Path

import shutil

import pytest

from rxl.tree import build as B
from rxl.tree import kernconf
from fakefreebsd import version_files


def test_make_py_argv_shape():
    argv = B.make_py_argv("/usr/src", "/work/obj", ["buildworld"],
                          {"SUBDIR_OVERRIDE": "bin/sh", "WORLDFAST": None})
    assert argv == [
        "env", "MAKEOBJDIRPREFIX=/work/obj", "python3",
        "/usr/src/tools/build/make.py",
        "--cross-bindir=/usr/lib/llvm-16/bin",
        "TARGET=amd64", "TARGET_ARCH=amd64", "-j2",
        "SUBDIR_OVERRIDE=bin/sh", "-DWORLDFAST", "buildworld"]


def test_make_py_argv_relative_paths_become_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = B.make_py_argv("src", "obj", ["kernel-toolchain"], jobs=4)
    assert argv[1] == f"MAKEOBJDIRPREFIX={tmp_path / 'obj'}"
    assert argv[3] == str(tmp_path / "src/tools/build/make.py")
    assert "-j4" in argv


@pytest.mark.parametrize("kwargs,msg", [
    (dict(targets=[]), "no targets"),
    (dict(targets=["x"], jobs=0), "jobs"),
    (dict(targets=["x"], make_vars={"-n": "1"}), "bad make variable"),
    (dict(targets=["x"], make_vars={"A B": "1"}), "bad make variable"),
])
def test_make_py_argv_errors(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        B.make_py_argv("/s", "/o", **kwargs)


def test_locked_argv():
    assert B.locked_argv(["a", "b"], "/l") == ["flock", "/l", "a", "b"]
    assert B.locked_argv(["a"], None) == ["a"]


def test_kernconf_text():
    text = kernconf.kernconf_text()
    lines = text.splitlines()
    assert "include\tGENERIC" in lines
    assert "ident\tRXL" in lines
    for opt in ("INVARIANTS", "INVARIANT_SUPPORT", "WITNESS"):
        assert f"options \t{opt}" in lines
    # The counting cases (tests/atf) need epair(4) built in: RXL is NO_MODULES.
    assert "device \tepair" in lines
    assert text.endswith("\n")
    with pytest.raises(ValueError):
        kernconf.kernconf_text("rxl lower")


def test_kernconf_and_kernel_paths():
    assert kernconf.kernconf_path("/s") == Path("/s/sys/amd64/conf/RXL")
    assert B.kernel_path("/work/freebsd", "/work/obj") == Path(
        "/work/obj/work/freebsd/amd64.amd64/sys/RXL/kernel")


def test_plan_stages_first_build():
    st = B.plan_stages("/s", "/o", toolchain=True)
    assert [s.name for s in st] == ["kernel-toolchain", "buildkernel-RXL"]
    assert st[0].argv[:2] == ("flock", B.DEFAULT_LOCK)
    assert st[0].argv[-1] == "kernel-toolchain"
    k = st[1].argv
    assert k[-1] == "buildkernel"
    assert "KERNCONF=RXL" in k and "NO_MODULES=yes" in k
    assert "-DNO_KERNELCLEAN" in k
    assert "-DKERNFAST" not in k      # it would skip config(8)


def test_plan_stages_toolchain_done_and_clean():
    st = B.plan_stages("/s", "/o", toolchain=False, clean_kernel=True,
                       lock=None, kernconf="GENERIC")
    assert [s.name for s in st] == ["buildkernel-GENERIC"]
    assert st[0].argv[0] == "env"
    assert "-DNO_KERNELCLEAN" not in st[0].argv
    assert shlex.split(st[0].shell()) == list(st[0].argv)


def test_toolchain_done_marker(tmp_path):
    assert not B.toolchain_done(tmp_path)
    (tmp_path / B.TOOLCHAIN_DONE).touch()
    assert B.toolchain_done(tmp_path)
    # Per source tree: its own object tree must hold the metadata.
    assert not B.toolchain_done(tmp_path, "/usr/src")
    meta = tmp_path / "usr/src/amd64.amd64/toolchain-metadata.mk"
    meta.parent.mkdir(parents=True)
    meta.touch()
    assert B.toolchain_done(tmp_path, "/usr/src")
    assert not B.toolchain_done(tmp_path, "/other/src")


def test_run_stage_logs_and_raises(tmp_path):
    ok = B.Stage("ok", ("sh", "-c", "echo '>>> stage 1'; echo hidden"))
    seen = []
    res = B.run_stage(ok, tmp_path, seen.append)
    assert res.rc == 0
    log = (tmp_path / "ok.log").read_text()
    assert "hidden" in log and ">>> stage 1" in log
    assert any(">>> stage 1" in s for s in seen)
    assert not any("hidden" in s for s in seen)
    bad = B.Stage("bad", ("sh", "-c", "exit 3"))
    with pytest.raises(B.BuildError, match="exit 3") as ei:
        B.run_stage(bad, tmp_path, seen.append)
    assert ei.value.log == tmp_path / "bad.log"


def test_bmake_config_is_make_py_string(tmp_path):
    # tools/build/make.py: ' '.join(shlex.quote(x) for x in configure_args).
    inst = tmp_path / "bmake-install"
    assert B.bmake_config(tmp_path) == (
        f"--with-default-sys-path=.../share/mk:{inst}/share/mk --with-machine=amd64 "
        f"--without-filemon --prefix={inst}")


def test_bootstrap_argvs_skip_only_the_unit_tests(tmp_path):
    steps = B.bootstrap_bmake_argvs("/src", tmp_path)
    cmds = [argv for _, argv in steps]
    assert [c[-1] for c in cmds] == ["op=configure", "./make-bootstrap.sh", "tested",
                                     "op=install"]
    assert cmds[0][:2] == ["sh", "/src/contrib/bmake/boot-strap"]
    assert f"--prefix={tmp_path / 'bmake-install'}" in cmds[3]
    # The mark is made where boot-strap looks for it: its --objdir.
    assert steps[2][0] == Path(cmds[3][cmds[3].index("--objdir") + 1])


def test_make_py_stage_names_its_tree(tmp_path):
    argv = B.make_py_argv("/s/rc", tmp_path, ["buildkernel"], cross_bindir="/usr/bin")
    assert B._make_py_tree(argv) == ("/s/rc", str(tmp_path))
    assert B._make_py_tree(("sh", "-c", "true")) is None


def test_bootstrap_needs_a_tree_with_bmake(tmp_path):
    assert B.bmake_version(tmp_path) is None
    assert B.bootstrap_bmake(tmp_path, tmp_path / "obj", tmp_path) is False
    assert not (tmp_path / "obj").exists()


BMAKE_TREE = Path("/work/cache/base-2ec8aa904381")


@pytest.mark.skipif(not (BMAKE_TREE / "contrib/bmake/boot-strap").is_file(),
                    reason="needs a FreeBSD tree's contrib/bmake (the lead's build host)")
def test_bootstrap_gives_a_bmake_make_py_takes(tmp_path):
    # A copy with executable bits: the snapshot has none until rxl.tree.snapshot
    # prepares a tree, and the base clone is never prepared.
    tree = tmp_path / "src"
    shutil.copytree(BMAKE_TREE / "contrib/bmake", tree / "contrib/bmake")
    for f in (tree / "contrib/bmake").rglob("*"):
        if f.is_file():
            f.chmod(0o755)
    obj = tmp_path / "obj"
    seen = []
    assert B.bootstrap_bmake(tree, obj, tmp_path, seen.append) is True
    assert B.bmake_current(tree, obj)
    log = (tmp_path / "bmake-bootstrap.log").read_text()
    assert "Failed tests" not in log and "op=install" in log
    assert any("without its unit tests" in s for s in seen)
    # Current now: a second call does nothing.
    assert B.bootstrap_bmake(tree, obj, tmp_path, seen.append) is False


def test_build_kernel_refuses_non_tree(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a FreeBSD source tree"):
        B.build_kernel(tmp_path, tmp_path / "obj", logdir=tmp_path)


def _tree(tmp_path, conf=True):
    src = tmp_path / "src"
    (src / "tools/build").mkdir(parents=True)
    (src / "tools/build/make.py").write_text("# stand-in\n")
    (src / ("sys/amd64/conf" if conf else "sys")).mkdir(parents=True)
    version_files(src)  # a tree that says its release (rxl.tree.version)
    return src


def test_build_cli_objdir_under_a_file_is_one_line(tmp_path):
    from click.testing import CliRunner
    from rxl.tree.cli import build
    src = _tree(tmp_path)
    (tmp_path / "file").write_text("")
    res = CliRunner().invoke(build, ["--src", str(src), "--objdir",
                                     str(tmp_path / "file/x"), "--logdir",
                                     str(tmp_path / "logs"), "--lock", ""])
    # refused before anything, as run refuses it (check_out_dir): bad input, exit 2
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit)
    (line,) = res.output.strip().splitlines()
    assert "'--objdir'" in line and f"cannot be created, {tmp_path / 'file'} is a file" in line
    assert not (src / "sys/amd64/conf/RXL").exists()   # nothing written


def test_build_cli_bad_rxl_work_is_one_line(tmp_path):
    import os
    import subprocess
    import sys
    src = _tree(tmp_path)
    (tmp_path / "file").write_text("")
    env = dict(os.environ, RXL_WORK=str(tmp_path / "file/x"))
    cp = subprocess.run([sys.executable, "-m", "rxl", "build", "--src", str(src)],
                        env=env, capture_output=True, text=True)
    # refused before any command, as bad input (rxl.cli.options.check_work_root)
    assert cp.returncode == 2 and "Traceback" not in cp.stderr, cp.stderr
    (line,) = cp.stderr.strip().splitlines()
    assert line == (f"Error: RXL_WORK {tmp_path / 'file/x'}: cannot be created, "
                    f"{tmp_path / 'file'} is not a directory")


def test_build_kernel_checks_the_tree_before_making_dirs(tmp_path):
    src = _tree(tmp_path, conf=False)
    with pytest.raises(FileNotFoundError, match="no sys/amd64/conf"):
        B.build_kernel(src, tmp_path / "obj", logdir=tmp_path / "logs", lock=None)
    assert not (tmp_path / "obj").exists()


def test_a_failed_stage_names_the_line_before_makes_first_error(tmp_path):
    """A bare Debian 12 failed kernel-toolchain with only 'exit 2; full log'
    on the console; the cause sat in the log above bmake's error lines."""
    bad = B.Stage("kernel-toolchain", ("sh", "-c", "echo '--- host-symlinks ---'; "
                  "echo \"Cannot find host tool 'time' in PATH (/usr/bin).\"; "
                  "echo '*** [host-symlinks] Error code 1'; echo; "
                  "echo 'bmake[3]: stopped in /src/tools/build'; "
                  "echo '*** [_worldtmp] Error code 2'; exit 2"))
    with pytest.raises(B.BuildError) as ei:
        B.run_stage(bad, tmp_path, lambda s: None)
    assert str(ei.value).startswith("kernel-toolchain failed (exit 2): Cannot find host "
                                    "tool 'time' in PATH (/usr/bin).; full log: ")
    assert ei.value.cause == "Cannot find host tool 'time' in PATH (/usr/bin)."
    long = B.Stage("x", ("sh", "-c", f"echo {'y' * 500}; echo '*** [a] Error code 1'; exit 1"))
    with pytest.raises(B.BuildError, match=r"y{200}\.\.\.; full log"):
        B.run_stage(long, tmp_path, lambda s: None)


@pytest.mark.parametrize("kernconf, why", [
    ("../x", "not a kernel config name"), ("A B", "not a kernel config name"),
    ("", "an empty value"), (".hidden", "not a kernel config name"),
    ("-x", "not a kernel config name"), ("GENERIC;id", "not a kernel config name"),
    ("NOSUCH", "NOSUCH: no such config in"),
])
def test_build_refuses_a_kernconf_it_cannot_build_even_in_a_dry_run(tmp_path, kernconf, why):
    """--kernconf names one file of sys/amd64/conf: a path, a blank (make would read
    two configs), or a config the tree lacks is a bad option value, exit 2, with
    nothing written; RXL (which the build writes) and a config the tree has pass."""
    from click.testing import CliRunner
    from rxl.tree.cli import build
    src = _tree(tmp_path)
    (src / "sys/amd64/conf/GENERIC").write_text("ident GENERIC\n")
    for dry in (["--dry-run"], []):
        res = CliRunner().invoke(build, ["--src", str(src), "--objdir", str(tmp_path / "obj"),
                                         "--logdir", str(tmp_path / "logs"), "--lock", "",
                                         "--kernconf", kernconf, *dry])
        assert res.exit_code == 2, res.output
        (line,) = res.output.strip().splitlines()
        assert line.startswith("Error: Invalid value for '--kernconf': ") and why in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]
    assert sorted(p.name for p in (src / "sys/amd64/conf").iterdir()) == ["GENERIC"]
    for ok in ("GENERIC", "RXL"):
        res = CliRunner().invoke(build, ["--src", str(src), "--objdir", str(tmp_path / "obj"),
                                         "--lock", "", "--kernconf", ok, "--dry-run"])
        assert res.exit_code == 0 and f"KERNCONF={ok}" in res.output, res.output


def test_dry_run_lines_bootstrap_each_objdir_before_its_first_stage(tmp_path):
    """run_stage bootstraps a make.py stage's objdir's bmake first: the printed
    plan shows those commands, once per objdir, before that objdir's first stage."""
    a = B.Stage("one", tuple(B.make_py_argv("/s/a", tmp_path / "o1", ["buildkernel"],
                                            cross_bindir="/usr/bin")))
    b = B.Stage("two", tuple(B.make_py_argv("/s/a", tmp_path / "o1", ["installkernel"],
                                            cross_bindir="/usr/bin")))
    c = B.Stage("three", tuple(B.make_py_argv("/s/b", tmp_path / "o2", ["buildkernel"],
                                              cross_bindir="/usr/bin")))
    plain = B.Stage("plain", ("true",))
    lines = B.shell_lines([plain, a, b, c])
    assert lines[0] == "true"
    boots = [i for i, ln in enumerate(lines) if "boot-strap" in ln]
    assert len(boots) == 4     # configure and install, for each of the two objdirs
    assert lines.index(a.shell()) > boots[1] and lines.index(c.shell()) > boots[3]
    assert boots[2] > lines.index(b.shell())
    assert sum(ln.startswith("# bmake bootstrap of") for ln in lines) == 2
    assert f"cd {tmp_path / 'o2' / 'bmake-build' / 'obj'} && sh ./make-bootstrap.sh" in lines


def test_learn_world_lines_bootstrap_before_the_toolchain(tmp_path):
    """rxl learn's dry run: the objdir's bmake bootstrap comes before its first
    make.py stage, the kernel-toolchain, as run_stage runs them."""
    from rxl.learn import session
    lines = session.world_lines("/s/a", str(tmp_path / "obj"))
    first = next(i for i, ln in enumerate(lines) if "kernel-toolchain" in ln)
    boot = [i for i, ln in enumerate(lines) if "boot-strap" in ln]
    assert boot and max(boot) < first
    assert sum(ln.startswith("# bmake bootstrap of") for ln in lines) == 1
