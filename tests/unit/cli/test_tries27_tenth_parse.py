"""Issue 27's tenth pass (/tmp/nc10/newcomer-tenth.md), faults 1-6: the console
parser and the learn log reader. A second TOPOLOGY block or a SYSCTL repeated
with another value, and LIST or CASE lines outside ATF BEGIN..END, damage the
run and name their line (rxl.verify.parse); one top-level group is counted
singular; a case name that is not UTF-8 is shown as ``\\xNN`` whatever
stdout's encoding; ``learn --log`` says it cannot read a log that gives EIO,
and a CPU outside the log's own topology (or no CPU id at all) is exit 2."""

import subprocess
import sys
from pathlib import Path

import pytest

from clierror import error_line as _error, run as _run, work  # noqa: F401 (work: fixture)
from rxl.verify import parse

DATA = Path(__file__).resolve().parents[2] / "data"
PASS = (DATA / "console" / "synthetic-pass.log").read_text().splitlines()
LEARN = (DATA / "learn" / "synthetic-patched.log").read_text().splitlines()
FLAT = ["==RXL== TOPOLOGY BEGIN", "<groups>", ' <group level="1" cache-level="0">',
        '  <cpu count="8" mask="ff,0,0,0">0, 1, 2, 3, 4, 5, 6, 7</cpu>', " </group>",
        "</groups>", "==RXL== TOPOLOGY END"]


