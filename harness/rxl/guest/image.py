"""Stage the guest root: a host directory QEMU serves as a FAT disk.

Layout (what the guest sees on ``/dev/ada0s1``, msdosfs)::

    efi/boot/BOOTx64.EFI   loader_simp.efi (UEFI default boot path)
    boot/loader.rc         templates/loader.rc.j2: root, tunables, boot
    boot/kernel/kernel     the kernel under test
    etc/rc                 templates/rc.j2: the work, sentinels, poweroff
    bin, sbin, usr/bin, libexec, lib, usr/lib: programs and their NEEDED libs
    rxl/tests/<prog>       ATF test programs
    dev/ tmp/              mount point for devfs; scratch for the tests

FAT has no symlinks and no modes: every file is a plain copy (msdosfs shows
them executable). Nothing here deletes anything outside ``root``; a restage
replaces files inside ``root`` only.

The pure part is :func:`plan_root` (a list of copy / write actions) and the
template renderers; :func:`stage_root` carries a plan out.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import jinja2

from rxl.errors import MachineError
from rxl.guest.protocol import MARK, host_sysctl_snapshot

TEMPLATES = Path(__file__).with_name("templates")
#: Root device of the FAT disk on q35's AHCI port 0 (measured: ada0, slice 1).
ROOTDEV = "ada0s1"
#: Seconds one ATF case may run in the guest before timeout(1) kills it.
#: TCG is slow: so_reuseport_lb's 2 x 1000-connection loops need tens of s.
DEFAULT_CASE_TIMEOUT = 300
#: Seconds after a case's start at which a sleep(1) beside it exits, so that
#: timeout(1) always gets a SIGCHLD once the case is over. FreeBSD 14's
#: bin/timeout/timeout.c installs its SIGCHLD handler before fork() but blocks the
#: signal only after it: a case that exits in between (one failing at its first
#: sysctl) is reaped only when the next signal comes, the timeout's SIGALRM, and
#: then returns the case's status (rc=1, t=400 for learning_off on the pristine
#: kernel over SSH, 2026-12-01, docs/results/ssh.md). As timeout(1) is the reaper
#: of its descendants, the orphaned sleep's exit is that next signal. 1 s: far
#: longer than the window (two system calls), even for a vCPU thread the loaded
#: host deschedules there; a case shorter than that takes 1 s.
CASE_WAKE = 1
#: sysctls printed by /etc/rc next to the topology (one-line values only).
DEFAULT_SYSCTLS: Tuple[str, ...] = (
    "kern.ostype", "kern.osrelease", "kern.ident", "hw.ncpu", "vm.ndomains",
    "kern.smp.cpus", "kern.smp.threads_per_core", "kern.smp.cores",
    "net.isr.dispatch", "net.isr.maxthreads", "net.isr.bindthreads",
    "machdep.hyperthreading_intr_allowed",
)
#: Library search path in the guest, as rtld's default (lib before usr/lib).
GUEST_LIBDIRS = ("/lib", "/usr/lib")
#: Upper bound QEMU's vvfat handles comfortably (ci-qemu-test.sh: ~500 MB).
FAT_LIMIT_BYTES = 500 * 1024 * 1024


class ImageError(MachineError):
    """A guest root that cannot be staged (missing input, too large, bad lib)."""


def _env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


def render_loader_rc(tunables: Mapping[str, str] = (), *, rootdev: str = ROOTDEV,
                     boot_verbose: bool = False, modules: Sequence[str] = ()) -> str:
    """Text of ``/boot/loader.rc`` for loader_simp (``set`` lines, then ``boot``).

    ``tunables``: kenv name -> value (e.g. ``{"hw.iflib.core_spread": "1"}``).
    ``modules``: KLD names (``msdosfs``) loaded from /boot/kernel after the kernel,
    which the loader must hold before any module (``load /boot/kernel/kernel``
    first). Raises ValueError for names or values with whitespace (the simple
    interpreter splits on it) and for a module name that is not plain.
    """
    items = sorted(dict(tunables).items())
    for k, v in items:
        if not k or any(c.isspace() for c in k + str(v)):
            raise ValueError(f"loader tunable {k!r}={v!r}: no whitespace allowed")
    for m in modules:
        if not m or not all(c.isalnum() or c == "_" for c in m):
            raise ValueError(f"loader module {m!r}: not a plain KLD name")
    return _env().get_template("loader.rc.j2").render(
        rootdev=rootdev, tunables=items, boot_verbose=boot_verbose, modules=list(modules))


def render_rc(label: str, programs: Sequence[str], *,
              case_timeout: int = DEFAULT_CASE_TIMEOUT,
              sysctls: Sequence[str] = DEFAULT_SYSCTLS, poweroff: bool = True,
              setup_lo: bool = True, cwd: str = "/",
              path: str = "/sbin:/bin:/usr/sbin:/usr/bin", sshd_lines: Sequence[str] = (),
              hold: bool = False, atf_vars: Sequence[Tuple[str, str]] = (),
              host_after: bool = True, atf_lines: Sequence[str] = ()) -> str:
    """Text of the guest's ``/etc/rc``.

    ``programs``: guest paths of ATF test programs, run case by case.
    ``case_timeout``: seconds per case (timeout(1)). ``setup_lo``: configure
    lo0 (the bare guest has no rc.d; a running machine has it already).
    ``cwd``: directory the cases run in; ``path``: the script's PATH;
    ``sshd_lines``: shell lines after lo0 (rxl.guest.sshguest.rc_lines);
    ``atf_lines``: shell lines run first inside ``ATF BEGIN``..``ATF END``
    (cases of the caller's own, rxl.verify.modboot.rc_lines: the parser
    counts LIST and CASE lines only there);
    ``hold``: stay up after the end marker (for SSH) instead of powering off.
    ``atf_vars``: (name, value) ATF configuration variables given to every
    case as ``-v name=value`` (e.g. ``("churn_seconds", "200")``).
    The host's lbgroup sysctls are recorded before the cases and, unless
    ``host_after`` is False (kyua runs the cases after the rc: its caller
    records them then), after them (:func:`rxl.guest.protocol.host_sysctl_snapshot`). Raises
    ValueError on a label or path with whitespace (they are words in the
    sentinel lines), and on a variable name that is not ``[A-Za-z0-9_.]+`` or
    a value that is empty or holds whitespace or shell metacharacters.
    """
    for word in [label, *programs, *sysctls, cwd, path]:
        if not word or any(c.isspace() for c in word):
            raise ValueError(f"rc: {word!r} must be a non-empty word without whitespace")
    for name, value in atf_vars:
        check_atf_var(name, value)
    if case_timeout < 1:
        raise ValueError(f"rc: case_timeout must be >= 1 s, got {case_timeout}")
    return _env().get_template("rc.j2").render(
        label=label, programs=list(programs), case_timeout=case_timeout,
        sysctls=list(sysctls), poweroff=poweroff, mark=MARK, setup_lo=setup_lo, cwd=cwd,
        path=path, sshd_lines=list(sshd_lines), atf_lines=list(atf_lines), hold=hold,
        wake=CASE_WAKE,
        atf_args="".join(f" -v {n}={v}" for n, v in atf_vars),
        host_before=host_sysctl_snapshot("before"),
        host_after=host_sysctl_snapshot("after") if host_after else "")


#: What an ATF configuration variable's name and value may hold in the rc
#: (words the shell takes literally).
_ATF_VAR_NAME = re.compile(r"[A-Za-z0-9_.]+")
_ATF_VAR_VALUE = re.compile(r"[A-Za-z0-9_.,:/%+-]+")


def check_atf_var(name: str, value: str) -> None:
    """Raise ValueError unless ``name=value`` can be passed to a case as ``-v``."""
    if not _ATF_VAR_NAME.fullmatch(name or ""):
        raise ValueError(f"ATF variable name {name!r}: letters, digits, '_' and '.' only")
    if not _ATF_VAR_VALUE.fullmatch(value or ""):
        raise ValueError(f"ATF variable {name}={value!r}: the value must be a non-empty "
                         "word of letters, digits and _.,:/%+-")


@dataclass(frozen=True)
class Action:
    """Put ``data`` (text) or a copy of ``source`` at ``dest`` (relative to root)."""

    dest: str
    source: Optional[str] = None
    data: Optional[str] = None


def plan_root(*, loader_efi: str, kernel: str, programs: Mapping[str, str],
              libs: Mapping[str, str], tests: Mapping[str, str], loader_rc: str,
              rc: str) -> List[Action]:
    """The actions that build a guest root. Pure.

    ``programs`` / ``libs`` / ``tests``: guest path -> host path (tests are
    usually ``/rxl/tests/<name>``). Raises ImageError on a guest path that
    is not absolute or that two inputs claim.
    """
    acts = [Action("efi/boot/BOOTx64.EFI", source=loader_efi),
            Action("boot/kernel/kernel", source=kernel),
            Action("boot/loader.rc", data=loader_rc),
            Action("etc/rc", data=rc),
            Action("dev/", data=None), Action("tmp/", data=None)]
    seen = {a.dest for a in acts}
    for mapping in (programs, libs, tests):
        for guest, host in sorted(mapping.items()):
            if not guest.startswith("/"):
                raise ImageError(f"guest path {guest!r} is not absolute")
            rel = guest.lstrip("/")
            if rel in seen:
                raise ImageError(f"guest path {guest} given twice")
            seen.add(rel)
            acts.append(Action(rel, source=host))
    return acts


def readelf_needed(path: str, readelf: str = "llvm-readelf-16") -> List[str]:
    """DT_NEEDED sonames of an ELF file (empty for static). Raises ImageError if unreadable."""
    tool = shutil.which(readelf) or shutil.which("llvm-readelf") or shutil.which("readelf")
    if not tool:
        raise ImageError("no readelf (install llvm-16: apt-get install -y llvm-16)")
    p = subprocess.run([tool, "-d", path], capture_output=True, text=True)
    if p.returncode:
        raise ImageError(f"readelf {path}: {p.stderr.strip().splitlines()[-1:]}")
    out = []
    for line in p.stdout.splitlines():
        if "(NEEDED)" in line and "[" in line:
            out.append(line.rsplit("[", 1)[1].rstrip("]").strip())
    return out


def resolve_libs(binaries: Iterable[str], sysroot: str,
                 needed: Callable[[str], List[str]] = readelf_needed) -> Dict[str, str]:
    """Closure of NEEDED libraries: guest path -> host path under ``sysroot``.

    Looks in ``<sysroot>/lib`` then ``<sysroot>/usr/lib`` (rtld's default
    order). Raises ImageError naming the first soname not found.
    """
    found: Dict[str, str] = {}
    todo = list(binaries)
    done = set()
    while todo:
        b = todo.pop()
        if b in done:
            continue
        done.add(b)
        for soname in needed(b):
            if any(g.endswith("/" + soname) for g in found):
                continue
            for d in GUEST_LIBDIRS:
                host = Path(sysroot) / d.lstrip("/") / soname
                if host.exists():
                    found[f"{d}/{soname}"] = str(host.resolve())
                    todo.append(str(host.resolve()))
                    break
            else:
                raise ImageError(f"{b} needs {soname}, not found under {sysroot}/lib or /usr/lib")
    return found


def stage_root(root: str, actions: Sequence[Action], *, entropy: bool = True) -> dict:
    """Carry out ``actions`` under ``root``; returns ``{"files": n, "bytes": total}``.

    Raises ImageError for a missing source or a root above
    :data:`FAT_LIMIT_BYTES`. Writes ``boot/entropy`` (4 KiB from os.urandom)
    when ``entropy``. Never removes anything.
    """
    rootp = Path(root)
    rootp.mkdir(parents=True, exist_ok=True)
    total = files = 0
    for a in actions:
        dest = rootp / a.dest
        if a.dest.endswith("/"):
            dest.mkdir(parents=True, exist_ok=True)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        if a.source is not None:
            if not Path(a.source).is_file():
                raise ImageError(f"{a.source}: missing (needed for /{a.dest})")
            shutil.copyfile(a.source, dest)
            os.chmod(dest, 0o755)
        else:
            dest.write_text(a.data or "")
        total += dest.stat().st_size
        files += 1
    if entropy:
        (rootp / "boot").mkdir(parents=True, exist_ok=True)
        (rootp / "boot/entropy").write_bytes(os.urandom(4096))
    if total > FAT_LIMIT_BYTES:
        raise ImageError(f"{root}: {total >> 20} MiB staged, above QEMU vvfat's "
                         f"~{FAT_LIMIT_BYTES >> 20} MiB")
    return {"files": files, "bytes": total}
