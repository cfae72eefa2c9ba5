"""rxl.checks: finite floats, guest limits, output directories, inputs, one error surface."""

import os

import click
import pytest
from click.testing import CliRunner

from rxl.decide import checks as C


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
    with pytest.raises(click.BadParameter, match="not a finite number"):
        C.finite(float("nan"), "--cost-ladder")


def test_port_range():
    for bad in ("-1", "0", "65536", "99999"):
        with pytest.raises(click.BadParameter):
            C.PORT.convert(bad, None, None)
    assert C.PORT.convert("1234", None, None) == 1234


def test_guest_limits_name_the_option():
    with pytest.raises(click.BadParameter, match="300 vCPUs: QEMU 7.2's q35 machine takes at "
                                                 "most 288"):
        C.check_guest(300, 1024, host_mib=24000)
    with pytest.raises(click.BadParameter, match="200000000 MiB: more than this host's 24000"):
        C.check_guest(8, 200000000, host_mib=24000)
    C.check_guest(288, 24000, host_mib=24000)
    assert C.host_memory_mib() > 0


def test_out_dir_under_a_file_is_refused_before_anything(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(click.BadParameter, match="is a file"):
        C.check_out_dir(str(f / "sub" / "out"))
    with pytest.raises(click.BadParameter, match="a file, not a directory"):
        C.check_out_dir(str(f))
    C.check_out_dir(str(tmp_path / "new" / "deeper"))
    assert not (tmp_path / "new").exists()


def test_inputs_stdin_fifo_directory_missing(tmp_path):
    C.check_input("-")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    C.check_input(str(fifo))
    with pytest.raises(click.BadParameter, match="is a directory"):
        C.check_input(str(tmp_path))
    with pytest.raises(click.BadParameter, match="no such file"):
        C.check_input(str(tmp_path / "absent"))


def test_show_escapes_and_cuts():
    assert C.show("a\x00b\x1b[31m") == "a\\x00b\\x1b[31m"
    assert C.show(b"\xff\xfe") == "\\\\xff\\\\xfe"
    long = C.show("x" * 1000)
    assert long.startswith("x" * C.SHOW_MAX) and long.endswith("(920 more characters)")
    assert "\n" not in C.show("a\nb")


def test_group_folds_and_escapes_errors():
    @click.group(cls=C.Group)
    def main():
        pass

    @main.command()
    def boom():
        raise click.ClickException("line one\nline two \x07" + "y" * 1000)

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
