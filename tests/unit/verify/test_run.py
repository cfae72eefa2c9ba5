"""rxl run / parse / doctor (CLI, dry run) and the pure parts of rxl.tree.world."""

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from rxl.cli.main import main
from rxl.verify.ownguest import boots
from rxl.verify.request import RunRequest
from rxl.tree.world import (ATF_GENERATED, atf_config_h, atf_defs_h, ensure_atf_headers,
                       missing_atf_headers, plan_world, atf_cc_argv,
                       includes_check_only_failure, world_make_vars, world_outputs)
from fakefreebsd import kernel_bytes

DATA = Path(__file__).resolve().parents[2] / "data" / "console"
DEFS_IN = """#if !defined(ATF_C_DEFS_H)
#define ATF_DEFS_ATTRIBUTE_FORMAT_PRINTF(a, b) @ATTRIBUTE_FORMAT_PRINTF@
#define ATF_DEFS_ATTRIBUTE_NORETURN @ATTRIBUTE_NORETURN@
#define ATF_DEFS_ATTRIBUTE_UNUSED @ATTRIBUTE_UNUSED@
#endif
"""


REPO = Path(__file__).resolve().parents[3]


def copy_series_files(src):
    """Put every sys/ file the series adds (from patches/: in_pcblb.c is in
    no project directory) into a fake tree."""
    from rxl.tree import patch as tree_patch
    added = tree_patch.series_added_files(tree_patch.load_series(REPO / "patches"))
    for rel, text in added.items():
        if rel.startswith("sys/"):
            dest = src / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text)


@pytest.fixture
def fake_tree(tmp_path):
    """Just enough of a FreeBSD tree for the dry run: make.py, sys/ with the
    series' files (not a git tree), defs.h.in."""
    src = tmp_path / "src"
    (src / "tools/build").mkdir(parents=True)
    (src / "tools/build/make.py").write_text("# stand-in\n")
    (src / "sys/amd64/conf").mkdir(parents=True)
    copy_series_files(src)
    (src / "contrib/atf/atf-c").mkdir(parents=True)
    (src / "contrib/atf/atf-c/defs.h.in").write_text(DEFS_IN)
    (tmp_path / "pk").write_bytes(kernel_bytes() + b"pristine")  # a plain tree needs one (PK)
    return src


def PK(tmp_path):
    """--pristine-kernel for the plain fake tree (no pristine kernel can be built
    from a tree that is not a git clone, so rxl run refuses it without one)."""
    return ["--pristine-kernel", str(tmp_path / "pk")]


