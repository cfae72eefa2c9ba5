"""The guest userland with sshd: the narrowed world plus what sshd needs. Plan only.

Built to the end on 2026-12-01 (docs/results/ssh.md) after four fixes: the
host tools (:data:`BUILD_TOOLS`, the ``_build-tools`` stage), a seeded
objdir's dependency files of another tree (:func:`foreign_depends`), OpenSSH's
config.h, which the snapshot lacks (:func:`openssh_configure_argv`), and head(1)
left out (below). It goes to its own objdir (default ``$RXL_WORK/obj-ssh``) so the shared world's
stamp and products (:mod:`rxl.tree.world`) stay as they are; its
kernel-toolchain is seeded from the shared store (:mod:`rxl.tree.toolchain`).

Added to :data:`rxl.tree.world.SUBDIRS` and the narrowed library lists:

* programs (:data:`SSHD_PROGRAMS`): sshd, and for its writable places and
  network mount (tmpfs), mkdir, cp, chmod, pwd_mkdb, route; for the SSH-driven
  run uname, id, rm, mv, cat, sha256 (not head: it links libcasper, see below);
* libraries: sshd's ``LIBADD= pam ssh util ... crypto``
  (secure/usr.sbin/sshd/Makefile); libssh's ``crypto crypt z``; libcrypto's
  ``pthread`` (libthr); mount's ``util xo``; route's ``jail``
  (Makefile.inc1 ``secure/lib/libssh__L: lib/libz__L secure/lib/libcrypto__L``);
* src.conf(5) knobs (:data:`SSHD_MAKE_OPTIONS`) that drop sshd's optional
  Kerberos/GSSAPI, blacklistd, TCP wrappers, audit and LDNS dependencies.
  ``WITHOUT_CASPER`` is passed but ignored by 14's bsd.mkopt.mk ("no longer
  supported"), so head(1), which then links libcasper and cap_fileargs, is not
  built; the probe reads the first line with the shell instead.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from rxl import paths
from rxl.errors import HostError
from rxl.tree import build as tree_build
from rxl.tree import kyuaworld, snapshot, toolchain, userland
from rxl.tree import world as tree_world
from rxl.tree.build import DEFAULT_LOCK, Stage, locked_argv, make_py_argv
from rxl.tree.world import (GENERIC_LIBS, PREBUILD_LIBS, SUBDIRS, WorldOutputs, world_make_vars,
                            world_outputs)

#: Guest path -> objdir path (relative to OBJTOP) of the programs sshd and an
#: SSH-driven run need.
SSHD_PROGRAMS: Dict[str, str] = {
    "/usr/sbin/sshd": "secure/usr.sbin/sshd/sshd",
    "/sbin/mount": "sbin/mount/mount",
    # mount(8) runs it for msdosfs: the rc remounts the root read-write (nextboot)
    "/sbin/mount_msdosfs": "sbin/mount_msdosfs/mount_msdosfs",
    "/bin/mkdir": "bin/mkdir/mkdir",
    "/bin/cp": "bin/cp/cp",
    "/bin/chmod": "bin/chmod/chmod",
    "/usr/sbin/pwd_mkdb": "usr.sbin/pwd_mkdb/pwd_mkdb",
    "/sbin/route": "sbin/route/route",
    # what an SSH-driven run (rxl.verify.remote) runs besides the rc's programs
    "/usr/bin/uname": "usr.bin/uname/uname",
    "/usr/bin/id": "usr.bin/id/id",
    "/bin/rm": "bin/rm/rm",
    "/bin/mv": "bin/mv/mv",
    "/bin/cat": "bin/cat/cat",
    "/sbin/sha256": "sbin/md5/md5",  # md5(1) picks the digest by its name
    # --install-kernel on the own guest: nextboot(8) (sbin/reboot/nextboot.sh, staged
    # from the tree) runs mktemp, dirname and fsync; the reboot is shutdown -r now
    # under nohup (rxl.guest.ssh.SSHSession.reboot)
    "/usr/bin/nohup": "usr.bin/nohup/nohup",
    "/usr/bin/mktemp": "usr.bin/mktemp/mktemp",
    "/usr/bin/dirname": "usr.bin/dirname/dirname",
    "/usr/bin/fsync": "usr.bin/fsync/fsync",
    "/sbin/shutdown": "sbin/shutdown/shutdown",
}
#: OpenSSH 10.0 (FreeBSD 15.0) splits sshd: the listener execs sshd-session for each
#: connection and that execs sshd-auth (crypto/openssh/pathnames.h _PATH_SSHD_SESSION,
#: _PATH_SSHD_AUTH); without them 15's sshd exits on signal 11 at start (2026-12-02
#: guest boot). Built where the tree has them (:func:`sshd_programs`).
SSHD_SESSION_PROGRAMS: Dict[str, str] = {
    "/usr/libexec/sshd-session": "secure/libexec/sshd-session/sshd-session",
    "/usr/libexec/sshd-auth": "secure/libexec/sshd-auth/sshd-auth",
}
SSHD_PREBUILD_LIBS: Tuple[str, ...] = ("lib/libz", "lib/libxo",
                                       "secure/lib/libcrypto", "lib/libpam/libpam")
SSHD_GENERIC_LIBS: Tuple[str, ...] = ("secure/lib/libssh",
                                      "lib/libkiconv",  # mount_msdosfs's LIBADD
                                      # 15's md5(1) (sbin/md5/Makefile: LIBADD+=
                                      # casper cap_fileargs while MK_CASPER, which
                                      # WITHOUT_CASPER does not turn off); the
                                      # directory builds libcasper and its services
                                      # (Makefile.inc1 _lib_casper, after libnv)
                                      "lib/libcasper")
#: src.conf(5) knobs, passed as -D to make.py.
SSHD_MAKE_OPTIONS: Tuple[str, ...] = ("WITHOUT_KERBEROS", "WITHOUT_KERBEROS_SUPPORT",
                                      "WITHOUT_GSSAPI", "WITHOUT_BLACKLIST_SUPPORT",
                                      "WITHOUT_TCP_WRAPPERS", "WITHOUT_AUDIT", "WITHOUT_LDNS",
                                      "WITHOUT_CASPER")


def default_objdir() -> str:
    """``$RXL_WORK/obj-ssh``: the sshd userland's own MAKEOBJDIRPREFIX."""
    return str(paths.work_root() / "obj-ssh")


