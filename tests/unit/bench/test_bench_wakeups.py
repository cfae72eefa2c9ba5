"""The request workload's counters and predictions (rxl.bench.counters,
rxl.bench.wakeups): the per-CPU arithmetic on a recorded /proc/interrupts
pair and on recorded acceptd -q runs, the prediction rules against rxl
outcomes and Linux's selection code, the command's checks, and one short
live run."""

import json
import platform
import shutil
from fractions import Fraction as F
from pathlib import Path

import pytest
from click.testing import CliRunner

from rxl.bench import counters as C
from rxl.bench import wakeups as W
from rxl.bench.cli import bench
from rxl.decide import model, outcomes, topology

DATA = Path(__file__).resolve().parents[2] / "data" / "bench"
LIVE = pytest.mark.skipif(platform.system() != "Linux" or
                          not shutil.which("cc"), reason="needs Linux and cc")


def load(name):
    return json.loads((DATA / name).read_text())


# -------------------------------------------------- /proc/interrupts pair


def test_recorded_interrupts_pair_per_cpu():
    # tests/data/bench/interrupts-{before,after}.txt: the 2-vCPU host
    # around the reuseport run of requests-reuseport-w2-n8-q50.json.
    # RES 508821 -> 508930 on CPU0 and 377490 -> 377544 on CPU1; a
    # parser that swapped, summed or offset the columns gives other
    # numbers.
    a = C.parse_interrupts((DATA / "interrupts-before.txt").read_text())
    b = C.parse_interrupts((DATA / "interrupts-after.txt").read_text())
    assert a.cpus == b.cpus == (0, 1)
    assert C.irq_delta(a, b, "RES") == {0: 109, 1: 54}
    assert C.irq_delta(a, b, "LOC") == {0: 3, 1: 2}
    assert C.irq_delta(a, b, "CAL") == {0: 0, 1: 0}
    assert a.row("RES") == {0: 508821, 1: 377490}
    # ERR and MIS carry one system-wide count: not per-CPU rows.
    assert "ERR" not in a.rows and "MIS" not in a.rows
    assert "24" in a.rows          # numbered device rows are kept


def test_interrupts_columns_are_cpu_ids_and_counters_wrap():
    # CPU1 offline: the columns are CPU0 and CPU2, not 0 and 1.
    a = C.parse_interrupts("      CPU0   CPU2\nRES: 4294967290 5  Resched\n")
    b = C.parse_interrupts("      CPU0   CPU2\nRES: 4 7  Resched\n")
    assert a.cpus == (0, 2)
    # unsigned int: 4294967290 -> 4 is 10 interrupts, not -4294967286.
    assert C.irq_delta(a, b, "RES") == {0: 10, 2: 2}


@pytest.mark.parametrize("before, after, msg", [
    ("CPU0 CPU1\nRES: 1 2\n", "CPU0 CPU2\nRES: 1 2\n", "columns changed"),
    ("CPU0 CPU1\nRES: 1 2\n", "CPU0 CPU1\nLOC: 1 2\n", "no RES row"),
])
def test_irq_delta_refuses_pairs_that_do_not_fit(before, after, msg):
    with pytest.raises(C.CounterError, match=msg):
        C.irq_delta(C.parse_interrupts(before), C.parse_interrupts(after),
                    "RES")


@pytest.mark.parametrize("text, msg", [
    ("", "empty"), ("RES: 1 2\n", "header"),
    ("CPU0 CPU0\nRES: 1 2\n", "twice"),
    ("CPU0\nRES: 1\nRES: 2\n", "two RES rows"),
])
def test_parse_interrupts_refuses(text, msg):
    with pytest.raises(C.CounterError, match=msg):
        C.parse_interrupts(text)


def test_stat_and_process_counters():
    runs = load("requests-reuseport-w2-n8-q50.json")["requests"]["snapshots"]
    st = C.stat_delta(C.parse_stat(runs["before"]["stat"]),
                      C.parse_stat(runs["after"]["stat"]))
    assert st[0]["system"] == 1 and st[1]["system"] == 1
    assert st[0]["softirq"] == st[1]["softirq"] == 0
    w0 = [p for p in runs["before"]["procs"] if p["role"] == "worker"][0]
    p = C.parse_proc(w0["text"])
    assert p == C.ProcCounters(7, 0, 416821, 2413149, 7)
    with pytest.raises(C.CounterError, match="went back"):
        p.minus(C.ProcCounters(8, 0, 0, 0, 0))
    with pytest.raises(C.CounterError, match="exited"):
        C.parse_proc("voluntary_ctxt_switches:\t3\n")
    with pytest.raises(C.CounterError, match="went back"):
        C.stat_delta({0: dict.fromkeys(C.STAT_FIELDS, 5)},
                     {0: dict.fromkeys(C.STAT_FIELDS, 4)})
    with pytest.raises(C.CounterError, match="no cpuN"):
        C.parse_stat("cpu 1 2 3 4 5 6 7 8\n")


