"""rxl run --no-series: a tree built and booted as it is (a pristine 15.0, the 14.0
base), planned on either base, checked by --check-only, and judged on FreeBSD's own
cases alone."""

import subprocess

import pytest
from click.testing import CliRunner

from fakefreebsd import GIT, _git, version_files
from rxl.cli.main import main
from rxl.guest.protocol import MARK
from rxl.verify import parse
from rxl.verify.ownguest import SerialGuest
from rxl.verify.pipeline import RunState
from rxl.verify.request import RunRequest


@pytest.mark.parametrize("major,release", [(14, "FreeBSD 14.0"), (15, "FreeBSD 15.0")])
def test_no_series_runs_the_tree_as_it_is_on_either_base(tmp_path, monkeypatch, major,
                                                         release):
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "w"))
    src = tmp_path / "src"
    (src / "tools/build").mkdir(parents=True)
    (src / "tools/build/make.py").write_text("# stand-in\n")
    (src / "sys/amd64/conf").mkdir(parents=True)
    version_files(src, major)
    subprocess.run(GIT + ["init", "-q", str(src)], check=True)
    _git(src, "add", ".")
    _git(src, "commit", "-qm", "a tree without the series")
    args = ["run", "--src", str(src), "--objdir", str(tmp_path / "obj"), "--out",
            str(tmp_path / "out"), "--guest-dir", str(tmp_path / "g"), "--transport",
            "serial", "--no-series"]
    res = CliRunner().invoke(main, args + ["--dry-run"])
    assert res.exit_code == 0, res.output
    out = res.output
    assert f"--no-series: {src} ({release}" in out and "its cases are absent" in out
    assert out.count("qemu-system-x86_64 -machine q35,accel=tcg") == 1   # the tree alone
    assert "so_reuseport_lb_cpu_test" not in out and "pristine" not in out.split("boot")[-1]
    res = CliRunner().invoke(main, args + ["--check-only"])
    assert res.exit_code == 0 and "built and booted as it is" in res.output, res.output
    # without the flag, the tree (no base commit) is refused in one line
    res = CliRunner().invoke(main, args[:-1] + ["--check-only"])
    assert res.exit_code == 2 and "does not have the base commit" in res.output


def test_no_series_verdict_needs_freebsd_s_own_cases_only(tmp_path):
    def run(status):
        return parse.parse_console([
            f"{MARK} BEGIN tree", f"{MARK} ATF BEGIN",
            f"{MARK} LIST /rxl/tests/so_reuseport_lb_test basic_ipv4",
            f"{MARK} CASE /rxl/tests/so_reuseport_lb_test basic_ipv4 rc=0 t=1 {status}",
            f"{MARK} ATF END", f"{MARK} END tree"])
    req = RunRequest(out=str(tmp_path), guest_dir=str(tmp_path), series=False, spread=False)
    st = RunState.start(req, echo=lambda s: None)
    # (no topology in these short logs: the tree boot's numeric-order placement rule
    # is the only other reason, as on any boot of the tree's kernel)
    def others(v):
        return [r for r in v.reasons if "core_spread=0" not in r]
    st.runs = {"tree": run("passed")}
    assert others(SerialGuest().verdict(req, st)) == []
    st.runs = {"tree": run("failed: no")}
    assert any("basic_ipv4" in r for r in others(SerialGuest().verdict(req, st)))
    with_series = RunRequest(out=str(tmp_path), guest_dir=str(tmp_path), spread=False)
    st.runs = {"patched": run("passed")}
    assert any("no pristine kernel" in r for r in SerialGuest().verdict(with_series, st).reasons)


def _plain_tree(tmp_path, major=15):
    src = tmp_path / "src"
    (src / "tools/build").mkdir(parents=True)
    (src / "tools/build/make.py").write_text("# stand-in\n")
    (src / "sys/amd64/conf").mkdir(parents=True)
    version_files(src, major)
    return src


