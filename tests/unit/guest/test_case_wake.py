"""The rc's case line against FreeBSD 14's timeout(1) race (rxl.guest.image.CASE_WAKE).

``timeout`` here is a model of bin/timeout/timeout.c's non-foreground path in
FreeBSD 14 (read from the base tree): the SIGCHLD and SIGALRM handlers are
installed before fork(), the signals blocked only after it, then the loop
sleeps until a signal and checks SIGCHLD before SIGALRM; timeout is the reaper
of its descendants (Linux: PR_SET_CHILD_SUBREAPER) and leaves only when the
child is reaped and no descendant is left. The model widens the window between
fork() and the block to 0.3 s so the race is hit every time. Real processes
throughout: /bin/sh runs the line the rc renders.
"""

import os
import re
import subprocess
import sys
import time

import pytest

from rxl.guest.image import CASE_WAKE, render_rc

MODEL = r'''#!PYTHON
import ctypes, os, signal, sys, time
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: the reaper
secs, argv = float(sys.argv[1]), sys.argv[2:]
got = {signal.SIGCHLD: False, signal.SIGALRM: False}
def handler(sig, frame):
    got[sig] = True
for s in got:
    signal.signal(s, handler)
pid = os.fork()
if pid == 0:
    os.execvp(argv[0], argv)
time.sleep(0.3)  # the window between fork() and sigprocmask(), widened
signal.pthread_sigmask(signal.SIG_BLOCK, list(got))
signal.setitimer(signal.ITIMER_REAL, secs)
status, done, timedout = 0, False, False
while True:
    got[signal.sigwait(list(got))] = True  # sigsuspend() with the handler run
    if got[signal.SIGCHLD]:
        got[signal.SIGCHLD] = False
        left = False
        while True:
            try:
                cpid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if cpid == 0:
                left = True
                break
            if cpid == pid:
                status, done = st, True
        if done and not left:
            break
    elif got[signal.SIGALRM]:
        timedout = True
        os.kill(pid, signal.SIGTERM)
        break
if not done:
    status = os.waitpid(pid, 0)[1]
sys.exit(124 if timedout else os.waitstatus_to_exitcode(status))
'''

CASE = "#!/bin/sh\necho 'failed: at its first sysctl'\nexit 1\n"


@pytest.fixture
def bin_dir(tmp_path):
    d = tmp_path / "bin"
    d.mkdir()
    (d / "timeout").write_text(MODEL.replace("PYTHON", sys.executable, 1))
    (d / "case").write_text(CASE)
    for f in d.iterdir():
        f.chmod(0o755)
    return d


def _run(bin_dir, line):
    """Run the rc's ``out=$(...)`` line with p=case, c=learning_off: (seconds, out, rc)."""
    script = f'p={bin_dir}/case\nc=learning_off\n{line}\nrc=$?\necho "$out"\necho "rc=$rc"\n'
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    t0 = time.monotonic()
    r = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, env=env,
                       timeout=60)
    return time.monotonic() - t0, r.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_CHILD_SUBREAPER")
def test_a_case_that_exits_at_once_is_not_waited_for_until_the_timeout(bin_dir):
    # the model has the race: the bare line of before waits the whole 3 s and
    # returns the case's status, as learning_off's rc=1 t=400 over SSH
    secs, out = _run(bin_dir, 'out=$(timeout 3 "$p" -r /dev/stdout "$c" < /dev/null)')
    assert secs >= 3 and out.splitlines()[-1] == "rc=1"
    # the rc's line: woken by the sleep's exit after CASE_WAKE s, same output and status
    rc = render_rc("pristine", ["/rxl/tests/t"], case_timeout=3)
    line = next(ln.strip() for ln in rc.splitlines() if "out=$(timeout" in ln)
    secs, out = _run(bin_dir, line)
    assert CASE_WAKE <= secs < 3
    assert out.splitlines() == ["failed: at its first sysctl", "rc=1"]


def test_the_case_line_keeps_stdin_and_status():
    rc = render_rc("x", ["/rxl/tests/t"], case_timeout=7)
    line = next(ln.strip() for ln in rc.splitlines() if "out=$(timeout" in ln)
    assert re.fullmatch(r"out=\$\(timeout 7 sh -c 'sleep 1 >/dev/null 2>&1 & \"\$@\"; "
                        r"exit \$\?' sh \"\$p\" -r /dev/stdout \"\$c\" < /dev/null\)", line)
