"""Issue 27's thirteenth pass (/work/coord/nc13.md): ``rxl run`` took a
--pristine-src of another release (a 14.0 tree's kernel booted as the 15.0
base's) and, with --check-only --no-series and no --src, said the series
would be applied; ``rxl learn --log`` (and rxl.learn.ports) took lines that
contradict learnd's own others without a word: a queue past RUN's nq=, a RUN
pin on a CPU the guest lacks or that its W line does not say, a second W line
of a worker, a learn-off run whose SET line says learning was on, READY and
RUN that disagree, counts that do not add up, a line after the run's END, K
items no connection has. Bad input: one ``Error:`` line, exit 2, nothing
written; a run that contradicts itself is damaged, naming the line (exit 1)."""

from pathlib import Path

import pytest

from clierror import error_line as _error, files as _files, run as _run, work  # noqa: F401 (work: fixture)
from fakefreebsd import plain_tree as _tree
from rxl.learn import results as R
from rxl.learn.metrics import analyze_log

DATA = Path(__file__).resolve().parents[2] / "data"
PATCHED = DATA / "learn" / "synthetic-patched.log"


# ------------------------------------------ 1: --pristine-src of another release

def _pristine_error(tree, where, fv):
    return (f"Error: Invalid value for '--pristine-src': {tree}: a FreeBSD 14.0 tree "
            f"(__FreeBSD_version 1400507), but {where} is FreeBSD 15.0 (__FreeBSD_version "
            f"{fv}): the run boots the kernel built from it with that release's userland "
            "and test programs; give the base's tree")


@pytest.mark.parametrize("mode", ["--check-only", "--dry-run"])
def test_run_refuses_a_pristine_src_of_another_release_than_the_base(mode, work):
    """1: exit 0; the dry run planned the 14.0 tree's kernel as the pristine one,
    booted with the 15.0 base's userland."""
    t14 = _tree(work / "t14", 14)
    before = _files(work)
    assert _error(["run", mode, "--pristine-src", t14]) == \
        _pristine_error(t14, "patches/BASE", 1500068)
    assert _files(work) == before


def test_run_refuses_a_pristine_src_of_another_release_than_src(work):
    t14, t15 = _tree(work / "t14", 14), _tree(work / "t15", 15)
    before = _files(work)
    assert _error(["run", "--check-only", "--src", t15, "--pristine-src", t14]) == \
        _pristine_error(t14, f"--src {t15}", 1500068)
    assert _files(work) == before


def test_run_refuses_a_pristine_src_that_says_no_release(work):
    bare = _tree(work / "bare", 0)
    assert _error(["run", "--check-only", "--pristine-src", bare]) == (
        f"Error: Invalid value for '--pristine-src': {bare}: the tree says no release "
        f"({bare}/sys/sys/param.h: cannot read it (No such file or directory): not a "
        "FreeBSD source tree), and its kernel is booted with the run's userland")


def test_run_takes_a_pristine_src_of_the_base_release(work):
    t15 = _tree(work / "t15", 15)
    r = _run(["run", "--check-only", "--pristine-src", t15])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[-1] == "options checked: nothing run"


# ------------------------------------------ 2: --check-only --no-series, no --src

@pytest.mark.parametrize("json", [False, True])
def test_check_only_no_series_without_src_says_the_series_is_not_applied(json, work):
    """2: it said "... the series applied in a work clone"."""
    r = _run(["run", "--check-only", "--no-series"] + (["--json"] if json else []))
    assert r.exit_code == 0, r.output
    text = r.stdout
    assert "the series applied" not in text
    assert (", the series not applied; --no-series: built and booted as it is; the "
            "series' cases are absent") in text
    r = _run(["run", "--check-only"])
    assert ", the series applied in a work clone" in r.stdout


# ------------------------------------------ 3-7, 11: learn --log, lines that contradict

