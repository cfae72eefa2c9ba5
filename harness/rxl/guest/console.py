"""Run the guest, tee its console to a log, and watch it.

One small transport interface (:class:`Transport`) stands between the stages
and the guest: :class:`SerialTransport` (QEMU's ``-serial stdio`` on a
pseudo-terminal, through pexpect) and ``rxl.guest.ssh.SSHStream`` (a command's
output over SSH) implement the same four methods.

:func:`watch` reads the console until the end marker and the guest's power
off, and raises a typed error otherwise; every error carries the log path,
the elapsed wall seconds and the last console line:

* :class:`GuestPanic`   a panic pattern (:data:`rxl.guest.protocol.PANIC_PATTERNS`);
* :class:`GuestHang`    no console output for ``idle_timeout`` seconds;
* :class:`GuestNoRoot`  the kernel's ``mountroot>`` prompt (no root file system:
  it waits for console input for ever, so at once, not after ``idle_timeout``);
* :class:`GuestTimeout` ``total_timeout`` seconds passed;
* :class:`GuestCrashed` the guest went away before the end marker.

The log is always kept: it is what ``rxl parse`` re-reads.
"""

from __future__ import annotations

import termios
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, List, Optional, Sequence

import pexpect

from rxl.errors import MachineError
from rxl.guest.protocol import (MARK, MOUNTROOT_CAUSES, MOUNTROOT_PROMPT, PANIC_PATTERNS,
                                split_sentinel)

#: Seconds of console silence that count as a hang. TCG boots of an
#: 8-vCPU guest print something at least every few seconds (measured boot to
#: power-off ~34 s); long ATF cases print nothing, so this must exceed the
#: per-case timeout of the rc (see rxl.guest.image.DEFAULT_CASE_TIMEOUT).
DEFAULT_IDLE_TIMEOUT = 420.0
#: Whole-run ceiling, seconds.
DEFAULT_TOTAL_TIMEOUT = 3600.0
#: After a panic line, keep reading this long to capture the backtrace.
PANIC_GRACE = 5.0
#: After the end marker, how long the guest gets to power off.
POWEROFF_GRACE = 60.0


class GuestError(MachineError):
    """Base of the console errors: ``log``, ``seconds`` (wall), ``last_line``."""

    kind = "error"

    def __init__(self, message: str, *, log: str, seconds: float, last_line: str = ""):
        super().__init__(f"{message} after {seconds:.0f} s; console log: {log}"
                         + (f"; last line: {last_line!r}" if last_line else ""))
        self.log, self.seconds, self.last_line = log, seconds, last_line


class GuestPanic(GuestError):
    kind = "panic"


class GuestHang(GuestError):
    kind = "hang"


class GuestNoRoot(GuestError):
    kind = "mountroot"


class GuestTimeout(GuestError):
    kind = "timeout"


class GuestCrashed(GuestError):
    kind = "crashed"


