"""``rxl learn`` with the kernel's observability: SO_HANDSHAKE_CPU, learning enabled explicitly
and restored, core_spread's new values, and the groups view per window.

The groups-view lines below follow the kernel's format (patches/0002 and
0003: ``in_pcblb_report()``; the same format ``rxl inspect`` reads); the
numbers are chosen so each derived value can be checked by hand.
"""

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from rxl.cli.main import main
from rxl.decide import model, topology
from rxl.learn import drive as D
from rxl.learn import groups as G
from rxl.learn import plan as L
from rxl.learn import results as R
from fakefreebsd import version_files

DATA = Path(__file__).resolve().parents[2] / "data" / "learn"
QEMU = topology.load("qemu-2s")

#: A group before capture, then dealt 16/16, then 15/17 (one of CPU 2's
#: 17 slots on CPU 0's worker), as learnd -G prints it for learn-on.rxq
#: (worker 0 on CPU 0, worker 1 on CPU 2).
_NOMAP = ["group port 8080 af inet members 2 gen 2 map 0 dirty 0 rebuilds 0 allocfail 0",
          "learn window_ms 10000 age_ms 0 rolls 0",
          "member 0 tag none - slots 0", "member 1 tag none - slots 0"]


def _dealt(rebuilds, rx0, rx2, r0):
    return [f"group port 8080 af inet members 2 gen {2 + rebuilds} map 32 dirty 0 "
            f"rebuilds {rebuilds} allocfail 0",
            f"learn window_ms 10000 age_ms 1200 rolls {rebuilds}",
            f"rx 0 prev {rx0[0]} cur {rx0[1]}", f"rx 2 prev {rx2[0]} cur {rx2[1]}",
            "member 0 tag 0 learned slots 16", "member 1 tag 2 learned slots 16",
            f"cpu 0 offset 0 slots {r0}", f"cpu 2 offset {r0} slots {32 - r0}"]


_WARM = "w:0:0:300,w:2:2:290"
SNAPSHOTS = [
    (0, "-", "-", _NOMAP),
    (30000, "w", _WARM, _dealt(3, (3000, 2900), (3000, 2900), 16)),
    (45000, "m", _WARM + ",m:0:0:125,m:2:2:120", _dealt(3, (3000, 2900), (3000, 2900), 16)),
    (60000, "m", _WARM + ",m:0:0:250,m:2:0:5,m:2:2:245",
     _dealt(4, (3000, 2500), (3000, 2500), 15)),
    (61000, "q", _WARM + ",m:0:0:250,m:2:0:5,m:2:2:245",
     _dealt(4, (3000, 2500), (3000, 2500), 15)),
]


def _g_lines(label="learn-on.rxq"):
    out = []
    for seq, (t, ph, x, lines) in enumerate(SNAPSHOTS):
        out.append(f"==RXL== LEARN G {label} seq={seq} t_ms={t} phase={ph} err=0 x={x}")
        out += [f"==RXL== LEARN GL {label} seq={seq} {ln}" for ln in lines]
    return out


def _views():
    runs = R.parse_learn(_g_lines())
    return G.views(runs["learn-on.rxq"].views)


# ------------------------------------------------------------------ parse

def test_g_lines_become_views_with_groups():
    vs = _views()
    assert [v.seq for v in vs] == [0, 1, 2, 3, 4]
    assert vs[0].group.map_slots == 0 and vs[0].counts == {}
    assert vs[3].counts[("m", 2, 0)] == 5 and vs[3].group.ranges == {0: (0, 15), 2: (15, 17)}
    assert [m.kind for m in vs[1].group.member_list] == ["learned", "learned"]


