"""Issue 27's eighth pass (docs/results/newcomer.md, "Eighth pass"): the
faults 3-7, 10-12, 20 and 21 of /work/coord/nc8.md, each refused at its root
in one ``Error:`` line with the exit status the README gives."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from clierror import error_line as _error, run as _run, work  # noqa: F401 (work: fixture)

HARNESS = Path(__file__).resolve().parents[3] / "harness"


# ------------------------------------------------- 3: a key that is a directory

def test_targets_lists_a_directory_key_as_run_refuses_it(work):
    """3: ``key: /tmp`` was listed as "no such file yet" (exit 0) while run
    said "is a directory"; the listing now makes run's own check."""
    y = work / "t.yaml"
    y.write_text(f"targets:\n  kd: {{kind: box, host: h, key: {work}}}\n")
    line = _error(["targets", "--targets", y], quiet_stdout=False)
    assert line == f"Error: {y}: 1 mistake (listed above)"
    r = _run(["targets", "--targets", y])  # a mistake of the file, listed as any other
    assert r.stdout.splitlines() == [f"{y}: targets.kd.key: {work}: is a directory, not a "
                                     "private key file"]
    run = _error(["run", "--check-only", "--targets", y, "--target", "kd"])
    assert f"{work}: is a directory, not a private key file" in run


def test_targets_still_lists_a_missing_key_as_needed_later(work):
    y = work / "t.yaml"
    y.write_text(f"targets:\n  km: {{kind: box, host: h, key: {work}/nokey}}\n")
    r = _run(["targets", "--targets", y])
    assert r.exit_code == 0, r.output
    (km,) = [l for l in r.stdout.splitlines() if l.startswith("km ")]
    assert km.endswith(f"key {work}/nokey (no such file yet: needed when it is used)")


# ------------------------------------------------- 4: an unwritable RXL_WORK

