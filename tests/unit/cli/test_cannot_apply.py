"""An option that cannot apply to what was asked is refused (exit 2, one line
naming both options), never silently ignored."""

import pytest
from click.testing import CliRunner

from rxl.cli.main import main


def _refused(args, first, second, tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "work"))
    r = CliRunner().invoke(main, [a.format(tmp=tmp_path) for a in args])
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code == 2, (args, r.exit_code, r.output)
    (line,) = r.stderr.splitlines()
    assert first in line and second in line, line
    return line


@pytest.fixture
def progs(tmp_path):
    d = tmp_path / "progs"
    d.mkdir()
    (d / "t").write_text("#!/bin/sh\n")
    (d / "t").chmod(0o755)
    return d


SSH = ["run", "--target", "ssh://root@192.0.2.10", "--programs", "{tmp}/progs"]


@pytest.mark.parametrize("args,first,second", [
    # the own guest's options with an SSH target (already refused; kept honest)
    (SSH + ["--memory", "4096"], "--memory", "--target"),
    (SSH + ["--transport", "serial"], "--transport", "--target"),
    (SSH + ["--pristine-kernel", "/k"], "--pristine-kernel", "--target"),
    (SSH + ["--no-spread"], "--no-spread", "--target"),
    (["run", "--target", "guest", "--memory", "4096"], "--memory", "--target"),
    # a tree's options where no tree is used
    (SSH + ["--src", "{tmp}"], "--src", "--programs"),
    (SSH + ["--objdir", "{tmp}/o"], "--objdir", "--programs"),
    (SSH + ["--rebuild-world"], "--rebuild-world", "--programs"),
    (SSH + ["--test", "x={tmp}/x.c"], "--test", "--programs"),
    (SSH + ["--atf-dir", "{tmp}"], "--atf-dir", "--programs"),
    (SSH + ["--base-url", "{tmp}"], "--base-url", "--programs"),
    # options that contradict each other
    (["run", "--src", "{tmp}", "--base-url", "{tmp}"], "--base-url", "--src"),
    (["run", "--pristine-kernel", "/k", "--pristine-src", "{tmp}"], "--pristine-src",
     "--pristine-kernel"),
    (["run", "--pristine-kernel", "/k", "--no-auto-pristine"], "--no-auto-pristine",
     "--pristine-kernel"),
    (["run", "--no-spread", "--tests-on-spread"], "--tests-on-spread", "--no-spread"),
    (["run", "--workdir", "/var/tmp/x", "--transport", "serial"], "--workdir", "--transport"),
    (["run", "--programs", "{tmp}/progs"], "--programs", "--target"),
    (["run", "--install-kernel"], "--install-kernel", "--target"),
    (["run", "--targets", "{tmp}/t.yaml"], "--targets", "--target"),
    # --no-series: the tree as it is, alone
    (["run", "--no-series", "--kernel", "/k"], "--kernel", "--no-series"),
    (["run", "--no-series", "--pristine-kernel", "/k"], "--pristine-kernel", "--no-series"),
    (["run", "--no-series", "--pristine-src", "{tmp}"], "--pristine-src", "--no-series"),
    (["run", "--no-series", "--new-program", "x"], "--new-program", "--no-series"),
    (SSH + ["--no-series"], "--no-series", "--target"),
])
def test_run_refuses_an_option_that_cannot_apply(args, first, second, tmp_path,
                                                 monkeypatch, progs):
    for mode in ("--check-only", "--dry-run"):
        _refused(args + [mode], first, second, tmp_path, monkeypatch)


@pytest.mark.parametrize("args,first,second", [
    (["--client", "closed", "--spacing-ms", "5"], "--spacing-ms", "--client"),
    (["--client", "open", "--concurrency", "9"], "--concurrency", "--client"),
    (["--setup", "noflag", "--lag-ms", "5"], "--lag-ms", "handoff-lc"),
    (["--setup", "noflag", "--mutex-delay-ms", "5"], "--mutex-delay-ms", "accept-mutex"),
    (["--setup", "noflag", "--untagged", "none"], "--untagged", "incoming-cpu"),
    (["--setup", "noflag", "--reorder-every", "5"], "--reorder-every", "reorder"),
    (["--abort-kind", "handshake"], "--abort-kind", "--abort-share"),
    (["--work-kind", "cpu"], "--work-kind", "--work-ms"),
    (["--json", "--plain"], "--plain", "--json"),
    (["--in-flight", "2"], "--in-flight", "--requests"),
    (["--think-us", "5"], "--think-us", "--requests"),
    (["--idle-ms", "5"], "--idle-ms", "--requests"),
])
def test_bench_accept_refuses_an_option_no_setup_reads(args, first, second, tmp_path,
                                                      monkeypatch):
    _refused(["bench", "accept", "--dry-run", *args], first, second, tmp_path, monkeypatch)


def test_the_options_that_do_apply_still_pass(tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "work"))
    for args in (["--client", "closed", "--concurrency", "9"],
                 ["--setup", "handoff-lc", "--lag-ms", "5"],
                 ["--abort-share", "0.1", "--abort-kind", "handshake"],
                 ["--work-ms", "1", "--work-kind", "cpu"]):
        r = CliRunner().invoke(main, ["bench", "accept", "--dry-run", *args])
        assert r.exit_code == 0, (args, r.output)


@pytest.mark.parametrize("args,first,second", [
    (["spread", "--topology", "2x2x2", "--intr-cpus", "0-7", "--queues", "2",
      "--core-spread", "1", "--no-spread"], "--core-spread", "--no-spread"),
    (["targets", "--key", "--targets", "{tmp}/t.yaml"], "--targets", "--key"),
    (["learn", "--log", "{tmp}/log", "--memory", "4096"], "--memory", "--log"),
    (["learn", "--log", "{tmp}/log", "--kernel", "/k"], "--kernel", "--log"),
    (["learn", "--log", "{tmp}/log", "--dry-run"], "--dry-run", "--log"),
])
def test_other_commands_refuse_an_option_that_cannot_apply(args, first, second, tmp_path,
                                                          monkeypatch):
    (tmp_path / "log").write_text("x\n")
    _refused(args, first, second, tmp_path, monkeypatch)