def sshd_programs(src: Optional[str] = None) -> Dict[str, str]:
    """:data:`SSHD_PROGRAMS`, plus :data:`SSHD_SESSION_PROGRAMS` when ``src`` has
    secure/libexec/sshd-session (OpenSSH 10, FreeBSD 15)."""
    has = src is not None and (Path(src) / "secure/libexec/sshd-session").is_dir()
    return dict(SSHD_PROGRAMS, **(SSHD_SESSION_PROGRAMS if has else {}))


def ssh_subdirs(kyua: bool = False, src: Optional[str] = None) -> Tuple[str, ...]:
    """SUBDIR_OVERRIDE: the narrowed world's directories plus each sshd program's
    (:func:`sshd_programs` of ``src``) and kyua's (:mod:`rxl.tree.kyuaworld`)."""
    progs = dict(sshd_programs(src), **(kyuaworld.KYUA_PROGRAMS if kyua else {}))
    extra = sorted({str(Path(p).parent) for p in progs.values()})
    return tuple(SUBDIRS) + tuple(d for d in extra if d not in SUBDIRS)


def ssh_make_vars(kyua: bool = False, src: Optional[str] = None) -> Dict[str, Optional[str]]:
    """:func:`rxl.tree.world.world_make_vars` widened for sshd of ``src`` (and kyua), plus
    the -D knobs."""
    v = world_make_vars(ssh_subdirs(kyua, src), PREBUILD_LIBS + SSHD_PREBUILD_LIBS
                        + (kyuaworld.KYUA_PREBUILD_LIBS if kyua else ()),
                        GENERIC_LIBS + SSHD_GENERIC_LIBS
                        + (kyuaworld.KYUA_GENERIC_LIBS if kyua else ()))
    v.update({opt: None for opt in SSHD_MAKE_OPTIONS})
    return v


#: Host programs the libraries' and sh's builds run (Makefile.inc1 ``build-tools``:
#: lib/ncurses/tinfo's make_keys and make_hash, bin/sh's mknodes and mksyntax).
#: -DWORLDFAST skips ``_build-tools``; when the kernel-toolchain came from the store
#: without them, buildworld compiled them with the cross compiler and could not run
#: them (``./make_keys: not found``, 2026-11-30): :func:`cross_built_tools`.
BUILD_TOOLS: Tuple[str, ...] = ("lib/ncurses/tinfo/make_keys", "lib/ncurses/tinfo/make_hash",
                                "bin/sh/mknodes", "bin/sh/mksyntax")
