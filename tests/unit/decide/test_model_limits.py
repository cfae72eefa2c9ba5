"""rxl.decide.model's limits and shapes against the C (sys/netinet/in_pcblb_deal.h)
and the seed (a dealt map is immutable: a new one is built and swapped in)."""

import dataclasses
import re
from pathlib import Path

import pytest

from rxl.decide import model, topology

ROOT = Path(__file__).resolve().parents[3]


def test_max_members_is_the_cs_and_fits_16_bit_offsets():
    header = (ROOT / "sys/netinet/in_pcblb_deal.h").read_text()
    (c_max,) = re.findall(r"#define\s+LBDEAL_MAXMEMBERS\s+(\d+)", header)
    assert model.MAX_MEMBERS == int(c_max)
    assert model.SLOTS_PER_MEMBER * model.MAX_MEMBERS < 1 << 16 <= \
        model.SLOTS_PER_MEMBER * (model.MAX_MEMBERS + 1)
    topo = topology.load("qemu-2s")
    with pytest.raises(ValueError, match=f"^a group holds 1 to {model.MAX_MEMBERS} members, "
                                         f"not {model.MAX_MEMBERS + 1}$"):
        model.deal(topo, [model.Tag()] * (model.MAX_MEMBERS + 1), {})


def test_a_dealt_map_and_a_tag_are_immutable():
    d = model.deal(topology.load("qemu-2s"), [model.Tag(0), model.Tag(4)], {0: 1, 4: 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.nslots = 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.Tag(0).cpu = 1


def test_a_group_of_no_members_is_refused():
    with pytest.raises(ValueError, match=f"^a group holds 1 to {model.MAX_MEMBERS} members, "
                                         "not 0$"):
        model.deal(topology.load("qemu-2s"), [], {})


def test_select_reads_a_32_bit_hash():
    """The hash is the kernel's 32-bit tuple hash: bits above it are not part of it,
    in the model as in the C (rxl_select takes a uint32_t)."""
    from rxl.decide import core
    topo = topology.load("qemu-2s")
    tags = [model.Tag(0), model.Tag(4), model.Tag()]
    d = model.deal(topo, tags, {0: 1, 4: 1})
    cd = core.deal_raw(core.CTopology(topo), tags, {0: 1, 4: 1})
    for h in (0x12345678, 0xFFFFFFFF, 7):
        for cpu in (0, 4, 5):                   # 5 supplies no slots: the hash alone
            want = model.select(d, 3, cpu, h)
            assert model.select(d, 3, cpu, h + (1 << 32)) == want
            assert model.select(d, 3, cpu, h | (0xAB << 40)) == want
            assert core.select(cd, 3, cpu, h) == want
        assert model.select(None, 3, 0, h + (5 << 32)) == (h % 3, False)


def test_windows_need_cpus_and_a_window():
    for ncpu, window in ((0, 10), (4, 0), (-1, 10), (4, -10)):
        with pytest.raises(ValueError, match="^ncpu and window must be positive$"):
            model.Windows(ncpu, window, 0)
    assert model.Windows(1, 1, 0).counts() == {}
