"""rxl.verify.kyua: the Kyuafile, the kyua commands, kyua's JUnit -> cases."""

import pytest

from rxl.verify import kyua as K


def test_kyuafile():
    text = K.kyuafile(["b_test", "a_test"])
    assert text.splitlines() == [
        "syntax(2)", "", 'test_suite("rxl")', "",
        'atf_test_program{name="a_test", is_exclusive=true, required_user="root"}',
        'atf_test_program{name="b_test", is_exclusive=true, required_user="root"}']
    assert K.kyuafile(["a_test"], timeout=400).splitlines()[-1] == \
        'atf_test_program{name="a_test", is_exclusive=true, required_user="root", timeout=400}'
    with pytest.raises(ValueError):
        K.kyuafile(["../x"])
    with pytest.raises(ValueError, match="at least 1 s"):
        K.kyuafile(["a_test"], timeout=0)


def test_kyua_runs_one_case_at_a_time_and_logs_in_the_work_directory():
    test, junit = K.kyua_commands("/var/tmp/rxl")
    assert test == ("cd /var/tmp/rxl/tests && rm -f /var/tmp/rxl/kyua.db && "
                    "kyua --logfile=/var/tmp/rxl/kyua-test.log --variable=parallelism=1 test "
                    "--kyuafile=/var/tmp/rxl/tests/Kyuafile "
                    "--results-file=/var/tmp/rxl/kyua.db")
    assert junit == ("kyua --logfile=/var/tmp/rxl/kyua-report.log report-junit "
                     "--results-file=/var/tmp/rxl/kyua.db "
                     "--output=/var/tmp/rxl/kyua-junit.xml")



def test_atf_vars_reach_kyua_as_the_suites_variables():
    """--atf-var on the kyua path: kyua hands a test suite's
    variables to every ATF case as -v NAME=VALUE; the suite is the Kyuafile's."""
    test, _ = K.kyua_commands("/w", (("churn_seconds", "5"), ("x", "a b")))
    assert " --variable=test_suites.rxl.churn_seconds=5 '--variable=test_suites.rxl.x=a b' " \
        "test --kyuafile=/w/tests/Kyuafile" in test
    assert 'test_suite("rxl")' in K.kyuafile(["a_test"])


def test_kyua_junit_to_cases():
    xml = """<?xml version="1.0" encoding="iso-8859-1"?>
<testsuite>
<testcase classname="so_reuseport_lb_test" name="basic_ipv4" time="68.2"/>
<testcase classname="so_reuseport_lb_cpu_test" name="option" time="0.1">
<failure message="setsockopt: Protocol not available"/></testcase>
<testcase classname="so_reuseport_lb_learn_test" name="capture" time="1">
<error message="Test case body returned a non-ok exit code"/></testcase>
<testcase classname="sub.x_test" name="s" time="0"><skipped/></testcase>
</testsuite>"""
    cases = K.cases_from_kyua_junit(xml, "/var/tmp/rxl/tests")
    got = [(c.name, c.status, c.seconds) for c in cases]
    assert got == [("so_reuseport_lb_test:basic_ipv4", "passed", 68),
                   ("so_reuseport_lb_cpu_test:option", "failed", 0),
                   ("so_reuseport_lb_learn_test:capture", "broken", 1),
                   ("x_test:s", "skipped", 0)]
    assert cases[1].reason == "setsockopt: Protocol not available"
    assert cases[3].prog == "/var/tmp/rxl/tests/sub/x_test"
    with pytest.raises(K.KyuaJUnitError, match="does not parse"):
        K.cases_from_kyua_junit("<testsuite>", "/t")


def test_a_skipped_case_keeps_its_reason():
    """kyua 0.13's JUnit for a skipped case (the own guest, 2026-12-01): no message
    attribute, the reason only in system-err."""
    xml = """<testsuite>
<testcase classname="so_reuseport_lb_cpu_test" name="close_tagged" time="0.194">
<skipped />
<system-err>Skipped result details
----------------------

none of 64 handshakes ran on a tagged CPU: nothing was checked

Test case metadata
------------------

is_exclusive = false
</system-err>
</testcase>
<testcase classname="x_test" name="bare" time="1"><skipped /></testcase>
</testsuite>"""
    a, b = K.cases_from_kyua_junit(xml, "/t")
    assert (a.status, a.reason) == ("skipped",
                                    "none of 64 handshakes ran on a tagged CPU: nothing was checked")
    assert (b.status, b.reason) == ("skipped", "")


def test_a_program_kyua_cannot_list_is_named_with_the_way_out():
    """kyua 0.13 on the own guest (2026-12-01): both series programs set the ATF head
    variable is.exclusive, which it does not know; their JUnit is one broken case."""
    xml = """<testsuite>
<testcase classname="so_reuseport_lb_cpu_test" name="__test_cases_list__" time="0.0">
<error message="Unknown test case metadata property &apos;is.exclusive&apos;"/></testcase>
<testcase classname="x_test" name="__test_cases_list__" time="0.0">
<error message="Permission denied"/></testcase>
<testcase classname="so_reuseport_lb_test" name="basic_ipv4" time="32.1"/>
</testsuite>"""
    notes = K.listing_notes(K.cases_from_kyua_junit(xml, "/var/tmp/rxl/tests"))
    assert notes == [
        "kyua could not list so_reuseport_lb_cpu_test: Unknown test case metadata property "
        "'is.exclusive'; this kyua does not know the ATF head variable is.exclusive: drop it "
        "from the test's head (the Kyuafile sets is_exclusive), or --no-kyua",
        "kyua could not list x_test: Permission denied"]
    cases = K.cases_from_kyua_junit(xml, "/var/tmp/rxl/tests")
    assert K.unlisted_programs(cases) == ["so_reuseport_lb_cpu_test", "x_test"]
    assert K.listing_notes(cases, fallback=True)[0].endswith(
        "(the Kyuafile sets is_exclusive); its cases ran directly (run.sh's loop, "
        "console-*-direct.log)")
