"""``rxl inspect``: the groups view of the kernel (docs/design.md,
"Commits 2 and 3 in the kernel", Observability)."""

import json

import pytest
from click.testing import CliRunner

from groupsview import VIEW14
from rxl.cli.main import main
from rxl.verify import inspect as ins

# The older view's group, then a second group without a map.
VIEW = VIEW14 + """\
group port 9090 af inet6 members 1 gen 1 map 0 dirty 1 rebuilds 0 allocfail 0
member 0 tag hash - slots 0
# prompt
"""


def test_parse_reads_every_line_kind():
    g1, g2 = ins.parse(VIEW.splitlines())
    assert (g1.port, g1.af, g1.members, g1.map_slots, g1.rolls) == \
        (8080, "inet", 2, 32, 7)
    assert g1.rx == {0: (6756, 3301), 4: (6793, 3350)}
    assert [(m.tag, m.kind, m.slots) for m in g1.member_list] == \
        [(0, "learned", 16), (4, "explicit", 16)]
    assert g1.ranges == {0: (0, 16), 4: (16, 16)}
    assert (g2.af, g2.dirty, g2.window_ms) == ("inet6", True, None)
    assert g2.member_list[0].tag is None and g2.member_list[0].kind == "hash"


@pytest.mark.parametrize("bad, msg", [
    ("member 1 tag 4 explicit slots 16\n", "2 members announced, 1"),
    ("member 1 tag 4 explicit slots 15\n", "add up to 31, map has 32"),
])
def test_inconsistent_group_is_refused(bad, msg):
    text = VIEW.replace("member 1 tag 4 explicit slots 16\n", "")
    if "15" in bad:
        text = VIEW.replace("member 1 tag 4 explicit slots 16\n", bad)
    with pytest.raises(ins.InspectError, match=msg):
        ins.parse(text.splitlines())


def test_ranges_must_tile_the_map():
    text = VIEW.replace("cpu 4 offset 16 slots 16", "cpu 4 offset 17 slots 15")
    with pytest.raises(ins.InspectError, match="starts at 17, expected 16"):
        ins.parse(text.splitlines())


def test_line_before_any_group_is_refused():
    with pytest.raises(ins.InspectError, match="before any group"):
        ins.parse(["rx 0 prev 1 cur 2"])


def test_cli_table_and_json(tmp_path):
    f = tmp_path / "view.txt"
    f.write_text(VIEW)
    r = CliRunner().invoke(main, ["inspect", str(f)])
    assert r.exit_code == 0, r.output
    assert "port 8080 (inet): 2 members, map 32" in r.output
    assert "handshakes     6756 +     3301  slots   16 at 0" in r.output
    r = CliRunner().invoke(main, ["inspect", "--json", str(f)])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data[0]["rx"]["4"] == [6793, 3350]
    assert data[1]["member_list"][0]["kind"] == "hash"


def test_cli_bad_input_is_one_line(tmp_path):
    f = tmp_path / "view.txt"
    f.write_text("cpu 0 offset 0 slots 1\n")
    r = CliRunner().invoke(main, ["inspect", str(f)])
    assert r.exit_code == 2
    assert r.output.strip().splitlines()[-1].startswith("Error:")


# The 15 view since the deal moved to accept(2): ``deal 1`` while a group
# waits for an accept(2) to deal it (in_pcblb_report_group(), lead39b).
VIEW15_DEAL = """\
group port 8080 af inet members 2 map 0 deal 1
member 0 tag 0 explicit
member 1 tag 2 explicit
group port 8081 af inet members 1 map 16 deal 0
member 0 tag 4 explicit
cpu 4 offset 0 slots 16
group port 8082 af inet members 1 map 0
member 0 tag none
"""


def test_the_15_view_reads_deal_pending():
    a, b, c = ins.parse(VIEW15_DEAL.splitlines())
    assert (a.dirty, b.dirty, c.dirty) == (True, False, None)
    text = ins.render([a, b, c])
    assert text.count("deal pending at accept(2)") == 1
    assert "rebuild pending" not in text


@pytest.mark.parametrize("tail", ["deal 2", "deal -1", "deal", "deal 1 deal 0"])
def test_a_deal_field_other_than_0_or_1_is_refused(tail):
    bad = f"group port 8080 af inet members 1 map 0 {tail}\nmember 0 tag none\n"
    with pytest.raises(ins.InspectError, match="line 1"):
        ins.parse(bad.splitlines())
