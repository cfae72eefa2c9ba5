"""rxl bench accept: pure parts on recorded runs, plus one short live run.

The recorded runs under tests/data/bench/ were produced by acceptd itself on
the 2-core Linux build host (see README there); the live test compiles the
server into a temporary build dir and runs 2 workers x 40 connections.
"""

import json
import platform
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from rxl.bench import accept as A
from rxl.bench import accept_stats as AS
from rxl.bench import accept_output as AO
from rxl.bench.cli import bench

DATA = Path(__file__).resolve().parents[2] / "data" / "bench"


def load(name):
    return AS.parse_run((DATA / name).read_text())


# ------------------------------------------------------------- parsing


def test_parse_exclusive_recorded():
    r = load("exclusive-w4-n60-r0.json")
    assert r.setup == "exclusive" and r.workers == 4
    assert r.order == [0, 1, 2, 3]
    assert len(r.accepts) == len(r.wakeups) == len(r.empty_wakeups) == 4
    assert len(r.cpu_ms) == 4 and all(c >= 0 for c in r.cpu_ms)
    assert sum(r.accepts) == r.accepted == r.connect_ok == 60
    # The first registrant took everything at zero work (seed 004).
    assert r.accepts[0] == 60 and r.share(0) == 1.0
    assert r.exclusive == [True] * 4
    assert r.lost == 0


def test_parse_noflag_recorded_has_herd():
    r = load("noflag-w4-n60-r0.json")
    assert sum(r.accepts) == 60
    # Every worker sleeps on every connection: the herd shows in vcsw.
    assert all(v >= 60 for v in r.vcsw)
    assert sum(r.wakeups) >= sum(r.accepts)
    assert all(e <= w for e, w in zip(r.empty_wakeups, r.wakeups))
    assert r.exclusive == [False] * 4


def test_parse_reverse_order_and_kill():
    r = load("exclusive-reverse-kill30-w4-n60.json")
    assert r.order == [3, 2, 1, 0]
    assert r.killed == [True, False, False, False]
    assert r.raw["kill_at"] == 30
    # The monopoly moves one seat: rank 0 until the kill, rank 1 after.
    assert r.accepts[0] == 30 and r.accepts[1] == 30


def test_parse_incoming_cpu_untagged_starves():
    r = load("incoming-cpu-w4-n60-r0.json")
    assert r.tagged == [True, True, True, False]
    assert r.accepts[3] == 0
    assert sum(r.local) == sum(r.accepts) == 60


@pytest.mark.parametrize("text,msg", [
    ("not json", "not JSON"),
    ('{"tool": "other"}', "not an acceptd"),
    ('{"tool": "acceptd", "version": 3}', "version"),
    ('{"tool": "acceptd", "version": 1, "workers": 2, '
     '"per_worker": [{}]}', "does not match"),
])
def test_parse_rejects(text, msg):
    with pytest.raises(A.BenchError, match=msg):
        AS.parse_run(text)


def test_parse_rejects_rank_order():
    d = json.loads((DATA / "exclusive-w4-n60-r0.json").read_text())
    d["per_worker"].reverse()
    with pytest.raises(A.BenchError, match="rank order"):
        AS.parse_run(json.dumps(d))
    d["per_worker"].reverse()
    del d["per_worker"][2]["cpu_ms"]
    with pytest.raises(A.BenchError, match="worker 2 lacks cpu_ms"):
        AS.parse_run(json.dumps(d))


# --------------------------------------------------------- summarising


def test_summarise_two_noflag_runs():
    runs = [load("noflag-w4-n60-r0.json"), load("noflag-w4-n60-r1.json")]
    s = AS.summarise(runs)
    assert s.label == "noflag"
    assert s.accepts.mean == 60 and s.accepts.lo == s.accepts.hi == 60
    wk = [sum(r.wakeups) for r in runs]
    assert s.wakeups.mean == pytest.approx(sum(wk) / 2)
    assert (s.wakeups.lo, s.wakeups.hi) == (min(wk), max(wk))
    for i, st in enumerate(s.per_rank):
        vals = [r.accepts[i] for r in runs]
        assert (st.lo, st.hi) == (min(vals), max(vals))
    assert sum(st.mean for st in s.per_rank) == pytest.approx(60)
    assert s.median_run in runs
    assert 0.25 <= s.top_share.mean <= 1.0


