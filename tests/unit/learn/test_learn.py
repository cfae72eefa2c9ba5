"""Learning at accept(2) on the guest: plan, driver, parser, analysis, CLI.

Console logs under tests/data/learn/: ``synthetic-*.log`` are written by hand
with known counts (qemu-2s topology from tests/data/topology); learnd's own
output format is also checked by building learnd.c with the host compiler and
running it over loopback (skipped without a C compiler).
"""

import dataclasses
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from rxl.errors import BadOption
from rxl.learn import plan as L
from rxl.learn import results as R
from rxl.learn import metrics as M
from rxl.learn import drive as D
from rxl.decide import topology
from rxl.cli.main import main
from fakefreebsd import version_files

DATA = Path(__file__).resolve().parents[2] / "data" / "learn"
PATCHED = DATA / "synthetic-patched.log"
SPREAD = DATA / "synthetic-spread.log"
PRISTINE = DATA / "synthetic-pristine-panic.log"
QEMU = topology.load("qemu-2s")


def _runs(path):
    return R.parse_learn(path.read_text().splitlines())


# ------------------------------------------------------------------ plan

def test_phases_outlast_both_windows():
    ph = L.plan_phases()
    assert [p.name for p in ph] == ["warmup", "measured"]
    assert [p.byte for p in ph] == ["w", "m"]
    assert all(p.min_s > 2 * L.WINDOW_S for p in ph)
    assert ph[1].min_conns == 512 and ph[1].max_s == 120.0


@pytest.mark.parametrize("warm,meas", [(20, 30), (30, 20), (5, 60)])
def test_phase_not_longer_than_windows_is_refused(warm, meas):
    with pytest.raises(L.LearnError, match="not longer than the two 10 s"):
        L.plan_phases(warm, meas)


def test_boots_cover_every_config_and_keep_off_before_on():
    boots = L.plan_boots()
    assert [b.name for b in boots] == ["patched", "spread", "pristine"]
    assert [r.label for r in boots[0].runs] == [
        "learn-off.rxq", "learn-off.all", "learn-on.rxq", "learn-on.all"]
    assert [r.learning for r in boots[0].runs] == [0, 0, 1, 1]
    # the default guest's NIC is the igb (rxl.guest.targets.DEFAULT_SHAPE)
    assert boots[1].tunables == (("dev.igb.0.iflib.core_spread", "1"),)
    em = L.plan_boots(["learn-spread"], ["rxq"], driver="em")[0]
    assert em.tunables == (("dev.em.0.iflib.core_spread", "1"),)
    assert [r.label for r in boots[1].runs] == ["learn-spread.all", "learn-spread.rxq"]
    assert boots[2].kernel == "pristine"
    assert all(r.learning is None for r in boots[2].runs)


def test_boots_subset_and_errors():
    boots = L.plan_boots(["learn-spread"], ["all"])
    assert len(boots) == 1 and boots[0].runs == (L.RunPlan("learn-spread", "all", 1),)
    with pytest.raises(L.LearnError, match="unknown configuration"):
        L.plan_boots(["learn-maybe"])
    with pytest.raises(L.LearnError, match="no configuration"):
        L.plan_boots([], ["rxq"])


def test_config_of():
    assert L.config_of("learn-spread.all") == ("learn-spread", "all")
    with pytest.raises(L.LearnError):
        L.config_of("learn-on")
    with pytest.raises(L.LearnError):
        L.config_of("other.rxq")


def test_tree_lookups(tmp_path):
    assert L.socket_option(str(tmp_path), "TCP_REUSPORT_LB_CPU") is None
    assert L.learn_sysctl_name(str(tmp_path)) is None
    (tmp_path / "sys/netinet").mkdir(parents=True)
    (tmp_path / "sys/netinet/tcp.h").write_text(
        "#define\tTCP_REUSPORT_LB_NUMA   1026\t/* x */\n"
        "#define\tTCP_REUSPORT_LB_CPU\t1027\t/* set/get lbgroup CPU tag */\n")
    assert L.socket_option(str(tmp_path), "TCP_REUSPORT_LB_CPU") == 1027
    # commit 4: under the net.inet.tcp.reuseport_lb node
    (tmp_path / "sys/netinet/tcp_usrreq.c").write_text(
        "SYSCTL_PROC(_net_inet_tcp_reuseport_lb, OID_AUTO, learn,\n"
        "    CTLFLAG_VNET | CTLTYPE_INT | CTLFLAG_RW, NULL, 0, h, \"I\", \"x\");\n")
    assert L.learn_sysctl_name(str(tmp_path)) == "net.inet.tcp.reuseport_lb.learn"
    (tmp_path / "sys/netinet/tcp_usrreq.c").write_text(
        "SYSCTL_INT(_net_inet_tcp, OID_AUTO, reuseport_lb_learn,\n"
        "    CTLFLAG_VNET | CTLFLAG_RW, &x, 0, \"learn\");\n")
    assert L.learn_sysctl_name(str(tmp_path)) == "net.inet.tcp.reuseport_lb_learn"


def test_cc_argv():
    argv = L.learnd_cc_argv("/s/learnd.c", "/o/learnd", "/sysroot", lb_cpu_opt=0x1030)
    assert argv[1:3] == ["--target=x86_64-unknown-freebsd14.0", "--sysroot=/sysroot"]
    assert "-static" in argv and "-DLEARND_LB_CPU_OPT=0x1030" in argv
    assert argv[-3:] == ["-o", "/o/learnd", "/s/learnd.c"]
    assert not any(a.startswith("-DLEARND") for a in
                   L.learnd_cc_argv("a.c", "a", "/r", lb_cpu_opt=None))


