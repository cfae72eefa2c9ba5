"""rxl.verify.report: verdict, JSON, JUnit XML and the table, on recorded logs."""

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rxl.verify.parse import parse_file
from rxl.verify.report import table, to_json, to_junit, verdict

DATA = Path(__file__).resolve().parents[2] / "data" / "console"


def runs(**files):
    return {label: parse_file(str(DATA / f)) for label, f in files.items()}


def test_verdict_new_cases_must_pass_patched_and_fail_pristine():
    r = runs(patched="synthetic-pass.log", pristine="synthetic-fail.log")
    v = verdict(r, new_programs=["so_reuseport_lb_test"])
    # basic_ipv4 passed on pristine too: a new case must fail there.
    assert not v.ok
    assert v.reasons == ["so_reuseport_lb_test:basic_ipv4: passed on pristine, must fail"]


def test_verdict_base_cases_must_pass_on_both():
    r = runs(patched="synthetic-pass.log", pristine="synthetic-fail.log")
    v = verdict(r, base_programs=["so_reuseport_lb_test"])
    assert v.reasons == ["so_reuseport_lb_test:basic_ipv6: failed on pristine, must pass"]
    v = verdict(runs(patched="synthetic-pass.log", pristine="synthetic-pass.log"),
                base_programs=["so_reuseport_lb_test"])
    assert v.ok, v.reasons


def test_verdict_spread_and_crash_and_missing_runs():
    r = runs(patched="synthetic-pass.log", spread="synthetic-pass.log",
             pristine="synthetic-truncated.log")
    v = verdict(r, spread="spread", base_programs=["so_reuseport_lb_test"])
    assert "pristine: run crashed" in v.reasons
    # 0 and 4: two NUMA domains of one L3 each, interrupt set 0,2,4,6 (no %domain,
    # first SMT threads).  core_spread=1 stays in the first domain (0,2).
    assert "spread: core_spread=1 put rx queues on 0,4, expected the spread order of " \
        "the interrupt set 0,2,4,6: 0,2" in v.reasons
    one_socket = runs(patched="synthetic-pass.log", spread="synthetic-fail.log")
    v = verdict(one_socket, pristine=None, spread="spread")
    assert not any("rx queues" in x for x in v.reasons)     # 0 and 2
    v = verdict({}, spread="spread")
    assert {"patched: no run", "pristine: no run", "spread: no run"} <= set(v.reasons)


def test_json_round_trip():
    r = runs(patched="synthetic-pass.log")
    doc = json.loads(to_json(r, stages=[{"name": "boot", "status": "ok", "seconds": 34.0}],
                             verdict_=verdict(r, pristine=None)))
    assert doc["runs"]["patched"]["outcome"] == "completed"
    assert doc["stages"][0]["seconds"] == 34.0
    assert doc["verdict"]["ok"] is True


def test_junit_panic_is_an_error_never_green():
    r = runs(patched="synthetic-pass.log", pristine="synthetic-panic.log")
    root = ET.fromstring(to_junit(r))
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert suites["patched"].get("failures") == "0" and suites["patched"].get("errors") == "0"
    pri = suites["pristine"]
    assert pri.get("errors") == "2"  # the boot itself + the crashed case
    boot = pri.find("testcase[@name='boot']/error")
    assert boot is not None and "panic" in boot.get("message")


def test_junit_failure_message():
    root = ET.fromstring(to_junit(runs(pristine="synthetic-fail.log")))
    f = root.find(".//testcase[@name='basic_ipv6']/failure")
    assert "accepted 0 of 1000" in f.get("message")


def test_table_shows_cases_placement_and_topology():
    r = runs(patched="synthetic-pass.log", pristine="synthetic-fail.log")
    text = table(r, verdict(r, base_programs=["so_reuseport_lb_test"]))
    assert "so_reuseport_lb_test:basic_ipv6  passed   failed" in text
    assert "patched   -            dev.em.0.iflib.rxq1.cpu  4    1         1" \
        in text
    assert "pristine  -            dev.em.0.iflib.rxq1.cpu  2    0         0" \
        in text
    assert "2 top-level groups 0,1,2,3 | 4,5,6,7" in text
    assert "Verdict: FAIL" in text


def test_verdict_cases_the_patched_boot_never_reached():
    r = runs(patched="real-c3-panic.log", pristine="real-c1-patched.log")
    v = verdict(r, new_programs=["so_reuseport_lb_cpu_test", "so_reuseport_lb_learn_test"],
                base_programs=["so_reuseport_lb_test"])
    assert "patched: run panic" in v.reasons
    assert "so_reuseport_lb_test:basic_ipv4: not run on patched" in v.reasons
    assert "so_reuseport_lb_learn_test:capture: not run on patched" in v.reasons
    assert "so_reuseport_lb_cpu_test:option: crashed on patched, must pass" in v.reasons


