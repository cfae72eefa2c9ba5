"""rxl.verify.placement: the NIC's interrupt set and where its queues must be."""

from pathlib import Path

import pytest

from rxl.verify import placement as P
from rxl.verify.parse import RunResult

TOPO = Path(__file__).resolve().parents[2] / "data" / "topology"
#: The default guest (rxl.guest.targets.DEFAULT_SHAPE): 2 sockets x 2 dies (L3) x 4
#: cores x 2 threads, node 0 = CPUs 0-15, L3 groups 0-7, 8-15, 16-23, 24-31.
NUMA32 = (TOPO / "qemu-2s2d4c2t-numa.xml").read_text()


def run(cpus, *, domain="0", spread=None, ht=None, dev="igb", xml=NUMA32):
    r = RunResult(label="x", outcome="completed", topology_xml=xml)
    r.rxq = {f"dev.{dev}.0.iflib.rxq{i}.cpu": c for i, c in enumerate(cpus)}
    if domain is not None:
        r.sysctls[f"dev.{dev}.0.%domain"] = domain
    if spread is not None:
        r.sysctls[f"dev.{dev}.0.iflib.core_spread"] = str(spread)
    if ht is not None:
        r.sysctls["machdep.hyperthreading_intr_allowed"] = ht
    return r


def test_interrupt_set_is_the_domains_first_threads():
    """set_interrupt_apic_ids() leaves out second SMT threads; acpi_get_cpus()
    ANDs with the _PXM domain (FreeBSD 15's mp_x86.c and acpi.c)."""
    topo = P.topology_of(run([0]))
    assert P.interrupt_set(topo, 0) == [0, 2, 4, 6, 8, 10, 12, 14]
    assert P.interrupt_set(topo, 1) == [16, 18, 20, 22, 24, 26, 28, 30]
    assert P.interrupt_set(topo, None) == list(range(0, 32, 2))
    assert P.interrupt_set(topo, 0, ht_allowed=True) == list(range(16))


def test_numeric_order_fills_l3_group_0_first_and_spread_alternates():
    """What the default guest must show (docs/results/guest-numa.md): 8 queues,
    numeric 0,2,...,14 (rxq0-3 in L3 group 0); core_spread=1 0,8,2,10,...;
    never a CPU of node 1."""
    numeric = [0, 2, 4, 6, 8, 10, 12, 14]
    spread = [0, 8, 2, 10, 4, 12, 6, 14]
    assert P.check("patched", run(numeric, spread=0), 0) == []
    assert P.check("spread", run(spread, spread=1), 1) == []
    assert P.check("spread", run(numeric, spread=1), 1) == [
        "spread: core_spread=1 put rx queues on 0,2,4,6,8,10,12,14, expected the spread "
        "order of the interrupt set 0,2,4,6,8,10,12,14: 0,8,2,10,4,12,6,14"]
    assert P.check("patched", run(spread), 0)[0].startswith(
        "patched: core_spread=0 put rx queues on 0,8,2,10")
    assert P.summary("spread", run(spread), 1) == [
        "spread: igb0 domain 0, interrupt set 0,2,4,6,8,10,12,14 (8 CPUs); "
        "core_spread=1: rx queues on 0,8,2,10,4,12,6,14, expected 0,8,2,10,4,12,6,14"]
    # fewer queues (override_nrxqs=4): numeric fills one L3 group, spread takes both
    assert P.check("p", run([0, 2, 4, 6]), 0) == []
    assert P.check("s", run([0, 8, 2, 10]), 1) == []


def test_a_queue_outside_the_nics_domain_fails():
    bad = [0, 2, 4, 6, 8, 10, 12, 16]
    reasons = P.check("patched", run(bad), 0)
    assert reasons[0] == "patched: rx queues on CPUs 16, outside the NIC's domain 0"
    assert len(reasons) == 2       # and it is not the numeric order either


def test_domain_unknown_takes_both_nodes_and_the_lowest_cpus_domain_is_local():
    """Without _PXM (guest-nopxm): 16 interrupt CPUs, still 8 queues; mode 1 stays in
    node 0 (it has a core per queue)."""
    assert P.check("p", run([0, 2, 4, 6, 8, 10, 12, 14], domain=None), 0) == []
    assert P.check("s", run([0, 8, 2, 10, 4, 12, 6, 14], domain=None), 1) == []
    assert P.summary("p", run([0, 2], domain=None), 0)[0].startswith(
        "p: igb0 domain unknown (no _PXM), interrupt set 0,2,4,6,8,10,12,14,16,")


def test_ht_allowed_and_reported_spread_mismatch():
    r = run([0, 1, 2, 3], ht="1", spread=0)
    assert P.check("p", r, 0) == []
    assert P.check("p", r, 1)[0] == "p: the guest reports core_spread=0, booted with 1"


@pytest.mark.parametrize("r", [RunResult(label="x"), run([])])
def test_nothing_to_check_is_a_reason(r):
    assert P.check("x", r, 0)[0].startswith("x: no topology or rx queue CPUs")


def test_queue_order_is_by_queue_index_not_by_name():
    r = run(list(range(0, 24, 2)), domain=None, ht="1")
    assert P.queue_order(r) == list(range(0, 24, 2))   # rxq10 after rxq9
