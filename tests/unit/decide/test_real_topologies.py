"""The decisions on real topologies: packages that report a cache level 1 or
2 (no L3, no NODE) are packages, not one domain; several devices share
iflib's core_offset cursor; --domain is the interrupt set of the NIC's
domain (acpi_get_cpus), and a tree without NODE groups has one domain."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rxl.cli.main import main
from rxl.decide import attach, distance, outcomes, topology

DATA = Path(__file__).resolve().parents[2] / "data" / "topology"
PACKAGES = ["2pkg-nocache.xml", "2pkg-l1.xml", "2pkg-l2.xml"]


def _run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    return r


@pytest.mark.parametrize("name", PACKAGES)
def test_a_cross_package_pair_is_remote_whatever_the_package_cache(name):
    t = topology.load(str(DATA / name))
    assert [distance.classify(t, 0, c) for c in (4, 5, 6, 7)] == ["remote"] * 4
    assert [distance.classify(t, 4, c) for c in (0, 1, 2, 3)] == ["remote"] * 4


def test_within_a_package_the_cache_it_shares_counts():
    def row(name):
        t = topology.load(str(DATA / name))
        return [distance.classify(t, 0, c) for c in (1, 2, 3)]
    assert row("2pkg-nocache.xml") == ["smt", "node", "node"]
    assert row("2pkg-l2.xml") == ["smt", "l3", "l3"]
    assert row("2pkg-l1.xml") == ["smt", "smt", "smt"]


@pytest.mark.parametrize("name", PACKAGES)
def test_outcomes_cost_the_same_crossing_for_every_package_cache(name):
    t = topology.load(str(DATA / name))
    o = outcomes.outcome(t, list(range(8)), {0: 1, 4: 1}, "hash")
    assert o.cycles() == pytest.approx(1 + 0.5 * 0.19)
    r = _run("outcomes", "--topology", DATA / name, "--workers", "0-7", "--rx-cpus", "0,4",
             "--policy", "hash", "--json")
    doc = json.loads(r.stdout)
    assert doc["policies"][0]["cycles_per_request"] == pytest.approx(1.095)


@pytest.mark.parametrize("name", ["2pkg-l1.xml", "2pkg-l2.xml"])
def test_deal_classes_a_member_on_the_other_package_remote(name):
    r = _run("deal", "--topology", DATA / name, "--members", "4", "--counts", "0:1",
             "--json")
    m = json.loads(r.stdout)["members"][0]
    assert m["rings"]["remote"] == 16 and m["rings"]["node"] == 0


def test_the_ryzen_ccds_stay_far_and_qemu_sockets_remote():
    r = topology.load("ryzen-5950x")
    assert distance.classify(r, 0, 16) == "far"
    q = topology.load("qemu-2s")
    assert distance.classify(q, 0, 4) == "remote"


def test_two_nics_share_the_cursor_of_one_interrupt_set():
    """A 4-core box with two 2-queue NICs: the second starts where the first
    stopped (iflib's cpu_offsets), on CPUs 2 and 3."""
    r = _run("spread", "--topology", "4x1x1", "--intr-cpus", "0-3", "--queues", "2,2",
             "--json")
    devs = json.loads(r.stdout)["devices"]
    assert [[q["cpu"] for q in d["queues"]] for d in devs] == [[0, 1], [2, 3]]
    assert [d["base"] for d in devs] == [0, 2] and all(d["cursor"] for d in devs)
    r = _run("spread", "--topology", "4x1x1", "--intr-cpus", "0-3", "--queues", "3,3")
    assert "dev1 rxq0: cpu 3" in r.stdout and "dev1 rxq2: cpu 1" in r.stdout


def test_a_spread_device_moves_the_cursor_in_its_own_order():
    r = _run("spread", "--topology", "qemu-2s", "--intr-cpus", "0-7", "--queues", "2,2",
             "--json")
    devs = json.loads(r.stdout)["devices"]
    assert devs[0]["order"] == [0, 2, 1, 3, 4, 6, 5, 7]
    assert [[q["cpu"] for q in d["queues"]] for d in devs] == [[0, 2], [1, 3]]


def test_nics_of_two_domains_have_a_cursor_each():
    r = _run("spread", "--topology", "qemu-2s", "--intr-cpus", "0-7", "--queues", "2,2,2",
             "--domain", "0,1,0", "--json")
    devs = json.loads(r.stdout)["devices"]
    assert [[q["cpu"] for q in d["queues"]] for d in devs] == [[0, 2], [4, 6], [1, 3]]


@pytest.mark.parametrize("cpus,offset,base", [
    ([0, 1, 2, 3], 2, 2), ([4, 5, 6, 7], 1, 4), ([4, 5, 6, 7], 9, 4),
    ([4, 6], 5, 6), ([4, 6], 0, 4), ([0, 2, 4, 6], 3, 4),
])
def test_a_core_offset_tunable_is_brought_into_the_set_as_iflib_does(cpus, offset, base):
    """get_ctx_core_offset(): outside [first, last] it is taken modulo the
    span, then moved up to the next CPU of the set."""
    assert attach.tunable_base(cpus, offset) == base


def test_core_offset_per_device_and_unset():
    r = _run("spread", "--topology", "4x1x1", "--intr-cpus", "0-3", "--queues", "1,1,1",
             "--core-offset", "3,-,-", "--json")
    devs = json.loads(r.stdout)["devices"]
    # the tunable does not move the shared cursor
    assert [d["base"] for d in devs] == [3, 0, 1]
    r = _run("spread", "--topology", "4x1x1", "--intr-cpus", "0-3", "--queues", "2",
             "--core-offset", "65535")
    assert r.exit_code == 2 and "'--core-offset'" not in r.stdout
    assert "65535" in r.stderr and "--core-offset" in r.stderr


def test_domain_is_the_nics_interrupt_set_and_a_tree_without_nodes_has_one():
    r = _run("spread", "--topology", "qemu-2s", "--intr-cpus", "0,2,4,6", "--queues", "2",
             "--domain", "1", "--json")
    assert json.loads(r.stdout)["order"] == [4, 6]
    r = _run("spread", "--topology", DATA / "2pkg-nocache.xml", "--intr-cpus", "0-7",
             "--queues", "2", "--domain", "1")
    assert r.exit_code == 2 and "1 NUMA domain" in r.stderr
    r = _run("spread", "--topology", DATA / "2pkg-nocache.xml", "--intr-cpus", "0-7",
             "--queues", "2", "--domain", "0", "--json")
    assert sorted(json.loads(r.stdout)["order"]) == list(range(8))