def _log(tmp_path, edit):
    lines = PATCHED.read_text().splitlines()
    edit(lines)
    p = tmp_path / "x.log"
    p.write_text("\n".join(lines) + "\n")
    return p


def _at(lines, text):
    (i,) = [i for i, line in enumerate(lines) if line == text]
    return i


def _replace(old, new):
    def edit(lines):
        lines[_at(lines, old)] = new
    return edit


def _damage(tmp_path, edit):
    p = _log(tmp_path, edit)
    a = analyze_log(str(p))
    return p, [e.split(" damaged: ", 1)[1] for e in a["errors"] if " damaged: " in e]


RUN_OFF = ("==RXL== LEARN RUN learn-off.rxq workers=2 port=8080 ncpu=8 nq=2 pin=0,2 "
           "hcpu_opt=0x1030")
C_OFF = "==RXL== LEARN C learn-off.rxq phase=m worker=0 wcpu=0 hcpu=0 q=0 n=128"
W1_OFF = "==RXL== LEARN W learn-off.rxq worker=1 cpu=2 accepts=540 errors=0 pinerr=0"


def _n(old):
    """Line number (from 1) of ``old`` in synthetic-patched.log."""
    return _at(PATCHED.read_text().splitlines(), old) + 1


def test_the_unmodified_log_and_every_data_log_have_no_damage():
    """The checks are not stricter than learnd and learn-rc (every recorded log)."""
    for p in sorted((DATA / "learn").glob("*.log")):
        runs = R.parse_learn(p.read_text().splitlines())
        assert runs and all(r.damage == [] for r in runs.values()), (p, [
            r.damage for r in runs.values()])


def test_a_queue_past_runs_nq_damages_the_run(tmp_path):
    """3 (qbig.log): q=7 of a 2-queue NIC, exit 0, queue agreement 100%."""
    new = C_OFF.replace("q=0", "q=7")
    _, dmg = _damage(tmp_path, _replace(C_OFF, new))
    assert dmg == [f"line {_n(C_OFF)}: q=7, but RUN's (line {_n(RUN_OFF)}) nq=2 (a queue is "
                   f"0 to nq - 1, or -1 unknown): {new}"]


def test_a_run_pin_outside_the_guest_is_refused_naming_it(tmp_path):
    """4 (pinbig.log): pin=0,99 on the 8-CPU guest, exit 0, no note."""
    p = _log(tmp_path, _replace(RUN_OFF, RUN_OFF.replace("pin=0,2", "pin=0,99")))
    before = _files(tmp_path)
    assert _error(["learn", "--log", p]) == (
        f"Error: {p}: the topology guest (x.log) has no CPU 99 (run learn-off.rxq's RUN "
        "line pins worker 1 there): give the guest's with --topology")
    assert _files(tmp_path) == before


def test_a_run_pin_past_ncpu_or_not_its_w_lines_damages_the_run(tmp_path):
    """4: the pin list is checked against ncpu= and each W line's cpu=."""
    lines = ["==RXL== LEARN BEGIN learn-off.rxq",
             "==RXL== LEARN RUN learn-off.rxq workers=2 port=8080 ncpu=2 nq=2 pin=0,3 "
             "hcpu_opt=0x1030",
             "==RXL== LEARN W learn-off.rxq worker=0 cpu=0 accepts=0 errors=0 pinerr=0",
             "==RXL== LEARN W learn-off.rxq worker=1 cpu=1 accepts=0 errors=0 pinerr=0"]
    assert R.parse_learn(lines)["learn-off.rxq"].damage == [
        f"line 2: RUN's pin= names CPU 3, but ncpu=2 (the guest's CPUs are 0 to 1): "
        f"{lines[1]}",
        f"line 4: cpu=1, but RUN's (line 2) pin=0,3 gives worker 1 CPU 3: {lines[3]}"]


