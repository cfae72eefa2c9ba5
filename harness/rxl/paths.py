"""Where the slow tiers keep their work: one root, one place to change it.

Object trees, logs, guest roots and the build lock live under
``$RXL_WORK``, default ``$XDG_CACHE_HOME/rxl`` (``~/.cache/rxl``): a kernel
object tree is a few GiB, so it belongs in a cache, never in the
checkout.  The results recorded in docs/results/ were made with
``RXL_WORK=/work``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Optional


def work_root() -> Path:
    """``$RXL_WORK``, else ``$XDG_CACHE_HOME/rxl``, else ``~/.cache/rxl``.

    A relative ``$XDG_CACHE_HOME`` is ignored, as the XDG Base Directory
    Specification says ("If an implementation encounters a relative path in
    any of these variables it should consider the path invalid and ignore
    it"), as an empty one is; a relative ``$RXL_WORK`` or ``$HOME`` gives a
    relative root, which rxl.cli.options.check_work_root refuses."""
    env = os.environ.get("RXL_WORK")
    if env:
        return Path(env)
    cache = os.environ.get("XDG_CACHE_HOME")
    if not cache or not os.path.isabs(cache):
        cache = os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "rxl"


def existing_ancestor(path: Path) -> Path:
    """The nearest ancestor of ``path`` (not ``path`` itself) that exists, ``/`` at
    the last: where a directory at ``path`` would be made, for the checks that
    refuse a path under a file.  Raises OSError when a component cannot be looked
    at (a name too long)."""
    anc = path.parent
    while not anc.exists() and anc != anc.parent:
        anc = anc.parent
    return anc


def broken_link(path: Path) -> Optional[Path]:
    """The symlink among ``path`` and its ancestors that cannot be followed (a
    loop, or a link to nothing), else None: the nearest of them that is there as
    a name (lstat), when it is a symlink stat(2) cannot follow. Path.exists()
    says False for both, and a directory is never made at or under one
    (mkdir: "File exists", "Too many levels of symbolic links")."""
    p = Path(os.path.abspath(path))
    while True:
        try:
            os.lstat(p)
            break
        except OSError:  # not there; under a loop, a dangling link or a file
            if p == p.parent:
                return None
            p = p.parent
    if not p.is_symlink():
        return None
    try:
        os.stat(p)
    except OSError:
        return p
    return None


def overlay(src: Path, dst: Path) -> None:
    """Copy the tree ``src`` onto ``dst``, symlinks as symlinks, replacing what is
    there: a file or symlink of ``dst`` at a path where ``src`` has a symlink is
    removed first (shutil.copytree would stop there with EEXIST), and files are
    overwritten. Directories are merged. Raises OSError with one short line (the
    count of failed paths and the first) instead of shutil.Error's whole list."""
    for root, dirs, files in os.walk(src):
        for name in dirs + files:
            here = Path(root) / name
            if not here.is_symlink():
                continue
            there = dst / here.relative_to(src)
            if there.is_symlink() or there.is_file():
                there.unlink()
            elif there.is_dir():
                shutil.rmtree(there)
    try:
        shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)
    except shutil.Error as exc:
        failed = exc.args[0] if exc.args and isinstance(exc.args[0], list) else []
        first = failed[0] if failed else ("?", "?", str(exc))
        raise OSError(f"{len(failed)} path(s) not copied, the first {first[1]}: "
                      f"{first[2]}") from None


WORK = work_root()
#: MAKEOBJDIRPREFIX for make.py builds.
OBJDIR = str(WORK / "obj")
#: Per-stage logs and run directories.
LOGS = str(WORK / "logs")
#: Guest roots of ``rxl run`` and ``rxl learn``.
GUEST = str(WORK / "guest")
GUEST_LEARN = str(WORK / "guest-learn")
#: Serializes make.py runs and checkouts that share one tree and objdir.
LOCK = str(WORK / "build.lock")
