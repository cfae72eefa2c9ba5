"""Commit 1's spread order (``iflib_spread_order()``), C and model.

Every expected order below follows from the rules in
sys/net/iflib_spread.c: one NUMA domain after another (the CPUs in no
NODE group first), within a domain every core's first thread before any
second thread, and within each such round the L3 groups take turns.  The
SMT rule holds without L3 groups too.  Trees are written out by hand: SMT
siblings numbered adjacent ((0,1) (2,3) ...) and split in halves ((0,4)
(1,5) ...), with and without NUMA (NODE) groups.
"""

import pytest
from hypothesis import given, strategies as st

from rxl.decide import core, cpugroup as T, model, topology
from rxl.decide.cpugroup import Group, Topology

from strategies import trees

IMPLS = [core, model]
OFF, ON = model.SPREAD_MODES


def smt(*cpus):
    """A core: an L2 group of SMT siblings, as x86 FreeBSD reports it."""
    return Group(tuple(sorted(cpus)), T.CG_SHARE_L2, T.CG_FLAG_SMT)


def l3(*cores, flags=0):
    cpus = tuple(sorted(c for g in cores for c in g.cpus))
    return Group(cpus, T.CG_SHARE_L3, flags, tuple(cores))


def pkg(*kids, flags=0):
    cpus = tuple(sorted(c for g in kids for c in g.cpus))
    return Group(cpus, T.CG_SHARE_NONE, flags, tuple(kids))


def topo(root, name="t"):
    return Topology(name, root)


# One L3, 4 cores x 2 threads.
ADJACENT = topo(l3(smt(0, 1), smt(2, 3), smt(4, 5), smt(6, 7)))
SPLIT = topo(l3(smt(0, 4), smt(1, 5), smt(2, 6), smt(3, 7)))
# Two L3 groups (one package, no NUMA), split numbering.
SPLIT_2L3 = topo(pkg(l3(smt(0, 4), smt(1, 5)), l3(smt(2, 6), smt(3, 7))))
# Two sockets, each a NUMA node of two L3 groups of two SMT cores.
NUMA_2X2 = topo(pkg(
    pkg(l3(smt(0, 1), smt(2, 3)), l3(smt(4, 5), smt(6, 7)),
        flags=T.CG_FLAG_NODE),
    pkg(l3(smt(8, 9), smt(10, 11)), l3(smt(12, 13), smt(14, 15)),
        flags=T.CG_FLAG_NODE)))
# The same without NODE flags: one domain, four L3 groups.
PKG_2X2 = topo(pkg(
    pkg(l3(smt(0, 1), smt(2, 3)), l3(smt(4, 5), smt(6, 7))),
    pkg(l3(smt(8, 9), smt(10, 11)), l3(smt(12, 13), smt(14, 15)))))
# No cache information: two packages of SMT cores, cache-level 0 throughout.
NO_CACHE = topo(pkg(
    pkg(Group((0, 1), 0, T.CG_FLAG_SMT), Group((2, 3), 0, T.CG_FLAG_SMT)),
    pkg(Group((4, 5), 0, T.CG_FLAG_SMT), Group((6, 7), 0, T.CG_FLAG_SMT))))


def order(impl, t, eligible=None, mode=ON):
    return impl.spread_order(t, list(t.cpus) if eligible is None
                             else eligible, mode)


@pytest.mark.parametrize("impl", IMPLS)
def test_smt_first_threads_before_second(impl):
    """Fault 1: siblings must not take consecutive queues."""
    assert order(impl, ADJACENT) == [0, 2, 4, 6, 1, 3, 5, 7]
    assert order(impl, ADJACENT)[:4] != [0, 1, 2, 3]
    assert order(impl, SPLIT) == [0, 1, 2, 3, 4, 5, 6, 7]
    # Two L3s: first threads 0-3 alternate between the L3s, then 4-7.
    assert order(impl, SPLIT_2L3) == [0, 2, 1, 3, 4, 6, 5, 7]
    # The project's qemu-2s tree: socket 0's domain, then socket 1's.
    assert order(impl, topology.load("qemu-2s")) == [0, 2, 1, 3, 4, 6, 5, 7]
    # A core with one eligible CPU left still counts as a first thread.
    assert order(impl, ADJACENT, [1, 2, 3, 5]) == [1, 2, 5, 3]


