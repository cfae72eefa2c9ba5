"""The rule that a run leaves the host's lbgroup sysctls as it found them (rxl.verify.hostsysctl).

The guest's rc runs under /bin/sh with a stand-in sysctl(8) that keeps each
sysctl in a file (``-N``, ``-NW`` and ``-n`` as FreeBSD's sysctl.c answers
them: ``-W`` lists writable names that are not statistics) and ATF programs
that are shell scripts; the rc's output is parsed as a console log.
"""

import json
import subprocess
import textwrap

import pytest

from rxl.guest.image import render_rc
from rxl.guest.protocol import host_sysctl_snapshot
from rxl.verify import hostsysctl, parse
from rxl.verify.ownguest import SerialGuest
from rxl.verify.pipeline import RunState

SYSCTL = textwrap.dedent("""\
    #!/bin/sh
    S=STATE
    case "$1" in
    -N) [ "$2" = net.inet.tcp ] && ls $S; exit 0;;
    -NW) [ "$2" = net.inet.tcp ] && ls $S | sed /groups/d; exit 0;;
    -n) [ -f "$S/$2" ] && exec cat "$S/$2";;
    esac
    echo "sysctl: unknown oid '$2'" >&2; exit 1
    """)

#: Cases: ``quiet`` changes nothing; ``leaky`` sets learn in the host, as the learn
#: cases once did; ``grows`` adds a name; ``groups`` changes the read-only view.
ATF = textwrap.dedent("""\
    #!/bin/sh
    S=STATE
    if [ "$1" = -l ]; then
        printf 'Content-Type: application/X-atf-tp; version="1"\\n\\n'
        for c in CASES; do printf 'ident: %s\\n\\n' $c; done; exit 0
    fi
    case "$3" in
    leaky) echo 1 > $S/net.inet.tcp.reuseport_lb.learn;;
    grows) echo 7 > $S/net.inet.tcp.reuseport_lb.new_knob;;
    groups) echo "group 1" > $S/net.inet.tcp.reuseport_lb.groups;;
    esac
    echo passed > "$2"
    """)


@pytest.fixture
def host(tmp_path):
    """(run, state): ``run(*cases)`` runs the rc over an ATF program with those
    cases and returns the parsed RunResult; ``state`` holds the sysctls."""
    state, bindir = tmp_path / "state", tmp_path / "bin"
    state.mkdir()
    bindir.mkdir()
    for name, value in [("net.inet.tcp.reuseport_lb.learn", "0"),
                        ("net.inet.tcp.reuseport_lb.window_ms", "10000"),
                        ("net.inet.tcp.reuseport_lb.groups", ""),
                        ("net.inet.tcp.reuseport_lbx", "3"),  # the prefix, not a node
                        ("net.inet.tcp.mssdflt", "536")]:    # not an lbgroup sysctl
        (state / name).write_text(value + "\n")
    (bindir / "sysctl").write_text(SYSCTL.replace("STATE", str(state)))
    (bindir / "sysctl").chmod(0o755)

    def run(*cases):
        prog = bindir / "lb_test"
        prog.write_text(ATF.replace("STATE", str(state)).replace("CASES", " ".join(cases)))
        prog.chmod(0o755)
        rc = render_rc("patched", [str(prog)], poweroff=False, setup_lo=False,
                       cwd=str(tmp_path), path=f"{bindir}:/usr/bin:/bin")
        out = subprocess.run(["/bin/sh", "-c", rc], capture_output=True, text=True,
                             timeout=60).stdout
        res = parse.parse_console(out.splitlines())
        assert res.outcome == "completed" and all(c.status == "passed" for c in res.cases)
        return res
    return run, state


def test_a_run_that_changes_nothing_passes_with_a_note(host):
    run, _ = host
    res = run("quiet")
    assert {k: v for k, v in res.sysctls.items() if "@" in k} == {
        f"net.inet.tcp.reuseport_lb{n}@{p}": v for p in ("before", "after")
        for n, v in [("*", "4"), (".groups", "(read-only)"), (".learn", "0"),
                     (".window_ms", "10000"), ("x", "3")]}
    assert hostsysctl.reasons({"patched": res}) == []
    assert res.notes[-1] == ("host sysctls net.inet.tcp.reuseport_lb*: 4 names (3 settings) "
                             "before the cases, 4 after: equal")


def test_a_case_that_sets_a_host_sysctl_fails_the_run_naming_it(host):
    run, _ = host
    res = run("quiet", "leaky", "grows", "groups")
    assert hostsysctl.reasons({"patched": res}) == [
        "patched: host sysctl net.inet.tcp.reuseport_lb.learn: 0 before the cases, 1 after",
        "patched: host sysctl net.inet.tcp.reuseport_lb.new_knob: appeared after the cases (7)"]