def git_tree(src, commits=1):
    """Make ``src`` (make.py, sys/) a git tree with ``commits`` commits; their hashes."""
    import subprocess
    git = ["git", "-C", str(src), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q"], check=True)
    out = []
    for i in range(commits):
        (src / "sys" / f"c{i}.c").write_text(f"int c{i};\n")
        subprocess.run(git + ["add", "."], check=True)
        subprocess.run(git + ["commit", "-qm", f"c{i}"], check=True)
        out.append(subprocess.run(git + ["rev-parse", "HEAD"], check=True, capture_output=True,
                                  text=True).stdout.strip())
    return out


# ------------------------------------------------------------------ world
def test_world_make_vars_and_plan():
    v = world_make_vars()
    assert v["WORLDFAST"] is None
    assert v["SUBDIR_OVERRIDE"].split()[:3] == ["libexec/rtld-elf", "bin/sh", "sbin/init"]
    assert "stand" in v["SUBDIR_OVERRIDE"].split()
    assert "lib/atf/libatf-c" in v["_generic_libs"].split()
    inc, bw = plan_world("/s", "/o", lock="/l")
    assert inc.name == "world-includes" and bw.name == "world-build"
    assert inc.argv[:2] == ("flock", "/l") and inc.argv[-1] == "_includes"
    assert bw.argv[-1] == "buildworld" and "-DWORLDFAST" in bw.argv
    assert "env" in bw.argv and "MAKEOBJDIRPREFIX=/o" in bw.argv


def test_world_outputs_paths():
    w = world_outputs("/work/freebsd", "/work/obj")
    assert str(w.sysroot) == "/work/obj/work/freebsd/amd64.amd64/tmp"
    assert str(w.loader_efi).endswith("stand/efi/loader_simp/loader_simp.efi")
    assert str(w.programs["/bin/sh"]).endswith("amd64.amd64/bin/sh/sh")


def test_atf_headers_generated_and_announced(fake_tree, tmp_path):
    assert missing_atf_headers(str(fake_tree)) == list(ATF_GENERATED)
    said = []
    out = ensure_atf_headers(str(fake_tree), str(tmp_path / "obj"), said.append)
    names = sorted(p.name for p in out)
    assert names == ["config.h", "defs.h", "defs.h"]
    assert len(said) == 2 and all("lacks" in s and "generated" in s for s in said)
    defs = [p for p in out if p.parent.name == "atf-c"][0].read_text()
    assert "__attribute__((__noreturn__))" in defs and "@" not in defs
    # A tree that has both headers: nothing written, nothing said.
    for rel in ATF_GENERATED:
        (fake_tree / rel).write_text("")
    said.clear()
    assert ensure_atf_headers(str(fake_tree), str(tmp_path / "obj2"), said.append) == []
    assert said == []


def test_atf_config_and_defs_text():
    c = atf_config_h("0.22")
    assert '#define PACKAGE_STRING "Automated Testing Framework 0.22"' in c
    assert "HAVE_OPTRESET 1" in c and "HAVE_GNU_GETOPT" not in c
    with pytest.raises(ValueError, match="NEW_THING"):
        atf_defs_h("x @NEW_THING@")


def test_includes_check_only_failure():
    log = ("/o/tmp/usr/include/net/iflib_spread.h:53:1: error: unknown type name 'u_int'\n"
           "bmake[3]: stopped in /s/tools/build/test-includes\n"
           "bmake[2]: stopped in /s\n")
    assert includes_check_only_failure(log, "/s") == ["net/iflib_spread.h"]
    assert includes_check_only_failure(log + "bmake[5]: stopped in /s/lib/atf/libatf-c\n",
                                      "/s") is None
    assert includes_check_only_failure("bmake: stopped in /s\n", "/s") is None


def test_atf_cc_argv_static_against_sysroot():
    argv = atf_cc_argv("t.c", "t", "/sys")
    assert "--target=x86_64-unknown-freebsd14.0" in argv and "--sysroot=/sys" in argv
    assert "-static" in argv and argv[-1] == "-lprivateatf-c"


# ------------------------------------------------------------------ run
def _opts(**kw):
    base = dict(src="/s", objdir="/o", out="/out", guest_dir="/g", kernel=None,
                pristine_kernel=None, spread=True, case_timeout=60, new_programs=(),
                extra_tests=(), memory_mib=1024, dry_run=True, rebuild_world=False)
    base.update(kw)
    return RunRequest(**base)


def test_boots_patched_spread_pristine():
    assert [b[0] for b in boots(_opts(), "/k")] == ["patched", "spread"]
    b = boots(_opts(pristine_kernel="/p", spread=False), "/k")
    assert b == [("patched", "/k", {}), ("pristine", "/p", {})]
    assert boots(_opts(), "/k")[1][2] == {"dev.igb.0.iflib.core_spread": "1"}


def test_run_dry_run_prints_every_command(fake_tree, tmp_path):
    res = CliRunner().invoke(main, ["run", "--src", str(fake_tree), "--objdir",
                                    str(tmp_path / "obj"), "--out", str(tmp_path / "out"),
                                    "--guest-dir", str(tmp_path / "g"), "--dry-run",
                                    *PK(tmp_path)])
    assert res.exit_code == 0, res.output
    out = res.output
    assert "buildkernel" in out and "_includes" in out and "buildworld" in out
    assert "-lprivateatf-c" in out
    assert out.count("qemu-system-x86_64 -machine q35,accel=tcg") == 3
    assert "-smp 32,sockets=2,dies=2,cores=4,threads=2" in out   # the default guest
    assert not (tmp_path / "g").exists()  # a dry run stages nothing


@pytest.mark.parametrize("transport", ["ssh", "serial", "auto"])
def test_run_transports_dry_run(fake_tree, tmp_path, monkeypatch, transport):
    # ssh: the sshd userland (own objdir), QEMU forwarding a port to 22 and
    # rebooting allowed, the cases over SSH; serial: the old argv with -no-reboot
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "w"))
    args = ["run", "--src", str(fake_tree), "--objdir", str(tmp_path / "obj"), "--out",
            str(tmp_path / "out"), "--guest-dir", str(tmp_path / "g"), "--dry-run",
            *PK(tmp_path), "--transport", transport]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    qemu = [ln for ln in res.output.splitlines() if ln.startswith("qemu-system-x86_64")]
    assert len(qemu) == 3
    if transport == "auto":  # make run's default: SSH, the userland built first
        assert "transport: ssh (the world stage builds the sshd userland with kyua" \
            in res.output
        assert res.output.count("the serial path (root ") == 3     # auto's fallback
    if transport in ("ssh", "auto"):
        assert "secure/usr.sbin/sshd" in res.output and f"{tmp_path}/w/obj-ssh" in res.output
        assert "usr.bin/kyua" in res.output and "lib/libsqlite3" in res.output
        assert all("hostfwd=tcp:127.0.0.1:" in q and "-no-reboot" not in q for q in qemu)
        assert res.output.count("sh /var/tmp/rxl/run.sh") == 3
        assert res.output.count("(waiting up to 300 s)") == 3
        # asked for by name: no fallback to the serial console (docs/design.md)
        assert res.output.count("a failed boot (--transport ssh: no fallback)") == \
            (3 if transport == "ssh" else 0)
    else:
        assert "secure/usr.sbin/sshd" not in res.output
        assert all("hostfwd" not in q and "-no-reboot" in q for q in qemu)
    assert not (tmp_path / "g").exists()


