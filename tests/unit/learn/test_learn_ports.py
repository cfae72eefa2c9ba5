"""rxl.learn.ports: recomputing the kernel's slot choice from logged ports."""

import random

import pytest
from click.testing import CliRunner

from rxl.learn import results as R
from rxl.learn import ports as P
from rxl.decide import model, topology


def _spread_deal():
    """The guest's learn-spread.all map: 8 pinned workers, CPUs 0 and 4 receive."""
    topo = topology.load("qemu-2s")
    return model.deal(topo, [model.Tag(c, learned=True) for c in range(8)], {0: 100, 4: 100})


def test_member_intervals_follow_the_rings():
    d = _spread_deal()
    # CPU 0's 64 slots: exact (0), SMT sibling (1), then its L3 in member order.
    assert P.member_intervals(d, 0) == {0: [(0, 16)], 1: [(16, 32)], 2: [(32, 48)],
                                        3: [(48, 64)]}
    assert P.member_intervals(d, 4)[4] == [(0, 16)]


def _conns(j, d, n=400, seed=5):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        fport = rng.randrange(20000, 61000)
        cpu = rng.choice([0, 4])
        off, cnt = d.ranges[cpu]
        out.append((d.slots[off + (P.mixed(j, fport) * cnt >> 32)], fport, cpu))
    return out


def test_solve_recovers_what_decides_the_slot():
    d = _spread_deal()
    j = 0x5A17C0DE
    conns = _conns(j, d)
    got = P.solve(P.observations(conns, d, slack=0))
    assert got and all(g & 0xFFFF == j & 0xFFFF for g in got)
    a = P.analyze(conns, d)
    assert a.disagree <= 4 and a.agree >= 396    # edges only
    assert a.all_ports == pytest.approx([0.25] * 4, abs=0.001)


def test_solve_says_so_when_no_hash_fits():
    d = _spread_deal()
    conns = [(w, p, c) for (w, p, c) in _conns(0x1234, d)]
    rng = random.Random(9)
    shuffled = [(rng.choice([0, 1, 2, 3]), p, 0) for (_, p, _) in conns]
    with pytest.raises(P.PortsError, match="no J fits"):
        P.solve(P.observations(shuffled, d, slack=0))


def test_k_lines_parse_and_bad_items_are_notes():
    lines = ["==RXL== LEARN K r worker=3 40000:0 40001:4",
             "==RXL== LEARN K r worker=1 41000:-1",
             "==RXL== LEARN K r worker=2 zz:0"]
    run = R.parse_learn(lines)["r"]
    assert run.conns == [(3, 40000, 0), (3, 40001, 4), (1, 41000, -1)]
    assert any("K item 'zz:0'" in n for n in run.notes)


def test_cli_without_k_lines_is_one_line(tmp_path):
    log = tmp_path / "c.log"
    log.write_text("==RXL== LEARN DONE r accepted=0 elapsed_ms=1 stop=quit\n"
                   "==RXL== LEARN END r rc=0\n")
    res = CliRunner().invoke(P.main, [str(log), "--label", "r"])
    assert res.exit_code == 2 and "--per-connection" in res.output
    res = CliRunner().invoke(P.main, [str(log), "--label", "nope"])
    assert res.exit_code == 2 and "'--label': nope: no run of" in res.output


def test_cli_says_when_the_run_had_no_map(tmp_path):
    log = tmp_path / "c.log"
    log.write_text("==RXL== LEARN SET r net.inet.tcp.reuseport_lb_learn=0\n"
                   "==RXL== LEARN W r worker=0 cpu=0 accepts=1 errors=0 pinerr=0\n"
                   "==RXL== LEARN K r worker=0 40000:0\n")
    res = CliRunner().invoke(P.main, [str(log), "--label", "r"])
    assert res.exit_code == 2 and "learning was off" in res.output


def test_learnd_lines_with_5000_digits_or_negative_counts_are_notes():
    """A 5,000-digit number raised int()'s ValueError out of parse_learn (a
    traceback under rxl learn --log); a count of -1 made 'n=-4 measured
    connections' and exit 0. Both are now malformed lines, kept as notes; an
    END whose rc= is unreadable damages the run (its line named)."""
    big = "9" * 5000
    lines = [f"==RXL== LEARN K r worker=3 40000:{big}",
             f"==RXL== LEARN W r worker=0 cpu=0 accepts={big} errors=0 pinerr=0",
             "==RXL== LEARN W r worker=1 cpu=-1 accepts=-1 errors=0 pinerr=0",
             "==RXL== LEARN C r phase=m worker=0 wcpu=-2 hcpu=0 q=0 n=1",
             "==RXL== LEARN C r phase=m worker=0 wcpu=-1 hcpu=-1 q=-1 n=1",
             f"==RXL== LEARN END r rc={big}"]
    run = R.parse_learn(lines)["r"]
    assert run.conns == [] and run.workers == [] and run.rc is None
    assert [c.n for c in run.counts] == [1]
    assert len(run.notes) == 4 and all(len(n) < 300 for n in run.notes)
    assert len(run.damage) == 1 and run.damage[0].startswith("line 6: END without a readable "
                                                              "rc=: ")
    assert len(run.damage[0]) < 300
    assert any("K item" in n for n in run.notes)
    assert any("accepts=-1" in n for n in run.notes)
    assert any("wcpu=-2" in n for n in run.notes)


def test_a_g_line_with_5000_digit_counts_keeps_the_view_without_them():
    from rxl.learn import groups as G
    big = "9" * 5000
    run = R.parse_learn([f"==RXL== LEARN G r seq=1 t_ms=5 phase=m err=0 x=m:0:0:{big}",
                         f"==RXL== LEARN GL r seq=1 group port {big} af inet members 0 "
                         "gen 5 map 0 dirty 0 rebuilds 3 allocfail 0"])["r"]
    (v,) = G.views(run.views)
    assert v.counts == {} and v.group is None
    assert len(v.notes) == 2 and "is not phase:hcpu:wcpu:n" in v.notes[0]
    assert "line 1: not a group line" in v.notes[1]  # the view's damaged line, named
    assert all(len(n) < 200 for n in v.notes)