def test_a_second_w_line_of_a_worker_damages_the_run(tmp_path):
    """5 (dupW.log): worker 1's W line relabelled worker=0: output identical."""
    new = W1_OFF.replace("worker=1", "worker=0")
    _, dmg = _damage(tmp_path, _replace(W1_OFF, new))
    w0 = _n(W1_OFF.replace("worker=1 cpu=2 accepts=540", "worker=0 cpu=0 accepts=551"))
    assert dmg == [f"line {_n(RUN_OFF)}: RUN's workers=2, but no W line of 1 worker (1)",
                   f"line {_n(W1_OFF)}: a second W line of worker 0 (the first at line "
                   f"{w0}): {new}"]


def test_w_lines_out_of_worker_order_damage_the_run():
    lines = ["==RXL== LEARN RUN r workers=2 port=1 ncpu=4 nq=0 pin=none",
             "==RXL== LEARN W r worker=1 cpu=-1 accepts=0 errors=0 pinerr=0",
             "==RXL== LEARN W r worker=0 cpu=-1 accepts=0 errors=0 pinerr=0"]
    assert R.parse_learn(lines)["r"].damage == [
        f"line 2: the W line of worker 1 where worker 0's is due (learnd prints them in "
        f"order): {lines[1]}",
        f"line 3: the W line of worker 0 where worker 1's is due (learnd prints them in "
        f"order): {lines[2]}"]


@pytest.mark.parametrize("label,value,want", [("learn-off.rxq", "1", "0"),
                                              ("learn-on.rxq", "0", "1"),
                                              ("learn-on.rxq", "missing", "1")])
def test_a_set_line_against_the_runs_configuration_damages_it(tmp_path, label, value, want):
    """6 (setmismatch.log): learn-off.rxq with learning 1 was judged as learn-off."""
    old = f"==RXL== LEARN SET {label} net.inet.tcp.reuseport_lb_learn={want}"
    new = old[:-len(want)] + value
    _, dmg = _damage(tmp_path, _replace(old, new))
    assert dmg == [f"line {_n(old)}: net.inet.tcp.reuseport_lb_learn={value}, but a "
                   f"{label.split('.')[0]} run sets it to {want}: {new}"]


def test_a_set_line_in_a_pristine_run_damages_it():
    lines = ["==RXL== LEARN SET pristine.all a.b=0"]
    assert R.parse_learn(lines)["pristine.all"].damage == [
        f"line 1: a pristine run sets no sysctl, but this line sets a.b: {lines[0]}"]


READY_OFF = "==RXL== LEARN READY learn-off.rxq port=8080 workers=2"
DONE_OFF = "==RXL== LEARN DONE learn-off.rxq accepted=1091 elapsed_ms=61234 stop=quit"
FT_OFF = "==RXL== LEARN FT learn-off.rxq phase=m ftype=130 n=500"


@pytest.mark.parametrize("old,new,why", [
    (RUN_OFF, RUN_OFF.replace("ncpu=8", "ncpu=0"),
     "RUN's ncpu= is no count of CPUs (1 or more) (ncpu=0)"),
    (RUN_OFF, RUN_OFF.replace("hcpu_opt=0x1030", "hcpu_opt=zz"),
     "RUN's hcpu_opt= is no hex number (learnd prints 0x%lx)"),
    (RUN_OFF, RUN_OFF.replace("port=8080", "port=70000"),
     "RUN's port= is no TCP port (1 to 65535) (port=70000)"),
    (FT_OFF, FT_OFF.replace("n=500", "n=5000"),
     "phase m's FT lines count 5000 connections, its C lines 500"),
])
def test_a_value_learnd_cannot_print_damages_the_run(tmp_path, old, new, why):
    """7 (ncpu0, optbad, ftmismatch.log): exit 0, output identical to the
    unmodified log's."""
    _, dmg = _damage(tmp_path, _replace(old, new))
    at = _n(old)
    line = "" if why.startswith("phase") else f": {new}"
    assert f"line {at}: {why}{line}" in dmg, dmg


