"""One guest userland per base commit and compiler, shared by every tree of that base.

The sshd (and kyua) userland is the longest build of a cold run (libc, libcrypto,
libc++, SQLite: docs/results/base15.md), and a series that changes the kernel
does not change it: every tree of a base (the fetched base, its work clone with
the series, kern's trees, a user's ``SRC``) builds the same programs. As
:mod:`rxl.tree.toolchain` does for the kernel-toolchain, the first successful
build of a tree whose HEAD descends from a base the project names is stored in
``$RXL_WORK/userland/<base[:12]>-llvm<N>-<plan>/`` (:func:`store_dir`): the
sysroot (``OBJTOP/tmp``, the libraries and headers the ATF programs link against)
and every product the guest is staged from (programs, the loader), at their
OBJTOP paths; ``<plan>`` is a digest of the make.py stages with the tree's and the
objdir's paths taken out (:func:`plan_key`), so another list of programs (kyua or
not) is another store. A later tree of that base gets a copy (:func:`seed`, a few
seconds) instead of the build.

Sharing is refused (the tree builds its own) when the tree changes anything the
userland is built from (:func:`unshared_reason`): any file outside ``sys/``,
``tests/`` and manual pages, or a ``sys/`` header that has no place under
``/usr/include`` (:func:`installed_header`). The headers a series changes that do
have one (``sys/netinet/tcp.h`` -> ``usr/include/netinet/tcp.h``; include/Makefile's
``LDIRS`` and ``LSUBDIRS``, ``sys/<machine>/include`` -> ``machine``) reach the ATF
programs by :func:`refresh_headers`, which copies the tree's version into the
sysroot before they are compiled, as ``_includes`` would have installed it; the
store itself keeps the base's version (:func:`save` writes it back).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Iterable, List, Optional, Sequence

from rxl import paths
from rxl.errors import reason
from rxl.tree import toolchain

STORE = "userland"
COMPLETE = ".complete"
#: include/Makefile's LDIRS and the tops of its LSUBDIRS: sys/<dir>/... installs to
#: /usr/include/<dir>/...
INSTALLED_DIRS = ("geom", "net", "net80211", "netgraph", "netinet", "netinet6", "netipsec",
                  "netlink", "netsmb", "nfs", "nfsclient", "nfsserver", "sys", "vm", "dev",
                  "fs", "security", "ufs", "bsm")
#: sys/<machine>/include/... installs to /usr/include/machine/... (amd64), x86's to x86/.
MACHINE_DIRS = {"sys/amd64/include/": "machine/", "sys/x86/include/": "x86/"}


def installed_header(rel: str) -> Optional[str]:
    """Where ``_includes`` installs tree file ``rel`` under /usr/include (``netinet/tcp.h``),
    or None for a file it does not install (not a ``sys/`` header, or of a directory
    include/Makefile does not list)."""
    if not rel.endswith(".h") or not rel.startswith("sys/"):
        return None
    for pre, dest in MACHINE_DIRS.items():
        if rel.startswith(pre):
            return dest + rel[len(pre):]
    rest = rel[len("sys/"):]
    return rest if rest.split("/", 1)[0] in INSTALLED_DIRS and "/" in rest else None


def _never_built(rel: str) -> bool:
    """Kernel sources, tests and manual pages: nothing the userland is built from."""
    return ((rel.startswith("sys/") and not rel.endswith(".h")) or rel.startswith("tests/")
            or (len(rel) > 2 and rel[-2] == "." and rel[-1] in "123456789"))


#: Files the harness itself writes into a tree it builds the userland of, the same for
#: every tree of a base (rxl.tree.kyuaworld's SQLite amalgamation, OpenSSH's config.h:
#: rxl.tree.sshworld); not a change of the tree's.
GENERATED = ("contrib/sqlite3/sqlite3.c", "contrib/sqlite3/sqlite3.h", "crypto/openssh/config.h")


def changed_files(src: str, base: str) -> Optional[List[str]]:
    """Tracked files of ``src`` (HEAD and the work tree) that differ from ``base``, not
    counting files absent from the work tree (a snapshot's missing blobs) nor
    :data:`GENERATED`; None when git cannot tell."""
    cp = subprocess.run(["git", "-C", src, "diff", "--name-only", "--diff-filter=d", base],
                        capture_output=True, text=True,
                        env=dict(os.environ, GIT_NO_LAZY_FETCH="1"))
    if cp.returncode != 0:
        return None
    return sorted(set(cp.stdout.split()) - set(GENERATED))


def unshared_reason(changed: Optional[Iterable[str]]) -> Optional[str]:
    """Why a tree with these changes against its base cannot share the base's userland,
    or None when it can. Pure."""
    if changed is None:
        return "git cannot say what the tree changed against its base"
    for rel in changed:
        if _never_built(rel) or installed_header(rel):
            continue
        return f"the tree changes {rel}, which the userland is built from"
    return None


def plan_key(argvs: Sequence[Sequence[str]], src: str, objdir: str) -> str:
    """12 hex digits of the stages' argv with ``src`` and ``objdir`` replaced by
    placeholders (so trees at other paths have the same key)."""
    s, o = os.path.abspath(src), os.path.abspath(objdir)
    text = "\n".join(" ".join(a.replace(o, "<obj>").replace(s, "<src>") for a in argv)
                     for argv in argvs)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def store_dir(key: str, llvm: int, plan: str, work: Optional[str] = None) -> Path:
    """``<work>/userland/<key[:12]>-llvm<llvm>-<plan>`` (work: $RXL_WORK)."""
    return Path(work or paths.work_root()) / STORE / f"{key[:12]}-llvm{llvm}-{plan}"


def _objtop(src: str, objdir: str) -> Path:
    """OBJTOP of ``src`` under MAKEOBJDIRPREFIX ``objdir`` (rxl.tree.world.objtop)."""
    return Path(os.path.abspath(objdir)) / os.path.abspath(src).lstrip("/") / "amd64.amd64"


def _shared_store(src: str, objdir: str, plan: str, work: Optional[str],
                  echo: Callable[[str], None]) -> Optional[Path]:
    key = toolchain.base_key(src)
    if key is None:
        return None
    why = unshared_reason(changed_files(src, key))
    if why:
        echo(f"userland: not shared with base {key[:12]}: {why}")
        return None
    return store_dir(key, toolchain.cross_llvm(src), plan, work)


def seed(src: str, objdir: str, plan: str, echo: Callable[[str], None] = print,
         work: Optional[str] = None) -> bool:
    """Copy the stored userland of ``src``'s base into its OBJTOP; True if done (then
    :func:`refresh_headers`). False, with nothing written, when there is no store or
    the tree cannot share one; an OSError while copying is said and gives False."""
    store = _shared_store(src, objdir, plan, work, echo)
    if store is None or not (store / COMPLETE).is_file():
        return False
    top = _objtop(src, objdir)
    try:
        paths.overlay(store / "objtop", top)
        link = top / "tmp/sys"
        if link.is_symlink():       # WORLDTMP/sys: the tree's sys/ (Makefile.inc1)
            link.unlink()
            link.symlink_to(Path(os.path.abspath(src)) / "sys")
    except OSError as exc:
        echo(f"userland: copying {store} failed ({reason(exc)}); building it")
        return False
    echo(f"userland: copied from {store} (built once for base, compiler and plan "
         f"{store.name}), not built")
    refresh_headers(src, str(top / "tmp"), echo)
    return True


def save(src: str, objdir: str, plan: str, products: Iterable[Path],
         echo: Callable[[str], None] = print, work: Optional[str] = None) -> Optional[Path]:
    """Store the userland just built for ``src``: its sysroot and ``products`` (paths
    under its OBJTOP), with the base's version of every header the tree changed. The
    store, or None (no base, not shareable, stored already, or a copy error, said)."""
    store = _shared_store(src, objdir, plan, work, echo)
    if store is None or (store / COMPLETE).is_file():
        return None
    top = _objtop(src, objdir)
    tmp = store.with_name(store.name + ".tmp")
    key = toolchain.base_key(src)
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(top / "tmp", tmp / "objtop/tmp", symlinks=True)
        for p in products:
            dest = tmp / "objtop" / Path(p).relative_to(top)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, dest)
        for rel in changed_files(src, key) or []:
            inst = installed_header(rel)
            dest = tmp / "objtop/tmp/usr/include" / inst if inst else None
            # Makefile.inc1 links WORLDTMP/sys to the tree's sys/ and installs its
            # headers as links through it: such a header is the seeded tree's own
            # (seed() re-points the link), and writing it would write the tree.
            if dest is not None and not dest.is_symlink():
                cp = subprocess.run(["git", "-C", src, "show", f"{key}:{rel}"],
                                    capture_output=True)
                if cp.returncode == 0:
                    dest.write_bytes(cp.stdout)
                elif dest.exists():
                    dest.unlink()       # a header the series adds: not the base's
        (tmp / COMPLETE).write_text(f"{key}\n")
        shutil.rmtree(store, ignore_errors=True)
        os.replace(tmp, store)
    except OSError as exc:
        echo(f"userland: not stored for reuse ({reason(exc)})")
        shutil.rmtree(tmp, ignore_errors=True)
        return None
    echo(f"userland: stored in {store} for every tree of base {key[:12]}")
    return store


def refresh_headers(src: str, sysroot: str, echo: Callable[[str], None] = print) -> List[str]:
    """Copy into ``sysroot``'s /usr/include the tree's version of every installed
    header it changed against its base (none without a base); the ones copied."""
    key = toolchain.base_key(src)
    if key is None or not Path(sysroot, "usr/include").is_dir():
        return []
    out = []
    for rel in changed_files(src, key) or []:
        inst = installed_header(rel)
        if not inst or not (Path(src) / rel).is_file():
            continue
        dest = Path(sysroot, "usr/include", inst)
        if dest.is_symlink():
            if dest.resolve() == (Path(src) / rel).resolve():
                continue            # a link to the tree's own file (Makefile.inc1)
            dest.unlink()           # never write through a link into another tree
        data = (Path(src) / rel).read_bytes()
        if not dest.is_file() or dest.read_bytes() != data:
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            out.append(inst)
    if out:
        echo(f"userland: the tree's {', '.join(out)} copied into {sysroot} (it changes them "
             "against its base)")
    return out
