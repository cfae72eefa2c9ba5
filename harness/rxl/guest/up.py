"""``rxl guest up`` / ``rxl guest down``: the own QEMU guest, left running as an SSH target.

Run for real on 2026-12-01 (docs/results/ssh.md): SSH answered 18-22 s after
QEMU started; ``rxl run --target`` against it, with ``--install-kernel`` from
the pristine kernel to the series', switched kernels and ran the suite. What
``up`` does:

1. the sshd userland (:mod:`rxl.tree.sshworld`, own objdir) must exist, or
   ``--build`` builds it first (:func:`rxl.tree.sshworld.build_ssh_world`; every
   make.py run under the lock);
2. one guest root under ``$RXL_WORK/guest/up``: the kernel, the programs and
   their libraries, the ATF programs, an rc that starts sshd and holds
   (:func:`rxl.guest.image.render_rc` with ``sshd_lines``, ``hold``), and the
   sshd files with a new host key (:func:`rxl.guest.sshguest.stage_ssh_root`);
3. QEMU with the console to ``console-up.log`` (``-serial file:``) and
   ``hostfwd`` from a free 127.0.0.1 port to the guest's port 22, started in
   its own session;
4. wait for SSH with the generated host key (the boot-to-SSH seconds are
   printed and kept in the state file); write ``$RXL_WORK/guest/up.json``
   (pid, port, URL, host key, console log) and print the ``ssh://`` URL.

``down`` stops exactly the QEMU that ``up`` started (pid from the state
file, checked against its command line) and removes the state file; a state
file that is not what ``up`` writes is refused and left, nothing stopped.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from rxl import paths
from rxl.cli import options
from rxl.errors import BadOption, DataError, MachineError, show
from rxl.guest import qemu, sshguest
from rxl.guest.ssh import SSHError, SSHSession, SSHTarget
from rxl.tree import base as tree_base
from rxl.tree import build as tree_build
from rxl.tree import kyuaworld, sshworld

#: Seconds ``up`` waits for sshd (TCG boot to the end marker: 13-34 s measured
#: in docs/results/guest-boot.md, plus the sshd set-up).
UP_TIMEOUT = 300.0


class GuestUpError(MachineError):
    """``up``/``down`` cannot go on; the message is one line."""

#: Largest pid a host gives (the QEMU runs on Linux, the build host):
#: PID_MAX_LIMIT, 4 * 1024 * 1024 on 64-bit (include/linux/threads.h).
PID_MAX_LIMIT = 4 * 1024 * 1024


def state_path() -> Path:
    return paths.work_root() / "guest" / "up.json"


class GuestStateError(DataError):
    """The state file is not what :func:`up` writes; nothing is stopped or started."""


def root_path() -> Path:
    """The one guest root ``up`` stages and boots: ``$RXL_WORK/guest/up/root``."""
    return paths.work_root() / "guest" / "up" / "root"


def _js(value) -> str:
    """A state file's value as JSON writes it, quoted for a message."""
    return show(json.dumps(value))


def _damaged(p: Path, why: str) -> GuestStateError:
    return GuestStateError(f"{show(p)}: not the state rxl guest up writes ({why}); nothing "
                           "stopped: remove it if no guest runs")


def read_state() -> Optional[Dict]:
    """The running guest's state, or None when none is recorded.

    Raises :class:`GuestStateError` (a DataError, exit 2) unless the file is what
    :func:`up` writes: a JSON object whose ``pid`` is an integer above 1, ``root``
    is :func:`root_path` (the root this ``RXL_WORK`` stages: so a pid is only ever
    matched against our own QEMU's command line), ``url`` a string and ``port``,
    when given, a TCP port."""
    p = state_path()
    if not p.exists() and not p.is_symlink():
        return None
    if not p.is_file():
        raise _damaged(p, "not a regular file")
    try:
        st = json.loads(p.read_bytes())
    except (ValueError, OSError) as exc:
        raise _damaged(p, getattr(exc, "strerror", None) or "not JSON") from None
    if not isinstance(st, dict):
        raise _damaged(p, f"a JSON {type(st).__name__}, not an object")
    for key in ("pid", "root", "url"):
        if key not in st:
            raise _damaged(p, f"no {key}")
    pid = st["pid"]
    if type(pid) is not int or not 1 < pid <= PID_MAX_LIMIT:
        raise _damaged(p, f"pid {_js(pid)}: not a process id above 1 (and at most "
                          f"{PID_MAX_LIMIT})")
    if st["root"] != str(root_path()):
        raise _damaged(p, f"root {_js(st['root'])}: not {root_path()}")
    if not isinstance(st["url"], str):
        raise _damaged(p, f"url {_js(st['url'])}: not a string")
    port = st.get("port")
    if port is not None and (type(port) is not int or not 0 < port < 65536):
        raise _damaged(p, f"port {_js(port)}: not a TCP port")
    key = st.get("own_host_key")
    if key is not None and not isinstance(key, str):
        raise _damaged(p, "own_host_key is not a string")
    return st


