"""One error surface across every command: exactly one ``Error: ...`` line on
stderr, nothing on stdout, exit 2 for what the command was asked (an option,
an input) and 1 for a failure while doing it; ``--json`` prints JSON also
under ``--dry-run`` and ``--check-only``."""

import json

import click
import pytest
from click.testing import CliRunner

from clierror import commands as _commands
from rxl.cli.main import main
from rxl.cli.options import Text



COMMANDS = list(_commands())
IDS = [" ".join(p) for p, _ in COMMANDS]


def _run(args, **kw):
    return CliRunner().invoke(main, list(args), **kw)


def one_error(r, code):
    """``r`` failed with ``code`` and printed exactly one ``Error:`` line on
    stderr and nothing on stdout; the line."""
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert r.exit_code == code, (r.exit_code, r.stdout, r.stderr)
    assert r.stdout == "", r.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), r.stderr
    return lines[0]


def test_every_command_is_listed():
    assert len(COMMANDS) >= 24 and ("kcount", "sites") in [p for p, _ in COMMANDS]


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=IDS)
def test_an_unknown_option_is_one_line_exit_2(path):
    line = one_error(_run(path + ("--no-such-option",)), 2)
    assert "--no-such-option" in line


@pytest.mark.parametrize("path,cmd", [(p, c) for p, c in COMMANDS
                                      if any(x.required for x in c.params)],
                         ids=[i for i, (p, c) in zip(IDS, COMMANDS)
                              if any(x.required for x in c.params)])
def test_a_missing_required_option_is_one_line_exit_2(path, cmd):
    line = one_error(_run(path), 2)
    assert "Missing" in line


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=IDS)
def test_help_is_exit_0(path):
    r = _run(path + ("--help",))
    assert r.exit_code == 0 and r.stderr == "" and "Usage:" in r.stdout


def test_an_unknown_command_and_a_root_option_are_one_line():
    assert "No such command 'bogus'" in one_error(_run(["bogus"]), 2)
    assert "--bogus" in one_error(_run(["--bogus"]), 2)
    assert "No such command" in one_error(_run(["kcount", "nosuch"]), 2)


@pytest.mark.parametrize("args,extra", [(["--version", "extra"], "argument (extra)"),
                                        (["--version", "a", "b"], "arguments (a b)"),
                                        (["--version", "deal"], "argument (deal)")])
def test_an_argument_beside_version_is_refused(args, extra):
    assert f"Got unexpected extra {extra}" in one_error(_run(args), 2)
    r = _run(["--version"])
    assert r.exit_code == 0 and "version" in r.stdout


def _groups(group=main, path=()):
    yield path, group
    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            yield from _groups(cmd, path + (name,))


@pytest.mark.parametrize("path,group", list(_groups()),
                         ids=[" ".join(p) or "rxl" for p, _ in _groups()])
def test_a_group_without_its_command_is_one_line_listing_them(path, group):
    """``rxl series`` alone: one line naming the group and its commands, exit 2,
    not click's usage page."""
    line = one_error(_run(path, prog_name="rxl"), 2)
    assert line == (f"Error: {' '.join(('rxl',) + path)} needs a command: "
                    f"{', '.join(sorted(group.commands))}")


def _targets(tmp_path, text):
    p = tmp_path / "targets.yaml"
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize("args,code,words", [
    (["deal", "--topology", "2x4x2", "--members", "0,x"], 2, "malformed member"),
    (["deal", "--topology", "nosuch", "--members", "0"], 2, "unknown topology"),
    (["spread", "--topology", "2x4x2", "--intr-cpus", "0-99", "--queues", "2"], 2, "CPU"),
    (["outcomes", "--topology", "2x4x2", "--workers", "0", "--rx-cpus", "0",
      "--cost-ladder", "1,x"], 2, "--cost-ladder"),
    (["parse", "/nonexistent/log"], 2, "no such file"),
    (["inspect", "/nonexistent/dump"], 2, "no such file"),
    (["run", "--case-timeout", "0", "--check-only"], 2, "'--case-timeout'"),
    (["run", "--target", "nosuchname", "--check-only"], 2, "'--target'"),
    (["learn", "--warmup", "nan", "--dry-run"], 2, "'--warmup'"),
    (["bench", "accept", "--workers", "0", "--dry-run"], 2, "--workers"),
    (["kcount", "analyze", "/nonexistent"], 2, "/nonexistent: no such file"),
    (["build", "--src", "/nonexistent"], 2, "'--src'"),
    (["series", "check", "--src", "/nonexistent"], 2, "'--src'"),
    (["guest", "up", "--kernel", "/nonexistent", "--dry-run"], 2, "--kernel"),
    (["vm", "--image", "/nonexistent"], 2, "'--image'"),
])
def test_each_command_refuses_bad_input_in_one_line(args, code, words, tmp_path,
                                                     monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "work"))
    assert words in one_error(_run(args), code)


