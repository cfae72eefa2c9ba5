"""rxl.verify.remote: the pure parts of a run on an SSH target."""

import hashlib

import pytest

from rxl.verify import remote as R

PROBE_OUT = """os=FreeBSD
release=14.0-STABLE
arch=amd64
bootfile=/boot/kernel/kernel
version=FreeBSD 14.0-STABLE #0 main-n24-2f2a4162b: Mon Nov 30 05:01:02 UTC 2026
series=absent
kyua=/usr/bin/kyua
user=root
"""

#: Bytes shaped like a kernel's data section: version[] between other strings.
KERNEL = (b"\x7fELF\x00junk\x00@(#)FreeBSD 14.0-STABLE #0 rxl-n27-6e3263468: "
          b"Mon Nov 30 06:40:00 UTC 2026\n    root@h:/work/obj/sys/RXL\n\x00more")


def test_probe_pristine_kernel_refused():
    info = R.parse_probe(PROBE_OUT)
    assert info.os == "FreeBSD" and info.kyua == "/usr/bin/kyua" and not info.series
    with pytest.raises(R.RemoteError) as ei:
        R.check_target(info)
    msg = str(ei.value)
    assert "lacks the series" in msg and R.SERIES_SYSCTL in msg and "--install-kernel" in msg
    R.check_target(info, need_series=False)  # fine for collecting only


def test_probe_series_kernel_accepted():
    info = R.parse_probe(PROBE_OUT.replace("series=absent", f"series={R.SERIES_SYSCTL}")
                         .replace("kyua=/usr/bin/kyua", "kyua=absent"))
    assert info.series and info.kyua == ""
    R.check_target(info)


@pytest.mark.parametrize("edit,msg", [
    (("os=FreeBSD", "os=Linux"), "runs Linux, not FreeBSD"),
    (("release=14.0-STABLE", "release=13.2-RELEASE"), "FreeBSD 13.2-RELEASE"),
    (("arch=amd64", "arch=arm64"), "arm64"),
])
def test_probe_wrong_machine(edit, msg):
    with pytest.raises(R.RemoteError, match=msg):
        R.check_target(R.parse_probe(PROBE_OUT.replace(*edit)), need_series=False)


def test_probe_missing_line():
    with pytest.raises(R.RemoteError, match="lacks kyua, user"):
        R.parse_probe("\n".join(PROBE_OUT.splitlines()[:6]))


def test_probe_command_prints_every_key():
    for key in ("os", "release", "arch", "bootfile", "version", "series", "kyua", "user"):
        assert f'echo "{key}=' in R.PROBE_COMMAND


def test_kernel_version_and_plan():
    assert R.kernel_version(KERNEL) == \
        "FreeBSD 14.0-STABLE #0 rxl-n27-6e3263468: Mon Nov 30 06:40:00 UTC 2026"
    plan = R.install_plan(KERNEL)
    kid = hashlib.sha256(KERNEL).hexdigest()[:12]
    assert plan.kernel_dir == f"/boot/kernel.rxl-{kid}"
    assert plan.bootfile == f"/boot/kernel.rxl-{kid}/kernel"
    assert plan.commands[-1] == f"nextboot -k kernel.rxl-{kid}"
    assert plan.sha256 == hashlib.sha256(KERNEL).hexdigest()
    with pytest.raises(R.RemoteError, match="no 'FreeBSD"):
        R.kernel_version(b"\x7fELF not a kernel")


def test_kyuafile():
    text = R.kyuafile(["b_test", "a_test"])
    assert text.splitlines() == [
        "syntax(2)", "", 'test_suite("rxl")', "",
        'atf_test_program{name="a_test", is_exclusive=true, required_user="root"}',
        'atf_test_program{name="b_test", is_exclusive=true, required_user="root"}']
    assert R.kyuafile(["a_test"], timeout=400).splitlines()[-1] == \
        'atf_test_program{name="a_test", is_exclusive=true, required_user="root", timeout=400}'
    with pytest.raises(ValueError):
        R.kyuafile(["../x"])
    with pytest.raises(ValueError, match="at least 1 s"):
        R.kyuafile(["a_test"], timeout=0)


def test_kyua_runs_one_case_at_a_time_and_logs_in_the_work_directory():
    test, junit = R.kyua_commands("/var/tmp/rxl")
    assert test == ("cd /var/tmp/rxl/tests && rm -f /var/tmp/rxl/kyua.db && "
                    "kyua --logfile=/var/tmp/rxl/kyua-test.log --variable=parallelism=1 test "
                    "--kyuafile=/var/tmp/rxl/tests/Kyuafile "
                    "--results-file=/var/tmp/rxl/kyua.db")
    assert junit == ("kyua --logfile=/var/tmp/rxl/kyua-report.log report-junit "
                     "--results-file=/var/tmp/rxl/kyua.db "
                     "--output=/var/tmp/rxl/kyua-junit.xml")



def test_atf_vars_reach_kyua_as_the_suites_variables():
    """--atf-var on the kyua path (fresh6 F29): kyua hands a test suite's
    variables to every ATF case as -v NAME=VALUE; the suite is the Kyuafile's."""
    test, _ = R.kyua_commands("/w", (("churn_seconds", "5"), ("x", "a b")))
    assert " --variable=test_suites.rxl.churn_seconds=5 '--variable=test_suites.rxl.x=a b' " \
        "test --kyuafile=/w/tests/Kyuafile" in test
    assert 'test_suite("rxl")' in R.kyuafile(["a_test"])


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
    cases = R.cases_from_kyua_junit(xml, "/var/tmp/rxl/tests")
    got = [(c.name, c.status, c.seconds) for c in cases]
    assert got == [("so_reuseport_lb_test:basic_ipv4", "passed", 68),
                   ("so_reuseport_lb_cpu_test:option", "failed", 0),
                   ("so_reuseport_lb_learn_test:capture", "broken", 1),
                   ("x_test:s", "skipped", 0)]
    assert cases[1].reason == "setsockopt: Protocol not available"
    assert cases[3].prog == "/var/tmp/rxl/tests/sub/x_test"
    with pytest.raises(R.RemoteError, match="does not parse"):
        R.cases_from_kyua_junit("<testsuite>", "/t")


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
    a, b = R.cases_from_kyua_junit(xml, "/t")
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
    notes = R.listing_notes(R.cases_from_kyua_junit(xml, "/var/tmp/rxl/tests"))
    assert notes == [
        "kyua could not list so_reuseport_lb_cpu_test: Unknown test case metadata property "
        "'is.exclusive'; this kyua does not know the ATF head variable is.exclusive: drop it "
        "from the test's head (the Kyuafile sets is_exclusive), or --no-kyua",
        "kyua could not list x_test: Permission denied"]
    cases = R.cases_from_kyua_junit(xml, "/var/tmp/rxl/tests")
    assert R.unlisted_programs(cases) == ["so_reuseport_lb_cpu_test", "x_test"]
    assert R.listing_notes(cases, fallback=True)[0].endswith(
        "(the Kyuafile sets is_exclusive); its cases ran directly (run.sh's loop, "
        "console-*-direct.log)")


def test_touched_names_undo():
    plan = R.install_plan(KERNEL)
    lines = R.touched("/var/tmp/rxl", plan)
    assert "rm -rf /var/tmp/rxl" in lines[0]
    assert f"rm -rf {plan.kernel_dir}" in lines[1]
    assert "nextboot -D" in lines[2]
    assert len(R.touched("/var/tmp/rxl")) == 1
