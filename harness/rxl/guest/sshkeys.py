"""SSH keys: the harness's client key, host-key fingerprints, and ``known_hosts``.

All under ``$RXL_WORK/ssh`` (:mod:`rxl.paths`):

* ``id_ed25519`` / ``id_ed25519.pub``: the harness's client key, an Ed25519
  key made on first use (:func:`harness_key`), mode 0600;
* ``known_hosts``: OpenSSH format.  A target's host key is recorded on first
  contact (:class:`RecordPolicy`) and checked on every later one by the
  session (:class:`rxl.guest.ssh.SSHSession`); a different key stops it.

Fingerprints are OpenSSH's ``SHA256:...`` (:func:`fingerprint`); key lines
and key files are read with paramiko (:func:`key_from_line`, :func:`load_key`;
paramiko is imported on use: it is an optional dependency, ``rxl[guest]``).
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import stat
from pathlib import Path
from typing import Callable, List, Optional

from rxl import paths
from rxl.cli.options import link_reason
from rxl.errors import DataError, os_reason, show


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


class KeyFileError(DataError):
    """A key file that cannot be used: missing, a directory, unreadable, not a
    private key, encrypted, or not matching its ``.pub``; or a key directory
    that cannot be made (``$RXL_WORK`` a file, read-only).  ``missing`` is true
    when the file does not exist (yet): ``rxl targets`` lists such a key as
    needed later, and refuses every other problem."""

    missing = False


#: Largest private key file read, bytes: an OpenSSH RSA 16384-bit key is some 12 KiB.
MAX_KEY_BYTES = 1 << 20


def _kind(mode: int) -> str:
    """What a file that is not a regular one is, for a message."""
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "another kind of file"


def _key_file_error(path: str, exc: OSError) -> "KeyFileError":
    """The one-line error for a key file that cannot be looked at or read: a
    symlink loop or dangling link is said to be one, not missing (no key is
    made there); a missing file is marked ``missing``."""
    why = link_reason(path)
    if why:
        return KeyFileError(f"{show(path)}: {why}")
    if isinstance(exc, FileNotFoundError):
        err = KeyFileError(f"{show(path)}: no such key file")
        err.missing = True
        return err
    return KeyFileError(f"{show(path)}: {os_reason(exc)}")


def private_key_line(path: str) -> str:
    """The public line (``TYPE BASE64``) of the private key file ``path``,
    read with ``cryptography`` (OpenSSH or PEM; Ed25519, ECDSA or RSA).

    Raises KeyFileError (one line naming the file) for a file that is
    missing, a directory, unreadable, not such a key, or encrypted (the
    harness cannot give a passphrase).
    """
    try:  # paramiko's own dependency (rxl[guest])
        from cryptography.exceptions import UnsupportedAlgorithm
        from cryptography.hazmat.primitives import serialization
    except ImportError:
        raise KeyFileError(f"{show(path)}: reading a key needs paramiko: pip install "
                           "'rxl[guest]'") from None
    p = Path(path)
    if p.is_dir():
        raise KeyFileError(f"{show(path)}: is a directory, not a private key file")
    # Looked at (stat, links followed) before it is opened: a FIFO would block the
    # open for ever, /dev/zero never ends.
    try:
        st = os.stat(p)
    except OSError as exc:
        raise _key_file_error(path, exc) from None
    if not stat.S_ISREG(st.st_mode):
        raise KeyFileError(f"{show(path)}: {_kind(st.st_mode)}, not a regular file, no "
                           "private key")
    if st.st_size > MAX_KEY_BYTES:
        raise KeyFileError(f"{show(path)}: {st.st_size} bytes, over the {MAX_KEY_BYTES} "
                           "of any private key file: no private key")
    try:
        with open(p, "rb") as f:
            data = f.read(MAX_KEY_BYTES + 1)
    except OSError as exc:
        raise _key_file_error(path, exc) from None
    key = None
    for load in (serialization.load_ssh_private_key, serialization.load_pem_private_key):
        try:
            key = load(data, password=None)
            break
        except TypeError:  # "private key is encrypted"
            raise KeyFileError(f"{show(path)}: an encrypted private key (the harness "
                               "cannot give its passphrase)") from None
        except (ValueError, UnsupportedAlgorithm):
            continue
    if key is None:
        raise KeyFileError(f"{show(path)}: not a private key (OpenSSH or PEM: Ed25519, "
                           "ECDSA or RSA)")
    try:
        pub = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                            serialization.PublicFormat.OpenSSH)
    except (ValueError, TypeError):
        raise KeyFileError(f"{show(path)}: a private key SSH cannot use") from None
    return pub.decode()


def check_key_file(path: str) -> None:
    """Refuse (KeyFileError) a private key file SSH could not authenticate with;
    a ``.pub`` next to it must hold the same key."""
    line = private_key_line(path)
    pub = Path(str(path) + ".pub")
    if pub.is_file():
        try:
            parts = pub.read_text(errors="replace").split()
        except OSError as exc:
            raise KeyFileError(f"{pub}: {exc.strerror}") from None
        if parts[:2] != line.split()[:2]:
            raise KeyFileError(f"{pub}: does not hold the public half of {path}; remove "
                               "both (a new harness key is made) or mend the .pub")


def harness_key(work: Optional[Path] = None) -> Path:
    """The harness's client key ``$RXL_WORK/ssh/id_ed25519``, made on first use
    and checked (:func:`check_key_file`) when it exists. Returns its path.

    Raises KeyFileError when the key is damaged, or ``$RXL_WORK/ssh`` cannot be
    made or written (``$RXL_WORK`` a file, a read-only directory).
    """
    d = ssh_dir(work)
    path = d / "id_ed25519"
    if path.exists() or path.is_symlink():
        try:
            check_key_file(str(path))
        except KeyFileError as exc:
            raise KeyFileError(f"the harness key: {exc}; remove {path} and {path}.pub to "
                               "make a new one (then give targets the new line of rxl "
                               "targets --key)") from None
        return path
    try:
        d.mkdir(parents=True, exist_ok=True)
        os.chmod(d, 0o700)
        generate_ed25519(path, comment=f"rxl@{socket.gethostname()}")
    except OSError as exc:
        where = exc.filename or d
        raise KeyFileError(f"cannot make the harness key in {d} ($RXL_WORK/ssh): "
                           f"{where}: {exc.strerror}") from None
    return path


def public_file(private_key: Path) -> Path:
    """The ``.pub`` beside the harness's ``private_key`` (:func:`harness_key`),
    written again from the key (its public line and ``rxl@HOST``, as when it
    was made) when it was removed, so the file ``rxl targets --key`` names is
    there. Raises KeyFileError when it cannot be written."""
    pub = Path(str(private_key) + ".pub")
    if pub.exists() or pub.is_symlink():
        return pub  # check_key_file has judged it
    line = f"{private_key_line(str(private_key))} rxl@{socket.gethostname()}\n"
    try:
        pub.write_text(line)
    except OSError as exc:
        raise KeyFileError(f"cannot write {pub} again (the public half of {private_key}): "
                           f"{os_reason(exc)}") from None
    return pub


def public_line(private_key: Path) -> str:
    """The ``ssh-ed25519 AAAA...`` line of a private key: its ``.pub`` (with its
    comment) once :func:`check_key_file` has found the two match, else derived
    from the key. Raises KeyFileError."""
    check_key_file(str(private_key))
    pub = Path(str(private_key) + ".pub")
    if pub.is_file():
        return pub.read_text().strip()
    return private_key_line(str(private_key))


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


class RecordPolicy:
    """paramiko MissingHostKeyPolicy: record a first-contact host key in ``known_hosts``.

    ``label``: the target's name in the message; ``recorded``: each message is
    appended there and given to ``echo``.  A target whose host key the harness
    generated (``own_host_key``) never has a missing key: refused.
    """

    def __init__(self, known_hosts: str, label: str, *, own_host_key: bool = False,
                 recorded: Optional[List[str]] = None,
                 echo: Callable[[str], None] = lambda s: None):
        self.known_hosts, self.label, self.own_host_key = known_hosts, label, own_host_key
        self.recorded = recorded if recorded is not None else []
        self.echo = echo

    def missing_host_key(self, client, hostname, key) -> None:
        import paramiko
        if self.own_host_key:  # the expected key is always present for the own guest
            raise paramiko.SSHException(f"{hostname}: unexpected missing host key")
        client.get_host_keys().add(hostname, key.get_name(), key)
        # Append, never rewrite: lines of other targets stay as they are.
        with open(self.known_hosts, "a") as fh:
            fh.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        msg = (f"{self.label}: host key {fingerprint(key)} recorded in {self.known_hosts} "
               "(first contact)")
        self.recorded.append(msg)
        self.echo(msg)