def test_vm_names_the_option_it_refuses(tmp_path):
    img = tmp_path / "fbsd.raw"
    img.write_bytes(b"\0" * 512)
    line = one_error(_run(["vm", "--image", str(img), "--name", "no spaces"]), 2)
    assert "'--name'" in line
    line = one_error(_run(["vm", "--image", str(img), "--tap", "em0"]), 2)
    assert "'--tap'" in line


def test_a_bad_targets_file_is_exit_2_everywhere_with_the_mistakes_listed(tmp_path,
                                                                          monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "work"))
    bad = _targets(tmp_path, "targets:\n  a: {kind: box}\n  b: {kind: nope}\n")
    r = _run(["targets", "--targets", bad])
    assert r.exit_code == 2, (r.stdout, r.stderr)
    err = r.stderr.splitlines()
    assert len(err) == 1 and err[0].startswith("Error: ") and "2 mistakes" in err[0]
    assert "targets.a.host: required" in r.stdout and "targets.b.kind" in r.stdout
    line = one_error(_run(["run", "--target", "a", "--targets", bad, "--check-only"]), 2)
    assert "targets.a.host" in line
    # a name that is not there is the same kind of mistake
    good = _targets(tmp_path, "targets: {}\n")
    one_error(_run(["run", "--target", "a", "--targets", good, "--check-only"]), 2)


def test_json_under_check_only_and_dry_run_is_the_plan(tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "work"))
    from fakefreebsd import _series, _tree
    from rxl.tree import base as tree_base
    base = tmp_path / "base"
    monkeypatch.setattr(tree_base, "REPO_PATCHES", _series(tmp_path, base, _tree(base)))
    r = _run(["run", "--check-only", "--json", "--base-url", str(base),
              "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["check_only"] is True and doc["src"] is None and "fetched" in doc["says"]
    progs = tmp_path / "progs"
    progs.mkdir()
    (progs / "so_reuseport_lb_test").write_text("#!/bin/sh\n")
    (progs / "so_reuseport_lb_test").chmod(0o755)
    r = _run(["run", "--dry-run", "--json", "--target", "ssh://root@192.0.2.1",
              "--programs", str(progs), "--out", str(tmp_path / "o")])
    doc = json.loads(r.stdout)
    assert doc["dry_run"] is True
    names = [s["name"] for s in doc["stages"]]
    assert names[:3] == ["series", "build", "world"] and "tests" in names
    assert any("run.sh" in c for s in doc["stages"] for c in s["commands"])


def _text_params(cmd):
    """The parameters of ``cmd`` that take text (a path, a list, a name)."""
    return [p for p in cmd.params
            if not getattr(p, "is_flag", False) and not getattr(p, "count", False)
            and (p.type is click.STRING or isinstance(p.type, (click.Path, Text)))
            and not getattr(p, "empty_ok", False)]


def _spelled(p):
    return max(p.opts, key=len) if isinstance(p, click.Option) else p.human_readable_name


EMPTY_CASES = [(path, cmd, p) for path, cmd in COMMANDS for p in _text_params(cmd)]


@pytest.mark.parametrize("path,cmd,param", EMPTY_CASES,
                         ids=[f"{' '.join(a)} {_spelled(c)}" for a, _, c in EMPTY_CASES])
def test_an_empty_value_is_refused_by_every_command(path, cmd, param, tmp_path,
                                                    monkeypatch):
    """--counts '' ran as if no --counts, --targets '' as if no --targets: an
    empty value, given, is one error naming a parameter given empty (the
    other required ones are given empty too), whatever the command."""
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "w"))
    given = [param] + [p for p in cmd.params if p.required and p is not param]
    args = []
    for p in given:
        args += ([_spelled(p)] if isinstance(p, click.Option) else []) + [""] * max(p.nargs, 1)
    line = one_error(_run(path + tuple(args)), 2)
    names = [_spelled(p) for p in given]
    assert any((f"'{n}'" if n.startswith("-") else n) in line for n in names), line
    assert "empty" in line or "''" in line or "File '' does not exist" in line, line


def test_an_empty_value_that_means_none_is_documented_as_such():
    """The options whose '' is a choice say so in their help."""
    ok = [(path, p) for path, cmd in COMMANDS for p in cmd.params
          if getattr(p, "empty_ok", False)]
    assert [(path, p.name) for path, p in ok] == [
        (("build",), "lock"), (("guest", "up"), "atf_dir"), (("run",), "atf_dir")]
    assert all("'' for none" in p.help for _, p in ok)
