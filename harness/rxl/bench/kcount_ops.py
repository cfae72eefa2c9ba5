"""Locks and atomics in a single-stepped amd64 FreeBSD kernel trace. Pure.

``rxl kcount record`` keeps, besides every program counter, the
disassembly of every distinct instruction (gdb, AT&T syntax) and, before
each ``lock cmpxchg``, the comparand (``%rax``) and the new value (the
source register), and once per invocation the thread it runs in
(``curthread``: the word at ``%gs:0``, ``pc_curthread`` at the start of
amd64's ``struct pcpu``).  From those this module counts, per invocation:

* **atomics**: locked read-modify-write instructions, i.e. every
  instruction with a ``lock`` prefix, plus ``xchg`` with a memory operand
  (locked implicitly).  A ``cmpxchg`` without ``lock`` is not atomic
  across CPUs and is not counted.
* **locks**: lock acquisitions.  On amd64 every FreeBSD lock but the
  rmlock's read side is taken by a ``lock cmpxchg`` on its lock word,
  inlined (``mtx_lock``, ``mtx_lock_spin``, ``rw_wlock``, ``sx_xlock``) or
  inside a function (``_thread_lock``, ``__rw_rlock_int``,
  ``_sx_slock_int``, ``lockmgr``, the trylocks).  One counts as an
  acquisition when it is

  - *exclusive*: the comparand is an unowned lock word and the new value
    is the current thread: ``MTX_UNOWNED`` = 0 (sys/mutex.h: sleep and
    spin mutexes, ``thread_lock``), or ``RW_UNLOCKED`` = ``SX_LOCK_UNLOCKED``
    = ``LK_UNLOCKED`` = 1 (sys/rwlock.h, sys/sx.h, sys/lockmgr.h: the
    shared flag with no sharers);
  - *shared*: the comparand has the shared flag (bit 0) set and the new
    value adds one sharer: ``RW_ONE_READER`` = ``SX_ONE_SHARER`` =
    ``LK_ONE_SHARER`` = 1 << 5 (same headers).

  Releases (the comparand is the owner, or the new value has one sharer
  fewer) and other compare-and-swaps (refcounts, flags) are atomics, not
  locks.  A read of an rmlock (``_rm_rlock``, ``_rm_try_rlock``) takes no
  atomic at all and counts as one lock per entry.  Epoch and SMR sections
  and ``critical_enter()`` are not locks.  A retried acquisition (the
  cmpxchg failed, under contention) counts once per attempt; with the
  other vCPUs stopped while one is stepped, contention does not arise.

Without ``curthread`` (a gdbstub without ``gs_base``), an exclusive
acquisition is recognised by its new value alone being a kernel address
(:data:`KERNEL_BASE` and up), which is what a thread pointer is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Iterable, Mapping, Optional, Sequence, Tuple

#: The comparands of an exclusive acquisition: MTX_UNOWNED (sys/mutex.h)
#: and RW_UNLOCKED = SX_LOCK_UNLOCKED = LK_UNLOCKED (sys/rwlock.h, sys/sx.h,
#: sys/lockmgr.h).
UNOWNED = (0x0, 0x1)
#: RW_LOCK_READ = SX_LOCK_SHARED = LK_SHARE: the shared flag of a lock word.
SHARED_FLAG = 0x1
#: RW_ONE_READER = SX_ONE_SHARER = LK_ONE_SHARER = 1 << 5.
ONE_SHARER = 1 << 5
#: Lower bound of amd64 kernel addresses (the direct map and up): where a
#: struct thread lives (sys/amd64/include/vmparam.h, DMAP_MIN_ADDRESS's
#: region).
KERNEL_BASE = 0xFFFF800000000000
#: Entry points of lock acquisitions that execute no atomic (rmlock read).
RM_READ_ENTRIES = ("_rm_rlock", "_rm_try_rlock")

_MASK = (1 << 64) - 1
_LOCK = re.compile(r"(?:^|\s)lock\s+(\S+)\s*(.*)$")
_XCHG = re.compile(r"^(?:\S+\s+)*?xchg[bwlq]?\s+(.*)$")
_CMPXCHG = re.compile(r"^cmpxchg[bwlq]?$")
_REG = re.compile(r"^%([a-z0-9]+)$")
_REG64 = re.compile(r"^(r[a-d]x|r[sd]i|r[sb]p|r(8|9|1[0-5]))$")


def is_atomic(asm: str) -> bool:
    """True for a locked read-modify-write: a ``lock`` prefix, or ``xchg``
    with a memory operand.  ``asm`` is gdb's AT&T text of one instruction."""
    text = asm.strip()
    if _LOCK.search(text):
        return True
    m = _XCHG.match(text)
    return bool(m and "(" in m.group(1))


