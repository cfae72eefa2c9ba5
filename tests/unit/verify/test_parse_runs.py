"""rxl.verify.parse and ``rxl parse`` never guess: every line is counted once
or named.

Two runs in one log keep their labels; a line no single run of the rc
template (harness/rxl/guest/templates/rc.j2) prints (a second CASE or LIST
line of a case, a sentinel after END, an rx queue CPU that is no CPU id)
makes the run ``damaged`` and names its line; a result word its exit status
contradicts is ``broken``, by kyua's rule; a file with no BEGIN is no
console log (exit 2); and the parse is linear in the log's lines.
"""

import json
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner

from rxl.cli.main import main
from rxl.verify import report
from rxl.verify.parse import CPU_MAXSIZE, OUTCOMES, parse_console, parse_file, parse_runs

DATA = Path(__file__).resolve().parents[2] / "data" / "console"
PASS = (DATA / "synthetic-pass.log").read_text()     # BEGIN patched at line 7, END at 55
FAIL = (DATA / "synthetic-fail.log").read_text()     # BEGIN pristine at line 7, END at 55
PASS_LINES = len(PASS.splitlines())                  # 58


def _parse(tmp_path, text, *args, name="x.log", mode="w"):
    path = tmp_path / name
    (path.write_text if mode == "w" else path.write_bytes)(text)
    return CliRunner().invoke(main, ["parse", str(path), *args])


def _run(*body):
    return parse_console(["==RXL== BEGIN t", "==RXL== ATF BEGIN", *body, "==RXL== ATF END",
                          "==RXL== END t"])


# ---- two runs in one log
def test_two_runs_in_one_log_keep_both_labels(tmp_path):
    lines = (PASS + FAIL).splitlines()
    runs = parse_runs(lines)
    assert [r.label for r in runs] == ["patched", "pristine"]
    assert [r.begin_line for r in runs] == [7, PASS_LINES + 7]
    assert [[c.status for c in r.cases] for r in runs] == [["passed", "passed"],
                                                          ["passed", "failed"]]
    assert [r.outcome for r in runs] == ["completed", "completed"]
    # one run per log where the harness reads one: the second run is damage
    whole = parse_console(lines)
    assert whole.outcome == "damaged" and whole.label == "patched"
    assert f"line {PASS_LINES + 7}: a second run after the end marker (line 55): not counted: " \
           "==RXL== BEGIN pristine" in whole.notes
    res = _parse(tmp_path, PASS + FAIL)
    assert res.exit_code == 1                          # pristine's basic_ipv6 failed
    assert "so_reuseport_lb_test:basic_ipv6  passed   failed" in res.output
    res = _parse(tmp_path, PASS + PASS.replace("patched", "spread"), "--json")
    assert res.exit_code == 0
    assert [d["label"] for d in json.loads(res.output)] == ["patched", "spread"]


def test_the_same_run_twice_is_refused_naming_the_line(tmp_path):
    res = _parse(tmp_path, PASS + PASS)
    assert res.exit_code == 2
    assert res.stderr == (f"Error: {tmp_path / 'x.log'} line {PASS_LINES + 7}: a second run "
                          "labelled patched (the first began at line 7): one log per run, or "
                          "runs of different labels\n")
    assert res.stdout == ""                            # no table of 4 cases listing 2


def test_a_second_case_or_list_line_of_one_case_is_damage():
    r = _run("==RXL== LIST /p a", "==RXL== CASE /p a rc=1 t=1 failed: x",
             "==RXL== CASE /p a rc=0 t=1 passed")
    assert r.outcome == "damaged"
    assert [(c.name, c.status) for c in r.cases] == [("p:a", "failed")]   # the first counts
    assert "line 5: a second CASE line for /p a (the first at line 4): not counted" in r.notes
    r = _run("==RXL== LIST /p a", "==RXL== LIST /p a", "==RXL== CASE /p a rc=0 t=1 passed")
    assert r.outcome == "damaged" and len(r.cases) == 1
    assert "line 4: a second LIST line for /p a (the first at line 3): not counted" in r.notes
    # the same case name in two programs is two cases
    r = _run("==RXL== LIST /p a", "==RXL== LIST /q a", "==RXL== CASE /p a rc=0 t=1 passed",
             "==RXL== CASE /q a rc=0 t=1 passed")
    assert r.outcome == "completed" and [c.name for c in r.cases] == ["p:a", "q:a"]