@pytest.mark.parametrize("new,key,value", [
    (READY_OFF.replace("workers=2", "workers=0"), "workers", "0"),
    (READY_OFF.replace("port=8080", "port=0"), "port", "0")])
def test_ready_and_run_that_disagree_damage_the_run(tmp_path, new, key, value):
    """7 (workers0, port0, portbig.log)."""
    _, dmg = _damage(tmp_path, _replace(READY_OFF, new))
    want = "2" if key == "workers" else "8080"
    assert dmg == [f"line {_n(READY_OFF)}: READY's {key}={value}, but RUN's (line "
                   f"{_n(RUN_OFF)}) {key}={want}: {new}"]


def test_done_accepted_not_the_w_lines_sum_damages_the_run(tmp_path):
    """7 (acclow.log): accepted=3 while the W lines say 551 + 540."""
    _, dmg = _damage(tmp_path, _replace(DONE_OFF, DONE_OFF.replace("=1091", "=3")))
    assert dmg == [f"line {_n(DONE_OFF)}: DONE's accepted=3, but the W lines' accepts= add "
                   "up to 1091"]


def test_a_dropped_c_line_is_named_in_the_sums_it_breaks(tmp_path):
    """A malformed C line (a note) leaves its worker's accepts= unmatched: the
    damage names the line that was not counted."""
    p = _log(tmp_path, _replace(C_OFF, C_OFF.replace("phase=m", "phase=z")))
    r = _run(["learn", "--log", p])
    assert r.exit_code == 1
    assert r.stderr.splitlines()[-1].startswith(
        f"Error: {p}: run learn-off.rxq damaged: line {_n(C_OFF) - 2}: accepts=551, but "
        f"worker 0's C lines count 423 connections (line {_n(C_OFF)}, unreadable, is not "
        "counted): ")


def test_a_line_after_the_runs_end_damages_it(tmp_path):
    """11 (afterend.log): a C line after END was counted into the run (n=1499)."""
    end = "==RXL== LEARN END learn-off.rxq rc=0"
    extra = "==RXL== LEARN C learn-off.rxq phase=m worker=0 wcpu=0 hcpu=0 q=0 n=999"
    p, dmg = _damage(tmp_path, lambda ls: ls.insert(_at(ls, end) + 1, extra))
    assert dmg == [f"line {_n(end) + 1}: a C line of run learn-off.rxq after its END (line "
                   f"{_n(end)}: learn-rc's last): {extra}"]
    r = _run(["learn", "--log", p])
    assert r.exit_code == 1 and "n=1499" not in r.stdout


def test_an_unpinnable_worker_is_noted_naming_its_w_line(tmp_path):
    """12 (pinerr.log): pinerr=5, worker 0 still shown on CPU 0 without a word."""
    w0 = "==RXL== LEARN W learn-off.rxq worker=0 cpu=0 accepts=551 errors=0 pinerr=0"
    p = _log(tmp_path, _replace(w0, w0.replace("pinerr=0", "pinerr=5")))
    r = _run(["learn", "--log", p])
    assert r.exit_code == 0, r.output
    assert (f"  note: line {_n(w0)}: worker 0 could not be pinned to CPU 0 (pinerr=5): it "
            "ran where the scheduler put it, and its share is shown under CPU 0") in \
        r.stdout.splitlines()


# ------------------------------------------ 14: K items no connection has

K_RUN = ["==RXL== LEARN RUN learn-on.rxq workers=2 port=8080 ncpu=8 nq=2 pin=0,2 "
         "hcpu_opt=0x1030"]


@pytest.mark.parametrize("k,why", [
    ("worker=0 20001:0 70000:0", "foreign port 70000 is no TCP port (1 to 65535)"),
    ("worker=0 0:0", "foreign port 0 is no TCP port (1 to 65535)"),
    ("worker=0 20002:99", "handshake CPU 99, but RUN's (line 1) ncpu=8"),
    ("worker=7 30001:2", "worker=7, but RUN's (line 1) workers=2")])
