"""``rxl guest up`` / ``rxl guest down``: the own QEMU guest, left running as an SSH target.

Run for real on 2026-12-01 (docs/results/ssh.md): SSH answered 18-22 s after
QEMU started; ``rxl run --target`` against it, with ``--install-kernel`` from
the pristine kernel to the series', switched kernels and ran the suite. What
``up`` does:

1. the sshd userland (:mod:`rxl.tree.sshworld`, own objdir) must exist, or
   ``--build`` builds it first (:func:`build`; every make.py run under the lock);
2. one guest root under ``$RXL_WORK/guest/up``: the kernel, the programs and
   their libraries, the ATF programs, an rc that starts sshd and holds
   (:func:`rxl.guest.image.render_rc` with ``sshd_lines``, ``hold``), and the
   sshd files with a new host key (:func:`rxl.guest.sshguest.stage_ssh`);
3. QEMU with the console to ``console-up.log`` (``-serial file:``) and
   ``hostfwd`` from a free 127.0.0.1 port to the guest's port 22, started in
   its own session;
4. wait for SSH with the generated host key (the boot-to-SSH seconds are
   printed and kept in the state file); write ``$RXL_WORK/guest/up.json``
   (pid, port, URL, host key, console log) and print the ``ssh://`` URL.

``down`` stops exactly the QEMU that ``up`` started (pid from the state
file, checked against its command line) and removes the state file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from rxl import paths

#: Seconds ``up`` waits for sshd (TCG boot to the end marker: 13-34 s measured
#: in docs/results/guest-boot.md, plus the sshd set-up).
UP_TIMEOUT = 300.0


class GuestUpError(RuntimeError):
    """``up``/``down`` cannot go on; the message is one line."""


def state_path() -> Path:
    return paths.work_root() / "guest" / "up.json"


def read_state() -> Optional[Dict]:
    """The running guest's state, or None when none is recorded."""
    p = state_path()
    if not p.is_file():
        return None
    try:
        return json.loads(p.read_text())
    except ValueError:
        raise GuestUpError(f"{p}: not JSON; remove it if no guest runs") from None


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
    from rxl.guest import qemu, sshguest
    from rxl.tree import sshworld
    port = port or sshguest.free_port()
    root = str(paths.work_root() / "guest" / "up" / "root")
    log = str(paths.work_root() / "guest" / "up" / "console-up.log")
    cfg = qemu.GuestConfig(root_dir=root, memory_mib=memory_mib,
                           hostfwd=(sshguest.hostfwd(port),), serial=f"file:{log}",
                           mgmt_nic=sshguest.MGMT_NIC_MODEL,
                           no_reboot=False)
    argv = qemu.build_argv(cfg, firmware=qemu.find_ovmf() or qemu.OVMF_CANDIDATES[0])
    world = [s.shell() for s in sshworld.plan_ssh_world(src, kyua=kyua)]
    if kyua:
        from rxl.tree import kyuaworld as K
        world.insert(0, f"# kyua: unless {src}/contrib/sqlite3/sqlite3.c exists: GET "
                        f"{K.metadata_url(K.SQLITE_NPM)} -> dist.tarball, checked against "
                        f"dist.integrity, into {K.default_cache()}; its deps/sqlite3/sqlite3.c "
                        f"and sqlite3.h into {src}/contrib/sqlite3")
    return {"world": world, "root": root,
            "argv": argv, "port": port, "log": log, "kernel": kernel}


def check_up(src: str, kernel: str, *, build: bool, kyua: bool) -> Optional[Tuple[str, str]]:
    """What ``rxl guest up`` refuses before any work, as (option, one-line reason),
    or None: a missing kernel, a --src that is not a FreeBSD tree, --kyua without
    --build, and (without --build) a tree whose sshd userland is not built."""
    from rxl.tree import sshworld
    if kyua and not build:
        return "--kyua", "only with --build (kyua is built into the sshd userland)"
    if not Path(kernel).is_file():
        return "--kernel", f"{kernel}: no such kernel"
    if not (Path(src) / "tools/build/make.py").is_file():
        return "--src", f"{src}: not a FreeBSD source tree (no tools/build/make.py)"
    missing = sshworld.ssh_world_outputs(src).missing()
    if missing and not build:
        return "--src", (f"no sshd userland for {src} in {sshworld.default_objdir()} "
                         f"({missing[0]} missing): add --build (about 25 minutes once)")
    return None


def dry_run_lines(src: str, kernel: str, *, build: bool, kyua: bool) -> List[str]:
    """What ``rxl guest up --dry-run`` prints: the sshd userland's build (only with
    ``build``), the test programs, the staged root and the QEMU argv."""
    import shlex

    from rxl.tree import sshworld
    p = plan(src, kernel, kyua=build and kyua)
    lines = p["world"] if build else [f"# sshd userland: built in "
                                      f"{sshworld.default_objdir()} (no --build: not rebuilt)"]
    tests = paths.work_root() / "guest" / "up" / "tests"
    return lines + [f"# the ATF programs: compiled against that userland into {tests}",
                    f"# the root: staged in {p['root']} ({kernel} as its kernel)",
                    shlex.join(p["argv"]),
                    f"# then wait for ssh://root@127.0.0.1:{p['port']} (the root's host key)"]


