"""The SSH transport (paramiko): commands, files and reboots on a FreeBSD machine.

One :class:`SSHSession` per target. It gives what the stages need from a
machine they did not necessarily boot:

* :meth:`SSHSession.run`: one command (``/bin/sh -c`` on the target, as sshd
  runs it) with a timeout -> :class:`CommandResult` (exit status, stdout,
  stderr, wall seconds);
* :meth:`SSHSession.put` / :meth:`SSHSession.get`: SFTP copies both ways;
* :meth:`SSHSession.wait_up`: poll until the machine accepts a session, and
  :meth:`SSHSession.reboot`: reboot it and wait until it is back *with a new
  boot* (``kern.boottime`` changed), so the old kernel is never mistaken for
  the new one;
* :meth:`SSHSession.stream`: a command whose merged output is read like the
  serial console, through the same four-method interface
  (:class:`rxl.guest.console.Transport`: start / read / alive / stop), so
  :func:`rxl.guest.console.watch` and the sentinel parser work unchanged over SSH.

Host keys (``$RXL_WORK/ssh/known_hosts``; the client key and the errors are
:mod:`rxl.guest.sshbase`'s, re-exported here):

* ``known_hosts``: OpenSSH format; a target's host key is recorded on first
  contact and checked on every later one. A different key is
  :class:`HostKeyChanged`, naming the target and both fingerprints; nothing
  is overwritten. The harness's own QEMU guest is the exception: its host key
  is the one the harness generated at image time (``SSHTarget.own_host_key``),
  the loopback port it forwards changes from boot to boot, so that key alone
  is trusted for it and ``known_hosts`` is not consulted.
"""

from __future__ import annotations

import errno
import io
import logging
import os
import select
import shlex
import socket
import stat
import time
from pathlib import Path
from typing import Callable, List, Optional

from rxl.guest.sshbase import (BOOT_ID_COMMAND, DEFAULT_COMMAND_TIMEOUT,
                               DEFAULT_CONNECT_TIMEOUT, DEFAULT_POLL_INTERVAL, REBOOT_COMMAND,
                               AuthFailed, CommandFailed, CommandKilled, CommandResult,
                               DryRun, HostKeyChanged, Refused, SSHError, SSHTarget,
                               TargetError, TimedOut, Unresolved, fingerprint, generate_ed25519,
                               harness_key, key_from_line, last_line, load_key, parse_url,
                               public_line, RecordPolicy, short, ssh_dir, SSHStream)

# ------------------------------------------------------------------ session

#: What callers use from one module: the session and sshbase's names.
__all__ = ["SSHSession", "SSHStream", "DryRun", "SSHTarget", "CommandResult", "parse_url",
           "SSHError", "Refused", "TimedOut", "Unresolved", "AuthFailed", "HostKeyChanged",
           "CommandKilled", "CommandFailed", "TargetError", "harness_key", "generate_ed25519",
           "public_line", "fingerprint", "key_from_line", "ssh_dir", "BOOT_ID_COMMAND",
           "REBOOT_COMMAND", "DEFAULT_COMMAND_TIMEOUT", "DEFAULT_CONNECT_TIMEOUT",
           "DEFAULT_POLL_INTERVAL"]

#: Keeps paramiko's own log records (tracebacks of refused banners while a guest
#: boots) off stderr: errors reach the caller as SSHError.
_QUIET = logging.NullHandler()


