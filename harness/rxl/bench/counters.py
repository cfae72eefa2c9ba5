"""The kernel's own counters, read as text at two moments, and their deltas. Pure.

``acceptd -q`` snapshots what Linux gives, unchanged, before and after a
phase (rxl.bench.wakeups says which phases); this module turns a pair of
snapshots into per-CPU and per-process differences:

* ``/proc/interrupts``: one row per interrupt source, one column per
  online CPU.  ``RES`` is the rescheduling IPI, ``CAL`` the function-call
  IPI (TLB shootdowns included, ``TLB`` counts those alone), ``LOC`` the
  local timer (arch/x86/kernel/irq.c, ``arch_show_interrupts``).  The
  per-CPU counts are ``unsigned int`` printed with ``%10u``, so a counter
  wraps at 2**32 (:data:`IRQ_COUNTER_BITS`).
* the ``cpuN`` lines of ``/proc/stat``: time per CPU in USER_HZ ticks, in
  the order of :data:`STAT_FIELDS` (proc(5)).
* per process, the ``voluntary_ctxt_switches`` / ``nonvoluntary_ctxt_switches``
  lines of ``/proc/<pid>/status`` and ``/proc/<pid>/schedstat`` (run time
  ns, run-queue wait ns, timeslices), as acceptd writes them: the status
  lines, then ``schedstat: <the file's line>``.


The guest's counterpart, FreeBSD's hw.intrnames / hw.intrcnt pair, is
:mod:`rxl.learn.intrcnt`: ``rxl learn --requests`` reads it, and learn sits
below bench in the package order (docs/design.md, "Harness").

Every parser raises :class:`CounterError` (one line) on text it does not
recognise, and every delta refuses a pair that does not belong together
(other CPUs, a counter that went back) rather than guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Tuple

from rxl.errors import DataError

#: Width of a /proc/interrupts per-CPU count (``unsigned int``).
IRQ_COUNTER_BITS = 32
#: /proc/stat's per-CPU fields, in order (proc(5), "cpu").
STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq",
               "steal")


class CounterError(DataError):
    """A counter snapshot that cannot be read, or a pair that does not fit."""


# ------------------------------------------------------------ interrupts


@dataclass(frozen=True)
class Interrupts:
    """One /proc/interrupts: ``cpus`` the column CPU ids (``CPU0 CPU1``
    header), ``rows`` a row's name (``RES``, ``CAL``, ``24``) -> one count
    per column.  Rows with fewer counts than columns (``ERR``, ``MIS``:
    one system-wide count) are not kept."""

    cpus: Tuple[int, ...]
    rows: Dict[str, Tuple[int, ...]]

    def row(self, name: str) -> Dict[int, int]:
        """{cpu: count} of row ``name``; CounterError when absent."""
        if name not in self.rows:
            raise CounterError(f"/proc/interrupts has no {name} row")
        return dict(zip(self.cpus, self.rows[name]))


def parse_interrupts(text: str) -> Interrupts:
    """Parse /proc/interrupts.  Raises CounterError without a CPU header."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise CounterError("/proc/interrupts snapshot is empty")
    head = lines[0].split()
    if not head or not all(re.fullmatch(r"CPU\d+", h) for h in head):
        raise CounterError(f"/proc/interrupts header is not CPU columns: "
                           f"{lines[0].strip()[:60]!r}")
    cpus = tuple(int(h[3:]) for h in head)
    if len(set(cpus)) != len(cpus):
        raise CounterError("/proc/interrupts names a CPU column twice")
    rows: Dict[str, Tuple[int, ...]] = {}
    for ln in lines[1:]:
        name, sep, rest = ln.partition(":")
        name = name.strip()
        if not sep or not name:
            raise CounterError(f"/proc/interrupts line without a name: "
                               f"{ln.strip()[:60]!r}")
        words = rest.split()
        counts = []
        for w in words[:len(cpus)]:
            if not w.isdigit():
                break
            counts.append(int(w))
        if len(counts) == len(cpus):
            if name in rows:
                raise CounterError(f"/proc/interrupts has two {name} rows")
            rows[name] = tuple(counts)
    return Interrupts(cpus, rows)


