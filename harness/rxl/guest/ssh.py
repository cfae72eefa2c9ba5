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

Where to connect is an :class:`SSHTarget` (:func:`parse_url` reads
``ssh://[user@]host[:port]``); :class:`DryRun` stands in for the session under
``--dry-run`` and only records the remote actions.  Every error is one line
naming the target (``ssh://user@host:port``): :class:`Refused`,
:class:`TimedOut` (connect, banner or command), :class:`Unresolved`,
:class:`AuthFailed`, :class:`HostKeyChanged`, :class:`CommandKilled` (no exit
status: a signal, or the connection dropped), :class:`CommandFailed` (a
non-zero exit where ``check=True``).

Host keys (``$RXL_WORK/ssh/known_hosts``; the keys are :mod:`rxl.guest.sshkeys`'s):

* a target's host key is recorded on first contact and checked on every
  later one. A different key is
  :class:`HostKeyChanged`, naming the target and both fingerprints; nothing
  is overwritten. The harness's own QEMU guest is the exception: its host key
  is the one the harness generated at image time (``SSHTarget.own_host_key``),
  the loopback port it forwards changes from boot to boot, so that key alone
  is trusted for it and ``known_hosts`` is not consulted.
"""

from __future__ import annotations

import errno
import io
import ipaddress
import logging
import os
import re
import select
import shlex
import socket
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, List, Optional

from rxl.cli.options import missing
from rxl.errors import DataError, MachineError, reason, show
from rxl.guest.sshkeys import (RecordPolicy, fingerprint, harness_key, key_from_line, load_key,
                               ssh_dir)

#: Seconds for the TCP connect, the SSH banner and authentication.
DEFAULT_CONNECT_TIMEOUT = 10.0
#: Default seconds one remote command may run (an ATF case is given 300 s by
#: the rc, rxl.guest.image.DEFAULT_CASE_TIMEOUT; a whole program more).
DEFAULT_COMMAND_TIMEOUT = 900.0
#: How often :meth:`SSHSession.wait_up` retries, seconds.
DEFAULT_POLL_INTERVAL = 2.0
#: What identifies one boot of a FreeBSD machine: ``{ sec = N, usec = M } ...``.
BOOT_ID_COMMAND = "sysctl -n kern.boottime"
#: How a target is rebooted by default: ``shutdown -r now`` runs rc.shutdown
#: (unlike ``reboot``), so a one-shot ``nextboot -k`` is honoured the same way.
REBOOT_COMMAND = "shutdown -r now"

_URL = re.compile(r"ssh://(?:(?P<user>[^@/\[\]]*)@)?(?P<host>\[[^\]]*\]|[^@/:\[\]]*)"
                  r"(?::(?P<port>[0-9]{1,5}))?")
#: One label of a host name (RFC 1123): letters, digits and '-', not at either end.
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
#: A login name: what FreeBSD's pw(8) takes, not starting with '-' (it would be
#: an option to whatever reads it); at most 32 characters (MAXLOGNAME - 1).
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}")
#: Longest host name (RFC 1035: 253 characters in text form).
HOST_MAX = 253


class SSHError(MachineError):
    """Base of the transport's errors; ``target`` is the ``ssh://`` name, ``kind`` a word."""

    kind = "error"

    def __init__(self, target: str, message: str):
        super().__init__(f"{target}: {message}")
        self.target = target


class Refused(SSHError):
    kind = "refused"


class TimedOut(SSHError):
    kind = "timeout"


class Unresolved(SSHError):
    """The target's host name does not resolve (not retried)."""

    kind = "unresolved"


class AuthFailed(SSHError):
    kind = "auth"


class HostKeyChanged(SSHError):
    kind = "hostkey"


class CommandKilled(SSHError):
    kind = "killed"


class CommandFailed(SSHError):
    kind = "failed"


class TargetError(DataError):
    """A target that cannot be named (bad ``ssh://`` URL, port, user)."""


@dataclass(frozen=True)
class SSHTarget:
    """Where to connect.

    host: name or address (IPv6 without brackets); port: TCP port (1-65535);
    user: login name; key: private key file (None: the harness key,
    :func:`harness_key`); own_host_key: for the harness's own guest, the
    public host key line (``ssh-ed25519 AAAA...``) generated at image time,
    else None; name: how errors and logs call it (default the URL).
    """

    host: str
    port: int = 22
    user: str = "root"
    key: Optional[str] = None
    own_host_key: Optional[str] = None
    name: str = ""

    @property
    def url(self) -> str:
        """``ssh://user@host:port`` (IPv6 hosts in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"ssh://{self.user}@{host}:{self.port}"

    @property
    def label(self) -> str:
        return self.name or self.url

    @property
    def known_hosts_name(self) -> str:
        """The host's name in ``known_hosts``: ``host`` on port 22, else ``[host]:port``."""
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"


def check_host(text: str) -> str:
    """``text`` as a host to connect to, or TargetError saying why.

    An IP literal (the :mod:`ipaddress` module: IPv4, IPv6, an IPv6 scope of
    letters and digits, IPv6 in brackets as URLs write it) or a host name of
    RFC 1123 labels (at most 253 characters, labels of 1-63 letters, digits
    and '-' not at either end, the last not all digits, a trailing '.' of a
    fully qualified name allowed); nothing else, so no
    option (``-oProxyCommand=...``), query, path or shell word gets through.
    A multicast, unspecified (0.0.0.0, ::) or the limited broadcast address
    is refused: no host answers SSH there.
    Returns the host as :class:`SSHTarget` holds it: an address in its
    canonical form (brackets dropped), a name as given.
    """
    if not isinstance(text, str) or not text:
        raise TargetError("no host given (a host name or an IP address)")
    shown = show(text, 60)
    inner = text[1:-1] if text.startswith("[") and text.endswith("]") else None
    candidate = inner if inner is not None else text
    addr, _, scope = candidate.partition("%")
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        ip = None
    if ip is not None:
        if inner is not None and ip.version != 6:
            raise TargetError(f"{shown}: brackets hold an IPv6 address, not {ip}")
        # An empty scope ("fe80::1%") is refused too: ipaddress refuses it, and
        # dropping the '%' would aim at another address than the one given.
        if "%" in candidate and (ip.version != 6
                                 or not re.fullmatch(r"[A-Za-z0-9]{1,15}", scope)):
            raise TargetError(f"{shown}: an IPv6 scope is an interface name (fe80::1%em0)")
        what = ("a multicast address" if ip.is_multicast else
                "the unspecified address" if ip.is_unspecified else
                "the broadcast address" if ip == ipaddress.IPv4Address("255.255.255.255")
                else None)
        if what:  # no SSH peer has one: the run would fail when it connects
            raise TargetError(f"{shown}: {what}, not a host")
        return f"{ip}%{scope}" if scope else str(ip)
    if ":" in candidate:  # only an IPv6 address holds ':' (a port is parse_url's)
        raise TargetError(f"{shown}: not an IPv6 address")
    if inner is not None or "%" in text or "[" in text or "]" in text:
        raise TargetError(f"{shown}: not a host name or IP address (brackets hold an IPv6 "
                          "address, [fe80::1], and '%' begins its scope, fe80::1%em0; a "
                          "host name is letters, digits, '-' and '.')")
    # A fully qualified name may end in the root's dot (localhost.), as ssh takes it.
    name = text[:-1] if text.endswith(".") and len(text) > 1 else text
    labels = name.split(".")
    if len(name) > HOST_MAX or not all(_LABEL.fullmatch(lb) for lb in labels) \
            or labels[-1].isdigit():
        raise TargetError(f"{shown}: not a host name or IP address (a host name is labels "
                          "of 1-63 letters, digits and '-', not '-' at either end, joined "
                          "by '.', the last not all digits, at most 253 characters; one "
                          "'.' may end it)")
    return text


def check_user(text: str) -> str:
    """``text`` if it is a login name (:data:`_USER`), else TargetError."""
    if text == "":
        raise TargetError("the user is empty: give a login name (letters, digits, '_', "
                          "'.', '-', not starting with '-', at most 32)")
    if not isinstance(text, str) or not _USER.fullmatch(text):
        raise TargetError(f"{show(text, 40)}: not a login name (letters, digits, '_', '.', "
                          "'-', not starting with '-', at most 32)")
    return text


def parse_url(url: str, *, default_user: str = "root", key: Optional[str] = None) -> SSHTarget:
    """``ssh://[user@]host[:port]`` -> :class:`SSHTarget` (port 22, ``default_user``).

    The host is :func:`check_host`'s (a name or an IP literal, IPv6 in
    brackets), the user :func:`check_user`'s, the port 1-65535; nothing else
    (no query, fragment or path, not even a trailing '/'; no blank or newline
    around it). Raises :class:`TargetError` with a
    one-line reason.
    """
    # fullmatch of the text as given: no blank, newline or '/' around it is
    # dropped (a plan line would print it, and ssh would be handed another value)
    m = _URL.fullmatch(url) if isinstance(url, str) else None
    if not m:
        raise TargetError(f"{show(url, 80)}: not an ssh://[user@]host[:port] address")
    port = int(m.group("port") or 22)
    if not 1 <= port <= 65535:
        raise TargetError(f"{show(url, 80)}: port {port} is not in 1..65535")
    try:
        host = check_host(m.group("host"))
        user = check_user(m.group("user")) if m.group("user") is not None else default_user
    except TargetError as exc:
        raise TargetError(f"{show(url, 80)}: {exc}") from None
    return SSHTarget(host=host, port=port, user=user, key=key)


@dataclass
class CommandResult:
    """One remote command: ``rc`` exit status, output as text, ``seconds`` wall."""

    command: str
    rc: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.rc == 0


def last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


def exc_words(exc: BaseException) -> str:
    """A connection error's words: an OSError's as rxl.errors.reason gives them
    (``Connection refused``, never ``[Errno 111] Connection refused``), another's
    last line (paramiko's), else its type's name."""
    if isinstance(exc, OSError):
        return reason(exc)
    return last_line(str(exc)) or type(exc).__name__


def short(command: str, width: int = 120) -> str:
    one = " ".join(command.split())
    return one if len(one) <= width else one[: width - 3] + "..."


class SSHStream:
    """A remote command read like the serial console (rxl.guest.console.Transport).

    stdout and stderr are merged. ``read`` returns bytes (maybe empty on
    timeout) or None at end of stream; ``alive`` is False once the command
    exited; ``stop`` closes the channel and returns the exit status (None if
    there was none).
    """

    def __init__(self, session, command: str):
        self.session, self.command = session, command
        self.chan = None

    def start(self) -> None:
        self.session.echo(f"$ {self.command}  (streamed)")
        self.chan = self.session._open("session")
        self.chan.set_combine_stderr(True)
        self.chan.exec_command(self.command)
        self.chan.shutdown_write()

    def read(self, timeout: float) -> Optional[bytes]:
        assert self.chan is not None
        if not self.chan.recv_ready():
            if self.chan.eof_received or self.chan.closed:
                return None
            select.select([self.chan], [], [], max(timeout, 0.0))
            if not self.chan.recv_ready():
                return None if (self.chan.eof_received or self.chan.closed) else b""
        data = self.chan.recv(65536)
        return data if data else None

    def alive(self) -> bool:
        return self.chan is not None and not self.chan.exit_status_ready()

    def stop(self) -> Optional[int]:
        if self.chan is None:
            return None
        rc = None
        if self.chan.exit_status_ready() and self.chan.exit_status != -1:
            rc = self.chan.exit_status
        self.chan.close()
        return rc


@dataclass
class DryRun:
    """Stands in for :class:`SSHSession` under ``--dry-run``: records, runs nothing.

    ``commands`` collects each remote action as a line (``$ cmd``, ``put a ->
    b``, ``get a -> b``, ``reboot``). ``run`` returns rc 0 and empty output, so
    callers must not branch on output in a dry run.
    """

    target: SSHTarget
    commands: List[str] = field(default_factory=list)

    def run(self, command: str, **_kw) -> CommandResult:
        self.commands.append(command)
        return CommandResult(command, 0, "", "", 0.0)

    def put(self, local: str, remote: str, *, mode: Optional[int] = None) -> int:
        self.commands.append(f"# sftp put {local} {remote}" + (f" (mode {mode:o})"
                                                               if mode is not None else ""))
        return 0

    def get(self, remote: str, local: str) -> int:
        self.commands.append(f"# sftp get {remote} {local}")
        return 0

    def exists(self, remote: str) -> bool:
        return False

    def is_dir(self, remote: str) -> bool:
        return False

    def wait_up(self, timeout: float, **_kw) -> float:
        self.commands.append(f"# wait for {self.target.label} (up to {timeout:.0f} s)")
        return 0.0

    def reboot(self, *, command: str = REBOOT_COMMAND, timeout: float = 900.0, **_kw) -> float:
        self.commands.append(BOOT_ID_COMMAND)
        self.commands.append(f"{command}  # then wait up to {timeout:.0f} s for a new "
                             f"{BOOT_ID_COMMAND}")
        return 0.0

    def stream(self, command: str):
        self.commands.append(command)
        return None

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


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
            raise self._err(AuthFailed, f"client key: {reason(exc)}") from None
        # paramiko logs each refused banner with a traceback (lastResort handler);
        # the session raises its own one-line SSHError instead
        logging.getLogger("paramiko").addHandler(_QUIET)
        client = paramiko.SSHClient()
        policy = RecordPolicy(self.known_hosts, t.label, own_host_key=bool(t.own_host_key),
                              recorded=self.recorded, echo=self.echo)
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
            raise self._err(SSHError, f"cannot connect: {reason(exc)}") from None
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
            raise self._err(SSHError, f"cannot connect: {reason(exc)}") from None
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
                                              f"{exc_words(exc)}") from None

    # ----------------------------------------------------------- commands
    def run(self, command: str, *, timeout: float = DEFAULT_COMMAND_TIMEOUT,
            check: bool = False, input: Optional[bytes] = None) -> CommandResult:
        """Run ``command`` (a shell line) on the target; wait at most ``timeout`` s.

        Returns a :class:`CommandResult`. Raises TimedOut (the channel is
        closed; sshd then hangs up the command), CommandKilled (no exit status:
        killed by a signal, or the connection dropped), CommandFailed (rc != 0
        and ``check``), or a connection error (see :meth:`connect`).
        """
        import paramiko
        self.echo(f"$ {command}")
        chan = self._open("session")
        tr = chan.get_transport()
        t0 = self.clock()
        out, err = io.BytesIO(), io.BytesIO()
        try:
            try:
                chan.exec_command(command)
                if input:
                    chan.sendall(input)
                chan.shutdown_write()
            except (EOFError, OSError, paramiko.SSHException) as exc:
                # the server closed the channel before the command started
                # (sshd restarting, the target going down): a connection
                # error, which wait_up retries, not a paramiko exception
                self.close()
                raise self._err(SSHError, f"channel closed before the command ran: "
                                          f"{exc_words(exc)}: "
                                          f"{short(command)}") from None
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
            # sshd sends the exit status when it reaps the command, and what the
            # command wrote last may still follow it: read on to the channel's
            # EOF (or its close), within what is left of the timeout
            while True:
                if chan.recv_ready():
                    out.write(chan.recv(65536))
                    continue
                if chan.recv_stderr_ready():
                    err.write(chan.recv_stderr(65536))
                    continue
                if chan.eof_received or chan.closed:
                    break
                left = timeout - (self.clock() - t0)
                if left <= 0:
                    raise self._err(TimedOut, f"command exited but its output did not end "
                                              f"within {timeout:.0f} s: {short(command)}")
                select.select([chan], [], [], min(left, 0.5))
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
            raise self._err(SSHError, f"put {local}: {missing(local)}")
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
                    self.echo(f"{reason(exc)}; retrying for up to {timeout:.0f} s")
                last = reason(exc)
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