#: What marks a FreeBSD program near an ELF file's start: its interpreter (PT_INTERP,
#: rtld-elf) or the ABI note's owner (``.note.tag``, "FreeBSD\0"); clang leaves
#: e_ident[EI_OSABI] at 0 (SYSV) for both systems, so the header alone cannot tell.
FREEBSD_MARKS = (b"/libexec/ld-elf.so.1", b"FreeBSD\x00")


def cross_built_tools(objtop: Path) -> List[Path]:
    """The :data:`BUILD_TOOLS` under ``objtop`` that are FreeBSD programs (built for the
    guest, so the host cannot run them); ``_build-tools`` rebuilds them once removed."""
    bad = []
    for rel in BUILD_TOOLS:
        p = Path(objtop) / rel
        try:
            head = p.read_bytes()[:8192]
        except OSError:
            continue
        if head[:4] == b"\x7fELF" and any(m in head for m in FREEBSD_MARKS):
            bad.append(p)
    return bad


#: An absolute path in a ``.depend*`` file (bsd.dep.mk's ``-MD`` output): up to a
#: space, colon or the line continuation's backslash.
_DEP_PATH = re.compile(r"(/[^\s:\\]+)")
#: Top-level directories of a FreeBSD source tree (its root ``Makefile``'s SUBDIR list
#: and what the build reads); a path holding ``/<one of these>/`` names a tree file.
_TREE_TOPS = ("bin", "cddl", "contrib", "crypto", "gnu", "include", "kerberos5", "lib",
              "libexec", "rescue", "sbin", "secure", "share", "stand", "sys", "tools",
              "usr.bin", "usr.sbin")


def foreign_depends(objtop: Path, src: str) -> List[Path]:
    """The ``.depend*`` files under ``objtop`` that name a source file of another tree.

    A kernel-toolchain seeded from the shared store (:func:`rxl.tree.toolchain.seed`)
    carries the dependency files of the tree it was built in; bmake adds their
    sources to ``.ALLSRC``, so lib/libmagic's mkmagic was linked from this tree's
    print.c and the other tree's (``multiple definition of `file_fmtnum'``,
    2026-12-01). A path is foreign when it is not under ``src`` but ends in a file
    of ``src`` below one of :data:`_TREE_TOPS` (paths under ``objtop``, such as
    WORLDTMP's ``tmp/usr/include``, are the build's own). Removing such a file only drops
    make's header dependencies of a product already built.
    """
    root = Path(src).resolve()
    own = (str(root) + "/", str(Path(objtop).resolve()) + "/")
    bad = []
    for dep in sorted(Path(objtop).rglob(".depend*")):
        try:
            text = dep.read_text(errors="replace")
        except OSError:
            continue
        for path in _DEP_PATH.findall(text):
            if path.startswith(own + ("/usr/", "/lib", "/etc/")):
                continue
            parts = path.split("/")
            rel = next((parts[i:] for i in range(1, len(parts) - 1)
                        if parts[i] in _TREE_TOPS), None)
            if rel and (root / "/".join(rel)).is_file():
                bad.append(dep)
                break
    return bad


#: OpenSSH's configure arguments as crypto/openssh/freebsd-configure.sh gives them for
#: the config.h FreeBSD commits (its last run: no Kerberos, no built-in security key),
#: without ``--with-libedit`` (sftp(1) only, not built here) and with the mail
#: directory FreeBSD's paths.h names (_PATH_MAILDIR), which configure cannot find when
#: cross compiling.
OPENSSH_CONFIGURE_ARGS: Tuple[str, ...] = (
    "--prefix=/usr", "--sysconfdir=/etc/ssh", "--with-pam", "--without-tcp-wrappers",
    "--with-ssl-engine", "--without-xauth", "--without-kerberos5",
    "--without-security-key-builtin", "--with-maildir=/var/mail")
#: The tree's OpenSSH config.h (FreeBSD commits it; the snapshot lacks it).
OPENSSH_CONFIG_H = "crypto/openssh/config.h"


