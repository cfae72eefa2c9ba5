"""The harness under faults: damaged logs, hung and panicked guests, full disks.

A guest that panics mid-case, hangs, reboots or prints a WITNESS warning; a
console log cut at any byte or damaged; a build that fails; a disk full
while staging the image: each must give a clear verdict with the log kept,
never a PASS, and no parser of a saved artifact may raise.
"""

import errno
import json
import random
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from rxl.bench import kcount
from rxl.cli.main import main
from rxl.guest.console import GuestCrashed, GuestPanic, watch
from rxl.tree.build import BuildError
from rxl.verify import pipeline
from rxl.verify.ownguest import SerialGuest
from rxl.verify.pipeline import StageRecord
from rxl.verify.request import RunRequest
from rxl.verify.parse import parse_console, parse_file

from guest.test_console import Clock, Scripted

DATA = Path(__file__).resolve().parents[2] / "data" / "console"
LOGS = sorted(DATA.glob("*.log"))
OUTCOMES = {"completed", "panic", "witness", "rebooted", "crashed", "damaged"}
END = b"\n==RXL== END"


def _positions(data: bytes, n: int = 100):
    """``n`` evenly spread byte offsets, plus offsets inside and around each
    sentinel (before it, in the marker, in its keyword, after its keyword)."""
    pos = set(range(0, len(data) + 1, max(1, len(data) // n)))
    at = data.find(b"==RXL==")
    while at >= 0:
        pos.update(p for p in (at - 1, at, at + 3, at + 9, at + 11, at + 13) if 0 <= p <= len(data))
        at = data.find(b"==RXL==", at + 1)
    return sorted(pos)


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.stem)
def test_a_log_cut_at_any_byte_never_raises_and_never_passes_early(path):
    data = path.read_bytes()
    end = data.find(END)
    for cut in _positions(data):
        r = parse_console(data[:cut].decode("utf-8", "replace").splitlines())
        assert r.outcome in OUTCOMES
        if end < 0 or cut < end + len(END):
            assert r.outcome != "completed", f"cut at {cut} of {len(data)}"


JUNK = [b"a", b"<", b"\x00\xff", b"</group>", b'level="x"', b"<cpu>0, a</cpu>",
        b"\n==RXL== CASE /p c rc=" + b"9" * 5000 + b" t=1 passed\n",
        b"\ndev.em.0.iflib.rxq0.cpu: " + b"7" * 5000 + b"\n",
        b"\n==RXL== BEGIN again\n", b"\n==RXL== END\n", b"\n==RXL== TOPOLOGY BEGIN\n",
        b"\nlock order reversal:\n", b"\n" + b"<group>" * 3000 + b"\n"]


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.stem)
def test_a_damaged_log_never_raises(path):
    data = path.read_bytes()
    rnd = random.Random(path.name)  # the same damage every run
    for _ in range(60):
        at = rnd.randrange(len(data) + 1)
        cut = at + rnd.choice((0, 0, 1, 5))
        damaged = data[:at] + rnd.choice(JUNK) + data[cut:]
        r = parse_console(damaged.decode("utf-8", "replace").splitlines())
        assert r.outcome in OUTCOMES
        json.dumps(r.to_dict(), default=str)


def _run(*body, label="t"):
    return parse_console([f"==RXL== BEGIN {label}", *body, f"==RXL== END {label}"])


@pytest.mark.parametrize("xml", [
    '<groups><group level="1" cache-level="0"><cpu count="2">0, a</cpu></group></groups>',
    '<groups><group level="1" cache-level="x"><cpu count="1">0</cpu></group></groups>',
    "<groups>" + "<group><cpu>0</cpu><children>" * 3000 + "</children></group>" * 3000
    + "</groups>",
])
def test_a_bad_topology_block_damages_the_run(xml):
    """Issue 27, eighth pass, fault 15: this was a note and the run "completed"
    (exit 0), though the queue placement cannot be judged without it."""
    r = _run("==RXL== TOPOLOGY BEGIN", xml, "==RXL== TOPOLOGY END",
             "==RXL== LIST /p a", "==RXL== CASE /p a rc=0 t=1 passed")
    assert r.topology is None and r.outcome == "damaged"
    assert any(n.startswith("line 2: console topology block: ") for n in r.notes), r.notes


def test_numbers_too_long_for_their_field_are_notes():
    digits = "9" * 5000
    r = _run("==RXL== ATF BEGIN", "==RXL== LIST /p a", f"==RXL== CASE /p a rc={digits} t=1 passed",
             f"dev.em.0.iflib.rxq0.cpu: {digits}", f"==RXL== SYSCTL dev.em.0.iflib.rxq1.cpu: {digits}",
             "==RXL== ATF END")
    assert [c.status for c in r.cases] == ["crashed"]      # its CASE line is unreadable
    assert r.rxq == {}
    assert any("malformed CASE" in n for n in r.notes)
    assert all(len(n) < 400 for n in r.notes)               # cut, not 5,000 digits


def test_only_an_end_marker_or_no_cases_never_exits_0(tmp_path):
    cli = CliRunner()
    only_end = tmp_path / "end.log"
    only_end.write_text("==RXL== END patched\n")
    assert parse_file(str(only_end)).outcome == "crashed"
    res = cli.invoke(main, ["parse", str(only_end)])
    assert res.exit_code == 1 and "crashed" in res.output
    no_cases = tmp_path / "markers.log"
    no_cases.write_text("==RXL== BEGIN patched\n==RXL== ATF BEGIN\n==RXL== ATF END\n"
                        "==RXL== END patched\n")
    res = cli.invoke(main, ["parse", str(no_cases)])
    assert res.exit_code == 1 and "no test case ran" in res.output
    unclosed = tmp_path / "unclosed.log"
    unclosed.write_text("==RXL== BEGIN patched\n==RXL== ATF BEGIN\n==RXL== END patched\n")
    assert parse_file(str(unclosed)).outcome == "crashed"


LOR = ["lock order reversal:",
       " 1st 0xfffff80003a1c0a0 so_rcv (so_rcv, sleep mutex) @ sys/kern/uipc_socket.c:1",
       " 2nd 0xfffff80003a1c110 tcpinp (tcpinp, rw) @ sys/netinet/in_pcb.c:2"]


def test_a_witness_warning_fails_the_run_and_the_boot_banner_does_not():
    banner = "WARNING: WITNESS option enabled, expect reduced performance."
    assert _run(banner).outcome == "completed"
    r = _run(*LOR, "lock order so_rcv -> tcpinp attempted at:")
    assert r.outcome == "witness" and r.witness_lines[0] == "lock order reversal:"
    assert _run(*LOR).outcome == "witness"        # cut before its pair line
    assert _run("Sleeping on \"select\" with the following non-sleepable locks held:"
                ).outcome == "witness"
    assert _run("acquiring duplicate lock of same type: \"inp\"").outcome == "witness"


def test_the_base_trees_known_reversal_is_a_note():
    r = parse_file(str(DATA / "real-c1-patched.log"))
    assert r.outcome == "completed" and r.witness_lines == []
    assert any("callout -> sched lock" in n for n in r.notes)


def test_a_reboot_mid_run_is_never_completed():
    r = _run("==RXL== LIST /p a", "==RXL== LIST /p b", "==RXL== CASE /p a rc=0 t=1 passed",
             "Copyright (c) 1992-2023 The FreeBSD Project.", "==RXL== BEGIN t",
             "==RXL== CASE /p b rc=0 t=1 passed")
    assert r.outcome == "rebooted"
    assert _run("Rebooting...").outcome == "rebooted"


def test_a_panic_mid_case_crashes_the_rest():
    r = _run("==RXL== ATF BEGIN", "==RXL== LIST /p a", "==RXL== LIST /p b",
             "==RXL== CASE /p a rc=0 t=1 passed", "panic: page fault", "KDB: enter: panic")
    assert r.outcome == "panic"
    assert [c.status for c in r.cases] == ["passed", "crashed"]


def test_watch_keeps_the_log_of_a_guest_that_reboots_or_panics_mid_case(tmp_path):
    head = (b"==RXL== BEGIN patched\n==RXL== ATF BEGIN\n==RXL== LIST /p a\n==RXL== LIST /p b\n"
            b"==RXL== CASE /p a rc=0 t=3 passed\n")
    clock = Clock()
    log = tmp_path / "reboot.log"
    with pytest.raises(GuestCrashed):   # QEMU -no-reboot exits at the reset
        watch(Scripted(clock, [(1, head), (1, b"Rebooting...\ncpu_reset: Stopping other CPUs\n")]),
              str(log), clock=clock)
    assert log.read_bytes().startswith(head) and parse_file(str(log)).outcome == "rebooted"
    clock = Clock()
    log = tmp_path / "panic.log"
    with pytest.raises(GuestPanic):
        watch(Scripted(clock, [(1, head), (1, b"panic: page fault\n")], forever=True),
              str(log), clock=clock)
    assert [c.status for c in parse_file(str(log)).cases] == ["passed", "crashed"]


def _opts(tmp_path):
    return RunRequest(src=str(tmp_path), objdir=str(tmp_path / "obj"), out=str(tmp_path / "out"),
                      guest_dir=str(tmp_path / "guest"), kernel=None, pristine_kernel=None,
                      spread=False, case_timeout=60, new_programs=(), extra_tests=(),
                      memory_mib=512, dry_run=False, rebuild_world=False)


def _failed_run(tmp_path, steps, name, words):
    ok, st = pipeline.run(_opts(tmp_path), steps, echo=lambda s: None)
    out = tmp_path / "out"
    assert not ok and st.verdict.ok is False
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"]["ok"] is False and words in report["verdict"]["reasons"][0]
    assert words in (out / f"stage-{name}.log").read_text()


def test_a_failed_build_is_a_failed_verdict_with_its_log(tmp_path):
    def build(opts, st):
        raise BuildError("buildkernel", 2, Path("/o/build.log"))
    _failed_run(tmp_path, [("build", build)], "build", "buildkernel failed")


def test_a_full_disk_while_staging_is_a_failed_verdict(tmp_path, monkeypatch):
    from rxl.guest import image as image_mod

    def world(opts, st):
        for f in ("loader.efi", "kernel"):
            (tmp_path / f).write_bytes(b"x" * 64)
        st.world = SimpleNamespace(programs={}, sysroot=tmp_path,
                                   loader_efi=tmp_path / "loader.efi")
        st.kernel = str(tmp_path / "kernel")
        return StageRecord("world", "ok")

    def full(src, dst, **kw):
        raise OSError(errno.ENOSPC, "No space left on device", str(dst))
    monkeypatch.setattr(image_mod, "resolve_libs", lambda binaries, sysroot: {})
    monkeypatch.setattr(image_mod.shutil, "copyfile", full)
    _failed_run(tmp_path, [("world", world), ("image", SerialGuest().prepare)], "image",
                "No space left on device")


@pytest.mark.parametrize("log", ["hang", "witness"])
def test_a_bad_boot_gives_a_failed_report_and_keeps_the_console(tmp_path, log):
    text = {"hang": "==RXL== BEGIN patched\n==RXL== LIST /p a\n",   # silence, then killed
            "witness": "==RXL== BEGIN patched\n" + "\n".join(LOR) + "\n==RXL== LIST /p a\n"
                       "==RXL== CASE /p a rc=0 t=1 passed\n==RXL== END patched\n"}[log]

    def boot(opts, st):
        path = Path(opts.out) / "console-patched.log"
        path.write_text(text)
        st.logs["patched"] = str(path)
        return StageRecord("boot", "failed" if log == "hang" else "ok", log=str(path))
    guest = SerialGuest()
    steps = [("boot", boot), ("parse", guest.collect), ("report", guest.report)]
    ok, st = pipeline.run(_opts(tmp_path), steps, echo=lambda s: None)
    out = tmp_path / "out"
    assert not ok or not st.verdict.ok
    verdict = json.loads((out / "report.json").read_text())["verdict"]
    assert verdict["ok"] is False
    outcome = "crashed" if log == "hang" else "witness"
    assert f"patched: run {outcome}" in verdict["reasons"]
    assert (out / "console-patched.log").read_text() == text
    assert "FAIL" in (out / "report.txt").read_text()


@pytest.mark.parametrize("doc", [
    '{"outer": "f", "entries": [], "samples": []}',
    '{"outer": "f", "entries": {"f": "0x10"}, "samples": [{"pc": [Infinity], "sp": [1]}]}',
    '{"outer": "f", "entries": {"f": "0x10"}, "samples": [{"pc": [1], "sp": [1], '
    '"cas": [[Infinity, 1, 2]]}], "asm": {"0x1": "nop"}}',
    '{"outer": ["f"], "entries": {}, "samples": []}',
    '{"outer": "f", "entries": {"f": "0x' + "f" * 5000 + '"}, "samples": {}}',
    "[" * 100000 + "]" * 100000,
])
def test_a_damaged_kcount_trace_is_one_error(tmp_path, doc):
    path = tmp_path / "trace.json"
    path.write_text(doc)
    with pytest.raises(kcount.KcountError):
        kcount.samples_of(kcount.load(str(path)))


def test_a_run_whose_boots_ran_no_case_fails_rxl_run(tmp_path):
    """rxl run's own rule: the patched and pristine boots completed, markers and
    all, but ran no case: the verdict fails and junit.xml says NO_TESTS."""
    guest = SerialGuest()
    markers = "==RXL== BEGIN {0}\n==RXL== ATF BEGIN\n==RXL== ATF END\n==RXL== END {0}\n"

    def boot(opts, st):
        for label in ("patched", "pristine"):
            path = Path(opts.out) / f"console-{label}.log"
            path.write_text(markers.format(label))
            st.logs[label] = str(path)
        return StageRecord("boot", "ok")
    steps = [("boot", boot), ("parse", guest.collect), ("report", guest.report)]
    ok, st = pipeline.run(_opts(tmp_path), steps, echo=lambda s: None)
    assert ok and st.verdict is not None and not st.verdict.ok   # the exit status is 1
    assert {"patched: no test cases ran", "pristine: no test cases ran"} <= set(
        st.verdict.reasons)
    junit = (tmp_path / "out" / "junit.xml").read_text()
    assert junit.count('name="NO_TESTS"') == 2
    assert "Verdict: FAIL" in (tmp_path / "out" / "report.txt").read_text()
