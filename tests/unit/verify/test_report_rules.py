"""rxl.verify.report's verdict, rule by rule, each from both sides: a base
case (FreeBSD's own) must pass on the patched kernel and on the pristine one;
a new case must pass on the patched one and fail on the pristine one."""

from pathlib import Path

from rxl.verify.parse import parse_file
from rxl.verify.report import verdict

DATA = Path(__file__).resolve().parents[2] / "data" / "console"


def _runs(**files):
    return {label: parse_file(str(DATA / f)) for label, f in files.items()}


def test_a_base_case_failing_on_the_patched_kernel_fails_the_verdict():
    r = _runs(patched="synthetic-fail.log", pristine="synthetic-pass.log")
    v = verdict(r, base_programs=["so_reuseport_lb_test"])
    assert v.reasons == ["so_reuseport_lb_test:basic_ipv6: failed on patched, must pass"]


def test_a_new_case_failing_on_the_patched_kernel_fails_the_verdict():
    r = _runs(patched="synthetic-fail.log")
    v = verdict(r, pristine=None, new_programs=["so_reuseport_lb_test"])
    assert v.reasons == ["so_reuseport_lb_test:basic_ipv6: failed on patched, must pass"]


def test_report_json_explains_each_run_with_the_core_spread_it_reports():
    """report.json's placement: a run that reports core_spread=1 is explained
    with it; a run that reports none (a pristine kernel has no such sysctl)
    with 0, FreeBSD's numeric order."""
    import json

    from rxl.verify import placement
    from rxl.verify.report import to_json
    r = _runs(spread="real-c1-spread.log", patched="synthetic-pass.log")
    doc = json.loads(to_json(r))
    assert placement.spread_value(r["spread"]) == 1
    assert doc["placement"]["spread"] == placement.explain(r["spread"], 1)
    assert doc["placement"]["spread"]["core_spread"] == 1
    assert placement.spread_value(r["patched"]) is None
    assert doc["placement"]["patched"] == placement.explain(r["patched"], 0)
    assert doc["placement"]["patched"]["expected"] == [0, 2]


def test_junit_times_are_the_cases_seconds_and_0_when_unknown():
    import xml.etree.ElementTree as ET

    from rxl.verify.report import to_junit
    r = _runs(patched="synthetic-truncated.log")      # basic_ipv6 listed, never reported
    cases = {tc.get("name"): tc.get("time") for tc in ET.fromstring(
        to_junit(r).split("\n", 1)[1]).iter("testcase")}
    assert cases == {"boot": None, "basic_ipv4": "12", "basic_ipv6": "0"}


def test_the_table_has_a_rule_under_each_header_and_names_group_flags():
    from rxl.verify.report import table
    text = table(_runs(patched="synthetic-pass.log"))
    lines = text.splitlines()
    runs_at = lines.index("Runs")
    assert lines[runs_at + 1].split() == ["run", "outcome", "cases", "passed", "notes"]
    assert lines[runs_at + 2] == "-------  ---------  -----  ------  -----"
    assert lines[runs_at + 3].split() == ["patched", "completed", "2", "2"]
    cases_at = lines.index("Test cases")
    assert set(lines[cases_at + 2]) == {"-", " "}
    assert "level 1 cache L0 flags -: cpus 0,1,2,3,4,5,6,7" in lines
    assert "  level 2 cache L3 flags NODE: cpus 0,1,2,3" in lines
    assert "    level 3 cache L2 flags SMT: cpus 0,1" in lines


def test_the_runs_row_shows_the_first_panic_or_note_and_the_fallbacks_are_listed():
    from rxl.verify.parse import parse_console
    from rxl.verify.report import table
    panicked = parse_console(["==RXL== BEGIN p", "panic: first", "panic: second"])
    noted = parse_console(["==RXL== BEGIN n", "==RXL== NOTE one", "==RXL== NOTE two",
                           "==RXL== END n"])
    lines = table({"p": panicked, "n": noted}, fallbacks={"n": "sshd never answered"}
                  ).splitlines()
    assert lines[3].split(None, 4) == ["p", "panic", "0", "0", "panic: first"]
    assert lines[4].split(None, 4) == ["n", "completed", "0", "0", "one"]
    at = lines.index("Transport: over SSH, except")
    assert lines[at + 1] == "  n: sshd never answered"


def test_the_table_explains_each_runs_placement_with_the_core_spread_it_reports():
    from rxl.verify.report import table
    lines = table(_runs(spread="real-c1-spread.log", patched="synthetic-pass.log")).splitlines()
    assert ("spread: em0 domain unknown (no _PXM), interrupt set 0,2,4,6 (4 CPUs); "
            "core_spread=1: rx queues on 0,4, expected 0,2") in lines
    assert ("patched: em0 domain unknown (no _PXM), interrupt set 0,2,4,6 (4 CPUs); "
            "core_spread=0: rx queues on 0,4, expected 0,2") in lines