class Transport:
    """What the watcher needs from a guest connection.

    ``start()`` begins the session; ``read(timeout)`` returns bytes (maybe
    empty on timeout) or None at end of stream; ``alive()`` tells whether
    the guest is still running; ``stop()`` ends it and returns an exit code.
    """

    def start(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def read(self, timeout: float) -> Optional[bytes]:  # pragma: no cover
        raise NotImplementedError

    def alive(self) -> bool:  # pragma: no cover
        raise NotImplementedError

    def stop(self) -> Optional[int]:  # pragma: no cover
        raise NotImplementedError


def _no_onlcr() -> None:
    """In the child, before exec: no newline translation on the pty (stdin is it)."""
    attrs = termios.tcgetattr(0)
    attrs[1] &= ~termios.ONLCR
    termios.tcsetattr(0, termios.TCSANOW, attrs)


class SerialTransport(Transport):
    """QEMU started from ``argv`` with its serial console on stdout (``-serial stdio``).

    The process runs on a pseudo-terminal (``pexpect.spawn``), so stderr is
    in the stream too (QEMU's own warnings belong in the log) and no reader
    thread is needed: ``read`` waits on the pty with a timeout. The pty's
    ONLCR is cleared before QEMU starts (QEMU keeps OPOST on a stdio tty), so
    the guest's bytes reach the log unchanged, as through a pipe.
    Measured (docs/design.md): 27 MB/s through the pty against ~20 KB of
    console per boot. Only the process this object started is ever signalled.
    """

    def __init__(self, argv: Sequence[str], *, env: Optional[dict] = None):
        self.argv = list(argv)
        self.env = env
        self.proc = None  # pexpect.spawn

    def start(self) -> None:
        try:
            self.proc = pexpect.spawn(self.argv[0], self.argv[1:], env=self.env, echo=False,
                                      timeout=None, maxread=65536, preexec_fn=_no_onlcr)
        except pexpect.ExceptionPexpect:
            raise FileNotFoundError(f"{self.argv[0]}: not found "
                                    "(apt-get install -y qemu-system-x86)") from None

    def read(self, timeout: float) -> Optional[bytes]:
        assert self.proc is not None
        try:
            return self.proc.read_nonblocking(65536, timeout=max(timeout, 0.0))
        except pexpect.TIMEOUT:
            return b""
        except pexpect.EOF:
            return None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.isalive()

    def stop(self) -> Optional[int]:
        """Terminate the process if it still runs (SIGHUP/SIGINT, then SIGKILL after
        pexpect's grace); return its exit status, or minus the signal number."""
        if self.proc is None:
            return None
        if self.proc.isalive():
            self.proc.terminate(force=True)
        self.proc.close(force=True)
        if self.proc.signalstatus is not None:
            return -self.proc.signalstatus
        return self.proc.exitstatus


@dataclass
class ConsoleResult:
    """A run that reached its end marker. Times in wall seconds from start."""

    log: str
    seconds: float
    end_seen_at: float
    first_output_at: Optional[float]
    exit_code: Optional[int]
    lines: int
    marks: List[str] = field(default_factory=list)


def watch(transport: Transport, log: str, *, end_marker: str = MARK + " END",
          idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
          total_timeout: float = DEFAULT_TOTAL_TIMEOUT,
          poweroff_grace: float = POWEROFF_GRACE, panic_grace: float = PANIC_GRACE,
          echo: Optional[Callable[[str], None]] = None,
          clock: Callable[[], float] = time.monotonic) -> ConsoleResult:
    """Start ``transport``, tee everything to ``log``, return when the guest is done.

    Done means: a sentinel starting with ``end_marker`` was seen (from its MARK on:
    :func:`rxl.guest.protocol.split_sentinel`) and then the
    stream ended (power off) or ``poweroff_grace`` passed (then the guest is
    stopped; still a success). ``echo`` receives each sentinel line (for
    progress). Raises GuestPanic / GuestHang / GuestNoRoot / GuestTimeout /
    GuestCrashed; GuestNoRoot names the first line that says why
    (:data:`rxl.guest.protocol.MOUNTROOT_CAUSES`), if any.
    The transport is always stopped before returning or raising.
    """
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    t0 = clock()
    last_out = t0
    first_out: Optional[float] = None
    end_at: Optional[float] = None
    panic_at: Optional[float] = None
    panic_line = ""
    root_cause = ""
    last_line = ""
    nlines = 0
    marks: List[str] = []
    buf = b""
    exit_code: Optional[int] = None

    def no_root(now: float) -> GuestNoRoot:
        why = f" after {root_cause.strip()!r}" if root_cause else ""
        return GuestNoRoot(f"guest stopped at the mountroot> prompt{why}", log=log,
                           seconds=now - t0, last_line=last_line)

    def handle(line: str) -> None:
        nonlocal end_at, panic_at, panic_line, root_cause, last_line, nlines
        nlines += 1
        if line.strip():
            last_line = line
        text, sentinel = split_sentinel(line)  # as the parser reads the log
        if sentinel:
            marks.append(sentinel)
            if echo:
                echo(sentinel)
            if sentinel.startswith(end_marker) and end_at is None:
                end_at = clock() - t0
        if not text:
            pass
        elif panic_at is None and any(p.search(text) for p in PANIC_PATTERNS):
            panic_at, panic_line = clock(), text
            if echo:
                echo(f"PANIC: {text}")
        elif not root_cause and any(p.search(text) for p in MOUNTROOT_CAUSES):
            root_cause = text
        if MOUNTROOT_PROMPT.search(line) and panic_at is None and end_at is None:
            raise no_root(clock())

    with open(log, "wb") as fh:
        transport.start()
        try:
            while True:
                now = clock()
                if panic_at is not None and now - panic_at >= panic_grace:
                    raise GuestPanic(f"guest panicked ({panic_line.strip()})", log=log,
                                     seconds=now - t0, last_line=last_line)
                if end_at is not None and now - t0 - end_at >= poweroff_grace:
                    break  # finished but did not power off: stop it, still a pass
                if now - t0 >= total_timeout:
                    raise GuestTimeout(f"guest exceeded {total_timeout:.0f} s", log=log,
                                       seconds=now - t0, last_line=last_line)
                if now - last_out >= idle_timeout and end_at is None:
                    raise GuestHang(f"no console output for {idle_timeout:.0f} s", log=log,
                                    seconds=now - t0, last_line=last_line)
                chunk = transport.read(1.0)
                if chunk is None:
                    if buf:
                        handle(buf.decode("utf-8", "replace").rstrip("\r"))
                        buf = b""
                    break
                if not chunk:
                    continue
                last_out = clock()
                if first_out is None:
                    first_out = last_out - t0
                fh.write(chunk)
                fh.flush()
                buf += chunk
                *complete, buf = buf.split(b"\n")
                for raw in complete:
                    handle(raw.decode("utf-8", "replace").rstrip("\r"))
                if (panic_at is None and end_at is None
                        and MOUNTROOT_PROMPT.search(buf.decode("utf-8", "replace"))):
                    last_line = buf.decode("utf-8", "replace").rstrip()
                    raise no_root(clock())   # the prompt has no newline after it
        finally:
            exit_code = transport.stop()
        seconds = clock() - t0
        if panic_at is not None:
            raise GuestPanic(f"guest panicked ({panic_line.strip()})", log=log,
                             seconds=seconds, last_line=last_line)
        if end_at is None:
            raise GuestCrashed(f"guest stopped (exit {exit_code}) before the end marker",
                               log=log, seconds=seconds, last_line=last_line)
    return ConsoleResult(log=log, seconds=seconds, end_seen_at=end_at,
                         first_output_at=first_out, exit_code=exit_code, lines=nlines,
                         marks=marks)
