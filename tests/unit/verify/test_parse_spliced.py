"""A sentinel cut in two by a kernel message (rxl.verify.parse._spliced).

The cold 15 run of 2026-12-07 (docs/results/base15.md) failed its module boot
on this console, byte for byte: the rc wrote ``==RXL== CASE mod``, the kernel
printed igb0's link change and a newline, and the rc went on with ``ules
kldload rc=0 t=0 passed``; the parser then counted modules:kldload crashed.
"""

from rxl.verify.parse import parse_console

MSG = "igb0: link state changed to DOWN"


def _log(*body):
    return ["==RXL== BEGIN modules", "==RXL== ATF BEGIN",
            "==RXL== LIST modules kldload", "==RXL== LIST modules nic",
            *body, "==RXL== ATF END", "==RXL== END modules"]


def _status(r):
    return {(c.prog, c.case): c.status for c in r.cases}


def test_the_cold_runs_console_is_rejoined_and_noted():
    r = parse_console(_log("==RXL== CASE mod" + MSG, "ules kldload rc=0 t=0 passed",
                           "==RXL== CASE modules nic rc=0 t=0 passed"))
    assert r.outcome == "completed"
    assert _status(r) == {("modules", "kldload"): "passed", ("modules", "nic"): "passed"}
    assert f"line 5: a kernel message cut this sentinel in two ({MSG}); read with line 6 " \
        "as ==RXL== CASE modules kldload rc=0 t=0 passed" in r.notes
    assert not any("malformed" in n for n in r.notes)


def test_line_numbers_after_the_mend_are_the_logs():
    r = parse_console(_log("==RXL== CASE mod" + MSG, "ules kldload rc=0 t=0 passed",
                           "==RXL== CASE modules nic rc=0 t=zz passed"))
    assert "line 7: malformed CASE line: ==RXL== CASE modules nic rc=0 t=zz passed" in r.notes


def test_a_failed_result_stays_failed():
    r = parse_console(_log("==RXL== CASE modules kld" + MSG,
                           "load rc=1 t=0 failed: kldload: can't load if_em",
                           "==RXL== CASE modules nic rc=0 t=0 passed"))
    assert _status(r)[("modules", "kldload")] == "failed"


def test_no_listed_case_no_mend():
    # the rejoined line would name a case no LIST line announced
    r = parse_console(_log("==RXL== CASE mod" + MSG, "ules other rc=0 t=0 passed",
                           "==RXL== CASE modules nic rc=0 t=0 passed"))
    assert _status(r)[("modules", "kldload")] == "crashed"
    assert any(n.startswith("line 5: malformed CASE line") for n in r.notes)


def test_a_case_already_reported_is_not_mended_again():
    r = parse_console(_log("==RXL== CASE modules kldload rc=1 t=0 failed: x",
                           "==RXL== CASE mod" + MSG, "ules kldload rc=0 t=0 passed",
                           "==RXL== CASE modules nic rc=0 t=0 passed"))
    assert _status(r)[("modules", "kldload")] == "failed"
    assert any(n.startswith("line 6: malformed CASE line") for n in r.notes)


def test_next_line_a_sentinel_or_blank_no_mend():
    for nxt in ("==RXL== CASE modules nic rc=0 t=0 passed", ""):
        r = parse_console(_log("==RXL== CASE mod" + MSG, nxt,
                               "==RXL== CASE modules nic rc=0 t=0 passed"))
        assert _status(r)[("modules", "kldload")] == "crashed"


def test_no_device_message_no_mend():
    # what was cut out is no "name: text" kernel line
    r = parse_console(_log("==RXL== CASE mod  link state changed", "ules kldload rc=0 t=0 passed",
                           "==RXL== CASE modules nic rc=0 t=0 passed"))
    assert _status(r)[("modules", "kldload")] == "crashed"


def test_a_panic_that_cuts_a_sentinel_is_still_a_panic():
    r = parse_console(_log("==RXL== CASE mod" + "panic: page fault while in kernel mode",
                           "ules kldload rc=0 t=0 passed",
                           "==RXL== CASE modules nic rc=0 t=0 passed"))
    assert r.outcome == "panic"
    assert r.panic_lines


def test_a_cut_end_marker_closes_the_run():
    lines = _log("==RXL== CASE modules kldload rc=0 t=0 passed",
                 "==RXL== CASE modules nic rc=0 t=0 passed")
    lines[-1:] = ["==RXL== END mod" + MSG, "ules"]
    r = parse_console(lines)
    assert r.outcome == "completed"
    assert any("read with line 9 as ==RXL== END modules" in n for n in r.notes)