@pytest.mark.parametrize("args,option", [
    (["run", "--check-only"], "--out"),
    (["run", "--dry-run"], "--out"),
    (["learn", "--dry-run"], "--guest-dir"),
])
def test_an_unwritable_work_root_is_named_not_a_default_option(args, option):
    """4: RXL_WORK where nothing can be made (a read-only mount; /proc here)
    was blamed on --out, which was not given; the message names RXL_WORK.
    A new process: the defaults under RXL_WORK are read when rxl starts."""
    env = dict(os.environ, RXL_WORK="/proc/rxlw", PYTHONPATH=str(HARNESS))
    p = subprocess.run([sys.executable, "-c", "import sys; from rxl.cli.main import main; "
                        "sys.argv[0] = 'rxl'; main()", *args], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2 and p.stdout == "", (p.returncode, p.stdout, p.stderr)
    (line,) = p.stderr.splitlines()
    assert line.startswith("Error: RXL_WORK /proc/rxlw: cannot be created in /proc: "), line
    assert f"({option} /proc/rxlw/" in line and "Invalid value" not in line


def test_an_unwritable_out_given_elsewhere_still_names_out(work):
    line = _error(["run", "--check-only", "--out", "/proc/nope"])
    assert line == ("Error: Invalid value for '--out': /proc/nope: cannot be created in "
                    "/proc: No such file or directory")


# ------------------------------------------- 10, 12: one check of a trace's marks

def _trace(work, outer="in_pcblookup_mbuf", entries=None, samples=None, name="t.json"):
    entries = entries or {outer: "0xffffffff80000000"}
    doc = {"outer": outer, "entries": entries,
           "asm": {"0xffffffff80000000": "call", "0xffffffff80000001": "ret",
                   "0xffffffff80000100": "ret"},
           "samples": samples or [{"pc": [0xffffffff80000000], "sp": [4096]}]}
    p = work / name
    p.write_text(__import__("json").dumps(doc))
    return p


def _all_four(t):
    """The one error line of analyze, sites, diff and table on trace ``t``."""
    k = t  # any file: the kernel's symbols are read after the trace is checked
    return [_error(["kcount", "analyze", t]),
            _error(["kcount", "sites", t, "--kernel", k]),
            _error(["kcount", "diff", t, k, t, k]),
            _error(["kcount", "table", "--trace", "syn-on", "patched", t])]


def test_a_trace_without_its_mark_is_refused_by_all_four(work):
    """10: a trace of in_pcblookup_mbuf that did not record its mark: analyze
    said "0 marked calls", exit 0; sites and diff blamed a --mark nobody gave."""
    t = _trace(work)
    why = (f"{t}: outer in_pcblookup_mbuf's mark in_pcblookup_lbgroup was not recorded "
           "(its functions: in_pcblookup_mbuf)")
    got = _all_four(t)
    assert got[:3] == [f"Error: {why}"] * 3
    assert got[3] == f"Error: syn-on patched: {why}"
    assert not any("--mark" in line for line in got)


def test_a_trace_no_complete_call_of_which_entered_its_mark_is_refused(work):
    t = _trace(work, entries={"in_pcblookup_mbuf": "0xffffffff80000000",
                              "in_pcblookup_lbgroup": "0xffffffff80000100"})
    why = (f"{t}: no complete sample entered in_pcblookup_lbgroup (1 of 1 complete): "
           "no marked call to read")
    got = _all_four(t)
    assert got[:3] == [f"Error: {why}"] * 3 and got[3] == f"Error: syn-on patched: {why}"


def test_analyze_of_an_outer_with_no_mark_shows_no_foreign_mark(work):
    """10: with outer f, analyze printed [in_pcblookup_lbgroup], a mark f has not."""
    t = _trace(work, outer="f")
    line = _error(["kcount", "analyze", t])
    assert line.startswith(f"Error: {t}: outer f has no default mark (one of ")
    assert line.endswith("); give --mark FUNCTION")


def test_analyze_reads_the_marked_calls_it_shows(work):
    """The numbers of a trace that passes the check: 2 of 3 calls enter the mark."""
    enter = {"pc": [0xffffffff80000000, 0xffffffff80000100, 0xffffffff80000001],
             "sp": [4096, 4088, 4096]}
    miss = {"pc": [0xffffffff80000000], "sp": [4096]}
    t = _trace(work, entries={"in_pcblookup_mbuf": "0xffffffff80000000",
                              "in_pcblookup_lbgroup": "0xffffffff80000100"},
               samples=[enter, miss, enter])
    r = _run(["kcount", "analyze", t])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[0] == f"{t} [in_pcblookup_lbgroup]: 2 marked calls (1 other)"


def test_an_empty_outer_is_shown_quoted(work):
    """12: ``"outer": ""`` gave "'outer' must be a function name, got" and nothing."""
    t = _trace(work, outer="", entries={"f": "0xffffffff80000000"})
    assert _error(["kcount", "analyze", t]) == (
        f"Error: {t}: not a kcount trace: 'outer' must be a function name, got ''")


# ------------------------------------------------- 11: a symlink loop

@pytest.mark.parametrize("args", [
    ["kcount", "analyze", "{loop}"],
    ["kcount", "diff", "{loop}", "{f}", "{f}", "{f}"],
    ["kcount", "sites", "{f}", "--kernel", "{loop}"],
    ["kcount", "table", "--trace", "syn-on", "patched", "{loop}"],
    ["vm", "--image", "{loop}"],
    ["parse", "{loop}"],
])
def test_a_symlink_loop_is_called_one_not_missing(args, work):
    """11: kcount's inputs and vm --image (click's Path(exists=True)) said
    "does not exist" of a symlink loop; parse said the system's words."""
    loop = work / "loop1"
    loop.symlink_to(work / "loop2")
    (work / "loop2").symlink_to(loop)
    f = work / "f"
    f.write_text("x\n")
    line = _error([a.format(loop=loop, f=f) for a in args])
    assert f"{loop}: a symlink loop, it cannot be resolved (Too many levels of symbolic " \
           "links)" in line, line
    assert "does not exist" not in line


# ------------------------------------------------- 5, 6, 7: rxl vm

@pytest.fixture
def image(work):
    p = work / "disk.raw"
    p.write_bytes(b"\0" * 4096)
    return p


@pytest.mark.parametrize("dev", ["/dev/null", "/dev/zero", "/dev/tty"])
def test_vm_refuses_a_character_device_that_is_no_disk(dev):
    """5: /dev/null, /dev/zero and /dev/tty gave a bhyve line, exit 0."""
    assert _error(["vm", "--image", dev]) == (
        f"Error: Invalid value for '--image': {dev}: a character device that is no disk "
        "(a disk is a zvol, md or disk device, e.g. /dev/zvol/zroot/vm0, /dev/md0, "
        "/dev/ada0): no disk image")


@pytest.mark.parametrize("path,disk", [
    ("/dev/zvol/zroot/vm0", True), ("/dev/md0", True), ("/dev/ada0p3", True),
    ("/dev/da12", True), ("/dev/nvd0", True), ("/dev/vtbd1s1a", True),
    ("/dev/gpt/rootfs", True), ("/dev/ada0p4.eli", True),
    ("/dev/null", False), ("/dev/zero", False), ("/dev/tty", False), ("/dev/ttyu0", False),
    ("/dev/random", False), ("/dev/mdctl", False), ("/dev/console", False),
])
def test_disk_devices_are_told_by_name(path, disk):
    from rxl.guest.cli import is_disk_device
    assert is_disk_device(path) is disk


@pytest.mark.parametrize("memory,nodes,why", [
    (256, 2, "memory_mib=256: below 512 MiB, the least for 2 NUMA domains "
             "(256 MiB per domain x 2)"),
    (767, 4, "memory_mib=767: below 1024 MiB, the least for 4 NUMA domains "
             "(256 MiB per domain x 4)"),
    (1025, 2, "memory_mib=1025 does not split evenly over 2 NUMA domains "
              "(1025 / 2 = 512.5 MiB each)"),
])
def test_vm_memory_says_the_bound_it_applies(image, memory, nodes, why):
    """7: --memory 256 --numa-nodes 2 said "256 must be >= 256 per NUMA domain"."""
    assert _error(["vm", "--image", image, "--memory", memory, "--sockets", 4,
                   "--numa-nodes", nodes]) == f"Error: Invalid value for '--memory': {why}"


def test_vm_memory_help_and_range_are_the_bound(image):
    assert _run(["vm", "--image", image, "--memory", 512, "--numa-nodes", 2]).exit_code == 0
    assert "256<=x" in _error(["vm", "--image", image, "--memory", 200])


def test_vm_start_off_freebsd_is_a_usage_error(image):
    """6: --start on Linux exited 1; the README gives 2 to what cannot be done
    here, said before anything runs."""
    import platform
    if platform.system() == "FreeBSD":
        pytest.skip("a FreeBSD host may run bhyve")
    assert _error(["vm", "--image", image, "--start"]) == (
        f"Error: --start needs a FreeBSD host with bhyve (this is {platform.system()}); "
        "drop --start to print the commands")


# ------------------------------------------------- 20: series check --src TREE

def test_series_check_of_a_tree_without_the_series_blames_the_tree(work):
    """20: a git tree that does not carry the series gave "1 problem(s) in
    the series", exit 1; the series is fine, --src is the bad input."""
    src = work / "src"
    (src / "sys").mkdir(parents=True)
    (src / "sys" / "f.c").write_text("int f;\n")
    git = ["git", "-C", str(src), "-c", "user.email=t@e", "-c", "user.name=T"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "base"], check=True)
    r = _run(["series", "check", "--src", src])
    assert r.exit_code == 2, r.output
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"Error: --src {src} does not carry the series at HEAD: "), line
    assert "problem(s) in the series" not in line
    assert not any(l.startswith("problem:") for l in r.stdout.splitlines()), r.stdout


