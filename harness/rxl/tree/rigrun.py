"""Carrying out a rig plan (:class:`rxl.tree.rig.RigPlan`): clone, check out, build, cache.

:func:`run_rig` runs each step of the plan in ``<guest-dir>/rig-src`` (a
shared clone of ``--src``, never ``--src`` itself), logging each under
``out``, and drops the guest patches again after each build;
:func:`rig_is_clone` says whether an existing rig directory is a clone of
the tree.  Errors: :class:`rxl.tree.rig.RigError`, one line.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Callable, Dict, Optional

from rxl.tree import build as build_mod
from rxl.tree.rig import RigError, RigPlan, Step, git_in


def rig_is_clone(rig: Path, src: str) -> bool:
    """True if ``rig`` is a previous run's clone of ``src``; False if it does not exist.

    Raises :class:`RigError` when ``rig`` exists and is anything else (another
    tree, or a clone of another source: its commits may not be visible).
    """
    if not rig.exists():
        return False
    top = git_in(str(rig), "rev-parse", "--show-toplevel")
    url = git_in(str(rig), "config", "remote.origin.url").stdout.strip()
    if top.returncode != 0 or os.path.realpath(top.stdout.strip()) != os.path.realpath(rig):
        raise RigError(f"{rig} exists and is not a git clone; remove it")
    if not url or os.path.realpath(url) != os.path.realpath(src):
        raise RigError(f"{rig} is a clone of {url or 'nothing'}, not of {src}; remove it "
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
                    stages = build_mod.build_kernel(plan.rig_src, plan.objdir,
                                                    logdir=str(Path(out) / f"build-{v}"),
                                                    echo=echo)
                except (build_mod.BuildError, FileNotFoundError) as exc:
                    raise RigError(f"rig: {v}: {exc}") from None
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
