"""rxl inspect accounts for every line of a groups view or names the one it
could not read: the 15 series' view (abi15.md) and the 14 one; a value out of
range, a line given twice, a member outside the group, an rx line of another
format, a number that is not one (nan) are each an error naming that line and
its own group, never a wrong number."""

import pytest
from click.testing import CliRunner

from rxl.cli.main import main
from rxl.verify import inspect as ins

V15 = """\
login: sysctl -n net.inet.tcp.reuseport_lb.groups
group port 8080 af inet members 2 map 32 rebuilds 3 nomap 0
learn window_ms 10000 age_ms 4210 rolls 7
rx 0 last 6756 cur 3301 sum 13000
rx 4 last 6793 cur 3350 sum 13100
member 0 tag 0 learned
member 1 tag 4 explicit
cpu 0 offset 0 slots 16
cpu 4 offset 16 slots 16
group port 9090 af inet6 members 1 map 0 rebuilds 0 nomap 1
member 0 tag none
root@guest:~ #
"""

# The same view as the 15 series printed it before review-15's m-7: a slot
# count on every member line.
V15_SLOTS = (V15.replace("learned\n", "learned slots 16\n")
             .replace("explicit\n", "explicit slots 16\n")
             .replace("tag none\n", "tag none - slots 0\n"))


# The view as the series prints it since review-15d's R5 dropped the deal
# counters from the group line.
V15_NOCOUNT = (V15.replace(" rebuilds 3 nomap 0", "")
               .replace(" rebuilds 0 nomap 1", ""))


def _parse(text):
    return ins.parse(text.splitlines())


def test_the_15_view_is_read_whole():
    g1, g2 = _parse(V15)
    assert (g1.port, g1.af, g1.members, g1.map_slots, g1.rebuilds, g1.nomap, g1.rolls) == \
        (8080, "inet", 2, 32, 3, 0, 7)
    assert g1.rx == {0: (6756, 3301), 4: (6793, 3350)}
    assert g1.rx_sum == {0: 13000, 4: 13100}
    assert [(m.tag, m.kind, m.slots) for m in g1.member_list] == \
        [(0, "learned", 16), (4, "explicit", 16)]
    assert g1.ranges == {0: (0, 16), 4: (16, 16)}
    assert (g2.af, g2.nomap, g2.window_ms, g2.member_list[0].kind) == ("inet6", 1, None, "none")


def test_the_15_view_without_deal_counters_is_read_whole():
    g1, g2 = _parse(V15_NOCOUNT)
    assert (g1.port, g1.af, g1.members, g1.map_slots, g1.rebuilds, g1.nomap, g1.rolls) == \
        (8080, "inet", 2, 32, None, None, 7)
    assert g1.ranges == {0: (0, 16), 4: (16, 16)}
    assert (g2.af, g2.map_slots, g2.rebuilds, g2.member_list[0].kind) == \
        ("inet6", 0, None, "none")
    text = ins.render([g1, g2])
    assert "port 8080 (inet): 2 members, map 32, window 10000 ms, 7 rolls" in text
    assert "rebuilds" not in text and "without memory" not in text
    # One counter without the other is no group line.
    with pytest.raises(ins.InspectError) as ei:
        _parse(V15_NOCOUNT.replace("members 2 map 32", "members 2 map 32 rebuilds 3"))
    assert "line 2" in str(ei.value)


def _bad(old, new, words, count=1):
    text = V15.replace(old, new, count)
    assert text != V15
    with pytest.raises(ins.InspectError) as ei:
        _parse(text)
    msg = str(ei.value)
    for w in words:
        assert w in msg, msg
    return msg


@pytest.mark.parametrize("old,new,words", [
    ("rx 0 last 6756", "rx 0 last nan", ["line 4", "rx"]),
    ("rx 4 last 6793 cur 3350 sum 13100", "rx 0 last 1 cur 1 sum 2", ["line 5", "rx 0",
                                                                      "twice"]),
    ("member 1 tag 4", "member 7 tag 4", ["line 7", "member 7", "2 members"]),
    ("group port 8080", "group port 70000", ["line 2", "70000"]),
    ("group port 8080", "group port 0", ["line 2", "port 0"]),
    ("cpu 4 offset 16", "cpu 0 offset 16", ["line 9", "cpu 0", "twice"]),
    ("rx 0 last 6756 cur 3301 sum 13000", "rx 0 prev 6756 cur 3301", ["line 4"]),
    ("member 0 tag 0 learned", "member 0 tag 0 - ", ["line 6"]),
    ("members 1 map 0", "members 1 map 0 rebuilds", ["line 10"]),
    ("member 0 tag none\n", "member 0 tag none slots 0\n", ["line 11", "port 9090"]),
    ("member 1 tag 4 explicit\n", "member 1 tag 4 explicit 16\n", ["line 7"]),
    ("cpu 4 offset 16 slots 16", "cpu 4 offset 16 slots 16 extra", ["line 9"]),
    ("rx 4 last 6793", "rx 4096 last 6793", ["line 5", "4096"]),
    ("learn window_ms 10000", "learn window_ms 10000 age_ms 1 rolls 2\nlearn window_ms 1",
     ["learn", "twice"]),
])
def test_a_line_that_cannot_be_read_is_named_with_its_own_group(old, new, words):
    _bad(old, new, words)


