"""rxl.verify.parse on recorded console logs (tests/data/console)."""

from pathlib import Path

import pytest

from rxl.decide.cpugroup import CG_FLAG_SMT
from rxl.verify.parse import parse_console, parse_file

DATA = Path(__file__).resolve().parents[2] / "data" / "console"


def test_pass_log():
    r = parse_file(str(DATA / "synthetic-pass.log"))
    assert r.outcome == "completed" and r.label == "patched"
    assert [(c.name, c.status) for c in r.cases] == [
        ("so_reuseport_lb_test:basic_ipv4", "passed"),
        ("so_reuseport_lb_test:basic_ipv6", "passed")]
    assert r.rxq == {"dev.em.0.iflib.rxq0.cpu": 0, "dev.em.0.iflib.rxq1.cpu": 4}
    assert r.sockets == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert r.socket_of_rxq == {"dev.em.0.iflib.rxq0.cpu": 0, "dev.em.0.iflib.rxq1.cpu": 1}
    assert r.sysctls["net.isr.dispatch"] == "direct"
    assert r.cases[0].seconds == 12 and r.cases[0].exit_code == 0


def test_fail_log_keeps_reason():
    r = parse_file(str(DATA / "synthetic-fail.log"))
    assert r.outcome == "completed"
    c = r.cases[1]
    assert c.status == "failed" and "accepted 0 of 1000" in c.reason and c.exit_code == 1


def test_truncated_log_is_crashed_never_passed():
    r = parse_file(str(DATA / "synthetic-truncated.log"))
    assert r.outcome == "crashed"
    assert [c.status for c in r.cases] == ["passed", "crashed"]
    assert any("no end marker" in n for n in r.notes)


def test_panic_log():
    r = parse_file(str(DATA / "synthetic-panic.log"))
    assert r.outcome == "panic"
    assert r.panic_lines[0].startswith("panic: Assertion")
    assert any("KDB: enter" in p for p in r.panic_lines)
    assert r.cases[-1].status == "crashed"


def test_panic_wins_over_end_marker():
    r = parse_console(["==RXL== BEGIN x", "Fatal trap 12: page fault while in kernel mode",
                       "==RXL== END x"])
    assert r.outcome == "panic"


def test_timeout_broken_and_crlf():
    r = parse_console([
        "==RXL== BEGIN t\r\n", "==RXL== ATF BEGIN\r\n",
        "==RXL== LIST /p a\r\n", "==RXL== LIST /p b\r\n", "==RXL== LIST /p c\r\n",
        "==RXL== CASE /p a rc=124 t=300 \r\n",
        "==RXL== CASE /p b rc=139 t=1 \r\n",
        "==RXL== CASE /p c rc=0 t=1 skipped: requires root\r\n",
        "==RXL== ATF END\r\n", "==RXL== END t\r\n"])
    assert [(c.case, c.status) for c in r.cases] == [("a", "timeout"), ("b", "broken"),
                                                      ("c", "skipped")]
    assert r.cases[1].reason == "no result file (exit 139)"
    assert r.cases[2].reason == "requires root"


def test_raw_rxq_lines_and_unknown_sentinels_noted():
    r = parse_console(["==RXL== BEGIN t", "dev.em.1.iflib.rxq3.cpu: 6", "==RXL== WAT",
                       "==RXL== CASE junk", "==RXL== NOTE no inet6 on lo0", "==RXL== END t"])
    assert r.rxq == {"dev.em.1.iflib.rxq3.cpu": 6}
    assert any("unknown sentinel" in n for n in r.notes)
    assert any("malformed CASE" in n for n in r.notes)
    assert "no inet6 on lo0" in r.notes


def test_empty_log_is_crashed():
    r = parse_console([])
    assert r.outcome == "crashed" and r.cases == []


def test_topology_block_goes_through_the_topology_parser():
    def block(*xml):
        return parse_console(["==RXL== BEGIN t", "==RXL== TOPOLOGY BEGIN", *xml,
                              "==RXL== TOPOLOGY END", "==RXL== END t"])
    for bad in ("not xml <", "<foo/>"):
        r = block(bad)
        assert r.topology is None and r.outcome == "damaged"  # issue 27 nc8 fault 15
        assert any("console topology block" in n for n in r.notes)
    r = block('kern.sched.topology_spec: <groups><group level="1" cache-level="0">'
              '<cpu count="2" mask="3">0, 1</cpu></group></groups>')
    assert r.topology.cpus == (0, 1) and r.topology.children == ()


