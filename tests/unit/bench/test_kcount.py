"""rxl.bench.kcount: frame attribution from single-step traces, nm parsing, gdb argv."""

import json

import pytest
from click.testing import CliRunner

from rxl.bench import kcount
from rxl.bench.cli import kcount_group as kcount_cmd
from fakefreebsd import kernel_bytes


def test_frame_counts_nested_call_and_ret():
    # outer at 0x100 calls f at 0x200 (3 instructions, ret included), returns.
    pcs = [0x100, 0x101, 0x200, 0x201, 0x202, 0x102, 0x103]
    sps = [1000, 1000, 992, 992, 992, 1000, 1000]
    assert kcount.frame_counts(pcs, sps, 0x200) == [3]
    assert kcount.frame_counts(pcs, sps, 0x100) == [7]
    assert kcount.frame_counts(pcs, sps, 0x300) == []


def test_frame_counts_two_invocations_and_recursion_depth():
    # f entered twice; the second time it pushes (sp drops) before returning.
    pcs = [0x10, 0x20, 0x21, 0x11, 0x20, 0x22, 0x23, 0x24, 0x12]
    sps = [100, 92, 92, 100, 92, 84, 84, 92, 100]
    assert kcount.frame_counts(pcs, sps, 0x20) == [2, 4]


def test_frame_counts_open_at_end_and_length_mismatch():
    assert kcount.frame_counts([1, 2, 3], [10, 10, 10], 2) == [2]
    with pytest.raises(kcount.KcountError):
        kcount.frame_counts([1, 2], [10], 1)


def test_symbol_addresses_from_nm():
    nm = ("in_pcblookup_mbuf T ffffffff80d09480 1b0\n"
          "in_pcblookup_lbgroup t ffffffff80d0a280 200\n"
          "in_pcblookup_mbuf_data D ffffffff81000000 8\n")
    got = kcount.symbol_addresses(nm, ["in_pcblookup_mbuf", "in_pcblookup_lbgroup"])
    assert got == {"in_pcblookup_mbuf": 0xffffffff80d09480,
                   "in_pcblookup_lbgroup": 0xffffffff80d0a280}
    with pytest.raises(kcount.KcountError, match="in_pcblbgroup_select"):
        kcount.symbol_addresses(nm, ["in_pcblbgroup_select"])


def test_gdb_argv_passes_full_addresses():
    argv = kcount.gdb_argv("/k", "127.0.0.1:1234", "/o.json", "/s.py", samples=5,
                           entries={"in_pcblookup_mbuf": 0xffffffff80d09480})
    assert argv[:4] == ["gdb", "-batch", "-nx", "/k"]
    assert 'set $kc_entries = "in_pcblookup_mbuf=0xffffffff80d09480"' in argv
    assert argv[-2:] == ["-x", "/s.py"]
    with pytest.raises(kcount.KcountError):
        kcount.gdb_argv("/k", "h:1", "/o", "/s", samples=1, entries={})


def test_gdb_argv_refuses_what_a_gdb_string_cannot_hold():
    """`set $kc_out = "..."` took `/tmp/a"b.json` as it was (newcomer pass 5, P15):
    gdb then parsed `b.json"` as an expression. A double quote, a backslash or a
    control character in any string passed to gdb is refused instead."""
    e = {"in_pcblookup_mbuf": 0x1}
    for out in ('/tmp/a"b.json', "/tmp/a\\b.json", "/tmp/a\nb.json"):
        with pytest.raises(kcount.KcountError, match=r"\$kc_out cannot hold"):
            kcount.gdb_argv("/k", "h:1", out, "/s", samples=1, entries=e)
    with pytest.raises(kcount.KcountError, match=r"\$kc_remote"):
        kcount.gdb_argv("/k", 'h"x:1', "/o", "/s", samples=1, entries=e)
    assert 'set $kc_out = "/tmp/a b.json"' in kcount.gdb_argv(
        "/k", "h:1", "/tmp/a b.json", "/s", samples=1, entries=e)


def _trace(tmp_path, samples):
    doc = {"outer": "in_pcblookup_mbuf",
           "entries": {"in_pcblookup_mbuf": "0x100", "in_pcblookup_lbgroup": "0x200"},
           "samples": samples}
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    return str(p)


