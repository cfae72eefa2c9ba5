"""Issue 27's fifth pass (docs/results/newcomer.md, "Fifth pass"): the faults
P2, P6-P11, P13 and P16, each refused at its root, in one ``Error:`` line
with exit status 2, before anything runs."""

from pathlib import Path

import click
import pytest

from clierror import error_line as _error, run as _run, work  # noqa: F401 (work: fixture)
from rxl.cli.main import main

DATA = Path(__file__).resolve().parents[2] / "data"


def _commands(group=main, path=()):
    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, path + (name,))
        else:
            yield path + (name,)


# ------------------------------------------------------------ P11: RXL_WORK

@pytest.mark.parametrize("path", list(_commands()), ids=" ".join)
@pytest.mark.parametrize("kind", ["device", "file", "under-a-file"])
def test_a_work_root_that_is_no_directory_is_refused_by_every_command(path, kind, work,
                                                                      monkeypatch):
    """P11: RXL_WORK=/dev/null rxl targets read /dev/null/targets.yaml ("no such
    file") and exited 0; a regular file likewise.  Refused up front, as a
    relative RXL_WORK and a file as RXL_BUILD_DIR are."""
    (work / "f").write_text("a file\n")
    value, why = {"device": ("/dev/null", "a character device, not a directory (where "
                             "object trees, logs, guests and the targets file are kept)"),
                  "file": (str(work / "f"), "a file, not a directory (where object trees, "
                           "logs, guests and the targets file are kept)"),
                  "under-a-file": (str(work / "f" / "w"),
                                   f"cannot be created, {work / 'f'} is not a directory")}[kind]
    monkeypatch.setenv("RXL_WORK", value)
    assert _error(path) == f"Error: RXL_WORK {value}: {why}"
    assert (work / "f").read_text() == "a file\n"


# --------------------------------------------------------------- rxl learn

@pytest.fixture
def src(work):
    """A tree with the series' option that says its release, and no git."""
    from fakefreebsd import version_files
    s = work / "src"
    (s / "sys/netinet").mkdir(parents=True)
    (s / "sys/netinet/tcp.h").write_text("#define\tTCP_REUSPORT_LB_CPU\t1027\n")
    version_files(s, 15)
    return s


@pytest.fixture
def learn(src, work):
    """``rxl learn --dry-run`` of ``src``, booting the patched kernel only."""
    return ["learn", "--src", src, "--objdir", work / "o", "--guest-dir", work / "g",
            "--out", work / "out", "--dry-run", "--learn-sysctl", "a.b",
            "--config", "learn-on"]


def test_learn_of_a_tree_no_rig_can_be_built_from_is_bad_input(learn, src, work):
    """P2: a --src that is no git tree (and no --kernel) was exit 1, as if a
    step had failed; it is the input given, found before anything runs."""
    assert _error(learn) == (f"Error: kernels: {src} is not a git tree, so no rig kernel "
                             "can be built from it; pass --kernel and --pristine-kernel")
    assert not (work / "g").exists()


@pytest.mark.parametrize("param_h", [None, "/* garbage */\n"])
def test_learn_of_a_tree_that_says_no_release_is_refused(param_h, learn, src, kernel_file):
    """P8: a tree whose param.h is missing or names no __FreeBSD_version (with
    newvers.sh garbage) was planned as the 14 fallback (clang 16,
    x86_64-unknown-freebsd14.0), exit 0: the release is never guessed."""
    (src / "sys/conf/newvers.sh").write_text("garbage\n")
    if param_h is None:
        (src / "sys/sys/param.h").unlink()
        why = f"{src}/sys/sys/param.h: cannot read it (No such file or directory): not a " \
              "FreeBSD source tree"
    else:
        (src / "sys/sys/param.h").write_text(param_h)
        why = f"{src}/sys/sys/param.h: no #define __FreeBSD_version"
    assert _error(learn + ["--kernel", kernel_file]) == (
        f"Error: --src {src}: the tree says no release ({why}), and learnd's compiler and "
        "the world's build are chosen by it")


@pytest.mark.parametrize("extra,parts,default", [
    (["--warmup", "21", "--deadline", "5"], "--warmup 21 s + --measured 30 s = 51 s", 261),
    (["--deadline", "55"], "--warmup 25 s + --measured 30 s = 55 s", None),
    (["--requests", "10", "--idle", "2", "--deadline", "26"],
     "--warmup 25 s + --idle 2 s = 27 s", 250)])
def test_learn_refuses_a_deadline_shorter_than_the_phases(extra, parts, default, learn,
                                                          kernel_file):
    """P6: --warmup 21 --deadline 5 planned "learnd deadline 5 s" beside a
    warm-up of 21 s: every run killed by its own deadline.  Refused naming
    --deadline and the phases' options; checked before the tree (P2): a tree
    no rig can be built from (no --kernel) is not what is said."""
    if default is None:  # as long as the phases at their shortest: accepted
        r = _run(learn + ["--kernel", kernel_file] + extra)
        assert r.exit_code == 0 and "learnd deadline 55 s" in r.stdout, r.output
        return
    assert _error(learn + extra) == (
        f"Error: --deadline {extra[-1]}: shorter than the phases of a run at their "
        f"shortest, {parts}: learnd would end every run before it is measured (leave "
        f"--deadline out for every phase at its longest + 120 s, {default} s)")


