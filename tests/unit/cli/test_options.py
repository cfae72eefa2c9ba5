"""rxl.cli.options and rxl.cli.surface: finite floats, guest limits, output directories,
inputs, one error surface."""

import os

import click
import pytest
from click.testing import CliRunner

from rxl.cli import options as C
from rxl.cli.surface import Group
from rxl.errors import SHOW_MAX, BadOption, DataError, UsageError, show


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "Infinity", "1e400"])
def test_finite_float_refuses_non_finite(value):
    @click.command()
    @click.option("--warmup", type=C.FiniteFloat(20, min_open=True))
    def cmd(warmup):
        click.echo(warmup)
    r = CliRunner().invoke(cmd, ["--warmup", value])
    assert r.exit_code == 2
    assert "'--warmup'" in r.output and "not a finite number" in r.output


def test_finite_float_bounds_and_values():
    t = C.FiniteFloat(20, 600, min_open=True)
    assert t.convert("25", None, None) == 25.0
    for bad, why in (("20", "must be > 20"), ("601", "must be <= 600"), ("x", "not a number")):
        with pytest.raises(click.BadParameter, match=why):
            t.convert(bad, None, None)


def test_port_range():
    for bad in ("-1", "0", "65536", "99999"):
        with pytest.raises(click.BadParameter):
            C.PORT.convert(bad, None, None)
    assert C.PORT.convert("1234", None, None) == 1234


def test_guest_limits_name_the_option():
    with pytest.raises(BadOption, match="300 vCPUs: QEMU 7.2's q35 machine takes at "
                                                 "most 288"):
        C.check_guest(300, 1024, host_mib=24000)
    with pytest.raises(BadOption, match="200000000 MiB: more than this host's 24000"):
        C.check_guest(8, 200000000, host_mib=24000)
    C.check_guest(288, 24000, host_mib=24000)
    assert C.host_memory_mib() > 0


def test_out_dir_under_a_file_is_refused_before_anything(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(BadOption, match="is a file"):
        C.check_out_dir(str(f / "sub" / "out"))
    with pytest.raises(BadOption, match="a file, not a directory"):
        C.check_out_dir(str(f))
    C.check_out_dir(str(tmp_path / "new" / "deeper"))
    assert not (tmp_path / "new").exists()


def test_inputs_stdin_fifo_directory_missing(tmp_path):
    C.check_input("-")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # a named FIFO's open waits for a writer: refused (issue 27)
    with pytest.raises(BadOption, match="a FIFO, not a regular file"):
        C.check_input(str(fifo))
    r, w = os.pipe()  # the pipe of <(...) passes
    try:
        C.check_input(f"/dev/fd/{r}")
    finally:
        os.close(r)
        os.close(w)
    with pytest.raises(BadOption, match="is a directory"):
        C.check_input(str(tmp_path))
    with pytest.raises(BadOption, match="no such file"):
        C.check_input(str(tmp_path / "absent"))


def test_show_escapes_and_cuts():
    assert show("a\x00b\x1b[31m") == "a\\x00b\\x1b[31m"
    assert show(b"\xff\xfe") == "\\xff\\xfe"  # once (issue 27 nc8 fault 18)
    long = show("x" * 1000)
    assert long.startswith("x" * SHOW_MAX) and long.endswith("(920 more characters)")
    assert "\n" not in show("a\nb")


def test_group_folds_and_escapes_errors():
    @click.group(cls=Group)
    def main():
        pass

    @main.command()
    def boom():
        raise click.ClickException("line one\nline two \x07" + "y" * 2000)

    @main.command()
    @click.option("--n", type=int)
    def usage(n):
        pass
    r = CliRunner().invoke(main, ["boom"])
    assert r.exit_code == 1
    err = r.output.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("Error: line one line two \\x07")
    assert "more characters" in err[0]
    r = CliRunner().invoke(main, ["usage", "--n", "x"])
    assert r.exit_code == 2 and "'--n'" in r.output


def test_every_rxl_error_reaches_the_surface_as_one_line_with_its_exit_status():
    @click.group(cls=Group)
    def main():
        pass

    @main.command()
    @click.option("--memory", type=int, default=1)
    @click.argument("kind")
    def fail(memory, kind):
        raise {"option": BadOption("too much", "--memory"),
               "argument": BadOption("no such file", "LOG"),
               "usage": UsageError("--topology: 9x9x9: too many CPUs"),
               "data": DataError("line 3: not a topology\nsecond line")}[kind]

    r = CliRunner().invoke(main, ["fail", "option"])
    assert (r.exit_code, r.output) == (2, "Error: Invalid value for '--memory': too much\n")
    r = CliRunner().invoke(main, ["fail", "argument"])
    assert (r.exit_code, r.output) == (2, "Error: Invalid value for LOG: no such file\n")
    r = CliRunner().invoke(main, ["fail", "usage"])
    assert (r.exit_code, r.output) == (2, "Error: --topology: 9x9x9: too many CPUs\n")
    r = CliRunner().invoke(main, ["fail", "data"])
    assert (r.exit_code, r.output) == (2, "Error: line 3: not a topology second line\n")


def test_every_harness_error_class_is_an_rxl_error():
    """No exception class of the harness stands outside rxl.errors' hierarchy."""
    import ast
    from pathlib import Path
    from rxl.cli.main import main

    import rxl
    from rxl.errors import RxlError
    root = Path(rxl.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        mod = ".".join(("rxl",) + path.relative_to(root).with_suffix("").parts)
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(b, ast.Name) and b.id.endswith(("Error", "Exception"))
                    or isinstance(b, ast.Attribute) and b.attr.endswith(("Error", "Exception"))
                    for b in node.bases):
                found.append((mod, node.name))
    assert len(found) > 30
    import importlib
    outside = [f"{m}.{n}" for m, n in found
               if not issubclass(getattr(importlib.import_module(m), n), RxlError)]
    assert outside == []


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
@pytest.mark.parametrize("args", [
    ["run", "--check-only", "--out", "/proc/nope"],
    ["run", "--dry-run", "--out", "/proc/nope/x"],
    ["learn", "--log", "LEARNLOG", "--out", "/proc/nope"],
])
def test_an_output_directory_that_cannot_be_made_is_refused_first(args, tmp_path,
                                                                  monkeypatch):
    """access(2) tells root /proc is writable: --out /proc/nope passed
    --check-only, and learn --out /proc/nope ended in a traceback after the
    analysis.  The check makes (and removes) a directory where --out would go."""
    from pathlib import Path
    from rxl.cli.main import main
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "w"))
    log = Path(__file__).resolve().parents[2] / "data" / "learn" / "synthetic-patched.log"
    r = CliRunner().invoke(main, [str(log) if a == "LEARNLOG" else a for a in args])
    assert r.exit_code == 2, r.output
    assert r.stdout == ""
    assert r.stderr.startswith("Error: Invalid value for '--out': /proc/nope"), r.stderr
    assert "cannot be created in /proc" in r.stderr
    assert not [p for p in tmp_path.iterdir() if p.name != "w"]