# ------------------------------------------------------ recorded runs


def test_recorded_reuseport_run():
    raw = load("requests-reuseport-w2-n8-q50.json")
    w = W.run_wakeups(raw)
    # 8 connections x 50 requests; ranks served 150 and 250, of which 50
    # and 100 came from the other CPU (rq_from [100, 50], [100, 150]).
    assert w.requests == 400 and w.rank_requests == [150, 250]
    assert w.remote_requests == 150
    assert w.worker_wk_remote == 43 + 58 and w.client_wk_remote == 99 + 50
    assert w.res_by_cpu == {0: 109, 1: 54}
    # Background: the idle window's RES (3 and 13 in 0.2004 s) scaled to
    # the 8.224 ms phase.
    assert w.phase_s == pytest.approx(0.008224156)
    assert w.bg_res_by_cpu[0] == pytest.approx(3 * 0.008224156 / 0.200356316)
    assert w.bg_res_by_cpu[1] == pytest.approx(13 * 0.008224156 / 0.200356316)
    # Context switches: workers 98 + 109 voluntary, 66 + 109 involuntary.
    assert (w.workers.voluntary, w.workers.nonvoluntary) == (207, 175)
    f = w.figures()
    assert f["remote_pct"] == pytest.approx(37.5)
    assert f["res_1k"] == pytest.approx(1000 * 163 / 400)
    assert f["vol_1k"] == pytest.approx(1000 * 207 / 400)
    assert f["fed"] == pytest.approx(150 * 2 / 400)
    assert f["cpu_us"] == pytest.approx((1683188 + 3506656 + 3812418 +
                                         2470002) / 400 / 1000)
    assert f["local_conns_pct"] == pytest.approx(100 * 5 / 8)


def test_recorded_deal_run_per_cpu_against_the_prediction():
    # ebpf-deal dealt from CPU 0's counts, client on CPU 0 only: CPU 0's
    # range holds both workers, so half the connections are predicted to
    # cross; this run's hash sent 6 of 8 to rank 1 on CPU 1.
    raw = load("requests-deal-rx0-w2-n8-q50.json")
    topo = topology.load("1x2x1")
    d = model.deal(topo, [model.Tag(0), model.Tag(1)], {0: 8})
    pred = W.predict("ebpf-deal", [0, 1], W.client_conns(8, [0]), ncpu=2,
                     deal=d).as_json()
    assert pred["remote"] == 0.5
    assert pred["wakeups_by_cpu"] == {"0": 0.5, "1": 0.5}
    w = W.run_wakeups(raw)
    assert w.remote_requests == 300 and w.rank_requests == [100, 300]
    # Per CPU: CPU 1 holds only the remote worker, CPU 0 the client; both
    # saw about one IPI per cross-CPU request (300), less the hits on a
    # CPU that was busy.
    assert w.res_by_cpu == {0: 301, 1: 286}
    s = W.summary([w], pred)
    assert s["predicted"]["net_res_1k"] == 1000.0
    assert s["deviation"]["remote_pct"] == pytest.approx(0.5)   # 75% vs 50%
    assert s["per_cpu"]["1"]["pred_1k"] == 500.0


def test_run_wakeups_fails_closed():
    raw = load("requests-reuseport-w2-n8-q50.json")
    bad = json.loads(json.dumps(raw))
    bad["requests"]["clients"][1]["error"] = "Connection reset by peer"
    with pytest.raises(C.CounterError, match="CPU 1 failed"):
        W.run_wakeups(bad)
    bad = json.loads(json.dumps(raw))
    bad["requests"]["workers"][0]["rq"] -= 1
    with pytest.raises(C.CounterError, match="disagree"):
        W.run_wakeups(bad)
    bad = json.loads(json.dumps(raw))
    bad["requests"]["snapshots"]["after"] = None
    with pytest.raises(C.CounterError, match="after missing"):
        W.run_wakeups(bad)
    bad = json.loads(json.dumps(raw))
    bad["requests"]["snapshots"]["after"]["procs"].pop()
    with pytest.raises(C.CounterError, match="lacks a client"):
        W.run_wakeups(bad)
    with pytest.raises(C.CounterError, match="no request phase"):
        W.run_wakeups({"setup": "reuseport"})


# ---------------------------------------------------------- predictions


