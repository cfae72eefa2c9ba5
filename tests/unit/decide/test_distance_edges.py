"""rxl.decide.distance at the edges its docstrings name: a worker CPU outside
the tree, groups of one CPU, groups of two cores that share an L2 and
nothing else, and the four-number cost ladder."""

from rxl.decide import distance, topology


def _tree(*children):
    """A root sharing no cache over ``children``: (cache level, flags, cpus)."""
    cpus = sorted(c for _, _, cs in children for c in cs)
    body = "".join(
        f'<group level="2" cache-level="{lvl}"><cpu count="{len(cs)}" '
        f'mask="{sum(1 << c for c in cs):x}">'
        + ", ".join(map(str, cs)) + "</cpu>"
        + (f'<flags><flag name="{flags}">x</flag></flags>' if flags else "") + "</group>"
        for lvl, flags, cs in children)
    return topology.parse_spec(
        f'<groups><group level="1" cache-level="0"><cpu count="{len(cpus)}" '
        f'mask="{sum(1 << c for c in cpus):x}">'
        + ", ".join(map(str, cpus)) + f"</cpu><children>{body}</children></group></groups>",
        name="t")


def test_a_worker_outside_the_tree_is_any():
    topo = topology.load("qemu-2s")
    assert distance.classify(topo, 0, 99) == "any"
    assert distance.classify(topo, 0, None) == "any"


def test_one_cpu_groups_below_a_cacheless_root_are_cores_of_one_node():
    topo = _tree((0, "", [0]), (0, "", [1]))
    assert distance.classify(topo, 0, 1) == "node"


def test_two_l2_groups_of_two_cores_below_a_cacheless_root_are_packages():
    """Groups of more than one core that are not L3 groups are packages:
    a pair across them is remote; inside one, the L2 makes it l3."""
    topo = _tree((2, "", [0, 1]), (2, "", [2, 3]))
    assert distance.classify(topo, 0, 2) == "remote"
    assert distance.classify(topo, 0, 1) == "l3"
    smt = _tree((2, "SMT", [0, 1]), (2, "SMT", [2, 3]))   # two cores: one node
    assert distance.classify(smt, 0, 2) == "node"


def test_four_costs_give_node_l3s_and_remote_fars():
    assert distance.ladder([1, 2, 3, 4]) == {"exact": 1, "smt": 2, "l3": 3, "node": 3,
                                             "far": 4, "remote": 4}
    assert distance.ladder([1, 2, 3, 4, 5, 6]) == dict(zip(distance.DISTANCES, range(1, 7)))
