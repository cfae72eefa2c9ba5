"""Cross-CPU wakeups per request in the guest (rxl learn --requests): the
hw.intrcnt pair arithmetic (rxl.learn.intrcnt), learnd's snapshot lines
(rxl.learn.results), the figures and predictions (rxl.learn.wakeups), the
plan and checks, the driver, and learnd itself over loopback.

tests/data/learn/requests-format.log is written by hand in learnd's format
with counts that give one right value per figure (see tests/data/learn/README);
it is not a guest recording.
"""

import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from rxl.cli.main import main
from rxl.decide import topology
from rxl.learn import drive as D
from rxl.learn import intrcnt as C
from rxl.learn import metrics as M
from rxl.learn import plan as L
from rxl.learn import request as Q
from rxl.learn import results as R
from rxl.learn import wakeups as W
from fakefreebsd import kernel_bytes, version_files

DATA = Path(__file__).resolve().parents[2] / "data" / "learn"
FORMAT = DATA / "requests-format.log"
LABEL = "learn-off.rxq.r1"


def _run(path=FORMAT, label=LABEL):
    return R.parse_learn(path.read_text().splitlines())[label]


# --------------------------------------------------- hw.intrcnt pair

def test_intrcnt_pair_per_cpu_arithmetic():
    r = _run()
    assert r.notes == []
    assert sorted(r.intr) == [0, 1, 2]
    # A name with a blank, as hw.intrnames has it, is kept whole.
    assert r.intr[1]["irq264: igb0:rxq0"] == 501
    d = C.intr_delta(r.intr[1], r.intr[2])
    assert C.intr_per_cpu(d, "preempt") == {0: 2040, 1: 20}
    assert C.intr_per_cpu(d, "timer") == {0: 4000, 1: 4000}
    assert C.intr_per_cpu(d, "ast") == {0: 4, 1: 0}
    assert d["irq264: igb0:rxq0"] == 2100 and d["irq265: igb0:rxq1"] == 2000
    assert d["???"] == 0
    assert C.intr_kinds(d) == ("ast", "preempt", "timer")
    # Without COUNT_IPIS there is no preempt source: nothing, not zeros.
    assert C.intr_per_cpu({"cpu0:timer": 5, "cpu1:timer": 6}, "preempt") == {}


def test_intrcnt_pair_refuses_what_does_not_pair():
    r = _run()
    with pytest.raises(C.CounterError, match="went back"):
        C.intr_delta(r.intr[2], r.intr[1])
    after = dict(r.intr[2])
    del after["cpu1:preempt"]
    with pytest.raises(C.CounterError, match="gone"):
        C.intr_delta(r.intr[1], after)
    # A source attached between the copies counts from 0.
    after = {**r.intr[2], "irq266: igb0:rxq2": 9}
    assert C.intr_delta(r.intr[1], after)["irq266: igb0:rxq2"] == 9
    # cpu1 and cpu11 are two CPUs; one named twice is refused.
    assert C.intr_per_cpu({"cpu1:preempt": 1, "cpu11:preempt": 2}, "preempt") == {1: 1, 11: 2}
    with pytest.raises(C.CounterError, match="twice"):
        C.intr_per_cpu({"cpu1:preempt": 1, "cpu01:preempt": 2}, "preempt")


def test_malformed_snapshot_lines_are_notes():
    lines = ["==RXL== LEARN I a.b seq=0 n=5",              # no name
             "==RXL== LEARN I a.b seq=0 n=x cpu0:timer",
             "==RXL== LEARN S a.b seq=0 worker=0 reqs=1",   # counts missing
             "==RXL== LEARN SS a.b seq=0 t_ms=1 swtch=-2 intr_err=0"]
    r = R.parse_learn(lines)["a.b"]
    assert len(r.notes) == 4 and not r.intr.get(0) and not r.snaps and not r.snap_sys


# --------------------------------------------------------- figures

