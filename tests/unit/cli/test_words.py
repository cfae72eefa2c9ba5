"""The words a newcomer reads say what happens: help that names the accepted
form, messages in the tool's own terms, a warning that is a warning, an
error for a log that holds nothing to analyse."""

import json
from pathlib import Path

from click.testing import CliRunner

from rxl.cli.main import main

DATA = Path(__file__).resolve().parents[2] / "data"


def _run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    return r


def test_deal_members_help_and_error_show_the_form_accepted():
    r = _run("deal", "--help")
    assert "CPU+L" not in r.stdout and "5L" in r.stdout
    r = _run("deal", "--topology", "2x4x2", "--members", "0,5+L")
    assert r.exit_code == 2 and "5L" in r.stderr and "CPU+" not in r.stderr
    assert _run("deal", "--topology", "2x4x2", "--members", "0,5L").exit_code == 0


def test_learn_log_without_learn_runs_is_one_error(tmp_path):
    log = tmp_path / "boot.log"
    log.write_text("login: root\nFreeBSD 15.0\n")
    r = _run("learn", "--log", log)
    assert r.exit_code == 2 and r.stdout == ""
    (line,) = r.stderr.splitlines()
    assert line.startswith("Error: ") and "not a console log of rxl learn" in line


def test_learn_log_warnings_are_warnings(tmp_path):
    """A log without topology is analysed on qemu-2s: said as a warning, never
    as an error line."""
    logs = sorted((DATA / "learn").glob("synthetic-patched.log"))
    assert logs
    text = "\n".join(ln for ln in logs[0].read_text().splitlines()
                     if "topology" not in ln.lower() and "<" not in ln)
    log = tmp_path / "no-topology.log"
    log.write_text(text + "\n")
    r = _run("learn", "--log", log)
    warn = [ln for ln in r.stderr.splitlines() if "using qemu-2s" in ln]
    assert warn and all(ln.startswith("warning: ") for ln in warn), r.stderr
    assert sum(ln.startswith("Error: ") for ln in r.stderr.splitlines()) <= 1


def test_spread_says_what_a_tree_without_l3_does():
    r = _run("spread", "--topology", DATA / "topology" / "2pkg-nocache.xml", "--intr-cpus",
             "0-7", "--queues", "4", "--json")
    order = json.loads(r.stdout)["order"]
    assert order != sorted(order)              # the SMT order applies
    r = _run("spread", "--topology", DATA / "topology" / "2pkg-nocache.xml", "--intr-cpus",
             "0-7", "--queues", "4")
    assert "numeric order" not in r.stdout and "no L3 group" in r.stdout


def test_a_key_that_is_a_directory_is_not_no_such_file(tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "w"))
    (tmp_path / "k").mkdir()
    t = tmp_path / "t.yaml"
    t.write_text(f"targets:\n  b: {{kind: box, host: h, key: {tmp_path / 'k'}}}\n")
    r = _run("run", "--target", "b", "--targets", t, "--check-only")
    assert r.exit_code == 2 and "is a directory" in r.stderr and "no such" not in r.stderr


def test_a_targets_file_that_is_a_device_is_not_no_such_file(tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "w"))
    r = _run("targets", "--targets", "/dev/null")
    assert "no such file" not in r.output


def test_run_help_names_the_release_a_target_runs_and_where_workdir_applies():
    """The series is for 15 (patches/BASE) and a target's major is its
    kern.osreldate; --workdir is every SSH session's, the own guest's too."""
    text = " ".join(_run("run", "--help").stdout.split())
    assert "FreeBSD 15 machine over SSH (by kern.osreldate" in text
    assert "FreeBSD 14" not in text
    assert "--workdir TEXT Over SSH (a target, or the own guest)" in text
