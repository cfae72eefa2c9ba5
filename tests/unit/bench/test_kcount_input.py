"""What rxl kcount says of input that is not a trace: one line, in the trace's
own words (no Python internals), exit 2, and never a traceback."""

import json

import pytest
from click.testing import CliRunner

from rxl.cli.main import main
from fakefreebsd import kernel_bytes

#: Words of Python's own exceptions that must not reach a user.
INTERNALS = ("' object", "subscriptable", "('", "TypeError", "KeyError", "ValueError",
             "list indices", "attribute", "Errno", "Traceback", "int()")


def _run(*args):
    return CliRunner().invoke(main, ["kcount", *args])


def _one_error(r, code=2):
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code == code, (r.exit_code, r.output)
    (line,) = r.stderr.splitlines()
    assert line.startswith("Error: ")
    for word in INTERNALS:
        assert word not in line, line
    return line


@pytest.fixture
def files(tmp_path):
    f = {}
    f["binary"] = tmp_path / "binary.json"
    f["binary"].write_bytes(b"\xff\xfe\x00{}")
    f["kernel"] = tmp_path / "kernel"
    f["kernel"].write_bytes(kernel_bytes())
    return f


@pytest.mark.parametrize("cmd", [
    ["analyze", "{binary}"],
    ["table", "--trace", "accept-off", "pristine", "{binary}"],
    ["sites", "{binary}", "--kernel", "{kernel}"],
    ["diff", "{binary}", "{kernel}", "{binary}", "{kernel}"],
])
def test_a_trace_that_is_not_utf8_is_one_line(cmd, files):
    args = [a.format(**{k: str(v) for k, v in files.items()}) for a in cmd]
    assert "not UTF-8" in _one_error(_run(*args))


GOOD_SAMPLE = {"pc": [256, 257], "sp": [8, 8]}


@pytest.mark.parametrize("doc,words", [
    ({}, "no 'outer'"),
    ([], "a JSON object"),
    ({"outer": "f", "entries": {"f": "0x100"}}, "no 'samples'"),
    ({"outer": 1.5, "entries": {}, "samples": []}, "'outer'"),
    ({"outer": "f", "entries": 3, "samples": []}, "'entries'"),
    ({"outer": "f", "entries": {"f": "zz"}, "samples": []}, "zz is not a hex address"),
    ({"outer": "f", "entries": {"f": "0x100"}, "samples": 2.0}, "'samples'"),
    ({"outer": "f", "entries": {"f": "0x100"}, "samples": [1.5]}, "sample 1"),
    ({"outer": "f", "entries": {"f": "0x100"}, "samples": [{"pc": [1.5], "sp": [1]}]},
     "sample 1"),
    ({"outer": "f", "entries": {"f": "0x100"}, "samples": [{"pc": [1, 2], "sp": [1]}]},
     "2 pcs but 1 sps"),
    ({"outer": "f", "entries": {"f": "0x100"}, "samples": [GOOD_SAMPLE], "asm": 5},
     "'asm'"),
    ({"outer": "f", "entries": {"f": "0x100"}, "samples": [dict(GOOD_SAMPLE, cas=7)],
      "asm": {"0x100": "nop", "0x101": "ret"}}, "'cas'"),
    ({"outer": "f", "entries": {"f": "0x100"}, "samples": [GOOD_SAMPLE],
      "asm": {"0x100": "nop"}}, "0x101"),
    # record masks every register to 64 bits: a value outside [0, 2**64) is no trace's
    ({"outer": "f", "entries": {"f": "0x100"}, "samples": [{"pc": [-256, 257], "sp": [8, 8]}]},
     "sample 1: 'pc' must be a list of integers from 0 to 2**64-1"),
    ({"outer": "f", "entries": {"f": "0x100"}, "samples": [{"pc": [256, 1 << 64],
                                                              "sp": [8, 8]}]}, "'pc'"),
    ({"outer": "f", "entries": {"f": "0x100"}, "samples": [{"pc": [256, 257], "sp": [8, -8]}]},
     "sample 1: 'sp'"),
    ({"outer": "f", "entries": {"f": "0x100"}, "samples": [dict(GOOD_SAMPLE,
                                                                cas=[[0, -1, 2]])]}, "'cas'"),
    ({"outer": "f", "entries": {"f": "0x100"}, "samples": [dict(GOOD_SAMPLE,
                                                                curthread=-4)]}, "'curthread'"),
])
def test_a_malformed_trace_is_named_in_its_own_words(doc, words, tmp_path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    line = _one_error(_run("analyze", str(p)))
    assert words in line, line
    assert str(p) in line


def test_table_of_a_missing_trace_says_no_such_file(tmp_path):
    line = _one_error(_run("table", "--trace", "accept-off", "pristine",
                           str(tmp_path / "absent")))
    assert "no such file" in line.lower()


@pytest.mark.parametrize("args,opt", [
    (["--limit", "0"], "--limit"), (["--limit", "-5"], "--limit"),
    (["--outer", "a b"], "--outer"), (["--outer", ""], "--outer"),
    (["--inner", "x;y"], "--inner"),
])
def test_record_refuses_nonsense_even_in_a_dry_run(args, opt, files, tmp_path):
    r = _run("record", "--kernel", str(files["kernel"]), "--out", str(tmp_path / "o.json"),
             "--dry-run", *args)
    assert opt in _one_error(r)


def test_record_refuses_an_out_that_is_a_directory_even_in_a_dry_run(files, tmp_path):
    """--out is the trace file: a directory is refused before gdb or nm runs
    (as kcount table --out is)."""
    r = _run("record", "--kernel", str(files["kernel"]), "--out", str(tmp_path), "--dry-run")
    line = _one_error(r)
    assert "'--out'" in line and "is a directory" in line, line


@pytest.mark.parametrize("missing, opt", [("kernel", "--kernel"), ("src", "--src"),
                                          ("objdir", "--objdir")])
def test_setsockopt_refuses_missing_inputs_even_in_a_dry_run(files, tmp_path, missing, opt):
    """A dry run plans only a run that can start: the kernel must be a file that is
    not empty, the tree and its objdir directories; --out is not made."""
    have = {"kernel": str(files["kernel"]), "src": str(tmp_path), "objdir": str(tmp_path)}
    have[missing] = str(tmp_path / "nonexistent")
    r = _run("setsockopt", "--kernel", have["kernel"], "--src", have["src"], "--objdir",
             have["objdir"], "--out", str(tmp_path / "o"), "--dry-run")
    line = _one_error(r)
    assert f"'{opt}'" in line and "nonexistent" in line, line
    assert not (tmp_path / "o").exists()


def test_setsockopt_refuses_an_empty_kernel(files, tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    r = _run("setsockopt", "--kernel", str(tmp_path / "empty"), "--src", str(tmp_path),
             "--objdir", str(tmp_path), "--out", str(tmp_path / "o"), "--dry-run")
    line = _one_error(r)
    assert "'--kernel'" in line and "empty" in line, line


def test_sites_and_diff_name_a_mark_the_trace_cannot_have(tmp_path, files):
    doc = {"outer": "kern_accept4", "entries": {"kern_accept4": "0x100"},
           "samples": [GOOD_SAMPLE], "asm": {"0x100": "nop", "0x101": "ret"}}
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    line = _one_error(_run("sites", str(p), "--kernel", str(files["kernel"]),
                           "--mark", "nosuch"))
    assert "--mark" in line and "nosuch" in line