def test_malformed_lines_are_notes_not_crashes():
    runs = R.parse_learn(["==RXL== LEARN GL x.rxq seq=3 member 0 tag 0 learned slots 16",
                          "==RXL== LEARN G x.rxq seq=1 t_ms=5 err=0"])
    assert runs["x.rxq"].views == [] and len(runs["x.rxq"].notes) == 2
    with pytest.raises(ValueError, match="phase:hcpu:wcpu:n"):
        G.parse_counts("m:0:0")
    # A view the inspect parser refuses (slots do not add up) keeps the reason.
    bad = {"seq": 0, "t_ms": 0, "phase": "m", "err": 0, "x": "-",
           "lines": _dealt(1, (1, 1), (1, 1), 16)[:-2] + ["cpu 0 offset 0 slots 30"]}
    v = G.views([bad])[0]
    assert v.group is None and "ranges cover 30 of 32" in v.notes[0]


# ---------------------------------------------------------- derived values

def test_exact_slots_and_map_colocation():
    vs = _views()
    whole, split = vs[1].group, vs[3].group
    assert G.exact_slots(whole) == {0: 16, 2: 16} and G.whole(whole)
    assert G.map_colocation(whole) == 1.0
    # CPU 2's range has 17 slots, its worker 16: 1/17 of CPU 2's half crosses.
    assert G.exact_slots(split) == {0: 15, 2: 16} and not G.whole(split)
    assert G.map_colocation(split) == pytest.approx((5500 + 5500 * 16 / 17) / 11000)
    assert G.map_colocation(split, {0: 0, 2: 10}) == pytest.approx(16 / 17)
    assert G.map_colocation(vs[0].group) is None and not G.whole(vs[0].group)


def test_floor_map_matches_the_model():
    """The 15/17 map above is the one the seed's floor deals for 5,600:5,610
    handshakes (CPU 0's share 15.98 slots), and largest remainder gives 16/16."""
    counts = {0: 5600, 2: 5610}
    assert model.supply(32, counts, "floor") == {0: 15, 2: 17}
    assert model.supply(32, counts) == {0: 16, 2: 16}


def test_floor_colocation_from_a_copys_counts():
    """The same counts dealt by the seed's floor: 5,600:5,610 gives CPU 0 15
    slots, so CPU 2's worker-less 17th slot goes to CPU 0's worker."""
    g = _views()[1].group
    assert G.dealt_colocation(g) == 1.0          # 5,900:5,900: 16/16 either way
    g.rx = {0: (3000, 2600), 2: (3000, 2610)}
    assert G.dealt_colocation(g) == pytest.approx((5600 + 5610 * 16 / 17) / 11210)
    g.rx = {}
    assert G.dealt_colocation(g) is None
    text = "\n".join(G.render("learn-on.rxq", _views()))
    assert "(floor would 100.0%)" in text
    assert "dealt from each copy's counts (4 copies): largest remainder co-locates " \
        "100.0% on average, below 100% in 0; the floor 100.0%, below 100% in 0" in text
    g = _views()[1].group
    # The roll at 40 s of learn-spread.rxq in docs/results/learning.md: one
    # window of 1,417:1,546 handshakes, CPU 0's share 15.30 slots; largest
    # remainder too gives 15/17, 1 of CPU 2's 17 slots off its worker.
    g.rx = {0: (1417, 0), 2: (1546, 0)}
    assert G.dealt_colocation(g, "largest-remainder") == G.dealt_colocation(g) == \
        pytest.approx((1417 + 1546 * 16 / 17) / 2963)


def test_intervals_split_crossing_by_map_kind():
    ivs = G.intervals(_views())
    assert [iv.kind for iv in ivs] == ["changed", "whole", "changed", "partial"]
    assert ivs[0].n == {"w": 590} and ivs[0].co == {"w": 590}
    assert ivs[1].n == {"m": 245} and ivs[1].co == {"m": 245}
    assert ivs[2].n == {"m": 255} and ivs[2].co == {"m": 250}
    assert ivs[3].n == {}
    assert G.crossing_by_kind(ivs) == {"changed": (255, 5), "whole": (245, 0),
                                       "partial": (0, 0)}