@pytest.mark.parametrize("impl", IMPLS)
def test_domains_one_after_another(impl):
    """Fault 2: a NIC without _PXM may interrupt every CPU: the domain of
    CPU 0 fills first, its L3 groups taking turns; the other socket comes
    last."""
    assert order(impl, NUMA_2X2) == [0, 4, 2, 6, 1, 5, 3, 7,
                                     8, 12, 10, 14, 9, 13, 11, 15]
    # The interrupt set without hyperthreads; socket 1's lowest CPU first.
    assert order(impl, NUMA_2X2, [2, 6, 8, 10, 12, 14]) == \
        [2, 6, 8, 12, 10, 14]
    assert order(impl, NUMA_2X2, [9, 10, 2]) == [2, 9, 10]
    # One package with two L3 groups (Ryzen): both are local.
    assert order(impl, topology.load("ryzen-5950x"), list(range(0, 32, 2)))[:4] \
        == [0, 16, 2, 18]
    # qemu-2s: one L3 per socket: nothing to interleave within a domain.
    assert order(impl, topology.load("qemu-2s"), [0, 2, 4, 6]) == [0, 2, 4, 6]


@pytest.mark.parametrize("impl", IMPLS)
def test_no_numa_groups_is_one_domain(impl):
    """Packages without NODE flags do not stand in for domains: all four
    L3 groups take turns."""
    assert order(impl, PKG_2X2) == [0, 4, 8, 12, 2, 6, 10, 14,
                                    1, 5, 9, 13, 3, 7, 11, 15]


@pytest.mark.parametrize("impl", IMPLS)
def test_pxm_narrows_the_set_to_the_domain(impl):
    """ACPI gives a device with _PXM only its domain's CPUs (INTR_CPUS):
    only they are spread."""
    node1 = list(range(8, 16))
    assert order(impl, NUMA_2X2, node1) == [8, 12, 10, 14, 9, 13, 11, 15]


@pytest.mark.parametrize("impl", IMPLS)
def test_no_cache_groups_still_thread_order(impl):
    """Fault 3: no L3 group anywhere: the SMT rule still holds (it needs
    only the THREAD groups); nothing to take turns."""
    assert order(impl, NO_CACHE) == [0, 2, 4, 6, 1, 3, 5, 7]
    assert order(impl, NO_CACHE, [6, 1, 4]) == [1, 4, 6]


def test_bad_mode():
    with pytest.raises(ValueError, match="core_spread 2"):
        model.spread_order(ADJACENT, [0], 2)
    with pytest.raises(core.CoreError, match="mode 2"):
        core.spread_order(ADJACENT, [0], 2)


def numeric_walk(eligible):
    """iflib's cpuid_advance() from the lowest CPU, queue by queue, as
    FreeBSD 15 sys/net/iflib.c does it without core_spread: step to the
    next id, wrap from the highest to the lowest, skip CPUs not in the
    set."""
    s = set(eligible)
    first, last = min(s), max(s)
    out, cpu = [], first
    for _ in range(len(s)):
        out.append(cpu)
        cpu += 1
        while cpu not in s:
            cpu = first if cpu > last else cpu + 1
    return out


# -- properties -------------------------------------------------------------