def test_run_wakeups_figures_from_the_format_log():
    r = _run()
    w = W.run_wakeups(r)
    assert (w.requests, w.xreqs, w.slept, w.xwakes, w.ctx) == (4000, 1000, 3700, 950, 3788)
    assert (w.window_ms, w.idle_ms) == (4000, 1000)
    assert w.preempt_net_by_cpu == {0: 2000.0, 1: 0.0} and w.preempt_net == 2000.0
    assert w.swtch_net == 4000.0
    f = w.figures
    assert f["xreq_1k"] == 250.0 and f["xwake_1k"] == 237.5 and f["slept_1k"] == 925.0
    assert f["ctx_1k"] == 947.0 and f["preempt_net_1k"] == 500.0 and f["swtch_net_1k"] == 1000.0
    assert w.connections == 100 and (w.config, w.workers_set, w.rep) == ("learn-off", "rxq", 1)


def test_run_wakeups_with_the_hash_prediction():
    """Two workers on CPUs 0 and 1 of a 1x2x1 machine, both receiving: the
    hash puts half the connections on another CPU (rxl outcomes --policy hash)."""
    topo = topology.load("1x2x1")
    r = _run()
    m = M.analyze(r, topo, [0, 1])
    assert m.policy == "hash" and m.colocated == 0.75
    assert m.predicted_colocated == pytest.approx(0.5)
    w = W.run_wakeups(r, m)
    assert w.predicted == pytest.approx({"xreq_1k": 500.0, "xwake_1k": 500.0,
                                         "on_rx_pct": 50.0})
    assert w.figures["on_rx_pct"] == 75.0


def test_tagged_predicts_the_deal_of_the_counts():
    """CPU 0 receives alone: a tagged group counts its handshakes with
    learning off (tcp.4), so, as learned, the deal of the counts shares CPU 0
    with worker 1 over the L3; the deal of the tags alone would give all of
    it to the worker tagged 0 and starve worker 1."""
    topo = topology.load("1x2x1")
    lines = ["==RXL== LEARN W {l} worker=0 cpu=0 accepts=8 errors=0 pinerr=0",
             "==RXL== LEARN W {l} worker=1 cpu=1 accepts=0 errors=0 pinerr=0",
             "==RXL== LEARN C {l} phase=m worker=0 wcpu=0 hcpu=0 q=0 n=8"]
    for label, exact in (("tagged.all", 0.5), ("learn-on.all", 0.5)):
        r = R.parse_learn([x.format(l=label) for x in lines])[label]
        m = M.analyze(r, topo, [0])
        assert m.policy == M.policy_of(label.split(".")[0])
        assert m.predicted_colocated == pytest.approx(exact), label


def _fake(label, xwakes, requests=1000):
    return W.RunWakeups(label, *L.config_of(label), L.repetition_of(label), 10, requests,
                        xwakes, 0, requests, xwakes, None, 1000, 1000, None, None,
                        colocated=0.5, predicted_colocated=0.5)


def test_summary_and_target_over_repetitions():
    runs = [_fake("learn-off.rxq.r1", 480), _fake("learn-off.rxq.r2", 500),
            _fake("learn-off.rxq.r3", 530), _fake("tagged.rxq.r1", 0),
            _fake("tagged.rxq.r2", 40), _fake("tagged.rxq.r3", 10),
            _fake("learn-on.rxq.r1", 90), _fake("learn-on.rxq.r2", 60),
            _fake("learn-on.rxq.r3", 70)]
    s = W.summary(runs[:3])
    assert s["runs"] == 3 and s["figures"]["xwake_1k"] == (500.0, 480.0, 530.0)
    assert "ctx_1k" not in s["figures"]           # not counted: left out
    assert s["predicted"]["xwake_1k"] == 500.0
    lines = W.table(runs)
    assert lines[2].startswith("| learn-off.rxq | 3 |") and "500 (480-530) [p 500]" in lines[2]
    assert [ln.split()[0] for ln in lines[2:5]] == ["|"] * 3
    targets = [ln for ln in lines if ln.startswith("target")]
    assert targets == [
        "target MISS learn-on.rxq x-cpu wakeups/1k <= 10% of learn-off.rxq's: 70 vs 500 (14.0%)",
        "target MET  tagged.rxq x-cpu wakeups/1k <= 10% of learn-off.rxq's: 10 vs 500 (2.0%)"]


