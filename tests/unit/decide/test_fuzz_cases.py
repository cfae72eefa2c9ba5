"""Fuzz cases replayed through the cffi binding (tests/fuzz/cases/*.json).

Each file is one ``FUZZ_CASE`` line of a libFuzzer target (tests/fuzz/),
as ``python -m rxl.decide.fuzz case TARGET INPUT`` prints it: a finding becomes a
file here, and a few seed inputs of the largest shapes (1024 CPUs, 2206
members, deep irregular trees) keep the replay honest.  The C must agree
with the model wherever the case is in the model's domain (every CPU
named is in the tree), and the deal's contract must hold everywhere.
"""

import json
from pathlib import Path

import pytest

from rxl.decide import core, model
from rxl.decide.model import SLOTS_PER_MEMBER
from rxl.decide.topology import Group, Topology

CASES = sorted((Path(__file__).resolve().parents[3] / "tests" / "fuzz" / "cases").glob("*.json"))
TAG_NONE, TAG_HASH, TAG_LEARNED = 0xFFFF, 0xFFFE, 0x8000


def load(path):
    case = json.loads(path.read_text())
    groups = case["groups"]
    kids = {i: [j for j, g in enumerate(groups) if g["parent"] == i] for i in range(len(groups))}

    def build(i):
        g = groups[i]
        return Group(tuple(sorted(g["cpus"])), g["level"], g["flags"],
                     tuple(build(j) for j in kids[i]))

    return case, Topology(path.stem, build(0))


def tag(t):
    if t >= TAG_HASH:
        return model.Tag()      # NONE and HASH deal alike: untagged
    return model.Tag(t & 0x7FFF, bool(t & TAG_LEARNED))


def test_cases_exist():
    kinds = {p.name.split("-")[0] for p in CASES}
    assert {"deal", "spread"} <= kinds


@pytest.mark.parametrize("path", [p for p in CASES if p.name.startswith("deal-")],
                         ids=lambda p: p.stem)
def test_deal_case(path):
    case, topo = load(path)
    ncpu = case["ncpu"]
    tags = [tag(t) for t in case["tags"]]
    counts = {c: v for c, v in case["counts"]}
    raw = core.deal_raw(core.CTopology(topo), tags, counts, ncpu=ncpu)
    n = len(tags)
    # Built exactly when a member is tagged below ncpu and something is
    # counted, or an explicit tag stands in (in_pcblb_deal.h).
    tagged = [t for t in tags if t.cpu is not None and t.cpu < ncpu]
    eff = {c: v for c, v in counts.items() if v} or \
        {t.cpu: 1 for t in tagged if not t.learned}
    assert (raw is not None) == bool(tagged and eff)
    present = set(topo.cpus)
    if ncpu == topo.ncpu and set(counts) <= present and \
            all(t.cpu is None or t.cpu in present for t in tags):
        d = raw.to_model() if raw is not None else None
        assert d == model.deal(topo, tags, counts)
    if raw is None:
        return
    d = raw.to_model()
    total, T = sum(eff.values()), SLOTS_PER_MEMBER * n
    assert d.total_slots == T
    assert sorted(d.slots) == sorted(list(range(n)) * SLOTS_PER_MEMBER)
    off = 0
    for cpu in sorted(d.ranges):
        o, cnt = d.ranges[cpu]
        assert o == off and T * eff[cpu] // total <= cnt <= -(-T * eff[cpu] // total)
        off += cnt
    assert off == T
    for cpu in range(ncpu):
        for h in (0, 1, 0x9E3779B9, 2**32 - 1):
            idx, steered = core.select(raw, n, cpu, h)
            assert 0 <= idx < n and steered == (cpu in d.ranges)


@pytest.mark.parametrize("path", [p for p in CASES if p.name.startswith("spread-")],
                         ids=lambda p: p.stem)
def test_spread_case(path):
    case, topo = load(path)
    eligible = case["eligible"]
    present = set(topo.cpus)
    if not set(eligible) <= present:
        pytest.skip("names CPUs outside the tree: the fuzz target checks it")
    # Cases written before the 15 series may carry a local set and mode 2,
    # which the order no longer has: the set is the interrupt set alone.
    mode = min(case.get("mode", 1), model.SPREAD_ON)
    got = core.spread_order(topo, eligible, mode)
    assert got == model.spread_order(topo, eligible, mode)
    assert sorted(got) == sorted(eligible)