#: config.h defines configure sets by testing files of the *build* host (it looks for
#: /var/log/lastlog, /var/log/wtmp and the like with ``test -f``): a Linux host has
#: them, FreeBSD 14 has none (utmpx only), and a defined CONF_LASTLOG_FILE makes
#: loginrec.c use struct lastlog, which FreeBSD lacks (2026-12-01 build). Likewise
#: HAVE_PROC_PID: configure.ac runs ``test -d "/proc/$$/fd"`` in its own shell, true on
#: Linux; FreeBSD has no /proc/<pid>/fd (procfs(5) has no fd directory and is not
#: mounted by default), and FreeBSD's config.h leaves it undefined.
OPENSSH_HOST_PROBED: Tuple[str, ...] = ("CONF_LASTLOG_FILE", "CONF_UTMP_FILE",
                                        "CONF_WTMP_FILE", "CONF_UTMPX_FILE",
                                        "CONF_WTMPX_FILE", "HAVE_PROC_PID")
#: config.h defines configure sets on an assumption when cross compiling (a run test's
#: cross branch, "cross compiling: assuming ..." in its log) that is wrong for FreeBSD
#: and that no cache variable overrides: BROKEN_ONE_BYTE_DIRENT_D_NAME (FreeBSD's
#: struct dirent has ``d_name[MAXNAMLEN + 1]``, 256 bytes, sys/sys/dirent.h; FreeBSD's
#: config.h leaves it undefined).
OPENSSH_CROSS_ASSUMED: Tuple[str, ...] = ("BROKEN_ONE_BYTE_DIRENT_D_NAME",)


def openssh_config_for_freebsd(text: str) -> str:
    """``text`` of a cross-configured config.h with :data:`OPENSSH_HOST_PROBED` and
    :data:`OPENSSH_CROSS_ASSUMED` undefined."""
    why = dict.fromkeys(OPENSSH_HOST_PROBED, "found on the build host; FreeBSD has none")
    why.update(dict.fromkeys(OPENSSH_CROSS_ASSUMED, "assumed when cross compiling; "
                             "not so on FreeBSD"))
    out = []
    for line in text.splitlines(keepends=True):
        words = line.split()
        if len(words) >= 2 and words[0] == "#define" and words[1] in why:
            line = f"/* #undef {words[1]} ({why[words[1]]}) */\n"
        out.append(line)
    return "".join(out)


def openssh_config_missing(src: str) -> bool:
    """True when the tree lacks crypto/openssh/config.h (libssh and sshd include it)."""
    return not (Path(src) / OPENSSH_CONFIG_H).is_file()


def openssh_configure_argv(sysroot: str, *, clang: str = tree_world.DEFAULT_CLANG,
                           triple: str = tree_world.TARGET_TRIPLE) -> List[List[str]]:
    """The commands that make OpenSSH's config.h in a copy of crypto/openssh, as
    freebsd-configure.sh does on FreeBSD (aclocal, autoheader, autoconf, configure),
    but cross: configure's compile and link tests use clang for ``triple`` against
    the world's ``sysroot`` (WORLDTMP, where libc, libcrypto, libpam and libz are
    installed by the libraries' pass). Checks configure cannot run when cross
    compiling take its stated defaults (its log lists them)."""
    cc = f"{clang} --target={triple} --sysroot={sysroot}"
    return [["aclocal", "-I", "m4"], ["autoheader"], ["autoconf"],
            ["env", "-u", "CFLAGS", "-u", "CPPFLAGS", f"CC={cc}", f"CPP={cc} -E",
             "LDFLAGS=-fuse-ld=lld", "sh", "configure", f"--host={triple}",
             "--build=x86_64-pc-linux-gnu", f"--with-ssl-dir={sysroot}/usr",
             *OPENSSH_CONFIGURE_ARGS]]


