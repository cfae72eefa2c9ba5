"""The inputs of ``rxl deal`` and ``rxl spread``: every limit at its edge, from
where it comes (the C cores' types, iflib's tunables, the options' help)."""

import json

import pytest
from click.testing import CliRunner

from rxl.cli.main import main
from rxl.decide import cli as decide_cli
from rxl.decide import model, topology
from rxl.decide.cpugroup import TopologyError

TOPO = topology.load("qemu-2s")                     # 2 packages x 2 cores x 2 threads


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_members_and_counts_take_spaces_after_commas():
    assert decide_cli.parse_members("0, -, 2L", TOPO) == [model.Tag(0), model.Tag(),
                                                          model.Tag(2, True)]
    assert decide_cli.parse_counts("0:100, 2 : 50", TOPO) == {0: 100, 2: 50}
    assert decide_cli.per_device(" 2, 3", "--queues", 1, 4096, unset=False) == [2, 3]


def test_a_count_is_a_uint32_as_the_deal_core_takes_it():
    """rxl_deal() takes the counts as const uint32_t * (lib/userspace/rxlcore.h)."""
    top = (1 << 32) - 1
    assert decide_cli.parse_counts(f"0:{top}", TOPO) == {0: top}
    with pytest.raises(TopologyError, match=f"^--counts: count {1 << 32} does not fit 32 bits$"):
        decide_cli.parse_counts(f"0:{1 << 32}", TOPO)


def test_at_most_max_devices_devices():
    assert decide_cli.MAX_DEVICES == 64
    assert decide_cli.per_device(",".join(["1"] * 64), "--queues", 1, 4096,
                                 unset=False) == [1] * 64
    with pytest.raises(TopologyError, match="^--queues: 65 devices; at most 64$"):
        decide_cli.per_device(",".join(["1"] * 65), "--queues", 1, 4096, unset=False)


def _spread(*args):
    return _run("spread", "--topology", "qemu-2s", "--intr-cpus", "0-7", *args)


def test_spread_needs_a_topology():
    r = _run("spread", "--intr-cpus", "0-7", "--queues", "2")
    assert r.exit_code == 2 and "Missing option '--topology'" in r.output


def test_spread_queues_run_1_to_4096_as_its_help_says():
    assert _spread("--queues", "4096").exit_code == 0
    for bad in ("0", "4097"):
        r = _spread("--queues", bad)
        assert r.exit_code == 2 and f"'{bad}' is not a number 1..4096" in r.output


def test_spread_core_offset_0_is_a_tunable_and_core_spread_is_0_or_1():
    r = _spread("--queues", "1", "--core-offset", "0", "--json")
    assert r.exit_code == 0
    (dev,) = json.loads(r.stdout)["devices"]
    assert dev["core_offset"] == 0 and dev["base"] == 0
    r = _spread("--queues", "2", "--core-spread", "2")
    assert r.exit_code == 2 and "--core-spread" in r.output


def test_no_spread_is_core_spread_0_and_not_both():
    numeric = json.loads(_spread("--queues", "4", "--core-spread", "0", "--json").stdout)
    off = json.loads(_spread("--queues", "4", "--no-spread", "--json").stdout)
    spread = json.loads(_spread("--queues", "4", "--json").stdout)
    assert off == numeric and off["order"] == [0, 1, 2, 3, 4, 5, 6, 7]
    assert spread["order"] != off["order"]
    r = _spread("--queues", "4", "--no-spread", "--core-spread", "1")
    assert r.exit_code == 2
    assert "--no-spread is --core-spread 0; give one of them" in r.output


def test_spread_intr_cpus_are_cpus_of_the_topology():
    r = _run("spread", "--topology", "qemu-2s", "--intr-cpus", "0-8", "--queues", "2")
    assert r.exit_code == 2 and "--intr-cpus" in r.output and "8" in r.output