def test_a_name_that_vanishes_fails(host):
    run, state = host
    res = run("quiet")
    res.sysctls.pop("net.inet.tcp.reuseport_lb.window_ms@after")
    res.sysctls["net.inet.tcp.reuseport_lb*@after"] = "3"
    assert hostsysctl.reasons({"x": res}) == [
        "x: host sysctl net.inet.tcp.reuseport_lb.window_ms: vanished after the cases "
        "(was 10000)"]


def test_a_kernel_without_the_names_records_none_and_passes(host):
    run, state = host
    for p in state.glob("net.inet.tcp.reuseport_lb*"):
        p.unlink()
    res = run("quiet")
    assert res.sysctls["net.inet.tcp.reuseport_lb*@before"] == "0"
    assert hostsysctl.reasons({"pristine": res}) == []


@pytest.mark.parametrize("drop,why", [
    ("net.inet.tcp.reuseport_lb*@after", "no record after the cases"),
    ("net.inet.tcp.reuseport_lb*@before", "no record before the cases"),
    ("net.inet.tcp.reuseport_lb.learn@before", "the record before the cases lacks lines"),
])
def test_a_missing_or_cut_record_fails_closed(host, drop, why):
    run, _ = host
    res = run("quiet")
    del res.sysctls[drop]
    (reason,) = hostsysctl.reasons({"patched": res})
    assert reason.startswith("patched: host sysctls net.inet.tcp.reuseport_lb*: ") and \
        why in reason


def test_a_recorded_log_without_the_record_fails(tmp_path):
    """The logs recorded before the rule (tests/data/console/real-*.log) have no record."""
    from pathlib import Path
    log = Path(__file__).parents[2] / "data" / "console" / "real-c1-patched.log"
    res = parse.parse_file(str(log))
    assert hostsysctl.reasons({"patched": res}) == [
        "patched: host sysctls net.inet.tcp.reuseport_lb*: no record before or after the "
        "cases (the run stopped early, or its rc does not record them)"]


def test_the_report_stage_fails_the_verdict_and_says_why(host, tmp_path):
    from rxl.verify.request import RunRequest
    run, _ = host
    res = run("leaky")
    req = RunRequest(src=None, objdir=str(tmp_path / "o"), out=str(tmp_path / "out"),
                     guest_dir=str(tmp_path / "g"), kernel=None, pristine_kernel=None,
                     spread=False, case_timeout=30, new_programs=(), extra_tests=(),
                     memory_mib=1024, dry_run=False, rebuild_world=False,
                     auto_pristine=False)
    (tmp_path / "out").mkdir()
    st = RunState.start(req, echo=lambda s: None)
    st.runs = {"patched": res, "pristine": run("quiet")}
    SerialGuest().report(req, st)
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    assert doc["verdict"]["ok"] is False
    assert "patched: host sysctl net.inet.tcp.reuseport_lb.learn: 0 before the cases, 1 after" \
        in doc["verdict"]["reasons"]
    assert not any(r.startswith("pristine: host") for r in doc["verdict"]["reasons"])
    assert doc["runs"]["patched"]["sysctls"]["net.inet.tcp.reuseport_lb.learn@after"] == "1"
    assert "net.inet.tcp.reuseport_lb.learn: 0 before the cases, 1 after" in \
        (tmp_path / "out" / "report.txt").read_text()


def test_the_rc_records_before_the_first_case_and_after_the_last():
    text = render_rc("patched", ["/rxl/tests/t"])
    lines = text.splitlines()
    at = {k: lines.index(v) for k, v in [("before", host_sysctl_snapshot("before")),
                                         ("after", host_sysctl_snapshot("after")),
                                         ("atf", 'echo "$M ATF BEGIN"'),
                                         ("end", 'echo "$M ATF END"')]}
    assert at["before"] < at["atf"] < at["end"] < at["after"]
    # kyua runs the cases after run.sh: its caller records the after (rxl.verify.remote)
    assert host_sysctl_snapshot("after") not in render_rc("p", [], host_after=False)
    with pytest.raises(ValueError, match="phase 'during'"):
        host_sysctl_snapshot("during")


def test_serial_dry_run_prints_the_record_command(tmp_path):
    from rxl.verify.request import RunRequest
    req = RunRequest(src=None, objdir=str(tmp_path / "o"), out=str(tmp_path / "out"),
                     guest_dir=str(tmp_path / "g"), kernel=None, pristine_kernel=None,
                     spread=False, case_timeout=30, new_programs=(), extra_tests=(),
                     memory_mib=1024, dry_run=True, rebuild_world=False,
                     auto_pristine=False)
    st = RunState.start(req, echo=lambda s: None)
    st.roots = {"patched": str(tmp_path / "root")}
    rec = SerialGuest().run_cases(req, st)
    assert rec.commands[-1].endswith(host_sysctl_snapshot("before"))