def own_host_key(host: str, port: int) -> Optional[str]:
    """The generated host key when ``host:port`` is the guest ``up`` started, else None."""
    st = read_state()
    if st and host in ("127.0.0.1", "localhost") and st.get("port") == port:
        return st.get("own_host_key")
    return None


def plan(src: str, kernel: str, *, memory_mib: int = 1024, port: int = 0,
         kyua: bool = False) -> Dict:
    """What ``up`` would run: ``{"world": [shell lines], "root", "argv", "port", "log"}``. Pure
    apart from choosing a free port when ``port`` is 0. ``kyua``: the world with kyua,
    after a comment line saying where the SQLite amalgamation comes from
    (:func:`rxl.tree.kyuaworld.fetch_amalgamation`)."""
    port = port or sshguest.free_port()
    root = str(root_path())
    log = str(paths.work_root() / "guest" / "up" / "console-up.log")
    cfg = qemu.GuestConfig(root_dir=root, memory_mib=memory_mib,
                           hostfwd=(sshguest.hostfwd(port),), serial=f"file:{log}",
                           mgmt_nic=sshguest.MGMT_NIC_MODEL,
                           no_reboot=False)
    argv = qemu.build_argv(cfg, firmware=qemu.find_ovmf() or qemu.OVMF_CANDIDATES[0])
    world = tree_build.shell_lines(sshworld.plan_ssh_world(src, kyua=kyua))
    if kyua:
        world.insert(0, f"# kyua: unless {src}/contrib/sqlite3/sqlite3.c exists: GET "
                        f"{kyuaworld.metadata_url(kyuaworld.SQLITE_NPM)} -> dist.tarball, "
                        f"checked against dist.integrity, into {kyuaworld.default_cache()}; "
                        f"its deps/sqlite3/sqlite3.c and sqlite3.h into {src}/contrib/sqlite3")
    return {"world": world, "root": root,
            "argv": argv, "port": port, "log": log, "kernel": kernel}


def check_up(src: str, kernel: str, *, build: bool, kyua: bool,
             series_tests: bool = True) -> Optional[Tuple[str, str]]:
    """What ``rxl guest up`` refuses before any work, as (option, one-line reason),
    or None: a kernel that is missing, not a file or empty, a --src that is not a FreeBSD tree, --kyua without
    --build, a kernel of another release than the tree's (rxl run's check:
    rxl.tree.build.check_kernel_release; the guest boots it with the tree's
    userland), with ``series_tests`` (the series' ATF tests go in: ``--atf-dir``)
    a tree of another release than patches/BASE's (rxl run's release check,
    rxl.tree.base.check_series_release: the tests set TCP_REUSPORT_LB_CPU, and
    ``rxl run --target`` takes only a target of the series' release; without
    them any tree boots), and (without --build) a tree whose sshd userland is
    not built."""
    if kyua and not build:
        return "--kyua", "only with --build (kyua is built into the sshd userland)"
    try:
        tree_build.check_kernel_file(kernel)
    except BadOption as exc:
        return "--kernel", exc.message
    if not Path(src).is_dir():  # missing, a loop, a device: said to be which, not "no tree"
        return "--src", f"{src}: {options.missing(src, 'directory')}"
    if not (Path(src) / "tools/build/make.py").is_file():
        return "--src", f"{src}: not a FreeBSD source tree (no tools/build/make.py)"
    try:  # booted with the tree's sshd userland and test programs: rxl run's check
        tree_build.check_kernel_release(kernel, "--kernel", src)
    except BadOption as exc:
        return "--kernel", exc.message
    if series_tests:
        try:
            tree_base.check_series_release(
                src, "guest up builds the series' ATF tests (TCP_REUSPORT_LB_CPU) against "
                "it and rxl run --target takes only a target of that release: give a tree "
                "of it, or --atf-dir '' for FreeBSD's own tests only")
        except tree_base.TreeError as exc:
            return "--src", str(exc).partition(" ")[2]
    missing = sshworld.ssh_world_outputs(src).missing()
    if missing and not build:
        return "--src", (f"no sshd userland for {src} in {sshworld.default_objdir()} "
                         f"({missing[0]} missing): add --build (about 25 minutes once)")
    return None