def test_per_device_values_go_to_their_device():
    r = _spread("--queues", "1,3", "--json")
    devs = json.loads(r.stdout)["devices"]
    assert [len(d["queues"]) for d in devs] == [1, 3]
    r = _spread("--queues", "2,2", "--domain", "0,1,0")
    assert r.exit_code == 2 and "Invalid value for '--domain': 3 values for the 2 devices " \
        "of --queues 2,2: give one per device ('-' for unset)" in r.output


@pytest.mark.parametrize("args,opt,line", [
    (["--queues", "2", "--domain", "0,0"], "--domain", "2 values for the 1 device"),
    (["--queues", "2", "--core-offset", "1,2"], "--core-offset", "2 values for the 1 device"),
    (["--queues", "2,2", "--domain", "0"], "--domain", "1 value for the 2 devices"),
    (["--queues", "2,2", "--core-offset", "1"], "--core-offset", "1 value for the 2 devices"),
])
def test_the_devices_are_the_queues_numbers(args, opt, line):
    """--queues 2 --domain 0,0 printed a second device --queues never asked for;
    --queues 2,2 --domain 0 applied the one domain to both: the devices are
    --queues' numbers, and every other per-device list gives one per device."""
    r = _spread(*args)
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith(f"Error: Invalid value for '{opt}': {line}"), r.stderr


@pytest.mark.parametrize("cmd", [
    ["deal", "--topology", "qemu-2s", "--members", "0,1,4,-", "--counts", "0:3,4:1"],
    ["spread", "--topology", "qemu-2s", "--intr-cpus", "0-7", "--queues", "4"],
    ["outcomes", "--topology", "qemu-2s", "--workers", "0-7", "--rx-cpus", "0,4"],
])
def test_the_model_and_the_c_core_print_the_same(cmd):
    c = _run(*cmd, "--impl", "c", "--json")
    m = _run(*cmd, "--impl", "model", "--json")
    assert c.exit_code == 0 and m.exit_code == 0
    assert json.loads(c.stdout) == json.loads(m.stdout)


def test_a_domain_without_any_interrupt_cpu_is_refused():
    r = _run("spread", "--topology", "qemu-2s", "--intr-cpus", "0-3", "--queues", "2",
             "--domain", "1")                  # domain 1 is package 1: CPUs 4-7
    assert r.exit_code == 2
    assert "Invalid value for '--domain': no CPU of --intr-cpus is in domain 1" in r.output


def test_outcomes_needs_workers():
    r = _run("outcomes", "--topology", "qemu-2s", "--rx-cpus", "0")
    assert r.exit_code == 2 and "Missing option '--workers'" in r.output


def test_a_receiving_cpu_the_counts_leave_out_receives_nothing():
    """--rx-counts 0:1 with --rx-cpus 0,4: every handshake on CPU 0, so under
    hash the 8 workers of qemu-2s are 1 exact (0), 1 smt (1), 2 l3 (2, 3), 4
    remote (4-7), as with CPU 0 alone; without counts CPU 4 takes half."""
    def doc(*args):
        r = _run("outcomes", "--topology", "qemu-2s", "--workers", "0-7", *args, "--json")
        assert r.exit_code == 0
        return json.loads(r.stdout)
    only0 = doc("--rx-cpus", "0,4", "--rx-counts", "0:1")
    assert only0 == doc("--rx-cpus", "0")
    hash_ = {k: v["share"] for k, v in only0["policies"][0]["classes"].items()}
    assert hash_ == {"exact": 0.125, "smt": 0.125, "l3": 0.25, "node": 0.0, "far": 0.0,
                     "remote": 0.5, "never": 0.0}
    assert doc("--rx-cpus", "0,4") != only0


def test_without_a_map_no_member_holds_a_slot():
    r = _run("deal", "--topology", "qemu-2s", "--members", "-,-", "--json")
    doc = json.loads(r.stdout)
    assert doc["map"] is None
    assert [m["slots"] for m in doc["members"]] == [0, 0]
    assert all(set(m["rings"].values()) == {0} for m in doc["members"])


