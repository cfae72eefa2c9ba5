"""Rig kernels: the kernels ``rxl learn`` builds for itself.

QEMU 7.2's e1000e needs a test-rig change to em(4) (``patches/guest/``, not
part of the series) before any connection reaches the guest under MSI-X.
Given no ``--kernel`` / ``--pristine-kernel``, ``rxl learn`` therefore builds
its own kernels, never in the user's ``--src`` tree:

* one checkout, ``<guest-dir>/rig-src``: ``git clone -q --shared
  --no-checkout <src>`` (it borrows ``<src>``'s objects; removing it is
  always safe);
* per variant (``patched``: the commit at ``<src>``'s HEAD; ``pristine``:
  the commit in ``patches/BASE``): ``git checkout -q -f --detach <commit>``,
  ``git apply`` of every ``patches/guest/*.patch`` in name order, the
  kernel build (:func:`rxl.tree.build.build_kernel` in
  ``<guest-dir>/obj-rig-src``: kernel-toolchain once, then an incremental
  buildkernel, so the second variant recompiles only what differs), a copy
  of the kernel to the cache, ``git checkout -q -f`` to drop the patches;
* the cache: ``<guest-dir>/kernels/<variant>-<commit[:12]>-<tag>/kernel``
  with ``<tag>`` = ``rig`` + the first 8 hex digits of the sha256 of the
  guest patches' bytes, concatenated in name order (:func:`rig_tag`); a
  kernel already there is reused.

The snapshot trees lack the blobs of a few large files, so git's checkout
exits non-zero after writing everything else; a checkout is accepted when
HEAD is the commit and ``tools/build/make.py`` is there (as
:func:`rxl.verify.kernels.pristine_checkout` does), and the dropping of the patches
when the files they touch equal HEAD again.

The planning (:func:`plan_rig`, :func:`rig_tag`, :func:`kernel_cache_path`)
is pure and needs no FreeBSD tree; :func:`tree_commits` asks git read-only
questions; :func:`run_rig` carries a plan out, each step in ``<guest-dir>/rig-src``
(a shared clone of ``--src``, never ``--src`` itself) logged under ``out``, and
:func:`rig_is_clone` says whether an existing rig directory is a clone of the
tree.  Errors: :class:`RigError`, one line.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from rxl.errors import SourceError, reason
from rxl.tree import build as tree_build
from rxl.tree import patch as tree_patch
from rxl.tree import series as tree_series

#: Test-rig patches applied to the rig checkout only (not the series).
GUEST_PATCHES = Path(__file__).resolve().parents[3] / "patches" / "guest"
#: The series' base file (``commit: <40 hex>``).
BASE_FILE = Path(__file__).resolve().parents[3] / "patches" / "BASE"
#: Kernel variants, in build order.
VARIANTS: Tuple[str, ...] = ("patched", "pristine")
#: Names under ``--guest-dir``.
RIG_SRC = "rig-src"
RIG_OBJDIR = "obj-rig-src"
KERNELS = "kernels"

_HEX = re.compile(r"[0-9a-f]{12,40}")


class RigError(SourceError):
    """A one-line, user-facing error (dirty tree, git failure, bad patch)."""


class RigInput(RigError):
    """A tree or directory given that no rig can be built from as it is (not a
    git tree, uncommitted changes under ``sys/``, no base commit, a rig
    directory that is no clone of it): bad input, found before anything is
    built, so exit 2 where it reaches the command line."""

    exit_code = 2


# ------------------------------------------------------------------ pure

@dataclass(frozen=True)
class GuestPatch:
    """One test-rig patch: its file name, its bytes and the paths it touches."""

    name: str
    path: str
    data: bytes
    touches: Tuple[str, ...]


def read_guest_patches(directory: Path = GUEST_PATCHES) -> List[GuestPatch]:
    """Every ``*.patch`` of ``directory`` (not recursive), in name order.

    A missing directory gives ``[]``. Raises :class:`RigError` when a patch
    does not parse (rxl.tree.series.parse_patch) or touches no file.
    """
    out = []
    for p in sorted(Path(directory).glob("*.patch")):
        try:
            tree_patch.check_regular(p, "a patch file")  # a FIFO would block the read for ever
        except tree_patch.SeriesError as exc:
            raise RigError(f"guest patch {exc}") from None
        data = p.read_bytes()
        try:
            parsed = tree_patch.parse_patch(data.decode("utf-8", errors="replace"), p.name)
        except tree_patch.SeriesError as exc:
            raise RigError(f"guest patch {p}: {exc}") from None
        if not parsed.files:
            raise RigError(f"guest patch {p}: no diff in it")
        out.append(GuestPatch(p.name, str(p), data, tuple(f.path for f in parsed.files)))
    return out


def rig_tag(patches: Sequence[bytes]) -> str:
    """``"rig"`` + sha256 of the patches' bytes, concatenated in order, first 8 hex digits.

    E.g. ``rig1a2b3c4d``; no patches give the hash of ``b""``. Any change to
    any byte of a patch changes the tag, hence the cache path.
    """
    return "rig" + hashlib.sha256(b"".join(patches)).hexdigest()[:8]


def kernel_cache_path(guest_dir: str, variant: str, commit: str,
                      patches: Sequence[bytes]) -> Path:
    """``<guest_dir>/kernels/<variant>-<commit[:12]>-<rig_tag(patches)>/kernel``.

    ``commit``: 12 to 40 lowercase hex digits. Raises ValueError for an
    unknown variant or a commit that is not hex.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown rig kernel variant {variant!r} (one of {', '.join(VARIANTS)})")
    if not _HEX.fullmatch(commit):
        raise ValueError(f"commit {commit!r}: expected 12-40 lowercase hex digits")
    return (Path(os.path.abspath(guest_dir)) / KERNELS /
            f"{variant}-{commit[:12]}-{rig_tag(patches)}" / "kernel")