def test_a_targets_notes_are_in_the_text_and_the_junit(tmp_path):
    """report.txt showed only a run's first note ("poweroff disabled"); where
    the cases ran, by what and on which kernel must be readable there and
    in junit.xml (the report shows the switch)."""
    r = runs(patched="synthetic-pass.log")
    notes = ["poweroff disabled", "cases run by kyua (/usr/bin/kyua)",
             "target: ssh://root@192.0.2.10:22",
             "kernel: /boot/kernel.rxl-0123456789ab/kernel (FreeBSD 14.0-STABLE #1)",
             "kernel before --install-kernel: /boot/kernel/kernel (FreeBSD 14.0-RELEASE)"]
    r["patched"].notes[:] = notes
    text = table(r)
    body = text.split("Notes\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert body == [f"  patched: {n}" for n in notes]
    props = ET.fromstring(to_junit(r)).findall(
        "testsuite[@name='patched']/properties/property")
    assert [(p.get("name"), p.get("value")) for p in props] == [("note", n) for n in notes]


# ------------------------------------------------------- results fail closed

def _suite(xml, label):
    return next(s for s in ET.fromstring(xml).iter("testsuite") if s.get("name") == label)


def test_every_case_status_has_its_junit_result_and_an_unknown_one_fails():
    from rxl.verify.parse import CASE_STATUSES, CaseResult, RunResult
    from rxl.verify.report import JUNIT_RESULT, junit_result
    assert set(JUNIT_RESULT) == set(CASE_STATUSES)
    assert [junit_result(s) for s in CASE_STATUSES] == [
        None, "failure", "skipped", "skipped", "error", "error", "error"]
    # A status the harness never wrote (a new kyua word, a bug) is a failure,
    # never a silent pass.
    run = RunResult(outcome="completed", cases=[
        CaseResult("/t/p", "a", "passed"), CaseResult("/t/p", "b", "mystery", "who knows")])
    suite = _suite(to_junit({"patched": run}), "patched")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "1", "0")
    b = next(tc for tc in suite.iter("testcase") if tc.get("name") == "b")
    assert b.find("failure").get("message") == "mystery: who knows"
    a = next(tc for tc in suite.iter("testcase") if tc.get("name") == "a")
    assert list(a) == []


def test_a_completed_run_without_cases_is_no_tests_not_an_empty_green_suite():
    from rxl.verify.parse import RunResult
    empty = RunResult(outcome="completed")
    xml = to_junit({"patched": empty, "spread": RunResult(outcome="completed")},
                   need_cases=["patched"])
    suite = _suite(xml, "patched")
    assert (suite.get("tests"), suite.get("errors")) == ("1", "1")
    (tc,) = suite.iter("testcase")
    assert tc.get("name") == "NO_TESTS"
    assert tc.find("error").get("message") == "the run completed without a test case"
    # A boot that ran no program by design (a spread boot) stays an empty suite.
    spread = _suite(xml, "spread")
    assert (spread.get("tests"), spread.get("errors"), list(spread)) == ("0", "0", [])
    # By default every run must hold cases.
    assert _suite(to_junit({"spread": RunResult(outcome="completed")}),
                  "spread").get("errors") == "1"


def test_verdict_no_cases_on_either_run_and_cases_the_pristine_run_lacks():
    from rxl.verify.parse import RunResult
    r = runs(patched="synthetic-pass.log")
    r["pristine"] = RunResult(outcome="completed", label="pristine")
    v = verdict(r, new_programs=["so_reuseport_lb_test"])
    assert "pristine: no test cases ran" in v.reasons
    assert "so_reuseport_lb_test:basic_ipv4: not run on pristine, must fail there" in v.reasons
    v = verdict(r, base_programs=["so_reuseport_lb_test"])
    assert "so_reuseport_lb_test:basic_ipv4: not run on pristine, must pass there" in v.reasons
    v = verdict({"patched": RunResult(outcome="completed")}, pristine=None)
    assert v.reasons == ["patched: no test cases ran"] and not v.ok
    # need_cases names the runs that must hold cases: a spread boot need not.
    v = verdict({"patched": r["patched"], "spread": RunResult(outcome="completed")},
                pristine=None, need_cases=["patched"])
    assert v.ok, v.reasons