def stage_ssh_root(root: str, src: str, kernel: str, tests: Dict[str, str], *,
                   label: str = "up", tunables: Dict[str, str] = None) -> str:
    """Stage an SSH guest's root in ``root``: the sshd userland of ``src``, ``kernel``, the
    ATF programs ``tests`` (name -> file) under /rxl/tests, the lua loader with its
    scripts and ``tunables``, nextboot(8), an rc that starts sshd and holds, the sshd
    files and a new host key. Returns the host key's public line. Raises GuestUpError
    when the userland is not built, OSError/ImageError on a file that cannot be staged."""
    from rxl.guest import image, sshguest
    from rxl.guest.ssh import harness_key, public_line
    from rxl.tree import sshworld
    from rxl.tree import kyuaworld
    kyua = (sshworld.ssh_world_outputs(src).objtop / kyuaworld.KYUA_PROGRAMS["/usr/bin/kyua"])
    out = sshworld.ssh_world_outputs(src, kyua=kyua.is_file())
    lua = out.objtop / "stand/efi/loader_lua/loader_lua.efi"
    missing = out.missing() + ([] if lua.is_file() else [str(lua)])
    if missing:
        raise GuestUpError(f"the sshd userland is not built ({missing[0]} missing): "
                           "rxl guest up --build")
    progs = {g: str(x) for g, x in out.programs.items()}
    libs = image.resolve_libs([x for g, x in progs.items() if g != "/libexec/ld-elf.so.1"],
                              str(out.sysroot))
    guest_tests = {f"/rxl/tests/{n}": x for n, x in tests.items()}
    rc = image.render_rc(label, [], poweroff=False, sshd_lines=sshguest.rc_lines(), hold=True)
    acts = image.plan_root(loader_efi=str(lua), kernel=kernel, programs=progs, libs=libs,
                           tests=guest_tests, loader_rc=image.render_loader_rc(), rc=rc)
    acts += [image.Action(rel, source=host) for rel, host in sshguest.boot_files(src).items()]
    if kyua.is_file():
        acts += [image.Action(rel, source=host)
                 for rel, host in kyuaworld.guest_files(src).items()]
    acts.append(image.Action("boot/loader.conf", data=sshguest.loader_conf(tunables or {})))
    image.stage_root(root, acts)
    return sshguest.stage_ssh(root, public_line(harness_key()))


def build(src: str, echo: Callable[[str], None] = print, *, kyua: bool = False,
          lock: Optional[str] = None) -> None:
    """Build the sshd userland (:func:`rxl.tree.sshworld.plan_ssh_world`), logs next to
    the console log. The kernel-toolchain of ``src`` in the sshd objdir comes from the
    shared store (:func:`rxl.tree.toolchain.seed`) or is built first. ``kyua``: with
    kyua (:mod:`rxl.tree.kyuaworld`; the SQLite amalgamation fetched first). ``lock``:
    the build lock of each stage (None: the default; "": none, the caller holds it). Raises
    rxl.tree.build.BuildError naming the log when a stage fails."""
    from rxl.tree import build as build_mod
    from rxl.tree import sshworld
    from rxl.tree import toolchain as toolchain_mod
    from rxl.tree import world as world_mod
    objdir = sshworld.default_objdir()
    logdir = paths.work_root() / "guest" / "up"
    Path(objdir).mkdir(parents=True, exist_ok=True)
    if kyua:
        from rxl.tree import kyuaworld
        try:
            kyuaworld.fetch_amalgamation(src, kyuaworld.default_cache(), echo=echo)
        except kyuaworld.KyuaError as exc:
            raise GuestUpError(str(exc)) from None
    lock = build_mod.DEFAULT_LOCK if lock is None else (lock or None)
    stages = sshworld.plan_ssh_world(src, kyua=kyua, lock=lock)
    if not (build_mod.toolchain_done(objdir, src) or toolchain_mod.seed(src, objdir, echo)):
        stages = build_mod.plan_stages(src, objdir, lock=lock)[:1] + stages
    for st in stages:
        if st.name == "world-ssh-includes":
            world_mod.ensure_atf_headers(src, objdir, echo)
        if st.name == "world-ssh-build-tools":
            for p in sshworld.cross_built_tools(world_mod.objtop(src, objdir)):
                echo(f"{p}: built for FreeBSD, not the host: removed for _build-tools")
                p.unlink()
            foreign = sshworld.foreign_depends(world_mod.objtop(src, objdir), src)
            if foreign:
                echo(f"{len(foreign)} dependency files name another tree's sources "
                     f"(e.g. {foreign[0]}): removed")
            for p in foreign:
                p.unlink()
        if st.name == "world-ssh-build" and sshworld.openssh_config_missing(src):
            openssh_config(src, objdir, str(logdir), echo)
        echo(f"{st.name}: log {logdir / (st.name + '.log')}")  # run_stage says started
        try:
            build_mod.run_stage(st, str(logdir), echo)
            if st.name == "kernel-toolchain":
                (Path(objdir) / build_mod.TOOLCHAIN_DONE).touch()
                toolchain_mod.save(src, objdir, echo)
        except build_mod.BuildError as exc:
            # as rxl.tree.world: a failed test-includes check alone is not fatal
            if not st.name.endswith("includes") or world_mod.includes_check_only_failure(
                    exc.log.read_text(errors="replace"), src) is None:
                raise


