"""Issue 27's thirteenth pass (/work/coord/nc13.md), its "Questionable, not
counted" items that are faults against the README's contract (bad input: one
``Error:`` line, exit 2, nothing changed; an option that cannot apply refused
naming both; an input file that is not what it should be is exit 2):

- a targets file's ``targets:`` or ``shapes:`` of the wrong type (``[]``, ``0``,
  ``''``) was taken as empty (``[] or {}``);
- ``rxl learn --requests`` (and ``--deadline``, ``--groups-every``) past what
  learnd takes (``-d`` 1..86400 s, ``-G`` 100..3600000 ms) was planned, and
  learnd would exit in the guest after the builds and the boot;
- ``rxl run --no-series --spread`` was silently moot (no spread boot);
- a read-only ``git status`` of ``--src`` rewrote its .git/index (stat data
  refreshed), and --src is never written;
- ``rxl deal --members`` of a 21-digit CPU called it "malformed";
- ``python -m rxl.decide.core --help`` built the library;
- a failed ``git am`` of ``rxl series apply`` left the user's checkout on the
  new branch (the message did not say so) and a retry refused the branch;
- ``rxl kcount analyze T T`` printed T once;
- a kcount trace whose stack pointer rises above the entry's (no call record
  writes) was read as a call.
"""

import os
import shutil
import subprocess

import pytest

from clierror import error_line as _error, files as _files, run as _run, work  # noqa: F401 (work: fixture)
from fakefreebsd import _series, _tree as git_tree
from learnargs import SYSCTL, learn_args, t15  # noqa: F401 (t15: fixture)



# ----------------------------------------------------------- targets file types

@pytest.mark.parametrize("text,key,what", [
    ("targets: []\n", "targets", "name -> target"),
    ("targets: 0\n", "targets", "name -> target"),
    ("targets: ''\n", "targets", "name -> target"),
    ("targets: false\n", "targets", "name -> target"),
    ("shapes: []\n", "shapes", "name -> shape"),
    ("shapes: 0\n", "shapes", "name -> shape"),
])
def test_a_targets_file_of_the_wrong_type_is_refused(text, key, what, work):
    """A list, a number or a string where a mapping belongs was taken as none."""
    f = work / "t.yaml"
    f.write_text(text)
    r = _run(["targets", "--targets", f])
    assert r.exit_code == 2, r.output
    assert f"{f}: {key}: must be a mapping of {what}" in r.stdout
    assert r.stderr.splitlines() == [f"Error: {f}: 1 mistake (listed above)"]


@pytest.mark.parametrize("text", ["", "\n", "targets:\n", "shapes:\ntargets:\n"])
def test_an_empty_targets_file_is_still_no_targets(text, work):
    """An empty file, or a key with nothing under it, is the empty set (load's
    docstring): the built-in targets only."""
    f = work / "t.yaml"
    f.write_text(text)
    r = _run(["targets", "--targets", f])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[-1].startswith("guest-2l3 ")


# ------------------------------------------------------- learn: learnd's bounds

def test_learn_refuses_requests_whose_deadline_learnd_does_not_take(t15, kernel_file, work):
    """--requests 99999999999999 planned "learnd deadline 1024000000000136 s"
    (512 x 99999999999999 requests at 50/s, + 25 s warm-up + 1 s idle + 120 s);
    learnd.c takes -d 1..86400 and exits 2 for more, in the guest."""
    args = learn_args(work, t15, kernel_file, "--requests", "99999999999999")
    before = _files(work)
    assert _error(args) == (
        "Error: --requests 99999999999999 on --connections 512, --idle 1 s: a run's "
        "deadline would be 1024000000000136 s (every phase at its longest + 120 s, the "
        "requests at 50/s), more than learnd's 86400 s (its -d): give fewer requests or "
        "connections")
    assert _files(work) == before


def test_learn_still_takes_requests_within_learnd_deadline(t15, kernel_file, work):
    # 512 x 8000 requests at 50/s: 81920 s, + 25 s warm-up, 1 s idle, 120 s = 82066
    r = _run(learn_args(work, t15, kernel_file, "--requests", "8000"))
    assert r.exit_code == 0, r.output
    assert "learnd deadline 82066 s" in r.stdout
    assert _error(learn_args(work, t15, kernel_file, "--requests", "8500")).startswith(
        "Error: --requests 8500 on --connections 512, --idle 1 s: a run's deadline would "
        "be 87186 s")


def test_learn_refuses_a_deadline_learnd_does_not_take(t15, kernel_file, work):
    assert _error(learn_args(work, t15, kernel_file, "--deadline", "86401")) == (
        "Error: --deadline 86401: learnd takes at most 86400 s (its -d)")
    r = _run(learn_args(work, t15, kernel_file, "--deadline", "86400"))
    assert r.exit_code == 0, r.output
    assert "learnd deadline 86400 s" in r.stdout