@pytest.mark.parametrize("spec, workers, rx", [
    ("1x2x1", [0, 1], {0: 1, 1: 1}),
    ("1x2x1", [0, 1, 0, 1, 0, 1, 0, 1], {0: 1, 1: 1}),
    ("1x2x1", [0, 1, 0, 1], {0: 1}),
    ("2x4x2", list(range(16)), {0: 3, 2: 1, 8: 2}),
])
def test_predictions_are_rxl_outcomes(spec, workers, rx):
    topo = topology.load(spec)
    tags = [model.Tag(c) for c in workers]
    for setup, policy in (("reuseport", "hash"), ("incoming-cpu", "exact"),
                          ("ebpf-deal", "deal")):
        p = W.predict(setup, workers, rx, ncpu=topo_ncpu(topo),
                      deal=model.deal(topo, tags, rx))
        o = outcomes.outcome(topo, workers, rx, policy)
        assert p.shares() == tuple(o.share(i) for i in range(len(workers)))
        assert p.remote() == 1 - sum(o.per_worker[i]["exact"]
                                     for i in range(len(workers)))


def topo_ncpu(topo):
    return len(topo.cpus)


def test_incoming_cpu_follows_linux_scan():
    # The untagged listener (rank 7, CPU 1) is never chosen while a
    # tagged one matches, and rank 1 gets the scans that start at 6 and
    # 7: double (the doubling bench-accept.md measured, 127.6 of 500).
    p = W.predict("incoming-cpu", [0, 1] * 4, {0: 1, 1: 1}, ncpu=2,
                  untagged=7)
    assert p.shares()[7] == 0
    assert p.shares()[1] == F(1, 4) and p.shares()[3] == F(1, 8)
    # Tagged listeners in a block: the scan favours the one after the gap.
    p = W.predict("incoming-cpu", [0, 0, 1, 1], {0: 1}, ncpu=2)
    assert p.matrix[0] == (F(3, 4), F(1, 4), 0, 0)


def test_cbpf_and_node_rr_rules():
    # 3 workers on 2 CPUs: groups = 1, index = cpu: rank 2 never chosen.
    p = W.predict("cbpf-cpu", [0, 1, 0], {0: 1, 1: 1}, ncpu=2)
    assert p.shares() == (F(1, 2), F(1, 2), 0) and p.remote() == 0
    # 5 workers: groups 2, CPU 1's second index (3) is rank 3; CPU 0's
    # index 2 is rank 2; rank 4 never.
    p = W.predict("cbpf-cpu", [0, 1, 0, 1, 0], {0: 1, 1: 1}, ncpu=2)
    assert p.shares()[4] == 0 and p.remote() == 0
    nodes = {0: 0, 1: 1}
    p = W.predict("ebpf-numa-rr", [0, 1, 0, 1], {0: 1, 1: 1}, ncpu=2,
                  nodes=nodes)
    assert p.remote() == 0
    p = W.predict("ebpf-numa-rr", [0, 1, 0, 1], {0: 1, 1: 1}, ncpu=2,
                  nodes={0: 0, 1: 0})
    assert p.remote() == F(1, 2)
    assert W.predict("noflag", [0, 1], {0: 1}, ncpu=2) is None
    with pytest.raises(ValueError):
        W.predict("reuseport", [], {0: 1}, ncpu=2)


def test_wakeups_by_cpu_arithmetic():
    # Hash, two workers, both CPUs receive: a quarter of all requests go
    # 0 -> 1 and a quarter 1 -> 0; each crossing wakes a worker on one CPU
    # and its client on the other: half a wakeup per request per CPU.
    p = W.predict("reuseport", [0, 1], {0: 1, 1: 1}, ncpu=2)
    assert p.remote() == F(1, 2)
    assert p.wakeups_by_cpu() == {0: F(1, 2), 1: F(1, 2)}
    # Receiving CPU 0 only, tags alone: CPU 0's range is rank 0 only, so
    # rank 1 starves and nothing crosses; dealt from CPU 0's counts both
    # are fed and half cross.
    topo = topology.load("1x2x1")
    tags = [model.Tag(0), model.Tag(1)]
    p = W.predict("ebpf-deal", [0, 1], {0: 4}, ncpu=2,
                  deal=model.deal(topo, tags, {}))
    assert p.shares() == (1, 0) and p.remote() == 0
    p = W.predict("ebpf-deal", [0, 1], {0: 4}, ncpu=2,
                  deal=model.deal(topo, tags, {0: 4}))
    assert p.shares() == (F(1, 2), F(1, 2))
    assert p.wakeups_by_cpu() == {0: F(1, 2), 1: F(1, 2)}
    assert W.client_conns(9, [0, 1]) == {0: 5, 1: 4}


def test_rows_and_formatting():
    w = W.run_wakeups(load("requests-reuseport-w2-n8-q50.json"))
    pred = W.predict("reuseport", [0, 1], {0: 4, 1: 4}, ncpu=2).as_json()
    (row,) = W.rows([("reuseport", [w, w], pred)])
    assert row[1] == "400"
    assert row[2] == "37.5 [p 50.0 -25%]"
    (c0, c1) = W.cpu_rows([("reuseport", [w], pred)])
    assert c0[:3] == ["reuseport", "0", "272"] and c1[2] == "135"
    assert W.fmt([-0.2, 3, 1]) == "1 (0-3)"
    assert W.deviation(5, 0) is None


