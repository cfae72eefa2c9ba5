"""The seed's own numbers (seed 000), from both the C cores and the model.

Every test runs twice, once per implementation: the kernel's C built in
userspace (``c``) and the reference model (``model``).
"""

import pytest

from rxl.decide import core, model, outcomes, topology
from rxl.decide.model import Tag

IMPLS = {"c": core, "model": model}


@pytest.fixture(params=sorted(IMPLS))
def impl(request):
    return IMPLS[request.param]


def ranges_of(d):
    return {c: (off, cnt) for c, (off, cnt) in d.ranges.items()}


def runs(slots):
    """[0]*16 + [1]*16 -> [(0, 16), (1, 16)]"""
    out = []
    for m in slots:
        if out and out[-1][0] == m:
            out[-1] = (m, out[-1][1] + 1)
        else:
            out.append((m, 1))
    return out


# "What one group holds": members A=0, B=1, C=2, D=9, E untagged; counts
# 100:100:50 summed over both windows; T = 16 x 5 = 80; supply 32/32/16.
# CPU 9 must sit in another L3 than CPU 2: 2x4x2 has L3 groups 0-7, 8-15.
SEED_TAGS = [Tag(0), Tag(1), Tag(2), Tag(9), Tag()]
SEED_COUNTS = {0: 60 + 40, 2: 60 + 40, 4: 30 + 20}


def test_eighty_slot_example(impl):
    topo = topology.load("2x4x2")
    assert topo.l3_of(9) is not topo.l3_of(2)
    d = impl.deal(topo, SEED_TAGS, SEED_COUNTS)
    assert d.total_slots == 80
    assert ranges_of(d) == {0: (0, 32), 2: (32, 32), 4: (64, 16)}
    assert runs(d.slots_of(0)) == [(0, 16), (1, 16)]    # A exact, B sibling
    assert runs(d.slots_of(2)) == [(2, 16), (3, 16)]    # C exact, D other L3
    assert runs(d.slots_of(4)) == [(4, 16)]             # E untagged
    rings = model.ring_counts(topo, SEED_TAGS, d)
    assert [r["exact"] for r in rings] == [16, 0, 16, 0, 0]
    assert rings[1]["smt"] == 16
    assert rings[3]["far"] == 16
    assert rings[4]["any"] == 16


def test_eighty_slot_lookups(impl):
    """cpu0 -> A,B; cpu2 -> C,D; cpu4 -> E; CPUs 1, 3, 5-9: hash over all."""
    topo = topology.load("2x4x2")
    raw = core.deal_raw(core.CTopology(topo), SEED_TAGS, SEED_COUNTS) \
        if impl is core else model.deal(topo, SEED_TAGS, SEED_COUNTS)
    for h in (0, 1, 2**31 - 1, 2**31, 2**32 - 1, 0x9E3779B9):
        m, steered = impl.select(raw, 5, 0, h)
        assert steered and m == (0 if h < 2**31 else 1)
        m, steered = impl.select(raw, 5, 2, h)
        assert steered and m == (2 if h < 2**31 else 3)
        assert impl.select(raw, 5, 4, h) == (4, True)
        for cpu in (1, 3, 5, 6, 7, 8, 9):
            assert impl.select(raw, 5, cpu, h) == (h % 5, False)


def test_spread_5950x(impl):
    """Interrupt set {0, 2, ..., 30}: order 0, 16, 2, 18, 4, 20, 6, 22."""
    topo = topology.load("ryzen-5950x")
    order = impl.spread_order(topo, list(range(0, 32, 2)))
    assert order[:8] == [0, 16, 2, 18, 4, 20, 6, 22]
    assert sorted(order) == list(range(0, 32, 2))


def test_spread_single_l3_is_numeric(impl):
    topo = topology.load("1x8x2")
    assert impl.spread_order(topo, [14, 2, 0, 6]) == [0, 2, 6, 14]


def test_spread_stays_in_local_domain(impl):
    """Two sockets, NIC local to socket 1 (_PXM): ACPI gives it socket 1's
    CPUs alone; without _PXM socket 0, CPU 0's, comes first."""
    topo = topology.load("xeon-e5-2470v2-2s")
    assert impl.spread_order(topo, list(range(20, 40, 2))) == \
        list(range(20, 40, 2))
    order = impl.spread_order(topo, list(range(0, 40, 2)))
    assert order[:10] == list(range(0, 20, 2))
    assert order[10:] == list(range(20, 40, 2))


def test_spread_guest_two_queues(impl):
    """The own guest: 2 sockets x 2 cores x 2 threads, one L3 and NUMA
    node per socket, intr set {0,2,4,6}, NIC domain unknown: core_spread=1
    stays on the socket of CPU 0 (seed 000: "never crosses to the other
    while local CPUs remain")."""
    topo = topology.load("qemu-2s")
    assert impl.spread_order(topo, [0, 2, 4, 6])[:2] == [0, 2]


# "Thirty-two workers, four ways" on the Ryzen 9 5950X.
CCD0_QUEUES = list(range(0, 16, 2))
SPREAD_QUEUES = [0, 16, 2, 18, 4, 20, 6, 22]