def test_run_not_a_tree_is_one_line_error(tmp_path):
    res = CliRunner().invoke(main, ["run", "--src", str(tmp_path), "--out",
                                    str(tmp_path / "out"), "--dry-run"])
    assert res.exit_code == 2
    assert "Invalid value for '--src'" in res.output
    assert "is not a FreeBSD source tree" not in res.output  # said once, without "is"
    assert "not a FreeBSD source tree (no tools/build/make.py and no sys/)" in res.output
    res = CliRunner().invoke(main, ["run", "--src", str(tmp_path / "absent"), "--dry-run"])
    assert res.exit_code == 2 and "absent: no such directory" in res.output


def test_run_missing_kernel(fake_tree, tmp_path):
    res = CliRunner().invoke(main, ["run", "--src", str(fake_tree), "--kernel",
                                    str(tmp_path / "nope"), "--out", str(tmp_path / "o"),
                                    *PK(tmp_path)])
    assert res.exit_code == 2 and "'--kernel'" in res.output and "no such kernel" in res.output
    assert not (tmp_path / "o").exists()          # refused before the series stage


def test_parse_cli_table_json_and_exit_status():
    r = CliRunner()
    ok = r.invoke(main, ["parse", str(DATA / "synthetic-pass.log")])
    assert ok.exit_code == 0 and "so_reuseport_lb_test:basic_ipv4  passed" in ok.output
    bad = r.invoke(main, ["parse", str(DATA / "synthetic-fail.log"), "--json"])
    assert bad.exit_code == 1
    assert json.loads(bad.stdout)["cases"][1]["status"] == "failed"
    assert bad.stderr == "Error: 1 of 1 run did not pass: pristine: failed 1 of 2 cases\n"
    tr = r.invoke(main, ["parse", str(DATA / "synthetic-truncated.log")])
    assert tr.exit_code == 1 and "crashed" in tr.output
    missing = r.invoke(main, ["parse", "/nonexistent.log"])
    assert missing.exit_code != 0


def test_series_tests_found_in_atf_dir(tmp_path):
    from rxl.tree.world import series_tests
    (tmp_path / "b_test.c").write_text("")
    (tmp_path / "a_test.c").write_text("")
    (tmp_path / "helper.c").write_text("")
    assert series_tests(str(tmp_path)) == [("a_test", str(tmp_path / "a_test.c")),
                                           ("b_test", str(tmp_path / "b_test.c"))]
    assert series_tests("") == []


def test_atf_dir_missing_or_empty_is_an_error(fake_tree, tmp_path):
    """A mistyped --atf-dir must not drop the series' tests from the verdict."""
    args = ["run", "--src", str(fake_tree), "--objdir", str(tmp_path / "obj"), "--out",
            str(tmp_path / "out"), "--guest-dir", str(tmp_path / "g"), "--dry-run",
            *PK(tmp_path)]
    res = CliRunner().invoke(main, args + ["--atf-dir", str(tmp_path / "nonexistent")])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "--atf-dir" in res.output and "no such directory" in res.output
    (tmp_path / "empty").mkdir()
    res = CliRunner().invoke(main, args + ["--atf-dir", str(tmp_path / "empty")])
    assert res.exit_code == 2 and "no *_test.c" in res.output
    res = CliRunner().invoke(main, args + ["--atf-dir", ""])
    assert res.exit_code == 0, res.output
    assert "_test.c" not in res.output.replace("so_reuseport_lb_test.c", "")


def test_failed_stage_keeps_a_stage_log(fake_tree, tmp_path, monkeypatch):
    from rxl.verify.machine import Machine
    from rxl.verify.pipeline import StageFailed
    out = tmp_path / "out"
    kernel = tmp_path / "kernel"
    kernel.write_bytes(kernel_bytes())

    def lost(self, opts, st):  # the kernel passed the preflight, then went away
        raise StageFailed(f"build: --kernel {opts.kernel}: no such file")
    monkeypatch.setattr(Machine, "build_patched", lost)
    res = CliRunner().invoke(main, ["run", "--src", str(fake_tree), "--kernel",
                                    str(kernel), "--out", str(out), *PK(tmp_path)])
    assert res.exit_code == 1, res.output
    assert (out / "stage-series.log").read_text().startswith("stage: series\nstatus: ok")
    build_log = (out / "stage-build.log").read_text()
    assert "status: failed" in build_log and "no such file" in build_log


