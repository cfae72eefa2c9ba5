"""rxl.verify.parse's RunResult, field by field, on logs built from the rc
template's sentinels (harness/rxl/guest/templates/rc.j2)."""

import json

from rxl.verify.parse import parse_console

ONE_GROUP = ('<groups><group level="1" cache-level="0"><cpu count="2" mask="3">0, 1</cpu>'
             '</group></groups>')


def _run(*body):
    return parse_console(["==RXL== BEGIN t", *body, "==RXL== END t"])


def test_a_topology_of_one_group_is_one_socket():
    r = _run("==RXL== TOPOLOGY BEGIN", ONE_GROUP, "==RXL== TOPOLOGY END",
             "==RXL== SYSCTL dev.em.0.iflib.rxq0.cpu: 1",
             "==RXL== SYSCTL dev.em.0.iflib.rxq1.cpu: 7")
    assert r.topology.children == ()
    assert r.sockets == [(0, 1)]
    assert r.socket_of_rxq == {"dev.em.0.iflib.rxq0.cpu": 0, "dev.em.0.iflib.rxq1.cpu": None}
    assert parse_console(["==RXL== BEGIN t", "==RXL== END t"]).sockets == []


def test_to_dict_carries_sockets_socket_of_rxq_and_case_names():
    r = _run("==RXL== TOPOLOGY BEGIN", ONE_GROUP, "==RXL== TOPOLOGY END",
             "==RXL== SYSCTL dev.em.0.iflib.rxq0.cpu: 1", "==RXL== ATF BEGIN",
             "==RXL== LIST /rxl/tests/p a", "==RXL== CASE /rxl/tests/p a rc=0 t=3 passed",
             "==RXL== ATF END")
    d = json.loads(json.dumps(r.to_dict()))
    assert d["sockets"] == [[0, 1]]
    assert d["socket_of_rxq"] == {"dev.em.0.iflib.rxq0.cpu": 0}
    assert d["cases"] == [{"prog": "/rxl/tests/p", "case": "a", "status": "passed", "reason": "",
                           "exit_code": 0, "seconds": 3, "name": "p:a"}]
    assert d["outcome"] == "completed" and d["label"] == "t" and d["begin_line"] == 1


def test_a_result_word_on_the_case_line_wins_over_earlier_output():
    """The rc prints a case's output before its CASE line and its last line
    on it: a case that printed 'failed: first try' and then passed passed."""
    r = _run("==RXL== ATF BEGIN", "==RXL== LIST /p a", "failed: first try",
             "==RXL== CASE /p a rc=0 t=1 passed", "==RXL== ATF END")
    assert (r.cases[0].status, r.cases[0].reason) == ("passed", "")


def test_a_reason_is_rebuilt_from_its_result_word_whatever_lines_follow_it():
    for middle in ([], ["two"], ["two", "three"], ["two", "three", "four"]):
        r = _run("==RXL== ATF BEGIN", "==RXL== LIST /p a", "failed: one", *middle,
                 "==RXL== CASE /p a rc=1 t=1 last", "==RXL== ATF END")
        assert (r.cases[0].status, r.cases[0].reason) == (
            "failed", " / ".join(["one", *middle, "last"]))


def test_a_reboot_and_a_log_without_begin_are_noted_on_their_line():
    r = _run("==RXL== LIST /p a", "Copyright (c) 1992-2023 The FreeBSD Project.")
    assert r.outcome == "rebooted"
    assert "line 3: the guest booted again before its end marker" in r.notes
    assert parse_console(["one line of boot noise"]).notes == [
        "line 1: no ==RXL== BEGIN: not a console log, or the guest never reached its rc"]
    assert parse_console([], first_line=7).notes == [
        "an empty log: no ==RXL== BEGIN: not a console log"]


def test_numbers_are_ascii_digits_as_sh_and_sysctl_print_them():
    """int() reads '\u0663' (Arabic-Indic 3) as 3 and refuses '\u00b2'; neither is
    what a FreeBSD console prints, so either is a line the parser names."""
    for digit in ("\u0663", "\u00b2"):
        r = _run(f"==RXL== SYSCTL dev.em.0.iflib.rxq0.cpu: {digit}", "==RXL== ATF BEGIN",
                 "==RXL== LIST /p a", f"==RXL== CASE /p a rc={digit} t=1 passed",
                 "==RXL== ATF END")
        assert r.rxq == {} and r.outcome == "damaged"
        assert r.notes[0].startswith("line 2: rx queue CPU is no CPU id (0 to 1023): ")
        assert r.notes[1].startswith("line 5: malformed CASE line: ")
        assert [c.status for c in r.cases] == ["crashed"]


def test_the_last_line_is_the_last_one_with_text():
    r = parse_console(["==RXL== BEGIN x", "stuck in a case", "", "  "])
    assert r.last_line == "stuck in a case" and r.outcome == "crashed"