def classes(impl, rx, policy):
    topo = topology.load("ryzen-5950x")
    o = outcomes.outcome(topo, list(range(32)), {c: 1 for c in rx}, policy,
                         impl.deal)
    return {c: v["workers"] for c, v in o.by_class().items() if v["workers"]}


def test_four_ways_hash(impl):
    assert classes(impl, CCD0_QUEUES, "hash") == {"l3": 16, "far": 16}


def test_four_ways_exact(impl):
    assert classes(impl, CCD0_QUEUES, "exact") == {"exact": 8, "never": 24}


def test_four_ways_deal_on_ccd0(impl):
    assert classes(impl, CCD0_QUEUES, "deal") == \
        {"exact": 8, "smt": 8, "far": 16}


def test_four_ways_deal_and_spread(impl):
    assert classes(impl, SPREAD_QUEUES, "deal") == \
        {"exact": 8, "smt": 8, "l3": 16}


def test_cost_ladder_expectations(impl):
    """win = (cross-CCD share under the hash) x 19%: half the connections
    cross under the hash, none with deal + spread."""
    topo = topology.load("ryzen-5950x")
    w = list(range(32))
    rx = {c: 1 for c in SPREAD_QUEUES}
    h = outcomes.outcome(topo, w, rx, "hash", impl.deal)
    d = outcomes.outcome(topo, w, rx, "deal", impl.deal)
    assert h.cycles() == pytest.approx(1 + 0.5 * 0.19)
    assert d.cycles() == pytest.approx(1.0)


def test_each_receive_cpu_supplies_64_of_512(impl):
    """Spread + deal: 16 to itself, 16 to its sibling, 32 to the first two
    same-L3 workers still owed ("core 4: 8 from 0, 9 from 0")."""
    topo = topology.load("ryzen-5950x")
    tags = [Tag(c) for c in range(32)]
    d = impl.deal(topo, tags, {c: 1 for c in SPREAD_QUEUES})
    assert d.total_slots == 512
    assert {c: cnt for c, (_, cnt) in d.ranges.items()} == \
        {c: 64 for c in SPREAD_QUEUES}
    for i, rx in enumerate(sorted(SPREAD_QUEUES)):
        base = 0 if rx < 16 else 16
        k = (rx - base) // 2                     # k-th queue of its CCD
        extra = base + 8 + 2 * k                 # first two still owed
        assert runs(d.slots_of(rx)) == [(rx, 16), (rx + 1, 16),
                                        (extra, 16), (extra + 1, 16)]


def test_one_queue_thirty_two_workers(impl):
    """All thirty-two are dealt from that CPU: the hash's distribution."""
    topo = topology.load("ryzen-5950x")
    d = impl.deal(topo, [Tag(c) for c in range(32)], {0: 12345})
    assert d.ranges == {0: (0, 512)}
    assert sorted(runs(d.slots_of(0))) == [(m, 16) for m in range(32)]
    o = outcomes.outcome(topo, list(range(32)), {0: 1}, "deal", impl.deal)
    assert all(o.share(i) == o.share(0) for i in range(32))


def test_duplicates_covered(impl):
    """Two members on one CPU: both filled from it when its supply covers
    them."""
    topo = topology.load("2x4x2")
    d = impl.deal(topo, [Tag(0), Tag(0), Tag(2), Tag()], {0: 1, 2: 1})
    assert runs(d.slots_of(0)) == [(0, 16), (1, 16)]
    assert runs(d.slots_of(2)) == [(2, 16), (3, 16)]


def test_duplicates_short(impl):
    """Otherwise the later one takes its quota from the next ring."""
    topo = topology.load("2x4x2")
    tags = [Tag(0), Tag(0), Tag(1), Tag(2)]
    d = impl.deal(topo, tags, {0: 1, 2: 3})
    assert d.ranges == {0: (0, 16), 2: (16, 48)}
    assert runs(d.slots_of(0)) == [(0, 16)]
    # Ring 0 of CPU 2 pays member 3; its L3 ring pays members 1 and 2.
    assert runs(d.slots_of(2)) == [(3, 16), (1, 16), (2, 16)]
    rings = model.ring_counts(topo, tags, d)
    assert rings[1] == {"exact": 0, "smt": 0, "l3": 16, "node": 0, "far": 0,
                        "remote": 0, "any": 0}


def test_trickle_cpu(impl):
    """A trickle CPU supplies a trickle; its worker gets the rest elsewhere.

    1040 handshakes over T = 48: CPU 2's share is 48 x 40 / 1040 = 1.85
    slots, rounded up to 2 (its remainder beats CPU 0's 0.15)."""
    topo = topology.load("2x4x2")
    tags = [Tag(0), Tag(2), Tag(4)]
    d = impl.deal(topo, tags, {0: 1000, 2: 40})
    assert d.ranges == {0: (0, 46), 2: (46, 2)}
    assert d.slots_of(2) == (1, 1)
    assert runs(d.slots_of(0)) == [(0, 16), (1, 14), (2, 16)]


