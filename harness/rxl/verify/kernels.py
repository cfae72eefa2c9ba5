"""The tree and kernel facts ``rxl run`` checks: the series' base, kernel stamps.

:func:`series_base` reads ``patches/BASE``; :func:`unapplied_files` says
which of the series' files a non-git tree lacks; :func:`pristine_checkout`
makes the shared checkout of the base a pristine kernel is built from; a
kernel is reused only while ``<kernel>.rxl-stamp`` (:func:`kernel_stamp_text`:
last commit and uncommitted diff under ``sys/``, the test config the build
writes, the kernel's size and mtime) still matches (:func:`kernel_cached`).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path
from typing import Callable, List, Optional, Tuple

from rxl.tree.kernconf import DEFAULT_KERNCONF, kernconf_text
from rxl.tree.patch import SeriesError, parse_base
from rxl.verify.pipeline import StageFailed, echo_err


def git_out(src: str, *args: str) -> str:
    """``git -C src ARGS``'s output; ``""`` when git fails or is missing.
    Bytes that are not UTF-8 (a Latin-1 source file in a diff) are kept as
    surrogate escapes, so ``.encode("utf-8", "surrogateescape")`` gives git's
    bytes back."""
    try:
        return subprocess.run(["git", "-C", src, *args], capture_output=True,
                              encoding="utf-8", errors="surrogateescape",
                              check=True).stdout.rstrip("\n")
    except (OSError, subprocess.CalledProcessError):
        return ""


#: The project's patch series: ``patches/BASE`` names the base commit.
REPO_PATCHES = Path(__file__).resolve().parents[3] / "patches"


def series_base(patches_dir: Path = REPO_PATCHES) -> Optional[str]:
    """The base commit (40 hex) from ``patches/BASE``, or None if there is none."""
    try:
        return parse_base((Path(patches_dir) / "BASE").read_text()).commit
    except OSError:
        return None
    except SeriesError as exc:
        raise StageFailed(f"series: {exc}") from None


#: The project's copies of the files the series adds (``sys/...``).
REPO_SYS = REPO_PATCHES.parent / "sys"


def unapplied_files(src: str, repo_sys: Path = REPO_SYS) -> List[Tuple[str, str]]:
    """(path, why) for each of the series' files (those in ``repo_sys``) that
    ``src`` lacks or holds with other bytes; [] when all are there, or when
    this checkout has no ``sys/``."""
    out: List[Tuple[str, str]] = []
    if not repo_sys.is_dir():
        return out
    for p in sorted(repo_sys.rglob("*")):
        if not p.is_file() or p.name.startswith(".") or "__pycache__" in p.parts:
            continue
        rel = p.relative_to(repo_sys.parent).as_posix()
        mine = Path(src) / rel
        if not mine.is_file():
            out.append((rel, "is missing"))
        elif mine.read_bytes() != p.read_bytes():
            out.append((rel, "differs from this repository's copy"))
    return out


def pristine_checkout(src: str, base: str, dest: Path,
                      echo: Callable[[str], None] = echo_err) -> str:
    """A checkout of ``base`` at ``dest`` borrowing ``src``'s objects (``clone --shared``).

    ``src``'s own checkout is never touched. The snapshot lacks some large
    blobs, so git's checkout reports them and stops early; that is accepted
    when HEAD is ``base`` and ``tools/build/make.py`` is there (said, not
    hidden). Raises StageFailed if ``dest`` exists and is something else.
    """
    def head(d: Path) -> str:
        return git_out(str(d), "rev-parse", "HEAD").strip()

    if dest.exists():
        if head(dest) == base and (dest / "tools/build/make.py").is_file():
            return str(dest)
        raise StageFailed(f"build: {dest} exists but is not a checkout of {base[:12]}; "
                          "move it away or pass --pristine-src")
    dest.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", src, str(dest)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise StageFailed(f"build: git clone --shared {src} {dest} failed: "
                          f"{(r.stderr.strip().splitlines() or ['?'])[-1]}")
    r = subprocess.run(["git", "-C", str(dest), "checkout", "-q", "--detach", base],
                       capture_output=True, text=True)
    missing = [ln for ln in r.stderr.splitlines() if "unable to read sha1 file" in ln]
    if head(dest) != base or not (dest / "tools/build/make.py").is_file():
        raise StageFailed(f"build: checkout of {base[:12]} in {dest} failed: "
                          f"{(r.stderr.strip().splitlines() or ['?'])[-1]}")
    echo(f"build: pristine tree {dest} at {base[:12]}"
         + (f" ({len(missing)} files of the snapshot have no blob and are absent)"
            if missing else ""))
    return str(dest)


def build_timings(results) -> str:
    """``name N s (lock wait W s)`` per build stage result (rxl.tree.build.StageResult)."""
    return ", ".join(f"{r.name} {r.seconds:.0f} s (lock wait {r.extra.get('wait_seconds', '?')} s)"
                     for r in results)


def kernel_stamp_text(src: str, kernel: str) -> str:
    """What a cached kernel must match: last commit under sys/, the uncommitted
    changes under sys/, the config, and the kernel file's size and mtime (ns).

    The config is the kernel's directory name (``.../sys/RXL/kernel``). The
    test config :data:`~rxl.tree.kernconf.DEFAULT_KERNCONF` is written by the
    build and never committed, so git does not see it change: its text's
    sha256 is in the stamp (a pristine kernel built before ``device epair``
    was added was reused without it, 2026-12-06). Other configs are files
    git tracks under sys/."""
    conf = Path(kernel).parent.name
    config = (f"{conf} {hashlib.sha256(kernconf_text(conf).encode()).hexdigest()}"
              if conf == DEFAULT_KERNCONF else f"{conf} (tracked under sys/)")
    head = git_out(src, "log", "-1", "--format=%H", "--", "sys").strip()
    dirty = git_out(src, "status", "--porcelain", "--untracked-files=no", "--", "sys")
    diff = git_out(src, "diff", "HEAD", "--", "sys") if dirty.strip() else ""
    st = os.stat(kernel) if os.path.exists(kernel) else None
    return "\n".join([head, hashlib.sha256(diff.encode("utf-8", "surrogateescape")).hexdigest()
                      if diff else "clean", config,
                      f"{st.st_size} {st.st_mtime_ns}" if st else "no kernel"]) + "\n"


def write_kernel_stamp(src: str, kernel: str, what: str = "build", results=()) -> None:
    """Write ``<kernel>.rxl-stamp`` after a build; StageFailed if the build
    left no kernel there (a stamp is never written for a missing kernel)."""
    if not Path(kernel).is_file():
        log = f"; log {results[-1].log}" if results else ""
        raise StageFailed(f"{what}: make.py finished but left no kernel at {kernel}{log}")
    try:
        Path(kernel + ".rxl-stamp").write_text(kernel_stamp_text(src, kernel))
    except OSError as exc:
        raise StageFailed(f"{what}: cannot write {kernel}.rxl-stamp: {exc.strerror}") from None


def kernel_cached(src: str, kernel: str) -> bool:
    """True if ``<kernel>.rxl-stamp`` says this kernel was built from the tree as it is."""
    stamp = Path(kernel + ".rxl-stamp")
    return (Path(kernel).is_file() and stamp.is_file()
            and stamp.read_text() == kernel_stamp_text(src, kernel))
