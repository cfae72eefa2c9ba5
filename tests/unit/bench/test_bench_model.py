"""rxl bench accept: the event-loop model, new setups and
knobs, the command's input checks, and short live runs of each fault kind
(loopback only, a few connections each)."""

import json
import platform
import shutil

import pytest
from click.testing import CliRunner

from rxl.bench import accept as A
from rxl.bench.cli import bench

LIVE = pytest.mark.skipif(platform.system() != "Linux" or
                          not shutil.which("cc"), reason="needs Linux and cc")


def _dry(tmp_path, *args):
    res = CliRunner().invoke(bench, ["accept", "--dry-run", "--build-dir",
                                     str(tmp_path), *args])
    return res, res.output.strip().splitlines()


def _err(res):
    err = [x for x in res.output.splitlines() if x.startswith("Error")]
    assert res.exit_code != 0 and len(err) == 1, res.output
    return err[0]


@pytest.mark.parametrize("opt", ["--spacing-ms", "--work-ms", "--hold-ms",
                                 "--abort-share", "--lag-ms",
                                 "--mutex-delay-ms"])
@pytest.mark.parametrize("bad", ["nan", "inf", "-inf"])
def test_non_finite_floats_are_refused(tmp_path, opt, bad):
    res, _ = _dry(tmp_path, opt, bad)
    assert opt in _err(res)