def test_a_group_error_names_the_group_not_the_next_one():
    msg = _bad("member 1 tag 4 explicit\n", "", ["port 8080", "line 2"])
    assert msg.endswith("2 members announced, 1 member line")
    assert "9090" not in msg


def test_a_member_of_a_map_has_its_16_slots_and_of_no_map_none():
    g1, g2 = _parse(V15)
    assert [m.slots for m in g1.member_list] == [16, 16]
    assert g2.member_list[0].slots == 0


def test_the_15_view_with_slot_counts_still_reads_and_they_are_checked():
    assert [[(m.tag, m.kind, m.slots) for m in g.member_list] for g in _parse(V15_SLOTS)] == \
        [[(0, "learned", 16), (4, "explicit", 16)], [(None, "none", 0)]]
    with pytest.raises(ins.InspectError, match="line 11.*port 9090|port 9090.*line 11"):
        _parse(V15_SLOTS.replace("none - slots 0", "none - slots 16"))
    with pytest.raises(ins.InspectError, match="add up to 31, map has 32"):
        _parse(V15_SLOTS.replace("explicit slots 16", "explicit slots 15"))


def test_numbers_beyond_32_bits_are_not_read():
    _bad("rebuilds 3", "rebuilds 4294967296", ["line 2"])


def test_the_14_view_still_reads_and_the_two_do_not_mix():
    v14 = ("group port 8080 af inet members 1 gen 5 map 16 dirty 0 rebuilds 3 allocfail 0\n"
           "learn window_ms 10000 age_ms 4210 rolls 7\nrx 0 prev 5 cur 2\n"
           "member 0 tag 0 learned slots 16\ncpu 0 offset 0 slots 16\n")
    (g,) = _parse(v14)
    assert (g.gen, g.dirty, g.allocfail, g.rx) == (5, False, 0, {0: (5, 2)})
    with pytest.raises(ins.InspectError, match="line 3"):
        _parse(v14.replace("rx 0 prev 5 cur 2", "rx 0 last 5 cur 2 sum 7"))


def test_other_lines_are_counted_and_a_file_with_no_view_is_refused(tmp_path):
    groups, skipped = ins.read(V15.splitlines())
    assert len(groups) == 2 and skipped == 2
    with pytest.raises(ins.InspectError, match="no line of a groups view"):
        ins.read(["<?xml version='1.0'?>", "<testsuites>", "</testsuites>"])
    assert ins.read(["", "  "]) == ([], 0)


def _cli(*args, **kw):
    r = CliRunner().invoke(main, ["inspect", *map(str, args)], **kw)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    return r


def test_cli_names_the_line_and_says_what_it_skipped(tmp_path):
    f = tmp_path / "v"
    f.write_text(V15.replace("rx 0 last 6756", "rx 0 last nan"))
    r = _cli(f)
    assert r.exit_code == 2 and "line 4" in r.stderr and r.stdout == ""
    f.write_text(V15)
    r = _cli(f)
    assert r.exit_code == 0 and "2 other lines (not the view) skipped" in r.stderr


@pytest.mark.parametrize("data", [b"", b"\xff\xfe\x00\x01binary", "<testsuite/>".encode(),
                                  "group".encode("utf-16")])
def test_cli_on_what_is_not_a_view(data, tmp_path):
    f = tmp_path / "v"
    f.write_bytes(data)
    r = _cli(f)
    if data == b"":  # no sysctl -n prints nothing (issue 27: tests/unit/cli/test_tries27m.py)
        assert r.exit_code == 2 and "empty (no bytes)" in r.stderr, r.output
    else:
        assert r.exit_code == 2 and "Error:" in r.stderr, r.output


def test_cli_on_dev_zero_ends_at_once():
    import time
    t0 = time.monotonic()
    r = _cli("/dev/zero")
    assert r.exit_code == 2 and time.monotonic() - t0 < 5


@pytest.mark.parametrize("text,error", [
    # a NUL inside an rx line: the line was "around the view", cpu 0 showed 0 handshakes
    (V15.replace("rx 0 last", "rx\0 0 last"),
     "line 4 (group port 8080 af inet (line 2)): not a line of the view, inside the group "
     "(its rx lines go on at line 5): rx\\x00 0 last 6756 cur 3301 sum 13000"),
    (V15.replace("member 1 tag 4 explicit\n", "garbage\nmember 1 tag 4 explicit\n"),
     "line 7 (group port 8080 af inet (line 2)): not a line of the view, inside the group "
     "(its member lines go on at line 8): garbage"),
    # sum is the last window plus perhaps the one before: never below last
    (V15.replace("cur 3350 sum 13100", "cur 3350 sum 1"),
     "line 5 (group port 8080 af inet (line 2)): rx 4 sum 1 below its last 6793"),
])
def test_a_line_inside_a_group_that_is_no_view_line_or_contradicts_it(text, error):
    with pytest.raises(ins.InspectError) as ei:
        _parse(text)
    assert str(ei.value).startswith(error), str(ei.value)


def test_lines_around_and_between_groups_are_not_the_view():
    groups, skipped = ins.read(("prompt\n" + V15.replace("group port 9090",
                                                         "% between\ngroup port 9090")
                                + "after\n").splitlines())
    assert len(groups) == 2 and skipped == 5