def test_unclosed_topology_noted():
    r = parse_console(["==RXL== BEGIN t", "==RXL== TOPOLOGY BEGIN", "<groups>"])
    assert r.topology is None
    assert any("not closed" in n for n in r.notes)


def test_to_dict_is_json_ready():
    import json
    r = parse_file(str(DATA / "synthetic-pass.log"))
    d = json.loads(json.dumps(r.to_dict()))
    assert d["cases"][0]["name"] == "so_reuseport_lb_test:basic_ipv4"
    assert d["sockets"] == [[0, 1, 2, 3], [4, 5, 6, 7]]


# ---- real guest consoles (see tests/data/console/README.md)
def test_real_commit1_boot():
    r = parse_file(str(DATA / "real-c1-patched.log"))
    assert r.outcome == "completed" and r.label == "patched"
    status = {c.name: c.status for c in r.cases}
    assert status["so_reuseport_lb_test:basic_ipv4"] == "passed"
    assert status["so_reuseport_lb_test:basic_ipv6"] == "passed"
    assert status["so_reuseport_lb_cpu_test:option"] == "failed"
    assert len(r.cases) == 12
    assert r.rxq == {"dev.em.0.iflib.rxq0.cpu": 0, "dev.em.0.iflib.rxq1.cpu": 2}
    assert r.sockets == [(0, 1, 2, 3), (4, 5, 6, 7)]
    smt = [g.cpus for s in r.topology.children for g in s.children]
    assert smt == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert all(g.flags & CG_FLAG_SMT for s in r.topology.children for g in s.children)
    assert r.sysctls["vm.ndomains"] == "2" and r.sysctls["dev.em.0.iflib.core_spread"] == "0"
    assert r.panic_lines == []


def test_real_spread_boot_moves_rxq1_to_socket1():
    r = parse_file(str(DATA / "real-c1-spread.log"))
    assert r.sysctls["dev.em.0.iflib.core_spread"] == "1"
    assert r.socket_of_rxq == {"dev.em.0.iflib.rxq0.cpu": 0, "dev.em.0.iflib.rxq1.cpu": 1}


def test_real_truncated_is_crashed():
    r = parse_file(str(DATA / "real-c1-truncated.log"))
    assert r.outcome == "crashed"
    assert {c.name: c.status for c in r.cases}["so_reuseport_lb_test:basic_ipv6"] == "crashed"


def test_real_panic():
    r = parse_file(str(DATA / "real-panic.log"))
    assert r.outcome == "panic"
    assert "panic: kdb_sysctl_panic" in r.panic_lines[0]
    # a log of the first rc, which printed no ATF BEGIN: its LIST line is named,
    # not counted (issue 27, tenth pass, 2)
    assert r.cases == [] and any(n.startswith("line 158: a LIST line before ATF BEGIN")
                                 for n in r.notes)


def test_sysctl_named_panic_is_not_a_panic():
    r = parse_console(["==RXL== BEGIN x", "debug.kdb.panic: 0", "kern.panic_reboot_wait_time: -1",
                       "==RXL== END x"])
    assert r.outcome == "completed"


def test_real_panic_in_a_test_case():
    r = parse_file(str(DATA / "real-c3-panic.log"))
    assert r.outcome == "panic"
    assert r.panic_lines[0] == "Fatal trap 12: page fault while in kernel mode"
    assert "panic: page fault" in r.panic_lines
    assert {c.status for c in r.cases} == {"crashed"} and len(r.cases) == 6


def test_real_experimental_boot_mostly_passes():
    r = parse_file(str(DATA / "real-exp-patched.log"))
    assert r.outcome == "completed" and len(r.cases) == 12
    bad = [(c.name, c.status) for c in r.cases if c.status != "passed"]
    assert bad == [("so_reuseport_lb_cpu_test:untagged_share", "failed")]
    assert "got no connection" in [c for c in r.cases if c.status == "failed"][0].reason


