"""How long a stage took last time, and a progress bar while it runs.

Every long stage of ``rxl run`` (and the make.py stages inside it) says
before it starts how long it is expected to take and, when it ends, how
long it took. The expectation is the last run's time on this machine,
kept in ``$RXL_WORK/timings.json`` (:func:`timings_path`); with no earlier
run it is the figure measured on the 2-core build host
(:data:`MEASURED`, from docs/results/guest-boot.md). A make.py stage also
counts its ``--- target ---`` lines; the last run's count is the total of a
``rich`` progress bar.

``timings.json``: ``{"<key>": {"seconds": float, "targets": int|null,
"when": "YYYY-mm-ddTHH:MM:SSZ"}}``; keys are stage names
(``build``, ``world``, ``boot`` ...) and make.py stage names
(``world-includes``, ``world-build``); a kernel build's stages are keyed
per objdir, ``<stage>@<objdir>`` (``buildkernel-RXL@/work/obj``), so the
patched and the pristine kernel each have their own last time. The part
before ``@`` is what the messages name and what :data:`MEASURED` is keyed by. A file that cannot be read or parsed is treated as empty
(timings are advice, never a reason to fail).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Callable, Dict, Optional

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rxl import paths

#: Cold timings on the 2-core build host (docs/results/guest-boot.md,
#: "Measured"): kernel-toolchain 251 s, buildkernel RXL 494 s, userland
#: 19 s + 305 s, boot stage of three boots 327 s.
MEASURED: Dict[str, float] = {
    "kernel-toolchain": 251.0,
    "buildkernel-RXL": 494.0,
    "world-includes": 19.0,
    "world-build": 305.0,
    "boot": 327.0,
}


def timings_path() -> Path:
    """``$RXL_WORK/timings.json`` (rxl.paths.work_root at call time)."""
    return paths.work_root() / "timings.json"


def load(path: Optional[Path] = None) -> Dict[str, dict]:
    """The recorded timings; ``{}`` when the file is absent or unreadable."""
    p = timings_path() if path is None else Path(path)
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)
            and isinstance(v.get("seconds"), (int, float)) and math.isfinite(v["seconds"])
            and v["seconds"] >= 0}


def record(key: str, seconds: float, targets: Optional[int] = None,
           path: Optional[Path] = None) -> None:
    """Store one stage's time (and target count); silently skips an unwritable file."""
    p = timings_path() if path is None else Path(path)
    data = load(p)
    data[key] = {"seconds": round(float(seconds), 1), "targets": targets,
                 "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, p)
    except OSError:
        pass


def duration(seconds: float) -> str:
    """``42 s``, ``4 min 11 s``, ``1 h 02 min``."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {(s % 3600) // 60:02d} min"


def expectation(key: str, timings: Optional[Dict[str, dict]] = None) -> str:
    """What to say before a stage: ``expected 4 min 11 s (last run here)``,
    ``expected about 4 min 11 s (measured on a 2-core host)``, or ``""``."""
    t = load() if timings is None else timings
    if key in t:
        return f"expected {duration(t[key]['seconds'])} (last run here)"
    name = stage_name(key)
    if name in MEASURED:
        return f"expected about {duration(MEASURED[name])} cold (measured on a 2-core host)"
    return ""


def stage_name(key: str) -> str:
    """The stage a timings key is of: ``buildkernel-RXL@/work/obj`` -> ``buildkernel-RXL``."""
    return key.split("@", 1)[0]


def last_targets(key: str, timings: Optional[Dict[str, dict]] = None) -> Optional[int]:
    """The last run's ``--- target ---`` count of a make.py stage, or None."""
    t = load() if timings is None else timings
    n = t.get(key, {}).get("targets")
    return n if isinstance(n, int) and n > 0 else None


class StageBar:
    """A progress bar of one make.py stage (``rich``), total from the last run.

    ``advance()`` once per ``--- target ---`` line; ``close()`` records the
    stage's time and count. Without a terminal on stderr, or without a
    total, no bar is drawn: only the start and end lines (via ``echo``).
    """

    def __init__(self, key: str, echo: Callable[[str], None] = print,
                 timings: Optional[Dict[str, dict]] = None, path: Optional[Path] = None,
                 live: Optional[bool] = None):
        self.key, self.echo, self.path = key, echo, path
        self.name = stage_name(key)
        self.t0 = time.monotonic()
        self.count = 0
        t = load(path) if timings is None else timings
        self.total = last_targets(key, t)
        exp = expectation(key, t)
        echo(f"{self.name}: started" + (f", {exp}" if exp else ""))
        self._progress = None
        live = sys.stderr.isatty() if live is None else live
        if live and self.total:
            self._progress = Progress(TextColumn(self.name), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), console=Console(stderr=True),
                                      transient=True)
            self._progress.start()
            self._task = self._progress.add_task(self.name, total=self.total)

    def advance(self, n: int = 1) -> None:
        self.count += n
        if self._progress is not None:
            self._progress.update(self._task, completed=min(self.count, self.total or 0))

    def close(self, ok: bool = True) -> float:
        """Stop the bar; record the time when ``ok``; return the seconds."""
        dt = time.monotonic() - self.t0
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        if ok:
            record(self.key, dt, self.count or None, self.path)
        self.echo(f"{self.name}: {'done' if ok else 'failed'} in {duration(dt)}")
        return dt
