"""Topologies: built-ins, LxCxT, kern.sched.topology_spec XML, CPU lists."""

from pathlib import Path

import pytest

from rxl.decide import distance, topology
from rxl.decide.cpugroup import TopologyError

DATA = Path(__file__).resolve().parents[2] / "data" / "topology"


def test_builtins_numbering():
    r = topology.load("ryzen-5950x")
    assert r.cpus == tuple(range(32))
    assert [g.cpus for g in r.root.children] == [tuple(range(16)),
                                                 tuple(range(16, 32))]
    assert r.enclosing(5)[0].cpus == (4, 5)        # core 2: CPUs 4, 5
    x = topology.load("xeon-e5-2470v2-2s")
    assert len(x.cpus) == 40 and x.l3_of(19).cpus == tuple(range(20))
    q = topology.load("qemu-2s")
    assert q.cpus == tuple(range(8)) and q.l3_of(4).cpus == (4, 5, 6, 7)


def test_rings_and_classes():
    r = topology.load("ryzen-5950x")
    assert r.ring(2, 2) == 0 and distance.classify(r, 2, 2) == "exact"
    assert r.ring(2, 3) == 1 and distance.classify(r, 2, 3) == "smt"
    assert r.ring(2, 9) == 2 and distance.classify(r, 2, 9) == "l3"
    assert r.ring(2, 17) == 3 and distance.classify(r, 2, 17) == "far"
    assert r.ring(2, None) is None and distance.classify(r, 2, None) == "any"


def test_xml_round_trip():
    q = topology.load("qemu-2s")
    back = topology.parse_spec(q.to_xml())
    assert back.root == q.root


def test_guest_spec_from_console(tmp_path):
    """A topology_spec in the form sched_ule.c prints, for the guest of issue
    4 (two NUMA nodes, each one L3 of two SMT pairs), with the prompts of a
    terminal paste around it."""
    text = (DATA / "qemu-2s-numa.xml").read_text()
    t = topology.parse_spec("root@guest:~ # sysctl kern.sched.topology_spec\n" + text
                            + "\n# done\n")
    assert t.cpus == tuple(range(8))
    assert [g.cpus for g in t.root.children] == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert distance.classify(t, 0, 1) == "smt"
    assert distance.classify(t, 0, 2) == "l3"
    assert distance.classify(t, 0, 4) == "remote"   # other NUMA node


@pytest.mark.parametrize("text, msg", [
    ('<groups><group level="1"><cpu>0</group></groups>',
     "line 1, column 34: a closing tag that does not match the <group> of "
     "line 1"),
    ("nothing here", "no <groups> or <group> element found"),
    ('<group level="1" cache-level="0"><cpu count="3">0, 1</cpu></group>',
     "lists 2 CPUs"),
    ('<group level="1" cache-level="0"><cpu count="2">0, 1</cpu><children>'
     '<group level="2" cache-level="3"><cpu count="1">0</cpu></group>'
     '</children></group>', "partition"),
])
def test_bad_xml(text, msg):
    with pytest.raises(TopologyError, match=msg):
        topology.parse_spec(text)


def test_load_errors(tmp_path):
    with pytest.raises(TopologyError, match="unknown topology"):
        topology.load("no-such-host")
    with pytest.raises(TopologyError, match="positive"):
        topology.load("0x4x2")


def test_cpu_lists():
    assert topology.parse_cpu_list("0-30:2")[:3] == [0, 2, 4]
    assert topology.parse_cpu_list("3,1,5-6") == [3, 1, 5, 6]
    for bad in ("1,,2", "a", "5-3", "1,1"):
        with pytest.raises(TopologyError):
            topology.parse_cpu_list(bad)


@pytest.mark.parametrize("level, flags, cpus, msg", [
    ("259", "", "0, 1", "cache-level 259"),
    ("-1", "", "0, 1", "cache-level '-1' is not one of 0-3"),  # issue 27 nc8 fault 17
    ("3", "", "1023, 1024", "CPU id 1024 is beyond CPU_MAXSIZE"),
])
def test_xml_values_out_of_range(level, flags, cpus, msg):
    text = (f'<group level="1" cache-level="{level}">'
            f'<cpu count="2">{cpus}</cpu>{flags}</group>')
    with pytest.raises(TopologyError, match=msg):
        topology.parse_spec(text, name="spec.xml")


def test_xml_too_deep():
    text = ""
    for _ in range(50):
        text += '<group level="1" cache-level="0"><cpu count="1">0</cpu>' \
                '<children>'
    text += '<group level="1" cache-level="0"><cpu count="1">0</cpu></group>'
    text += "</children></group>" * 50
    with pytest.raises(TopologyError, match="deeper than"):
        topology.parse_spec(text)


def test_errors_name_the_file(tmp_path):
    f = tmp_path / "bad.xml"
    f.write_text('<group level="1" cache-level="0"><cpu count="2">0, 1</cpu>'
                 '<children><group level="2" cache-level="3">'
                 '<cpu count="1">0</cpu></group></children></group>')
    with pytest.raises(TopologyError,
                       match=f"^{f}: line 1: the children of this <group>"):
        topology.load(str(f))
    f.write_bytes(b"\xac\xff<group>")
    with pytest.raises(TopologyError, match="not UTF-8"):
        topology.load(str(f))


def test_size_limits():
    with pytest.raises(TopologyError, match="CPU_MAXSIZE"):
        topology.load("100x100x100")
    with pytest.raises(TopologyError, match="CPU_MAXSIZE"):
        topology.parse_cpu_list("0-4294967296")
    assert len(topology.load("16x32x2").cpus) == 1024


def test_load_names_a_missing_file_and_an_unclosed_group(tmp_path):
    with pytest.raises(TopologyError, match="no such file"):
        topology.load(str(tmp_path / "absent.xml"))
    p = tmp_path / "unclosed.xml"
    p.write_text('<groups>\n<group level="1" cache-level="0">\n'
                 ' <cpu count="2" mask="3">0, 1</cpu>\n')
    with pytest.raises(TopologyError, match="line 3: the dump ends before "
                       "the <group> of line 2 is closed"):
        topology.load(str(p))
