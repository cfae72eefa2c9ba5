"""Largest-remainder supply ("Rounding that keeps exact members
whole"): what the rounding guarantees, the C against the model on counts
that need 64-bit remainders, and the guest's worked example."""

from fractions import Fraction
from functools import partial

import pytest
from hypothesis import given, strategies as st

from rxl.decide import core, model, outcomes, topology
from rxl.decide.model import Tag

counts_st = st.dictionaries(st.integers(0, 15),
                            st.one_of(st.integers(0, 50),
                                      st.integers(0, 2**32 - 1)),
                            max_size=16)
slots_st = st.integers(1, 4095).map(lambda n: 16 * n)


@given(slots_st, counts_st)
def test_each_supply_is_its_share_rounded_down_or_up(t, counts):
    got = model.supply(t, counts)
    total = sum(counts.values())
    if total == 0:
        assert got == {}
        return
    assert sum(got.values()) == t
    for cpu, v in counts.items():
        share = Fraction(t * v, total)
        n = got.get(cpu, 0)
        assert share - 1 < n < share + 1


@given(slots_st, counts_st)
def test_the_largest_remainders_are_rounded_up(t, counts):
    """No CPU rounded down has a larger remainder than one rounded up, nor
    an equal remainder and a lower id."""
    total = sum(counts.values())
    got = model.supply(t, counts)
    if total == 0:
        return
    rem = {c: t * v % total for c, v in counts.items() if v > 0}
    up = [c for c in rem if got.get(c, 0) * total > t * counts[c]]
    down = [c for c in rem if c not in up]
    for u in up:
        for d in down:
            assert (rem[u], -u) > (rem[d], -d)


@given(st.integers(1, 10**6), st.integers(1, 10**6), st.integers(1, 64))
def test_two_cpus_round_to_nearest(a, b, members):
    """With two receiving CPUs the remainders add up to one slot, so the
    larger (over half a slot) is rounded up: rounding to nearest, a tie to
    the lower CPU id."""
    t = 16 * members
    got = model.supply(t, {3: a, 7: b})
    share = Fraction(t * a, a + b)
    near = int(share + Fraction(1, 2)) if share % 1 != Fraction(1, 2) \
        else int(share) + 1
    assert got.get(3, 0) == near
    assert got.get(7, 0) == t - near


@given(st.lists(st.integers(0, 2**32 - 1), min_size=16, max_size=16),
       st.integers(1, 40))
def test_c_supply_equals_model_on_large_counts(counts, members):
    """Counts up to 2^32 - 1 on 16 CPUs: the total and the remainders
    exceed 32 bits, which the C keeps in two words."""
    topo = topology.load("2x4x2")
    tags = [Tag(i % 16) for i in range(members)]
    c = dict(enumerate(counts))
    d = core.deal(topo, tags, c)
    assert d == model.deal(topo, tags, c)
    if d is not None:
        assert {k: n for k, (_, n) in d.ranges.items()} == \
            model.supply(16 * members, model.effective_counts(topo, tags, c))


def test_ties_go_to_the_lower_cpu():
    """Three equal counts over 16 slots: 5 each and one left, to CPU 1."""
    assert model.supply(16, {5: 7, 1: 7, 3: 7}) == {1: 6, 3: 5, 5: 5}
    d = core.deal(topology.load("2x4x2"), [Tag(1)], {5: 7, 1: 7, 3: 7})
    assert {c: n for c, (_, n) in d.ranges.items()} == {1: 6, 3: 5, 5: 5}


def test_unknown_rounding_is_refused():
    with pytest.raises(ValueError, match="largest-remainder, floor"):
        model.supply(16, {0: 1}, rounding="nearest")


# The worked example of docs/design.md: learn-spread.rxq on the guest (qemu-2s, rxq
# CPUs 0 and 4 with core_spread=1), one pinned worker on each receiving CPU.
EXAMPLE_RX = {0: 6756, 4: 6793}


@pytest.mark.parametrize("impl", [core, model])
def test_near_equal_receivers_keep_their_own_workers_whole(impl):
    """CPU 0's share is 32 x 6756 / 13549 = 15.96 slots: rounded up to 16,
    so each worker holds all 16 slots of its own CPU's range."""
    topo = topology.load("qemu-2s")
    d = impl.deal(topo, [Tag(0, True), Tag(4, True)], EXAMPLE_RX)
    assert d.ranges == {0: (0, 16), 4: (16, 16)}
    assert d.slots_of(0) == (0,) * 16 and d.slots_of(4) == (1,) * 16


def test_the_floor_cost_one_in_seventeen_of_cpu4():
    """Under the seed's floor CPU 0 supplies 15 and CPU 4 17, one of them to
    CPU 0's worker: co-location 97.1 %, against 100 % now."""
    topo = topology.load("qemu-2s")
    floor = model.deal(topo, [Tag(0, True), Tag(4, True)], EXAMPLE_RX,
                       rounding="floor")
    assert floor.ranges == {0: (0, 15), 4: (15, 17)}
    assert floor.slots_of(4) == (1,) * 16 + (0,)

    def colocated(deal_fn):
        o = outcomes.outcome(topo, [0, 4], EXAMPLE_RX, "deal", deal_fn)
        return o.by_distance()["exact"]

    old = colocated(partial(model.deal, rounding="floor"))
    assert old == Fraction(6756 * 17 + 6793 * 16, 17 * 13549)
    assert round(float(old) * 100, 1) == 97.1
    assert colocated(model.deal) == 1
    assert colocated(core.deal) == 1


@pytest.mark.parametrize("members", [1, 2, 63, 64, 65, 127])
@pytest.mark.parametrize("pattern", ["equal", "steps", "primes"])
def test_c_picks_the_same_cpus_as_the_model_among_many_remainders(members, pattern):
    """128 receiving CPUs (2x32x2), so the C's pick of the CPUs owed a slot
    (lbdeal_top(): the largest remainder keys, found with a min-heap, not a
    sort) chooses among up to 128 remainders: one slot left (1 member's 16
    over 128 CPUs ... ), nearly all left, and ties, which go to the lower
    CPU id; ``equal`` makes every remainder tie."""
    topo = topology.load("2x32x2")
    counts = {c: {"equal": 1000, "steps": 1000 + c % 7, "primes": 7919 * (c % 13) + 1}
              [pattern] for c in range(128)}
    tags = [Tag(i % 128) for i in range(members)]
    d = core.deal(topo, tags, counts)
    assert d == model.deal(topo, tags, counts)
    got = {c: n for c, (_, n) in d.ranges.items()}
    assert got == model.supply(16 * members, counts)
    if pattern == "equal":  # 16 x members slots over 128 equal CPUs: the lowest ids
        assert sorted(got) == list(range(min(128, 16 * members)))