def test_rc_sets_sysctl_pins_and_network():
    boot = L.plan_boots(["learn-off", "learn-on"], ["rxq"])[0]
    rc = L.render_learn_rc(boot, learn_sysctl="net.inet.tcp.reuseport_lb_learn",
                           deadline_s=200)
    assert "ifconfig igb0 inet 10.0.2.15/24 up" in rc
    assert rc.index("net.inet.tcp.reuseport_lb_learn=0") < rc.index(
        "net.inet.tcp.reuseport_lb_learn=1")
    assert "timeout 230 /rxl/learnd -w \"$nw\" -c \"$cpus\" -P 8080 -l learn-on.rxq -d 200" in rc
    assert "dev.igb.0.iflib.rxq*.cpu) rxq=" in rc
    em = L.render_learn_rc(boot, learn_sysctl="a.b", nic="em0")
    assert "ifconfig em0 inet 10.0.2.15/24 up" in em and "dev.em.0.iflib.rxq*.cpu)" in em
    assert rc.rstrip().endswith("reboot -p")
    if shutil.which("sh"):
        assert subprocess.run(["sh", "-n"], input=rc, text=True).returncode == 0


def test_free_workers_count_the_rxq_cpus_and_stay_unpinned():
    """The untagged accept path: as many workers as rxq CPUs, -c none."""
    assert L.DEFAULT_WORKER_SETS == ("rxq", "all")
    boots = L.plan_boots(["learn-on", "pristine"], ["free"])
    assert [r.label for b in boots for r in b.runs] == ["learn-on.free", "pristine.free"]
    assert L.config_of("learn-on.free") == ("learn-on", "free")
    rc = L.render_learn_rc(boots[0], learn_sysctl="net.inet.tcp.reuseport_lb_learn")
    block = rc[rc.index("LEARN BEGIN learn-on.free"):]
    assert block.index('cpus="$rxq"') < block.index('nw=$(count "$cpus")') < \
        block.index("cpus=none") < block.index('-c "$cpus"')
    pinned = L.render_learn_rc(L.plan_boots(["learn-on"], ["rxq"])[0],
                               learn_sysctl="net.inet.tcp.reuseport_lb_learn")
    assert "cpus=none" not in pinned
    if shutil.which("sh"):
        assert subprocess.run(["sh", "-n"], input=rc, text=True).returncode == 0


def test_rc_errors():
    boot = L.plan_boots(["learn-on"], ["rxq"])[0]
    with pytest.raises(L.LearnError, match="no learning sysctl"):
        L.render_learn_rc(boot, learn_sysctl=None)
    with pytest.raises(L.LearnError, match="driver"):
        L.render_learn_rc(boot, learn_sysctl="a.b", nic="eth-0")
    pristine = L.plan_boots(["pristine"], ["all"])[0]
    assert "LEARN SET" not in L.render_learn_rc(pristine, learn_sysctl=None)


def test_deadline_covers_longest_phases():
    assert L.run_deadline_s(L.plan_phases(25, 30)) == 25 + 120 + 120


# ---------------------------------------------------------------- driver

class FakeClock:
    def __init__(self, step):
        self.t, self.step = 0.0, step

    def __call__(self):
        self.t += self.step
        return self.t


def test_driver_stops_at_min_time_and_count():
    ph = L.Phase("measured", "m", min_s=10, max_s=100, min_conns=50, max_conns=1000)
    seen = []
    res = D.drive_phase(8080, ph, connect=lambda p, b: seen.append((p, b)) or True,
                        clock=FakeClock(0.1))
    # Two clock reads per connection (claim + nothing else) at 0.1 s each:
    # the time bound (10 s) is reached after ~50 claims, the count after 50.
    assert res.ok == res.attempts == len(seen) >= 50
    assert res.stopped_by == "done" and res.failed == 0
    assert set(seen) == {(8080, "m")}


def test_driver_time_and_count_bounds():
    ph = L.Phase("w", "w", min_s=5, max_s=5, min_conns=0, max_conns=10**6)
    res = D.drive_phase(1, ph, connect=lambda p, b: True, clock=FakeClock(1.0))
    assert res.stopped_by == "max_s" and res.attempts == 4
    ph = L.Phase("w", "w", min_s=100, max_s=100, min_conns=0, max_conns=7)
    res = D.drive_phase(1, ph, connect=lambda p, b: True, clock=FakeClock(0.01))
    assert res.stopped_by == "max_conns" and res.attempts == 7


def test_driver_gives_up_after_consecutive_failures():
    ph = L.Phase("m", "m", min_s=1000, max_s=1000, min_conns=5, max_conns=10**6)
    res = D.drive_phase(1, ph, connect=lambda p, b: False, clock=FakeClock(0.001),
                        max_consecutive_failures=25)
    assert (res.stopped_by, res.failed, res.ok) == ("failures", 25, 0)


def test_driver_threads_respect_max_conns():
    ph = L.Phase("m", "m", min_s=1000, max_s=30, min_conns=10**6, max_conns=300)
    res = D.drive_phase(1, ph, concurrency=4, connect=lambda p, b: True)
    assert res.attempts == res.ok == 300 and res.stopped_by == "max_conns"


def test_drive_run_retries_quit():
    calls = []

    def connect(port, byte):
        calls.append(byte)
        return byte != "q" or calls.count("q") == 3

    ph = [L.Phase("warmup", "w", 0, 0, 0, 10)]
    res = D.drive_run(1, ph, connect=connect, clock=FakeClock(0.0), sleep=lambda s: None)
    assert [r.name for r in res] == ["warmup", "quit"]
    assert (res[1].attempts, res[1].ok, res[1].failed) == (3, 1, 2)


def test_connect_refuses_non_loopback():
    with pytest.raises(L.LearnError, match="loopback only"):
        D.connect_once(80, "m", host="10.0.2.15")