def test_cc_splits_like_CC_and_defaults_to_it(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", "gcc -m64")  # its first word must be a program on PATH
    _, lines = _dry(tmp_path, "--setup", "noflag", "--repetitions", "1")
    assert lines[0].startswith("gcc -m64 -std=c99")
    _, lines = _dry(tmp_path, "--cc", "clang -O1", "--setup", "noflag",
                    "--repetitions", "1")
    assert lines[0].startswith("clang -O1 -std=c99")
    res, _ = _dry(tmp_path, "--cc", "'unbalanced")
    assert "--cc" in _err(res)


def test_repeated_setups_run_once(tmp_path):
    _, lines = _dry(tmp_path, "--setup", "noflag", "--setup", "noflag",
                    "--setup", "reorder16", "--setup", "reorder",
                    "--repetitions", "1", "--work-ms", "0", "--work-ms", "0")
    servers = lines[1:]
    assert len(servers) == 2
    assert "-m noflag" in servers[0] and "-m reorder" in servers[1]


def test_default_is_the_event_loop_and_every_setup_builds(tmp_path):
    _, lines = _dry(tmp_path, "--repetitions", "1")
    servers = lines[1:]
    assert len(servers) == len(A.DEFAULT_SETUPS)
    assert all("-M loop" in x and "-H 0" in x for x in servers)
    for s in ("et", "exclusive-et", "accept-mutex", "reuseport-prefork",
              "handoff-rr", "handoff-lc"):
        assert any(f"-m {s} " in x for x in servers), s


def test_serial_model_refuses_loop_only_setups(tmp_path):
    res, _ = _dry(tmp_path, "--server", "serial", "--setup", "handoff-rr")
    assert "'--server': serial cannot run --setup handoff-rr" in _err(res)
    _, lines = _dry(tmp_path, "--server", "serial", "--setup", "exclusive",
                    "--work-ms", "2000", "--repetitions", "1")
    assert "-M serial" in lines[1] and "-t 2000000" in lines[1]


def test_knob_options_reach_the_server(tmp_path):
    _, lines = _dry(tmp_path, "--setup", "incoming-cpu", "--workers", "1",
                    "--untagged", "none", "--hold-ms", "client",
                    "--accepts-per-wakeup", "1", "--client", "closed",
                    "--concurrency", "4", "--abort-share", "0.25",
                    "--work-kind", "cpu", "--work-ms", "1", "--repetitions", "1")
    argv = lines[1].split()
    for opt, val in (("-u", "none"), ("-H", "-1"), ("-a", "1"), ("-l", "4"),
                     ("-x", "250"), ("-T", "cpu"), ("-w", "1")):
        assert argv[argv.index(opt) + 1] == val, opt
    res, _ = _dry(tmp_path, "--setup", "incoming-cpu", "--workers", "2",
                  "--untagged", "2")
    assert "--untagged" in _err(res)
    res, _ = _dry(tmp_path, "--hold-ms", "3600000", "--connections", "10")
    assert "one hour" in _err(res)


def _live(tmp_path, *args):
    res = CliRunner().invoke(bench, ["accept", "--json", "--build-dir",
                                     str(tmp_path), "--repetitions", "1",
                                     *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)    # warnings go to stderr


@LIVE
def test_live_event_loop_keeps_the_exclusive_monopoly(tmp_path):
    """Fault 1: 8 long-lived connections on 8 workers.  The event loop
    gives the first registrant (nearly) all of them under EPOLLEXCLUSIVE;
    the serial model with a long work time hands one to each."""
    doc = _live(tmp_path, "--setup", "exclusive", "--workers", "8",
                "--connections", "8", "--hold-ms", "client")
    (run,) = doc["results"][0]["runs"]
    assert run["accepts"][0] / 8 >= 0.75
    assert run["open_max"][0] == run["accepts"][0]
    assert run["label"] == "exclusive hold=client"
    doc = _live(tmp_path, "--setup", "exclusive", "--server", "serial",
                "--workers", "4", "--connections", "4", "--work-ms", "300")
    (run,) = doc["results"][0]["runs"]
    assert run["accepts"] == [1, 1, 1, 1]
    # Drained, not cut: every worker finished its work before the end.
    assert not any(run["killed_at_end"]) and not any(run["busy_at_stop"])


@LIVE
def test_live_new_setups_accept_everything(tmp_path):
    doc = _live(tmp_path, "--workers", "4", "--connections", "16",
                "--setup", "handoff-rr", "--setup", "handoff-lc",
                "--setup", "accept-mutex", "--setup", "et",
                "--setup", "exclusive-et", "--setup", "reuseport-prefork")
    by = {r["setup"]: r["runs"][0] for r in doc["results"]}
    for setup, run in by.items():
        assert sum(run["accepts"]) == 16, setup
        assert run["completed"] == 16, setup
    # Round robin in user space: exactly even.
    assert by["handoff-rr"]["accepts"] == [4, 4, 4, 4]
    assert by["handoff-rr"]["acceptor"]["accepts"] == 16


@LIVE
def test_live_closed_loop_and_aborts(tmp_path):
    doc = _live(tmp_path, "--setup", "reuseport", "--workers", "2",
                "--connections", "200", "--client", "closed",
                "--concurrency", "4")
    run = doc["results"][0]["runs"][0]
    assert run["completed"] == 200 and run["conn_per_s"] > 0
    for key in ("connect_us", "response_us", "queue_wait_us"):
        assert run[key]["n"] > 0
        assert run[key]["p50"] <= run[key]["p99"] <= run[key]["max"]
    doc = _live(tmp_path, "--setup", "noflag", "--workers", "2",
                "--connections", "40", "--abort-share", "0.25")
    run = doc["results"][0]["runs"][0]
    assert run["aborted"] == 10 and run["connect_ok"] == 30
    assert sum(run["accepts"]) >= 30


@LIVE
def test_live_incoming_cpu_one_worker_all_tagged(tmp_path):
    doc = _live(tmp_path, "--setup", "incoming-cpu", "--workers", "1",
                "--untagged", "none", "--connections", "10")
    run = doc["results"][0]["runs"][0]
    assert run["accepts"] == [10] and run["untagged_rank"] == -1


def test_bounds_are_checked_and_printed_exactly(tmp_path):
    res, _ = _dry(tmp_path, "--reorder-every", "99999999999")
    assert "--reorder-every must be 1..1000000" in _err(res)
    # 3600001 was printed as "3.6e+06", the very bound it is above.
    res, _ = _dry(tmp_path, "--hold-ms", "3600001")
    assert "must be 0..3600000, got 3600001" in _err(res)


@LIVE
def test_live_handoff_drops_a_killed_worker(tmp_path):
    """A handoff worker killed mid-run: the acceptor's send to it is
    refused (its end has no other holder), so it leaves the rotation and
    no connection is handed to a dead worker after its death (18 of 200 were,
    before). One handoff can still be in the worker's socket buffer at the
    instant it dies (the send succeeded while it held its end): that one is
    lost with it (79 of 80 once, under load), never more."""
    doc = _live(tmp_path, "--setup", "handoff-rr", "--setup", "handoff-lc",
                "--workers", "4", "--connections", "80",
                "--kill-first-at", "20")
    for res in doc["results"]:
        (run,) = res["runs"]
        assert run["killed"] == [True, False, False, False], res["setup"]
        assert run["connect_ok"] == 80, res["setup"]
        assert 79 <= run["accepted"] <= 80, res["setup"]
        assert sum(run["accepts"]) == run["accepted"] and run["accepts"][0] <= 20
        assert run["acceptor"]["errors"] == 0


@LIVE
def test_live_kill_works_in_the_closed_loop(tmp_path):
    """--kill-first-at was silently ignored with --client closed."""
    doc = _live(tmp_path, "--setup", "exclusive", "--workers", "2",
                "--connections", "60", "--client", "closed",
                "--concurrency", "2", "--kill-first-at", "20")
    (run,) = doc["results"][0]["runs"]
    assert run["killed"] == [True, False]
    assert run["accepts"][0] <= 20 and run["accepts"][1] > 0


@LIVE
def test_live_handshake_aborts_say_when_they_came_too_late(tmp_path):
    """--abort-kind handshake closes right after connect(2); over loopback
    the handshake is complete by then, so every such abort is a reset
    after the handshake, and the run says so instead of claiming it cut
    handshakes short."""
    from rxl.bench import accept_stats as AS
    doc = _live(tmp_path, "--setup", "noflag", "--workers", "2",
                "--connections", "20", "--abort-share", "0.5",
                "--abort-kind", "handshake", "--hold-ms", "50")
    (run,) = doc["results"][0]["runs"]
    assert run["aborted"] == 10
    assert 0 <= run["aborted_established"] <= 10
    # Every established abort reached the accept queue.
    assert sum(run["accepts"]) >= 10 + run["aborted_established"]
    raw = {"aborted": 10, "aborted_established": 10,
           "abort_kind": "handshake"}
    fake = AS.Run(setup="noflag", workers=1, connections=20, work_ms=0,
                  connect_ok=10, connect_failed=0, accepted=20, order=[0],
                  accepts=[20], wakeups=[20], empty_wakeups=[0],
                  cpu_ms=[1.0], vcsw=[1], local=[0], killed=[False],
                  tagged=[False], exclusive=[False], raw=raw)
    assert any("10 of 10 handshake aborts came after" in w
               for w in AS.run_warnings(fake))
    raw["abort_kind"] = "reset"
    assert AS.run_warnings(fake) == []


@LIVE
def test_live_a_failed_pin_fails_the_run(tmp_path, monkeypatch):
    """--pin promises rank r on CPU r mod ncpu (the table, the JSON and
    the eBPF map rely on it); a pin the kernel refuses (a cpuset without
    that CPU, here a shim whose sched_setaffinity fails) used to be
    ignored silently.  It is now a one-line error."""
    import subprocess
    shim = tmp_path / "nopin.c"
    shim.write_text("#define _GNU_SOURCE\n#include <errno.h>\n"
                    "#include <sched.h>\n"
                    "int sched_setaffinity(pid_t p, size_t n, "
                    "const cpu_set_t *s)\n"
                    "{ (void)p; (void)n; (void)s; errno = EINVAL; "
                    "return (-1); }\n")
    so = tmp_path / "nopin.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(shim)],
                   check=True, timeout=60)
    A.ensure_built(tmp_path / "b", cc="cc")     # build without the shim
    monkeypatch.setenv("LD_PRELOAD", str(so))
    res = CliRunner().invoke(bench, ["accept", "--build-dir",
                                     str(tmp_path / "b"), "--repetitions",
                                     "1", "--setup", "noflag", "--workers",
                                     "2", "--connections", "4"])
    assert res.exit_code == 1
    assert "rank 0 cannot be pinned to CPU 0: Invalid argument" in \
        _err(res)
    res = CliRunner().invoke(bench, ["accept", "--build-dir",
                                     str(tmp_path / "b"), "--repetitions",
                                     "1", "--setup", "noflag", "--workers",
                                     "2", "--connections", "4", "--no-pin",
                                     "--client-cpu", "free", "--json"])
    assert res.exit_code == 0, res.output