def test_run_wakeups_refuses_a_run_without_snapshots():
    r = _run()
    del r.snaps[2]
    with pytest.raises(L.LearnError, match="no snapshot 2"):
        W.run_wakeups(r)
    r = _run()
    r.snaps[1][0]["reqs"] = 2001
    with pytest.raises(L.LearnError, match="went back"):
        W.run_wakeups(r)
    # A log without snapshots is no request run: skipped, no error.
    assert W.from_runs({"a.b": R.RunSummary("a.b")}, {}) == ([], [])


def test_learn_log_report_shows_the_wakeups_table():
    res = CliRunner().invoke(main, ["learn", "--log", str(FORMAT), "--topology", "1x2x1"])
    assert res.exit_code == 0, res.output
    assert "cross-CPU wakeups per 1,000 requests" in res.stdout
    row = next(ln for ln in res.stdout.splitlines() if ln.startswith("| learn-off.rxq |"))
    assert "| 250 [p 500] |" in row and "| 75.0 [p 50.0] |" in row and "| 500 |" in row


# ------------------------------------------------------------ plan

def test_plan_tagged_and_repetitions():
    boots = L.plan_boots(("learn-off", "tagged", "learn-on"), ("rxq",), repetitions=3)
    assert len(boots) == 1
    labels = [r.label for r in boots[0].runs]
    assert labels == [f"{c}.rxq.r{k}" for c in ("learn-off", "tagged", "learn-on")
                      for k in (1, 2, 3)]
    assert [r.learning for r in boots[0].runs] == [0] * 6 + [1] * 3
    assert [r.tagged for r in boots[0].runs] == [False] * 3 + [True] * 3 + [False] * 3
    assert [r.label for r in L.plan_boots(("tagged",), ("all",))[0].runs] == ["tagged.all"]
    with pytest.raises(L.LearnError, match="repetitions"):
        L.plan_boots(("tagged",), ("rxq",), repetitions=0)
    assert L.config_of("tagged.rxq.r12") == ("tagged", "rxq")
    assert L.repetition_of("tagged.rxq.r12") == 12 and L.repetition_of("tagged.rxq") == 0
    for bad in ("tagged.rxq.r0", "tagged.rxq.rx", "tagged.rxq.2", "tagged", "x.rxq.r1"):
        with pytest.raises(L.LearnError):
            L.config_of(bad)


def test_rc_tags_only_the_tagged_runs():
    boot = L.plan_boots(("learn-off", "tagged"), ("rxq",))[0]
    rc = L.render_learn_rc(boot, learn_sysctl="net.inet.tcp.reuseport_lb.learn")
    cmds = [ln for ln in rc.splitlines() if ln.startswith("timeout ")]
    assert len(cmds) == 2
    assert "-l learn-off.rxq " in cmds[0] and not cmds[0].endswith(" -T")
    assert "-l tagged.rxq " in cmds[1] and cmds[1].endswith(" -T")


def test_requests_deadline_and_checks():
    r = L.Requests(512, 40, 1.0).check()
    assert r.total == 20480
    ph = [p for p in L.plan_phases() if p.name == "warmup"]
    # 25 s warm-up + 120 s margin + 1 s idle + 20480 / 50 requests per s.
    assert L.run_deadline_s(ph, requests=r) == 25 + 120 + 1 + 410
    for bad in (L.Requests(0, 40), L.Requests(5, 0), L.Requests(5, 5, -1.0)):
        with pytest.raises(L.LearnError):
            bad.check()