def irq_delta(before: Interrupts, after: Interrupts, name: str) \
        -> Dict[int, int]:
    """{cpu: after - before} of row ``name``, modulo 2**IRQ_COUNTER_BITS
    (a count that passed 2**32 - 1 wrapped).  Raises CounterError when the
    two have other CPU columns (a CPU went on- or offline) or lack the row."""
    if before.cpus != after.cpus:
        raise CounterError(f"/proc/interrupts CPU columns changed between "
                           f"snapshots: {list(before.cpus)} -> "
                           f"{list(after.cpus)}")
    a, b = before.row(name), after.row(name)
    mod = 1 << IRQ_COUNTER_BITS
    return {c: (b[c] - a[c]) % mod for c in before.cpus}


# ------------------------------------------------------------------ stat


def parse_stat(text: str) -> Dict[int, Dict[str, int]]:
    """The ``cpuN`` lines of /proc/stat: {cpu: {field: ticks}} for the
    fields of :data:`STAT_FIELDS`; the all-CPU ``cpu`` line is skipped.
    Raises CounterError on a line with too few fields."""
    out: Dict[int, Dict[str, int]] = {}
    for ln in text.splitlines():
        words = ln.split()
        if not words or not re.fullmatch(r"cpu\d+", words[0]):
            continue
        vals = words[1:1 + len(STAT_FIELDS)]
        if len(vals) < len(STAT_FIELDS) or not all(v.isdigit() for v in vals):
            raise CounterError(f"/proc/stat line {ln.strip()[:60]!r}: "
                               f"want {len(STAT_FIELDS)} tick counts")
        out[int(words[0][3:])] = dict(zip(STAT_FIELDS, map(int, vals)))
    if not out:
        raise CounterError("/proc/stat snapshot has no cpuN line")
    return out


def stat_delta(before: Mapping[int, Mapping[str, int]],
               after: Mapping[int, Mapping[str, int]]) \
        -> Dict[int, Dict[str, int]]:
    """{cpu: {field: ticks between}}.  Raises CounterError when the CPUs
    differ or a count went back."""
    if set(before) != set(after):
        raise CounterError(f"/proc/stat CPUs changed between snapshots: "
                           f"{sorted(before)} -> {sorted(after)}")
    out = {}
    for c in sorted(before):
        d = {f: after[c][f] - before[c][f] for f in STAT_FIELDS}
        bad = [f for f, v in d.items() if v < 0]
        if bad:
            raise CounterError(f"/proc/stat cpu{c} {bad[0]} went back "
                               f"between snapshots")
        out[c] = d
    return out


# ------------------------------------------------------------- processes


@dataclass(frozen=True)
class ProcCounters:
    """One process: context switches (status), run and wait time in ns
    and timeslices (schedstat)."""

    voluntary: int
    nonvoluntary: int
    run_ns: int
    wait_ns: int
    slices: int

    def minus(self, other: "ProcCounters") -> "ProcCounters":
        """self - other, field by field; CounterError if any goes negative
        (not the same process, or the snapshots swapped)."""
        d = ProcCounters(*(getattr(self, f) - getattr(other, f)
                           for f in self.__dataclass_fields__))
        if min(d.__dict__.values()) < 0:
            raise CounterError("a process's counters went back between "
                               "snapshots")
        return d


def parse_proc(text: str) -> ProcCounters:
    """acceptd's per-process text: the two ``*_ctxt_switches:`` lines of
    /proc/<pid>/status and ``schedstat: RUN_NS WAIT_NS SLICES``.  Raises
    CounterError when one is missing (the process had exited)."""
    got: Dict[str, int] = {}
    sched: Optional[Tuple[int, int, int]] = None
    for ln in text.splitlines():
        key, _, val = ln.partition(":")
        key, val = key.strip(), val.split()
        if key in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches") \
                and len(val) == 1 and val[0].isdigit():
            got[key] = int(val[0])
        elif key == "schedstat" and len(val) == 3 and all(
                v.isdigit() for v in val):
            sched = (int(val[0]), int(val[1]), int(val[2]))
    if len(got) != 2 or sched is None:
        raise CounterError(f"process counters incomplete (exited?): "
                           f"{text.strip()[:80]!r}")
    return ProcCounters(got["voluntary_ctxt_switches"],
                        got["nonvoluntary_ctxt_switches"], *sched)