# ----------------------------------------------------------------- parse

def test_parse_patched_log():
    runs = _runs(PATCHED)
    assert sorted(runs) == ["learn-off.rxq", "learn-on.all", "learn-on.rxq"]
    r = runs["learn-on.rxq"]
    assert r.complete and r.ready and r.rc == 0
    assert r.pins == [0, 2]
    assert r.sets == {"net.inet.tcp.reuseport_lb_learn": "1"}
    assert r.info["hcpu_opt"] == "0x1030"
    assert r.done == {"accepted": "1091", "elapsed_ms": "61234", "stop": "quit"}
    assert sum(c.n for c in r.counts if c.phase == "m") == 500
    assert R.Count("m", 0, 0, 2, 1, 5) in r.counts
    assert r.ftypes["m"] == {130: 500}
    assert r.sysctls == {"after.dev.em.0.queue_rx_0.rx_irq": "1234"}
    assert any("malformed learnd line" in n for n in r.notes)


def test_parse_truncated_run_is_incomplete():
    runs = _runs(PRISTINE)
    assert runs["pristine.rxq"].complete
    assert not runs["pristine.all"].complete and runs["pristine.all"].ready


def test_rxq_cpus_in_queue_order():
    two = {"dev.em.0.iflib.rxq1.cpu": 2, "dev.em.0.iflib.rxq0.cpu": 0,
           "dev.em.1.iflib.rxq0.cpu": 5}
    assert M.rxq_cpus(two, "em.0") == [0, 2]
    assert M.nic_device(two) is None and M.rxq_cpus(two) == []   # two NICs: say which
    igb = {f"dev.igb.0.iflib.rxq{q}.cpu": c for q, c in enumerate([0, 8, 2, 10, 4, 12, 6, 14])}
    igb["dev.igb.0.iflib.rxq10.cpu"] = 30     # queue order is numeric, not by name
    assert M.nic_device(igb) == "igb.0"
    assert M.rxq_cpus(igb) == [0, 8, 2, 10, 4, 12, 6, 14, 30]


# --------------------------------------------------------------- analyze

def test_learning_on_rxq_colocation_and_prediction():
    m = M.analyze(_runs(PATCHED)["learn-on.rxq"], QEMU, [0, 2])
    assert m.n == 500 and m.hcpu_source == "getsockopt"
    assert m.rx == {0: 250, 2: 250}
    assert m.colocated == pytest.approx(495 / 500)
    assert m.starved == 0 and m.policy == "deal"
    assert m.predicted_colocated == pytest.approx(1.0)
    assert m.hash_colocated == pytest.approx(0.5)
    assert [w.n for w in m.workers] == [255, 245]
    assert m.max_dev == pytest.approx(0.02)
    assert m.queue_agreement == pytest.approx(1.0) and m.hw_hashed == pytest.approx(1.0)
    assert [t.met for t in M.targets(m)] == [True, True]


def test_learning_off_behaves_as_hash():
    m = M.analyze(_runs(PATCHED)["learn-off.rxq"], QEMU, [0, 2])
    assert m.policy == "hash" and m.colocated == pytest.approx(253 / 500)
    assert m.predicted_colocated == pytest.approx(0.5)
    (t,) = M.targets(m)
    assert t.met and "as the hash" in t.what


def test_learning_on_all_cpus_without_spread_predicts_far_workers():
    m = M.analyze(_runs(PATCHED)["learn-on.all"], QEMU, [0, 2])
    # rx on CPUs 0 and 2 (socket 0): the deal serves 4-7 from socket 0.
    assert m.predicted_colocated == pytest.approx(0.25)
    assert m.predicted_same_socket == pytest.approx(0.5)
    assert m.same_socket == pytest.approx(0.5) and m.colocated == pytest.approx(0.25)
    # workers 4-7 (socket 1) are dealt from the receiving CPUs 0 and 2 in turn
    assert [(w.cls, w.predicted_cls, w.dealt_from) for w in m.workers] == \
        [("exact", "exact", [0]), ("smt", "smt", [0]), ("exact", "exact", [2]),
         ("smt", "smt", [2]), ("remote", "remote", [0]), ("remote", "remote", [0]),
         ("remote", "remote", [2]), ("remote", "remote", [2])]
    assert all(w.from_dealt == w.n == 64 for w in m.workers)
    assert m.by_distance == pytest.approx({"exact": .25, "smt": .25, "l3": 0, "node": 0,
                                           "far": 0, "remote": .5})
    assert m.predicted_by_distance == m.by_distance
    assert m.rx_cpus == [0, 2] and m.rx_colocated == 1.0
    assert {t.what: t.met for t in M.targets(m)} == {
        "every worker within +-10% of equal, n >= 512": True, "0 starved": True,
        "workers on receiving CPUs co-located >= 99%": True,
        "exact share = deal prediction (3 SD)": True}


def test_workers_on_receiving_cpus_must_be_colocated():
    """The exact ring is dealt first: a worker on a receiving CPU takes only
    that CPU's connections; one connection of 32 elsewhere misses the 99 %."""
    run = _runs(PATCHED)["learn-on.all"]
    run.counts = [dataclasses.replace(c, hcpu=2) if c.phase == "m" and c.worker == 0
                  and c.n == 64 else c for c in run.counts]
    run.counts.append(R.Count("m", 0, 0, 0, 0, 1))
    m = M.analyze(run, QEMU, [0, 2])
    assert m.rx_colocated == pytest.approx(65 / 129)   # worker 0: 1 of 65; worker 2: 64 of 64
    got = {t.what: t for t in M.targets(m)}
    assert not got["workers on receiving CPUs co-located >= 99%"].met
    assert "(CPUs 0,2)" in got["workers on receiving CPUs co-located >= 99%"].measured


