"""Distance classes follow what the tree says."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rxl.cli.main import main
from rxl.decide import distance, outcomes, topology

DATA = Path(__file__).resolve().parents[2] / "data" / "topology"


def classes(topo, rx, cpus):
    return [distance.classify(topo, rx, c) for c in cpus]


def test_flat_machine_without_cache_info():
    """4 CPUs, one group, cache-level 0: nothing is known to cross an L3."""
    t = topology.load(str(DATA / "flat4-nocache.xml"))
    assert not distance.has_cache_info(t)
    assert classes(t, 0, [0, 1, 2, 3, None]) == \
        ["exact", "node", "node", "node", "any"]


def test_two_packages_without_cache_info():
    """The same package is nearer than the other one."""
    t = topology.load(str(DATA / "2pkg-nocache.xml"))
    assert not distance.has_cache_info(t)
    assert classes(t, 0, [1, 2, 3, 4, 5]) == \
        ["smt", "node", "node", "remote", "remote"]


def test_trees_with_caches():
    r = topology.load("ryzen-5950x")         # one package, two CCDs
    assert distance.has_cache_info(r)
    assert classes(r, 2, [2, 3, 9, 17]) == ["exact", "smt", "l3", "far"]
    q = topology.load("qemu-2s")             # a NUMA node per socket
    assert classes(q, 0, [1, 2, 4]) == ["smt", "l3", "remote"]
    g = topology.load(str(DATA / "qemu-2s2l3-numa.xml"))
    assert classes(g, 0, [1, 2, 4, 8]) == ["smt", "l3", "far", "remote"]


def test_outcomes_do_not_charge_unknown_cache():
    t = topology.load(str(DATA / "flat4-nocache.xml"))
    o = outcomes.outcome(t, [0, 1, 2, 3], {0: 1}, "hash")
    assert o.classes == ["exact", "node", "node", "node"]
    assert o.cycles() == 1.0
    # Two packages: half the connections cross to the other package and
    # are charged the cross-L3 cost as a lower bound.
    t = topology.load(str(DATA / "2pkg-nocache.xml"))
    o = outcomes.outcome(t, list(range(8)), {0: 1, 4: 1}, "hash")
    assert o.cycles() == pytest.approx(1 + 0.5 * 0.19)


def test_ladder_forms():
    assert distance.ladder([1, 1, 1, 1.19]) == {
        "exact": 1, "smt": 1, "l3": 1, "node": 1, "far": 1.19,
        "remote": 1.19}
    assert distance.ladder([1, 1, 1, 1.1, 1.19, 1.5])["remote"] == 1.5
    with pytest.raises(ValueError, match="four numbers"):
        distance.ladder([1, 2, 3])
    with pytest.raises(ValueError, match="positive"):
        distance.ladder([1, 1, 1, 0])


def test_outcomes_cli_reports_missing_cache_info():
    r = CliRunner().invoke(main, ["outcomes", "--topology",
                                  str(DATA / "flat4-nocache.xml"),
                                  "--workers", "0-3", "--rx-cpus", "0"])
    assert r.exit_code == 0
    assert "reports no cache groups" in r.output
    head = r.output.splitlines()[0].split()
    assert head == ["policy", "exact", "smt", "l3", "node", "far", "never",
                    "cycles", "on", "rx", "cpu"]
    r = CliRunner().invoke(main, ["outcomes", "--topology",
                                  str(DATA / "flat4-nocache.xml"),
                                  "--workers", "0-3", "--rx-cpus", "0",
                                  "--json"])
    doc = json.loads(r.output)
    assert doc["cache_info"] is False
    hash_row = doc["policies"][0]
    assert hash_row["classes"]["node"]["workers"] == 3
    assert hash_row["classes"]["far"]["workers"] == 0