def test_a_receiving_cpu_with_no_positive_count_receives_nothing():
    from rxl.decide import outcomes
    topo = topology.load("qemu-2s")
    for policy in outcomes.POLICIES:
        want = outcomes.outcome(topo, [0, 4], {0: 1}, policy)
        assert outcomes.outcome(topo, [0, 4], {0: 1, 4: 0}, policy) == want
        assert outcomes.outcome(topo, [0, 4], {0: 1, 4: -3}, policy) == want


def test_the_deal_table_is_the_json_map_in_runs_and_the_rings():
    from rxl.decide import distance
    args = ["deal", "--topology", "qemu-2s", "--members", "0,1,4,-,4L", "--counts", "0:3,4:1"]
    doc = json.loads(_run(*args, "--json").stdout)
    lines = _run(*args).stdout.splitlines()
    assert lines[0] == "topology qemu-2s: 5 members, T = 16 x 5 = 80 slots"
    assert lines[1].split() == ["cpu", "offset", "count", "members"]
    for e, line in zip(doc["map"]["cpus"], lines[2:]):
        cpu, off, cnt, desc = line.split(None, 3)
        assert (int(cpu), int(off), int(cnt)) == (e["cpu"], e["offset"], e["count"])
        parts = [p.split(" x") for p in desc.split(", ")]
        names = [name for name, _ in parts]
        assert all(a != b for a, b in zip(names, names[1:]))      # runs, not single slots
        assert ["ABCDE".index(name) for name, k in parts for _ in range(int(k))] == e["slots"]
    at = lines.index("")
    assert at == 2 + len(doc["map"]["cpus"])
    assert lines[at + 1].split() == ["member", "tag", *distance.CLASSES]
    for m, line in zip(doc["members"], lines[at + 2:]):
        name, tag, *rings = line.split()
        assert name == "ABCDE"[m["index"]]
        assert tag == ("-" if m["tag"] is None else f"{m['tag']}{'L' * m['learned']}")
        assert [int(x) for x in rings] == [m["rings"][c] for c in distance.CLASSES]
    assert len(lines) == at + 2 + len(doc["members"])


def test_the_spread_document_and_table_of_one_and_of_two_devices():
    one = _run("spread", "--topology", "ryzen-5950x", "--intr-cpus", "0-31", "--queues", "2")
    assert one.stdout.splitlines() == [
        "order: 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30, 1, 17, 3, 19, 5, "
        "21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31",
        "rxq0: cpu 0 (L3 group 0)", "rxq1: cpu 16 (L3 group 1)"]
    doc = json.loads(_run("spread", "--topology", "qemu-2s", "--intr-cpus", "0-7",
                          "--queues", "1,1", "--domain", "1,0", "--json").stdout)
    assert doc["l3_groups"] == 2                       # one L3 per package
    assert doc["order"] == doc["devices"][0]["order"] == [4, 6, 5, 7]
    assert doc["queues"] == doc["devices"][0]["queues"] == [{"queue": 0, "cpu": 4, "l3": 1}]
    two = _run("spread", "--topology", "qemu-2s", "--intr-cpus", "0-7", "--queues", "1,1",
               "--domain", "1,0").stdout.splitlines()
    assert two[:3] == ["dev0 order: 4, 6, 5, 7",
                       "dev0 base: cpu 4 (core_offset unset: the cursor devices of this "
                       "interrupt set share)", "dev0 rxq0: cpu 4 (L3 group 1)"]
    assert two[3] == "dev1 order: 0, 2, 1, 3"


def test_a_tree_without_l3_groups_says_so():
    from pathlib import Path
    nocache = Path(__file__).resolve().parents[2] / "data" / "topology" / "2pkg-nocache.xml"
    args = ["spread", "--topology", nocache, "--intr-cpus", "0-3", "--queues", "2"]
    assert json.loads(_run(*args, "--json").stdout)["l3_groups"] == 0
    lines = _run(*args).stdout.splitlines()
    assert "rxq0: cpu 0 (no L3 group)" in lines
    assert lines[-1].startswith("note: the topology reports no L3 group")
