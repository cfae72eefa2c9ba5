"""The error surface as the tests read it: a command that fails prints one
``Error: ...`` line on stderr, nothing on stdout, with the README's exit
status, and never a traceback."""

import click
import pytest
from click.testing import CliRunner

from rxl.cli.main import main


@pytest.fixture(autouse=True)
def work(tmp_path, monkeypatch):
    """A test's own RXL_WORK and no RXL_BASE_URL; its tmp_path. Autouse in
    the modules that import it."""
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "w"))
    monkeypatch.delenv("RXL_BASE_URL", raising=False)
    return tmp_path


def run(args, **kw):
    """``rxl ARGS`` in process (click's CliRunner); its Result."""
    return CliRunner().invoke(main, [str(a) for a in args], **kw)


def error_line(args, code=2, quiet_stdout=True):
    """The one stderr line of ``rxl ARGS`` run in process, which must fail with
    ``code`` (2 for bad input, by the README); asserts the rest of the surface.
    ``quiet_stdout=False`` for a command that prints its listing before the
    error (``rxl targets``)."""
    r = run(args)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code == code, (r.exit_code, r.output)
    if quiet_stdout:
        assert r.stdout == "", r.stdout
    (line,) = r.stderr.splitlines()
    assert line.startswith("Error: "), line
    return line


def files(root):
    """Every path under ``root``, relative and sorted: compared before and after
    a refused command, which must change nothing."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def commands(group=main, path=()):
    """Every leaf command under ``group``: (path of names, click.Command), sorted."""
    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            yield from commands(cmd, path + (name,))
        else:
            yield path + (name,), cmd