def cas_source(asm: str) -> Optional[str]:
    """The source register of a 64-bit ``lock cmpxchg`` (``rcx`` for ``lock
    cmpxchg %rcx,(%rdx)``), or None for any other instruction: lock words
    are ``uintptr_t``, so narrower compare-and-swaps never take a lock."""
    m = _LOCK.search(asm.strip())
    if not m or not _CMPXCHG.match(m.group(1)):
        return None
    ops = m.group(2).split(",", 1)
    src = _REG.match(ops[0].strip()) if len(ops) == 2 else None
    if not src or not _REG64.match(src.group(1)):
        return None
    return src.group(1)


def acquisition(expected: int, new: int,
                curthread: Optional[int]) -> Optional[str]:
    """``"exclusive"``, ``"shared"`` or None for a ``lock cmpxchg`` that
    compares against ``expected`` and stores ``new`` (both 64-bit words)."""
    expected &= _MASK
    new &= _MASK
    if expected in UNOWNED:
        owner = new == curthread if curthread is not None \
            else new >= KERNEL_BASE
        if owner:
            return "exclusive"
    if expected & SHARED_FLAG and new == expected + ONE_SHARER:
        return "shared"
    return None


@dataclass(frozen=True)
class Ops:
    """Per invocation: atomics and lock acquisitions (exclusive + shared)."""

    atomics: int
    locks: int
    exclusive: int
    shared: int
    rm_reads: int


def count_ops(pcs: Sequence[int], asm: Mapping[int, str],
              cas: Iterable[Tuple[int, int, int]],
              curthread: Optional[int],
              rm_entries: Iterable[int] = ()) -> Ops:
    """Atomics and locks of one invocation.

    ``pcs``: the program counter of every executed instruction, in order;
    ``asm``: ``{pc: AT&T text}`` covering every pc; ``cas``: ``(step,
    rax, source value)`` for each 64-bit ``lock cmpxchg`` step (``step``
    indexes ``pcs``; see :func:`cas_source`); ``rm_entries``: addresses of
    :data:`RM_READ_ENTRIES`.
    Raises KeyError for a pc without disassembly and ValueError for a
    ``cas`` step that is not a ``lock cmpxchg``.
    """
    atomic_pc = {pc: is_atomic(asm[pc]) for pc in set(pcs)}
    atomics = sum(1 for pc in pcs if atomic_pc[pc])
    excl = shared = 0
    for step, rax, src in cas:
        if not 0 <= step < len(pcs) or cas_source(asm[pcs[step]]) is None:
            raise ValueError(f"step {step} is not a lock cmpxchg")
        kind = acquisition(rax, src, curthread)
        excl += kind == "exclusive"
        shared += kind == "shared"
    rm = set(rm_entries)
    rm_reads = sum(1 for pc in pcs if pc in rm)
    return Ops(atomics, excl + shared + rm_reads, excl, shared, rm_reads)


def parse_cas(rows: object) -> Tuple[Tuple[int, int, int], ...]:
    """A trace sample's ``"cas"`` list of ``[step, rax, src]`` as integer
    triples.  Raises ValueError (one line) for anything else."""
    if rows is None:
        return ()
    try:
        out = tuple((int(s), int(a), int(b)) for s, a, b in rows)  # type: ignore[union-attr]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"cas: expected [step, rax, src] triples ({exc})") from None
    return out


def parse_asm(doc: Mapping[str, str]) -> Dict[int, str]:
    """The trace's ``"asm"`` map ``{"0x...": text}`` with integer keys.
    Raises ValueError for a key that is not hexadecimal."""
    try:
        return {int(k, 16): str(v) for k, v in doc.items()}
    except (AttributeError, TypeError, ValueError) as exc:
        raise ValueError(f"asm: expected {{hex address: text}} ({exc})") from None