def _no_hang(fn, seconds=20):
    """``fn()``, failing the test (not hanging it) past ``seconds``."""
    import signal

    def stop(*_):
        raise AssertionError(f"still running after {seconds} s")
    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        return fn()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("name", ["sys/sys/param.h", "sys/conf/newvers.sh",
                                  "lib/clang/include/VCSVersion.inc"])
def test_a_version_file_that_is_a_fifo_is_refused_never_opened(tmp_path, monkeypatch, name):
    """F7: a FIFO as param.h hung run --dry-run --no-series (the open blocks until
    a writer comes), while --check-only passed it; build --dry-run too.  Each
    now refuses it in one line, exit 2, before opening it."""
    import os
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "w"))
    src = _plain_tree(tmp_path)
    (src / name).unlink()
    os.mkfifo(src / name)
    run = ["run", "--src", str(src), "--objdir", str(tmp_path / "obj"), "--out",
           str(tmp_path / "out"), "--guest-dir", str(tmp_path / "g"), "--transport",
           "serial", "--no-series"]
    for args in (run + ["--check-only"], run + ["--dry-run"],
                 ["build", "--src", str(src), "--objdir", str(tmp_path / "obj"), "--dry-run"]):
        res = _no_hang(lambda: CliRunner().invoke(main, args))
        assert res.exit_code == 2, (args, res.output)
        (line,) = res.output.strip().splitlines()
        assert line == (f"Error: Invalid value for '--src': {src}: the tree says no release "
                        f"({src / name}: a FIFO, not a regular file: not a FreeBSD source "
                        f"tree), and " + line.split("), and ", 1)[1]), line


@pytest.mark.parametrize("name,text,why", [
    ("sys/sys/param.h", "", "sys/sys/param.h: no #define __FreeBSD_version"),
    ("sys/sys/param.h", "#define __FreeBSD_version 99999999999999999999\n",
     "sys/sys/param.h: __FreeBSD_version 99999999999999999999 is no release's (MMmmRxx: "
     "100000...9999999)"),
    ("sys/conf/newvers.sh", None, "sys/conf/newvers.sh: no such file: not a FreeBSD "
     "source tree"),
    ("sys/conf/newvers.sh", b"\x8f\x00\xff\x13" * 64,
     'sys/conf/newvers.sh: assigns no TYPE or REVISION (NAME="value" at the start of a '
     "line)"),
    ("sys/sys/param.h", "/dev/zero", "sys/sys/param.h: a character device, not a regular "
     "file: not a FreeBSD source tree"),
])
def test_a_tree_that_says_no_release_is_refused_by_run_and_build(tmp_path, monkeypatch,
                                                                  name, text, why):
    """F8: run --no-series (check and dry run) and build --dry-run took trees whose
    release cannot be read (planned as 'FreeBSD 999999999999999.99', or as a
    tree that does not say its version); learn refuses them, and so now do they."""
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "w"))
    src = _plain_tree(tmp_path)
    path = src / name
    path.unlink()
    if text == "/dev/zero":
        path.symlink_to("/dev/zero")
    elif isinstance(text, bytes):
        path.write_bytes(text)
    elif text is not None:
        path.write_text(text)
    run = ["run", "--src", str(src), "--objdir", str(tmp_path / "obj"), "--out",
           str(tmp_path / "out"), "--guest-dir", str(tmp_path / "g"), "--transport",
           "serial", "--no-series"]
    for args in (run + ["--check-only"], run + ["--dry-run"],
                 ["build", "--src", str(src), "--objdir", str(tmp_path / "obj"), "--dry-run"]):
        res = _no_hang(lambda: CliRunner().invoke(main, args))
        assert res.exit_code == 2, (args, res.output)
        (line,) = res.output.strip().splitlines()
        assert line.startswith(f"Error: Invalid value for '--src': {src}: the tree says no "
                               f"release ({src}/{why}), and "), line
