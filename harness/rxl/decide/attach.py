"""iflib's attach: which CPU each receive queue of each device takes.

The series orders the CPUs of a device's interrupt set (``core_spread``,
:func:`rxl.decide.model.spread_order` / the C core); iflib itself decides
where in that order each device starts.  This module models that part of
sys/net/iflib.c (FreeBSD 15.0) as the series leaves it:

* ``cpuid_advance(ctx, cpuid, n)``: the CPU ``n`` places after ``cpuid`` in
  the device's order, wrapping (:func:`advance`);
* ``get_ctx_core_offset(ctx)``: the device's base CPU (:func:`base_cpu`).
  With the ``dev.<drv>.<unit>.iflib.core_offset`` tunable set, that value
  brought into the set: a value outside [first, last] of the set is taken
  modulo ``last - first + 1``, and one that is not in the set is moved up to
  the next CPU that is.  Unset (the default), devices with the *same*
  interrupt set share one cursor (``cpu_offsets``, keyed by the set): the
  first starts at the order's first CPU, and each moves the cursor on by the
  cores it consumed (the distinct CPUs of its ``max(ntxq, nrxq)`` queues,
  with TX and RX queues paired as iflib does by default), in its own order;
* the queue's CPU: ``cpuid_advance(base, qid)`` (``get_cpuid_for_queue``
  without ``separate_txrx``).

A device's interrupt set is ``bus_get_cpus(INTR_CPUS)``: with an ACPI
``_PXM`` (``acpi_get_cpus()`` in sys/dev/acpica/acpi.c) the interrupt CPUs
of its NUMA domain only.  Errors: ValueError (one line).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

#: ``CORE_OFFSET_UNSPECIFIED`` (sys/net/iflib.c): the tunable's "unset", 0xFFFF;
#: the tunable is a uint16_t, so a set value is 0..65534.
CORE_OFFSET_UNSPECIFIED = 0xFFFF


def advance(order: Sequence[int], cpuid: int, n: int) -> int:
    """``cpuid_advance()``: the CPU ``n`` places after ``cpuid`` in ``order``."""
    return order[(list(order).index(cpuid) + n) % len(order)]


def tunable_base(cpus: Sequence[int], offset: int) -> int:
    """The base CPU ``get_ctx_core_offset()`` makes of a set ``core_offset``
    tunable for a device whose interrupt set is ``cpus``."""
    ids = sorted(cpus)
    first, last = ids[0], ids[-1]
    base = offset
    if base < first or base > last:
        base = ((base + first) - first) % (last - first + 1)
    while base not in ids:
        base += 1
    return base


@dataclass
class Device:
    """One iflib device: ``queues`` RX (and as many TX) queues; ``order``: its
    interrupt set in the order its queues walk it (numeric, or the spread
    order); ``core_offset``: the tunable, None when unset."""

    queues: int
    order: Sequence[int]
    core_offset: Optional[int] = None


@dataclass
class Attached:
    """Where a device's queues went: ``base`` (its first queue's CPU, what
    ``dev.<drv>.<unit>.iflib.core_offset`` reads after attach) and each
    queue's CPU; ``shared``: it took the shared cursor (no tunable)."""

    base: int
    cpus: List[int] = field(default_factory=list)
    shared: bool = True


def attach(devices: Sequence[Device]) -> List[Attached]:
    """Attach ``devices`` in order, as iflib does at boot; one
    :class:`Attached` per device. Raises ValueError for a device with no
    queue, an empty interrupt set, or a tunable outside 0..65534."""
    cursors: Dict[Tuple[int, ...], int] = {}   # cpu_offsets: set -> next_cpuid
    out = []
    for k, dev in enumerate(devices):
        if dev.queues < 1:
            raise ValueError(f"device {k}: no queue")
        if not dev.order:
            raise ValueError(f"device {k}: an empty interrupt set")
        key = tuple(sorted(dev.order))
        if dev.core_offset is not None:
            if not 0 <= dev.core_offset < CORE_OFFSET_UNSPECIFIED:
                raise ValueError(f"device {k}: core_offset {dev.core_offset} is not in "
                                 f"0..{CORE_OFFSET_UNSPECIFIED - 1} (a uint16_t tunable; "
                                 f"{CORE_OFFSET_UNSPECIFIED} means unset)")
            base = tunable_base(dev.order, dev.core_offset)
            shared = False
        else:
            consumed = min(dev.queues, len(dev.order))
            base = cursors.get(key, dev.order[0])
            cursors[key] = advance(dev.order, base, consumed)
            shared = True
        out.append(Attached(base, [advance(dev.order, base, q) for q in range(dev.queues)],
                            shared))
    return out