def test_spread_all_targets():
    m = M.analyze(_runs(SPREAD)["learn-spread.all"], QEMU, [0, 4])
    assert m.rx == {0: 396, 4: 404}
    assert m.same_socket == pytest.approx(796 / 800)
    assert m.colocated == pytest.approx(0.25)
    assert m.predicted_colocated == pytest.approx(0.25, abs=0.01)
    assert m.max_dev == pytest.approx(0.0)
    met = {t.what: t.met for t in M.targets(m)}
    assert met == {"exact share = deal prediction (3 SD)": True,
                   "every worker within +-10% of equal, n >= 512": True, "0 starved": True,
                   "workers on receiving CPUs co-located >= 99%": True}


def test_spread_target_misses_below_512():
    """Every worker exactly its equal share and none starved: the +-10 % target
    misses at n = 504 only because n < 512, and is met at n = 512."""
    for per_worker, n, met in ((63, 504, False), (64, 512, True)):
        run = _runs(SPREAD)["learn-spread.all"]
        # worker 3's connections come in two counts (4 of them handshaken on CPU 4)
        run.counts = [dataclasses.replace(c, n=per_worker - (4 if c.worker == 3 else 0))
                      if c.phase == "m" and not (c.worker == 3 and c.n == 4) else c
                      for c in run.counts]
        m = M.analyze(run, QEMU, [0, 4])
        assert (m.n, m.max_dev, m.starved) == (n, 0.0, 0)
        got = {t.what: t.met for t in M.targets(m)}
        assert got["every worker within +-10% of equal, n >= 512"] is met
        assert got["0 starved"] is True


def test_spread_target_misses_with_starved_workers():
    run = _runs(SPREAD)["learn-spread.all"]
    run.counts = [c for c in run.counts if not (c.phase == "m" and c.worker >= 5)]
    m = M.analyze(run, QEMU, [0, 4])
    assert m.n == 500 and m.starved == 3
    met = {t.what: t.met for t in M.targets(m)}
    assert met["every worker within +-10% of equal, n >= 512"] is False
    assert met["0 starved"] is False


def test_pristine_uses_queue_derived_handshake_cpu():
    m = M.analyze(_runs(PRISTINE)["pristine.rxq"], QEMU, [0, 2])
    assert m.hcpu_source == "queue"
    assert m.rx == {0: 248, 2: 252}
    assert m.colocated == pytest.approx((130 + 132) / 500)
    assert m.queue_agreement is None


def test_analyze_errors():
    r = R.RunSummary("learn-on.rxq")
    with pytest.raises(L.LearnError, match="no workers"):
        M.analyze(r, QEMU, [0, 2])
    r.workers = [{"worker": 0, "cpu": 0, "accepts": 0, "errors": 0, "pinerr": 0}]
    with pytest.raises(L.LearnError, match="no connection"):
        M.analyze(r, QEMU, [0, 2])


def test_unknown_handshake_cpu_is_noted():
    r = R.RunSummary("pristine.rxq", workers=[
        {"worker": 0, "cpu": 0, "accepts": 3, "errors": 0, "pinerr": 0}],
        counts=[R.Count("m", 0, 0, -1, -1, 3)])
    m = M.analyze(r, QEMU, [0, 2])
    assert m.hcpu_source == "none" and m.colocated == 0.0
    assert any("not measurable" in n for n in m.notes)
    m = M.analyze(r, QEMU, [0])
    assert m.hcpu_source == "single-queue" and m.rx == {0: 3} and m.colocated == 1.0


def test_socket_of():
    assert [M.socket_of(QEMU, c) for c in range(8)] == [0] * 4 + [1] * 4
    assert M.socket_of(topology.load("1x4x2"), 7) == 0
    with pytest.raises(L.LearnError):
        M.socket_of(QEMU, 9)


def test_table_lists_every_worker_and_target():
    ms = [M.analyze(r, QEMU, [0, 4]) for r in _runs(SPREAD).values()]
    text = M.table(ms, topo_name="qemu-2s")
    assert text.splitlines()[0] == "guest topology: qemu-2s"
    assert text.index("learn-spread.all") < text.index("learn-spread.rxq")
    assert "target MET  workers on receiving CPUs co-located >= 99%: 100.0% (CPUs 0,4)" in text
    assert "       7    7    100   12.5%" in text
    assert "    l3     l3            4 100.0%" in text      # worker 7: class, dealt from 4
    assert "by distance: exact 25.0% (pred 25.0%)" in text


# ------------------------------------------------------------------- CLI

def test_cli_log_json():
    res = CliRunner().invoke(main, ["learn", "--log", str(PATCHED), "--log", str(SPREAD),
                                    "--json"])
    assert res.exit_code == 0, res.output
    import json
    doc = json.loads(res.stdout)
    byl = {r["label"]: r for r in doc["runs"]}
    assert set(byl) == {"learn-off.rxq", "learn-on.rxq", "learn-on.all", "learn-spread.all",
                        "learn-spread.rxq"}
    assert byl["learn-on.rxq"]["colocated"] == pytest.approx(0.99)
    assert doc["errors"] == []


def test_cli_log_with_crash_exits_nonzero(tmp_path):
    res = CliRunner().invoke(main, ["learn", "--log", str(PRISTINE), "--out", str(tmp_path)])
    assert res.exit_code == 1
    assert "pristine.all: no DONE line" in res.output  # stderr is mixed in with click 8.1 and 8.2
    assert (tmp_path / "learn.txt").read_text().startswith("guest topology")


