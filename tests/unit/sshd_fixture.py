"""A real SSH server for the transport's tests: paramiko's server side on 127.0.0.1.

Not a mock: the client under test speaks the SSH protocol to it over TCP.
``exec`` requests run with ``/bin/sh -c`` (subprocess) in the server's root
directory, with stdin, stdout, stderr and the exit status carried over the
channel; a command killed by a signal gets no exit status (as OpenSSH's sshd
sends ``exit-signal`` instead). The ``sftp`` subsystem is paramiko's
SFTPServer over the same root (paths are taken relative to it, or to ``sftp_root``). Public-key
authentication only, against one authorized key.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import paramiko


class _SFTPHandle(paramiko.SFTPHandle):
    def stat(self):
        try:
            return paramiko.SFTPAttributes.from_stat(os.fstat(self.readfile.fileno()))
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno)

    def chattr(self, attr):
        try:
            paramiko.SFTPServer.set_file_attr(self.filename, attr)
            return paramiko.SFTP_OK
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno)


class _SFTP(paramiko.SFTPServerInterface):
    """SFTP over a directory: every path is resolved inside ``root``."""

    def __init__(self, server, *args, root: str = "/", **kwargs):
        super().__init__(server, *args, **kwargs)
        self.root = root

    def _real(self, path: str) -> str:
        return os.path.join(self.root, os.path.normpath("/" + path).lstrip("/"))

    def _errno(self, fn, *a):
        try:
            fn(*a)
            return paramiko.SFTP_OK
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno)

    def canonicalize(self, path):
        return os.path.normpath("/" + path)

    def list_folder(self, path):
        real = self._real(path)
        try:
            out = []
            for name in os.listdir(real):
                a = paramiko.SFTPAttributes.from_stat(os.stat(os.path.join(real, name)))
                a.filename = name
                out.append(a)
            return out
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno)

    def stat(self, path):
        try:
            return paramiko.SFTPAttributes.from_stat(os.stat(self._real(path)))
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno)

    lstat = stat

    def open(self, path, flags, attr):
        real = self._real(path)
        try:
            fd = os.open(real, flags, 0o644)
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno)
        if flags & os.O_WRONLY:
            mode = "ab" if flags & os.O_APPEND else "wb"
        elif flags & os.O_RDWR:
            mode = "a+b" if flags & os.O_APPEND else "r+b"
        else:
            mode = "rb"
        fh = os.fdopen(fd, mode)
        h = _SFTPHandle(flags)
        h.filename = real
        h.readfile = fh
        h.writefile = fh
        return h

    def remove(self, path):
        return self._errno(os.remove, self._real(path))

    def rename(self, old, new):
        return self._errno(os.rename, self._real(old), self._real(new))

    def mkdir(self, path, attr):
        return self._errno(os.mkdir, self._real(path))

    def rmdir(self, path):
        return self._errno(os.rmdir, self._real(path))

    def chattr(self, path, attr):
        return self._errno(paramiko.SFTPServer.set_file_attr, self._real(path), attr)


class _Server(paramiko.ServerInterface):
    def __init__(self, sshd: "SSHD"):
        self.sshd = sshd

    def check_channel_request(self, kind, chanid):
        if kind == "session":
            return paramiko.OPEN_SUCCEEDED
        return paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def get_allowed_auths(self, username):
        return "publickey"

    def check_auth_publickey(self, username, key):
        if username == self.sshd.user and key == self.sshd.authorized:
            return paramiko.AUTH_SUCCESSFUL
        return paramiko.AUTH_FAILED

    def check_channel_exec_request(self, channel, command):
        threading.Thread(target=self.sshd._exec, args=(channel, command.decode()),
                         daemon=True).start()
        return True


class SSHD:
    """The server. ``port=0`` picks a free port; ``host_key`` defaults to a new Ed25519 key.

    ``start()`` listens; ``stop()`` closes the listener, every connection and
    kills every command still running. ``commands`` lists what was executed.
    """

    def __init__(self, root: str, authorized, *, user: str = "root", host_key=None,
                 port: int = 0, sftp_root: str = None, env: dict = None,
                 status_first: bool = False):
        self.root, self.authorized, self.user = root, authorized, user
        # status_first: send the exit status as soon as the command exits and
        # its output 1.2 s later (past run()'s 0.5 s poll), an order OpenSSH's
        # sshd can also produce (the status when the child is reaped, what is
        # left in the channel's buffer after it)
        self.status_first = status_first
        self.sftp_root = sftp_root or root  # "/" when commands use absolute paths
        self.env = env
        self.host_key = host_key or new_host_key(Path(root).parent / f"hostkey-{time.time_ns()}")
        self.port = port
        self.commands = []
        self._sock = None
        self._transports = []
        self._procs = []
        self._stopping = False

    def start(self) -> "SSHD":
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # A restart on the same port (a "reboot") can race the old listener's
        # teardown on a loaded machine: retry EADDRINUSE for up to 5 s.
        deadline = time.monotonic() + 5.0
        while True:
            try:
                s.bind(("127.0.0.1", self.port))
                break
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE or not self.port or \
                        time.monotonic() > deadline:
                    s.close()
                    raise
                time.sleep(0.1)
        s.listen(8)
        self.port = s.getsockname()[1]
        self._sock = s
        self._stopping = False
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def _accept(self) -> None:
        while not self._stopping:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            t = paramiko.Transport(conn)
            t.add_server_key(self.host_key)
            t.set_subsystem_handler("sftp", paramiko.SFTPServer, _SFTP, root=self.sftp_root)
            self._transports.append(t)
            try:
                t.start_server(server=_Server(self))
            except (paramiko.SSHException, EOFError, OSError):
                t.close()

    def _exec(self, chan, command: str) -> None:
        self.commands.append(command)
        p = subprocess.Popen(["/bin/sh", "-c", command], cwd=self.root, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True, env=self.env)
        self._procs.append(p)

        def pump(src, send):
            for chunk in iter(lambda: os.read(src.fileno(), 65536), b""):
                try:
                    send(chunk)
                except (OSError, EOFError, paramiko.SSHException):
                    return

        def feed():
            try:
                while True:
                    data = chan.recv(65536)
                    if not data:
                        break
                    p.stdin.write(data)
                    p.stdin.flush()
            except (OSError, ValueError):
                pass
            finally:
                try:
                    p.stdin.close()
                except OSError:
                    pass

        if self.status_first:
            out = p.stdout.read()
            p.wait()
            chan.send_exit_status(p.returncode)
            time.sleep(1.2)
            chan.sendall(out)
            chan.close()
            return
        pumps = [threading.Thread(target=pump, args=(p.stdout, chan.sendall), daemon=True),
                 threading.Thread(target=pump, args=(p.stderr, chan.sendall_stderr), daemon=True),
                 threading.Thread(target=feed, daemon=True)]
        for th in pumps:
            th.start()
        while p.poll() is None:
            if chan.closed or not chan.get_transport().is_active():
                _killpg(p)
            time.sleep(0.02)
        for th in pumps[:2]:
            th.join(timeout=5)
        if p.returncode >= 0 and not chan.closed:
            chan.send_exit_status(p.returncode)
        chan.close()  # killed by a signal: no exit status, as sshd sends exit-signal

    def stop(self) -> None:
        self._stopping = True
        if self._sock is not None:
            try:  # wakes the accept() thread (close() alone does not, on Linux)
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._sock.close()
            self._sock = None
        for t in self._transports:
            t.close()
        self._transports = []
        for p in self._procs:
            _killpg(p)
        self._procs = []


def _killpg(p: subprocess.Popen) -> None:
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def new_host_key(path: Path):
    """A fresh Ed25519 host key (written with rxl.guest.sshkeys.generate_ed25519, read by paramiko)."""
    from rxl.guest.sshkeys import generate_ed25519
    generate_ed25519(path)
    return paramiko.Ed25519Key.from_private_key_file(str(path))