@dataclass(frozen=True)
class Step:
    """One external command of a rig build.

    ``kind``: ``clone``, ``checkout`` (to the variant's commit), ``apply``
    (one guest patch), ``make`` (one make.py stage; all of a variant's run
    as one :func:`rxl.tree.build.build_kernel`), ``mkdir``, ``copy``, ``rename``
    (the kernel into the cache), ``drop`` (``git checkout -q -f``).
    ``variant`` is ``""`` for the clone.
    """

    kind: str
    variant: str
    argv: Tuple[str, ...]

    def shell(self) -> str:
        """The argv as one copy-pasteable shell line."""
        return shlex.join(self.argv)


@dataclass(frozen=True)
class RigKernel:
    """A rig kernel: variant, its commit (40 hex), cache path, whether it is cached."""

    variant: str
    commit: str
    path: Path
    cached: bool


@dataclass
class RigPlan:
    """What :func:`run_rig` does: the checkout, objdir, kernels and steps, in order."""

    rig_src: Path
    objdir: Path
    kernels: Dict[str, RigKernel]
    patches: Tuple[GuestPatch, ...]
    steps: List[Step] = field(default_factory=list)

    def lines(self) -> List[str]:
        """The plan for ``--dry-run``: a comment per kernel, then every command."""
        out = [f"# rig kernel {k.variant}: {k.commit[:12]} + "
               f"{', '.join(p.name for p in self.patches) or 'no guest patches'} -> {k.path}"
               + (" (cached)" if k.cached else "")
               for k in self.kernels.values()]
        cur = None
        for s in self.steps:
            if s.variant and s.variant != cur:
                cur = s.variant
                out.append(f"# build {cur} in {self.rig_src} (objdir {self.objdir}; "
                           f"writes {tree_build.kernconf_path(self.rig_src)})")
            out.append(s.shell())
        return out