# ------------------------------------------------------------- command


def _dry(tmp_path, *args):
    return CliRunner().invoke(bench, ["accept", "--dry-run", "--build-dir",
                                      str(tmp_path), *args])


def test_cli_request_workload_argv(tmp_path):
    res = _dry(tmp_path, "--setup", "reuseport", "--requests", "50",
               "--repetitions", "1", "--rx-cpus", "0", "--think-us", "100")
    assert res.exit_code == 0, res.output
    server = res.output.strip().splitlines()[-1]
    assert "-q 50 -F 1 -Z 100 -I 1000 -R 0" in server
    assert " -c" not in server      # the clients are acceptd's own


@pytest.mark.parametrize("args, msg", [
    (["--rx-cpus", "0"], "--rx-cpus goes with --requests"),
    (["--think-us", "5"], "--think-us goes with --requests"),
    (["--requests", "5", "--server", "serial"], "--server serial"),
    (["--requests", "5", "--client", "closed"], "--client closed"),
    (["--requests", "5", "--hold-ms", "5"], "--hold-ms"),
    (["--requests", "5", "--kill-first-at", "3"], "--kill-first-at"),
    (["--requests", "5", "--rx-cpus", "9999"], "--rx-cpus"),
    (["--requests", "5", "--deal-counts", "rx"], "--deal-counts"),
    (["--requests", "5", "--connections", "1", "--rx-cpus", "0,1"],
     "a connection per"),
    (["--requests", "-1"], "--requests"),
    (["--requests", "5", "--in-flight", "0"], "--in-flight"),
])
def test_cli_request_workload_refusals(tmp_path, args, msg):
    res = _dry(tmp_path, "--setup", "reuseport", *args)
    err = [x for x in res.output.splitlines() if x.startswith("Error")]
    assert res.exit_code == 2 and len(err) == 1 and msg in err[0], res.output


@LIVE
def test_live_request_run(tmp_path):
    res = CliRunner().invoke(bench, [
        "accept", "--json", "--build-dir", str(tmp_path), "--workers", "2",
        "--connections", "8", "--requests", "20", "--repetitions", "1",
        "--idle-ms", "50", "--setup", "reuseport", "--setup", "cbpf-cpu"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    rp, cb = doc["results"]
    for r in (rp, cb):
        f = r["runs"][0]["wakeups"]["figures"]
        assert f["requests"] == 160
        assert set(r["runs"][0]["wakeups"]["res_by_cpu"]) == {"0", "1"}
    # cbpf-cpu returns the receiving CPU's worker: nothing crosses, in the
    # workers' own count too (first principles, not a tolerance).
    f = cb["runs"][0]["wakeups"]["figures"]
    assert f["remote_pct"] == 0 and f["worker_wakeups_1k"] == 0
    assert cb["wakeups"]["predicted"]["remote_pct"] == 0
    assert rp["wakeups"]["predicted"]["remote_pct"] == 50.0


def test_knobs_request_workload():
    from rxl.bench import knobs as K
    k = K.Knobs(requests=40, in_flight=2, think_us=100, idle_ms=500,
                rx_cpus=(0,))
    k.validate(2)
    a = k.argv()
    assert a[a.index("-q") + 1] == "40" and a[a.index("-F") + 1] == "2"
    assert a[a.index("-Z") + 1] == "100" and a[a.index("-I") + 1] == "500"
    assert a[a.index("-R") + 1] == "0"
    assert "-q" not in K.Knobs().argv()
    # 512 connections x 40 requests x (0.1 + 2) ms, plus the idle window.
    assert K.Knobs(requests=40, think_us=100).extra_ms(512) == \
        pytest.approx(1000 + 512 * 40 * 2.1)
    with pytest.raises(ValueError, match="each CPU once"):
        K.Knobs(requests=1, rx_cpus=(0, 0)).validate(2)
    with pytest.raises(ValueError, match="--deal-counts"):
        K.Knobs(deal_counts="learned").validate(2)
    raw = {"version": 2, "setup": "ebpf-deal", "ncpu": 2, "deal_counts": "rx",
           "requests": {"per_connection": 40, "in_flight": 1,
                        "think_us": 100, "rx_cpus": [0]}}
    assert K.run_label(raw) == "ebpf-deal requests=40 think=100us rx=0 " \
                               "deal=rx"
    raw["requests"]["rx_cpus"] = [1, 0]          # every CPU: no rx= part
    assert K.run_label(raw) == "ebpf-deal requests=40 think=100us deal=rx"
