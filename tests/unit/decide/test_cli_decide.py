"""``rxl deal``, ``rxl spread``, ``rxl outcomes`` from the command line."""

import json
import subprocess
from pathlib import Path
import sys

import pytest
from click.testing import CliRunner

from rxl.cli.main import main


def run(*args):
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.output


@pytest.mark.parametrize("impl", ["c", "model"])
def test_deal_json_schema_and_values(impl):
    code, out = run("deal", "--topology", "2x4x2", "--members", "0,1,2,9,-",
                    "--counts", "0:100,2:100,4:50", "--impl", impl, "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["slots_per_member"] == 16 and doc["total_slots"] == 80
    cpus = doc["map"]["cpus"]
    assert [(e["cpu"], e["offset"], e["count"]) for e in cpus] == \
        [(0, 0, 32), (2, 32, 32), (4, 64, 16)]
    assert cpus[1]["slots"] == [2] * 16 + [3] * 16
    m = doc["members"]
    assert [x["tag"] for x in m] == [0, 1, 2, 9, None]
    assert all(x["slots"] == 16 for x in m)
    assert m[3]["rings"] == {"exact": 0, "smt": 0, "l3": 0, "node": 0,
                             "far": 16, "remote": 0, "any": 0}


def test_deal_impls_print_the_same():
    args = ["deal", "--topology", "ryzen-5950x", "--members", "0-31",
            "--counts", "0:1,16:1,2:1,18:1"]
    # 0-31 is not a member list: members are comma separated tags.
    code, out = run(*args)
    assert code != 0 and "malformed member" in out
    members = ",".join(map(str, range(32)))
    a = run("deal", "--topology", "ryzen-5950x", "--members", members,
            "--counts", "0:1,16:1,2:1,18:1", "--impl", "c")
    b = run("deal", "--topology", "ryzen-5950x", "--members", members,
            "--counts", "0:1,16:1,2:1,18:1", "--impl", "model")
    assert a == b and a[0] == 0


def test_deal_no_map():
    code, out = run("deal", "--topology", "qemu-2s", "--members", "-,-",
                    "--json")
    assert code == 0 and json.loads(out)["map"] is None


def test_spread_cli():
    code, out = run("spread", "--topology", "ryzen-5950x", "--intr-cpus",
                    "0-30:2", "--queues", "8", "--json")
    doc = json.loads(out)
    assert doc["order"][:8] == [0, 16, 2, 18, 4, 20, 6, 22]
    assert [q["l3"] for q in doc["queues"]] == [0, 1] * 4
    code, out = run("spread", "--topology", "ryzen-5950x", "--intr-cpus",
                    "0-30:2", "--queues", "8", "--no-spread", "--json")
    assert [q["cpu"] for q in json.loads(out)["queues"]] == \
        list(range(0, 16, 2))


def test_spread_domain():
    # The NIC's domain narrows the interrupt set, as ACPI's _PXM does.
    code, out = run("spread", "--topology", "qemu-2s", "--intr-cpus",
                    "0,2,4,6", "--queues", "2", "--domain", "1", "--json")
    assert json.loads(out)["order"] == [4, 6]
    code, out = run("spread", "--topology", "qemu-2s", "--intr-cpus", "0",
                    "--queues", "1", "--domain", "2")
    assert code == 2 and "NUMA domain" in out


@pytest.mark.parametrize("impl", ["c", "model"])
def test_outcomes_four_ways(impl):
    code, out = run("outcomes", "--topology", "ryzen-5950x", "--workers",
                    "0-31", "--rx-cpus", "0,16,2,18,4,20,6,22", "--impl",
                    impl, "--json")
    assert code == 0
    pol = {p["policy"]: p for p in json.loads(out)["policies"]}
    assert pol["deal"]["classes"]["l3"]["workers"] == 16
    assert pol["deal"]["classes"]["far"]["workers"] == 0
    assert pol["deal"]["cycles_per_request"] == 1.0
    assert pol["hash"]["cycles_per_request"] == pytest.approx(1.095)
    assert pol["exact"]["classes"]["never"]["workers"] == 24


def test_outcomes_rx_counts():
    code, out = run("outcomes", "--topology", "2x4x2", "--workers", "0-15",
                    "--rx-cpus", "0,8", "--rx-counts", "0:3,8:1",
                    "--policy", "hash", "--json")
    p = json.loads(out)["policies"][0]
    assert p["connections"]["far"] == pytest.approx(0.5)


def test_outcomes_two_workers_per_cpu_and_rx_share():
    """`--workers 0,0,1,1` as `rxl deal --members 0,0,1,1` allows; the
    table shows per-worker shares and the share accepted on the receiving
    CPU (the hash on two CPUs keeps half, not "exact 100%")."""
    code, out = run("outcomes", "--topology", "1x2x1", "--workers",
                    "0,0,1,1", "--rx-cpus", "0,1", "--json")
    assert code == 0, out
    pol = {p["policy"]: p for p in json.loads(out)["policies"]}
    assert [w["share"] for w in pol["hash"]["workers"]] == [0.25] * 4
    assert pol["hash"]["on_rx_cpu"] == pytest.approx(0.5)
    assert pol["deal"]["on_rx_cpu"] == 1.0
    code, out = run("outcomes", "--topology", "1x2x1", "--workers",
                    "0,0,1,1", "--rx-cpus", "0,1", "--policy", "hash")
    assert "on rx cpu" in out and "50.0%" in out
    assert "0:25.0% 0:25.0% 1:25.0% 1:25.0%" in out


@pytest.mark.parametrize("args, msg", [
    (["deal", "--topology", "qemu-2s", "--members", "1,99"], "CPU 99"),
    (["deal", "--topology", "qemu-2s", "--members", "1",
      "--counts", "1=5"], "malformed --counts"),
    (["deal", "--topology", "/nonexistent.xml", "--members", "1"],
     "/nonexistent.xml: no such file"),
    (["deal", "--topology", "nosuch", "--members", "1"],
     "unknown topology"),
    (["spread", "--topology", "qemu-2s", "--intr-cpus", "0,,1",
      "--queues", "2"], "malformed"),
    (["outcomes", "--topology", "qemu-2s", "--workers", "0-7",
      "--rx-cpus", "0", "--cost-ladder", "1,1"], "four numbers"),
])
def test_bad_input_one_line(args, msg):
    code, out = run(*args)
    assert code == 2
    assert msg in out and len(out.strip().splitlines()) == 1


def test_xml_topology_file(tmp_path):
    from rxl.decide import topology
    f = tmp_path / "spec.xml"
    f.write_text(topology.load("qemu-2s").to_xml())
    code, out = run("spread", "--topology", str(f), "--intr-cpus", "0,2,4,6",
                    "--queues", "2", "--json")
    assert json.loads(out)["order"] == [0, 2, 4, 6]     # one L3 per node
    code, out = run("spread", "--topology", str(f), "--intr-cpus", "0,2,4,6",
                    "--queues", "2", "--core-spread", "2", "--json")
    assert code == 2 and "--core-spread" in out     # 0 or 1 only
    f.write_text("<groups><group>")
    code, out = run("deal", "--topology", str(f), "--members", "0")
    assert code == 2 and "line 1: the dump ends before the <group> of " \
        "line 1 is closed" in out


def test_console_script_installed():
    """The ``rxl`` console script pip installed next to this Python runs as users
    call it (the script, not ``python -m rxl``), and so does ``python -m rxl``."""
    script = Path(sys.executable).with_name("rxl")
    assert script.is_file(), f"no console script {script}: pip install -e . first"
    r = subprocess.run([str(script), "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "deal" in r.stdout and r.stdout.startswith("Usage: rxl ")
    r = subprocess.run([str(script), "deal", "--topology", "2x4x2", "--members", "0,1,2,9,-",
                        "--counts", "0:100,2:100,4:50", "--json"], capture_output=True, text=True)
    assert r.returncode == 0 and '"slots"' in r.stdout
    r = subprocess.run([str(script), "deal", "--topology", "nosuch"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith("Error: ")
    r = subprocess.run([sys.executable, "-m", "rxl", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("Usage: rxl ")


@pytest.mark.parametrize("args, msg", [
    (["spread", "--topology", "2x4x2", "--intr-cpus", "0-15", "--queues",
      "4294967296"], "is not a number 1..4096"),
    (["outcomes", "--topology", "2x4x2", "--workers", "0-15", "--rx-cpus",
      "0", "--cost-ladder", "1,1,1,-5"], "positive and finite"),
])
def test_bounds(args, msg):
    code, out = run(*args)
    assert code != 0 and msg in out


def test_core_build_errors_are_one_line(tmp_path, monkeypatch):
    from rxl.decide import core
    monkeypatch.setenv("RXL_BUILD_DIR", str(tmp_path / "b"))
    monkeypatch.delenv("RXL_CORE_CC", raising=False)  # set by make test-asan
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setattr(core, "_lib", None)
    code, out = run("deal", "--topology", "2x4x2", "--members", "0")
    assert code == 1 and "no-such-cc" in out
    assert len(out.strip().splitlines()) == 1
    monkeypatch.setenv("CC", "false")
    code, out = run("deal", "--topology", "2x4x2", "--members", "0")
    assert code == 1 and "full output:" in out


@pytest.mark.parametrize("ladder, cell", [
    ("1e308,1e308,1e308,1e308", "1e+308"),
    ("20000,20000,20000,20000", "2e+04"),
    ("999,999,999,999", "999.0000"), ("1000,1000,1000,1000", "1e+03"),
])
def test_outcomes_table_keeps_its_columns_for_any_finite_ladder(ladder, cell):
    """A ladder of 1e308 printed a 300-digit cycles cell that
    pushed 'on rx cpu' off the row; every row stays as wide as with the
    seed's default ladder (1,1,1,1.19)."""
    args = ("outcomes", "--topology", "2x4x2", "--workers", "0-15",
            "--rx-cpus", "0-3")
    _, ref = run(*args)
    code, out = run(*args, "--cost-ladder", ladder)
    assert code == 0
    width = len(ref.splitlines()[1])
    for row in out.splitlines()[1:4]:
        assert len(row) == width, row
        assert row.split()[-2:] == [cell, row.split()[-1]]
        assert row.endswith("%")