class SSHSession:
    """A connection to one :class:`SSHTarget`, made lazily and remade after a drop.

    ``known_hosts``: the file of recorded host keys (default
    ``$RXL_WORK/ssh/known_hosts``); ``key``: client key file (default the
    target's, else :func:`harness_key`); ``echo``: receives one line per remote
    action (``$ cmd``, ``put a -> b``) for the run's log. Use as a context
    manager or call :meth:`close`.
    """

    def __init__(self, target: SSHTarget, *, known_hosts: Optional[str] = None,
                 key: Optional[str] = None,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
                 echo: Optional[Callable[[str], None]] = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self.target = target
        self.known_hosts = known_hosts or str(ssh_dir() / "known_hosts")
        self.key_path = key or target.key
        self.connect_timeout = connect_timeout
        self.echo = echo or (lambda s: None)
        self.clock, self.sleep = clock, sleep
        self.client = None
        self.recorded: List[str] = []  # host keys recorded on first contact (messages)

    # ----------------------------------------------------------- connection
    def __enter__(self) -> "SSHSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (if any); the session can connect again."""
        if self.client is not None:
            try:
                self.client.close()
            finally:
                self.client = None

    def connected(self) -> bool:
        t = self.client.get_transport() if self.client is not None else None
        return bool(t and t.is_active())

    def _err(self, cls, message: str) -> SSHError:
        return cls(self.target.label, message)

    def connect(self) -> None:
        """Open the connection now (no-op while one is active).

        Raises Refused, TimedOut, AuthFailed, HostKeyChanged or SSHError.
        """
        if self.connected():
            return
        self.close()
        import paramiko

        t = self.target
        key_path = self.key_path or str(harness_key())
        try:
            pkey = load_key(key_path)
        except (FileNotFoundError, ValueError) as exc:
            raise self._err(AuthFailed, f"client key: {exc}") from None
        # paramiko logs each refused banner with a traceback (lastResort handler);
        # the session raises its own one-line SSHError instead
        logging.getLogger("paramiko").addHandler(_QUIET)
        client = paramiko.SSHClient()
        policy = RecordPolicy(self)
        if t.own_host_key:
            try:
                expected = key_from_line(t.own_host_key)
            except ValueError as exc:
                raise self._err(SSHError, f"own guest host key: {exc}") from None
            client.get_host_keys().add(t.known_hosts_name, expected.get_name(), expected)
        else:
            kh = Path(self.known_hosts)
            kh.parent.mkdir(parents=True, exist_ok=True)
            if not kh.exists():
                kh.touch(mode=0o600)
            client.load_host_keys(str(kh))
        client.set_missing_host_key_policy(policy)
        to = self.connect_timeout
        try:
            client.connect(t.host, port=t.port, username=t.user, pkey=pkey, timeout=to,
                           banner_timeout=to, auth_timeout=to, allow_agent=False,
                           look_for_keys=False)
        except paramiko.BadHostKeyException as exc:
            client.close()
            if t.own_host_key:
                raise self._err(HostKeyChanged, (
                    f"host key is {fingerprint(exc.key)}, not {fingerprint(exc.expected_key)} "
                    "that rxl generated for its own guest: this is not the guest rxl "
                    "started")) from None
            raise self._err(HostKeyChanged, (
                f"HOST KEY CHANGED: it is now {fingerprint(exc.key)}, recorded "
                f"{fingerprint(exc.expected_key)} in {self.known_hosts}; if the target was "
                f"reinstalled, remove the old line: ssh-keygen -f {self.known_hosts} "
                f"-R '{t.known_hosts_name}'")) from None
        except paramiko.AuthenticationException as exc:
            client.close()
            raise self._err(AuthFailed, (
                f"authentication failed for user {t.user} with key {key_path} "
                f"({last_line(str(exc)) or 'rejected'}); install {key_path}.pub in "
                f"~{t.user}/.ssh/authorized_keys on the target")) from None
        except (socket.timeout, TimeoutError):
            client.close()
            raise self._err(TimedOut, f"connect timed out after {to:.0f} s") from None
        except paramiko.ssh_exception.NoValidConnectionsError as exc:
            client.close()
            codes = {getattr(e, "errno", None) for e in exc.errors.values()}
            if codes <= {errno.ECONNREFUSED}:
                raise self._err(Refused, "connection refused (no sshd listening)") from None
            raise self._err(SSHError, f"cannot connect: {last_line(str(exc))}") from None
        except ConnectionRefusedError:
            client.close()
            raise self._err(Refused, "connection refused (no sshd listening)") from None
        except paramiko.SSHException as exc:
            client.close()
            msg = last_line(str(exc))
            if "banner" in msg.lower() or "no existing session" in msg.lower():
                # paramiko's start_client gives up silently at `timeout`; the
                # authentication step then finds no session.
                raise self._err(TimedOut, f"no SSH banner/handshake within {to:.0f} s "
                                          f"({msg})") from None
            raise self._err(SSHError, f"SSH handshake failed: {msg}") from None
        except socket.gaierror as exc:  # waiting does not make a name resolve
            client.close()
            raise self._err(Unresolved, f"cannot resolve {t.host}: {exc.strerror}") from None
        except OSError as exc:
            client.close()
            raise self._err(SSHError, f"cannot connect: {exc.strerror or exc}") from None
        self.client = client

    def _transport(self):
        self.connect()
        return self.client.get_transport()

    def _open(self, what: str):
        """A new session channel (``what="session"``) or SFTP client (``"sftp"``).

        A connection that dropped without the client noticing yet (the target
        rebooted, sshd restarted) fails here: it is closed and made once more.
        """
        import paramiko
        for attempt in (0, 1):
            tr = self._transport()
            try:
                if what == "sftp":
                    return paramiko.SFTPClient.from_transport(tr)
                return tr.open_session(timeout=self.connect_timeout)
            except (EOFError, OSError, paramiko.SSHException) as exc:
                self.close()
                if attempt:
                    raise self._err(SSHError, f"cannot open a {what} channel: "
                                              f"{last_line(str(exc)) or type(exc).__name__}") from None

    # ----------------------------------------------------------- commands
    def run(self, command: str, *, timeout: float = DEFAULT_COMMAND_TIMEOUT,
            check: bool = False, input: Optional[bytes] = None) -> CommandResult:
        """Run ``command`` (a shell line) on the target; wait at most ``timeout`` s.

        Returns a :class:`CommandResult`. Raises TimedOut (the channel is
        closed; sshd then hangs up the command), CommandKilled (no exit status:
        killed by a signal, or the connection dropped), CommandFailed (rc != 0
        and ``check``), or a connection error (see :meth:`connect`).
        """
        self.echo(f"$ {command}")
        chan = self._open("session")
        tr = chan.get_transport()
        t0 = self.clock()
        out, err = io.BytesIO(), io.BytesIO()
        try:
            chan.exec_command(command)
            if input:
                chan.sendall(input)
            chan.shutdown_write()
            while True:
                if chan.recv_ready():
                    out.write(chan.recv(65536))
                    continue
                if chan.recv_stderr_ready():
                    err.write(chan.recv_stderr(65536))
                    continue
                if chan.exit_status_ready():
                    break
                left = timeout - (self.clock() - t0)
                if left <= 0:
                    raise self._err(TimedOut, f"command timed out after {timeout:.0f} s "
                                              f"and was hung up: {short(command)}")
                select.select([chan], [], [], min(left, 0.5))
            # drain what arrived with the exit status
            while chan.recv_ready():
                out.write(chan.recv(65536))
            while chan.recv_stderr_ready():
                err.write(chan.recv_stderr(65536))
            rc = chan.recv_exit_status()
        finally:
            chan.close()
        res = CommandResult(command, rc, out.getvalue().decode("utf-8", "replace"),
                            err.getvalue().decode("utf-8", "replace"), self.clock() - t0)
        if rc == -1:
            why = ("the connection dropped" if not tr.is_active()
                   else "killed by a signal (no exit status)")
            raise self._err(CommandKilled, f"command {why} after {res.seconds:.0f} s: "
                                           f"{short(command)}")
        if check and rc != 0:
            raise self._err(CommandFailed, f"exit {rc}: {short(command)}"
                            + (f": {last_line(res.stderr)}" if last_line(res.stderr) else ""))
        return res

    def stream(self, command: str) -> "SSHStream":
        """``command`` as a console-like stream (:class:`rxl.guest.console.Transport`)."""
        return SSHStream(self, command)

    # ----------------------------------------------------------- files
    def put(self, local: str, remote: str, *, mode: Optional[int] = None) -> int:
        """Copy ``local`` to ``remote`` over SFTP (``mode``: chmod after). Returns bytes.

        Raises SSHError naming both paths on failure.
        """
        self.echo(f"put {local} -> {remote}")
        if not Path(local).is_file():
            raise self._err(SSHError, f"put {local}: no such file")
        sftp = self._open("sftp")
        try:
            attrs = sftp.put(local, remote)
            if mode is not None:
                sftp.chmod(remote, mode)
            return attrs.st_size or 0
        except OSError as exc:
            raise self._err(SSHError, f"put {local} -> {remote}: "
                                      f"{exc.strerror or exc}") from None
        finally:
            sftp.close()

    def get(self, remote: str, local: str) -> int:
        """Copy ``remote`` to ``local`` over SFTP. Returns bytes. SSHError on failure."""
        self.echo(f"get {remote} -> {local}")
        Path(local).parent.mkdir(parents=True, exist_ok=True)
        sftp = self._open("sftp")
        try:
            sftp.get(remote, local)
            return os.stat(local).st_size
        except OSError as exc:
            raise self._err(SSHError, f"get {remote} -> {local}: "
                                      f"{exc.strerror or exc}") from None
        finally:
            sftp.close()

    def exists(self, remote: str) -> bool:
        """True if ``remote`` exists on the target (SFTP stat)."""
        sftp = self._open("sftp")
        try:
            sftp.stat(remote)
            return True
        except OSError:
            return False
        finally:
            sftp.close()

    def is_dir(self, remote: str) -> bool:
        sftp = self._open("sftp")
        try:
            return stat.S_ISDIR(sftp.stat(remote).st_mode or 0)
        except OSError:
            return False
        finally:
            sftp.close()

    # ----------------------------------------------------------- up / reboot
    def wait_up(self, timeout: float, *, interval: float = DEFAULT_POLL_INTERVAL,
                probe: str = "true") -> float:
        """Retry connecting (and running ``probe``) until it works; return seconds waited.

        Refused, timed out and dropped connections are retried (``echo`` says
        so once); AuthFailed, HostKeyChanged and Unresolved are raised at once. After
        ``timeout`` s raises TimedOut naming the last error.
        """
        t0 = self.clock()
        last = "no attempt"
        while True:
            try:
                self.connect()
                self.run(probe, timeout=max(self.connect_timeout, 5.0), check=True)
                return self.clock() - t0
            except (AuthFailed, HostKeyChanged, Unresolved):
                raise
            except (SSHError, EOFError, OSError) as exc:
                if last == "no attempt":
                    self.echo(f"{exc}; retrying for up to {timeout:.0f} s")
                last = str(exc)
                self.close()
            if self.clock() - t0 + interval > timeout:
                raise self._err(TimedOut, f"not reachable after {timeout:.0f} s "
                                          f"(last: {last})")
            self.sleep(interval)

    def boot_id(self, command: str = BOOT_ID_COMMAND) -> str:
        """What identifies the running boot (``kern.boottime``); raises CommandFailed."""
        return self.run(command, timeout=60, check=True).stdout.strip()

    def reboot(self, *, command: str = REBOOT_COMMAND, timeout: float = 900.0,
               interval: float = DEFAULT_POLL_INTERVAL,
               boot_id_command: str = BOOT_ID_COMMAND) -> float:
        """Reboot the target and wait until a *new* boot answers; return seconds.

        The boot id (``boot_id_command``) is read before; ``command`` is sent
        without waiting for it to finish; then :meth:`wait_up` is retried until
        the boot id differs. Raises TimedOut after ``timeout`` s.
        """
        before = self.boot_id(boot_id_command)
        self.echo(f"$ {command}  (not waited for)")
        chan = self._open("session")
        chan.exec_command(f"nohup sh -c {shlex.quote('sleep 1; ' + command)} "
                          ">/dev/null 2>&1 </dev/null &")
        chan.recv_exit_status()
        chan.close()
        self.close()
        t0 = self.clock()
        while True:
            left = timeout - (self.clock() - t0)
            self.wait_up(max(left, interval), interval=interval)
            try:
                now = self.boot_id(boot_id_command)
            except SSHError:
                now = before
            if now != before:
                return self.clock() - t0
            self.close()
            if self.clock() - t0 + interval > timeout:
                raise self._err(TimedOut, f"still the same boot ({before}) {timeout:.0f} s "
                                          f"after {command!r}")
            self.sleep(interval)