def plan_rig(src: str, guest_dir: str, commits: Mapping[str, str],
             patches: Sequence[GuestPatch], *, rig_exists: bool = False,
             toolchain_done: bool = False,
             cached: Callable[[Path], bool] = lambda p: False,
             lock: Optional[str] = tree_build.DEFAULT_LOCK,
             jobs: int = tree_build.DEFAULT_JOBS) -> RigPlan:
    """Plan the rig kernels for ``commits`` (variant -> 40-hex commit).

    ``rig_exists``: ``<guest_dir>/rig-src`` is already a clone (no clone
    step); ``toolchain_done``: the rig objdir has its kernel-toolchain (else
    the first built variant's make lines start with it); ``cached(path)``:
    whether a kernel is already at its cache path (then no steps for it).
    Paths are made absolute. Raises ValueError for an unknown variant or a
    bad commit (as :func:`kernel_cache_path`).
    """
    gd = Path(os.path.abspath(guest_dir))
    rig, objdir = gd / RIG_SRC, gd / RIG_OBJDIR
    data = [p.data for p in patches]
    kernels: Dict[str, RigKernel] = {}
    for v in VARIANTS:
        if v in commits:
            path = kernel_cache_path(str(gd), v, commits[v], data)
            kernels[v] = RigKernel(v, commits[v], path, bool(cached(path)))
    unknown = set(commits) - set(VARIANTS)
    if unknown:
        raise ValueError(f"unknown rig kernel variant {sorted(unknown)[0]!r}")
    plan = RigPlan(rig, objdir, kernels, tuple(patches))
    todo = [k for k in kernels.values() if not k.cached]
    if not todo:
        return plan
    git = ("git", "-C", str(rig))
    if not rig_exists:
        plan.steps.append(Step("clone", "", ("git", "clone", "-q", "--shared", "--no-checkout",
                                             os.path.abspath(src), str(rig))))
    built = tree_build.kernel_path(rig, objdir)
    tc = not toolchain_done
    for k in todo:
        v = k.variant
        plan.steps.append(Step("checkout", v, git + ("checkout", "-q", "-f", "--detach",
                                                     k.commit)))
        for p in patches:
            plan.steps.append(Step("apply", v, git + ("apply", p.path)))
        for st in tree_build.plan_stages(rig, objdir, toolchain=tc, jobs=jobs, lock=lock):
            plan.steps.append(Step("make", v, st.argv))
        tc = False
        tmp = str(k.path) + ".tmp"
        plan.steps += [Step("mkdir", v, ("mkdir", "-p", str(k.path.parent))),
                       Step("copy", v, ("cp", str(built), tmp)),
                       Step("rename", v, ("mv", "-f", tmp, str(k.path))),
                       Step("drop", v, git + ("checkout", "-q", "-f"))]
    return plan


# ------------------------------------------------------------------ git (read-only)

def git_in(src: str, *args: str) -> subprocess.CompletedProcess:
    """``git -C src ARGS``, output captured; raises RigError if git is missing."""
    try:
        return subprocess.run(["git", "-C", src, *args], capture_output=True, text=True)
    except FileNotFoundError:
        raise RigError("git is not installed") from None


def base_commit(base_file: Path = BASE_FILE) -> str:
    """The 40-hex commit of ``patches/BASE``. Raises :class:`RigError` when absent or bad."""
    try:
        return tree_patch.parse_base(Path(base_file).read_text()).commit
    except OSError as exc:
        raise RigError(f"{base_file}: {exc.strerror}; pass --pristine-kernel") from None
    except tree_patch.SeriesError as exc:
        raise RigError(f"{base_file}: {exc}") from None


