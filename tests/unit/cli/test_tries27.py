"""Faults a newcomer's fresh bad-input tries found (issue 27, tries27), each
refused in one line naming the option, or said in the field's words."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from clierror import error_line as _error, work  # noqa: F401 (work: fixture)
from rxl.cli.main import main
from fakefreebsd import kernel_bytes, version_files

DATA = Path(__file__).resolve().parents[2] / "data"
URL = "ssh://root@192.0.2.1"


def test_vm_refuses_an_image_with_no_sector_and_more_vcpus_than_freebsd_has(work):
    img = work / "img"
    img.write_bytes(b"")
    assert _error(["vm", "--image", img]) == (
        f"Error: Invalid value for '--image': {img}: 0 bytes, less than one 512-byte "
        "sector: no disk image")
    img.write_bytes(bytes(4096))
    line = _error(["vm", "--image", img, "--sockets", "256", "--cores", "256",
                   "--threads", "8"])
    assert "'--sockets', '--cores', '--threads'" in line
    assert "256 x 256 x 8 = 524288 vCPUs: a FreeBSD guest has at most 1024 CPUs" in line
    r = CliRunner().invoke(main, ["vm", "--image", str(img), "--sockets", "2", "--cores", "256",
                                  "--threads", "2"])
    assert r.exit_code == 0, r.output


def test_an_atf_var_given_twice_is_refused():
    """atf takes the last -v of a name: x=1 was dropped without a word."""
    assert _error(["run", "--check-only", "--atf-var", "x=1", "--atf-var", "x=2"]) == (
        "Error: Invalid value for '--atf-var': x given twice (x=1, x=2): give each NAME once")


def test_freebsds_own_program_is_no_new_program():
    line = _error(["run", "--check-only", "--new-program", "so_reuseport_lb_test"])
    assert line.startswith("Error: Invalid value for '--new-program': so_reuseport_lb_test: "
                           "FreeBSD's own test program, which must pass on pristine too")


@pytest.mark.parametrize("workdir,words", [
    ("/tmp/" + "a" * 256, "a name of 256 characters, over FreeBSD's NAME_MAX of 255"),
    ("/tmp/" + "/".join(["a" * 200] * 6), "over FreeBSD's PATH_MAX of 1024 bytes"),
])
def test_a_workdir_the_target_cannot_make_is_refused(workdir, words):
    line = _error(["run", "--check-only", "--target", URL, "--workdir", workdir])
    assert line.startswith("Error: Invalid value for '--workdir': ") and words in line
    r = CliRunner().invoke(main, ["run", "--check-only", "--target", URL, "--workdir",
                                  "/tmp/" + "a" * 255, "--programs", str(DATA)])
    assert "NAME_MAX" not in r.output


def test_targets_with_a_url_target_is_refused_not_unread(work):
    """A broken --targets passed when --target was a URL: it was never read."""
    t = work / "t.yaml"
    t.write_text("targets: [1]\n")
    assert _error(["run", "--check-only", "--target", URL, "--targets", t]) == (
        f"Error: Invalid value for '--targets': only with --target NAME, not the URL {URL}")


def test_a_refused_flag_is_named_as_given():
    line = _error(["run", "--check-only", "--target", URL, "--no-auto-pristine"])
    assert line.startswith("Error: Invalid value for '--no-auto-pristine': ")


def test_an_atf_dir_that_is_a_file_is_not_a_directory(work):
    f = work / "f"
    f.write_text("x")
    assert _error(["run", "--check-only", "--atf-dir", f]) == (
        f"Error: Invalid value for '--atf-dir': {f}: a file, not a directory ('' for no series tests)")


@pytest.mark.parametrize("make,words", [("missing", "no such directory"),
                                        ("empty", "no *_test.c in it")])
def test_guest_up_checks_its_atf_dir_as_run_does(make, words, work):
    """guest up --dry-run planned a guest with an --atf-dir that does not exist."""
    k = work / "kernel"
    k.write_bytes(kernel_bytes())
    d = work / "atf"
    if make == "empty":
        d.mkdir()
    src = work / "src"
    (src / "sys").mkdir(parents=True)
    (src / "tools/build").mkdir(parents=True)
    (src / "tools/build/make.py").write_text("")
    line = _error(["guest", "up", "--dry-run", "--build", "--kernel", k, "--src", src,
                   "--atf-dir", d])
    assert line.startswith("Error: Invalid value for '--atf-dir': ") and words in line


def test_parse_of_a_learn_log_warns_and_says_so():
    r = CliRunner().invoke(main, ["parse", str(DATA / "learn" / "synthetic-patched.log")])
    assert r.exit_code == 1
    assert r.stderr.splitlines() == [  # one Error: line (issue 27 nc8 fault 13), no warning
        "Error: 1 of 1 run did not pass: patched: no test case ran: "
        "a log of rxl learn (read it with rxl learn --log)"]


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
@pytest.mark.parametrize("opt", ["--raw-dir", "--build-dir"])
def test_bench_dry_run_refuses_an_output_directory_that_cannot_be_made(opt):
    """access(2) tells root /proc is writable: the dry run planned into it."""
    assert _error(["bench", "accept", "--dry-run", "--setup", "noflag", opt, "/proc/nope"]) \
        == f"Error: {opt} /proc/nope: cannot be created in /proc: No such file or directory"


def test_kcount_record_refuses_an_empty_kernel(work):
    k = work / "k"
    k.write_bytes(b"")
    assert _error(["kcount", "record", "--kernel", k, "--out", work / "o.json",
                   "--dry-run"]) == (
        f"Error: Invalid value for '--kernel': {k}: an empty file, no kernel")


def test_kcount_table_refuses_an_out_whose_directory_is_absent(work):
    """It read the traces, then ended in a FileNotFoundError traceback."""
    t = work / "t.json"
    t.write_text("{}")
    line = _error(["kcount", "table", "--trace", "accept-off", "pristine", t,
                   "--out", work / "absent" / "x.json"])
    assert line == (f"Error: Invalid value for '--out': {work / 'absent' / 'x.json'}: its "
                    "directory does not exist")


def test_kcount_diff_refuses_a_negative_top(work):
    assert "'--top': -5 is not in the range x>=0" in _error(
        ["kcount", "diff", "a", "b", "c", "d", "--top", "-5"])


def test_bench_and_learn_dry_runs_print_their_plan_as_json_with_json(work, kernel_file):
    """README: under --dry-run, --json prints the plan; bench accept and learn
    printed text."""
    import json
    r = CliRunner().invoke(main, ["bench", "accept", "--dry-run", "--json", "--setup", "noflag",
                                  "--repetitions", "2", "--build-dir", str(work / "b")])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["dry_run"] is True and doc["lines"][0].startswith("cc ")
    assert sum(" -m noflag " in x for x in doc["lines"]) == 2
    src = work / "src"
    (src / "sys/netinet").mkdir(parents=True)
    (src / "sys/netinet/tcp.h").write_text("#define\tTCP_REUSPORT_LB_CPU\t1027\n")
    version_files(src, major=15)
    args = ["learn", "--src", str(src), "--objdir", str(work / "o"), "--guest-dir",
            str(work / "g"), "--dry-run", "--kernel", str(kernel_file),
            "--learn-sysctl", "net.inet.tcp.reuseport_lb_learn", "--config", "learn-on"]
    text = CliRunner().invoke(main, args)
    r = CliRunner().invoke(main, args + ["--json"])
    assert r.exit_code == 0 and text.exit_code == 0, r.output
    assert json.loads(r.stdout) == {"dry_run": True, "lines": text.stdout.splitlines()}


def test_series_check_of_a_src_that_is_no_git_tree_is_bad_input(work):
    """It was exit 1 with a "problem" line on stdout and nothing on stderr."""
    src = work / "src"
    (src / "sys").mkdir(parents=True)
    assert _error(["series", "check", "--src", src]) == (
        f"Error: Invalid value for '--src': {src}: not a git work tree")


def test_a_relative_rxl_work_is_refused_and_nothing_made(work, monkeypatch):
    """cd /tmp/x && RXL_WORK=relative/work rxl targets --key made a harness key
    under the current directory; from another directory, another key."""
    monkeypatch.chdir(work)
    monkeypatch.setenv("RXL_WORK", "relative/work")
    assert _error(["targets", "--key"]) == (
        "Error: RXL_WORK relative/work: not an absolute path (every command of every "
        "directory must find the same work root)")
    assert not (work / "relative").exists()


@pytest.mark.parametrize("doc,why", [
    ('{"outer": "f", "outer": "g", "entries": {"f": "0x100"}, "samples": []}',
     "the key 'outer' is given twice in one object"),
    ('{"outer": "f", "entries": {"g": "0x100"}, "samples": [{"pc": [1], "sp": [2]}]}',
     "'outer' f has no address in 'entries'"),
    ('{"outer": "f", "entries": {"f": "0x100"}, "samples": []}', "'samples' is empty"),
    ('{"outer": "f", "entries": {"f": "0x100"}, "samples": [{"pc": [], "sp": []}]}',
     "sample 1: no step"),
])
def test_kcount_refuses_a_trace_record_never_writes(doc, why, work):
    """Each was read: the last 'outer' won, or "0 marked calls" was printed."""
    t = work / "t.json"
    t.write_text(doc)
    line = _error(["kcount", "analyze", t])
    assert line.startswith(f"Error: {t}: not a kcount trace: {why}"), line


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_build_dry_run_refuses_a_logdir_that_cannot_be_made(work):
    src = work / "src"
    (src / "sys/amd64/conf").mkdir(parents=True)
    (src / "tools/build").mkdir(parents=True)
    (src / "tools/build/make.py").write_text("")
    assert _error(["build", "--dry-run", "--src", src, "--lock", "", "--logdir",
                   "/proc/nope"]) == ("Error: Invalid value for '--logdir': /proc/nope: cannot "
                                      "be created in /proc: No such file or directory")