def plan_ssh_world(src: str, objdir: Optional[str] = None, *, jobs: int = 2,
                   lock: Optional[str] = DEFAULT_LOCK, kyua: bool = False) -> List[Stage]:
    """The make.py stages (``world-ssh-includes``, ``world-ssh-build-tools``: the host tools
    with the host compiler, ``world-ssh-libs`` when the tree lacks OpenSSH's config.h:
    the libraries its configure links against, ``world-ssh-build``), each under the
    lock."""
    objdir = objdir or default_objdir()
    inc = make_py_argv(src, objdir, ["_includes"], jobs=jobs)
    bt = make_py_argv(src, objdir, ["_build-tools"], jobs=jobs)
    bw = make_py_argv(src, objdir, ["buildworld"], ssh_make_vars(kyua, src), jobs=jobs)
    stages = [Stage("world-ssh-includes", tuple(locked_argv(inc, lock))),
              Stage("world-ssh-build-tools", tuple(locked_argv(bt, lock)))]
    if openssh_config_missing(src):
        # the libraries first (libssh left out): configure links against them
        v = ssh_make_vars(kyua, src)
        v["_generic_libs"] = " ".join(x for x in v["_generic_libs"].split()
                                      if x not in SSHD_GENERIC_LIBS)
        v["SUBDIR_OVERRIDE"] = "secure/lib/libcrypto"
        libs = make_py_argv(src, objdir, ["buildworld"], v, jobs=jobs)
        stages.append(Stage("world-ssh-libs", tuple(locked_argv(libs, lock))))
    return stages + [Stage("world-ssh-build", tuple(locked_argv(bw, lock)))]


def unbuildable(src: str, programs: Dict[str, str]) -> List[str]:
    """Guest paths of ``programs`` whose directory ``src`` lacks or holds only a
    stand-in Makefile (rxl.tree.snapshot: the 15.0 snapshot lacks usr.bin/id); none
    when ``src`` is not there (a plan)."""
    if not Path(src).is_dir():
        return []
    dirs = {g: str(Path(rel).parent) for g, rel in programs.items()}
    stand = set(snapshot.stand_ins(src, set(dirs.values())))
    return sorted(g for g, d in dirs.items()
                  if d in stand or not (Path(src) / d).is_dir())


#: The loader an SSH guest boots (rxl.guest.sshguest.stage_ssh_root), relative to
#: OBJTOP: a product of the userland like the programs, stored and seeded with them.
LUA_LOADER = "stand/efi/loader_lua/loader_lua.efi"


def ssh_world_outputs(src: str, objdir: Optional[str] = None, *,
                      kyua: bool = False) -> WorldOutputs:
    """Where the products will be: the narrowed world's, the lua loader, the sshd
    programs (and kyua); not the programs the tree cannot build (:func:`unbuildable`)."""
    out = world_outputs(src, objdir or default_objdir())
    progs = dict(out.programs)
    sshd = sshd_programs(src)
    skip = set(unbuildable(src, sshd))
    progs.update({g: out.objtop / rel for g, rel in sshd.items() if g not in skip})
    if kyua:
        progs.update({g: out.objtop / rel for g, rel in kyuaworld.KYUA_PROGRAMS.items()})
    return WorldOutputs(out.objtop, out.sysroot, out.loader_efi, progs,
                        others=(out.objtop / LUA_LOADER,))


class SSHWorldError(HostError):
    """The sshd userland cannot be built: a download or OpenSSH's configure failed."""


def default_logdir() -> str:
    """Where the sshd userland's build logs go: ``$RXL_WORK/guest/up``, beside the
    console log of the guest ``rxl guest up`` keeps running."""
    return str(paths.work_root() / "guest" / "up")


