"""rxl.decide.cpugroup against what it mirrors: sys/sys/smp.h's levels and
flags (and the userspace build's copy of them), sched_ule.c's
kern.sched.topology_spec text, and a tree that cannot change under its
cached lookups."""

import dataclasses
import re
from pathlib import Path

import pytest

from rxl.decide import cpugroup, topology
from rxl.decide.cpugroup import Group

ROOT = Path(__file__).resolve().parents[3]


def test_levels_and_flags_are_smp_hs():
    """sys/sys/smp.h (FreeBSD 15.0): CG_SHARE_NONE 0, L1 1, L2 2, L3 3;
    CG_FLAG_HTT 0x01, SMT 0x02, THREAD = HTT | SMT, NODE 0x04."""
    assert (cpugroup.CG_SHARE_NONE, cpugroup.CG_SHARE_L1, cpugroup.CG_SHARE_L2,
            cpugroup.CG_SHARE_L3) == (0, 1, 2, 3)
    assert (cpugroup.CG_FLAG_HTT, cpugroup.CG_FLAG_SMT, cpugroup.CG_FLAG_THREAD,
            cpugroup.CG_FLAG_NODE) == (0x01, 0x02, 0x03, 0x04)


def test_the_c_cores_build_with_the_same_numbers():
    """lib/userspace/rxl_compat.h stands in for smp.h when the cores compile
    for userspace; the model and the C must read one tree the same way."""
    text = (ROOT / "lib/userspace/rxl_compat.h").read_text()
    defs = dict(re.findall(r"#define\s+(CG_(?:SHARE|FLAG)_[A-Z0-9]+)\s+(0x[0-9a-f]+|\d+)\b",
                           text))
    assert len(defs) == 7
    for name, value in defs.items():
        assert getattr(cpugroup, name) == int(value, 0), name


def test_to_xml_prints_levels_as_sched_ule_does():
    """sysctl_kern_sched_topology_spec_internal(): level 1 + indent / 2, the
    indent growing by 2 per level."""
    lines = topology.load("qemu-2s").to_xml().splitlines()
    groups = [ln for ln in lines if "<group " in ln]
    assert groups[0] == '<group level="1" cache-level="0">'
    assert groups[1] == '  <group level="2" cache-level="3">'
    assert groups[2] == '    <group level="3" cache-level="2">'


def test_a_group_is_immutable_and_a_topology_compares_by_its_tree():
    g = Group((0, 1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.cpus = (0,)
    assert hash(g) == hash(Group((0, 1)))
    a, b = topology.load("qemu-2s"), topology.load("qemu-2s")
    assert a == b and a.enclosing(5) == b.enclosing(5)
    assert a != topology.load("2x4x2")


def test_to_xml_masks_have_a_bit_per_cpu():
    masks = re.findall(r'<cpu count="(\d+)" mask="([0-9a-f]+)">([^<]*)</cpu>',
                       topology.load("qemu-2s").to_xml())
    assert masks[:3] == [("8", "ff", "0, 1, 2, 3, 4, 5, 6, 7"), ("4", "f", "0, 1, 2, 3"),
                         ("2", "3", "0, 1")]
    assert ("4", "f0", "4, 5, 6, 7") in masks


@pytest.mark.parametrize("cpus,text", [
    ([], ""), ([3], "3"), ([0, 1, 2, 5], "0-2,5"), ([0, 2, 4], "0,2,4"),
    ([0, 1, 3, 4, 7], "0-1,3-4,7"), ([6, 7], "6-7"),
])
def test_cpu_ranges(cpus, text):
    assert cpugroup.cpu_ranges(cpus) == text


def test_lxcxt_trees_have_no_single_cpu_groups_and_smt_only_with_threads():
    """topology.regular(): an L3 group of one core of two threads is that
    core (flagged SMT, no children); cores of one thread are no groups and
    carry no SMT flag (FreeBSD makes no single-CPU groups)."""
    one_core = topology.load("2x1x2")
    assert [(g.cpus, g.level, g.flags, g.children) for g in one_core.root.children] == [
        ((0, 1), cpugroup.CG_SHARE_L3, cpugroup.CG_FLAG_SMT, ()),
        ((2, 3), cpugroup.CG_SHARE_L3, cpugroup.CG_FLAG_SMT, ())]
    no_smt = topology.load("2x4x1")
    assert [(g.cpus, g.flags, g.children) for g in no_smt.root.children] == [
        ((0, 1, 2, 3), 0, ()), ((4, 5, 6, 7), 0, ())]


def test_lxcxt_stops_at_cpu_maxsize_before_building_anything():
    assert topology.load("32x32x1").ncpu == cpugroup.CPU_MAXSIZE
    with pytest.raises(cpugroup.TopologyError,
                       match=r"^33x32x1 has more than 1024 CPUs \(CPU_MAXSIZE\)$"):
        topology.load("33x32x1")
    with pytest.raises(cpugroup.TopologyError, match="has more than 1024 CPUs"):
        topology.load("100000000x100000000x100000000")      # refused, not built


def test_a_topology_is_immutable():
    """Its lookups (enclosing groups per CPU) are computed once from the tree."""
    topo = topology.load("qemu-2s")
    with pytest.raises(dataclasses.FrozenInstanceError):
        topo.root = Group((0,))
