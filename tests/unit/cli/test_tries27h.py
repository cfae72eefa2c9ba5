"""Issue 27's eighth newcomer pass (docs/results/newcomer.md, "Eighth pass"):
faults 13-19 of /work/coord/nc8.md that are fix27a's, each refused or said
at its root."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from rxl.cli.main import main

DATA = Path(__file__).resolve().parents[2] / "data"
PASS = (DATA / "console" / "synthetic-pass.log").read_text()


def _run(args, **kw):
    return CliRunner().invoke(main, [str(a) for a in args], **kw)


@pytest.fixture(autouse=True)
def work(tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "w"))
    return tmp_path


def _parse(tmp_path, text, name="patched.log"):
    log = tmp_path / name
    log.write_text(text)
    return _run(["parse", log])


# ------------------------------------------------ 13: a verdict not PASS says so

def test_a_log_that_does_not_pass_is_one_error_line_after_the_table(work):
    """Fault 13: rxl parse of a failing log exited 1 with nothing on stderr; the
    README says an exit-1 failure, a verdict not PASS included, is one Error: line."""
    r = _parse(work, PASS.replace("basic_ipv6 rc=0 t=13 passed", "basic_ipv6 rc=1 t=13 failed: x"))
    assert r.exit_code == 1, r.output
    assert "Test cases" in r.stdout
    assert r.stderr.splitlines() == ["Error: 1 of 1 run did not pass: patched: failed 1 of "
                                     "2 cases"]
    r = _parse(work, PASS.replace("==RXL== END patched\n", ""))
    assert r.stderr.splitlines() == ["Error: 1 of 1 run did not pass: patched: crashed "
                                     "(see its notes)"]
    two = PASS + PASS.replace("patched", "pristine").replace(
        "basic_ipv4 rc=0 t=12 passed", "basic_ipv4 rc=1 t=12 broken: x")
    r = _parse(work, two)
    assert r.stderr.splitlines() == ["Error: 1 of 2 runs did not pass: pristine: broken 1 "
                                     "of 2 cases"]
    ok = _parse(work, PASS)
    assert (ok.exit_code, ok.stderr) == (0, "")


# ------------------------------------------------ 14: a CASE before any BEGIN

def test_a_case_line_before_any_begin_counts_in_no_run(work):
    """Fault 14: a CASE line as line 1, before the BEGIN, was counted into the run
    that followed (3 cases, x:y passed)."""
    from rxl.verify import parse
    r = parse.parse_console(("==RXL== CASE /rxl/tests/x y rc=0 t=1 passed\n" + PASS)
                            .splitlines())
    assert [c.name for c in r.cases] == ["so_reuseport_lb_test:basic_ipv4",
                                         "so_reuseport_lb_test:basic_ipv6"]
    assert r.outcome == "damaged"
    assert r.notes[0] == ("line 1: CASE before any BEGIN: a line outside every run, not "
                          "counted: ==RXL== CASE /rxl/tests/x y rc=0 t=1 passed")
    for line, word in (("==RXL== LIST /rxl/tests/x y", "LIST"),
                       ("dev.em.0.iflib.rxq0.cpu: 5", "rx queue row")):
        r = parse.parse_console((line + "\n" + PASS).splitlines())
        assert r.outcome == "damaged" and r.notes[0].startswith(f"line 1: {word} before any "
                                                                "BEGIN"), r.notes
        assert r.rxq.get("dev.em.0.iflib.rxq0.cpu") == 0 and len(r.cases) == 2


def test_the_harness_s_host_record_without_a_begin_is_still_read():
    """The record after kyua (rxl.verify.remote, its own lines, no BEGIN) is read."""
    from rxl.verify import parse
    r = parse.parse_console(["==RXL== SYSCTL net.inet.tcp.reuseport_lb.learn@after: 1",
                             "==RXL== SYSCTL net.inet.tcp.reuseport_lb*@after: 1"])
    assert r.sysctls == {"net.inet.tcp.reuseport_lb.learn@after": "1",
                         "net.inet.tcp.reuseport_lb*@after": "1"}


# ------------------------------------------------ 15: an unreadable topology block

def test_a_topology_block_that_cannot_be_read_damages_the_run(work):
    """Fault 15: <cpu count="9"> listing 8 CPUs left the run "completed", exit 0,
    with a note; the queue placement cannot be judged without it."""
    text = PASS.replace('<cpu count="8" mask="ff,0,0,0">', '<cpu count="9" mask="ff,0,0,0">', 1)
    assert text != PASS
    r = _parse(work, text)
    assert r.exit_code == 1
    assert "patched  damaged" in r.stdout
    assert "line 8: console topology block: line 3: <cpu count=\"9\"> lists 8 CPUs" in r.stdout
    assert r.stderr.splitlines() == ["Error: 1 of 1 run did not pass: patched: damaged "
                                     "(see its notes)"]


# ------------------------------------------------ 16, 17: topology dumps

TOPO = ('<groups>\n <group level="1" cache-level="{cl}">\n  <cpu count="2" mask="3,0,0,0">'
        '{cpus}</cpu>\n </group>\n</groups>\n')


@pytest.mark.parametrize("cmd", [["deal", "--members", "0"],
                                 ["outcomes", "--workers", "0", "--rx-cpus", "0"]])
def test_binary_stdin_as_a_topology_is_not_utf_8_as_a_file_is(work, cmd):
    """Fault 16: bytes that are not UTF-8 on `--topology -` were decoded with
    replacement and called a dump with no <groups>; as a file, not UTF-8."""
    data = b"\x89PNG\r\n\x1a\n\xff\xfe<groups>\x00"
    (work / "bin").write_bytes(data)
    r = _run([*cmd, "--topology", "-"], input=data)
    assert (r.exit_code, r.stdout) == (2, "")
    assert r.stderr.splitlines() == ["Error: Invalid value for '--topology': <stdin>: not "
                                     "text (not UTF-8)"]
    f = _run([*cmd, "--topology", work / "bin"])
    assert f.stderr.splitlines() == [f"Error: Invalid value for '--topology': {work / 'bin'}: "
                                     "not a text file (not UTF-8)"]
    ok = _run([*cmd, "--topology", "-"], input=TOPO.format(cl=0, cpus="0, 1").encode())
    assert ok.exit_code == 0, ok.output


@pytest.mark.parametrize("cl,cpus,says", [
    ("-1", "0, 1", "line 2: cache-level '-1' is not one of 0-3 (CG_SHARE_NONE to "
                   "CG_SHARE_L3)"),
    ("0", "0, -1", "line 3: CPU '-1' is no CPU id (0 to 1023)"),
    ("0", "0, x", "line 3: CPU 'x' is not a number"),
])
def test_a_negative_number_in_a_dump_is_said_as_out_of_range(work, cl, cpus, says):
    """Fault 17: cache-level="-1" and a CPU -1 were "not a number"."""
    r = _run(["deal", "--members", "0", "--topology", "-"],
             input=TOPO.format(cl=cl, cpus=cpus).encode())
    assert r.exit_code == 2
    assert r.stderr.splitlines() == [f"Error: Invalid value for '--topology': <stdin>: {says}"]


# ------------------------------------------------ 18: one escaping, never two

def test_show_and_the_error_line_escape_once():
    from rxl.cli.surface import error_line
    from rxl.errors import message, show
    import click
    assert show("A\nB") == "A\\nB" and show("a\\b") == "a\\b" and show("a\\nb") == "a\\\\nb"
    assert show(b"\xff\xfe") == "\\xff\\xfe"           # a byte that is not UTF-8: \xNN
    assert show("caf\udce9.log") == "caf\\xe9.log"      # a file name's (surrogateescape)
    assert message(f"x {show('A' + chr(10) + 'B')} y", 100) == "x A\\nB y"
    assert message("raw\x1b", 100) == "raw\\x1b"        # unescaped, still escaped once
    assert error_line(click.ClickException(f"'{show('caf' + chr(0xdce9))}'")) == \
        "Error: 'caf\\xe9'"


def test_an_author_with_a_line_break_is_shown_with_one_backslash(work):
    """Fault 18: --author $'A\\nB <a@b.c>' said 'A\\\\nB <a@b.c>' (show() on the
    message after repr() of the value)."""
    (work / "src").mkdir()
    r = _run(["series", "export", "--src", work / "src", "--author", "A\nB <a@b.c>"])
    assert r.exit_code == 2
    (line,) = r.stderr.splitlines()
    assert "'A\\nB <a@b.c>' is not an author" in line, line
    assert "\\\\" not in line


@pytest.mark.parametrize("cmd,there", [(["parse"], False), (["kcount", "analyze"], True),
                                       (["deal", "--members", "0", "--topology"], True)])
def test_a_file_name_that_is_not_utf_8_is_shown_once(work, cmd, there):
    """Fault 18: caf\\xe9.log showed as caf\\\\udce9.log (parse, a missing file;
    kcount analyze, a file that is no trace), caf\\udce9.log in deal."""
    import os
    name = os.fsdecode(os.path.join(os.fsencode(str(work)), b"caf\xe9.log"))
    if there:
        Path(name).write_text("x\n")
    r = _run([*cmd, name])
    assert r.exit_code == 2
    (line,) = r.stderr.splitlines()
    assert f"{work}/caf\\xe9.log" in line, line
    assert "\\\\" not in line and "udce9" not in line