def test_summarise_rejects_mixed_and_empty():
    with pytest.raises(A.BenchError):
        AS.summarise([])
    with pytest.raises(A.BenchError, match="different setups"):
        AS.summarise([load("noflag-w4-n60-r0.json"),
                     load("exclusive-w4-n60-r0.json")])


def test_stat_fmt():
    assert AS.Stat.of([1, 2, 3]).fmt() == "2 (1-3)"
    assert AS.Stat.of([5, 5]).fmt() == "5"
    assert AS.Stat.of([0.5, 1.0]).fmt(1, pct=True) == "75.0% (50.0-100.0)"


def test_tables_and_json_shape():
    s = AS.summarise([load("exclusive-w4-n60-r0.json")])
    rows = AO.summary_rows([s])
    assert rows[0][0] == "exclusive" and rows[0][6] == "100.0%"
    text = AO.plain_table(AO.SUMMARY_COLUMNS, rows)
    assert text.splitlines()[0].startswith("setup")
    drows = AO.distribution_rows([s])
    assert drows[0][2] == "[60, 0, 0, 0]"
    doc = AO.results_json([s], {"workers": 4})
    run = doc["results"][0]["runs"][0]
    for key in ("accepts", "wakeups", "empty_wakeups", "cpu_ms"):
        assert len(run[key]) == 4
    assert run["accepts"] == [60, 0, 0, 0]
    json.dumps(doc)


# ------------------------------------------------------ argv and build


def test_server_argv_and_validation(tmp_path):
    cfg = A.RunConfig(workers=4, connections=60, spacing_ms=2, work_ms=5,
                      order=A.parse_order("reverse", 4), kill_first_at=30)
    argv = A.server_argv(tmp_path / "acceptd", "reorder16", cfg)
    assert argv[1:3] == ["-m", "reorder"]
    assert argv[argv.index("-s") + 1] == "2000"
    assert argv[argv.index("-t") + 1] == "5000"
    assert argv[argv.index("-o") + 1] == "3,2,1,0"
    assert argv[argv.index("-k") + 1] == "30"
    assert "-p" in argv and "-c" in argv
    assert int(argv[argv.index("-d") + 1]) >= 60 * 2 + A.DEADLINE_SLACK_MS
    with pytest.raises(A.BenchError, match="unknown setup"):
        A.server_argv("x", "nope", cfg)
    with pytest.raises(A.BenchError, match="kill-first-at"):
        A.RunConfig(connections=10, kill_first_at=10).validate()
    with pytest.raises(A.BenchError, match="workers"):
        A.RunConfig(workers=0).validate()


def test_parse_order():
    assert A.parse_order("forward", 3) is None
    assert A.parse_order("reverse", 3) == (2, 1, 0)
    assert A.parse_order("1,0,2", 3) == (1, 0, 2)
    for bad in ("1,1,2", "0,1", "a,b,c"):
        with pytest.raises(A.BenchError, match="--order"):
            A.parse_order(bad, 3)


def test_binary_path_tracks_source(tmp_path):
    src = tmp_path / "s.c"
    src.write_text("int main(void){return 0;}\n")
    a = A.binary_path(tmp_path, src)
    assert a == A.binary_path(tmp_path, src)
    src.write_text("int main(void){return 1;}\n")
    assert A.binary_path(tmp_path, src) != a


def test_check_platform():
    A.check_platform(A.SETUPS, system="Linux")
    A.check_platform(["reuseport", "noflag"], system="FreeBSD")
    with pytest.raises(A.BenchError, match="need Linux"):
        A.check_platform(["exclusive"], system="FreeBSD")


# ------------------------------------------------------------------ CLI