def test_cli_bad_input_one_line():
    res = CliRunner().invoke(main, ["learn", "--warmup", "10", "--dry-run"])
    assert res.exit_code == 2 and "must be longer than the two 10 s" in res.output
    res = CliRunner().invoke(main, ["learn", "--warmup", "30", "--log", str(PATCHED)])
    assert res.exit_code == 2 and "'--warmup': not with --log" in res.output
    res = CliRunner().invoke(main, ["learn", "--log", "/nonexistent.log"])
    assert res.exit_code != 0 and "no such file" in res.output


def test_cli_dry_run_prints_commands(tmp_path, kernel_file):
    src = tmp_path / "src"
    (src / "sys/netinet").mkdir(parents=True)
    (src / "sys/netinet/tcp.h").write_text("#define\tTCP_REUSPORT_LB_CPU\t1027\n")
    version_files(src, major=15)  # a tree that says its release (rxl.tree.version)
    res = CliRunner().invoke(main, ["learn", "--src", str(src), "--objdir", str(tmp_path / "o"),
                                    "--guest-dir", str(tmp_path / "g"), "--dry-run",
                                    "--kernel", str(kernel_file),
                                    "--learn-sysctl", "net.inet.tcp.reuseport_lb_learn",
                                    "--config", "learn-on", "--config", "learn-spread"])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "learning sysctl net.inet.tcp.reuseport_lb_learn" in out
    assert f"--sysroot={tmp_path}/o{src}/amd64.amd64/tmp" in out
    assert "-DLEARND_LB_CPU_OPT=0x403" in out
    assert out.count("qemu-system-x86_64 ") == 2
    assert f"# kernel patched: {kernel_file} (given)" in out and "rig-src" not in out
    assert "hostfwd=tcp:127.0.0.1:<port>-:8080" in out
    assert "igb,netdev=net0,bus=rp0" in out     # the default guest: igb behind the pxb


def test_handshake_cpu_opt_is_refused(tmp_path, kernel_file):
    """The 15 series has one option: read on the accepted socket it is the
    handshake CPU."""
    (tmp_path / "sys").mkdir()
    res = CliRunner().invoke(main, ["learn", "--src", str(tmp_path), "--dry-run",
                                    "--kernel", str(kernel_file),
                                    "--config", "learn-on", "--learn-sysctl", "net.inet.tcp.x",
                                    "--handshake-cpu-opt", "0x1031"])
    assert res.exit_code == 2 and "No such option '--handshake-cpu-opt'" in res.output


def test_cli_pristine_needs_kernel_or_a_git_tree(tmp_path):
    (tmp_path / "sys").mkdir()
    version_files(tmp_path, major=15)  # the series' release (rxl learn refuses another)
    res = CliRunner().invoke(main, ["learn", "--src", str(tmp_path), "--config", "pristine"])
    assert res.exit_code == 2 and "not a git tree" in res.output
    assert "--pristine-kernel" in res.output


# ------------------------------------------- learnd itself, over loopback

@pytest.mark.skipif(not shutil.which("cc") or not sys.platform.startswith("linux"),
                    reason="needs a C compiler and Linux (SO_REUSEPORT build of learnd)")