def test_kernel_cache_follows_tree_and_file(tmp_path):
    import os
    import subprocess
    from rxl.verify.kernels import kernel_cached, kernel_stamp_text
    src = tmp_path / "src"
    (src / "sys").mkdir(parents=True)
    (src / "sys/a.c").write_text("int a;\n")
    git = ["git", "-C", str(src), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "x"], check=True)
    k = tmp_path / "kernel"
    k.write_bytes(kernel_bytes())
    assert not kernel_cached(str(src), str(k))
    (tmp_path / "kernel.rxl-stamp").write_text(kernel_stamp_text(str(src), str(k)))
    assert kernel_cached(str(src), str(k))
    (src / "sys/a.c").write_text("int b;\n")          # uncommitted change under sys/
    assert not kernel_cached(str(src), str(k))
    (src / "sys/a.c").write_text("int a;\n")
    assert kernel_cached(str(src), str(k))
    os.utime(k, ns=(1, 1))                             # someone rebuilt the kernel
    assert not kernel_cached(str(src), str(k))
    os.utime(k, ns=(2, 2))
    (tmp_path / "kernel.rxl-stamp").write_text(kernel_stamp_text(str(src), str(k)))
    (src / "sys/a.c").write_bytes(b"/* \xb5s */ int a;\n")  # Latin-1, not UTF-8
    assert not kernel_cached(str(src), str(k))
    latin1 = kernel_stamp_text(str(src), str(k))
    (src / "sys/a.c").write_bytes(b"/* \xb6s */ int a;\n")
    assert kernel_stamp_text(str(src), str(k)) != latin1  # the bytes, not a lossy decoding


def test_kernel_cache_follows_the_test_config(tmp_path, monkeypatch):
    """The RXL config is written by the build, not committed: a kernel built
    before the config gained a device (epair, 2026-12-06) was reused as the
    pristine kernel without it, and count_unhashed was skipped there. A stamp
    holds the config's text, so a changed config is a rebuild."""
    import subprocess
    from rxl.tree import kernconf
    from rxl.verify import kernels
    src = tmp_path / "src"
    (src / "sys").mkdir(parents=True)
    (src / "sys/a.c").write_text("int a;\n")
    git = ["git", "-C", str(src), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "x"], check=True)
    k = tmp_path / "obj/sys/RXL/kernel"
    k.parent.mkdir(parents=True)
    k.write_bytes(kernel_bytes())
    Path(str(k) + ".rxl-stamp").write_text(kernels.kernel_stamp_text(str(src), str(k)))
    assert kernels.kernel_cached(str(src), str(k))
    old = kernconf.kernconf_text
    monkeypatch.setattr(kernels, "kernconf_text",
                        lambda ident: old(ident, devices=("epair", "vlan")))
    assert not kernels.kernel_cached(str(src), str(k))
    monkeypatch.setattr(kernels, "kernconf_text", old)
    assert kernels.kernel_cached(str(src), str(k))
    g = tmp_path / "obj/sys/GENERIC/kernel"                # a tracked config: git's
    g.parent.mkdir(parents=True)
    g.write_bytes(kernel_bytes())
    Path(str(g) + ".rxl-stamp").write_text(kernels.kernel_stamp_text(str(src), str(g)))
    monkeypatch.setattr(kernels, "kernconf_text", lambda ident: 1 / 0)
    assert kernels.kernel_cached(str(src), str(g))


def _fake_series(tmp_path, monkeypatch, applied):
    """A git tree at a fake base (rxl.tree.base's test series), patches/ for it, the
    run pointed at them; with ``applied`` the series is committed in the tree."""
    import subprocess
    from rxl.tree import base as base_mod
    from rxl.verify import kernels
    from fakefreebsd import _series, _tree
    src = tmp_path / "src"
    base = _tree(src)
    patches = _series(tmp_path, src, base)
    if applied:
        subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "-C", str(src),
                        "am", "-q", *map(str, sorted(patches.glob("0*.patch")))], check=True)
    monkeypatch.setattr(base_mod, "REPO_PATCHES", patches)
    monkeypatch.setattr(kernels, "series_base", lambda: base)
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "work"))
    return src, base


def test_dry_run_plans_the_pristine_checkout_from_base(tmp_path, monkeypatch):
    src, base = _fake_series(tmp_path, monkeypatch, applied=True)
    res = _dry(src, tmp_path)
    assert res.exit_code == 0, res.output
    assert "the series is applied; used as it is" in res.output
    assert "1 commits on the base" in res.output
    assert f"checkout -q --detach {base}" in res.output
    assert f"pristine-src-{base[:12]}/tools/build/make.py" in res.output
    assert res.output.count("qemu-system-x86_64 -machine") == 3


def test_a_tree_at_the_base_is_applied_in_a_work_clone(tmp_path, monkeypatch):
    import subprocess
    src, base = _fake_series(tmp_path, monkeypatch, applied=False)
    before = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "-b"],
                            capture_output=True, text=True).stdout
    res = _dry(src, tmp_path)
    assert res.exit_code == 0, res.output
    wc = tmp_path / "work" / f"src-{base[:12]}"
    assert f"git clone -q --shared --no-checkout {src} {wc}" in res.output
    assert f"rxl series apply --src {wc}" in res.output
    assert f"MAKEOBJDIRPREFIX={tmp_path / 'o'}" in res.output and f"{wc}/tools/build" in \
        res.output
    assert not (tmp_path / "work").exists()          # a dry run makes nothing
    res = CliRunner().invoke(main, ["run", "--src", str(src), "--check-only"])
    assert res.exit_code == 0 and "applied in a work clone" in res.output
    assert subprocess.run(["git", "-C", str(src), "status", "--porcelain", "-b"],
                          capture_output=True, text=True).stdout == before