def test_a_k_item_no_connection_has_damages_the_run(k, why):
    """14: port 70000 and 0 went into the hash, CPU 99 was left out, worker 7
    counted as a mismatch; rxl.learn.ports refuses a damaged run."""
    lines = K_RUN + [f"==RXL== LEARN K learn-on.rxq {k}"]
    assert R.parse_learn(lines)["learn-on.rxq"].damage == [f"line 2: {why}: {lines[1]}"]


def test_the_ports_tool_refuses_a_k_item_with_port_0(tmp_path):
    from click.testing import CliRunner
    from rxl.learn import ports as P
    log = tmp_path / "k.log"
    log.write_text("\n".join(K_RUN + ["==RXL== LEARN K learn-on.rxq worker=0 0:0"]) + "\n")
    res = CliRunner().invoke(P.main, [str(log), "--label", "learn-on.rxq"])
    assert res.exit_code == 2
    assert res.stderr.splitlines() == [
        f"Error: {log}: run learn-on.rxq damaged: line 2: foreign port 0 is no TCP port "
        "(1 to 65535): ==RXL== LEARN K learn-on.rxq worker=0 0:0"]


# ------------------------------------------ 9: --modules and a tree without MINIMAL

@pytest.mark.parametrize("mode", ["--check-only", "--dry-run"])
def test_run_modules_refuses_a_src_without_minimal(mode, work):
    """9: exit 0; the dry run planned KERNCONF=MINIMAL ("# root disk: ...
    cannot read it"), which rxl build --modules refuses."""
    t15 = _tree(work / "t15", 15)
    before = _files(work)
    assert _error(["run", mode, "--no-series", "--modules", "--src", t15]) == (
        "Error: Invalid value for '--modules': MINIMAL: no such config in "
        f"{t15}/sys/amd64/conf")
    assert _files(work) == before
    (t15 / "sys/amd64/conf/MINIMAL").write_text("ident MINIMAL\n")
    r = _run(["run", "--check-only", "--no-series", "--modules", "--src", t15])
    assert r.exit_code == 0, r.output


# ------------------------------------------ 15: request snapshots that contradict

REQS = DATA / "learn" / "requests-format.log"
S2W0 = ("==RXL== LEARN S learn-off.rxq.r1 seq=2 worker=0 rconns=50 reqs=2000 xreqs=1000 "
        "ureqs=0 slept=1900 xwakes=950 nvcsw=1912 nivcsw=88")
SS2 = "==RXL== LEARN SS learn-off.rxq.r1 seq=2 t_ms=6000 swtch=9500 intr_err=0"


def _reqs_damage(tmp_path, edit):
    lines = REQS.read_text().splitlines()
    edit(lines)
    p = tmp_path / "r.log"
    p.write_text("\n".join(lines) + "\n")
    a = analyze_log(str(p))
    return p, [e.split(" damaged: ", 1)[1] for e in a["errors"] if " damaged: " in e]


def _reqs_n(text):
    return _at(REQS.read_text().splitlines(), text) + 1


@pytest.mark.parametrize("old,new,why,before", [
    (SS2, SS2.replace("swtch=9500", "swtch=100"), "swtch=100 went back from 5100",
     "==RXL== LEARN SS learn-off.rxq.r1 seq=1 t_ms=2000 swtch=5100 intr_err=0"),
    (S2W0, S2W0.replace("nvcsw=1912", "nvcsw=5"), "nvcsw=5 went back from 12",
     "==RXL== LEARN S learn-off.rxq.r1 seq=1 worker=0 rconns=50 reqs=0 xreqs=0 ureqs=0 "
     "slept=0 xwakes=0 nvcsw=12 nivcsw=0"),
    (S2W0, S2W0.replace("xreqs=1000", "xreqs=5000"),
     "xreqs + ureqs = 5000, more than reqs=2000 (a part of it)", None),
    (S2W0, S2W0.replace("xwakes=950", "xwakes=5000"),
     "xwakes = 5000, more than slept=1900 (a part of it)", None)])