def openssh_config(src: str, objdir: str, logdir: str,
                   echo: Callable[[str], None] = print) -> Path:
    """Make the tree's missing crypto/openssh/config.h with OpenSSH's own configure, cross
    (:func:`rxl.tree.sshworld.openssh_configure_argv`), in a copy under ``logdir``, undefine
    what configure found on the Linux host's file system
    (:func:`rxl.tree.sshworld.openssh_config_for_freebsd`) and write it into the work tree (a generated file, as on FreeBSD; never into this
    repository). Log: ``<logdir>/openssh-configure.log``. Returns the file; raises
    GuestUpError naming the log when a step fails or a tool is missing."""
    import shutil
    from rxl.tree import sshworld
    from rxl.tree import world as world_mod
    work = Path(logdir) / "openssh-configure"
    log = Path(logdir) / "openssh-configure.log"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(Path(src) / "crypto/openssh", work, symlinks=True)
    t0 = time.monotonic()
    echo(f"openssh-configure: the tree lacks {sshworld.OPENSSH_CONFIG_H}: running OpenSSH's "
         f"configure (cross, log {log})")
    with open(log, "w") as fh:
        for argv in sshworld.openssh_configure_argv(str(world_mod.worldtmp(src, objdir))):
            fh.write(f"$ {' '.join(argv)}\n")
            fh.flush()
            try:
                rc = subprocess.run(argv, cwd=work, stdout=fh, stderr=subprocess.STDOUT).returncode
            except FileNotFoundError:
                raise GuestUpError(f"openssh-configure: {argv[0]} not found (apt-get install "
                                   "-y autoconf automake; rxl doctor)") from None
            if rc != 0:
                raise GuestUpError(f"openssh-configure: {argv[0]} exited {rc}; log {log}")
    dest = Path(src) / sshworld.OPENSSH_CONFIG_H
    dest.write_text(sshworld.openssh_config_for_freebsd((work / "config.h").read_text()))
    echo(f"openssh-configure: {dest} written in {time.monotonic() - t0:.0f} s")
    return dest


def up(src: str, kernel: str, *, tests: Dict[str, str],
       timeout: float = UP_TIMEOUT, echo: Callable[[str], None] = print) -> Dict:
    """Boot the guest and wait for SSH; return the state written to :func:`state_path`."""
    from rxl.guest.ssh import SSHError, SSHSession, SSHTarget
    old = read_state()
    if old and _alive(old):
        raise GuestUpError(f"a guest is already up at {old['url']} (pid {old['pid']}): "
                           "rxl guest down")
    if not Path(kernel).is_file():
        raise GuestUpError(f"{kernel}: no such kernel")
    p = plan(src, kernel)
    echo(f"guest up: staging {p['root']}")
    key = stage_ssh_root(p["root"], src, kernel, tests)
    Path(p["log"]).parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    proc = launch(p["argv"], str(Path(p["log"]).with_name("qemu-up.log")))
    state = {"pid": proc.pid, "port": p["port"], "own_host_key": key, "log": p["log"],
             "root": p["root"], "url": f"ssh://root@127.0.0.1:{p['port']}",
             "kernel": kernel}
    s = SSHSession(SSHTarget("127.0.0.1", p["port"], own_host_key=key, name="own guest"))
    try:
        s.wait_up(timeout, interval=2.0)
    except SSHError as exc:
        stop(proc)
        raise GuestUpError(f"{exc}; console: {p['log']}") from None
    finally:
        s.close()
    state["boot_to_ssh_seconds"] = round(time.monotonic() - t0, 1)
    state_path().write_text(json.dumps(state, indent=2) + "\n")
    return state


def launch(argv: List[str], qemu_log: str) -> subprocess.Popen:
    """Start QEMU ``argv`` in its own session, its stdout and stderr to ``qemu_log``."""
    Path(qemu_log).parent.mkdir(parents=True, exist_ok=True)
    with open(qemu_log, "wb") as qlog:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=qlog,
                                stderr=subprocess.STDOUT, start_new_session=True)


def stop(proc: subprocess.Popen) -> None:
    """Stop a QEMU :func:`launch` started: SIGTERM, SIGKILL after 10 s; reaped."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _alive(st: Dict) -> bool:
    """True if the recorded pid runs and is the QEMU of the recorded root."""
    try:
        cmd = Path(f"/proc/{int(st['pid'])}/cmdline").read_bytes()
    except (OSError, KeyError, ValueError):
        return False
    return st.get("root", "\0").encode() in cmd


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