def test_learn_refuses_a_groups_interval_learnd_does_not_take(t15, kernel_file, work):
    """learnd.c takes -G 100..3600000 ms."""
    assert _error(learn_args(work, t15, kernel_file, "--groups-every", "3601")) == (
        "Error: --groups-every must be 0 or 0.1..3600 s (learnd -G), got 3601")
    r = _run(learn_args(work, t15, kernel_file, "--groups-every", "3600"))
    assert r.exit_code == 0, r.output
    assert "groups view every 3600 s" in r.stdout


# ------------------------------------------------------ run --no-series --spread

@pytest.mark.parametrize("mode", ["--check-only", "--dry-run"])
@pytest.mark.parametrize("flag", ["--spread", "--no-spread"])
def test_run_no_series_refuses_spread(mode, flag, t15):
    """--no-series boots no spread kernel (spread=spread and not no_series), yet an
    explicit --spread was taken while --tests-on-spread was refused."""
    assert _error(["run", mode, "--no-series", flag, "--src", t15]) == (
        f"Error: Invalid value for '{flag}': not with --no-series: the tree is built "
        "and booted as it is, alone")


# --------------------------------------------------- --src's .git/index unwritten

def _index(tree):
    st = os.stat(tree / ".git" / "index")
    return (tree / ".git" / "index").read_bytes(), st.st_mtime_ns


def test_a_read_only_git_status_of_src_leaves_its_index(work, monkeypatch):
    """learn's rig kernels ask ``git status`` of --src (rxl.tree.rig.dirty_sys),
    which refreshed the stat data of a file touched since the index was written
    and rewrote .git/index (nc13 try 509: a fresh tree's racy entries)."""
    monkeypatch.delenv("GIT_OPTIONAL_LOCKS", raising=False)
    src = work / "src"
    git_tree(src, major=15)
    (work / "adir").mkdir()
    f = src / "sys/kern/kern_x.c"
    os.utime(f, ns=(os.stat(f).st_atime_ns, os.stat(f).st_mtime_ns + 10 ** 10))
    before = _index(src)
    r = _run(["learn", "--dry-run", "--src", src, "--objdir", work / "adir",
              "--guest-dir", work / "g", "--learn-sysctl", SYSCTL, "--lb-cpu-opt", "1027"])
    assert r.exit_code == 2, r.output  # the fake tree lacks patches/BASE's commit
    assert "does not have the base commit" in r.stderr
    assert _index(src) == before
    # git itself would have: the same query, optional locks on
    env = {k: v for k, v in os.environ.items() if k != "GIT_OPTIONAL_LOCKS"}
    subprocess.run(["git", "-C", str(src), "status", "--porcelain"], env=env,
                   capture_output=True, check=True)
    assert _index(src) != before


# -------------------------------------------------------------- deal numbers

@pytest.mark.parametrize("args,what", [
    (["--members", "99999999999999999999999"], "--members"),
    (["--members", "0,1", "--counts", "99999999999999999999999:1"], "--counts"),
])
def test_deal_says_a_long_cpu_number_is_not_in_the_topology(args, what):
    """A 21-digit CPU id was a "malformed member"; 4294967296 was not in the topology."""
    assert _error(["deal", "--topology", "2x2x2", *args]) == (
        f"Error: {what}: CPU 99999999999999999999999 is not in topology 2x2x2 (CPUs 0-7)")


def test_deal_says_a_long_count_does_not_fit():
    assert _error(["deal", "--topology", "2x2x2", "--members", "0,1", "--counts",
                   "0:99999999999999999999999"]) == (
        "Error: --counts: count 99999999999999999999999 does not fit 32 bits")


# ------------------------------------------------- python -m rxl.decide.core

