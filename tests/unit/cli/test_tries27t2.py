"""Issue 27's fourteenth pass (docs/results/newcomer.md, "Fourteenth pass"):
its questionable items. rxl parse's placement (shown, not judged: its help
says so), the guest's memory (README and code give the same two values),
SIGTERM (one line, exit 143, children stopped, logs kept) and an OSError's
words (``x: no such file``, never ``[Errno 2] ...: 'x'``)."""

import errno
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import rxl
from clierror import run as _run, work  # noqa: F401 (work: fixture)

ROOT = Path(__file__).resolve().parents[3]
#: The harness under test (the one imported here), for a command in its own process.
HARNESS = Path(rxl.__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


# ------------------------------------------------ a: parse shows placement, not judged

def test_parse_help_says_placement_is_shown_not_judged():
    text = " ".join(_run(["parse", "--help"]).output.split())
    assert "The RX queue placement is shown beside the order the own guest's rule " \
        "expects for the core_spread the log reports (0 if none), and not judged" in text


def test_parse_exits_by_its_cases_whatever_the_placement_shows():
    """synthetic-pass.log's queues (0,4) are not the numeric order (0,2): shown,
    and its two passed cases still exit 0, as parse's contract says."""
    r = _run(["parse", DATA / "console" / "synthetic-pass.log"])
    assert r.exit_code == 0, r.output
    assert "core_spread=0: rx queues on 0,4, expected 0,2" in r.stdout


# ------------------------------------------------ b: the guest's memory, README and code

def test_readme_gives_the_memory_the_code_boots():
    from rxl.guest import targets
    from rxl.verify.cli import run
    from rxl.verify.request import GuestRequest
    readme = " ".join((ROOT / "README.md").read_text().split())
    run_default = next(p.default for p in run.params if p.name == "memory_mib")
    m = re.search(r"the guest takes (\d+) GiB of RAM \(`rxl run --memory`, default (\d+),",
                  readme)
    assert m and int(m.group(1)) * 1024 == int(m.group(2)) == run_default == \
        GuestRequest.memory_mib, m
    shape = targets.BUILTIN_SHAPES[targets.BUILTIN_TARGETS["guest"]]
    m = re.search(r"The built-in `guest` target's shape, which `rxl learn` and `rxl run "
                  r"--target guest` boot, has (\d+) GiB \(`memory_mib: (\d+)`", readme)
    assert m and int(m.group(1)) * 1024 == int(m.group(2)) == shape["memory_mib"] == \
        targets.Shape().memory_mib, m
    assert f"(guest: {shape['memory_mib']}, as rxl learn boots it)" in \
        " ".join(_run(["run", "--help"]).output.split())


# ------------------------------------------------ c: SIGTERM

def _env():
    e = dict(os.environ, PYTHONPATH=str(HARNESS))
    e.pop("RXL_BASE_URL", None)
    return e


def _wait_reading_stdin(proc, timeout=120.0):
    """Until ``proc`` blocks in read(0, ...) (its SIGTERM handler is in place by
    then: the command runs); /proc/PID/syscall, else a pause."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        assert proc.poll() is None, proc.communicate()
        try:
            call = Path(f"/proc/{proc.pid}/syscall").read_text().split()
        except OSError:
            time.sleep(10)
            return
        if call[:2] == ["0", "0x0"]:
            return
        time.sleep(0.1)
    raise AssertionError("rxl parse - never read its stdin")


def test_sigterm_ends_a_command_with_one_line_and_143(work):
    """A SIGTERM ended rxl without a word (the shell's "Terminated", if any)."""
    p = subprocess.Popen([sys.executable, "-m", "rxl", "parse", "-"], env=_env(),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        _wait_reading_stdin(p)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert (p.returncode, out, err) == (143, "", "Error: stopped by SIGTERM\n")


SCRIPT = textwrap.dedent("""\
    import subprocess, sys, time
    from pathlib import Path
    from rxl.cli.surface import command

    @command("long")
    def long():
        Path(sys.argv[1]).write_text("written before the signal\\n")
        child = subprocess.Popen(["sleep", "300"])
        print(child.pid, flush=True)
        child.wait()

    long.main(sys.argv[2:], prog_name="rxl long")
    """)


def test_sigterm_stops_the_commands_children_and_keeps_its_files(work):
    """A ``kill PID`` reaches rxl alone: its child (a build's make, a tool) is
    sent SIGTERM too, not left running; what the command wrote stays."""
    log = work / "stage.log"
    p = subprocess.Popen([sys.executable, "-c", SCRIPT, str(log)], env=_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    child = None
    try:
        child = int(p.stdout.readline())
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=120)
        assert (p.returncode, out, err) == (143, "", "Error: stopped by SIGTERM\n")
        assert log.read_text() == "written before the signal\n"
        for _ in range(100):  # the sleep ends on its SIGTERM (then init reaps it)
            try:
                state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                break
            if state == "Z":
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"child {child} still runs")
    finally:
        if p.poll() is None:
            p.kill()
        if child is not None:
            try:
                os.kill(child, signal.SIGKILL)
            except OSError:
                pass


def test_sigterm_handler_is_restored_after_a_command():
    before = signal.getsignal(signal.SIGTERM)
    _run(["deal", "--topology", "2x2x1", "--members", "0"])
    assert signal.getsignal(signal.SIGTERM) is before


def test_descendants_finds_grandchildren():
    from rxl.cli.processes import descendants
    p = subprocess.Popen(["sh", "-c", "sleep 300 & echo $!; wait"], stdout=subprocess.PIPE,
                         text=True)
    try:
        grandchild = int(p.stdout.readline())
        assert {p.pid, grandchild} <= set(descendants(os.getpid()))
        assert descendants(p.pid) == [grandchild]
    finally:
        p.kill()
        p.wait()
        try:
            os.kill(grandchild, signal.SIGKILL)
        except OSError:
            pass


# ------------------------------------------------ d: an OSError's words

@pytest.mark.parametrize("exc,words", [
    (FileNotFoundError(errno.ENOENT, "No such file or directory", "x"), "x: no such file"),
    (FileNotFoundError(errno.ENOENT, "No such file or directory", "a", None, "b"),
     "a -> b: no such file"),
    (PermissionError(errno.EACCES, "Permission denied", "/etc/x"),
     "/etc/x: Permission denied"),
    (OSError(errno.ELOOP, "Too many levels of symbolic links", "l"),
     "l: a symlink loop, it cannot be resolved (Too many levels of symbolic links)"),
    (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), "Connection refused"),
    (OSError(None, "Unable to connect to port 22 on 127.0.0.1"),
     "Unable to connect to port 22 on 127.0.0.1"),
    (TimeoutError("timed out"), "timed out"),
    (ValueError("two\n  lines"), "two lines"),
    (ValueError(), "ValueError"),
])
def test_reason_words_an_exception_as_the_surface_does(exc, words):
    from rxl.errors import reason
    assert reason(exc) == words
    assert "Errno" not in reason(exc)


def test_reason_of_a_real_open():
    from rxl.errors import reason
    with pytest.raises(OSError) as ei:
        open("/nonexistent/rxl-x")
    assert str(ei.value) == "[Errno 2] No such file or directory: '/nonexistent/rxl-x'"
    assert reason(ei.value) == "/nonexistent/rxl-x: no such file"


def test_a_stage_that_lacks_a_file_says_no_such_file():
    from rxl.verify import pipeline
    assert pipeline.one_line(FileNotFoundError(errno.ENOENT, "No such file or directory",
                                               "/x/RXL")) == "/x/RXL: no such file"


def test_ssh_cannot_connect_names_no_errno(work, monkeypatch):
    """paramiko's NoValidConnectionsError is an OSError of errno None: its str()
    is "[Errno None] Unable to connect to port 22 on ...", which was the message."""
    pytest.importorskip("paramiko")
    import paramiko

    from rxl.guest import ssh
    from rxl.guest.sshkeys import harness_key

    def refuse(self, host, port=22, **kw):
        raise paramiko.ssh_exception.NoValidConnectionsError(
            {(host, port): OSError(errno.ENETUNREACH, "Network is unreachable")})
    monkeypatch.setattr(paramiko.SSHClient, "connect", refuse)
    s = ssh.SSHSession(ssh.SSHTarget("192.0.2.1", 22), key=str(harness_key()),
                       connect_timeout=1)
    with pytest.raises(ssh.SSHError) as ei:
        s.connect()
    assert "Errno" not in str(ei.value)
    assert str(ei.value).endswith("cannot connect: Unable to connect to port 22 on 192.0.2.1")