#: The series' cases (tests/atf/so_reuseport_lb_cpu_test.c) and ten of FreeBSD's own.
SERIES = "so_reuseport_lb_cpu_test"
#: Read from the program's ATF_TP_ADD_TC lines, so that a renamed case is renamed here.
SERIES_CASES = re.findall(
    r"ATF_TP_ADD_TC\(tp, (\w+)\)",
    (Path(__file__).resolve().parents[3] / "tests" / "atf" / f"{SERIES}.c").read_text())
assert len(SERIES_CASES) == 17, SERIES_CASES
BASE = "so_reuseport_lb_test"
BASE_CASES = [f"case{i}" for i in range(10)]


def _console(label, series_word, prog_dir=""):
    """A console log as the guest's rc prints one boot: every case listed, then run."""
    lines = [f"==RXL== BEGIN {label}", "==RXL== ATF BEGIN"]
    for prog, cases, word in ((SERIES, SERIES_CASES, series_word),
                              (BASE, BASE_CASES, "passed")):
        lines += [f"==RXL== LIST {prog_dir}{prog} {c}" for c in cases]
        lines += [f"==RXL== CASE {prog_dir}{prog} {c} rc={0 if word == 'passed' else 1} t=1 "
                  f"{word}" + ("" if word == "passed" else ": no option") for c in cases]
    return lines + ["==RXL== ATF END", f"==RXL== END {label}"]


def _kyua_junit(word):
    """kyua report-junit of the same cases (its classnames: the program, dots)."""
    tcs = []
    for prog, cases, w in ((SERIES, SERIES_CASES, word), (BASE, BASE_CASES, "passed")):
        for c in cases:
            body = "" if w == "passed" else '<failure message="no option"/>'
            tcs.append(f'<testcase classname="{prog}" name="{c}" time="1.0">{body}</testcase>')
    return f"<testsuite>{''.join(tcs)}</testsuite>"


def _case_table(text):
    """The Test cases section of report.txt: its rows, each split in cells."""
    lines = text.splitlines()
    i = lines.index("Test cases")
    rows = []
    for line in lines[i + 1:]:
        if not line.strip():
            break
        rows.append(line.split())
    return rows[0], rows[2:]  # the header; the rows below its dashes


@pytest.mark.parametrize("how", ["serial", "kyua-patched", "kyua-both", "paths"])
def test_the_case_table_of_two_boots_lists_each_case_once(how):
    """A run's report.txt listed the 12 series cases twice in the patched column
    (the counts right, docs/results/run-15.md). Two boots' parsed results, however
    each boot's cases were read (the rc on the console, kyua's JUnit over SSH, a
    program given by path), make one row per case: every case once, in order,
    passed on patched, the series' failed on pristine, '-' for a boot without cases."""
    from rxl.verify.kyua import cases_from_kyua_junit
    from rxl.verify.parse import parse_console
    patched = parse_console(_console("patched", "passed",
                                     "/var/tmp/rxl/tests/" if how == "paths" else ""))
    pristine = parse_console(_console("pristine", "failed",
                                      "./" if how == "paths" else ""))
    spread = parse_console(["==RXL== BEGIN spread", "==RXL== ATF BEGIN", "==RXL== ATF END",
                            "==RXL== END spread"])
    if how.startswith("kyua"):
        patched.cases = cases_from_kyua_junit(_kyua_junit("passed"), "/var/tmp/rxl/tests")
    if how == "kyua-both":
        pristine.cases = cases_from_kyua_junit(_kyua_junit("failed"), "/var/tmp/rxl/tests")
    runs_ = {"patched": patched, "spread": spread, "pristine": pristine}
    n = len(SERIES_CASES) + len(BASE_CASES)
    assert [len(r.cases) for r in runs_.values()] == [n, 0, n]
    text = table(runs_, fallbacks={"patched": "SSH never answered; fell back"}
                 if how == "serial" else None)
    head, rows = _case_table(text)
    assert head == ["case", "patched", "spread", "pristine"]
    assert rows == ([[f"{SERIES}:{c}", "passed", "-", "failed"] for c in SERIES_CASES]
                    + [[f"{BASE}:{c}", "passed", "-", "passed"] for c in BASE_CASES])
    assert text.count(f"{SERIES}:steering_ipv4") == 1
    runs_line = [ln.split()[:4] for ln in text.splitlines()[3:6]]
    assert runs_line == [["patched", "completed", str(n), str(n)],
                         ["spread", "completed", "0", "0"],
                         ["pristine", "completed", str(n), str(len(BASE_CASES))]]