def test_sentinels_after_the_end_marker_are_not_counted():
    r = parse_console(["==RXL== BEGIN t", "==RXL== ATF BEGIN", "==RXL== LIST /p a",
                       "==RXL== CASE /p a rc=0 t=1 passed", "==RXL== ATF END", "==RXL== END t",
                       "==RXL== CASE /p b rc=0 t=1 passed", "dev.em.0.iflib.rxq0.cpu: 3",
                       "==RXL== SYSCTL hw.ncpu: 9"])
    assert r.outcome == "damaged" and [c.name for c in r.cases] == ["p:a"]
    assert r.rxq == {} and "hw.ncpu" not in r.sysctls
    assert [n.split(":")[0] for n in r.notes] == ["line 7", "line 8", "line 9"]
    assert r.notes[0] == ("line 7: CASE after the end marker (line 6): not counted: "
                          "==RXL== CASE /p b rc=0 t=1 passed")
    # what the rc itself prints after END (holding for SSH, poweroff disabled) is no damage
    for note in ("holding for SSH", "poweroff disabled"):
        r = parse_console(["==RXL== BEGIN t", "==RXL== ATF BEGIN", "==RXL== LIST /p a",
                           "==RXL== CASE /p a rc=0 t=1 passed", "==RXL== ATF END",
                           "==RXL== END t", f"==RXL== NOTE {note}"])
        assert r.outcome == "completed" and note in r.notes


@pytest.mark.parametrize("rc,word,status", [
    (0, "passed", "passed"), (1, "passed", "broken"), (2, "passed", "broken"),
    (1, "failed", "failed"), (0, "failed", "broken"), (2, "failed", "broken"),
    (0, "skipped", "skipped"), (1, "skipped", "broken"),
    (0, "expected_failure", "expected_failure"), (1, "expected_failure", "broken"),
    (1, "broken", "broken"), (124, "passed", "timeout"),
])
def test_a_result_its_exit_status_contradicts_is_broken(rc, word, status):
    """kyua's rule (engine/atf_result.cpp, atf_result::apply): a passed,
    skipped or expected_failure case exits 0, a failed one 1."""
    c = _run("==RXL== LIST /p a", f"==RXL== CASE /p a rc={rc} t=1 {word}: why").cases[0]
    assert (c.status, c.exit_code) == (status, rc)
    if status == "broken" and word != "broken":
        assert c.reason.startswith(f"{word} but exit {rc} (a {word} case exits ")
        assert c.reason.endswith(": why")


def test_the_recorded_results_keep_kyuas_rule():
    for path in sorted(DATA.glob("*.log")):
        assert all(c.status != "broken" for c in parse_file(str(path)).cases), path.name


@pytest.mark.parametrize("value", ["-4", str(CPU_MAXSIZE), "99999999999", "x", "", "1.5",
                                   "0x2"])
@pytest.mark.parametrize("form", ["raw", "sysctl"])
def test_an_rx_queue_cpu_that_is_no_cpu_id_is_named(value, form):
    row = f"dev.em.0.iflib.rxq1.cpu: {value}"
    r = _run("==RXL== SYSCTL dev.em.0.iflib.rxq0.cpu: 0",
             row if form == "raw" else f"==RXL== SYSCTL {row}",
             "==RXL== LIST /p a", "==RXL== CASE /p a rc=0 t=1 passed")
    assert r.outcome == "damaged"
    assert r.rxq == {"dev.em.0.iflib.rxq0.cpu": 0}
    assert "dev.em.0.iflib.rxq1.cpu" not in r.sysctls
    assert [n for n in r.notes if n.startswith("line ")] == [
        f"line 4: rx queue CPU is no CPU id (0 to {CPU_MAXSIZE - 1}): "
        + (row if form == "raw" else f"==RXL== SYSCTL {row}")]


def test_rx_queue_cpus_up_to_cpu_maxsize_and_one_row_per_queue():
    r = _run(f"==RXL== SYSCTL dev.em.0.iflib.rxq0.cpu: {CPU_MAXSIZE - 1}",
             "==RXL== SYSCTL dev.em.0.iflib.rxq1.cpu: 0",
             "dev.em.0.iflib.rxq1.cpu: 0",                     # the same row again: no news
             "==RXL== LIST /p a", "==RXL== CASE /p a rc=0 t=1 passed")
    assert r.outcome == "completed" and r.rxq == {"dev.em.0.iflib.rxq0.cpu": CPU_MAXSIZE - 1,
                                                  "dev.em.0.iflib.rxq1.cpu": 0}
    r = _run("==RXL== SYSCTL dev.em.0.iflib.rxq1.cpu: 2", "dev.em.0.iflib.rxq1.cpu: 4")
    assert r.outcome == "damaged" and r.rxq == {"dev.em.0.iflib.rxq1.cpu": 2}
    assert "line 4: dev.em.0.iflib.rxq1.cpu is 4 here, 2 at line 3: not counted" in r.notes


