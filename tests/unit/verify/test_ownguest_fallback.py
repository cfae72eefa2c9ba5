"""rxl.verify.ownguest: an SSH guest boot whose SSH never answers falls back to the serial path.

Real processes throughout: the "QEMU" of the SSH boot is a shell that writes a
boot (or a panic) to the serial log QEMU's argv names and stays up with nothing
on the forwarded port, so the real SSHSession is refused until the wait is over;
the fallback's console boot is a process printing a real console log
(tests/data/console). Only the root staging and QEMU's argv of the fallback are
replaced (they need a built world and QEMU).
"""

import subprocess
from pathlib import Path

import pytest

from rxl.guest.protocol import MARK
from rxl.guest import qemu as qemu_mod
from rxl.guest.ssh import TimedOut
from rxl.guest.sshkeys import generate_ed25519
from rxl.verify import ownguest
from rxl.verify.ownguest import SerialGuest, SSHGuest
from rxl.verify.pipeline import RunState
from rxl.verify.request import RunRequest

DATA = Path(__file__).resolve().parents[2] / "data" / "console"
BOOT = "---<<BOOT>>---\nFreeBSD 14.0-STABLE #0\nTrying to mount root from msdosfs\n"


def _opts(tmp_path, **kw):
    base = dict(src=str(tmp_path / "src"), objdir=str(tmp_path / "obj"),
                out=str(tmp_path / "out"), guest_dir=str(tmp_path / "g"),
                kernel=str(tmp_path / "kernel"), pristine_kernel=None, spread=False,
                case_timeout=60, new_programs=(), extra_tests=(), memory_mib=1024,
                dry_run=False, rebuild_world=False, ssh_wait=1.0)
    base.update(kw)
    return RunRequest(**base)


@pytest.fixture
def guest(tmp_path, monkeypatch):
    """(run, staged): ``run(console, **opts)`` runs the SSH guest's boot, parse and report
    with a QEMU stand-in that writes ``console`` to its serial log; ``staged`` lists
    the fallback roots staged."""
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "w"))
    monkeypatch.setattr(qemu_mod, "find_ovmf", lambda: "/fw/OVMF_CODE.fd")
    procs = []

    def launch(argv, qemu_log):
        serial = next(a for a in argv if a.startswith("file:"))[len("file:"):]
        Path(serial).write_text(launch.console)
        p = subprocess.Popen(["sleep", "30"])
        procs.append(p)
        return p

    monkeypatch.setattr(qemu_mod, "launch", launch)
    staged = []

    def stage(self, opts, st, label, kernel, tunables, root):
        staged.append((label, kernel, root))
        return f"{label}: {root} (staged)"

    monkeypatch.setattr(SerialGuest, "stage_console_root", stage)
    monkeypatch.setattr(SerialGuest, "console_argv",
                        lambda self, opts, root: ["cat", str(DATA / "synthetic-pass.log")])

    def run(console, **kw):
        launch.console = console
        opts = _opts(tmp_path, **kw)
        Path(opts.out).mkdir(parents=True, exist_ok=True)
        st = RunState.start(opts, echo=lambda s: None)
        st.kernel = opts.kernel
        st.roots = {"patched": str(st.stage_dir / "patched")}
        st.host_keys = {"patched": generate_ed25519(tmp_path / "hostkey")}
        machine = SSHGuest()
        rec = machine.run_cases(opts, st)
        machine.collect(opts, st)
        machine.report(opts, st)
        return rec, st
    yield run, staged
    for p in procs:
        assert p.poll() is not None  # every stand-in QEMU was stopped


def test_no_ssh_and_no_panic_falls_back_to_the_serial_console(guest, tmp_path):
    run, staged = guest
    rec, st = run(BOOT)
    assert rec.status == "ok", rec.detail
    assert "patched: ssh never answered within 1 s; fell back to the serial console" \
        in rec.detail
    assert staged == [("patched", str(tmp_path / "kernel"),
                       str(st.stage_dir / "patched-serial"))]
    assert st.logs["patched"] == str(tmp_path / "out" / "console-patched.log")
    res = st.runs["patched"]
    assert res.outcome == "completed" and res.cases
    assert res.notes[0].startswith("transport: ssh never answered within 1 s; fell back to "
                                   "the serial console")
    text = (tmp_path / "out" / "report.txt").read_text()
    assert "Transport: over SSH, except" in text
    assert "  patched: ssh never answered within 1 s; fell back to the serial console" in text


def test_a_panic_is_a_crashed_boot_not_a_fallback(guest, tmp_path):
    run, staged = guest
    rec, st = run(BOOT + "panic: page fault while in kernel mode\n")
    assert rec.status == "failed" and staged == [] and not st.fallbacks
    assert "the console shows 'panic: page fault while in kernel mode' before SSH answered" \
        in rec.detail
    assert "serial-patched.log" in rec.detail


def test_transport_ssh_does_not_fall_back(guest, tmp_path):
    run, staged = guest
    rec, st = run(BOOT, ssh_fallback=False)
    assert rec.status == "failed" and staged == [] and not st.fallbacks
    assert "ssh never answered within 1 s" in rec.detail
    assert "--transport ssh: no fallback to the serial console" in rec.detail


