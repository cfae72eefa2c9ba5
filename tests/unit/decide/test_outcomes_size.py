"""Outcomes on a large tree end fast and say what the pair-by-pair reading
says: distance.classify_row gives every CPU the class classify gives the pair,
on every tree the tests hold, and rxl outcomes on a 1024-CPU tree (the
kernel's CPU_MAXSIZE) ends well inside 10 s instead of a pair-by-pair search
of the groups (more than 30 s before)."""

import time
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner

from rxl.cli.main import main
from rxl.decide import distance, outcomes, topology

DATA = Path(__file__).resolve().parents[2] / "data" / "topology"
TREES = ["ryzen-5950x", "xeon-e5-2470v2-2s", "qemu-2s", "2x4x2", "2x2x1", "1x3x2"] + sorted(
    p.name for p in DATA.glob("*.xml")
    if p.name.startswith(("2pkg", "qemu", "flat4")))


@pytest.mark.parametrize("name", TREES)
def test_the_row_is_the_pairs_class(name):
    t = topology.load(name if "." not in name else str(DATA / name))
    doms = distance.domains(t)
    for r in t.cpus:
        row = distance.classify_row(t, r, doms)
        assert sorted(row) == list(t.cpus)
        assert row == {c: distance.classify(t, r, c) for c in t.cpus}


def test_outcome_shares_are_the_pairs_shares():
    t = topology.load("2x4x2")
    workers = [0, 1, 5, 9, 9, 14]
    rx = {0: 3, 4: 1, 9: 2, 15: 5}
    for policy in outcomes.POLICIES:
        o = outcomes.outcome(t, workers, rx, policy)
        assert sum((o.share(i) for i in range(len(workers))), Fraction(0)) == 1
    o = outcomes.outcome(t, workers, rx, "hash")
    # hash: every worker gets 1/6 of each receiving CPU's share, by its pair's class
    for i, w in enumerate(workers):
        want = dict.fromkeys(distance.DISTANCES, Fraction(0))
        for r, c in rx.items():
            want[distance.classify(t, r, w)] += Fraction(c, 11 * 6)
        assert o.per_worker[i] == want
    o = outcomes.outcome(t, workers, rx, "exact")
    assert o.per_worker[3]["exact"] == o.per_worker[4]["exact"] == Fraction(2, 11 * 2)
    assert o.per_worker[0]["exact"] == Fraction(3, 11)


def test_outcomes_on_1024_cpus_end_fast():
    t0 = time.process_time()
    r = CliRunner().invoke(main, ["outcomes", "--topology", "4x128x2",
                                  "--workers", "0-1023:4", "--rx-cpus", "0-1023"])
    took = time.process_time() - t0
    assert r.exit_code == 0, r.output
    assert took < 10.0, took
    assert "hash" in r.output and "deal" in r.output


def test_outcomes_of_more_workers_than_an_lbgroup_holds_is_refused():
    """1024 workers ran, and the deal row was the hash row (no map is dealt
    over 256 members) without a word; rxl deal refuses them."""
    r = CliRunner().invoke(main, ["outcomes", "--topology", "64x8x2",
                                  "--workers", "0-256", "--rx-cpus", "0"])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr == ("Error: Invalid value for '--workers': 257 workers: FreeBSD caps an "
                        "SO_REUSEPORT_LB group at 256 (INPCBLBGROUP_SIZMAX)\n")


@pytest.mark.parametrize("impl", ["c", "model"])
def test_spread_of_50_devices_of_4096_queues_ends_fast(impl):
    """Each queue's L3 group was a walk of the whole tree (33 s for 10
    devices); the model's thread rank a scan of every CPU per CPU. CPU time,
    not wall clock: the bound is on the work, and a loaded host is slower."""
    t0 = time.process_time()
    r = CliRunner().invoke(main, ["spread", "--topology", "4x128x2", "--intr-cpus", "0-1023",
                                  "--queues", ",".join(["4096"] * 50), "--impl", impl,
                                  "--json"])
    took = time.process_time() - t0
    assert r.exit_code == 0, r.output
    assert took < 10.0, took
    import json
    doc = json.loads(r.output)
    assert len(doc["devices"]) == 50
    assert [len(d["queues"]) for d in doc["devices"]] == [4096] * 50
    # 4 L3 groups of 128 cores: the first four queues take one CPU of each
    assert [q["l3"] for q in doc["devices"][0]["queues"][:4]] == [0, 1, 2, 3]