def test_learnd_over_loopback(tmp_path):
    exe = tmp_path / "learnd"
    subprocess.run(["cc", "-O2", "-Wall", "-Werror", "-o", str(exe), str(L.learnd_source())],
                   check=True)
    port = D.free_port()
    proc = subprocess.Popen([str(exe), "-w", "2", "-P", str(port), "-l", "learn-on.rxq",
                             "-d", "30"], stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 10
        ready = proc.stdout.readline()
        assert "LEARN READY learn-on.rxq" in ready and time.monotonic() < deadline
        phases = [L.Phase("warmup", "w", 5, 5, 0, 7), L.Phase("measured", "m", 5, 5, 0, 25)]
        res = D.drive_run(port, phases, concurrency=2)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert [(r.name, r.ok) for r in res] == [("warmup", 7), ("measured", 25), ("quit", 1)]
    runs = R.parse_learn((ready + out).splitlines())
    r = runs["learn-on.rxq"]
    assert r.done["stop"] == "quit" and int(r.done["accepted"]) == 33
    by_phase = {p: sum(c.n for c in r.counts if c.phase == p) for p in "wmq"}
    assert by_phase == {"w": 7, "m": 25, "q": 1}
    assert r.pins == [-1, -1] and sum(w["accepts"] for w in r.workers) == 33


def test_cli_dry_run_overrides(tmp_path, kernel_file):
    (tmp_path / "sys").mkdir()
    version_files(tmp_path, major=15)
    res = CliRunner().invoke(main, ["learn", "--src", str(tmp_path), "--dry-run",
                                    "--kernel", str(kernel_file),
                                    "--config", "learn-on", "--learn-sysctl", "net.inet.tcp.x",
                                    "--lb-cpu-opt", "4144", "--tunable",
                                    "dev.em.0.iflib.disable_msix=1"])
    assert res.exit_code == 0, res.output
    assert "-DLEARND_LB_CPU_OPT=0x1030" in res.stdout
    assert "learning sysctl net.inet.tcp.x" in res.stdout
    assert "tunables {'dev.em.0.iflib.disable_msix': '1'}" in res.stdout
    # The QEMU line shows what the boot adds: --qemu-arg, --pcap, single TCG.
    res = CliRunner().invoke(main, ["learn", "--src", str(tmp_path), "--dry-run",
                                    "--kernel", str(kernel_file),
                                    "--config", "learn-on", "--learn-sysctl", "net.inet.tcp.x",
                                    "--lb-cpu-opt", "4144", "--qemu-arg=-gdb",
                                    "--qemu-arg=tcp:127.0.0.1:1234", "--pcap",
                                    "--tcg-single-thread", "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    qemu = [ln for ln in res.stdout.splitlines() if ln.startswith("qemu-system")]
    assert len(qemu) == 1 and " -gdb tcp:127.0.0.1:1234" in qemu[0]
    assert f"filter-dump,id=dump0,netdev=net0,file={tmp_path / 'o'}/patched.pcap" in qemu[0]
    assert "thread=single" in qemu[0]
    bad = CliRunner().invoke(main, ["learn", "--src", str(tmp_path), "--dry-run",
                                    "--tunable", "novalue"])
    assert bad.exit_code != 0 and "expected NAME=VALUE" in bad.output
    bad = CliRunner().invoke(main, ["learn", "--src", str(tmp_path), "--dry-run",
                                    "--kernel", str(kernel_file),
                                    "--config", "learn-on", "--lb-cpu-opt", "x"])
    assert bad.exit_code != 0 and "not an integer" in bad.output


def test_port_connector_draws_both_parities_and_retries():
    seen = []

    def fake(port, byte, src_port=None):
        seen.append(src_port)
        return len(seen) % 3 != 1          # calls 1, 4, 7, ... fail

    go = D.port_connector("random", seed=1, port_range=(20000, 20100), connect=fake)
    assert all(go(8080, "m") for _ in range(60))
    assert all(20000 <= p < 20100 for p in seen)
    assert {p % 2 for p in seen} == {0, 1}
    assert len(seen) == 90                 # 30 failed tries, each retried once
    assert go.retries == 30
    assert len(set(seen)) == 90            # no port again before the range is used up
    again = []
    D.port_connector("random", seed=1, port_range=(20000, 20100),
                     connect=lambda p, b, src_port=None: again.append(src_port) or True)(1, "w")
    assert again[0] == seen[0]             # seeded: reproducible
    kern = D.port_connector("kernel", connect=lambda p, b, src_port=None: src_port is None)
    assert kern(1, "w")
    with pytest.raises(L.LearnError):
        D.port_connector("sequential")


def test_single_thread_rewrites_the_accelerator():
    from rxl.learn.session import single_thread
    argv = ["qemu", "-machine", "q35,accel=tcg", "-cpu", "max"]
    assert single_thread(argv) == ["qemu", "-machine", "q35", "-accel", "tcg,thread=single",
                                   "-cpu", "max"]
    with pytest.raises(ValueError):
        single_thread(["qemu", "-machine", "q35"])


def test_cli_smp_option(tmp_path, kernel_file):
    (tmp_path / "sys").mkdir()
    version_files(tmp_path, major=15)
    res = CliRunner().invoke(main, ["learn", "--src", str(tmp_path), "--dry-run", "--config",
                                    "learn-on", "--learn-sysctl", "a.b", "--smp", "2,1,2",
                                    "--kernel", str(kernel_file)])
    assert res.exit_code == 0, res.output
    assert "-smp 4,sockets=2,cores=1,threads=2" in res.stdout
    bad = CliRunner().invoke(main, ["learn", "--src", str(tmp_path), "--dry-run", "--smp", "8"])
    assert bad.exit_code != 0 and "SOCKETS,CORES,THREADS" in bad.output


# ------------------------------------- recorded guest runs (2026-11-30)
# Console logs of `rxl learn` on the series kernel with the local rig fixes
# (docs/results/learning.md): boot "spread" and a learning-on boot.

REC_SPREAD = DATA / "recorded-c3fix-spread.log"
REC_ON = DATA / "recorded-c3fix-patched-on.log"


def test_recorded_spread_run():
    from rxl.learn.metrics import analyze_log
    a = analyze_log(str(REC_SPREAD))
    assert a["outcome"] == "completed" and a["errors"] == []
    assert a["rxq"] == [0, 4]
    assert a["sysctls"]["dev.em.0.iflib.core_spread"] == "1"
    by = {m.label: m for m in a["metrics"]}
    m = by["learn-spread.all"]
    assert (m.n, m.starved, m.hcpu_source) == (13720, 0, "getsockopt")
    assert m.rx == {0: 6923, 4: 6797}
    assert m.same_socket == pytest.approx(13690 / 13720)
    assert m.colocated == pytest.approx((1595 + 1622) / 13720)
    assert m.queue_agreement == 1.0 and m.hw_hashed == 1.0
    met = {t.what: t.met for t in M.targets(m)}
    assert met["0 starved"] and met["workers on receiving CPUs co-located >= 99%"]
    assert met["every worker within +-10% of equal, n >= 512"]
    assert not met["exact share = deal prediction (3 SD)"]      # the measured gap
    r = by["learn-spread.rxq"]
    assert r.colocated == pytest.approx(10359 / 10497)
    # Recorded with the seed's floor: 98.7 % meets the first target's 96 %,
    # not the dealt map's 99 %.
    assert {t.what: t.met for t in M.targets(r)} == \
        {"co-location >= 99%": False, "0 starved": True}


def test_recorded_learning_on_run():
    from rxl.learn.metrics import analyze_log
    a = analyze_log(str(REC_ON))
    assert a["errors"] == [] and a["rxq"] == [0, 2]
    by = {m.label: m for m in a["metrics"]}
    assert by["learn-on.rxq"].colocated >= 0.96
    assert by["learn-on.rxq"].learning == "net.inet.tcp.reuseport_lb_learn=1"
    allw = by["learn-on.all"]
    assert allw.predicted_colocated == pytest.approx(0.25, abs=0.005)
    assert allw.predicted_same_socket == pytest.approx(0.5, abs=0.005)
    assert allw.same_socket == pytest.approx(0.488, abs=0.001)


def test_recorded_pristine_run_behaves_as_the_hash():
    from rxl.learn.metrics import analyze_log
    a = analyze_log(str(DATA / "recorded-pristine-emfix.log"))
    assert a["errors"] == []
    by = {m.label: m for m in a["metrics"]}
    for label, hash_coloc in (("pristine.rxq", 0.5), ("pristine.all", 0.125)):
        m = by[label]
        assert m.hcpu_source == "queue" and m.policy == "hash"
        assert m.predicted_colocated == pytest.approx(hash_coloc)
        assert abs(m.colocated - hash_coloc) <= 3 * M.binomial_sd(hash_coloc, m.n)
        assert m.starved == 0
    assert by["pristine.all"].n == 11339 and by["pristine.rxq"].n == 6460


def test_recorded_series_spread_run_meets_the_targets():
    from rxl.learn.metrics import analyze_log
    a = analyze_log(str(DATA / "recorded-series-spread.log"))
    assert a["errors"] == [] and a["rxq"] == [0, 4]
    by = {m.label: m for m in a["metrics"]}
    m = by["learn-spread.all"]
    assert (m.n, m.starved) == (6698, 0)
    assert m.same_socket >= 0.96 and m.max_dev <= 0.10
    assert all(t.met for t in M.targets(m))
    assert by["learn-spread.rxq"].colocated >= 0.96


def test_cli_dry_run_refuses_what_the_run_would(tmp_path, kernel_file):
    """A tree without commit 3 and an impossible guest fail the dry run too."""
    src = tmp_path / "src"
    (src / "sys/sys").mkdir(parents=True)
    version_files(src, major=15)
    base = ["learn", "--src", str(src), "--objdir", str(tmp_path / "o"),
            "--guest-dir", str(tmp_path / "g"), "--dry-run", "--kernel", str(kernel_file),
            "--config", "learn-on"]
    res = CliRunner().invoke(main, base)
    # a tree without commit 4 is a bad --src (newcomer pass 5, P3: it was exit 1)
    assert res.exit_code == 2 and res.output.count("Error:") == 1
    assert f"--src {src}: no learning sysctl found" in res.output
    for extra, msg in ((["--smp", "0,0,0"], "'--smp': 0,0,0: SOCKETS 0: each of"),
                       (["--memory", "0"], "below 128 MiB per NUMA node")):
        res = CliRunner().invoke(main, base + extra)
        assert res.exit_code == 2 and msg in res.output, res.output
        assert res.exception is None or isinstance(res.exception, SystemExit)


def test_port_connector_uses_every_port_before_any_again():
    seen = []
    go = D.port_connector("random", seed=3, port_range=(30000, 30050),
                          connect=lambda p, b, src_port=None: seen.append(src_port) or True)
    for _ in range(120):
        go(8080, "m")
    assert sorted(seen[:50]) == list(range(30000, 30050))
    assert seen[50:100] == seen[:50]        # the same permutation, cycled


def test_idle_timeout_covers_a_run_held_by_its_deadline():
    """A run prints nothing between READY and its end; a guest held that long
    (long --warmup, gdb for rxl kcount) is not hung."""
    from rxl.learn import session
    assert session.idle_timeout(504) == 564
    assert session.idle_timeout(100) == 420



# ------------------------------------------- the guest's shape and kernels

def _learn_req(tmp_path, **kw):
    from rxl.learn import request
    base = dict(src=str(tmp_path / "src"), objdir=str(tmp_path / "o"), out=None,
                guest_dir=str(tmp_path / "g"), kernel=None, pristine_kernel=None,
                configs=("learn-on",), worker_sets=("all",), warmup=25.0, measured=30.0,
                min_conns=512, concurrency=4, learn_sysctl="net.inet.tcp.reuseport_lb.learn",
                topo_spec=None, memory_mib=None, logs=(), client_ports="random",
                lb_cpu_opt=None, groups_every=5.0, tunables=(),
                deadline_s=None, tcg_single_thread=False, smp="", guest_sysctls=(),
                nic_reinit=0, qemu_args=(), per_connection=False, pcap=False, dry_run=True)
    base.update(kw)
    return request.LearnRequest(**base)


def test_the_default_guest_is_the_numa_server_with_its_igb(tmp_path):
    from rxl.guest.targets import BUILTIN_SHAPES, Shape
    from rxl.learn import request
    chk = request.check(_learn_req(tmp_path))
    assert chk.shape == Shape() and chk.nic == "igb0"
    assert (chk.shape.vcpus, chk.shape.nic_domain, chk.shape.memory_mib) == (32, 0, 2048)
    assert chk.boots[0].runs[0].label == "learn-on.all"
    small = request.check(_learn_req(tmp_path, smp="2,2,2", memory_mib=1024,
                                     configs=("learn-spread",)))
    assert (small.shape.sockets, small.shape.dies, small.shape.cores, small.shape.threads,
            small.shape.numa_nodes, small.shape.memory_mib) == (2, 1, 2, 2, 2, 1024)
    assert small.boots[0].tunables == (("dev.igb.0.iflib.core_spread", "1"),)
    em = request.check(_learn_req(tmp_path, shape=Shape(**BUILTIN_SHAPES["two-l3"]),
                                  configs=("learn-spread",)))
    assert em.nic == "em0" and em.boots[0].tunables == (("dev.em.0.iflib.core_spread", "1"),)
    with pytest.raises(BadOption, match="SOCKETS,CORES,THREADS") as e:
        request.check(_learn_req(tmp_path, smp="8"))
    assert e.value.option == "--smp"


def test_a_qemu_too_old_for_the_shape_is_refused_before_any_build(tmp_path, monkeypatch):
    from rxl.guest import qemu
    from rxl.learn import request
    monkeypatch.setattr(qemu, "installed_version", lambda binary="x", run=None: (7, 2))
    with pytest.raises(request.LearnFailed) as e:
        request.check(_learn_req(tmp_path, dry_run=False))
    assert "needs QEMU >= 8.0 (its igb NIC); this host has 7.2" in str(e.value)
    assert not isinstance(e.value, request.LearnUsage)
    request.check(_learn_req(tmp_path, dry_run=True))           # a plan is not refused
    request.check(_learn_req(tmp_path, dry_run=False, logs=(str(PATCHED),)))


def _git_tree(path):
    (path / "sys/netinet").mkdir(parents=True)
    (path / "sys/netinet/tcp.h").write_text("#define\tTCP_REUSPORT_LB_CPU\t1027\n")
    version_files(path, major=15)  # the series' release (rxl learn refuses another)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(path), "-c", "user.email=t@t", "-c", "user.name=t",
                    "commit", "-qm", "x"], check=True)


def test_kernels_rxl_runs_or_rig_without_the_em_patch(tmp_path, monkeypatch):
    """igb needs no rig change: rxl run's kernel when its stamp matches, else a
    rig kernel with no guest patches; QEMU 7.2's e1000e gets patches/guest/."""
    from rxl.guest import qemu
    from rxl.guest.targets import BUILTIN_SHAPES, Shape
    from rxl.learn import request, session
    from rxl.tree import build as tree_build
    from rxl.verify import kernels
    _git_tree(tmp_path / "src")
    monkeypatch.setattr(qemu, "installed_version", lambda binary="x", run=None: (10, 0))
    req = _learn_req(tmp_path)
    s = session.prepare(req, request.check(req))
    assert not s.guest_patches and s.wanted == ["patched"]
    assert s.rig_plan.patches == () and "no guest patches" in s.rig_plan.lines()[0]
    assert any("without patches/guest/ (the igb0 NIC needs none)" in n for n in s.notes)
    kp = tree_build.kernel_path(req.src, req.objdir)
    kp.parent.mkdir(parents=True)
    kp.write_text("kernel")
    Path(str(kp) + ".rxl-stamp").write_text(kernels.kernel_stamp_text(req.src, str(kp)))
    s = session.prepare(req, request.check(req))
    assert s.kernels["patched"] == str(kp) and s.wanted == [] and s.rig_plan is None
    assert any("rxl run's: its stamp matches" in n for n in s.notes)
    lines = session.dry_run_lines(req, request.check(req), s)
    assert f"# kernel patched: {kp} (rxl run's: its stamp matches {req.src})" in lines
    monkeypatch.setattr(qemu, "installed_version", lambda binary="x", run=None: (7, 2))
    em = _learn_req(tmp_path, shape=Shape(**BUILTIN_SHAPES["two-l3"]))
    s = session.prepare(em, request.check(em))
    assert s.guest_patches and s.wanted == ["patched"]
    assert [p.name for p in s.rig_plan.patches] == \
        ["0001-em-Clear-ICR-under-MSI-X-for-QEMU-7.2-e1000e.patch"]
    assert any("with patches/guest/ (the em0 NIC under QEMU 7.2)" in n for n in s.notes)


def test_cli_target_names_the_guest_shape(tmp_path, kernel_file):
    (tmp_path / "sys").mkdir()
    version_files(tmp_path, major=15)
    base = ["learn", "--src", str(tmp_path), "--dry-run", "--config", "learn-on",
            "--learn-sysctl", "a.b", "--kernel", str(kernel_file)]
    res = CliRunner().invoke(main, base)
    assert res.exit_code == 0, res.output
    (q,) = [ln for ln in res.stdout.splitlines() if ln.startswith("qemu-system")]
    assert "-smp 32,sockets=2,dies=2,cores=4,threads=2 -m 2048M" in q
    assert "numa_node=0" in q and "-device igb,netdev=net0,bus=rp0" in q
    res = CliRunner().invoke(main, base + ["--target", "guest-e1000e", "--memory", "1024"])
    assert res.exit_code == 0, res.output
    (q,) = [ln for ln in res.stdout.splitlines() if ln.startswith("qemu-system")]
    assert "-smp 16,sockets=2,dies=2,cores=2,threads=2 -m 1024M" in q and "e1000e" in q
    for args, msg in ((["--target", "nosuch"], "nosuch: no such target"),
                      (["--target", "ssh://root@h"], "rxl learn boots its own QEMU guest"),
                      (["--targets", "/x.yaml"], "only with --target NAME")):
        bad = CliRunner().invoke(main, base + args)
        assert bad.exit_code == 2 and msg in bad.output, bad.output


def test_the_model_check_is_a_target_of_the_learning_runs():
    from rxl.learn import groups as G
    m = M.analyze(_runs(PATCHED)["learn-on.all"], QEMU, [0, 2])
    m.model_check = G.ModelCheck(copies=4, ranges_equal=4, n=1000, dealt=995)
    got = {t.what: (t.met, t.measured) for t in M.targets(m)}
    assert got["kernel maps = rxl deal of the kernel's counts"] == (True, "4 of 4 copies")
    assert got["connections dealt as rxl deal deals them >= 99%"] == (True, "99.50% of 1000")
    m.model_check = G.ModelCheck(copies=4, ranges_equal=3, n=1000, dealt=989,
                                 off=[(0, 20, 11)])
    got = {t.what: t.met for t in M.targets(m)}
    assert not got["kernel maps = rxl deal of the kernel's counts"]
    assert not got["connections dealt as rxl deal deals them >= 99%"]
    assert "not: rx 0 -> cpu 20 x11" in M.table([m])
    off = M.analyze(_runs(PATCHED)["learn-off.rxq"], QEMU, [0, 2])
    off.model_check = m.model_check          # learning off: the hash, no such target
    assert all("rxl deal" not in t.what for t in M.targets(off))