def test_render_shows_each_window_and_the_split():
    text = "\n".join(G.render("learn-on.rxq", _views()))
    assert "t=  30.0s ph=w gen 5 rebuilds 3 rolls 3" in text
    assert "ranges 0:15(15 exact) 2:17(16 exact)" in text
    assert "members 0:0L/16 1:2L/16" in text and "map co-locates 97.1%" in text
    assert "then m 255 conns, 5 off the handshake CPU (changed map)" in text
    assert "measured phase by map: changed 255 conns, 5 off the handshake CPU; " \
           "partial 0 conns, 0 off the handshake CPU; whole 245 conns" in text
    assert G.render("x", []) == []
    none = G.render("x", [G.View(0, 0, "-", 2, {}), G.View(1, 5000, "w", 2, {})])
    assert len(none) == 2 and "no group on port 8080 in any copy (sysctl errno 2" in none[1]
    off = G.render("x", [G.View(0, 0, "-", 0, {})])
    assert "in any copy (the view lists only groups with a map" in off[1]
    v = G.View(0, 0, "-", 13, {})
    assert "view unreadable (errno 13)" in G.view_line(v)


def test_report_of_a_log_with_views(tmp_path):
    text = (DATA / "synthetic-patched.log").read_text().splitlines()
    at = text.index("==RXL== LEARN DONE learn-on.rxq accepted=1091 elapsed_ms=61234 stop=quit")
    log = tmp_path / "console-patched.log"
    log.write_text("\n".join(text[:at] + _g_lines() + text[at:]) + "\n")
    out = tmp_path / "o"
    res = CliRunner().invoke(main, ["learn", "--log", str(log), "--out", str(out)])
    assert "learn-on.rxq: groups view per window (5 copies" in res.stdout
    assert "changed 255 conns, 5 off the handshake CPU" in (out / "learn.txt").read_text()
    import json
    doc = json.loads((out / "learn.json").read_text())
    assert doc["views"]["learn-on.rxq"][3]["group"]["ranges"] == {"0": [0, 15], "2": [15, 17]}
    assert doc["views"]["learn-on.rxq"][1]["map_colocation"] == 1.0


# --------------------------------------------------------------- the plan

def test_spread_value_takes_turns_between_the_l3_groups_of_a_domain():
    """learn-spread boots core_spread=1: on a guest whose first domain holds
    two L3 groups the first two queues land on both; on qemu-2s (one L3 per
    socket) they stay on socket 0."""
    from pathlib import Path
    from rxl.decide import topology
    assert L.plan_boots(["learn-spread"], ["rxq"])[0].tunables == \
        ((L.spread_tunable("igb"), L.SPREAD_VALUE),)
    mode = int(L.SPREAD_VALUE)
    two = topology.load(str(Path(__file__).resolve().parents[2] / "data" /
                            "topology" / "qemu-2s2l3-numa.xml"))
    first = model.spread_order(two, range(0, 16, 2), mode=mode)[:2]
    assert two.l3_of(first[0]) is not two.l3_of(first[1])
    local = model.spread_order(QEMU, range(8), mode=mode)[:2]
    sockets = [g.cpus for g in QEMU.root.children]
    assert any(set(local) <= set(s) for s in sockets)


