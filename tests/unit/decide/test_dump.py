"""kern.sched.topology_spec dumps as people paste them (damaged, wrapped,
truncated).  The files are in tests/data/topology/: the
guest's own dump (qemu-2s-numa.xml) and copies damaged the way pastes are.
"""

import os
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from rxl.cli.main import main
from rxl.decide import dump, topology
from rxl.decide.cpugroup import TopologyError

DATA = Path(__file__).resolve().parents[2] / "data" / "topology"
GUEST = (DATA / "qemu-2s-numa.xml").read_text()
GUEST_ROOT = topology.parse_spec(GUEST).root


@pytest.mark.parametrize("name", [
    "pasted-prompt.txt",       # "$ sysctl ..." and "kern.sched.topology_spec: "
    "no-final-groups.xml",     # the last line lost
    "tabs.xml",                # indentation by tabs
    "no-indent.xml",           # no indentation at all
])
def test_pastes_accepted(name):
    t = topology.load(str(DATA / name))
    assert t.root == GUEST_ROOT
    assert t.name == str(DATA / name)


@pytest.mark.parametrize("name, msg", [
    # Cut inside cache-level="2" of the group that opens on line 9.
    ("cut-in-attribute.xml", "line 9, column 5: the dump is cut off inside "
     "this tag"),
    # The second dump's "kern.sched.topology_spec: <groups>" is line 36.
    ("two-dumps.txt", "line 36: a second dump starts here: the input holds "
     "two pasted dumps; keep one"),
    ("no-topology.xml", "the kernel reported no CPU topology"),
])
def test_damage_named_where_it_is(name, msg):
    with pytest.raises(TopologyError) as e:
        topology.load(str(DATA / name))
    assert msg in str(e.value) and "\n" not in str(e.value)


def lines_cut(n):
    return "".join(GUEST.splitlines(keepends=True)[:n])


@pytest.mark.parametrize("text, msg", [
    (lines_cut(20), "line 20: the dump ends before the <group> of line 19 "
     "is closed"),
    (GUEST.replace("</groups>", "") + GUEST, "line 36: a second <groups> "
     "starts here"),
    (GUEST.replace(">0, 1<", ">0, a<"), "line 10: CPU 'a' is not a number"),
    (GUEST.replace('<group level="3"', '<group level="x"', 1),
     "line 9: level 'x' is not a number"),
    (GUEST.replace('cache-level="2"', 'cache-level="7"', 1),
     "line 9: cache-level 7 is not one of 0-3"),
    (GUEST.replace(">0, 1<", ">0, " + "9" * 5000 + "<"),
     "is too large (5000 digits)"),
    (GUEST.replace(">0, 1<", ">0, 1, 1<").replace('count="2" mask="3,',
                                                    'count="3" mask="3,'),
     "line 10: a CPU is listed twice"),
    (GUEST.replace(">0, 1<", ">0, 1, 2<").replace('count="2" mask="3,',
                                                    'count="3" mask="7,'),
     "line 5: the children of this <group> do not partition its CPUs"),
    (GUEST.replace("<children>", "<kids>", 1), "unexpected element <kids>"),
    ("<groupsx>", "no <groups> or <group> element found"),
    ('<groups><group level="1" cache-level="0"></group></groups>',
     "line 1: <group> without <cpu>"),
    (GUEST.replace('name="SMT"', 'name="BIG"', 1),
     "unknown cpu_group flag 'BIG'"),
])
def test_bad_dumps_one_line(text, msg):
    with pytest.raises(TopologyError) as e:
        dump.parse_spec(text, "paste")
    assert str(e.value).startswith("paste: ") and msg in str(e.value)
    assert "\n" not in str(e.value)


def test_deep_nesting_is_refused_without_recursion():
    text = ('<group level="1" cache-level="0"><cpu count="1">0</cpu>'
            '<children>' * 3000 + "</children></group>" * 3000)
    with pytest.raises(TopologyError, match="deeper than 8 levels"):
        dump.parse_spec(text)


def test_the_nearest_tag_wins_not_groups_as_group():
    """``<groups`` is not taken for ``<group``: the start is the wrapper."""
    t = dump.parse_spec("$ echo <groupsx> " + GUEST)
    assert t.root == GUEST_ROOT


def run(*args, input=None):
    r = CliRunner().invoke(main, list(args), input=input)
    return r.exit_code, r.output


def test_stdin():
    code, out = run("spread", "--topology", "-", "--intr-cpus", "0,2,4,6",
                    "--queues", "2",
                    input=(DATA / "pasted-prompt.txt").read_text())
    assert code == 0 and out.startswith("order: 0, 2, 4, 6"), out


def test_fifo(tmp_path):
    """``--topology <(ssh host sysctl -n kern.sched.topology_spec)``: bash
    hands over /dev/fd/N, an anonymous pipe (a named FIFO is refused:
    tests/unit/cli/test_tries27m.py)."""
    rfd, wfd = os.pipe()

    def writer():
        with os.fdopen(wfd, "w") as f:
            f.write(GUEST)

    th = threading.Thread(target=writer)
    th.start()
    try:
        code, out = run("spread", "--topology", f"/dev/fd/{rfd}", "--intr-cpus",
                        "0-7", "--queues", "2")
    finally:
        th.join(timeout=10)
        os.close(rfd)
    assert code == 0 and out.startswith("order: 0, 2, 1, 3, 4, 6, 5, 7")


def test_missing_and_directory(tmp_path):
    code, out = run("spread", "--topology", str(tmp_path / "none.xml"),
                    "--intr-cpus", "0", "--queues", "1")
    assert code == 2 and "no such file" in out
    code, out = run("spread", "--topology", str(tmp_path), "--intr-cpus",
                    "0", "--queues", "1")
    assert code == 2 and "is a directory" in out
    code, out = run("spread", "--topology", "2x2x2", "--intr-cpus", "0",
                    "--queues", "1")
    assert code == 0                       # LxCxT still resolves


def test_a_mask_that_disagrees_with_its_cpu_list_is_refused():
    """A group's mask="e,..." over the list 0, 1, 2, 3 was ignored (a count
    that disagrees was refused): the mask is the kernel's cpuset, 64-bit
    words lowest first, or rxl's own one hex number; either must be the list."""
    data = Path(__file__).resolve().parents[2] / "data" / "topology" / "qemu-2s-numa.xml"
    text = data.read_text()
    good = topology.parse_spec(text, name="t")
    assert topology.parse_spec(good.to_xml(), name="own").root == good.root
    bad = text.replace('count="4" mask="f,', 'count="4" mask="e,', 1)
    line = next(i for i, x in enumerate(bad.splitlines(), 1) if 'mask="e,' in x)
    with pytest.raises(TopologyError) as ei:
        topology.parse_spec(bad, name="t")
    assert str(ei.value) == f"t: line {line}: <cpu mask=...> holds CPUs 1-3, its list 0-3"
    high = text.replace('mask="ff,0,', 'mask="ff,1,', 1)   # CPU 64 in the second word
    with pytest.raises(TopologyError, match="holds CPUs 0-7,64, its list 0-7"):
        topology.parse_spec(high, name="t")
    with pytest.raises(TopologyError, match="mask 'zz' is not a CPU mask"):
        topology.parse_spec(text.replace('mask="ff,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0"',
                                         'mask="zz"', 1), name="t")