def test_an_rx_queue_cpu_outside_the_runs_topology_is_named(tmp_path):
    """rxq1.cpu: 99 in a log whose topology block holds CPUs 0-7 was read and
    shown with L3 group '?', the run completed: no guest puts a queue there."""
    log = PASS.replace("rxq1.cpu: 4", "rxq1.cpu: 99")
    r = parse_console(log.splitlines())
    assert r.outcome == "damaged"
    topo = next(i for i, x in enumerate(log.splitlines(), 1) if "TOPOLOGY BEGIN" in x)
    assert [n for n in r.notes if n.startswith("line 48")] == [
        f"line 48: dev.em.0.iflib.rxq1.cpu is CPU 99, no CPU of the run's topology "
        f"(line {topo}: 0-7)"]
    assert parse_console(PASS.splitlines()).outcome == "completed"
    res = _parse(tmp_path, log)
    assert res.exit_code == 1 and "line 48: dev.em.0.iflib.rxq1.cpu is CPU 99" in res.output


def _edit(*pairs):
    log = PASS
    for old, new in pairs:
        assert old in log, old
        log = log.replace(old, new)
    return parse_console(log.splitlines())


C52 = "==RXL== CASE /rxl/tests/so_reuseport_lb_test basic_ipv4 rc=0 t=12 passed"


@pytest.mark.parametrize("pairs,outcome,note", [
    # END of another run's label: the patched run closed by pristine's END
    ([("END patched", "END pristine")], "damaged",
     "line 55: END pristine closes BEGIN patched (line 7)"),
    # a run with no label was given the file's name
    ([("BEGIN patched", "BEGIN "), ("END patched", "END ")], "damaged",
     "line 7: a BEGIN without a label"),
    ([("BEGIN patched", "BEGIN pat ched\x1b[31m"), ("END patched", "END pat ched\x1b[31m")],
     "damaged", "line 7: label 'pat ched\\x1b[31m' is not one word of printable ASCII"),
    # a second ATF BEGIN
    ([("==RXL== ATF BEGIN\n", "==RXL== ATF BEGIN\n==RXL== ATF BEGIN\n")], "damaged",
     "line 50: a second ATF BEGIN (the first at line 49)"),
    # a CASE no LIST line announced
    ([(C52, C52.replace("basic_ipv4", "nosuchcase"))], "damaged",
     "line 52: a CASE line for /rxl/tests/so_reuseport_lb_test nosuchcase, which no LIST "
     "line announced"),
    # hw.ncpu against the topology block's 8 CPUs
    ([("hw.ncpu: 8", "hw.ncpu: 3")], "damaged",
     "line 45: hw.ncpu 3, but the topology block (line 8) has 8 CPUs"),
    # rx queues 0 and 5: 1-4 are missing
    ([("rxq1.cpu: 4", "rxq5.cpu: 4")], "damaged",
     "line 47: dev.em.0 has rx queues 0,5 but not 1-4 (iflib numbers them from 0)"),
    # an empty topology block is said, as a damaged one is
    ([("\n".join(PASS.splitlines()[8:43]) + "\n", "")], "completed",
     "line 8: an empty topology block (no kern.sched.topology_spec): placement not judged"),
])
def test_a_line_that_contradicts_the_run_is_named(pairs, outcome, note):
    """Each of these passed as a completed run without a word."""
    r = _edit(*pairs)
    assert r.outcome == outcome, r.notes
    assert [n for n in r.notes if n.startswith(note)], r.notes
    assert "\x1b" not in r.label


@pytest.mark.parametrize("result,why", [
    ("maybe", "no ATF result word (passed, failed, skipped, expected_failure, broken) "
              "in 'maybe'"),
    ("passed extra junk", "no ATF result word"),
    ("failed: x", "failed but exit 0"),
])
def test_a_case_result_not_read_as_written_is_named(result, why):
    """rc=0 ... maybe, ... passed extra junk and rc=0 ... failed were broken
    with no note naming their line (a malformed CASE line gets one)."""
    r = _edit((C52, C52.replace("passed", result)))
    assert [c.status for c in r.cases if c.case == "basic_ipv4"] == ["broken"]
    notes = [n for n in r.notes if n.startswith("line 52:")]
    assert len(notes) == 1 and why in notes[0], r.notes
    assert notes[0].startswith("line 52: /rxl/tests/so_reuseport_lb_test basic_ipv4 counted "
                               "broken: ")


def test_a_long_seconds_field_is_a_malformed_case_line():
    r = _edit((C52, C52.replace("t=12", "t=1" + "0" * 400)))
    assert any(n.startswith("line 52: malformed CASE line") for n in r.notes), r.notes
    assert [c.status for c in r.cases if c.case == "basic_ipv4"] == ["crashed"]