def test_no_src_plans_the_fetch(tmp_path, monkeypatch):
    src, base = _fake_series(tmp_path, monkeypatch, applied=False)
    res = CliRunner().invoke(main, ["run", "--base-url", str(src), "--objdir",
                                    str(tmp_path / "o"), "--out", str(tmp_path / "out"),
                                    "--guest-dir", str(tmp_path / "g"), "--dry-run"])
    assert res.exit_code == 0, res.output
    fetched = tmp_path / "work" / f"base-{base[:12]}"
    assert f"git clone -q --shared --no-checkout {src} {fetched}" in res.output
    assert f"{fetched}/tools/build/make.py" in res.output      # the pristine kernel's tree
    assert res.output.count("qemu-system-x86_64 -machine") == 3
    res = CliRunner().invoke(main, ["run", "--check-only"])
    assert res.exit_code == 0
    assert f"the base {base[:12]} will be fetched from https://github.com/owner/repo.git" \
        in res.output


@pytest.mark.parametrize("series", [[], ["--no-series"]], ids=["series", "no-series"])
def test_a_dry_run_of_the_base_to_fetch_plans_its_release(tmp_path, monkeypatch, series):
    """F25: rxl run --dry-run without --src (patches/BASE: FreeBSD 15.0, 1500068)
    planned 14's toolchain (clang 16, --target freebsd14.0): the version was not known
    before the fetch. The plan now says the version it assumes from patches/BASE and
    is 15's: clang 19 for make.py and the ATF programs."""
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "work"))
    monkeypatch.delenv("RXL_BASE_URL", raising=False)
    res = CliRunner().invoke(main, ["run", "--dry-run", *series, "--transport", "serial"])
    assert res.exit_code == 0, res.output
    base = tmp_path / "work" / "base-2ec8aa904381"
    said = ("FreeBSD 15.0 (__FreeBSD_version 1500068 assumed from patches/BASE, the tree "
            "not fetched yet; LLVM 19.1.7, 15.0's own)")
    if series:
        assert f"# series: planned (--no-series: {base} ({said}) as it is;" in res.output
    else:
        assert (f"fetched from https://github.com/kactertech/Irid.git into {base}; planned "
                f"as {said}, cross compiler /usr/lib/llvm-19/bin;") in res.output
    bindirs = re.findall(r"--cross-bindir=(\S+)", res.output)
    assert len(bindirs) >= 2 and set(bindirs) == {"/usr/lib/llvm-19/bin"}, bindirs
    ccs = re.findall(r"^(\S+/clang) --target=(\S+) ", res.output, re.M)
    assert len(ccs) == (1 if series else 2), ccs      # FreeBSD's own test, the series'
    assert set(ccs) == {("/usr/lib/llvm-19/bin/clang", "x86_64-unknown-freebsd15.0")}, ccs
    assert "llvm-16" not in res.output and "freebsd14" not in res.output
    assert not (tmp_path / "work").exists()


# ------------------------------------------------------- series not applied
def _dry(src, tmp_path, *extra):
    return CliRunner().invoke(main, ["run", "--src", str(src), "--objdir", str(tmp_path / "o"),
                                     "--out", str(tmp_path / "out"), "--guest-dir",
                                     str(tmp_path / "g"), "--dry-run", *extra])


def test_a_git_tree_without_the_base_is_refused_naming_where_it_is(fake_tree, tmp_path):
    from rxl.verify.kernels import series_base
    base = series_base()
    git_tree(fake_tree)              # HEAD does not descend from patches/BASE
    res = _dry(fake_tree, tmp_path)
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert f"does not have the base commit {base[:12]}" in res.output
    assert "kactertech/Irid" in res.output and "series apply" not in res.output
    assert "buildkernel" not in res.output   # nothing planned


def test_a_plain_tree_needs_the_series_files_and_a_pristine_kernel(fake_tree, tmp_path):
    assert _dry(fake_tree, tmp_path, *PK(tmp_path)).exit_code == 0
    res = _dry(fake_tree, tmp_path)
    assert res.exit_code == 2 and "no pristine kernel can be built" in res.output
    deal = fake_tree / "sys/netinet/in_pcblb_deal.c"
    deal.write_bytes(deal.read_bytes() + b"/* older */\n")
    res = _dry(fake_tree, tmp_path, *PK(tmp_path))
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "lacks the series (sys/netinet/in_pcblb_deal.c)" in res.output
    deal.unlink()
    res = _dry(fake_tree, tmp_path, *PK(tmp_path))
    assert res.exit_code == 2 and "sys/netinet/in_pcblb_deal.c" in res.output


def test_a_bad_src_is_refused_before_any_stage(fake_tree, tmp_path):
    (fake_tree / "sys/netinet/in_pcblb_deal.c").unlink()
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["run", "--src", str(fake_tree), "--kernel",
                                    str(tmp_path / "nope"), "--out", str(out), *PK(tmp_path)])
    assert res.exit_code == 2
    assert not out.exists()


