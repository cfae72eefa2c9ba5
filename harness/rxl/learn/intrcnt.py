"""FreeBSD's interrupt counters, ``hw.intrnames`` / ``hw.intrcnt``, as a pair. Pure.

sys/kern/kern_intr.c exports one ``u_long`` count per interrupt source
(``hw.intrcnt``) and the sources' names (``hw.intrnames``; on x86
``intrcnt_setname`` pads each to ``INTRNAME_LEN - 1`` blanks).  The names:
``irq<N>: <device>`` per interrupt (``irq264: igb0:rxq0``), ``cpu<N>:timer``
(the local APIC timer, sys/x86/x86/local_apic.c) and, with ``options
COUNT_IPIS`` (sys/x86/x86/mp_x86.c, counted in ``ipi_bitmap_handler``),
``cpu<N>:preempt`` (IPI_PREEMPT: a remote wakeup that preempts the target
or ends its idle halt, sent by ULE's ``tdq_notify``), ``cpu<N>:ast``,
``cpu<N>:rendezvous``, ``cpu<N>:hardclock`` and ``cpu<N>:invl*``.
learnd copies both at each snapshot as ``name -> count`` (its I lines,
:mod:`rxl.learn.results`); this module takes the difference of two copies
and splits it per CPU.  The Linux counterpart, /proc/interrupts, is
:mod:`rxl.bench.counters`.  64-bit counts (``u_long`` on amd64,
:data:`INTR_COUNTER_BITS`) do not wrap within a run, so a count that went
back is refused, not taken modulo.
"""

from __future__ import annotations

import re
from typing import Dict, Mapping, Tuple

from rxl.errors import DataError

#: Width of a hw.intrcnt count on amd64 (``u_long``).
INTR_COUNTER_BITS = 64
#: A per-CPU source of hw.intrnames: ``cpu<N>:<kind>``.
_CPU_SOURCE = re.compile(r"^cpu(\d+):([a-z_]+)$")


class CounterError(DataError):
    """Two hw.intrcnt copies that do not pair (one line)."""


def intr_delta(before: Mapping[str, int], after: Mapping[str, int]) -> Dict[str, int]:
    """{name: after - before} of two hw.intrcnt copies (name -> count).

    A source named only in ``after`` (attached between the copies) counts
    from 0.  Raises CounterError when ``before`` names a source ``after``
    lacks (not the same boot) or a count went back (the copies swapped, or
    another boot)."""
    gone = sorted(set(before) - set(after))
    if gone:
        raise CounterError(f"hw.intrcnt source {gone[0]!r} is gone between the copies "
                           "(not the same boot?)")
    out = {}
    for name in sorted(after):
        d = after[name] - before.get(name, 0)
        if d < 0:
            raise CounterError(f"hw.intrcnt {name!r} went back between the copies "
                               f"({before[name]} -> {after[name]})")
        out[name] = d
    return out


def intr_per_cpu(delta: Mapping[str, int], kind: str) -> Dict[int, int]:
    """{cpu: count} of the ``cpu<N>:<kind>`` sources of ``delta`` (``kind``:
    ``preempt``, ``timer``, ``ast``, ...); {} when the kernel has none (no
    COUNT_IPIS for the IPI kinds).  Raises CounterError for a CPU named twice."""
    out: Dict[int, int] = {}
    for name, v in delta.items():
        m = _CPU_SOURCE.match(name.strip())
        if m and m.group(2) == kind:
            cpu = int(m.group(1))
            if cpu in out:
                raise CounterError(f"hw.intrcnt names cpu{cpu}:{kind} twice")
            out[cpu] = v
    return out


def intr_kinds(delta: Mapping[str, int]) -> Tuple[str, ...]:
    """The per-CPU kinds ``delta`` has, sorted (``('timer',)`` without COUNT_IPIS)."""
    return tuple(sorted({m.group(2) for n in delta if (m := _CPU_SOURCE.match(n.strip()))}))