def test_a_snapshot_that_contradicts_damages_the_run(tmp_path, old, new, why, before):
    """15 (swtchback, nvcswback, xreqs-gt-reqs, xwakes-gt.log): exit 0, the
    wakeups table printed "guest ctx sw net/1k" -1350, x-cpu req/1k 1250."""
    p, dmg = _reqs_damage(tmp_path, _replace(old, new))
    where = f" (line {_reqs_n(before)}, the snapshot before)" if before else ""
    assert dmg == [f"line {_reqs_n(old)}: {why}{where}: {new}"]
    r = _run(["learn", "--log", p])
    assert r.exit_code == 1 and "-1350" not in r.stdout and "1250" not in r.stdout


def test_a_repeated_s_line_damages_the_run(tmp_path):
    """15 (dupS.log): the second copy overwrote the first without a word."""
    _, dmg = _reqs_damage(tmp_path, lambda ls: ls.insert(_at(ls, S2W0) + 1, S2W0))
    assert dmg == [f"line {_reqs_n(S2W0) + 1}: a second S line of snapshot 2's worker 0: "
                   f"{S2W0}"]


# ------------------------------------------ 10: make run RUN_ARGS=--check-only

REPO = Path(__file__).resolve().parents[3]


def _make_lines(*args):
    import subprocess
    out = subprocess.run(["make", "-n", "-C", str(REPO), "--no-print-directory", "run",
                          *args], capture_output=True, text=True, check=True).stdout
    return [ln for ln in out.splitlines() if "/rxl " in ln]


@pytest.mark.parametrize("extra", ["--check-only", "--dry-run --json"])
def test_make_run_with_check_only_or_dry_run_runs_that_alone(extra):
    """10: the recipe's own --check-only line came first: "--check-only given
    twice", resp. "'--dry-run': not with --check-only"; no way through make."""
    assert _make_lines(f"RUN_ARGS={extra}", "SRC=/x") == [
        f".venv/bin/rxl run --src /x {extra}"]


def test_make_run_otherwise_checks_installs_and_runs():
    lines = _make_lines("RUN_ARGS=--memory 512", "SRC=/x")
    assert lines[0] == ".venv/bin/rxl run --check-only --src /x --memory 512"
    assert lines[1].startswith(".venv/bin/rxl doctor --install --for $(")
    assert lines[2] == ".venv/bin/rxl run --src /x --memory 512"


# ------------------------------------------ 13: a BASE whose version is not its commit's

def test_series_apply_refuses_a_base_whose_version_is_not_its_commits(tmp_path):
    """13: BASE said 1400507, the tree at its commit 1500068: "applied 1
    patch(es)", and the runs would plan 14.0's compilers before the fetch."""
    import subprocess
    from fakefreebsd import _series, _tree as git_tree
    from rxl.tree import patch as S
    src = tmp_path / "src"
    base = git_tree(src, major=15)
    patches = _series(tmp_path, src, base)
    assert S.read_base(patches).freebsd_version == "1500068"  # the fixture reads it
    (patches / "BASE").write_text(S.Base("owner/repo", base, "1400507").text())

    def state():
        return subprocess.run(["git", "-C", str(src), "for-each-ref"], capture_output=True,
                              text=True).stdout + _files(src).__repr__()
    before = state()
    assert _error(["series", "apply", "--src", src, "--patches", patches]) == (
        "Error: Invalid value for '--patches': BASE says __FreeBSD_version 1400507, but "
        f"sys/sys/param.h of its commit {base[:12]} in {src} says 1500068: the runs plan "
        "the release from BASE before the base is fetched; correct BASE")
    assert state() == before
    (patches / "BASE").write_text(S.Base("owner/repo", base, "1500068").text())
    r = _run(["series", "apply", "--src", src, "--patches", patches])
    assert r.exit_code == 0, r.output