# The mutant kernel's resize_rebuild failure (docs/results/
# commits-2-3-review.md): atf_tc_fail's message had newlines, so the rc saw
# only its last line as the result.
MULTI = """==RXL== BEGIN patched
==RXL== ATF BEGIN
==RXL== LIST /rxl/tests/p resize_rebuild
==RXL== LIST /rxl/tests/p other
p: WARNING: Running test cases outside of kyua(1) is unsupported
resize_window: 24 rounds of 40 joins
failed: a dealt map was not rebuilt within 5 s:
group port 36212 af inet members 9 gen 15 map 112 dirty 1 rebuilds 13 allocfail 0
member 7 tag 0 explicit slots 0
==RXL== CASE /rxl/tests/p resize_rebuild rc=1 t=6 cpu 6 offset 96 slots 16
failed: not a result of this case: the sentinel above ended it
==RXL== CASE /rxl/tests/p other rc=1 t=0 cpu 1 offset 16 slots 16
==RXL== ATF END
==RXL== END patched
"""


def test_a_multi_line_reason_is_put_back_together():
    r = parse_console(MULTI.splitlines())
    c = r.cases[0]
    assert (c.status, c.exit_code, c.seconds) == ("failed", 1, 6)
    assert c.reason == ("a dealt map was not rebuilt within 5 s: / group port 36212 af inet "
                        "members 9 gen 15 map 112 dirty 1 rebuilds 13 allocfail 0 / "
                        "member 7 tag 0 explicit slots 0 / cpu 6 offset 96 slots 16")
    # Only lines after the previous sentinel count: 'other' has its own
    # result-word line, so it is rebuilt from that, never from the first case's.
    assert r.cases[1].status == "failed"
    assert r.cases[1].reason.startswith("not a result of this case")
    assert r.outcome == "completed"


def test_a_result_without_any_result_word_stays_broken():
    lines = MULTI.replace("failed: a dealt", "oops: a dealt").splitlines()
    c = parse_console(lines).cases[0]
    assert c.status == "broken" and c.reason == "cpu 6 offset 96 slots 16"


def test_notes_about_the_log_name_their_line():
    lines = ["boot noise", "==RXL== BEGIN patched", "==RXL== TOPOLOGY BEGIN", "<groups>",
             "==RXL== TOPOLOGY END", "==RXL== CASE p c rc=x", "==RXL== WHAT is this",
             "==RXL== LIST only-two", "==RXL== NOTE no inet6 on lo0", "==RXL== ATF BEGIN"]
    r = parse_console(lines)
    notes = [n for n in r.notes if n.startswith("line ")]
    assert notes[0] == "line 6: malformed CASE line: ==RXL== CASE p c rc=x"
    assert notes[1] == "line 7: unknown sentinel: ==RXL== WHAT is this"
    assert notes[2] == "line 8: malformed LIST line: ==RXL== LIST only-two"
    assert notes[3].startswith("line 3: ")                   # the refused topology block
    assert notes[4] == "line 10: no end marker: log truncated (hang, crash or timeout)"
    assert "no inet6 on lo0" in r.notes                      # the guest's own words, as they are
    r = parse_console(["==RXL== BEGIN x", "==RXL== ATF BEGIN", "x", "==RXL== END x"])
    assert r.notes == ["line 2: ATF BEGIN without ATF END: the tests never finished"]
    r = parse_console(["a", "==RXL== END x"])
    assert r.notes == ["line 2: an end marker but no BEGIN: not a whole run"]
    assert parse_console([]).notes == ["an empty log: no ==RXL== BEGIN: not a console log"]


def test_control_characters_from_the_log_are_escaped_wherever_they_are_shown():
    """An OSC sequence (ESC ] ... BEL sets the terminal's title) in a panic
    message, a NOTE line or a CASE line reaches no output raw."""
    osc = "\x1b]0;pwned\x07"
    r = parse_console(["==RXL== BEGIN t", f"==RXL== NOTE {osc}hi", "==RXL== LIST /p a",
                       f"==RXL== CASE /p a rc=1 t=1 failed: {osc}", f"panic: {osc} boom"])
    shown = [*r.notes, *r.panic_lines, r.last_line, *(c.reason for c in r.cases)]
    assert r.outcome == "panic" and "panic: \\x1b]0;pwned\\x07 boom" in r.panic_lines
    assert "\\x1b]0;pwned\\x07hi" in r.notes
    assert all(t.isprintable() and t.isascii() for t in shown), shown
    from rxl.verify import report
    text = report.table({"t": r})
    assert "\x1b" not in text and "\x07" not in text
