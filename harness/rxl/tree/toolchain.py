"""One kernel-toolchain per base commit and compiler, shared by every clone of that base.

make.py keeps the kernel-toolchain under ``$MAKEOBJDIRPREFIX/<abs src>/
amd64.amd64`` (OBJTOP), so every clone path and every objdir gets its own:
a cold ``rxl run`` built it twice (patched and pristine trees, 209 s and
251 s measured) and ``rxl learn``'s rig checkout a third time. The
series does not touch the toolchain, so one build serves every tree whose
HEAD descends from a base the project names (``patches/BASE``, and the
``BASE`` of a subdirectory of ``patches/``, e.g. a backport's) and that is
built with the same cross compiler (rxl.tree.version: clang 16 for the 14
base, 19 for 15.0; the objects differ).

After a kernel-toolchain succeeds, :func:`save` copies OBJTOP (without
``sys/``, the kernel's objects) into ``$RXL_WORK/toolchain/<base[:12]>-llvm<N>/``
(:func:`store_dir`); before a build, :func:`seed` copies it into the new tree's
OBJTOP and writes the objdir's marker (rxl.tree.build.TOOLCHAIN_DONE), so
the build goes straight to buildkernel. The recipe was verified by the lead
on the build host (/work/coord/toolchain.md, 19:35 UTC): a pristine tree
seeded from /work/freebsd's toolchain built its RXL kernel with
"kernel-toolchain: already built ... skipped"; the copy is 82 MB and takes
about a second.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Callable, List, Optional

from rxl import paths
from rxl.errors import reason
from rxl.tree import version as tree_version
from rxl.tree.build import DEFAULT_TARGET, DEFAULT_TARGET_ARCH, TOOLCHAIN_DONE
from rxl.tree.patch import SeriesError, parse_base

#: Store directory under $RXL_WORK, and its completeness marker.
STORE = "toolchain"
COMPLETE = ".complete"
#: The objdir's bmake (bmake-install, bmake-build) is not stored: its
#: configuration names the objdir, so a copy is never current there and
#: rxl.tree.build.bootstrap_bmake builds it again (seconds).
#: The series' base file (``commit: <40 hex>``).
BASE_FILE = Path(__file__).resolve().parents[3] / "patches" / "BASE"


def base_files(base_file: Optional[Path] = None) -> List[Path]:
    """The base files: ``base_file`` alone when given, else :data:`BASE_FILE` and
    every ``patches/*/BASE`` beside it (sorted)."""
    if base_file is not None:
        return [Path(base_file)]
    bf = Path(BASE_FILE)
    return [bf] + sorted(bf.parent.glob("*/BASE"))


def base_key(src: str, base_file: Optional[Path] = None) -> Optional[str]:
    """The commit of the first base (:func:`base_files`) that ``src``'s HEAD descends
    from (or is); None otherwise (not git, another history, no BASE): no sharing then."""
    for bf in base_files(base_file):
        try:
            base = parse_base(Path(bf).read_text()).commit
        except (OSError, SeriesError):
            continue
        try:
            cp = subprocess.run(["git", "-C", str(src), "merge-base", "--is-ancestor", base,
                                 "HEAD"], capture_output=True,
                                env=dict(os.environ, GIT_NO_LAZY_FETCH="1"))
        except OSError:
            return None
        if cp.returncode == 0:
            return base
    return None


def cross_llvm(src: str) -> int:
    """The clang major ``src`` is built with (rxl.tree.version; patches/BASE's release's
    for a tree not fetched yet; the fallback's for a tree that does not say)."""
    v = tree_version.planned_version(src)
    return v.cross_llvm if v else tree_version.FALLBACK_LLVM


def store_dir(key: str, work: Optional[str] = None, llvm: Optional[int] = None) -> Path:
    """``<work>/toolchain/<key[:12]>-llvm<llvm>`` (work: $RXL_WORK; llvm default: the
    fallback compiler's major)."""
    llvm = tree_version.FALLBACK_LLVM if llvm is None else llvm
    return Path(work or paths.work_root()) / STORE / f"{key[:12]}-llvm{llvm}"


def _objtop(src: str, objdir: str) -> Path:
    return (Path(os.path.abspath(objdir)) / os.path.abspath(src).lstrip("/") /
            f"{DEFAULT_TARGET}.{DEFAULT_TARGET_ARCH}")


def seedable(src: str, objdir: str, work: Optional[str] = None) -> Optional[Path]:
    """The store a build of ``src`` in ``objdir`` can take its toolchain from, or None."""
    key = base_key(src)
    if key is None:
        return None
    d = store_dir(key, work, cross_llvm(src))
    return d if (d / COMPLETE).is_file() else None


def seed(src: str, objdir: str, echo: Callable[[str], None] = print,
         work: Optional[str] = None) -> bool:
    """Copy the stored toolchain of ``src``'s base into ``objdir``; True if done.

    The store's files and symlinks replace those of an earlier seed or build
    (:func:`rxl.paths.overlay`). An OSError while copying is said in one line
    and gives False (the build then runs kernel-toolchain itself).
    """
    store = seedable(src, objdir, work)
    if store is None:
        return False
    try:
        paths.overlay(store / "objtop", _objtop(src, objdir))
        (Path(objdir) / TOOLCHAIN_DONE).touch()
    except OSError as exc:
        echo(f"kernel-toolchain: copying {store} failed ({reason(exc)}); building it")
        return False
    echo(f"kernel-toolchain: copied from {store} (built once for base and compiler "
         f"{store.name})")
    return True


def save(src: str, objdir: str, echo: Callable[[str], None] = print,
         work: Optional[str] = None) -> Optional[Path]:
    """Store the toolchain just built for ``src`` in ``objdir``; the store, or None
    (no base, already stored, or a copy error, which is said)."""
    key = base_key(src)
    if key is None:
        return None
    d = store_dir(key, work, cross_llvm(src))
    if (d / COMPLETE).is_file():
        return None
    tmp = d.with_name(d.name + ".tmp")
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(_objtop(src, objdir), tmp / "objtop", symlinks=True,
                        ignore=lambda where, names: ["sys"] if Path(where) ==
                        _objtop(src, objdir) else [])
        (tmp / COMPLETE).write_text(f"{key}\n")
        shutil.rmtree(d, ignore_errors=True)
        os.replace(tmp, d)
    except OSError as exc:
        echo(f"kernel-toolchain: not stored for reuse ({reason(exc)})")
        return None
    echo(f"kernel-toolchain: stored in {d} for every tree of base {key[:12]}")
    return d
