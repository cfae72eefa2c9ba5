"""Where the slow tiers keep their work: one root, one place to change it.

Object trees, logs, guest roots and the build lock live under
``$RXL_WORK``, default ``$XDG_CACHE_HOME/rxl`` (``~/.cache/rxl``): a kernel
object tree is a few GiB, so it belongs in a cache, never in the
checkout.  The results recorded in docs/results/ were made with
``RXL_WORK=/work``.
"""

from __future__ import annotations

import os
from pathlib import Path


def work_root() -> Path:
    """``$RXL_WORK``, else ``$XDG_CACHE_HOME/rxl``, else ``~/.cache/rxl``."""
    env = os.environ.get("RXL_WORK")
    if env:
        return Path(env)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache")
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