def test_rc_enables_learning_explicitly_restores_it_and_copies_the_view():
    boot = L.plan_boots(["learn-on"], ["rxq"])[0]
    rc = L.render_learn_rc(boot, learn_sysctl="net.inet.tcp.reuseport_lb_learn")
    run = rc[rc.index("LEARN BEGIN learn-on.rxq"):]
    assert run.index('was=$(sysctl -n net.inet.tcp.reuseport_lb_learn') < \
        run.index("sysctl net.inet.tcp.reuseport_lb_learn=1") < run.index("/rxl/learnd") < \
        run.index('net.inet.tcp.reuseport_lb_learn="$was"')
    assert f"-G {L.GROUPS_MS}" in run and L.GROUPS_MS == 5000
    # The lbgroup counters before and after the run, never the view's text.
    counters = run.index("sysctl -N net.inet.tcp.reuseport_lb")
    assert run.rindex("after.$n") > run.index("/rxl/learnd") and \
        run.count("sysctl -N net.inet.tcp.reuseport_lb") == 2 and "*.groups) ;;" in run[counters:]
    assert '$M SYSCTL net.inet.tcp.reuseport_lb_learn: ' in rc[:rc.index("LEARN BEGIN")]
    none = L.render_learn_rc(boot, learn_sysctl="a.b", groups_ms=0)
    assert " -G " not in none
    with pytest.raises(L.LearnError, match="groups_ms"):
        L.render_learn_rc(boot, learn_sysctl="a.b", groups_ms=50)
    pristine = L.render_learn_rc(L.plan_boots(["pristine"], ["rxq"])[0], learn_sysctl=None)
    assert "was=" not in pristine and "restored." not in pristine
    if shutil.which("sh"):
        assert subprocess.run(["sh", "-n"], input=rc, text=True).returncode == 0


def test_socket_options_from_tree_and_overrides(tmp_path, kernel_file):
    (tmp_path / "sys/netinet").mkdir(parents=True)
    (tmp_path / "sys/netinet/tcp.h").write_text(
        "#define\tTCP_REUSPORT_LB_CPU\t1027\t/* set/get lbgroup CPU tag */\n")
    version_files(tmp_path, major=15)
    src = str(tmp_path)
    assert L.socket_options(src, {}) == {"TCP_REUSPORT_LB_CPU": 1027}
    assert L.socket_options(src, {"TCP_REUSPORT_LB_CPU": "0x500"})["TCP_REUSPORT_LB_CPU"] == 0x500
    assert L.socket_options(str(tmp_path / "none"), {})["TCP_REUSPORT_LB_CPU"] is None
    with pytest.raises(L.LearnError, match="TCP_REUSPORT_LB_CPU 'x'"):
        L.socket_options(src, {"TCP_REUSPORT_LB_CPU": "x"})
    argv = L.learnd_cc_argv("l.c", "l", "/r", lb_cpu_opt=1027)
    assert "-DLEARND_LB_CPU_OPT=0x403" in argv
    assert not any("HANDSHAKE" in a for a in argv)
    res = CliRunner().invoke(main, ["learn", "--src", src, "--dry-run",
                                    "--kernel", str(kernel_file),
                                    "--config", "learn-on", "--learn-sysctl", "a.b",
                                    "--groups-every", "2.5"])
    assert res.exit_code == 0, res.output
    assert "TCP_REUSPORT_LB_CPU 0x403" in res.stdout and "every 2.5 s" in res.stdout
    assert "-DLEARND_LB_CPU_OPT=0x403" in res.stdout
    bad = CliRunner().invoke(main, ["learn", "--src", src, "--dry-run",
                                    "--kernel", str(kernel_file),
                                    "--groups-every", "0.01"])
    assert bad.exit_code != 0 and "--groups-every must be 0 or 0.1..3600 s" in bad.output


# ------------------------------------------------- learnd -G over loopback

@pytest.mark.skipif(not shutil.which("cc") or not sys.platform.startswith("linux"),
                    reason="needs a C compiler and Linux (SO_REUSEPORT build of learnd)")