def test_cli_dry_run(tmp_path):
    res = CliRunner().invoke(bench, [
        "accept", "--dry-run", "--build-dir", str(tmp_path),
        "--setup", "exclusive", "--setup", "reuseport",
        "--repetitions", "2", "--work-ms", "0", "--work-ms", "5"])
    assert res.exit_code == 0, res.output
    lines = res.output.strip().splitlines()
    assert lines[0].startswith("cc ") and "-Werror" in lines[0]
    assert len(lines) == 1 + 2 * 2 * 2
    assert sum("-m exclusive" in x for x in lines) == 4
    assert not any(tmp_path.iterdir())      # nothing built


@pytest.mark.parametrize("args,msg", [
    (["--workers", "0"], "--workers"),
    (["--connections", "10", "--kill-first-at", "10"], "--kill-first-at"),
    (["--order", "0,0"], "--order"),
    (["--repetitions", "0"], "--repetitions"),
])
def test_cli_bad_input_one_line(tmp_path, args, msg):
    res = CliRunner().invoke(bench, ["accept", "--dry-run", "--build-dir",
                                     str(tmp_path), *args])
    assert res.exit_code != 0
    err = [x for x in res.output.splitlines() if x.startswith("Error")]
    assert len(err) == 1 and msg in err[0]


# ------------------------------------------------------------ live run


@pytest.mark.skipif(platform.system() != "Linux" or not shutil.which("cc"),
                    reason="needs Linux and cc")
