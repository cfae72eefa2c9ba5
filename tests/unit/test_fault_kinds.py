"""The fault kinds a newcomer met, each checked across the commands it reached: non-finite
numbers, checks deferred past slow stages, paths that are not regular files, the
lbgroup cap, refusals that must change nothing, one error surface."""

import os
import subprocess

import pytest
from click.testing import CliRunner

from fakefreebsd import _git, _series, _tree
from rxl.cli.main import main
from rxl.errors import BadOption
from rxl.tree import series as S

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "console")


def _run(*args, **kw):
    return CliRunner().invoke(main, list(args), **kw)


# ------------------------------------------------ non-finite and out of range
@pytest.mark.parametrize("opt", ["--warmup", "--measured"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_learn_refuses_non_finite_phases(opt, value, tmp_path):
    r = _run("learn", opt, value, "--dry-run", "--out", str(tmp_path / "o"))
    assert r.exit_code == 2 and f"'{opt}'" in r.output and "not a finite number" in r.output


@pytest.mark.parametrize("args,hint,why", [
    (["--smp", "1,1,300"], "--smp", "at most 288"),
    (["--memory", "200000000"], "--memory", "more than this host's"),
])
def test_learn_guest_limits_before_any_build(args, hint, why, tmp_path):
    r = _run("learn", *args, "--dry-run", "--out", str(tmp_path / "o"))
    assert r.exit_code == 2 and f"'{hint}'" in r.output and why in r.output


def test_out_under_a_file_is_refused_by_run_and_learn(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    r = _run("learn", "--dry-run", "--out", str(f / "out"))
    assert r.exit_code == 2 and "'--out'" in r.output and "is a file" in r.output
    r = _run("run", "--dry-run", "--out", str(f / "out"), "--base-url", str(tmp_path))
    assert r.exit_code == 2 and "'--out'" in r.output and "is a file" in r.output


def test_run_refuses_more_memory_than_the_host_before_any_stage(tmp_path):
    r = _run("run", "--memory", "200000000", "--out", str(tmp_path / "out"))
    assert r.exit_code == 2 and "'--memory'" in r.output
    assert not (tmp_path / "out").exists()


def test_deal_says_freebsd_caps_a_group_at_256():
    r = _run("deal", "--topology", "2x4x2", "--members", ",".join(["-"] * 300))
    assert r.exit_code == 2
    assert "300 members: FreeBSD caps an SO_REUSEPORT_LB group at 256" in r.output
    assert _run("deal", "--topology", "2x4x2", "--members",
                ",".join(["-"] * 256)).exit_code == 0


# ------------------------------------------------ inputs that are not regular files
def test_parse_reads_stdin_fifo_and_refuses_a_directory(tmp_path):
    log = os.path.join(DATA, "synthetic-pass.log")
    data = open(log, "rb").read()
    r = _run("parse", "-", input=data)
    assert r.exit_code == 0 and "so_reuseport_lb_test:basic_ipv4" in r.output
    rfd, wfd = os.pipe()  # what <(...) hands over: /dev/fd/N, an anonymous pipe
    writer = subprocess.Popen(["cat", log], stdout=wfd)
    os.close(wfd)
    r = _run("parse", f"/dev/fd/{rfd}")
    writer.wait()
    os.close(rfd)
    assert r.exit_code == 0 and "basic_ipv4" in r.output
    r = _run("parse", str(tmp_path))
    assert r.exit_code == 2 and "is a directory" in r.output
    r = _run("parse", str(tmp_path / "absent"))
    assert r.exit_code == 2 and "no such file" in r.output


# ------------------------------------------------ refuse, change nothing
def _snapshot_like(tmp_path):
    """A tree at the base with one file whose blob is gone (as in the snapshot)."""
    src = tmp_path / "src"
    base = _tree(src)
    patches = _series(tmp_path, src, base)
    (src / "big.bin").write_text("large\n")
    _git(src, "add", "big.bin")
    _git(src, "commit", "-qm", "big")
    blob = _git(src, "rev-parse", "HEAD:big.bin")
    (src / ".git/objects" / blob[:2] / blob[2:]).unlink()
    (src / "big.bin").unlink()
    (patches / "BASE").write_text((patches / "BASE").read_text().replace(
        base, _git(src, "rev-parse", "HEAD")))
    return src, patches


def _state(src):
    return ((src / ".git/config").read_text(), _git(src, "ls-files", "-v"),
            _git(src, "branch", "--list"))


def test_series_apply_refuses_an_existing_branch_before_any_write(tmp_path):
    src, patches = _snapshot_like(tmp_path)
    _git(src, "branch", "rxl")
    before = _state(src)
    with pytest.raises(BadOption, match="already exists"):
        S.apply_series(src, patches, echo=lambda s: None)
    assert _state(src) == before          # no promisor config, no skip-worktree mark


def test_series_apply_and_export_refuse_a_folder_inside_the_tree(tmp_path):
    src, patches = _snapshot_like(tmp_path)
    before = _state(src)
    for args in (["series", "apply", "--src", str(src / "sys"), "--patches", str(patches)],
                 ["series", "export", "--src", str(src / "sys"), "--patches", str(patches)]):
        r = _run(*args)
        assert r.exit_code == 2 and "is a folder inside the git tree" in r.output, r.output
    assert _state(src) == before


# ------------------------------------------------ one error surface
def test_errors_are_one_escaped_line_with_clicks_prefix():
    r = _run("deal", "--topology", "2x4x2", "--members", "0,\x1b[31mx" + "y" * 500)
    lines = [ln for ln in r.output.splitlines() if ln.startswith("Error:")]
    assert r.exit_code in (1, 2) and len(lines) == 1
    assert "\x1b" not in r.output and "\\x1b" in lines[0]
    assert "more characters" in lines[0]


@pytest.mark.parametrize("url, why", [
    ("ssh://root@h:99999", "port 99999 is not in 1..65535"),
    ("ssh://root@h:-1", "not an ssh://[user@]host[:port] address"),
    ("ssh://h:0", "port 0 is not in 1..65535"),
])
def test_a_malformed_target_url_is_a_usage_error(url, why, tmp_path, monkeypatch):
    """A bad --target value is exit 2 naming the option, like a target name
    the targets file lacks; it was exit 1 (a run-time failure)."""
    monkeypatch.setenv("RXL_WORK", str(tmp_path))
    r = _run("run", "--src", str(tmp_path), "--dry-run", "--target", url)
    assert r.exit_code == 2 and "'--target'" in r.output and why in r.output
    r = _run("run", "--src", str(tmp_path), "--dry-run", "--target", "nosuch")
    assert r.exit_code == 2 and "'--target'" in r.output


@pytest.mark.parametrize("args, why", [
    (["--smp", "0,1,1"], "'--smp': 0,1,1: SOCKETS 0: each of SOCKETS,CORES,THREADS is at least 1"),
    (["--smp", "a"], "'--smp': a: expected SOCKETS,CORES,THREADS"),
    (["--memory", "1"], "below 128 MiB per NUMA node"),
    (["--min-conns", "-1"], "--min-conns must be 0..20000"),
    (["--warmup", "5"], "--warmup 5: a phase must be longer than the two 10 s"),
    (["--concurrency", "0"], "--concurrency must be >= 1"),
    (["--groups-every", "-1"], "--groups-every must be 0 or 0.1..3600 s"),
    (["--deadline", "-1"], "--deadline must be >= 1 s"),
    (["--nic-reinit", "-1"], "--nic-reinit must be >= 0"),
    (["--tunable", "x"], "--tunable 'x': expected NAME=VALUE"),
    (["--guest-sysctl", "x"], "--guest-sysctl 'x': expected NAME=VALUE"),
    (["--topology", "nosuch"], "'--topology': unknown topology 'nosuch'"),
    (["--src", "/nonexistent-rxl"], "--src /nonexistent-rxl: no such directory"),
    (["--log", "/nonexistent-rxl.log"], "'--dry-run': not with --log"),
])
def test_learn_option_mistakes_are_usage_errors(args, why, tmp_path):
    """Every bad `rxl learn` option value is exit 2 (like --smp 1,1,300 and
    --warmup nan always were), one line naming the option; nothing written."""
    r = _run("learn", "--dry-run", "--out", str(tmp_path / "o"), *args)
    assert r.exit_code == 2 and why in r.output, r.output
    assert len([ln for ln in r.output.splitlines() if ln.startswith("Error:")]) == 1
    assert not (tmp_path / "o").exists()


def test_learn_src_that_is_a_file_or_not_a_tree(tmp_path):
    (tmp_path / "f").write_text("x")
    r = _run("learn", "--dry-run", "--src", str(tmp_path / "f"))
    assert r.exit_code == 2 and "not a directory" in r.output
    r = _run("learn", "--dry-run", "--src", str(tmp_path))
    assert r.exit_code == 2 and "not a FreeBSD source tree (no sys/)" in r.output


# ------------------------------------------------ numbers too long to convert
BIG = "9" * 5000


@pytest.mark.parametrize("args, why", [
    # a number, out of range (nc13: a 23-digit CPU was a "malformed member")
    (["deal", "--topology", "2x4x2", "--members", BIG],
     "--members: CPU 999999999999999999999999... (4976 more characters) is not in "
     "topology 2x4x2"),
    (["deal", "--topology", "2x4x2", "--members", "0", "--counts", f"0:{BIG}"],
     "--counts: count 999999999999999999999999... (4976 more characters) does not fit"),
    (["deal", "--topology", f"{BIG}x1x1", "--members", "0"], "unknown topology"),
    (["spread", "--topology", "2x4x2", "--intr-cpus", f"0-{BIG}", "--queues", "1"],
     "malformed --intr-cpus item"),
    (["outcomes", "--topology", "2x4x2", "--workers", "0", "--rx-cpus", "0",
      "--rx-counts", f"0:{BIG}"], "--rx-counts: count 999999999999999999999999... "
     "(4976 more characters) does not fit 32 bits"),
])
def test_a_5000_digit_number_is_a_malformed_value(args, why):
    """Python refuses int() of 4,300 digits or more: the message was its own
    ('Exceeds the limit ... sys.set_int_max_str_digits()'), naming no option."""
    r = _run(*args)
    assert r.exit_code == 2 and why in r.output, r.output
    assert "set_int_max_str_digits" not in r.output


@pytest.mark.parametrize("line", [
    f"group port {BIG} af inet members 0 gen 5 map 0 dirty 0 rebuilds 3 allocfail 0",
    "group port 80 af inet members 1 gen 5 map 16 dirty 0 rebuilds 3 allocfail 0\n"
    f"member 0 tag {BIG} learned slots 16\ncpu 0 offset 0 slots 16",
])
def test_inspect_a_5000_digit_number_is_a_clean_error(line, tmp_path):
    """rxl inspect raised a ValueError traceback from int() on such a line."""
    (tmp_path / "g").write_text(line + "\n")
    r = _run("inspect", str(tmp_path / "g"))
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert r.exit_code in (0, 2)


def test_inspect_reads_stdin_and_a_fifo_and_refuses_a_directory(tmp_path):
    line = "group port 80 af inet members 0 gen 5 map 0 dirty 0 rebuilds 3 allocfail 0\n"
    r = _run("inspect", "-", input=line)
    assert r.exit_code == 0 and "port 80 (inet)" in r.output, r.output
    rfd, wfd = os.pipe()  # what <(...) hands over: /dev/fd/N, an anonymous pipe
    os.write(wfd, line.encode())
    os.close(wfd)
    r = _run("inspect", f"/dev/fd/{rfd}")
    os.close(rfd)
    assert r.exit_code == 0 and "port 80 (inet)" in r.output, r.output
    r = _run("inspect", str(tmp_path))
    assert r.exit_code == 2 and "is a directory" in r.output
    r = _run("inspect", str(tmp_path / "absent"))
    assert r.exit_code == 2 and "no such file" in r.output


@pytest.mark.parametrize("args, why", [
    (["--workers", "0"], "'--workers': must be 1..256, got 0"),
    (["--workers", "100000"], "'--workers': must be 1..256"),
    (["--repetitions", "0"], "'--repetitions': must be 1..1000, got 0"),
    (["--cc", ""], "Invalid value for '--cc': an empty value"),
    (["--cc", 'a "b'], "--cc 'a \"b': No closing quotation"),
    (["--topology", "2x4x2"], "'--topology': --topology is read only by --setup ebpf-deal"),
])
def test_bench_accept_option_mistakes_are_usage_errors(args, why, tmp_path):
    """They were exit 1, like a failed run; --spacing-ms nan always was 2."""
    r = _run("bench", "accept", "--dry-run", "--build-dir", str(tmp_path / "b"), *args)
    assert r.exit_code == 2 and why in r.output, r.output
    assert len([ln for ln in r.output.splitlines() if ln.startswith("Error:")]) == 1


def test_kcount_table_unknown_case_is_a_usage_error(tmp_path):
    (tmp_path / "t.json").write_text("{}")
    r = _run("kcount", "table", "--trace", "nosuch", "patched", str(tmp_path / "t.json"))
    assert r.exit_code == 2 and "--trace: case 'nosuch'" in r.output, r.output


@pytest.mark.parametrize("cmd", ["apply", "export"])
def test_series_patches_without_base_is_a_usage_error(cmd, tmp_path):
    """'--patches /tmp' gave "[Errno 2] No such file or directory: '/tmp/BASE'", exit 1."""
    src, patches = _snapshot_like(tmp_path)
    before = _state(src)
    empty = tmp_path / "empty"
    empty.mkdir()
    r = _run("series", cmd, "--src", str(src), "--patches", str(empty))
    assert r.exit_code == 2 and "'--patches'" in r.output and "no BASE file" in r.output
    r = _run("series", cmd, "--src", str(src), "--patches", str(tmp_path / "absent"))
    assert r.exit_code == 2 and "no such directory" in r.output, r.output
    assert "Errno" not in r.output
    assert _state(src) == before


@pytest.mark.parametrize("content, why", [
    (b"\xff\xfe", "not UTF-8 text"),
    (b"a: " + b"[" * 100000 + b"]" * 100000 + b"\n", "nested too deeply"),
])
def test_targets_file_that_is_binary_or_too_deep_is_one_line(content, why, tmp_path):
    """rxl targets raised UnicodeDecodeError / RecursionError tracebacks."""
    f = tmp_path / "t.yaml"
    f.write_bytes(content)
    r = _run("targets", "--targets", str(f))
    assert r.exit_code == 2 and why in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)
    r = _run("targets", "--targets", str(tmp_path))
    assert r.exit_code == 2 and "is a directory" in r.output


def test_timings_file_nested_too_deep_is_no_timings(tmp_path):
    from rxl.tree import progress
    f = tmp_path / "timings.json"
    f.write_text("[" * 100000 + "]" * 100000)
    assert progress.load(f) == {}


@pytest.mark.parametrize("args, hint, why", [
    (["--kernel", "/nonexistent-rxl-kernel"], "'--kernel'", "no such kernel"),
    (["--case-timeout", "99999999999999999999999"], "'--case-timeout'", "must be 1..86400"),
    (["--case-timeout", "86401"], "'--case-timeout'", "must be 1..86400"),
])
def test_run_refuses_before_the_series_stage(args, hint, why, tmp_path):
    """--kernel was checked in the build stage (exit 1, after the series stage);
    a case timeout of 1e23 s passed to the end, where the guest's timeout(1)
    would fail every case."""
    r = _run("run", "--dry-run", "--base-url", str(tmp_path), "--out", str(tmp_path / "o"),
             *args)
    assert r.exit_code == 2 and hint in r.output and why in r.output, r.output
    assert "== series" not in r.output