def _log(tmp_path, lines, name="edited.log"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def _edit(lines, at, new=(), drop=0):
    """``lines`` with ``drop`` lines at 0-based ``at`` replaced by ``new``."""
    return lines[:at] + list(new) + lines[at + drop:]


def test_the_log_is_what_the_edits_assume():
    assert PASS[7] == "==RXL== TOPOLOGY BEGIN" and PASS[43] == "==RXL== TOPOLOGY END"
    assert PASS[45] == "==RXL== SYSCTL net.isr.dispatch: direct"
    assert PASS[48] == "==RXL== ATF BEGIN" and PASS[53] == "==RXL== ATF END"
    assert parse.parse_console(PASS).outcome == "completed"


# ------------------------------------------------ 1: a second TOPOLOGY, a SYSCTL twice

def test_a_second_topology_block_damages_the_run_and_the_first_is_kept():
    """1: topo_second_flat.log: the flat block replaced the two-node one, exit 0."""
    r = parse.parse_console(_edit(PASS, 44, FLAT))
    assert r.outcome == "damaged"
    assert "line 45: a second TOPOLOGY BEGIN (the first at line 8): not counted" in r.notes
    assert r.sockets == [(0, 1, 2, 3), (4, 5, 6, 7)]      # the first block's two nodes


def test_a_sysctl_repeated_with_another_value_damages_the_run():
    """1: sysctl_dispatch_twice.log: 'deferred' replaced 'direct', exit 0."""
    r = parse.parse_console(_edit(PASS, 46, ["==RXL== SYSCTL net.isr.dispatch: deferred"]))
    assert r.outcome == "damaged" and r.sysctls["net.isr.dispatch"] == "direct"
    assert ("line 47: SYSCTL net.isr.dispatch is 'deferred' here, 'direct' at line 46: "
            "not counted") in r.notes


def test_parse_exits_1_naming_the_second_block(tmp_path):
    r = _run(["parse", _log(tmp_path, _edit(PASS, 44, FLAT))])
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert "line 45: a second TOPOLOGY BEGIN" in r.stdout
    assert r.stderr.splitlines()[-1].startswith("Error: 1 of 1 run did not pass: patched")


# ------------------------------------------------ 2: LIST and CASE outside the ATF block

def test_cases_without_atf_begin_are_not_counted():
    """2: atf_end_only.log (ATF BEGIN removed) counted both cases passed, exit 0."""
    r = parse.parse_console(_edit(PASS, 48, drop=1))
    assert r.outcome == "damaged" and r.cases == []
    assert [n.split(",")[0] for n in r.notes if n.startswith("line ")] == [
        "line 49: a LIST line before ATF BEGIN", "line 50: a LIST line before ATF BEGIN",
        "line 51: a CASE line before ATF BEGIN", "line 52: a CASE line before ATF BEGIN",
        "line 53: an ATF END without its ATF BEGIN"]


def test_cases_with_neither_atf_line_are_not_counted():
    """2: atf_none.log."""
    r = parse.parse_console(_edit(_edit(PASS, 53, drop=1), 48, drop=1))
    assert r.outcome == "damaged" and r.cases == []
    assert "line 49: a LIST line before ATF BEGIN, outside the tests: not counted: ==RXL== " \
           "LIST /rxl/tests/so_reuseport_lb_test basic_ipv4" in r.notes


def test_a_case_before_atf_begin_is_not_counted():
    """2: case_before_atfbegin.log: 'early' counted as passed."""
    early = ["==RXL== LIST /rxl/tests/so_reuseport_lb_test early",
             "==RXL== CASE /rxl/tests/so_reuseport_lb_test early rc=0 t=1 passed"]
    r = parse.parse_console(_edit(PASS, 48, early))
    assert r.outcome == "damaged"
    assert [c.case for c in r.cases] == ["basic_ipv4", "basic_ipv6"]
    assert any(n.startswith("line 49: a LIST line before ATF BEGIN") for n in r.notes)
    assert any(n.startswith("line 50: a CASE line before ATF BEGIN") for n in r.notes)


def test_a_case_after_atf_end_names_the_end():
    r = parse.parse_console(_edit(PASS, 54, [
        "==RXL== CASE /rxl/tests/so_reuseport_lb_test late rc=0 t=1 passed"]))
    assert r.outcome == "damaged" and len(r.cases) == 2
    assert any(n.startswith("line 55: a CASE line after ATF END (line 54)") for n in r.notes)


# ------------------------------------------------ 3: one top-level group

def test_one_top_level_group_is_singular(tmp_path):
    """3: "1 top-level groups" (verify/report.py)."""
    flat = _edit(PASS, 8, FLAT[1:-1], drop=35)
    r = _run(["parse", _log(tmp_path, flat)])
    assert "Guest topology (patched): 1 top-level group 0,1,2,3,4,5,6,7" in r.stdout, r.stdout
    assert "top-level groups" not in r.stdout
    assert "Guest topology (patched): 2 top-level groups" in \
        _run(["parse", _log(tmp_path, PASS, "pass.log")]).stdout


# ------------------------------------------------ 4: a case name that is not UTF-8

def _nonutf8(tmp_path):
    data = "\n".join(PASS).encode().replace(b"basic_ipv4", b"basic_\xff\xfe") + b"\n"
    path = tmp_path / "prog_nonutf8.log"
    path.write_bytes(data)
    return path


def test_a_case_name_that_is_not_utf8_is_escaped(tmp_path):
    """4: the table showed U+FFFD for the bytes (and its CASE line was taken
    for one no LIST line announced, the LIST line's name unescaped)."""
    r = _run(["parse", _nonutf8(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "so_reuseport_lb_test:basic_\\xff\\xfe  passed" in r.stdout
    assert "\ufffd" not in r.stdout and r.stdout.isascii()
    assert parse.parse_file(str(_nonutf8(tmp_path))).cases[0].case == "basic_\\xff\\xfe"


@pytest.mark.parametrize("encoding", ["latin-1", "ascii", "utf-8"])
def test_no_traceback_whatever_stdouts_encoding(tmp_path, encoding):
    """4: LC_ALL=C.UTF-8 PYTHONIOENCODING=latin-1 rxl parse: UnicodeEncodeError."""
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "PYTHONIOENCODING": encoding,
           "PYTHONPATH": str(Path(parse.__file__).resolve().parents[2]),
           "RXL_WORK": str(tmp_path / "w")}
    out = subprocess.run([sys.executable, "-m", "rxl", "parse", str(_nonutf8(tmp_path))],
                         capture_output=True, env=env, timeout=120)
    assert out.returncode == 0 and out.stderr == b"", out.stderr[-400:]
    assert b"basic_\\xff\\xfe  passed" in out.stdout


# ------------------------------------------------ 5: a --log that cannot be read

def test_a_log_that_cannot_be_read_is_named(monkeypatch, tmp_path):
    """5: learn --log /proc/self/mem: "cannot write the output: Input/output error", exit 1."""
    import errno

    from rxl.cli import options

    def eio(path, what, limit=options.INPUT_MAX, **kw):
        raise OSError(errno.EIO, "Input/output error")
    monkeypatch.setattr(options, "read_limited", eio)
    log = _log(tmp_path, LEARN)
    for extra in ([], ["--json"]):
        assert _error(["learn", "--log", log, *extra]) == \
            f"Error: Invalid value for '--log': {log}: Input/output error"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["edited.log"]


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="no /proc/self/mem")
def test_proc_self_mem_itself(tmp_path):
    assert _error(["learn", "--log", "/proc/self/mem"]) == \
        "Error: Invalid value for '--log': /proc/self/mem: Input/output error"


# ------------------------------------------------ 6: a CPU outside the log's topology

def test_the_learn_log_is_what_the_edits_assume():
    assert LEARN[52] == "==RXL== LEARN C learn-off.rxq phase=m worker=0 wcpu=0 hcpu=0 q=0 n=128"


def test_a_cpu_the_logs_own_topology_lacks_is_exit_2(tmp_path):
    """6: hcpu_40.log was exit 1, the same mismatch under --topology exit 2."""
    log = _log(tmp_path, _edit(LEARN, 52, [LEARN[52].replace("hcpu=0", "hcpu=40")], 1))
    assert _error(["learn", "--log", log]) == (
        f"Error: {log}: the topology guest (edited.log) has no CPU 40 (run learn-off.rxq has "
        "a handshake there): give the guest's with --topology")
    assert _error(["learn", "--log", log, "--topology", "2x4x1"]).startswith(
        "Error: Invalid value for '--topology': 2x4x1 has no CPU 40")


@pytest.mark.parametrize("value", ["1024", "4096", "99999999"])
@pytest.mark.parametrize("topology", [[], ["--topology", "64x16x1"]], ids=["own", "given"])
def test_a_cpu_past_cpu_maxsize_names_its_line(tmp_path, value, topology):
    """6: hcpu_1024.log advised --topology, which no topology can satisfy."""
    line = LEARN[52].replace("hcpu=0", f"hcpu={value}")
    log = _log(tmp_path, _edit(LEARN, 52, [line], 1))
    assert _error(["learn", "--log", log, *topology]) == (
        f"Error: {log} line 53: hcpu={value} is no CPU id (0 to 1023): {line}")