def _req(tmp_path, **kw):
    kernel = tmp_path / "kernel"
    kernel.write_bytes(kernel_bytes())
    base = dict(src=str(tmp_path), objdir=str(tmp_path / "o"), out=None,
                guest_dir=str(tmp_path / "g"),
                kernel=str(kernel), pristine_kernel=None, configs=("learn-off",), worker_sets=("rxq",),
                warmup=25.0, measured=30.0, min_conns=512, concurrency=1, learn_sysctl=None,
                topo_spec=None, memory_mib=None, logs=(), client_ports="random",
                lb_cpu_opt=None, groups_every=5.0, tunables=(), deadline_s=None,
                tcg_single_thread=False, smp="", guest_sysctls=(), nic_reinit=0,
                qemu_args=(), per_connection=False, pcap=False, dry_run=True)
    base.update(kw)
    return Q.LearnRequest(**base)


def test_check_request_mode(tmp_path):
    chk = Q.check(_req(tmp_path, requests=40, connections=64, idle_s=2.0, repetitions=3))
    assert chk.requests == L.Requests(64, 40, 2.0)
    assert [p.name for p in chk.phases] == ["warmup"]
    assert chk.gsys[0] == ("kern.sched.idlespins", "0")
    assert len(chk.boots[0].runs) == 3
    # A value given wins over the measurement default.
    chk = Q.check(_req(tmp_path, requests=40, guest_sysctls=("kern.sched.idlespins=100",)))
    assert chk.gsys == [("kern.sched.idlespins", "100")]
    # Without --requests nothing changes.
    chk = Q.check(_req(tmp_path))
    assert chk.requests is None and [p.name for p in chk.phases] == ["warmup", "measured"]
    assert chk.gsys == []
    for kw, msg in ((dict(requests=-1), "--requests"), (dict(requests=4, connections=0),
                    "--connections"), (dict(requests=4, idle_s=-1.0), "--idle"),
                    (dict(repetitions=0), "--repetitions"),
                    (dict(requests=4, connections=L.MAX_KEPT + 1), "keeps at most")):
        with pytest.raises(Q.LearnUsage, match=msg):
            Q.check(_req(tmp_path, **kw))


def test_check_refuses_more_connections_than_files(tmp_path, monkeypatch):
    monkeypatch.setattr(Q, "_open_files", lambda: 1024)
    Q.check(_req(tmp_path, requests=4, connections=1024 - Q.FD_MARGIN))
    with pytest.raises(Q.LearnUsage, match="ulimit -n"):
        Q.check(_req(tmp_path, requests=4, connections=1024 - Q.FD_MARGIN + 1))
    # Without --requests --connections is not used: nothing to refuse.
    Q.check(_req(tmp_path, connections=5000))


def test_cli_dry_run_and_refusals(tmp_path, kernel_file):
    (tmp_path / "sys").mkdir()
    version_files(tmp_path, major=15)
    base = ["learn", "--src", str(tmp_path), "--dry-run", "--kernel", str(kernel_file),
            "--learn-sysctl", "net.inet.tcp.reuseport_lb.learn", "--lb-cpu-opt", "1027",
            "--workers", "rxq"]
    res = CliRunner().invoke(main, base + ["--config", "tagged", "--requests", "40",
                                           "--connections", "256", "--repetitions", "3"])
    assert res.exit_code == 0, res.output
    assert "runs tagged.rxq.r1, tagged.rxq.r2, tagged.rxq.r3" in res.stdout
    assert "256 connections kept open" in res.stdout and "40 requests per connection" in \
        res.stdout
    assert "guest sysctls: kern.sched.idlespins=0" in res.stdout
    for extra, msg in ((["--connections", "5"], "only with --requests"),
                       (["--requests", "-3"], "--requests must be >= 0"),
                       (["--requests", "3", "--repetitions", "0"], "--repetitions"),
                       (["--requests", "3", "--measured", "40"], "not with --requests"),
                       (["--requests", "3", "--min-conns", "9"], "not with --requests")):
        bad = CliRunner().invoke(main, base + extra)
        assert bad.exit_code == 2, bad.output
        errs = [ln for ln in bad.output.splitlines() if "rror" in ln]
        assert len(errs) == 1 and msg in errs[0], bad.output