@st.composite
def numa_trees(draw):
    """Root -> packages (NODE-flagged or not) -> L3 groups or bare cores
    -> cores of one or two threads, numbered adjacent, split in halves or
    permuted."""
    npkg = draw(st.integers(1, 3))
    nl3 = draw(st.integers(0, 3))          # 0: no cache information
    ncores = draw(st.integers(1, 3))
    threads = draw(st.integers(1, 2))
    node = draw(st.booleans())
    n = npkg * max(nl3, 1) * ncores * threads
    scheme = draw(st.sampled_from(["adjacent", "split", "perm"]))
    if scheme == "perm":
        ids = draw(st.permutations(range(n)))
    elif scheme == "split":
        half = n // threads
        ids = [(k // threads) + (k % threads) * half for k in range(n)]
    else:
        ids = list(range(n))
    it = iter(ids)

    def core():
        cpus = tuple(sorted(next(it) for _ in range(threads)))
        if threads == 1:
            return Group(cpus, T.CG_SHARE_NONE if nl3 == 0 else T.CG_SHARE_L2)
        return Group(cpus, T.CG_SHARE_NONE if nl3 == 0 else T.CG_SHARE_L2,
                     T.CG_FLAG_SMT)

    def package():
        if nl3 == 0:
            return pkg(*(core() for _ in range(ncores)),
                       flags=T.CG_FLAG_NODE if node else 0)
        return pkg(*(l3(*(core() for _ in range(ncores)))
                     for _ in range(nl3)),
                   flags=T.CG_FLAG_NODE if node else 0)

    pkgs = [package() for _ in range(npkg)]
    root = pkgs[0] if npkg == 1 else pkg(*pkgs)
    return Topology("numa", root)


@st.composite
def spreads(draw):
    t = draw(st.one_of(trees(max_cpus=40), numa_trees()))
    cpus = list(t.cpus)
    eligible = draw(st.lists(st.sampled_from(cpus), unique=True))
    mode = draw(st.sampled_from(model.SPREAD_MODES))
    return t, eligible, mode


def _domain_key(t, c):
    d = next((g for g in reversed(t.enclosing(c)) if g.flags & T.CG_FLAG_NODE),
             None)
    return -1 if d is None else min(d.cpus)


def _rank(t, eligible, c):
    core = next((g for g in t.enclosing(c) if g.flags & T.CG_FLAG_THREAD),
                None)
    return 0 if core is None else sum(1 for x in eligible
                                      if x < c and x in core.cpus)


@given(spreads())
def test_spread_c_equals_model(case):
    t, eligible, mode = case
    got = core.spread_order(t, eligible, mode)
    assert got == model.spread_order(t, eligible, mode)
    assert sorted(got) == sorted(eligible)
    if mode == ON:
        # Domains in order of their lowest CPU, ranks rising within one.
        keys = [(_domain_key(t, c), _rank(t, eligible, c)) for c in got]
        assert keys == sorted(keys)


@given(spreads())
def test_spread_off_is_todays_numeric_walk(case):
    t, eligible, _ = case
    got = core.spread_order(t, eligible, OFF)
    assert got == (numeric_walk(eligible) if eligible else [])


@given(numa_trees(), st.data())
def test_spread_smt_and_units(t, data):
    eligible = data.draw(st.lists(st.sampled_from(list(t.cpus)),
                                  unique=True, min_size=1))
    got = core.spread_order(t, eligible, ON)
    # Within a domain, no core's second thread before every core's first,
    # L3 groups or not.
    for d in {_domain_key(t, c) for c in got}:
        seq = [c for c in got if _domain_key(t, c) == d]
        cores = [next((g.cpus for g in t.enclosing(c)
                       if g.flags & T.CG_FLAG_THREAD), (c,)) for c in seq]
        first = [cores.index(k) == i for i, k in enumerate(cores)]
        assert first == sorted(first, reverse=True)
    # The first two queues of a domain with two L3 groups holding first
    # threads land in two L3 groups.
    dom0 = [c for c in got if _domain_key(t, c) == _domain_key(t, got[0])]
    firsts = [c for c in dom0 if _rank(t, eligible, c) == 0]
    if len({id(t.l3_of(c)) for c in firsts if t.l3_of(c) is not None}) > 1 \
            and t.l3_of(firsts[0]) is not None and t.l3_of(firsts[1]) is not None:
        assert t.l3_of(firsts[0]) is not t.l3_of(firsts[1])


@pytest.mark.parametrize("impl", IMPLS)
def test_two_l3_guest_orders(impl):
    """The two-L3 guest (guest-2l3) as it reports itself (rxl run --target
    guest-2l3: -smp 16,sockets=2,dies=2,cores=2,threads=2, two NUMA
    nodes); em0's interrupt set leaves out the second threads."""
    from pathlib import Path
    t = topology.load(str(Path(__file__).resolve().parents[2] / "data" /
                          "topology" / "qemu-2s2l3-numa.xml"))
    intr = list(range(0, 16, 2))
    assert order(impl, t, intr, mode=OFF)[:2] == [0, 2]       # one L3
    assert order(impl, t, intr) == [0, 4, 2, 6, 8, 12, 10, 14]