def test_learnd_copies_the_view_and_counts(tmp_path):
    """On Linux the sysctl does not exist: every copy says so (errno 2), and
    the copy taken at the quit byte holds every warm-up and measured count."""
    exe = tmp_path / "learnd"
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(exe),
                    str(L.learnd_source())], check=True)
    port = D.free_port()
    proc = subprocess.Popen([str(exe), "-w", "2", "-P", str(port), "-l", "learn-on.rxq",
                             "-d", "30", "-G", "200"], stdout=subprocess.PIPE, text=True)
    try:
        ready = proc.stdout.readline()
        assert "LEARN READY" in ready
        phases = [L.Phase("warmup", "w", 0.5, 0.5, 0, 4), L.Phase("measured", "m", 0.5, 0.5, 0, 6)]
        time.sleep(0.3)
        D.drive_run(port, phases, concurrency=1)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    run = R.parse_learn((ready + out).splitlines())["learn-on.rxq"]
    vs = G.views(run.views)
    assert len(vs) >= 3 and all(v.err == 2 and v.group is None for v in vs)
    assert vs[0].phase == "-" and vs[-1].phase == "q"
    last = vs[-1].counts
    assert sum(n for (p, _, _), n in last.items() if p == "w") == 4
    assert sum(n for (p, _, _), n in last.items() if p == "m") == 6
    assert [v.t_ms for v in vs] == sorted(v.t_ms for v in vs)
    assert all(w["tag"] == "unknown" for w in run.workers)


# ------------------------------- the kernel's maps against rxl deal's (15 view)

NUMA = Path(__file__).resolve().parents[2] / "data" / "topology" / "qemu-2s2d4c2t-numa.xml"


def _view15(d, tags, rx_sum, *, ranges=None):
    """The 15 series' groups view of a group dealt ``d`` (abi15.md's format)."""
    lines = [f"group port 8080 af inet members {len(tags)} map {d.total_slots} "
             "rebuilds 4 nomap 0", "learn window_ms 10000 age_ms 500 rolls 3"]
    lines += [f"rx {c} last {n // 2} cur 7 sum {n}" for c, n in sorted(rx_sum.items())]
    lines += [f"member {i} tag {t} learned slots 16" for i, t in enumerate(tags)]
    lines += [f"cpu {c} offset {o} slots {k}"
              for c, (o, k) in sorted((ranges or d.ranges).items())]
    return lines


def test_model_check_deals_the_kernels_own_counts():
    """32 workers, one per CPU of the NUMA guest, receive on node 0's eight
    interrupt CPUs: rxl deal on the view's `sum` gives every copy's ranges, and a
    connection counts as dealt when its worker holds a slot of its handshake CPU's
    range; one sent to a worker of another range is not."""
    from rxl.decide import topology
    topo = topology.load(str(NUMA))
    tags = list(range(32))
    rx_sum = {c: 1000 + 10 * c for c in range(0, 16, 2)}
    d = model.deal(topo, [model.Tag(t, learned=True) for t in tags], rx_sum)
    dealt_from_0 = sorted({tags[i] for i in d.slots_of(0)})
    assert dealt_from_0 == [0, 1, 16, 17]      # exact, SMT, then node 1 in CPU order
    raw = []
    for seq, counts in enumerate([{}, {("m", 0, 0): 40, ("m", 0, 16): 38, ("m", 2, 3): 41},
                                  {("m", 0, 0): 80, ("m", 0, 16): 75, ("m", 2, 3): 80,
                                   ("m", 0, 20): 2, ("w", 0, 20): 9}]):
        x = ",".join(f"{p}:{h}:{w}:{n}" for (p, h, w), n in counts.items()) or "-"
        raw.append({"seq": seq, "t_ms": 5000 * seq, "phase": "m", "err": 0, "x": x,
                    "lines": _view15(d, tags, rx_sum)})
    c = G.model_check(G.views(raw), topo)
    assert (c.copies, c.ranges_equal) == (3, 3)
    assert (c.n, c.dealt) == (80 + 75 + 80 + 2, 80 + 75 + 80)
    assert c.off == [(0, 20, 2)]               # CPU 20's worker is dealt from CPU 4
    # a copy whose ranges are not rxl deal's is counted as such
    bad = dict(d.ranges)
    bad[0], bad[2] = (bad[0][0], bad[0][1] + 1), (bad[2][0] + 1, bad[2][1] - 1)
    raw[1]["lines"] = _view15(d, tags, rx_sum, ranges=bad)
    assert G.model_check(G.views(raw), topo).ranges_equal == 2