# ---------------------------------------------------------- driver

class _FakeLearnd:
    """A loopback server speaking learnd's request protocol: 'M' -> 'k', then
    8-byte answers; 's' -> 'k' counted."""

    def __init__(self):
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(64)
        self.port = self.srv.getsockname()[1]
        self.snaps = 0
        self.answered = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        with c:
            b = c.recv(1)
            if b == b"s":
                self.snaps += 1
            c.sendall(b"k")
            if b != b"M":
                return
            try:
                while True:
                    req = D._recv_exact(c, 8)
                    c.sendall(D.REQ.pack(7, D.REQ.unpack(req)[1]))
                    self.answered += 1
            except OSError:
                return


def test_drive_requests_closed_loop():
    srv = _FakeLearnd()
    slept = []
    res = D.drive_requests(srv.port, L.Requests(6, 25, 0.5), concurrency=2,
                           sleep=slept.append)
    assert (res.ok, res.failed, res.requests, res.errors, res.snapshots) == (6, 0, 150, 0, 3)
    assert res.stopped_by == "done" and slept == [0.5] and srv.answered == 150
    with pytest.raises(L.LearnError, match="concurrency"):
        D.drive_requests(srv.port, L.Requests(1, 1), concurrency=0)
    with pytest.raises(L.LearnError, match="loopback only"):
        D.open_kept(srv.port, host="10.0.2.15")
    srv.srv.close()


# ------------------------------------------- learnd itself, over loopback

@pytest.mark.skipif(not shutil.which("cc") or not sys.platform.startswith("linux"),
                    reason="needs a C compiler and Linux (SO_REUSEPORT build of learnd)")
def test_learnd_requests_over_loopback(tmp_path):
    """learnd's in-band counts agree with its own per-connection counts: each
    measured connection carries the same requests, so a worker's cross-CPU
    requests are its connections received on another CPU times that many
    (the workers are pinned, so the CPU at accept is the CPU of every request)."""
    exe = tmp_path / "learnd"
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(exe),
                    str(L.learnd_source())], check=True)
    port = D.free_port()
    pins = "0,1" if len(__import__("os").sched_getaffinity(0)) >= 2 else "0"
    proc = subprocess.Popen([str(exe), "-w", "2", "-c", pins, "-P", str(port), "-l",
                             "tagged.rxq.r2", "-d", "60", "-T"], stdout=subprocess.PIPE,
                            text=True)
    try:
        ready = proc.stdout.readline()
        assert "LEARN READY tagged.rxq.r2" in ready
        res = D.drive_run(port, [L.Phase("warmup", "w", 0.2, 1, 0, 4)], concurrency=2,
                          requests=L.Requests(12, 30, 0.2), connect=D.port_connector("random", seed=time.time_ns()))
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert [r.name for r in res] == ["warmup", "requests", "quit"]
    assert res[1].requests == 360 and res[1].snapshots == 3
    r = R.parse_learn((ready + out).splitlines())["tagged.rxq.r2"]
    assert r.done["stop"] == "quit"
    # Linux has no TCP_REUSPORT_LB_CPU: -T reports EOPNOTSUPP (95), not silence.
    assert out.count("tagerr=95") == 2
    w = W.run_wakeups(r)
    assert w.requests == 360 and w.connections == 12 and w.ureqs == 0
    cross = sum(c.n for c in r.counts if c.phase == "m" and c.hcpu != c.wcpu)
    assert w.xreqs == 30 * cross
    assert 0 <= w.xwakes <= w.slept <= w.requests
    assert w.ctx is not None and w.ctx > 0