# ------------------------------------------- errors become a failed stage
def _live(src, tmp_path, *extra):
    return CliRunner().invoke(main, ["run", "--src", str(src), "--objdir", str(tmp_path / "o"),
                                     "--out", str(tmp_path / "out"), "--guest-dir",
                                     str(tmp_path / "g"), *PK(tmp_path), *extra])


def _report(tmp_path):
    return json.loads((tmp_path / "out" / "report.json").read_text())


def test_tree_without_amd64_conf_is_refused_before_any_stage(fake_tree, tmp_path):
    (fake_tree / "sys/amd64/conf").rmdir()
    res = _live(fake_tree, tmp_path)
    assert res.exit_code == 2 and "no sys/amd64/conf" in res.output
    assert not (tmp_path / "out").exists()
    assert _dry(fake_tree, tmp_path).exit_code == 2


@pytest.mark.parametrize("exc", [FileNotFoundError(2, "No such file or directory", "/x/RXL"),
                                 "setup", "build"])
def test_build_errors_become_a_failed_stage_with_a_report(fake_tree, tmp_path, monkeypatch,
                                                          exc):
    from rxl.tree import build as B
    if exc == "setup":
        exc = B.BuildSetupError("object directory /o: cannot create it: Not a directory")
    elif exc == "build":
        exc = B.BuildError("buildkernel-RXL", 2, tmp_path / "buildkernel-RXL.log")

    def boom(*a, **k):
        raise exc
    monkeypatch.setattr(B, "build_kernel", boom)
    res = _live(fake_tree, tmp_path)
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit), res.output
    err = [ln for ln in res.output.splitlines() if ln.startswith("Error:")]
    assert len(err) == 1 and err[0].startswith("Error: build: ")
    doc = _report(tmp_path)
    assert doc["verdict"]["ok"] is False
    assert [(s["name"], s["status"]) for s in doc["stages"]] == [("series", "ok"),
                                                                ("build", "failed")]
    assert "status: failed" in (tmp_path / "out/stage-build.log").read_text()


def test_a_build_that_leaves_no_kernel_writes_no_stamp(fake_tree, tmp_path, monkeypatch):
    from rxl.tree import build as B
    log = tmp_path / "buildkernel-RXL.log"
    monkeypatch.setattr(B, "build_kernel", lambda *a, **k: [
        B.StageResult("buildkernel-RXL", 0, 1.0, log)])
    res = _live(fake_tree, tmp_path)
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit), res.output
    assert "left no kernel at" in res.output and str(log) in res.output
    assert not list(tmp_path.rglob("*.rxl-stamp"))
    doc = _report(tmp_path)
    assert doc["stages"][-1]["name"] == "build" and doc["stages"][-1]["status"] == "failed"


# ---------------------------------------- options checked before any build
@pytest.mark.parametrize("args,hint", [
    (["--memory", "0"], "--memory"),
    (["--memory", "301"], "--memory"),            # does not split over 2 nodes evenly
    (["--case-timeout", "0"], "--case-timeout"),
    (["--case-timeout", "-5"], "--case-timeout"),
    (["--test", "extra=/nonexistent.c"], "--test"),
    (["--test", "a/b=/x.c"], "--test"),
    (["--new-program", "nosuch"], "--new-program"),
    (["--pristine-kernel", "/nonexistent/kernel"], "--pristine-kernel"),
    (["--pristine-src", "/nonexistent"], "--pristine-src"),
])
def test_bad_options_refused_before_any_build(fake_tree, tmp_path, monkeypatch, args, hint):
    from rxl.tree import build as B
    built = []
    monkeypatch.setattr(B, "build_kernel", lambda *a, **k: built.append(a) or [])
    for extra in ([], ["--dry-run"]):
        res = _live(fake_tree, tmp_path, *args, *extra)
        assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
        err = [ln for ln in res.output.splitlines() if ln.startswith("Error")]
        assert len(err) == 1 and hint in err[0], res.output
        assert "== series" not in res.output and built == []
    assert not (tmp_path / "out").exists()


def test_test_names_must_be_unique_and_known_names_pass(fake_tree, tmp_path):
    src = tmp_path / "t.c"
    src.write_text("ATF_TP_ADD_TCS(tp) { return atf_no_error(); }\n")  # an ATF C program
    res = _live(fake_tree, tmp_path, "--dry-run", "--test", f"so_reuseport_lb_test={src}")
    assert res.exit_code == 2 and "already built" in res.output
    res = _live(fake_tree, tmp_path, "--dry-run", "--test", f"mine={src}",
                "--new-program", "mine", "--case-timeout", "1", "--memory", "256")
    assert res.exit_code == 0, res.output
    assert f"{src}" in res.output and "-m 256M" in res.output


# ------------------------------------------------------- an SSH target's options
def test_check_only_with_an_ssh_target(tmp_path, monkeypatch):
    """make run SRC=DIR RUN_ARGS='--target ssh://...' starts with --check-only:
    it said nothing useful and crashed (KeyError: None)."""
    src, _ = _fake_series(tmp_path, monkeypatch, applied=True)
    res = CliRunner().invoke(main, ["run", "--src", str(src), "--check-only",
                                    "--target", "ssh://root@192.0.2.10"])
    assert res.exit_code == 0, res.output
    assert (f"--src {src}: the series is applied; it is built as it is; the test programs "
            "are built from it") in res.output
    assert "options checked: nothing run" in res.output


