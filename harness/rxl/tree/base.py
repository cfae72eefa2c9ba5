"""The FreeBSD tree of ``rxl run``: given, fetched, or a work clone with the series.

``make run SRC=DIR`` must work from a plain clone of the base repository at
``patches/BASE``'s commit, and ``make run`` with no tree at all. This module
decides, before any build, which tree the run builds the patched kernel from
and which tree is the pristine one, and never writes into ``SRC``:

* :func:`classify` looks at ``SRC`` read-only and says what it is
  (:class:`SrcKind`): the series already applied (used as it is), a git tree
  that holds the base commit (the series is applied in a work clone), a git
  tree without the base commit (refused, naming the repository that has it),
  a plain tree with the series' files (used as it is), or not a FreeBSD
  source tree at all (refused: "no such directory", "not a directory", "not
  a FreeBSD source tree").
* :func:`work_clone` makes ``<work>/src-<base[:12]>``: ``git clone -q --shared
  --no-checkout SRC`` (it borrows SRC's objects), a checkout of the base, and
  :func:`rxl.tree.series.apply_series` (which handles the snapshot's missing blobs
  with skip-worktree). A stamp (``.git/rxl-series``: base and the sha256 of
  the patches' bytes) makes a second run reuse the clone unchanged, so its
  commits, hence the kernel's stamp, stay the same; new patches re-apply.
* :func:`fetch_base` makes ``<work>/base-<base[:12]>`` when no ``SRC`` is
  given: from a local repository, ``git clone --shared`` (no copy); from a
  URL, ``git init`` + ``git fetch --depth 1 origin <commit>`` (a shallow clone
  of that one commit, about 1 GiB of FreeBSD's tree instead of its history).
  The URL is ``--base-url``, else ``$RXL_BASE_URL``, else GitHub's address of
  the repository ``patches/BASE`` names (:func:`base_url`).

The snapshot repository this project was written against lacks the blobs of
files of 4 MiB and more: a checkout writes every other file and exits
non-zero, and ``git fetch`` from it (pack-objects cannot read them) fails; a
checkout is accepted when HEAD is the commit and ``tools/build/make.py`` is
there, the local-path case clones with ``--shared`` instead of fetching.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

from rxl.cli.options import missing
from rxl.errors import SourceError
from rxl.tree import patch as tree_patch
from rxl.tree import series as tree_series
from rxl.tree import version as tree_version

#: The project's series (patches/BASE and NNNN-*.patch).
REPO_PATCHES = Path(__file__).resolve().parents[3] / "patches"
#: Environment variable that overrides the base repository's URL.
URL_ENV = "RXL_BASE_URL"
#: Stamp of a work clone, under its .git: base commit and the patches' hash.
STAMP = "rxl-series"
#: A file every FreeBSD source tree has (the cross-build's driver).
MAKE_PY = "tools/build/make.py"


class TreeError(SourceError):
    """A one-line, user-facing error about the source tree (nothing was changed)."""


# ------------------------------------------------------------------ pure

def base_url(repository: str, override: Optional[str] = None,
             env: Optional[dict] = None) -> str:
    """Where to fetch the base from.

    ``override`` (``--base-url``), else ``$RXL_BASE_URL``, else
    ``https://github.com/<repository>.git`` for an ``owner/name`` repository
    (the form ``patches/BASE`` uses), else ``repository`` itself (already a
    URL or a path). Raises :class:`TreeError` for an empty repository.
    """
    env = os.environ if env is None else env
    for cand in (override, env.get(URL_ENV)):
        if cand:
            return cand
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*", repository or ""):
        return f"https://github.com/{repository}.git"
    if not repository:
        raise TreeError("patches/BASE names no repository; pass --base-url or --src")
    return repository


def is_local(url: str) -> bool:
    """True for a local directory (a path, not ``scheme://`` nor ``host:path``)."""
    if "://" in url:
        return False
    return Path(url).is_dir()


def patches_digest(patches: Sequence[Path]) -> str:
    """sha256 hex of the patch files' bytes, concatenated in the given order."""
    h = hashlib.sha256()
    for p in patches:
        h.update(Path(p).read_bytes())
    return h.hexdigest()


def stamp_text(base: str, patches: Sequence[Path]) -> str:
    """A work clone's stamp: ``base <commit>`` and ``patches <sha256>`` lines."""
    return f"base {base}\npatches {patches_digest(patches)}\n"


@dataclass
class Tree:
    """The trees a run builds from.

    ``src``: the tree of the patched kernel (series applied); ``pristine``:
    a checkout of the base, or None (then the run checks one out of ``src``
    as before); ``how``: one line saying where they came from; ``commands``:
    every external command run (or, in a dry run, that would run).
    """

    src: str
    pristine: Optional[str] = None
    how: str = ""
    commands: List[str] = field(default_factory=list)


# ------------------------------------------------------------------ git

def _git(cwd: str, *args: str, env: Optional[dict] = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", cwd, *args], capture_output=True, text=True,
                              env=env)
    except FileNotFoundError:
        raise TreeError("git is not installed (rxl doctor --install)") from None


def _last(cp: subprocess.CompletedProcess) -> str:
    lines = (cp.stderr.strip() or cp.stdout.strip()).splitlines()
    return lines[-1] if lines else f"exit {cp.returncode}"


def head_commit(d: str) -> str:
    """The full commit of ``d``'s HEAD, "" without one (not git, no commit)."""
    cp = _git(d, "rev-parse", "--verify", "--quiet", "HEAD")
    return cp.stdout.strip() if cp.returncode == 0 else ""


def _toplevel(d: str) -> bool:
    cp = _git(d, "rev-parse", "--show-toplevel")
    return cp.returncode == 0 and os.path.realpath(cp.stdout.strip()) == os.path.realpath(d)


def _has_commit(d: str, commit: str) -> bool:
    env = dict(os.environ, GIT_NO_LAZY_FETCH="1")
    return _git(d, "cat-file", "-e", f"{commit}^{{commit}}", env=env).returncode == 0


# ------------------------------------------------------------------ classify

class SrcKind:
    """What :func:`classify` found (strings, for messages and tests)."""

    APPLIED = "applied"        # git tree: base below HEAD, the series' files there
    BASE = "base"              # git tree holding the base commit: apply in a work clone
    PLAIN_APPLIED = "plain"    # not git, the series' files there byte for byte
    OWN_APPLIED = "own-applied"  # git tree of the base's release from another history
                                 # (a releng/15.0 checkout) whose HEAD carries the series
    OWN_BASE = "own-base"      # such a tree whose HEAD takes the series: applied on its
                               # HEAD in a work clone; that HEAD is the pristine tree


def series_files(patches_dir: Optional[Path] = None) -> List[str]:
    """Paths (in the FreeBSD tree) of every file the series adds under ``sys/``
    (what the kernel build needs; the ATF tests are built from ``--atf-dir``)."""
    patches_dir = Path(patches_dir or REPO_PATCHES)
    return sorted(f for f in tree_patch.series_added_files(tree_patch.load_series(patches_dir))
                  if f.startswith("sys/"))


def check_tree_dir(src: str, option: str = "--src") -> None:
    """Raise :class:`TreeError` unless ``src`` is a directory holding a FreeBSD tree.

    The messages tell the cases apart: no such directory, not a directory,
    not a FreeBSD source tree (no ``tools/build/make.py``, no ``sys/``: the
    ones missing), not one for amd64
    (no ``sys/amd64/conf``, where the test kernel's config goes).
    """
    p = Path(src)
    if not p.is_dir():  # missing, a loop, or said to be what it is
        raise TreeError(f"{option} {src}: {missing(p, 'directory')}")
    lacks = [what for what, there in ((MAKE_PY, (p / MAKE_PY).is_file()),
                                      ("sys/", (p / "sys").is_dir())) if not there]
    if lacks:  # only what is missing: "no tools/build/make.py" beside a sys/
        raise TreeError(f"{option} {src}: not a FreeBSD source tree "
                        f"(no {' and no '.join(lacks)})")
    if not (p / "sys/amd64/conf").is_dir():
        raise TreeError(f"{option} {src}: not a FreeBSD source tree for amd64 "
                        "(no sys/amd64/conf)")


def classify(src: str, patches_dir: Optional[Path] = None) -> str:
    """Say what ``src`` is (a :class:`SrcKind` value); read-only.

    A git tree without the base commit but of the base's release (a releng/15.0
    checkout) is :attr:`SrcKind.OWN_APPLIED` when its HEAD carries the series,
    :attr:`SrcKind.OWN_BASE` when the series applies on its HEAD.
    Raises :class:`TreeError` (one line) when ``src`` is not a FreeBSD tree
    (:func:`check_tree_dir`), when it is a git tree without the base commit
    that is of another release or neither carries nor takes the series
    (naming the commit and the repository ``patches/BASE`` names), or when
    it is not a git tree and lacks the series' files (no work clone can be
    made from it). A folder inside a git tree counts as "not a git tree".
    """
    patches_dir = Path(patches_dir or REPO_PATCHES)
    check_tree_dir(src)
    base = tree_patch.parse_base((Path(patches_dir) / "BASE").read_text())
    files = series_files(patches_dir)
    if not _toplevel(src):
        added = tree_patch.series_added_files(tree_patch.load_series(patches_dir))
        bad = [f for f in files
               if not (Path(src) / f).is_file()
               or (Path(src) / f).read_text(errors="replace") != added[f]]
        if not bad:
            return SrcKind.PLAIN_APPLIED
        raise TreeError(f"--src {src} is not the top of a git clone and lacks the series "
                        f"({bad[0]}): the series can only be applied to a git clone of "
                        f"{base.repository} holding {base.commit[:12]}; clone one, or run "
                        "without --src to fetch it")
    if not _has_commit(src, base.commit):
        return _own_history(src, base, patches_dir)
    head = head_commit(src)
    on_top = head and head != base.commit and _git(
        src, "merge-base", "--is-ancestor", base.commit, head).returncode == 0
    if on_top and all((Path(src) / f).is_file() for f in files):
        return SrcKind.APPLIED
    return SrcKind.BASE


def _other_release(v: Optional[tree_version.TreeVersion], base: tree_patch.Base) -> str:
    """How a tree of version ``v`` (None: it says none) is not of the release
    ``patches/BASE`` names (its ``__FreeBSD_version``'s major), as :func:`classify`
    says it: ``FreeBSD 14.0 (1400507), not of the series' release``; "" when it is."""
    try:
        want = int(base.freebsd_version) // 100000
    except ValueError:
        want = None
    if v is not None and want is not None and v.major == want:
        return ""
    return (f"FreeBSD {v.release} ({v.freebsd_version}), not of the series' release"
            if v else "of no version it says (sys/sys/param.h)")


def check_series_release(src: str, why: str, patches_dir: Optional[Path] = None) -> None:
    """Refuse a ``--src`` that says a release other than the one ``patches/BASE``
    names (:func:`classify`'s release check, for commands that take a tree without
    classifying it: ``rxl learn``, ``rxl kcount setsockopt``, ``rxl guest up`` with
    the series' tests): :class:`TreeError`
    ``--src SRC: the tree is FreeBSD 14.0 (1400507), not of the series' release
    (patches/BASE: __FreeBSD_version 1500068); WHY``. A tree that says no release
    is left to the command's own check (learn requires one; rxl.tree.version)."""
    v = tree_version.version_or_none(src)
    if v is None:
        return
    base = tree_patch.read_base(Path(patches_dir or REPO_PATCHES))
    said = _other_release(v, base)
    if said:
        raise TreeError(f"--src {src}: the tree is {said} (patches/BASE: "
                        f"__FreeBSD_version {base.freebsd_version}); {why}")


def _own_history(src: str, base: tree_patch.Base, patches_dir: Path) -> str:
    """:func:`classify` of a git tree without the base commit: of the base's release
    (``__FreeBSD_version`` major, rxl.tree.version) and carrying the series, or taking
    it on HEAD (rxl.tree.series.series_state); else refused, naming why."""
    fetch = (f"fetch it (git -C {src} fetch {base_url(base.repository)} {base.commit}), "
             "or run without --src to fetch the base")
    v = tree_version.version_or_none(src)
    said = _other_release(v, base)
    if said:
        raise TreeError(f"--src {src} does not have the base commit {base.commit[:12]} "
                        f"(patches/BASE): it is in {base.repository}; the tree is {said}; "
                        f"{fetch}")
    try:
        state, detail = tree_series.series_state(Path(src), tree_patch.patch_files(patches_dir))
    except tree_patch.SeriesError as exc:
        raise TreeError(f"--src {src}: {exc}") from None
    if state == tree_series.SeriesState.APPLIED:
        return SrcKind.OWN_APPLIED
    if state == tree_series.SeriesState.APPLICABLE:
        return SrcKind.OWN_BASE
    raise TreeError(f"--src {src} does not have the base commit {base.commit[:12]} "
                    f"(patches/BASE): it is in {base.repository}; the tree is FreeBSD "
                    f"{v.release} but the series is {detail}; {fetch}")


# ------------------------------------------------------------------ checkout

def _checkout(d: str, commit: str, echo: Callable[[str], None], force: bool = False) -> None:
    """``git checkout -q [-f] --detach <commit>`` in ``d``, tolerating absent blobs."""
    cp = _git(d, "checkout", "-q", *(["-f"] if force else []), "--detach", commit)
    if head_commit(d) != commit or not (Path(d) / MAKE_PY).is_file():
        raise TreeError(f"checkout of {commit[:12]} in {d} failed: {_last(cp)}")
    absent = sum("unable to read sha1 file" in ln for ln in cp.stderr.splitlines())
    if absent:
        echo(f"tree: {absent} files of the snapshot have no blob and are absent in {d}")


def fetch_plan(url: str, commit: str, dest: str) -> List[List[str]]:
    """argv list that fetches ``commit`` of ``url`` into ``dest`` (see module doc). Pure
    apart from looking whether ``url`` is a local directory."""
    if is_local(url):
        return [["git", "clone", "-q", "--shared", "--no-checkout", os.path.abspath(url), dest],
                ["git", "-C", dest, "checkout", "-q", "--detach", commit]]
    return [["git", "init", "-q", dest],
            ["git", "-C", dest, "remote", "add", "origin", url],
            ["git", "-C", dest, "fetch", "-q", "--depth", "1", "origin", commit],
            ["git", "-C", dest, "checkout", "-q", "--detach", commit]]


def fetch_base(url: str, commit: str, dest: str, *, dry_run: bool = False,
               echo: Callable[[str], None] = print) -> Tree:
    """A checkout of ``commit`` at ``dest``, fetched from ``url``; reused when there.

    Raises :class:`TreeError`: ``dest`` exists and is something else; the
    fetch failed (the message names the URL, git's reason, and how to give
    a tree instead: ``make run SRC=DIR`` / ``--src``, or ``RXL_BASE_URL``).
    """
    plan = fetch_plan(url, commit, dest)
    tree = Tree(src=dest, pristine=dest, commands=[shlex.join(a) for a in plan])
    if Path(dest).exists():
        if head_commit(dest) == commit and (Path(dest) / MAKE_PY).is_file():
            tree.commands = []
            tree.how = f"base {commit[:12]} already fetched in {dest}"
            return tree
        raise TreeError(f"{dest} exists but is not a checkout of {commit[:12]}; "
                        "remove it, or give --src")
    tree.how = f"base {commit[:12]} fetched from {url} into {dest}"
    if dry_run:  # the plan is of the release patches/BASE names: say it
        v = tree_version.planned_version(dest)
        if v is not None:
            tree.how += f"; planned as {v.describe()}, cross compiler {v.cross_bindir}"
        return tree
    Path(dest).parent.mkdir(parents=True, exist_ok=True)
    for argv in plan[:-1]:
        echo(f"$ {shlex.join(argv)}")
        try:
            cp = subprocess.run(argv, capture_output=True, text=True,
                                env=dict(os.environ, GIT_TERMINAL_PROMPT="0"))
        except FileNotFoundError:
            raise TreeError("git is not installed (rxl doctor --install)") from None
        if cp.returncode != 0:
            raise TreeError(f"cannot fetch the base {commit[:12]} from {url} ({_last(cp)}); "
                            "if this machine cannot reach it, give a FreeBSD tree: make run "
                            "SRC=DIR (a git clone holding that commit), or set "
                            f"{URL_ENV} to a mirror or a local clone; {dest} is partial, "
                            "remove it")
    echo(f"$ {shlex.join(plan[-1])}")
    _checkout(dest, commit, echo)
    return tree


def work_clone(src: str, dest: str, patches_dir: Optional[Path] = None, *,
               dry_run: bool = False, echo: Callable[[str], None] = print,
               at: Optional[str] = None) -> Tree:
    """``dest``: a clone of ``src`` with the series applied on branch ``rxl`` (at the
    base commit, or at commit ``at``: :attr:`SrcKind.OWN_BASE`).

    ``src`` is only read (``git clone --shared`` borrows its objects). A
    clone whose stamp matches the base and the patches is reused as it is;
    otherwise it is checked out at the base again and the series re-applied.
    Raises :class:`TreeError` when ``dest`` is something other than a clone
    of ``src``, or when a git step or the series fails (naming it).
    """
    patches_dir = Path(patches_dir or REPO_PATCHES)
    base = tree_patch.parse_base((Path(patches_dir) / "BASE").read_text())
    patches = tree_patch.patch_files(patches_dir)
    start = at or base.commit
    want = stamp_text(start, patches)
    stamp = Path(dest) / ".git" / STAMP
    clone = ["git", "clone", "-q", "--shared", "--no-checkout", os.path.abspath(src), dest]
    tree = Tree(src=dest, how=f"series applied in the work clone {dest} (of {src})")
    exists = Path(dest).exists()
    if exists:
        url = _git(dest, "config", "remote.origin.url").stdout.strip()
        if not _toplevel(dest) or os.path.realpath(url or "/nonexistent") != \
                os.path.realpath(src):
            raise TreeError(f"{dest} exists and is not a clone of {src}; remove it")
        if stamp.is_file() and stamp.read_text() == want and \
                _git(dest, "rev-parse", "--abbrev-ref", "HEAD").stdout.strip() == \
                tree_series.DEFAULT_BRANCH:
            tree.how += "; reused (stamp matches)"
            return tree
    tree.commands = ([shlex.join(clone)] if not exists else []) + [
        f"git -C {dest} checkout -q -f --detach {start}",
        f"git -C {dest} branch -q -D {tree_series.DEFAULT_BRANCH}  # if there",
        f"rxl series apply --src {dest}  # git checkout -b rxl {start[:12]} && "
        f"git am {' '.join(p.name for p in patches)}"]
    if dry_run:
        return tree
    if not exists:
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
        echo(f"$ {shlex.join(clone)}")
        cp = subprocess.run(clone, capture_output=True, text=True)
        if cp.returncode != 0:
            raise TreeError(f"git clone --shared {src} {dest} failed: {_last(cp)}")
    if stamp.exists():
        stamp.unlink()
    _checkout(dest, start, echo, force=True)
    _git(dest, "branch", "-q", "-D", tree_series.DEFAULT_BRANCH)
    try:
        tree_series.apply_series(Path(dest), Path(patches_dir), echo=echo, at=at)
    except tree_patch.SeriesError as exc:
        raise TreeError(f"applying the series in {dest}: {exc}") from None
    stamp.write_text(want)
    return tree


@contextlib.contextmanager
def _held(lock: Optional[str], echo: Callable[[str], None]):
    """Hold ``flock(lock)`` (the build lock: no build reads a tree while it changes)."""
    if not lock:
        yield
        return
    Path(lock).parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            echo(f"tree: waiting for the build lock {lock}")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def resolve(src: Optional[str], work: str, *, base_url_override: Optional[str] = None,
            patches_dir: Optional[Path] = None, dry_run: bool = False,
            lock: Optional[str] = None, echo: Callable[[str], None] = print
            ) -> Tuple[Tree, str]:
    """The trees of a run, and the kind of ``src`` (a :class:`SrcKind`, or ``fetched``).

    ``src`` None: the base is fetched into ``<work>/base-<commit[:12]>`` and
    the series applied in ``<work>/src-<commit[:12]>`` (a clone of it).
    Otherwise :func:`classify` decides: used as it is, or a work clone.
    Fetching and applying hold ``lock`` (flock; None: none). Raises
    :class:`TreeError` (one line) before changing anything when ``src``
    cannot serve.
    """
    patches_dir = Path(patches_dir or REPO_PATCHES)
    base = tree_patch.parse_base((Path(patches_dir) / "BASE").read_text())
    work = os.path.abspath(work)
    clone_dir = os.path.join(work, f"src-{base.commit[:12]}")
    if src is None:
        url = base_url(base.repository, base_url_override)
        with _held(None if dry_run else lock, echo):
            fetched = fetch_base(url, base.commit,
                                 os.path.join(work, f"base-{base.commit[:12]}"),
                                 dry_run=dry_run, echo=echo)
            wc = work_clone(fetched.src, clone_dir, patches_dir, dry_run=dry_run, echo=echo)
        return Tree(src=wc.src, pristine=fetched.src, how=f"{fetched.how}; {wc.how}",
                    commands=fetched.commands + wc.commands), "fetched"
    src = os.path.abspath(src)
    kind = classify(src, patches_dir)
    if kind in (SrcKind.APPLIED, SrcKind.PLAIN_APPLIED, SrcKind.OWN_APPLIED):
        return Tree(src=src, how=f"{src}: the series is applied; used as it is"), kind
    if kind == SrcKind.OWN_BASE:
        head = head_commit(src)
        with _held(None if dry_run else lock, echo):
            wc = work_clone(src, os.path.join(work, f"src-{head[:12]}"), patches_dir,
                            dry_run=dry_run, echo=echo, at=head)
        wc.pristine = src
        wc.how = (f"{src} is of the series' release but not on its base commit "
                  f"{base.commit[:12]}: {wc.how}, on its HEAD {head[:12]}; the pristine "
                  "kernel is built from it as it is")
        return wc, kind
    with _held(None if dry_run else lock, echo):
        wc = work_clone(src, clone_dir, patches_dir, dry_run=dry_run, echo=echo)
    return wc, kind