def dry_run_lines(src: str, kernel: str, *, build: bool, kyua: bool) -> List[str]:
    """What ``rxl guest up --dry-run`` prints: the sshd userland's build (only with
    ``build``), the test programs, the staged root and the QEMU argv."""
    p = plan(src, kernel, kyua=build and kyua)
    lines = p["world"] if build else [f"# sshd userland: built in "
                                      f"{sshworld.default_objdir()} (no --build: not rebuilt)"]
    tests = paths.work_root() / "guest" / "up" / "tests"
    return lines + [f"# the ATF programs: compiled against that userland into {tests}",
                    f"# the root: staged in {p['root']} ({kernel} as its kernel)",
                    shlex.join(p["argv"]),
                    f"# then wait for ssh://root@127.0.0.1:{p['port']} (the root's host key)"]


def up(src: str, kernel: str, *, tests: Dict[str, str],
       timeout: float = UP_TIMEOUT, echo: Callable[[str], None] = print) -> Dict:
    """Boot the guest and wait for SSH; return the state written to :func:`state_path`."""
    old = read_state()
    if old and _alive(old):
        raise GuestUpError(f"a guest is already up at {old['url']} (pid {old['pid']}): "
                           "rxl guest down")
    tree_build.check_kernel_file(kernel)
    p = plan(src, kernel)
    echo(f"guest up: staging {p['root']}")
    key = sshguest.stage_ssh_root(p["root"], src, kernel, tests)
    Path(p["log"]).parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    proc = qemu.launch(p["argv"], str(Path(p["log"]).with_name("qemu-up.log")))
    state = {"pid": proc.pid, "port": p["port"], "own_host_key": key, "log": p["log"],
             "root": p["root"], "url": f"ssh://root@127.0.0.1:{p['port']}",
             "kernel": kernel}
    s = SSHSession(SSHTarget("127.0.0.1", p["port"], own_host_key=key, name="own guest"))
    try:
        s.wait_up(timeout, interval=2.0)
    except SSHError as exc:
        qemu.stop(proc)
        raise GuestUpError(f"{exc}; console: {p['log']}") from None
    finally:
        s.close()
    state["boot_to_ssh_seconds"] = round(time.monotonic() - t0, 1)
    state_path().write_text(json.dumps(state, indent=2) + "\n")
    return state


def _alive(st: Dict) -> bool:
    """True if the recorded pid runs and is the QEMU of the recorded root: its
    argv[0] is a ``qemu-system-*`` and one argument is the ``-drive`` of that root
    (``file=fat:ROOT`` or ``file=fat:rw:ROOT``, :func:`rxl.guest.qemu.build_argv`)."""
    try:
        argv = Path(f"/proc/{int(st['pid'])}/cmdline").read_bytes().split(b"\0")
    except (OSError, KeyError, ValueError, TypeError):
        return False
    root = str(st.get("root") or "")
    if not root or not os.path.basename(argv[0]).startswith(b"qemu-system-"):
        return False
    want = {f"file=fat:{root}".encode(), f"file=fat:rw:{root}".encode()}
    return any(want & set(a.split(b",")) for a in argv[1:])


def _gone(pid: int) -> bool:
    """True once ``pid`` has exited (reaping it if it is our child)."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return True
    except ChildProcessError:
        pass  # not our child: init reaps it
    try:
        os.kill(pid, 0)
        return False
    except ProcessLookupError:
        return True


def _stop(pid: int) -> None:
    """SIGTERM ``pid``, SIGKILL after 10 s."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(50):
        if _gone(pid):
            return
        time.sleep(0.2)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def down() -> List[str]:
    """Stop the guest ``up`` started; return what was done (lines)."""
    st = read_state()
    if not st:
        return [f"no guest is up ({state_path()} does not exist)"]
    done = []
    if _alive(st):
        _stop(int(st["pid"]))
        done.append(f"stopped QEMU pid {st['pid']} ({st['url']})")
    else:
        done.append(f"pid {st.get('pid')} is not the guest's QEMU any more; nothing stopped")
    state_path().unlink()
    done.append(f"removed {state_path()}")
    return done