@pytest.mark.parametrize("workdir,why", [
    ("/", "the undo is rm -rf /)"), ("/boot", "the undo is rm -rf /boot)"),
    ("/boot/rxl", "the undo is rm -rf /boot/rxl)"),
    ("/var/tmp/rxl/../..", "the undo is rm -rf /var)"), ("/tmp", "the undo is rm -rf /tmp)"),
    ("/var/tmp/rxl/../x", "give it as /var/tmp/x "),
    ("/tmp/x;reboot", "must be an absolute path"), ("rel/dir", "must be an absolute path"),
    ("/tmp/a b", "must be an absolute path"), ("/tmp/$(reboot)", "must be an absolute path"),
])
def test_a_workdir_that_the_undo_would_wreck_is_refused(tmp_path, monkeypatch, workdir, why):
    """--workdir goes into remote commands and into 'undo: rm -rf WORKDIR'
    refused before anything runs, exit 2."""
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "work"))
    for extra in (["--check-only"], ["--dry-run", "--programs", str(tmp_path)]):
        res = CliRunner().invoke(main, ["run", "--target",
                                        "ssh://root@192.0.2.10", "--workdir", workdir, *extra])
        assert res.exit_code == 2 and "--workdir" in res.output and why in res.output, \
            res.output
    assert not (tmp_path / "work").exists()


def test_a_workdir_of_its_own_is_fine(tmp_path, monkeypatch):
    src, _ = _fake_series(tmp_path, monkeypatch, applied=True)
    res = CliRunner().invoke(main, ["run", "--src", str(src), "--target",
                                    "ssh://root@192.0.2.10", "--workdir", "/var/tmp/rxl-2",
                                    "--check-only"])
    assert res.exit_code == 0, res.output


def test_install_kernel_of_a_kernel_only_planned_dry_runs(tmp_path, monkeypatch):
    """--install-kernel without --kernel installs the kernel the build stage
    makes; its dry run failed hashing a file that does not exist yet."""
    src, _ = _fake_series(tmp_path, monkeypatch, applied=True)
    progs = tmp_path / "progs"
    progs.mkdir()
    (progs / "so_reuseport_lb_test").write_text("")
    (progs / "so_reuseport_lb_test").chmod(0o755)
    res = CliRunner().invoke(main, ["run", "--src", str(src), "--target",
                                    "ssh://root@192.0.2.10", "--programs", str(progs),
                                    "--objdir", str(tmp_path / "o"), "--install-kernel",
                                    "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "nextboot -k kernel.rxl-<id>" in res.output
    assert f"# sftp put {tmp_path / 'o'}" in res.output
    # run.sh's body is printed too: the test loop and the sysctls it reads
    assert "#   sysctl -n kern.sched.topology_spec" in res.output
    assert "#   echo \"$M END patched\"" in res.output
    # not probed, the dry run plans the kyua path and says when it is taken
    assert "# the kyua path, taken when the probe finds kyua" in res.output
    assert "report-junit" in res.output and "#   syntax(2)" in res.output


@pytest.mark.parametrize("args,option,why", [
    (["--target", "ssh://root@h:2222", "--memory", "2048"], "'--memory'",
     "only for the own QEMU guest, not with --target ssh://root@h:2222"),
    (["--target", "ssh://root@h:2222", "--no-spread"], "'--no-spread'",
     "only for the own QEMU guest"),
    (["--target", "ssh://root@h:2222", "--no-auto-pristine"], "'--no-auto-pristine'",
     "only for the own QEMU guest"),
    (["--target", "ssh://root@h:2222", "--spread"], "'--spread'",
     "only for the own QEMU guest"),
    (["--target", "ssh://root@h:2222", "--pristine-kernel", "/k"], "'--pristine-kernel'",
     "only for the own QEMU guest"),
    (["--target", "ssh://root@h:2222", "--transport", "ssh"], "'--transport'",
     "only for the own QEMU guest"),
    (["--target", "ssh://root@h:2222", "--boot-jobs", "2"], "'--boot-jobs'",
     "only for the own QEMU guest"),
    (["--target", "ssh://root@h:2222", "--kernel", "/k"], "'--kernel'",
     "with --target only with --install-kernel"),
    (["--programs", "/p"], "'--programs'", "only with an SSH target (--target)"),
    (["--targets", "/t.yaml"], "'--targets'", "only with --target NAME"),
    (["--transport", "serial", "--workdir", "/var/tmp/x"], "'--workdir'",
     "not with --transport serial"),
    (["--transport", "serial", "--ssh-wait", "10"], "'--ssh-wait'",
     "not with --transport serial"),
    (["--transport", "serial", "--kyua"], "'--kyua'",
     "not with --transport serial"),
])
def test_an_option_of_another_machine_is_refused_not_ignored(tmp_path, monkeypatch, args,
                                                            option, why):
    """Each machine takes only its option groups: one of another is a usage error
    naming it, before anything is checked out, built or planned."""
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "work"))
    res = CliRunner().invoke(main, ["run", "--src", str(tmp_path), "--dry-run", *args])
    assert res.exit_code == 2, res.output
    assert f"Invalid value for {option}: " in res.output and why in res.output
    assert "# series" not in res.output and not (tmp_path / "work").exists()