def dirty_sys(src: str) -> List[str]:
    """Tracked paths under ``sys/`` of ``src`` with uncommitted changes.

    Untracked files (e.g. the RXL kernconf) do not count, nor do files
    deleted only because the snapshot lacks their blobs.
    """
    cp = git_in(src, "status", "--porcelain", "--untracked-files=no", "--", "sys")
    if cp.returncode != 0:
        raise RigError(f"git status failed in {src}: "
                       f"{(cp.stderr.strip().splitlines() or ['?'])[-1]}")
    entries = [(ln[:2], ln[3:]) for ln in cp.stdout.splitlines() if ln.strip()]
    if any(st.strip() == "D" for st, _ in entries):
        absent = set(tree_series.missing_blob_paths(Path(src)))
        entries = [(st, p) for st, p in entries if not (st.strip() == "D" and p in absent)]
    return [p for _, p in entries]


def tree_commits(src: str, variants: Sequence[str], base_file: Path = BASE_FILE
                 ) -> Dict[str, str]:
    """variant -> 40-hex commit: ``patched`` is ``src``'s HEAD, ``pristine`` patches/BASE.

    Only read-only git queries. Raises :class:`RigInput` (one line) when
    ``src`` is not the top of a git work tree with a HEAD, when ``patched`` is wanted and ``src`` has
    uncommitted changes under ``sys/``, or when the base commit is not in
    ``src``'s repository.
    """
    out: Dict[str, str] = {}
    head = git_in(src, "rev-parse", "--verify", "--quiet", "HEAD")
    top = git_in(src, "rev-parse", "--show-toplevel").stdout.strip()
    if head.returncode != 0 or not head.stdout.strip() or \
            os.path.realpath(top or "/nonexistent") != os.path.realpath(src):
        raise RigInput(f"{src} is not a git tree, so no rig kernel can be built from it; "
                       "pass --kernel and --pristine-kernel")
    if "patched" in variants:
        dirty = dirty_sys(src)
        if dirty:
            raise RigInput(f"{src} has uncommitted changes under sys/ ({len(dirty)}, e.g. "
                           f"{dirty[0]}); commit them, or pass --kernel")
        out["patched"] = head.stdout.strip()
    if "pristine" in variants:
        base = base_commit(base_file)
        if git_in(src, "cat-file", "-e", f"{base}^{{commit}}").returncode != 0:
            raise RigInput(f"{src} does not have the base commit {base[:12]} "
                           "(patches/BASE); pass --pristine-kernel")
        out["pristine"] = base
    return out


# ------------------------------------------------------------------ run


def rig_is_clone(rig: Path, src: str) -> bool:
    """True if ``rig`` is a previous run's clone of ``src``; False if it does not exist.

    Raises :class:`RigInput` when ``rig`` exists and is anything else (another
    tree, or a clone of another source: its commits may not be visible).
    """
    if not rig.exists():
        return False
    top = git_in(str(rig), "rev-parse", "--show-toplevel")
    url = git_in(str(rig), "config", "remote.origin.url").stdout.strip()
    if top.returncode != 0 or os.path.realpath(top.stdout.strip()) != os.path.realpath(rig):
        raise RigInput(f"{rig} exists and is not a git clone; remove it")
    if not url or os.path.realpath(url) != os.path.realpath(src):
        raise RigInput(f"{rig} is a clone of {url or 'nothing'}, not of {src}; remove it "
                       "(or give another --guest-dir)")
    return True


def _last(cp: subprocess.CompletedProcess) -> str:
    lines = (cp.stderr.strip() or cp.stdout.strip()).splitlines()
    return lines[-1] if lines else f"exit {cp.returncode}"