def test_summarize_keeps_only_group_lookups(tmp_path):
    group = {"pc": [0x100, 0x200, 0x201, 0x101], "sp": [100, 92, 92, 100]}
    established = {"pc": [0x100, 0x101], "sp": [100, 100]}
    res = kcount.summarize(kcount.samples_of(kcount.load(
        _trace(tmp_path, [group, group, established]))))
    assert res["total"] == {"n": 2, "median": 4, "min": 4, "max": 4}
    assert res["in_pcblookup_lbgroup"]["median"] == 2
    assert res["other"] == {"n": 1}


def test_analyze_cli_rejects_a_foreign_file(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text("{}")
    r = CliRunner().invoke(kcount_cmd, ["analyze", str(p)])
    assert r.exit_code != 0 and "not a kcount trace" in r.output


def test_analyze_cli_reads_a_trace_from_stdin(tmp_path):
    """kcount analyze -: the trace on standard input gives the file's numbers."""
    group = {"pc": [0x100, 0x200, 0x201, 0x101], "sp": [100, 92, 92, 100]}
    path = _trace(tmp_path, [group, group])
    from_file = CliRunner().invoke(kcount_cmd, ["analyze", "--json", path])
    from_stdin = CliRunner().invoke(kcount_cmd, ["analyze", "--json", "-"],
                                    input=open(path).read())
    assert from_file.exit_code == 0 and from_stdin.exit_code == 0, from_stdin.output
    a, b = json.loads(from_file.output), json.loads(from_stdin.output)
    assert len(b) == 1 and list(b)[0].startswith("- [")
    assert list(a.values()) == list(b.values())
    assert list(b.values())[0]["total"] == {"n": 2, "median": 4, "min": 4, "max": 4}


def test_analyze_cli_refuses_stdin_twice(tmp_path):
    group = {"pc": [0x100, 0x200, 0x201, 0x101], "sp": [100, 92, 92, 100]}
    text = open(_trace(tmp_path, [group])).read()
    r = CliRunner().invoke(kcount_cmd, ["analyze", "-", "-"], input=text)
    # refused before stdin is read, as any input given twice (nc13: T T printed once)
    assert r.exit_code == 2 and "-: given twice: each input once" in r.output


@pytest.mark.parametrize("samples", [[{"a": 1}], 5, [{"pc": ["zz"], "sp": [1]}],
                                     [{"pc": [1, 2], "sp": [1]}]])
def test_analyze_cli_rejects_malformed_samples(tmp_path, samples):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"outer": "x", "entries": {}, "samples": samples}))
    r = CliRunner().invoke(kcount_cmd, ["analyze", str(p)])
    assert r.exit_code == 2
    assert r.exception is None or isinstance(r.exception, SystemExit)
    assert "Error:" in r.output


@pytest.mark.parametrize("args,where", [
    (["--port", "0"], "--port"), (["--port", "-1"], "--port"), (["--port", "99999"], "--port"),
    (["--samples", "0"], "--samples"), (["--out", "{file}/t.json"], "--out"),
])
def test_record_refuses_bad_values_before_gdb(tmp_path, monkeypatch, args, where):
    """kcount record: a port outside 1-65535, no samples, an --out under a file
    are usage errors (exit 2) before nm or gdb run ."""
    kernel = tmp_path / "kernel"
    kernel.write_bytes(kernel_bytes())
    (tmp_path / "file").write_text("")
    monkeypatch.setattr(kcount, "record", lambda *a, **k: pytest.fail("recorded"))
    args = [a.replace("{file}", str(tmp_path / "file")) for a in args]
    base = ["record", "--kernel", str(kernel), "--out", str(tmp_path / "t.json")]
    r = CliRunner().invoke(kcount_cmd, base + args)
    assert r.exit_code == 2 and f"'{where}'" in r.output, r.output


def test_record_without_nm_is_one_error_line(tmp_path, monkeypatch):
    kernel = tmp_path / "kernel"
    kernel.write_bytes(kernel_bytes())
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    r = CliRunner().invoke(kcount_cmd, ["record", "--kernel", str(kernel),
                                        "--out", str(tmp_path / "t.json")])
    assert r.exit_code == 1 and isinstance(r.exception, SystemExit)
    assert r.output.strip().splitlines()[-1].startswith("Error: nm: ")
