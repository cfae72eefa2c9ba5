"""The error surface as the tests read it: a command that fails prints one
``Error: ...`` line on stderr, nothing on stdout, with the README's exit
status, and never a traceback."""

from click.testing import CliRunner

from rxl.cli.main import main


def error_line(args, code=2, quiet_stdout=True):
    """The one stderr line of ``rxl ARGS`` run in process, which must fail with
    ``code`` (2 for bad input, by the README); asserts the rest of the surface.
    ``quiet_stdout=False`` for a command that prints its listing before the
    error (``rxl targets``)."""
    r = CliRunner().invoke(main, [str(a) for a in args])
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code == code, (r.exit_code, r.output)
    if quiet_stdout:
        assert r.stdout == "", r.stdout
    (line,) = r.stderr.splitlines()
    assert line.startswith("Error: "), line
    return line