# ------------------------------------------------- 21: --test checked up front

ATF = ('#include <atf-c.h>\nATF_TC_WITHOUT_HEAD(t);\nATF_TC_BODY(t, tc) {}\n'
       'ATF_TP_ADD_TCS(tp) { ATF_TP_ADD_TC(tp, t); return atf_no_error(); }\n')


@pytest.mark.parametrize("name,data,why", [
    ("t.json", b'{"a":1}\n', "not a C source (NAME=PATH.c: the build compiles it as C)"),
    ("t.c", b'{"a":1}\n', "no ATF_TP_ADD_TCS: not an ATF C test program (it would fail "
                          "to link after the build)"),
    ("t.c", b"", "no ATF_TP_ADD_TCS: not an ATF C test program (it would fail to link "
                 "after the build)"),
    ("t.c", b"\xff\xfeA\0", "not UTF-8 text: not an ATF C test source"),
])
def test_check_only_refuses_a_test_source_the_build_would_fail_on(work, name, data, why):
    """21: --check-only accepted --test foo=<a JSON file>, which fails only when
    it is compiled, after the long build."""
    src = work / name
    src.write_bytes(data)
    for mode in ("--check-only", "--dry-run"):
        assert _error(["run", mode, "--test", f"foo={src}"]) == (
            f"Error: Invalid value for '--test': foo={src}: {why}")


def test_check_only_passes_an_atf_test_source(work):
    src = work / "mine_test.c"
    src.write_text(ATF)
    r = _run(["run", "--check-only", "--test", f"mine={src}"])
    assert r.exit_code == 0, r.output
