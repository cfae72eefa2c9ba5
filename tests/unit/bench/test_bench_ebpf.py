"""The eBPF setups: map layout against the model, no BPF needed,
the loader's refusal paths, and one live run when this host can load."""

import json
import platform
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from rxl.bench import ebpf as E
from rxl.decide import model, topology


def _parse(lines):
    cpuent, slots = {}, {}
    for ln in lines:
        name, k, v = ln.split()
        (cpuent if name == "cpuent" else slots)[int(k)] = int(v)
    return cpuent, slots


def _bpf_deal(cpuent, slots, n, cpu, h):
    """reuseport_sel.bpf.c's deal program, step for step, in Python;
    None means SK_PASS without a selection (the kernel's hash)."""
    e = cpuent.get(cpu, 0)
    if e == 0:
        return None
    off, cnt = e >> 16, e & 0xFFFF
    return slots[off + ((h * cnt) >> 32)]


@pytest.mark.parametrize("spec,workers", [("1x2x1", 8), ("2x4x2", 24),
                                          ("qemu-2s", 5)])
def test_deal_map_matches_the_model(spec, workers):
    topo = topology.load(spec)
    cpus = E.worker_cpus(workers, topo.ncpu)
    lines, d = E.deal_lines(topo, cpus)          # the C cores
    ref = model.deal(topo, [model.Tag(c) for c in cpus], {})
    assert d == ref                              # C deal == model deal
    cpuent, slots = _parse(lines)
    assert len(slots) == model.SLOTS_PER_MEMBER * workers
    rnd = random.Random(17)
    for _ in range(3000):
        cpu = rnd.randrange(topo.ncpu)
        h = rnd.getrandbits(32)
        want, steered = model.select(ref, workers, cpu, h)
        got = _bpf_deal(cpuent, slots, workers, cpu, h)
        if steered:
            assert got == want
            # With the same number of workers on every CPU, the deal keeps
            # every connection on a worker of its receiving CPU.
            if workers % topo.ncpu == 0:
                assert cpus[got] == cpu
        else:
            assert got is None


def test_deal_map_entry_packing_and_limits():
    topo = topology.load("1x2x1")
    lines, d = E.deal_lines(topo, [0, 1, 0, 1])
    # 4 members x 16 slots, two CPUs with equal counts: 32 each.
    assert lines[:2] == ["cpuent 0 32", f"cpuent 1 {(32 << 16) | 32}"]
    with pytest.raises(ValueError, match="sockarray"):
        E.deal_lines(topo, [0] * 257)


def test_numa_layout_is_dense_per_node():
    cpus = E.worker_cpus(8, 2)                   # 0,1,0,1,...
    index, ranges = E.numa_layout(cpus, {0: 0, 1: 1})
    assert sorted(index) == list(range(8))
    assert ranges == {0: (0, 4), 1: (4, 4)}
    for r, i in enumerate(index):
        start, cnt = ranges[cpus[r]]
        assert start <= i < start + cnt
    lines = E.numa_lines(cpus, {0: 0, 1: 1})
    assert f"ranges {E.GLOBAL_RANGE} 0 8" in lines
    # A CPU on no declared node is only in the global range.
    index, ranges = E.numa_layout([0, 1, 2], {0: 0})
    assert ranges == {0: (0, 1)}
    assert E.parse_node_map("0:0,1:1") == {0: 0, 1: 1}
    for bad in ("0:0,0:1", "x", "0:64"):
        with pytest.raises(ValueError, match="--numa-map"):
            E.parse_node_map(bad)


def test_model_agreement():
    topo = topology.load("1x2x1")
    cpus = E.worker_cpus(4, 2)
    _, d = E.deal_lines(topo, cpus)
    rnd = random.Random(3)
    log, recs = [], []
    for port in range(40000, 40040):
        cpu, h = rnd.randrange(2), rnd.getrandbits(32)
        m, _ = model.select(d, 4, cpu, h)
        log.append([port, cpu, h, m])
        recs.append([m, cpu, cpu, port])
    raw = {"workers": 4, "records": recs, "ebpf": {"log": log}}
    assert E.model_agreement(raw, d) == 1.0
    recs[0][0] = (recs[0][0] + 1) % 4            # a wrong worker
    recs[1][3] = 1                               # no log entry for it
    assert E.model_agreement(raw, d) == pytest.approx(38 / 40)
    assert E.model_agreement({"workers": 4}, d) is None


def test_unavailable_reasons(monkeypatch):
    from rxl.bench import ebpf_host
    monkeypatch.setattr(ebpf_host, "cap_eff", lambda: 0)
    assert "Linux" in E.unavailable(system="FreeBSD", euid=0)
    assert "root" in E.unavailable(system="Linux", euid=1000, release="6.1.0-18-amd64")
    assert "older than 5.12" in E.unavailable(system="Linux", euid=0, release="5.10.0-28")


