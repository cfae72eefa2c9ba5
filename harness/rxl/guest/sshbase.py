"""SSH targets: names, errors, keys, command results, and the dry-run stand-in.

The parts of the SSH transport (:mod:`rxl.guest.ssh`) that hold no
connection: :class:`SSHTarget` and ``ssh://`` URLs; the one-line errors;
the harness's Ed25519 key and host-key fingerprints; :class:`CommandResult`;
:class:`DryRun`, which records the remote actions ``--dry-run`` prints.

Keys (all under ``$RXL_WORK/ssh``, see :mod:`rxl.paths`):

* ``id_ed25519`` / ``id_ed25519.pub``: the harness's client key, an Ed25519
  key made on first use (:func:`harness_key`), mode 0600;
* ``known_hosts``: OpenSSH format; see :mod:`rxl.guest.ssh` for the policy.

Every error is one line naming the target (``ssh://user@host:port``):
:class:`Refused`, :class:`TimedOut` (connect, banner or command),
:class:`AuthFailed`, :class:`HostKeyChanged`, :class:`CommandKilled` (no exit
status: a signal, or the connection dropped), :class:`CommandFailed` (a
non-zero exit where ``check=True``).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import select
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

from rxl import paths

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

_URL = re.compile(r"ssh://(?:(?P<user>[^@/:\s]+)@)?(?P<host>\[[0-9a-fA-F:]+\]|[^@/:\s\[\]]+)"
                  r"(?::(?P<port>[0-9]+))?/?")


class SSHError(RuntimeError):
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


class TargetError(ValueError):
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


def parse_url(url: str, *, default_user: str = "root", key: Optional[str] = None) -> SSHTarget:
    """``ssh://[user@]host[:port]`` -> :class:`SSHTarget` (port 22, ``default_user``).

    Raises :class:`TargetError` with a one-line reason.
    """
    m = _URL.fullmatch(url.strip())
    if not m:
        raise TargetError(f"{url!r}: not an ssh://[user@]host[:port] address")
    port = int(m.group("port") or 22)
    if not 1 <= port <= 65535:
        raise TargetError(f"{url!r}: port {port} is not in 1..65535")
    host = m.group("host").strip("[]")
    return SSHTarget(host=host, port=port, user=m.group("user") or default_user, key=key)


# ------------------------------------------------------------------ keys

def ssh_dir(work: Optional[Path] = None) -> Path:
    """``$RXL_WORK/ssh`` (made 0700 on demand by the functions that write there)."""
    return Path(work if work is not None else paths.work_root()) / "ssh"


def generate_ed25519(path: Path, comment: str = "rxl") -> str:
    """Write a new Ed25519 private key (OpenSSH format, 0600) to ``path`` and its
    public line to ``path.pub``; return the public line (``ssh-ed25519 B64 comment``).

    The private key is written with ``cryptography`` (paramiko's own
    dependency; paramiko cannot generate Ed25519 keys). sshd and paramiko
    both read this format. Raises OSError if ``path`` cannot be written.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    priv = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                             serialization.NoEncryption())
    pub = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                        serialization.PublicFormat.OpenSSH).decode()
    line = f"{pub} {comment}\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(str(path) + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(priv)
    os.replace(str(path) + ".tmp", path)
    Path(str(path) + ".pub").write_text(line)
    return line.strip()


def harness_key(work: Optional[Path] = None) -> Path:
    """The harness's client key ``$RXL_WORK/ssh/id_ed25519``, made on first use. Returns its path."""
    d = ssh_dir(work)
    path = d / "id_ed25519"
    if not path.is_file():
        d.mkdir(parents=True, exist_ok=True)
        os.chmod(d, 0o700)
        generate_ed25519(path, comment=f"rxl@{socket.gethostname()}")
    return path


def public_line(private_key: Path) -> str:
    """The ``ssh-ed25519 AAAA...`` line of a private key (from ``.pub`` if present)."""
    pub = Path(str(private_key) + ".pub")
    if pub.is_file():
        return pub.read_text().strip()
    k = load_key(str(private_key))
    return f"{k.get_name()} {k.get_base64()}"


def fingerprint(key) -> str:
    """OpenSSH's ``SHA256:...`` fingerprint of a paramiko key (unpadded base64 of SHA-256)."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def key_from_line(line: str):
    """A paramiko public key from an OpenSSH line ``TYPE BASE64 [comment]``. ValueError if bad."""
    import paramiko
    parts = line.split()
    if len(parts) < 2:
        raise ValueError(f"{line!r}: not an OpenSSH public key line")
    try:
        return paramiko.PKey.from_type_string(parts[0], base64.b64decode(parts[1]))
    except (paramiko.SSHException, ValueError, TypeError) as exc:
        raise ValueError(f"{parts[0]} key: {exc}") from None


def load_key(path: str):
    import paramiko
    for cls in (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey):
        try:
            return cls.from_private_key_file(path)
        except paramiko.SSHException:
            continue
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: no such key file") from None
    raise ValueError(f"{path}: not an Ed25519, ECDSA or RSA private key (or encrypted)")


# ------------------------------------------------------------------ results

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


def short(command: str, width: int = 120) -> str:
    one = " ".join(command.split())
    return one if len(one) <= width else one[: width - 3] + "..."


class RecordPolicy:
    """paramiko MissingHostKeyPolicy: record a first-contact host key in known_hosts."""

    def __init__(self, session):
        self.s = session

    def missing_host_key(self, client, hostname, key) -> None:
        import paramiko
        s = self.s
        if s.target.own_host_key:  # the expected key is always present for the own guest
            raise paramiko.SSHException(f"{hostname}: unexpected missing host key")
        client.get_host_keys().add(hostname, key.get_name(), key)
        # Append, never rewrite: lines of other targets stay as they are.
        with open(s.known_hosts, "a") as fh:
            fh.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        msg = (f"{s.target.label}: host key {fingerprint(key)} recorded in {s.known_hosts} "
               "(first contact)")
        s.recorded.append(msg)
        s.echo(msg)


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