def test_live_short_run(tmp_path):
    res = CliRunner().invoke(bench, [
        "accept", "--json", "--build-dir", str(tmp_path),
        "--workers", "2", "--connections", "40", "--repetitions", "1",
        "--setup", "reuseport", "--setup", "exclusive"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)    # warnings go to stderr
    setups = [r["setup"] for r in doc["results"]]
    assert setups == ["reuseport", "exclusive"]
    for r in doc["results"]:
        (run,) = r["runs"]
        assert sum(run["accepts"]) == 40
        # Every accept happens in a wakeup, and a wakeup drains at most
        # ACCEPT_BATCH (64) connections, so a busy machine may see fewer
        # wakeups than accepts, but never none for a worker that accepted.
        for acc, wk, empty in zip(run["accepts"], run["wakeups"],
                                  run["empty_wakeups"]):
            assert acc <= 64 * wk
            assert empty <= wk
        assert len(run["cpu_ms"]) == 2
    excl = doc["results"][1]["runs"][0]
    # The first registrant stays ahead under EPOLLEXCLUSIVE (seed 004:
    # in every one of its 18 zero-work runs, loaded or not).
    assert excl["accepts"][0] > excl["accepts"][1]
    # Built once, cached under the hash of the source.
    assert len(list(tmp_path.glob("acceptd-*"))) == 1


def test_plot_writes_png(tmp_path):
    pytest.importorskip("matplotlib")
    runs = [load("noflag-w4-n60-r0.json"), load("noflag-w4-n60-r1.json")]
    out = tmp_path / "shares.png"
    AO.plot_shares([AS.summarise(runs),
                   AS.summarise([load("exclusive-w4-n60-r0.json")])], out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_run_warnings():
    r = load("exclusive-w4-n60-r0.json")
    assert AS.run_warnings(r) == []
    r.accepted -= 2
    r.connect_failed = 1
    r.deadline_hit = True
    w = AS.run_warnings(r)
    assert any("deadline" in x for x in w)
    assert any("1 connects failed" in x for x in w)
    assert any("2 connected clients never accepted" in x for x in w)


def test_cli_plot_target_checked_before_running(tmp_path):
    pytest.importorskip("matplotlib")
    res = CliRunner().invoke(bench, [
        "accept", "--dry-run", "--build-dir", str(tmp_path), "--plot",
        str(tmp_path / "missing" / "x.png")])
    assert res.exit_code == 1
    assert "does not exist" in res.output


def test_plain_tables_without_rich(capsys):
    """--plain: the tables as plain text, no rich markup."""
    from rxl.bench import cli as bcli
    s = AS.summarise([load("incoming-cpu-w4-n60-r0.json")])
    bcli._echo_tables([s], use_rich=False)
    out = capsys.readouterr().out
    assert out.splitlines()[1].startswith("----")
    assert "0[u]" in out and "incoming-cpu" in out


def _no_server(monkeypatch, tmp_path):
    """Stub out the build and the server; returns the list of server runs."""
    calls = []
    monkeypatch.setattr(A, "ensure_built",
                        lambda *a, **k: tmp_path / "acceptd-stub")
    monkeypatch.setattr(A, "run_server",
                        lambda argv, t: calls.append(argv) or
                        (DATA / "noflag-w4-n60-r0.json").read_text())
    return calls


@pytest.mark.parametrize("dry", [False, True])
def test_cli_raw_dir_checked_before_the_first_run(tmp_path, monkeypatch, dry):
    calls = _no_server(monkeypatch, tmp_path)
    (tmp_path / "file").write_text("")
    res = CliRunner().invoke(bench, [
        "accept", "--raw-dir", str(tmp_path / "file" / "x"), "--setup",
        "noflag", "--repetitions", "1", "--connections", "10",
        "--build-dir", str(tmp_path / "b")] + (["--dry-run"] if dry else []))
    assert res.exit_code == 2 and res.exception is not None
    assert isinstance(res.exception, SystemExit)       # no traceback
    err = [x for x in res.output.splitlines() if x.startswith("Error")]
    assert len(err) == 1 and "--raw-dir" in err[0], res.output
    assert calls == []                                 # no run was started


def test_cli_raw_dir_is_created_and_filled(tmp_path, monkeypatch):
    _no_server(monkeypatch, tmp_path)
    raw = tmp_path / "raw" / "deeper"
    res = CliRunner().invoke(bench, [
        "accept", "--raw-dir", str(raw), "--setup", "noflag",
        "--repetitions", "1", "--workers", "4", "--plain"])
    assert res.exit_code == 0, res.output
    assert [p.name for p in raw.iterdir()] == ["noflag-work0-r0.json"]


@pytest.mark.parametrize("how", ["option", "env"])
def test_cli_bad_build_dir_is_one_line(tmp_path, monkeypatch, how):
    (tmp_path / "file").write_text("")
    bad = tmp_path / "file" / "x"
    args = ["accept", "--setup", "noflag", "--repetitions", "1",
            "--connections", "10"]
    if how == "option":
        args += ["--build-dir", str(bad)]
    else:
        monkeypatch.setenv("RXL_BUILD_DIR", str(bad))
    for extra in ([], ["--dry-run"]):
        res = CliRunner().invoke(bench, args + extra)
        assert res.exit_code == 2 and isinstance(res.exception, SystemExit)
        err = [x for x in res.output.splitlines() if x.startswith("Error")]
        assert len(err) == 1 and str(bad) in err[0], res.output
        assert ("--build-dir" if how == "option" else "RXL_BUILD_DIR") in err[0]


def test_ensure_built_bad_dir_is_a_bench_error(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(A.BenchError, match="cannot create"):
        A.ensure_built(tmp_path / "file" / "x")


@pytest.mark.parametrize("argv", [["--bogus"], ["--json", "x"], ["-h"]])
def test_bench_core_refuses_an_argument_it_does_not_take(monkeypatch, capsys, argv):
    """python -m rxl.bench.core --bogus ran the whole measurement and exited 0."""
    from rxl.bench import core as bench_core
    monkeypatch.setattr(bench_core, "measure", lambda: pytest.fail("measured"))
    monkeypatch.setattr("sys.argv", ["bench_core", *argv])
    assert bench_core.main() == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("Error: ") and "not an argument" in line


def test_bench_core_bad_build_dir_is_one_line(tmp_path, monkeypatch, capsys):
    """`RXL_BUILD_DIR=/dev/null/x make bench-core`: one line naming the variable,
    exit 2 (bad input, refused by the one reader, rxl.decide.core.build_dir)."""
    from rxl.bench import core as bench_core
    from rxl.decide import core
    from rxl.errors import UsageError
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("RXL_BUILD_DIR", str(tmp_path / "file" / "x"))
    monkeypatch.setattr("sys.argv", ["bench_core"])
    assert bench_core.main() == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"Error: RXL_BUILD_DIR {tmp_path / 'file' / 'x'}: cannot be created, "
                   f"{tmp_path / 'file'} is a file"]
    with pytest.raises(UsageError, match="RXL_BUILD_DIR .*cannot be created"):
        core.build(force=True)
