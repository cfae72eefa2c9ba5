"""The own guest's boots, N at a time (``rxl run --boot-jobs N``).

A run boots up to four guests one after another: patched, spread, pristine
and, with ``--modules``, MINIMAL. Under TCG a guest keeps mostly one vCPU
busy (the cases run one at a time; measured, docs/results/run-15.md), so on a
host with C cores about C guests overlap without slowing each other much.
:func:`default_jobs` is therefore ``os.cpu_count()`` (1 when it is unknown);
``--boot-jobs 1`` is the order and the one-at-a-time run of before.

Each boot keeps everything of its own (the boot stage sets it up before any
starts): its staged root, serial and console logs named by its label, its SSH
port (:func:`distinct_ports`), QEMU's snapshot overlay of its root (QEMU's
own temporary file). The verdict does not depend on the order the boots end
in: the boot stage puts its results back in the boots' order
(:func:`in_order`) before anything reads them.

:func:`order` says which boots start first, :func:`run_jobs` runs them, and
:func:`describe` is the line a dry run prints.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from rxl.cli import processes

#: The most boots a run starts at once (a run has at most four).
MAX_JOBS = 16


def default_jobs(cpu_count: Callable[[], Optional[int]] = os.cpu_count) -> int:
    """``--boot-jobs``' default: one boot per host CPU, ``os.cpu_count()`` (TCG: one busy
    vCPU per guest, docs/results/run-15.md), at most :data:`MAX_JOBS`; 1 when it is
    unknown."""
    n = cpu_count()
    return max(1, min(MAX_JOBS, n)) if isinstance(n, int) and n > 0 else 1


def order(labels: Sequence[str], jobs: int, runs_cases: Callable[[str], bool]) -> List[str]:
    """The order the boots start in. ``jobs`` 1: ``labels`` as given (today's order).
    Otherwise the boots that run cases (``runs_cases``: minutes each under TCG) first,
    each group in the given order, so the short ones fill in beside the long ones. Pure."""
    if jobs <= 1:
        return list(labels)
    return [lb for lb in labels if runs_cases(lb)] + [lb for lb in labels
                                                       if not runs_cases(lb)]


def describe(started: Sequence[str], jobs: int, source: str) -> str:
    """The dry run's comment line of the schedule (``source``: where ``jobs`` came from)."""
    if jobs <= 1 or len(started) <= 1:
        return (f"# boots: one at a time (--boot-jobs {jobs}{source}): "
                + ", ".join(started))
    first, rest = started[:jobs], started[jobs:]
    return (f"# boots: {jobs} at a time (--boot-jobs {jobs}{source}), each with its own root, "
            f"logs and SSH port: {' + '.join(first)} start together"
            + (f"; then {', '.join(rest)}, each as one ends" if rest else ""))


def distinct_ports(labels: Iterable[str], free_port: Callable[[], int],
                   tries: int = 100) -> Dict[str, int]:
    """One free loopback port per label, no two the same (``free_port`` may give a
    port again once it is released). Raises RuntimeError when ``tries`` calls give
    no new port."""
    out: Dict[str, int] = {}
    for label in labels:
        for _ in range(tries):
            p = free_port()
            if p not in out.values():
                out[label] = p
                break
        else:
            raise RuntimeError(f"no free port for boot {label} distinct from "
                               f"{sorted(out.values())}")
    return out


def in_order(d: Mapping[str, Any], labels: Sequence[str]) -> Dict[str, Any]:
    """``d`` with the keys of ``labels`` first, in that order, then the rest as they were."""
    out = {k: d[k] for k in labels if k in d}
    out.update((k, v) for k, v in d.items() if k not in out)
    return out


class Outcome:
    """What one job did: ``value`` when it returned, ``error`` when it raised."""

    def __init__(self, value: Any = None, error: Optional[BaseException] = None,
                 seconds: float = 0.0):
        self.value, self.error, self.seconds = value, error, seconds


def locked_echo(echo: Callable[[str], None]) -> Callable[[str], None]:
    """``echo`` one whole line at a time from any thread."""
    lock = threading.Lock()

    def out(line: str) -> None:
        with lock:
            echo(line)
    return out


def stop_children() -> None:
    """SIGTERM every child process of this one (the QEMUs the boots started): on an
    interrupt, so each boot's thread sees its guest gone and cleans up."""
    processes.terminate(processes.children(os.getpid()))


def run_jobs(jobs: Sequence[Tuple[str, Callable[[], Any]]], n: int,
             clock: Callable[[], float] = time.monotonic,
             on_interrupt: Callable[[], None] = stop_children) -> Dict[str, Outcome]:
    """Run every ``(label, job)``, at most ``n`` at once, starting them in the given order;
    returns label -> :class:`Outcome`, in the given order. Every job runs to its end
    whatever the others do (a failed boot does not stop the rest, as before). ``n`` 1
    runs them one after another in this thread. An interrupt (Ctrl-C) calls
    ``on_interrupt`` (stop the guests), waits for the jobs and raises it again."""
    def timed(job: Callable[[], Any]) -> Outcome:
        t0 = clock()
        try:
            return Outcome(value=job(), seconds=clock() - t0)
        except Exception as exc:  # handed back to the stage, which decides
            return Outcome(error=exc, seconds=clock() - t0)

    if n <= 1:
        return {label: timed(job) for label, job in jobs}
    pool = ThreadPoolExecutor(max_workers=min(n, max(1, len(jobs))),
                              thread_name_prefix="rxl-boot")
    futures = {label: pool.submit(timed, job) for label, job in jobs}
    try:
        wait(list(futures.values()))
    except BaseException:
        on_interrupt()
        for f in futures.values():
            f.cancel()
        pool.shutdown(wait=True)
        raise
    pool.shutdown(wait=True)
    return {label: f.result() for label, f in futures.items()}