def test_a_named_shape_refuses_memory_and_the_default_is_not_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "work"))
    res = CliRunner().invoke(main, ["run", "--src", str(tmp_path), "--dry-run",
                                    "--target", "guest-2l3", "--memory", "2048"])
    assert res.exit_code == 2 and "'--memory'" in res.output
    assert "is a guest shape: its memory_mib sets the guest's memory" in res.output
    # The options' defaults are no choice: the same run without them is not refused
    # for them (it goes on to the tree checks).
    res = CliRunner().invoke(main, ["run", "--src", str(tmp_path), "--check-only",
                                    "--target", "guest-2l3"])
    assert "Invalid value for '--memory'" not in res.output


# ------------------------------------------------- QEMU 7.2's fallback shape
def test_e1000e_fallback_argv_and_the_refusal_of_the_default_on_qemu_72(
        fake_tree, tmp_path, monkeypatch):
    """Issue 25: on Debian 12's own QEMU (7.2, no igb) the default guest is refused
    before anything runs, in one line naming what to do (rxl doctor --install, or
    --target guest-e1000e); guest-e1000e's SSH boots are exactly the argv recorded on
    QEMU 7.2.22 (docs/results/guest-numa.md): 2 sockets x 2 dies x 2 cores x 2
    threads = 16 vCPUs, 8 per NUMA node and 512 MiB each, the e1000e on pcie.0 (no
    pxb-pcie: no _PXM), the SSH NIC virtio-net, no -no-reboot."""
    import shlex
    from rxl.guest import qemu
    from rxl.guest.qemu import OVMF_CANDIDATES
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "w"))
    monkeypatch.setattr(qemu, "installed_version", lambda binary="x", run=None: (7, 2))
    monkeypatch.setattr(qemu, "find_ovmf", lambda *a: OVMF_CANDIDATES[0])
    out, g = tmp_path / "out", tmp_path / "g"
    base = ["run", "--src", str(fake_tree), "--objdir", str(tmp_path / "obj"), "--out",
            str(out), "--guest-dir", str(g), "--transport", "ssh", *PK(tmp_path)]
    res = CliRunner().invoke(main, base)
    assert res.exit_code == 1
    assert res.stderr == (
        "Error: the guest needs QEMU >= 8.0 (its igb NIC); this host has 7.2: run `rxl "
        "doctor --install` (on Debian 12 it adds bookworm-backports' QEMU 10), or pick a "
        "shape for this QEMU: --target guest-e1000e\n")
    assert not out.exists() and not g.exists() and not (tmp_path / "w").exists()
    res = CliRunner().invoke(main, base + ["--target", "guest-e1000e", "--dry-run"])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("qemu-system-x86_64 ")]
    assert len(lines) == 3
    ports = [int(re.search(r"hostfwd=tcp:127\.0\.0\.1:(\d+)-:22", ln).group(1))
             for ln in lines]
    assert len(set(ports)) == 3
    got = {re.search(r"serial-(\w+)\.log", ln).group(1): ln for ln in lines}
    assert sorted(got) == ["patched", "pristine", "spread"]
    for label, line in got.items():
        port = re.search(r"hostfwd=tcp:127\.0\.0\.1:(\d+)-:22", line).group(1)
        assert shlex.split(line) == [
            "qemu-system-x86_64", "-machine", "q35,accel=tcg",
            "-cpu", "Skylake-Server,level=0xd,-avx2",
            "-smp", "16,sockets=2,dies=2,cores=2,threads=2", "-m", "1024M",
            "-object", "memory-backend-ram,id=ram0,size=512M",
            "-numa", "node,nodeid=0,cpus=0-7,memdev=ram0",
            "-object", "memory-backend-ram,id=ram1,size=512M",
            "-numa", "node,nodeid=1,cpus=8-15,memdev=ram1",
            "-drive", f"if=pflash,format=raw,readonly=on,file={OVMF_CANDIDATES[0]}",
            "-nodefaults", "-nographic", "-vga", "none", "-monitor", "none",
            "-serial", f"file:{out}/serial-{label}.log",
            "-drive", f"if=none,id=root,format=raw,file=fat:{g}/out/{label},snapshot=on",
            "-device", "ide-hd,drive=root,bus=ide.0",
            "-netdev", "user,id=net0", "-device", "e1000e,netdev=net0",
            "-netdev", f"user,id=net1,hostfwd=tcp:127.0.0.1:{port}-:22",
            "-device", "virtio-net-pci,netdev=net1"]
    # commit 1's tunable on em0, the NIC under test
    assert "tunables {'dev.em.0.iflib.core_spread': '1'}" in res.stdout
    assert not g.exists()