class _Session:
    def __init__(self, answer_after=None):
        self.calls, self.answer_after, self.t = [], answer_after, 0.0

    def wait_up(self, timeout, interval):
        self.calls.append(timeout)
        self.t += timeout
        if self.answer_after is not None and self.t >= self.answer_after:
            return self.t
        raise TimedOut("own guest", f"not reachable after {timeout:.0f} s (last: refused)")


class _Proc:
    def __init__(self, code=None):
        self.code = code

    def poll(self):
        return self.code


def _clock(session):
    return lambda: session.t


def test_wait_ssh_tries_in_steps_and_checks_the_console_between(tmp_path):
    serial = tmp_path / "serial.log"
    serial.write_text(BOOT)
    s = _Session(answer_after=25)
    assert ownguest.wait_ssh(s, _Proc(), str(serial), 300, step=10, clock=_clock(s),
                           sleep=lambda x: None) == 30
    assert s.calls == [10, 10, 10]
    s = _Session()
    with pytest.raises(ownguest.NoSSH, match=r"within 25 s \(waited 25 s; last: refused\)"):
        ownguest.wait_ssh(s, _Proc(), str(serial), 25, step=10, clock=_clock(s),
                        sleep=lambda x: None)
    assert s.calls == [10, 10, 5]
    with pytest.raises(ownguest.CrashedBoot, match="QEMU exited with code 1"):
        ownguest.wait_ssh(_Session(), _Proc(1), str(serial), 25)
    serial.write_text(BOOT + "Fatal trap 12: page fault while in kernel mode\n")
    with pytest.raises(ownguest.CrashedBoot, match="Fatal trap 12"):
        ownguest.wait_ssh(_Session(), _Proc(), str(serial), 25)


def test_wait_ssh_stops_when_the_console_says_sshd_exited(tmp_path):
    """The rc's 'SSHD failed' line, after sshd_diag's last note, ends the wait at
    once (sshd is gone: SSH cannot answer); before that note the wait goes on."""
    serial = tmp_path / "serial.log"
    failed = f"{MARK} SSHD failed (139)\n{MARK} NOTE sshd_diag: /usr/sbin/sshd failed\n"
    serial.write_text(BOOT + failed)
    s = _Session()
    with pytest.raises(ownguest.NoSSH, match=r"waited 30 s; last: refused"):
        ownguest.wait_ssh(s, _Proc(), str(serial), 30, step=10, clock=_clock(s),
                          sleep=lambda x: None)
    assert s.calls == [10, 10, 10]
    serial.write_text(BOOT + failed + f"{MARK} NOTE sshd_diag: -ddd -D -e -p 2222 exit 139\n")
    s = _Session()
    with pytest.raises(ownguest.NoSSH, match=r"waited 0 s; last: the console says "
                       r"'==RXL== SSHD failed \(139\)'"):
        ownguest.wait_ssh(s, _Proc(), str(serial), 300, step=10, clock=_clock(s),
                          sleep=lambda x: None)
    assert s.calls == []
    serial.write_text(BOOT + f"{MARK} SSHD failed (1)\n")
    s = _Session()
    with pytest.raises(ownguest.NoSSH, match="SSHD failed"):
        ownguest.wait_ssh(s, _Proc(), str(serial), 300, clock=_clock(s), sleep=lambda x: None)
    assert s.calls == []
    serial.write_text(BOOT + f"{MARK} SSHD up\n")
    assert ownguest.sshd_gone(str(serial)) == ""


def test_collect_keeps_the_ssh_run_s_own_result(tmp_path, monkeypatch):
    """kyua's cases are in its JUnit file, not in the stream log: the first 15.0
    run over SSH passed 24 of 24 on kyua and reported 0 cases, because the parse
    stage parsed the log again. The boot's own result is kept, with the serial
    log's kernel messages added."""
    from rxl.verify import parse
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "w"))
    opts = _opts(tmp_path)
    out = Path(opts.out)
    out.mkdir(parents=True)
    log = out / "console-patched.log"
    log.write_text(f"{MARK} BEGIN patched\n{MARK} ATF BEGIN\n{MARK} ATF END\n"
                   f"{MARK} END patched\n")
    (out / "serial-patched.log").write_text("panic: page fault\n")
    st = RunState.start(opts, echo=lambda s: None)
    st.logs = {"patched": str(log)}
    kept = parse.parse_file(str(log))
    kept.cases = [parse.CaseResult("so_reuseport_lb_test", "basic_ipv4", "passed")]
    st.runs = {"patched": kept}
    SSHGuest().collect(opts, st)
    got = st.runs["patched"]
    assert [c.name for c in got.cases] == ["so_reuseport_lb_test:basic_ipv4"]
    assert got.outcome == "panic"
    st.runs = {}                      # no kept result: the log is parsed
    SSHGuest().collect(opts, st)
    assert st.runs["patched"].cases == []
