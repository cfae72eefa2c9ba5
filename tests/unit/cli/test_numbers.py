"""Numbers on the command line and in the views rxl reads are ASCII decimal, as
written: Python's int() and float() also take any Unicode digit ("٣" is 3,
"５" is 5), "1_000", and a regex's \\d and $ take more than they say. Each is
refused in one line (exit 2), never read as another number."""

import pytest
from click.testing import CliRunner

from rxl.cli.main import main
from rxl.cli.options import decimal_float, decimal_int


def _refused(args):
    r = CliRunner().invoke(main, args)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code == 2, (r.exit_code, r.stdout)
    (line,) = r.stderr.splitlines()
    assert line.startswith("Error: ")
    return line


@pytest.mark.parametrize("args", [
    ["deal", "--topology", "2x4x2", "--members", "\u0663"],            # ARABIC-INDIC 3
    ["deal", "--topology", "2x4x2", "--members", "\uff15"],            # FULLWIDTH 5
    ["deal", "--topology", "2x4x2", "--members", "0,1,2,9,-", "--counts", "0:\u0663"],
    ["deal", "--topology", "2x4x2\n", "--members", "0"],
    ["deal", "--topology", "\u0662x4x2", "--members", "0"],
    ["spread", "--topology", "ryzen-5950x", "--intr-cpus", "0-30:2", "--queues", "\u0668"],
    ["spread", "--topology", "ryzen-5950x", "--intr-cpus", "0-\u0663", "--queues", "2"],
    ["spread", "--topology", "qemu-2s", "--intr-cpus", "0-7", "--queues", "2",
     "--core-spread", "\u0661"],
    ["outcomes", "--topology", "2x4x2", "--workers", "0-3", "--rx-cpus", "0",
     "--cost-ladder", "1,1,1,\u0661"],
    ["bench", "accept", "--dry-run", "--spacing-ms", "\u0661"],
    ["bench", "accept", "--dry-run", "--workers", "1_0"],
])
def test_a_number_that_is_not_ascii_decimal_is_refused(args):
    _refused(args)


def test_inspect_reads_ascii_digits_only(tmp_path):
    view = tmp_path / "v"
    view.write_text("group port 8080 af inet members 1 map 16 rebuilds 1 nomap 0\n"
                    "rx \u0664 last 1 cur 1 sum 2\nmember 0 tag 0 explicit slots 16\n"
                    "cpu 0 offset 0 slots 16\n")
    assert "line 2" in _refused(["inspect", str(view)])


def test_the_same_numbers_in_ascii_pass():
    r = CliRunner().invoke(main, ["deal", "--topology", "2x4x2", "--members", "3,5",
                                  "--counts", "3:3"])
    assert r.exit_code == 0 and "2 members" in r.stdout
    assert (decimal_int("-12"), decimal_int(7), decimal_float("1e1"), decimal_float(".5")) \
        == (-12, 7, 10.0, 0.5)
    for bad in ("\u0663", "1_000", " 5", "5\n", "", "0x10"):
        with pytest.raises(ValueError):
            decimal_int(bad)
    for bad in ("\u0661.5", "1_0.5", "1.5\n", "1e"):
        with pytest.raises(ValueError):
            decimal_float(bad)