def test_host_topology_refuses_missing_sysfs(tmp_path):
    with pytest.raises(topology.TopologyError, match="--topology"):
        E.host_topology(tmp_path)
    assert E.host_nodes(tmp_path) == {}


def test_build_reports_a_missing_compiler(tmp_path):
    with pytest.raises(E.Unavailable, match="not found"):
        E.build(tmp_path, ["no-such-cc-rxl"], ["-O2"])


@pytest.mark.skipif(E.unavailable() is not None, reason=str(E.unavailable()))
def test_live_deal_run_agrees_with_the_model(tmp_path):
    server, obj = E.build(tmp_path, ["cc"], ["-std=c99", "-D_GNU_SOURCE",
                                             "-O2"])
    topo = E.host_topology()
    cpus = E.worker_cpus(4, topo.ncpu)
    lines, d = E.deal_lines(topo, cpus)
    maps = tmp_path / "maps"
    maps.write_text("\n".join(lines) + "\n")
    res = subprocess.run([str(server), "-m", "ebpf", "-B", f"{obj}:deal",
                          "-b", str(maps), "-w", "4", "-n", "40", "-p", "-c",
                          "-C", "-d", "20000"], capture_output=True,
                         text=True, timeout=60)
    if res.returncode == 5:
        pytest.skip(res.stderr.strip())
    assert res.returncode == 0, res.stderr
    raw = json.loads(res.stdout)
    assert raw["accepted"] == 40
    assert E.model_agreement(raw, d) == 1.0
    assert sum(raw["ebpf"]["selections"]) == 40
    assert raw["ebpf"]["program"] == "deal"
    assert raw["ebpf"]["fallbacks"]["no_slots"] == 0