@pytest.mark.parametrize("arg", ["--help", "-h", "build"])
def test_decide_core_refuses_an_argument_it_does_not_take(arg, tmp_path, monkeypatch, capsys):
    """``--help`` built the library and printed its path (exit 0), as any argument."""
    from rxl.decide import core
    monkeypatch.setenv("RXL_BUILD_DIR", str(tmp_path / "b"))
    monkeypatch.setenv("CC", "false")
    monkeypatch.delenv("RXL_CORE_CC", raising=False)
    assert core.main([arg]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.splitlines() == [f"rxl: {arg}: not an argument (python -m "
                                    "rxl.decide.core [--dry-run] [--check])"]
    assert not (tmp_path / "b").exists()


# ------------------------------------------------- series apply: a failed git am

def _git(src, *args):
    return subprocess.run(["git", "-C", str(src), *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_series_apply_goes_back_after_a_failed_git_am(tmp_path):
    """Two patches adding one file: git am fails on the second. The checkout was
    left on the new branch rxl (from main; the message said only "branch rxl left
    at the base"), and a retry refused: "branch rxl already exists"."""
    src = tmp_path / "src"
    base = git_tree(src, major=15)
    patches = _series(tmp_path, src, base)
    (first,) = sorted(patches.glob("*.patch"))
    shutil.copy(first, patches / "0002-again.patch")
    head = _git(src, "rev-parse", "HEAD")
    for _ in range(2):  # the retry finds the tree as it was
        line = _error(["series", "apply", "--src", src, "--patches", patches], code=1)
        assert line.startswith("Error: git am failed (")
        assert line.endswith("); the checkout is back on branch main, branch rxl deleted")
        assert _git(src, "symbolic-ref", "--short", "HEAD") == "main"
        assert _git(src, "rev-parse", "HEAD") == head
        assert _git(src, "branch", "--list", "rxl") == ""
        assert _git(src, "status", "--porcelain", "--untracked-files=no") == ""
    (patches / "0002-again.patch").unlink()
    r = _run(["series", "apply", "--src", src, "--patches", patches])
    assert r.exit_code == 0, r.output
    assert _git(src, "symbolic-ref", "--short", "HEAD") == "rxl"


def test_series_apply_goes_back_to_a_detached_commit(tmp_path):
    src = tmp_path / "src"
    base = git_tree(src, major=15)
    patches = _series(tmp_path, src, base)
    (first,) = sorted(patches.glob("*.patch"))
    shutil.copy(first, patches / "0002-again.patch")
    _git(src, "checkout", "-q", "--detach", base)
    line = _error(["series", "apply", "--src", src, "--patches", patches], code=1)
    assert line.endswith(f"; the checkout is back on commit {base[:12]}, branch rxl deleted")
    assert _git(src, "rev-parse", "HEAD") == base
    assert subprocess.run(["git", "-C", str(src), "symbolic-ref", "-q", "HEAD"],
                          capture_output=True).returncode == 1   # still detached


# ------------------------------------------------------------ kcount traces

GOOD = ('{"outer": "in_pcblookup_mbuf", "entries": {"in_pcblookup_mbuf": "0x100", '
        '"in_pcblookup_lbgroup": "0x200"}, "samples": [{"pc": [256, 512, 513, 257], '
        '"sp": [100, 92, 92, 100]}]}')


def test_kcount_analyze_refuses_a_trace_given_twice(work):
    """It printed the trace once: its rows are keyed by trace (learn --log and
    kcount table refuse a repeat)."""
    t = work / "t.json"
    t.write_text(GOOD)
    assert _run(["kcount", "analyze", t]).stdout.splitlines()[0] == (
        f"{t} [in_pcblookup_lbgroup]: 1 marked call (0 others)")
    assert _error(["kcount", "analyze", t, t]) == (
        f"Error: Invalid value for TRACES: {t}: given twice: each input once")
    (work / "u.json").symlink_to(t)
    assert _error(["kcount", "analyze", t, work / "u.json"]) == (
        f"Error: Invalid value for TRACES: {work / 'u.json'}: given twice (as {t}): "
        "each input once")


def test_kcount_refuses_a_stack_pointer_above_the_entry(work):
    """nc13's fx/kc/spup.json: the callee entered at sp 108 above the outer's 100
    (a call pushes: the stack grows down) was counted as a call, with the outer's
    own next step in it. record ends a sample at the first step above the entry's."""
    t = work / "spup.json"
    t.write_text(GOOD.replace("[100, 92, 92, 100]", "[100, 108, 108, 100]"))
    assert _error(["kcount", "analyze", t]) == (
        f"Error: {t}: not a kcount trace: sample 1: step 2's stack pointer 0x6c is above the entry's 0x64: "
        "after the outer function returned (record ends a sample at its ret)")


# ------------------------------------------------------ run --no-series --atf-dir

@pytest.mark.parametrize("mode", ["--check-only", "--dry-run"])
def test_run_no_series_refuses_an_atf_dir(mode, t15, tmp_path):
    """--no-series runs no series test (stests = [] there), so an --atf-dir of
    other programs was silently ignored (nc14, fault 5)."""
    atf = tmp_path / "atf"
    atf.mkdir()
    (atf / "x_test.c").write_text("int main(void) { return 0; }\n")
    assert _error(["run", mode, "--no-series", "--atf-dir", str(atf), "--src", t15]) == (
        "Error: Invalid value for '--atf-dir': not with --no-series: the tree is built "
        "and booted as it is, alone")
