"""Issue 27's fourteenth pass (/work/coord/nc14.md), faults 7, 8, 10 and 11
(1, 3, 4 and 6 are test_tries27s's):

7. a backslash typed was echoed doubled (``'a\\\\b'`` for ``a\\b``: repr, and
   rxl.errors.show doubling every one): show doubles one only where it would
   read as an escape, and rxl.errors.quoted quotes without repr;
8. "1 programs", "1 marked calls (0 others)": rxl.errors.counted;
10. "not JSON (Unterminated string starting at, line 1)": json's reason cut
    before its position; rxl.errors.json_reason says "at line L, column C";
11. rxl learn --log: a LEARN line of a kind learnd never writes was a note no
    error named; it is now unread, and the count it breaks names it.

Each refusal is one ``Error:`` line, exit 2, nothing made or changed."""

import json

import pytest

from clierror import error_line as _error, files as _files, run as _run, work  # noqa: F401 (work: fixture)
from rxl.errors import json_reason, quoted, show

# ----------------------------------------------------- 7: a backslash as typed


@pytest.mark.parametrize("typed, shown", [
    ("a\\b", "a\\b"), ("C:\\dir", "C:\\dir"), ("a\\\\b", "a\\\\b"), ("end\\", "end\\"),
    # where one would read as an escape show makes, it is doubled
    ("a\\nb", "a\\\\nb"), ("a\\x41", "a\\\\x41"), ("a\\u200b", "a\\\\u200b"),
    ("a\\\nb", "a\\\\\\nb"), ("A\nB", "A\\nB"), ("caf\udce9", "caf\\xe9"),
])
def test_show_doubles_a_backslash_only_before_an_escape(typed, shown):
    assert show(typed) == shown
    assert quoted(typed) == f"'{shown}'"


@pytest.mark.parametrize("args, want", [
    (["deal", "--topology", "2x4x2", "--members", "a\\b"],
     "malformed member 'a\\b' in 'a\\b': use a CPU id"),
    (["deal", "--topology", "2x4x2", "--members", "0", "--counts", "a\\b"],
     "malformed --counts item 'a\\b': use CPU:COUNT"),
    (["spread", "--topology", "2x4x2", "--intr-cpus", "a\\b", "--queues", "1"],
     "malformed --intr-cpus item 'a\\b' in 'a\\b'"),
    (["run", "--check-only", "--target", "ssh://a\\b@host"],
     "ssh://a\\b@host: a\\b: not a login name"),
])
def test_a_backslash_typed_is_echoed_as_typed(args, want, work):
    """7: 'a\\\\b' (deal, spread: repr), ssh://a\\\\b@host (show)."""
    before = _files(work)
    line = _error(args)
    assert want in line and "\\\\" not in line, line
    assert _files(work) == before


# ------------------------------------------------------------ 8: plurals


def test_one_program_is_one_program(work):
    """8: "--programs DIR: 1 programs; the target's kernel runs them"."""
    progs = work / "progs"
    progs.mkdir()
    (progs / "so_reuseport_lb_test").write_bytes(b"\x7fELF")
    (progs / "so_reuseport_lb_test").chmod(0o755)
    r = _run(["run", "--check-only", "--target", "ssh://root@host", "--programs", progs])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[0] == \
        f"--programs {progs}: 1 program; the target's kernel runs it"


def test_one_marked_call_is_one_marked_call(work):
    """8: "[g]: 1 marked calls (0 others)"."""
    f = work / "k.json"
    f.write_text(json.dumps({"outer": "f", "entries": {"f": "0x100", "g": "0x100"},
                             "samples": [{"pc": [256, 257], "sp": [8, 8]}]}))
    r = _run(["kcount", "analyze", f, "--mark", "g"])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[0] == f"{f} [g]: 1 marked call (0 others)"


# -------------------------------------------------- 10: why a text is not JSON

@pytest.mark.parametrize("text, why", [
    ('{"outer":"f","entries":{"f":"0x100"},"samp',
     "unterminated string starting at line 1, column 38"),
    ("", "expecting value at line 1, column 1"),
    ('{"a": 1,}', "expecting property name enclosed in double quotes at line 1, column 9"),
    ('{"a": 1}\n x', "extra data at line 2, column 2"),
])
def test_not_json_says_what_and_where(text, why, work):
    """10: "not JSON (Unterminated string starting at, line 1)"."""
    f = work / "k.json"
    f.write_text(text)
    before = _files(work)
    assert _error(["kcount", "analyze", f]) == \
        f"Error: {f}: not a kcount trace: not JSON ({why})"
    assert _files(work) == before
    with pytest.raises(ValueError) as e:
        json.loads(text)
    assert json_reason(e.value) == why


def test_a_value_error_that_is_not_json_s_keeps_its_words():
    assert json_reason(ValueError("no such thing")) == "no such thing"


# ------------------------------------------ 11: an unknown LEARN line, named

def test_an_unknown_learn_line_is_named_where_it_breaks_a_count(work):
    """11: line 53 replaced by a LEARN line of no kind learnd writes: the run was
    damaged by count mismatches only, line 53 named nowhere."""
    from pathlib import Path
    log = Path(__file__).parents[2] / "data/learn/synthetic-patched.log"
    lines = log.read_text().splitlines(keepends=True)
    assert lines[52].startswith("==RXL== LEARN C learn-off.rxq phase=m ")
    lines[52] = "==RXL== LEARN ZZZ learn-off.rxq foo\n"
    f = work / "l.log"
    f.write_text("".join(lines))
    r = _run(["learn", "--log", f])
    assert r.exit_code == 1, r.output
    last = r.stderr.splitlines()[-1]
    assert last.startswith(f"Error: {f}: run learn-off.rxq damaged: line 51: accepts=551, "
                           "but worker 0's C lines count 423 connections (line 53, "
                           "unreadable, is not counted): "), last
    from rxl.learn.results import parse_learn
    run = parse_learn(lines)["learn-off.rxq"]
    assert run.unread == [53]
    assert "line 53: unknown LEARN line ZZZ (not one learnd or learn-rc writes): " \
           "==RXL== LEARN ZZZ learn-off.rxq foo" in run.notes