def test_server_refuses_a_missing_object(tmp_path):
    if platform.system() != "Linux" or not shutil.which("cc") or \
            not Path("/usr/include/bpf/libbpf.h").is_file():
        pytest.skip("needs Linux, cc and libbpf-dev")
    server, _ = E.build(tmp_path, ["cc"], ["-std=c99", "-D_GNU_SOURCE"])
    res = subprocess.run([str(server), "-m", "ebpf", "-B",
                          f"{tmp_path}/none.o:deal", "-w", "2", "-n", "2"],
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 5
    assert "cannot load BPF" in res.stderr and "none.o" in res.stderr


def test_cli_refuses_runs_longer_than_the_selection_log(tmp_path):
    from click.testing import CliRunner
    from rxl.bench.cli import bench
    res = CliRunner().invoke(bench, ["accept", "--dry-run", "--build-dir",
                                     str(tmp_path), "--setup", "ebpf-deal",
                                     "--connections",
                                     str(E.LOG_ENTRIES + 1)])
    assert res.exit_code == 1 and "--connections <= 8192" in res.output


def test_summary_maps_selections_back_to_ranks():
    raw = {"workers": 4, "ebpf": {"program": "numa_rr",
                                  "selections": [10, 11, 12, 13] + [0] * 252,
                                  "fallbacks": {"global": 1}, "logged": 46}}
    index, _ = E.numa_layout(E.worker_cpus(4, 2), {0: 0, 1: 1})
    assert index == [0, 2, 1, 3]
    s = E.summary(raw, index)
    assert s["selections"] == [10, 12, 11, 13]
    assert E.summary(raw)["selections"] == [10, 11, 12, 13]
    assert s["fallbacks"] == {"global": 1} and s["logged"] == 46


def test_model_agreement_counts_kernel_hash_fallbacks():
    """One worker on a 2-CPU host: CPU 1 supplies no slots, so the model
    does not steer there and the program must pass to the kernel's hash
    (logged as NO_MEMBER); a selection there would be a disagreement."""
    topo = topology.load("1x2x1")
    _, d = E.deal_lines(topo, [0])
    assert 1 not in d.ranges
    log = [[5000, 0, 0x12345678, 0], [5001, 1, 0x9abcdef0, E.NO_MEMBER]]
    recs = [[0, 0, 0, 5000], [0, 1, 1, 5001]]
    raw = {"workers": 1, "records": recs, "ebpf": {"log": log}}
    assert E.model_agreement(raw, d) == 1.0
    log[1][3] = 0                                # selected where it must not
    assert E.model_agreement(raw, d) == 0.5
    log[1][3] = E.NO_MEMBER
    log[0][3] = E.NO_MEMBER                      # passed where it must steer
    assert E.model_agreement(raw, d) == 0.5


def test_pinned_cpus_follow_the_host_not_the_topology():
    """acceptd pins rank r to CPU r mod (host CPUs); the map must be dealt
    for those CPUs even when --topology has more, and a topology lacking
    one of them is refused (it dealt 2 of 4 workers nothing before)."""
    assert E.pinned_cpus(4, topology.load("2x2x1"), ncpu=2) == [0, 1, 0, 1]
    assert E.pinned_cpus(3, topology.load("1x2x1"), ncpu=2) == [0, 1, 0]
    with pytest.raises(topology.TopologyError, match="CPU 1 is not in"):
        E.pinned_cpus(4, topology.load("1x1x1"), ncpu=2)
    assert 1 <= E.host_ncpu() <= E.MAX_CPUS


def _cli(tmp_path, *args):
    from click.testing import CliRunner
    from rxl.bench.cli import bench
    return CliRunner().invoke(bench, ["accept", "--dry-run", "--build-dir",
                                      str(tmp_path), *args])


def test_cli_checks_topology_and_numa_map_before_building(tmp_path,
                                                          monkeypatch):
    monkeypatch.setattr(E, "host_ncpu", lambda: 2)
    for args, msg in (
            (["--setup", "noflag", "--topology", "1x2x1"],
             "'--topology': --topology is read only by --setup ebpf-deal"),
            (["--setup", "noflag", "--numa-map", "0:0"],
             "'--numa-map': --numa-map is read only by --setup ebpf-numa-rr"),
            (["--setup", "ebpf-numa-rr", "--numa-map", ""],
             "'--numa-map': an empty value"),
            (["--setup", "ebpf-deal", "--topology", ""],
             "'--topology': an empty value"),
            (["--setup", "ebpf-deal", "--workers", "4", "--topology",
              "1x1x1"], "CPU 1 is not in topology 1x1x1")):
        res = _cli(tmp_path, *args)
        assert res.exit_code == 2 and msg in res.output, (args, res.output)
        # Refused before anything is built or printed.
        assert res.output.startswith("Error:"), res.output
    res = _cli(tmp_path, "--setup", "ebpf-deal", "--workers", "4",
               "--topology", "2x2x1", "--repetitions", "1")
    assert res.exit_code == 0, res.output


@pytest.mark.skipif(E.unavailable() is not None, reason=str(E.unavailable()))
def test_live_one_worker_fallback_agrees(tmp_path):
    """Fewer workers than CPUs: the CPUs without a worker pass to the
    kernel's hash, and the model check still reads 100%."""
    server, obj = E.build(tmp_path, ["cc"], ["-std=c99", "-D_GNU_SOURCE",
                                             "-O2"])
    topo = E.host_topology()
    cpus = E.pinned_cpus(1, topo)
    lines, d = E.deal_lines(topo, cpus)
    maps = tmp_path / "maps"
    maps.write_text("\n".join(lines) + "\n")
    res = subprocess.run([str(server), "-m", "ebpf", "-B", f"{obj}:deal",
                          "-b", str(maps), "-w", "1", "-n", "20", "-p", "-c",
                          "-C", "-d", "20000"], capture_output=True,
                         text=True, timeout=60)
    if res.returncode == 5:
        pytest.skip(res.stderr.strip())
    assert res.returncode == 0, res.stderr
    raw = json.loads(res.stdout)
    assert raw["accepted"] == 20
    assert E.model_agreement(raw, d) == 1.0
    # Connections from CPUs without slots (every other one with 2+ CPUs)
    # were logged as passes, not dropped from the log.
    passes = sum(1 for e in raw["ebpf"]["log"] if e[3] == E.NO_MEMBER)
    assert passes == raw["ebpf"]["fallbacks"]["no_slots"]
    assert len(raw["ebpf"]["log"]) == 20
    if E.host_ncpu() >= 2:
        assert passes == 10


def test_map_files_are_removed_when_a_run_fails(tmp_path, monkeypatch):
    """The per-process map file in the build directory went away only
    after a clean pass: a failing server left it behind."""
    from rxl.bench import accept as A
    from rxl.bench import accept_run as AR
    monkeypatch.setattr(E, "unavailable", lambda: None)
    monkeypatch.setattr(E, "build", lambda *a, **k: (tmp_path / "srv",
                                                     tmp_path / "o.bpf.o"))
    monkeypatch.setattr(A, "ensure_built", lambda *a, **k: tmp_path / "b")
    seen = []

    def fail(argv, timeout_s):
        seen.append(sorted(p.name for p in tmp_path.glob("maps-*")))
        raise A.BenchError("server exited 1: boom")
    monkeypatch.setattr(A, "run_server", fail)
    req = AR.Request(setups=["ebpf-deal"], cfgs=[A.RunConfig(workers=2)],
                     repetitions=1, build_dir=tmp_path, cc=["cc"],
                     topology="1x2x1")
    with pytest.raises(A.BenchError, match="boom"):
        AR.run_all(req, lambda m: None, lambda m: None)
    assert seen and seen[0][0].startswith("maps-ebpf-deal-w2-")
    assert list(tmp_path.glob("maps-*")) == []