def test_trickle_under_half_a_slot(impl):
    """The seed's trickle assumes its cumulative floor: 1000:1 over T = 48
    cuts at 47, so CPU 2 supplies 1 slot (kept below as the floor model).
    By largest remainder CPU 2's 0.05 of a slot rounds to nothing and CPU
    0's 47.95 up to 48: CPU 2 is a CPU without slots and hashes."""
    topo = topology.load("2x4x2")
    tags = [Tag(0), Tag(2), Tag(4)]
    d = impl.deal(topo, tags, {0: 1000, 2: 1})
    assert d.ranges == {0: (0, 48)}
    assert runs(d.slots_of(0)) == [(0, 16), (1, 16), (2, 16)]
    floor = model.deal(topo, tags, {0: 1000, 2: 1}, rounding="floor")
    assert floor.ranges == {0: (0, 47), 2: (47, 1)}
    assert floor.slots_of(2) == (1,)
    assert runs(floor.slots_of(0)) == [(0, 16), (1, 15), (2, 16)]


@pytest.mark.parametrize("tags,counts,ranges", [
    (SEED_TAGS, SEED_COUNTS, {0: (0, 32), 2: (32, 32), 4: (64, 16)}),
    (SEED_TAGS, {}, {0: (0, 20), 1: (20, 20), 2: (40, 20), 9: (60, 20)}),
    ([Tag(0), Tag(0), Tag(1), Tag(2)], {0: 1, 2: 3},
     {0: (0, 16), 2: (16, 48)}),
])
def test_seed_shares_are_whole_under_both_roundings(tags, counts, ranges):
    """The seed's "rounded cumulatively" tables (80 slots 32/32/16, stand-ins
    20 each, 16/48) have whole shares, so the floor and largest remainder
    give the same map."""
    topo = topology.load("2x4x2")
    lr = model.deal(topo, tags, counts)
    assert lr == model.deal(topo, tags, counts, rounding="floor")
    assert lr == core.deal(topo, tags, counts)
    assert lr.ranges == ranges


def test_no_tagged_member_builds_no_map(impl):
    topo = topology.load("2x4x2")
    assert impl.deal(topo, [Tag(), Tag()], {0: 5}) is None


def test_learned_tags_without_counts_build_no_map(impl):
    """NIC without hashes, workers pinned and captured: nothing is learned,
    no map, the hash distributes."""
    topo = topology.load("2x4x2")
    assert impl.deal(topo, [Tag(0, True), Tag(1, True)], {}) is None


def test_explicit_tags_stand_in(impl):
    """Nothing counted: each explicitly tagged CPU counts one."""
    topo = topology.load("2x4x2")
    d = impl.deal(topo, SEED_TAGS, {})
    assert {c: cnt for c, (_, cnt) in d.ranges.items()} == \
        {0: 20, 1: 20, 2: 20, 9: 20}
    # Each pays its own member 16, and the untagged E 4 in the last ring.
    for cpu, m in ((0, 0), (1, 1), (2, 2), (9, 3)):
        assert runs(d.slots_of(cpu)) == [(m, 16), (4, 4)]


def test_mix_spreads_a_loopback_tuple_hash():
    """The lbgroup tuple hash of 127.0.0.1 clients varies only in its low 16
    bits (the ports), so unmixed every connection would hit the first slot
    of a CPU's range; mixed, 64 client ports reach all 4 members."""
    faddr = 0x7F000001
    hashes = [faddr ^ (faddr >> 16) ^ ((80 ^ port) & 0xFFFF)
              for port in range(50000, 50064)]
    topo = topology.load("2x4x2")
    d = model.deal(topo, [Tag(0), Tag(1), Tag(2), Tag(3)], {0: 1})
    unmixed = {model.select(d, 4, 0, h)[0] for h in hashes}
    mixed = {model.select(d, 4, 0, model.mix(h))[0] for h in hashes}
    assert len(unmixed) == 1
    assert mixed == {0, 1, 2, 3}
    assert [core.mix(h) for h in hashes] == [model.mix(h) for h in hashes]


def test_kernel_without_smp_deals_exact_then_everyone():
    """A kernel without SMP passes no cpu_group tree (di_root NULL): the
    rings degrade to exact, then everyone in member order (seed 000, "Cases
    the rules decide": single-L3 machine, or a kernel without SMP)."""
    ffi = core._ffi
    tags = ffi.new("uint16_t[]", [0, core.TAG_NONE, 1])
    counts = ffi.new("uint32_t[]", [1, 0])
    cpuent = ffi.new("uint32_t[]", 2)
    slots = ffi.new("uint16_t[]", 48)
    nslots = ffi.new("unsigned *")
    assert core.lib().rxl_deal(ffi.NULL, 3, tags, counts, 2, cpuent, slots,
                               nslots) == 1
    assert (cpuent[0], cpuent[1], nslots[0]) == (48, 0, 48)
    assert list(slots) == [0] * 16 + [1] * 16 + [2] * 16
