"""The processes below this one, for stopping them when a command is
interrupted (^C, SIGTERM): the boots' QEMUs, a build's make and compilers.

Read from Linux's ``/proc`` (each ``/proc/PID/stat``'s fourth field, the
parent); where there is no ``/proc`` nothing is found.  A process that ends
while the table is read is left out.
"""

from __future__ import annotations

import os
import signal
from typing import Dict, Iterable, List


def _children_of() -> Dict[int, List[int]]:
    """parent pid -> its children's pids, from ``/proc`` ({} without it)."""
    kids: Dict[int, List[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return kids
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                # The command name, in parentheses, may hold spaces: split after it.
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(name))
    return kids


def children(pid: int) -> List[int]:
    """The pids of ``pid``'s children ([] without ``/proc``)."""
    return _children_of().get(pid, [])


def descendants(root: int) -> List[int]:
    """The pids of every process below ``root`` ([] without ``/proc``),
    children before their own children."""
    kids = _children_of()
    out: List[int] = []
    todo = [root]
    while todo:
        for pid in kids.get(todo.pop(0), ()):
            if pid not in out:
                out.append(pid)
                todo.append(pid)
    return out


def terminate(pids: Iterable[int]) -> None:
    """SIGTERM each of ``pids``; one that is already gone is skipped."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