def test_results_read_as_written_have_no_note():
    for res, rc in (("passed", 0), ("failed: because", 1), ("broken: no result", 1),
                    ("skipped: no", 0), ("", 139)):
        r = _edit((C52, C52.replace("rc=0", f"rc={rc}").replace(" passed", f" {res}"
                                                                     if res else "")))
        assert not [n for n in r.notes if n.startswith("line 52")], (res, r.notes)
    assert parse_console(PASS.splitlines()).notes == []


# ---- not a console log
UTF16 = PASS.encode("utf-16")
JUNIT = ('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites><testsuite name="patched" '
         'tests="1"><testcase classname="p" name="a"/></testsuite></testsuites>\n').encode()


@pytest.mark.parametrize("data", [b"", b"\n\n", bytes(range(256)) * 40, UTF16, JUNIT],
                         ids=["empty", "blank", "binary", "utf16", "junit"])
def test_a_file_that_is_no_console_log_says_so(tmp_path, data):
    res = _parse(tmp_path, data, mode="b")
    assert res.exit_code == 2
    assert res.stderr == f"Error: {tmp_path / 'x.log'}: no ==RXL== BEGIN: not a console log\n"
    r = parse_console(data.decode("utf-8", "replace").splitlines())
    assert r.outcome == "crashed" and not any("truncated" in n for n in r.notes)
    assert any("no ==RXL== BEGIN: not a console log" in n for n in r.notes)


def test_a_kernel_that_died_before_its_rc_is_a_console_log(tmp_path):
    res = _parse(tmp_path, "Copyright (c) 1992-2023 The FreeBSD Project.\npanic: page fault\n")
    assert res.exit_code == 1 and "panic" in res.output
    res = _parse(tmp_path, "==RXL== END patched\n")
    assert res.exit_code == 1 and "an end marker but no BEGIN" in res.output


# ---- linear
class _Slow(Exception):
    pass


def test_parse_and_table_are_linear_in_cases():
    """50,000 listed and reported cases (100,002 sentinel lines, 3.4 MB): a
    quadratic pass over them is 2.5e9 steps, minutes; linear, about a second."""
    n = 50_000
    lines = ["==RXL== BEGIN big", "==RXL== ATF BEGIN"]
    lines += [f"==RXL== LIST /p c{i}" for i in range(n)]
    lines += [f"==RXL== CASE /p c{i} rc=0 t=1 passed" for i in range(n)]
    lines += ["==RXL== ATF END", "==RXL== END big"]

    def slow(signum, frame):
        raise _Slow()
    old = signal.signal(signal.SIGALRM, slow)
    signal.alarm(60)                                  # generous for a loaded 2-core host
    try:
        (r,) = parse_runs(lines)
        text = report.table({r.label: r})
    except _Slow:
        pytest.fail("rxl parse of 50,000 cases took over 60 s: not linear")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert r.outcome == "completed" and len(r.cases) == n
    assert all(c.status == "passed" for c in r.cases)
    assert sum(line.endswith("  passed") for line in text.splitlines()) == n


def test_outcomes_are_the_ones_the_parser_gives():
    assert OUTCOMES[-1] == "completed" and len(set(OUTCOMES)) == len(OUTCOMES)
    assert {"panic", "witness", "rebooted", "crashed", "damaged"} == set(OUTCOMES[:-1])


def test_the_host_record_after_kyua_counts_after_the_end_marker():
    """With kyua the harness appends the host-sysctl record after the stream's END
    (rxl.verify.remote); the first 15.0 SSH run called all three boots damaged for
    it. Only ``SYSCTL <name>@after`` lines count there; any other sentinel still
    damages the run."""
    head = ["==RXL== BEGIN t", "==RXL== SYSCTL net.inet.tcp.reuseport_lb.learn@before: 0",
            "==RXL== ATF BEGIN", "==RXL== ATF END", "==RXL== END t",
            "==RXL== NOTE poweroff disabled"]
    r = parse_console(head + ["==RXL== SYSCTL net.inet.tcp.reuseport_lb.learn@after: 0",
                              "group port 1 af inet members 0 map 0 rebuilds 0 nomap 0"])
    assert r.outcome == "completed" and r.notes == ["poweroff disabled"]
    assert r.sysctls["net.inet.tcp.reuseport_lb.learn@after"] == "0"
    r = parse_console(head + ["==RXL== SYSCTL hw.ncpu: 9"])
    assert r.outcome == "damaged" and "hw.ncpu" not in r.sysctls