def run_rig(plan: RigPlan, *, out: str,
            echo: Callable[[str], None] = lambda s: print(s, flush=True)) -> Dict[str, dict]:
    """Carry out ``plan``; return variant -> ``{"kernel", "cached", "seconds", "stages"}``.

    ``seconds``: wall time of the variant's steps; ``stages``: per make
    stage ``{"name", "seconds", "wait_seconds"}``. Build logs go to
    ``<out>/build-<variant>/``. Raises :class:`RigError` (one line) when a
    step fails; the rig checkout's patches are dropped even then.
    """
    res: Dict[str, dict] = {v: {"kernel": str(k.path), "cached": True, "seconds": 0.0,
                                "stages": []}
                            for v, k in plan.kernels.items()}
    rig = str(plan.rig_src)
    touched = sorted({t for p in plan.patches for t in p.touches})

    def run(step: Step) -> subprocess.CompletedProcess:
        echo(f"$ {step.shell()}")
        try:
            return subprocess.run(step.argv, capture_output=True, text=True)
        except FileNotFoundError as exc:
            raise RigError(f"{step.argv[0]}: {exc.strerror}") from None

    def drop(step: Step) -> None:
        cp = run(step)
        left = git_in(rig, "status", "--porcelain", "--untracked-files=no", "--", *touched) \
            if touched else None
        if left is not None and (left.returncode != 0 or left.stdout.strip()):
            raise RigError(f"rig: could not drop the guest patches in {rig} ({_last(cp)}); "
                           f"remove {rig} and run again")

    pending_drop: Optional[Step] = None
    t0: Dict[str, float] = {}
    built_variants = set()
    try:
        for step in plan.steps:
            v = step.variant
            if v and v not in t0:
                t0[v] = time.monotonic()
                res[v]["cached"] = False
                pending_drop = Step("drop", v, ("git", "-C", rig, "checkout", "-q", "-f"))
            if step.kind == "clone":
                if plan.rig_src.exists():
                    raise RigError(f"{plan.rig_src} exists but is not a git clone; remove it")
                plan.rig_src.parent.mkdir(parents=True, exist_ok=True)
                cp = run(step)
                if cp.returncode != 0:
                    raise RigError(f"rig: git clone --shared failed: {_last(cp)}")
            elif step.kind == "checkout":
                cp = run(step)
                commit = step.argv[-1]
                head = git_in(rig, "rev-parse", "HEAD").stdout.strip()
                if head != commit or not (plan.rig_src / "tools/build/make.py").is_file():
                    raise RigError(f"rig: checkout of {commit[:12]} in {rig} failed: {_last(cp)}")
                absent = sum("unable to read sha1 file" in ln for ln in cp.stderr.splitlines())
                if absent:
                    echo(f"   ({absent} files of the snapshot have no blob and are absent)")
            elif step.kind == "apply":
                cp = run(step)
                if cp.returncode != 0:
                    raise RigError(f"rig: {step.shell()} failed at {v}'s commit: {_last(cp)}")
            elif step.kind == "make":
                if v in built_variants:
                    continue
                built_variants.add(v)
                for other in plan.steps:
                    if other.kind == "make" and other.variant == v:
                        echo(f"$ {other.shell()}")
                try:
                    stages = tree_build.build_kernel(plan.rig_src, plan.objdir,
                                                    logdir=str(Path(out) / f"build-{v}"),
                                                    echo=echo)
                except (tree_build.BuildError, FileNotFoundError) as exc:
                    raise RigError(f"rig: {v}: {reason(exc)}") from None
                res[v]["stages"] = [{"name": s.name, "seconds": round(s.seconds),
                                     "wait_seconds": s.extra.get("wait_seconds"),
                                     "log": str(s.log)} for s in stages]
            elif step.kind in ("mkdir", "copy", "rename"):
                cp = run(step)
                if cp.returncode != 0:
                    raise RigError(f"rig: {step.shell()} failed: {_last(cp)}")
            elif step.kind == "drop":
                drop(step)
                pending_drop = None
                res[v]["seconds"] = round(time.monotonic() - t0[v])
            else:  # pragma: no cover - plan_rig makes no other kind
                raise RigError(f"rig: unknown step kind {step.kind!r}")
    finally:
        if pending_drop is not None and plan.rig_src.is_dir():
            try:
                drop(pending_drop)
            except RigError as exc:
                echo(str(exc))
    return res
