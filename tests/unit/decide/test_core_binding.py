"""rxl.decide.core's errors: a compiler that is not there, a topology the C
refuses (lib/userspace/rxlcore.c rxl_topo_new()), a group of no members."""

from types import SimpleNamespace

import pytest

from rxl.decide import core, topology


def test_a_missing_compiler_is_named_with_what_to_set(tmp_path, monkeypatch):
    monkeypatch.delenv("RXL_CORE_CC", raising=False)
    monkeypatch.setenv("CC", "/nonexistent/rxl-cc")
    monkeypatch.setenv("RXL_BUILD_DIR", str(tmp_path))
    with pytest.raises(core.CoreError) as exc:
        core.build(force=True)
    assert str(exc.value) == ("building the C cores: /nonexistent/rxl-cc: No such file or "
                              "directory (/nonexistent/rxl-cc); set CC or RXL_BUILD_DIR")


def test_a_topology_the_c_refuses_is_a_core_error():
    """rxl_topo_new() returns NULL unless the first group is the root (parent -1)."""
    root = topology.load("qemu-2s").root
    bad = SimpleNamespace(name="rootless", bfs=lambda: [(root, 0)])
    with pytest.raises(core.CoreError, match="^the C rejected topology rootless$"):
        core.CTopology(bad)


def test_a_group_of_no_members_is_refused_by_lbdeal():
    ctopo = core.CTopology(topology.load("qemu-2s"))
    with pytest.raises(core.CoreError, match="^lbdeal refused a group of 0 members$"):
        core.deal_raw(ctopo, [], {})


def test_deal_and_select_take_what_the_model_takes():
    """core.deal and core.select refuse what model.deal and model.select do,
    with the same errors, before the C is asked."""
    from rxl.decide import model
    topo = topology.load("qemu-2s")
    with pytest.raises(ValueError, match=f"^a group holds 1 to {model.MAX_MEMBERS} members, "
                                         "not 0$"):
        core.deal(topo, [], {})
    with pytest.raises(ValueError, match="^an empty group has no member to select$"):
        core.select(None, 0, 0, 0)