@pytest.mark.parametrize("topo,extra,first,more", [
    ("1x1x1", [], 1, " and 30 more"), ("qemu-2s", [], 8, " and 23 more"),
    ("2x2x1", ["--smp", "1,5,1"], 4, "")])
def test_learn_refuses_a_topology_that_lacks_a_cpu_of_the_guest(topo, extra, first, more,
                                                                learn, kernel_file):
    """P7: --topology 1x1x1 for the 32-vCPU guest was accepted, exit 0: the
    predictions of every run on a CPU outside it would be guessed."""
    n = 5 if extra else 32
    assert _error(learn + ["--kernel", kernel_file, "--topology", topo] + extra) == (
        f"Error: Invalid value for '--topology': {topo} has no CPU {first}{more} of the "
        f"guest's {n} vCPUs (0-{n - 1}), which the runs may name (--workers all pins one "
        "to each; receive queues go on any): give the guest's topology, or leave "
        "--topology out for its own")
    r = _run(learn + ["--kernel", kernel_file, "--topology", "2x8x2"])  # 32 CPUs: held
    assert r.exit_code == 0, r.output


# ------------------------------------------------------------ kcount record

@pytest.mark.parametrize("n", ["10001", "99999999999999999999"])
def test_kcount_record_bounds_samples(n, work, kernel_file):
    """P10: --samples 99999999999999999999 (more than 2^64) went to gdb as it
    was, exit 0; --samples is bounded as --limit is (rxl.bench.kcount.SAMPLES_MAX)."""
    args = ["kcount", "record", "--dry-run", "--kernel", kernel_file, "--out",
            work / "t.json", "--samples"]
    assert _error(args + [n]) == (f"Error: Invalid value for '--samples': {n} is not in the "
                                  "range 1<=x<=10000.")
    r = _run(args + ["10000"])
    assert r.exit_code == 0 and "$kc_samples = 10000" in r.stdout, r.output


# ------------------------------------------------------------ bench accept

@pytest.mark.parametrize("value", ["tags", "rx"])
@pytest.mark.parametrize("setup", [["--setup", "noflag"], []])
def test_bench_accept_refuses_deal_counts_without_ebpf_deal(value, setup, work):
    """P13: --deal-counts tags (its default) with --setup noflag was dropped
    without a word, exit 0, where --deal-counts rx and --abort-kind (default
    or not) were refused: given at all, it is refused where no setup reads it."""
    assert _error(["bench", "accept", "--dry-run", "--build-dir", work / "b",
                   "--deal-counts", value] + setup) == (
        "Error: Invalid value for '--deal-counts': --deal-counts is read only by --setup "
        "ebpf-deal")
    r = _run(["bench", "accept", "--dry-run", "--build-dir", work / "b", "--setup",
              "ebpf-deal", "--deal-counts", value])
    assert "--deal-counts" not in r.output, r.output


# ------------------------------------------------------------ deal --topology

def test_a_topology_that_is_a_symlink_loop_is_said_to_be_one(work):
    """P16: deal --topology LOOP (loop1 -> loop2 -> loop1) said "no such file";
    parse LOOP says what the system says, and so does --topology now, in the
    words of every input that is a loop (issue 27, test_input_links)."""
    (work / "loop1").symlink_to(work / "loop2")
    (work / "loop2").symlink_to(work / "loop1")
    line = _error(["deal", "--topology", work / "loop1", "--members", "0"])
    assert line == (f"Error: Invalid value for '--topology': {work / 'loop1'}: a symlink "
                    "loop, it cannot be resolved (Too many levels of symbolic links) (a "
                    "topology file holds sysctl -n kern.sched.topology_spec output)")
    assert "Too many levels of symbolic links" in _error(["parse", work / "loop1"])


@pytest.mark.parametrize("opt,value,why", [
    ("--repetitions", "1000001", "--repetitions must be 1..1000, got 1000001"),
    ("--warmup", "1e15", "--warmup 1e+15: a phase is at most 3600 s (360 learning windows)"),
    ("--measured", "1e9", "--measured 1e+09: a phase is at most 3600 s (360 learning windows)"),
    ("--min-conns", "99999999999999999999", "--min-conns must be 0..20000 (the measured "
     "phase stops at 20000 connections), got 99999999999999999999"),
])
def test_learn_bounds_its_run_lengths(learn, kernel_file, opt, value, why):
    """F10: --repetitions 1000000 ran the dry run past 10 s and planned years,
    --warmup 1e15, --measured 1e9 and --min-conns 1e20 were planned; each
    is bounded now (rxl.learn.request says the source of each bound)."""
    import time
    t0 = time.monotonic()
    assert _error(learn + ["--kernel", kernel_file, opt, value]) == f"Error: {why}"
    assert time.monotonic() - t0 < 5
    assert _run(learn + ["--kernel", kernel_file, "--repetitions", "1000", "--warmup",
                         "3600", "--min-conns", "20000"]).exit_code == 0