def build_ssh_world(src: str, echo: Callable[[str], None] = print, *, kyua: bool = False,
                    lock: Optional[str] = None, logdir: Optional[str] = None) -> None:
    """Build the sshd userland (:func:`plan_ssh_world`), a log per stage in ``logdir``
    (default :func:`default_logdir`), unless the userland of ``src``'s base is stored
    (:func:`rxl.tree.userland.seed`: copied, not built; a build is stored for the next
    tree, :func:`rxl.tree.userland.save`). The kernel-toolchain of ``src`` in the sshd
    objdir comes from the shared store (:func:`rxl.tree.toolchain.seed`) or is built first. ``kyua``: with
    kyua (:mod:`rxl.tree.kyuaworld`; the SQLite amalgamation fetched first). ``lock``:
    the build lock of each stage (None: the default; "": none, the caller holds it). Raises
    rxl.tree.build.BuildError naming the log when a stage fails, SSHWorldError when the
    amalgamation cannot be fetched or OpenSSH's configure fails."""
    objdir = default_objdir()
    logdir = Path(logdir or default_logdir())
    Path(objdir).mkdir(parents=True, exist_ok=True)
    snapshot.prepare(src, echo)
    skip = unbuildable(src, sshd_programs(src))
    if skip:
        echo(f"sshd userland: {src} cannot build {', '.join(skip)} (see above); the guest "
             "goes without")
    lock = tree_build.DEFAULT_LOCK if lock is None else (lock or None)
    stages = plan_ssh_world(src, kyua=kyua, lock=lock)
    # the key leaves out world-ssh-libs, which only a tree without OpenSSH's config.h has
    plan = userland.plan_key([s.argv for s in plan_ssh_world(src, kyua=kyua, lock=None)
                              if s.name != "world-ssh-libs"], src, objdir)
    outs = ssh_world_outputs(src, objdir, kyua=kyua)
    if outs.missing() and userland.seed(src, objdir, plan, echo) and not outs.missing():
        return
    if kyua:
        try:
            kyuaworld.fetch_amalgamation(src, kyuaworld.default_cache(), echo=echo)
        except kyuaworld.KyuaError as exc:
            raise SSHWorldError(str(exc)) from None
    if not (tree_build.toolchain_done(objdir, src) or toolchain.seed(src, objdir, echo)):
        stages = tree_build.plan_stages(src, objdir, lock=lock)[:1] + stages
    for st in stages:
        if st.name == "world-ssh-includes":
            tree_world.ensure_atf_headers(src, objdir, echo)
        if st.name == "world-ssh-build-tools":
            for p in cross_built_tools(tree_world.objtop(src, objdir)):
                echo(f"{p}: built for FreeBSD, not the host: removed for _build-tools")
                p.unlink()
            foreign = foreign_depends(tree_world.objtop(src, objdir), src)
            if foreign:
                echo(f"{len(foreign)} dependency files name another tree's sources "
                     f"(e.g. {foreign[0]}): removed")
            for p in foreign:
                p.unlink()
        if st.name == "world-ssh-build" and openssh_config_missing(src):
            openssh_config(src, objdir, str(logdir), echo)
        echo(f"{st.name}: log {logdir / (st.name + '.log')}")  # run_stage says started
        try:
            tree_build.run_stage(st, str(logdir), echo)
            if st.name == "kernel-toolchain":
                (Path(objdir) / tree_build.TOOLCHAIN_DONE).touch()
                toolchain.save(src, objdir, echo)
        except tree_build.BuildError as exc:
            # as rxl.tree.world: a failed test-includes check alone is not fatal
            if not st.name.endswith("includes") or tree_world.includes_check_only_failure(
                    exc.log.read_text(errors="replace"), src) is None:
                raise
    if not outs.missing():
        userland.save(src, objdir, plan, [outs.loader_efi, *outs.others,
                                          *outs.programs.values()], echo)


def openssh_config(src: str, objdir: str, logdir: str,
                   echo: Callable[[str], None] = print) -> Path:
    """Make the tree's missing crypto/openssh/config.h with OpenSSH's own configure, cross
    (:func:`openssh_configure_argv`), in a copy under ``logdir``, undefine what configure
    found on the Linux host's file system (:func:`openssh_config_for_freebsd`) and write
    it into the work tree (a generated file, as on FreeBSD; never into this repository).
    Log: ``<logdir>/openssh-configure.log``. Returns the file; raises SSHWorldError
    naming the log when a step fails or a tool is missing."""
    work = Path(logdir) / "openssh-configure"
    log = Path(logdir) / "openssh-configure.log"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(Path(src) / "crypto/openssh", work, symlinks=True)
    t0 = time.monotonic()
    echo(f"openssh-configure: the tree lacks {OPENSSH_CONFIG_H}: running OpenSSH's "
         f"configure (cross, log {log})")
    with open(log, "w") as fh:
        clang, triple = tree_world.compiler_for(src)
        for argv in openssh_configure_argv(str(tree_world.worldtmp(src, objdir)),
                                           clang=clang, triple=triple):
            fh.write(f"$ {' '.join(argv)}\n")
            fh.flush()
            try:
                rc = subprocess.run(argv, cwd=work, stdout=fh, stderr=subprocess.STDOUT).returncode
            except FileNotFoundError:
                raise SSHWorldError(f"openssh-configure: {argv[0]} not found (apt-get install "
                                   "-y autoconf automake; rxl doctor)") from None
            if rc != 0:
                raise SSHWorldError(f"openssh-configure: {argv[0]} exited {rc}; log {log}")
    dest = Path(src) / OPENSSH_CONFIG_H
    dest.write_text(openssh_config_for_freebsd((work / "config.h").read_text()))
    echo(f"openssh-configure: {dest} written in {time.monotonic() - t0:.0f} s")
    return dest
