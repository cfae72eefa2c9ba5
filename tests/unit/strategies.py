"""Hypothesis strategies: cpu_group trees, member tags, counts."""

from hypothesis import strategies as st

from rxl.decide import model, topology
from rxl.decide import cpugroup
from rxl.decide.cpugroup import Group, Topology


@st.composite
def trees(draw, max_cpus=24):
    """Random valid cpu_group trees: regular ones and irregular ones whose
    depth varies between branches and whose CPU ids are permuted (groups
    need not be contiguous ranges)."""
    if draw(st.booleans()):
        l3 = draw(st.integers(1, 4))
        cores = draw(st.integers(1, 4))
        threads = draw(st.integers(1, 2))
        return topology.regular(f"{l3}x{cores}x{threads}", l3, cores, threads)
    n = draw(st.integers(1, max_cpus))
    ids = draw(st.permutations(range(n)))
    # A few gaps in numbering, as with absent CPUs.
    gap = draw(st.integers(0, 2))
    ids = [i + (gap if i >= n // 2 else 0) for i in ids]

    def build(cpus, depth):
        cpus = sorted(cpus)
        level = [cpugroup.CG_SHARE_NONE, cpugroup.CG_SHARE_L3,
                 cpugroup.CG_SHARE_L2, cpugroup.CG_SHARE_L1][min(depth, 3)]
        if len(cpus) < 2 or depth >= 3 or not draw(st.booleans()):
            flags = cpugroup.CG_FLAG_SMT if level <= cpugroup.CG_SHARE_L2 \
                and depth > 0 and draw(st.booleans()) else 0
            return Group(tuple(cpus), level, flags)
        k = draw(st.integers(2, min(4, len(cpus))))
        cuts = sorted(draw(st.lists(st.integers(1, len(cpus) - 1),
                                    min_size=k - 1, max_size=k - 1,
                                    unique=True)))
        parts = [cpus[a:b] for a, b in zip([0] + cuts, cuts + [len(cpus)])]
        return Group(tuple(cpus), level, 0,
                     tuple(build(p, depth + 1) for p in parts))

    return Topology("random", build(ids, 0))


@st.composite
def groups(draw, topo, max_members=20):
    cpus = list(topo.cpus)
    tag = st.one_of(
        st.just(model.Tag()),
        st.builds(model.Tag, st.sampled_from(cpus), st.just(False)),
        st.builds(model.Tag, st.sampled_from(cpus), st.just(True)))
    tags = draw(st.lists(tag, min_size=1, max_size=max_members))
    count = st.one_of(st.integers(0, 1000), st.integers(0, 2**32 - 1))
    counts = draw(st.dictionaries(st.sampled_from(cpus), count, max_size=8))
    return tags, counts