RECORDED = DATA / "recorded-wakeups-15.log"


def _raw_sums(lines, label, seq_a, seq_b):
    """Workers' S-line counts at snapshot seq_b minus seq_a, and hw.intrcnt's I-line
    counts likewise, read with a regex of their own (not rxl.learn's parser)."""
    import re
    s_re = re.compile(rf"==RXL== LEARN S {re.escape(label)} seq=(\d+) worker=(\d+) (.*)$")
    i_re = re.compile(rf"==RXL== LEARN I {re.escape(label)} seq=(\d+) n=(\d+) (.*)$")
    snap = {seq_a: {}, seq_b: {}}
    intr = {seq_a: {}, seq_b: {}}
    for ln in lines:
        m = s_re.match(ln)
        if m and int(m.group(1)) in snap:
            kv = dict(f.split("=") for f in m.group(3).split())
            snap[int(m.group(1))][int(m.group(2))] = {k: int(v) for k, v in kv.items()}
        m = i_re.match(ln)
        if m and int(m.group(1)) in intr:
            intr[int(m.group(1))][m.group(3)] = int(m.group(2))
    work = {k: sum(snap[seq_b][w][k] - snap[seq_a][w][k] for w in snap[seq_b])
            for k in ("reqs", "xreqs", "slept", "xwakes")}
    return work, {n: intr[seq_b][n] - intr[seq_a].get(n, 0) for n in intr[seq_b]}


def test_recorded_guest_run_counts_add_up_per_worker_and_per_cpu():
    """A recorded 15.0 guest run (docs/results/wakeups.md part 2: the hash and the
    learned deal, one pinned worker per igb RX queue, 512 connections x 20
    requests): the figures equal the per-worker sums of the S lines and the
    hw.intrcnt pair's per-source differences, computed here on the raw lines."""
    lines = RECORDED.read_text().splitlines()
    runs = R.parse_learn(lines)
    for label, xwake_1k in (("learn-off.rxq.r1", 673.5), ("learn-on.rxq.r1", 14.6)):
        r = runs[label]
        assert r.notes == [], label
        work, intr = _raw_sums(lines, label, 1, 2)
        w = W.run_wakeups(r)
        assert w.requests == work["reqs"] == 512 * 20
        assert (w.xreqs, w.slept, w.xwakes) == (work["xreqs"], work["slept"], work["xwakes"])
        assert round(w.figures["xwake_1k"], 1) == xwake_1k
        assert w.figures["xwake_1k"] == 1000 * work["xwakes"] / work["reqs"]
        d = C.intr_delta(r.intr[1], r.intr[2])
        rxq = {n: v for n, v in d.items() if "igb0:rxq" in n}
        assert len(rxq) == 8 and all(v > 0 for v in rxq.values())
        assert rxq == {n: v for n, v in intr.items() if "igb0:rxq" in n}
        # no COUNT_IPIS in that kernel: no preempt source, so no preempt figure
        assert C.intr_per_cpu(d, "preempt") == {} and w.figures["preempt_net_1k"] is None
        assert set(C.intr_per_cpu(d, "timer")) == set(range(32))


def test_a_worker_set_or_configuration_given_twice_is_refused():
    """`--workers rxq --workers rxq` was merged into one set without a word
    (newcomer pass 5, P14); each set and configuration is a run, given once."""
    for opt, val, what in (("--workers", "rxq", "worker set"),
                           ("--config", "tagged", "configuration")):
        res = CliRunner().invoke(main, ["learn", "--dry-run", opt, val, opt, val])
        assert res.exit_code == 2, res.output
        assert f"{val} given twice: each {what} runs once" in res.output
        assert res.output.count("Error:") == 1
