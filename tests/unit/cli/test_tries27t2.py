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
