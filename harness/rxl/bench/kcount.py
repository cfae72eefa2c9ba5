"""Instructions, locks and atomics a running guest kernel executes per call.

``make bench-core`` counts a userspace analogue of the lbgroup lookup under
callgrind (issue 2).  This module measures the real thing: it attaches gdb
to QEMU's gdbstub (``-gdb tcp:127.0.0.1:PORT``), breaks at the entry of a
kernel function (default ``in_pcblookup_mbuf``, where tcp_input() looks up
the inpcb of every segment; ``kern_accept4`` for accept(2), ``tcp_input``
for a whole segment), single-steps that one vCPU until the function
returns, and records every program counter and stack pointer.  QEMU masks
interrupts and timers while single-stepping (its default ``sstep`` flags),
and gdb keeps the other vCPUs stopped (``scheduler-locking step``), so a
trace is the function's own path and nothing else.  It also keeps the
disassembly of every distinct instruction, ``%rax`` and the source register
before every 64-bit ``lock cmpxchg``, and the current thread, from which
:mod:`rxl.bench.kcount_ops` counts lock acquisitions and atomics (its docstring
defines both).

Three halves:

* ``record`` (runs gdb; ``--dry-run`` prints its argv) writes a JSON trace
  file: ``{"kernel", "outer", "entries": {name: address}, "asm": {address:
  text}, "samples": [{"pc": [...], "sp": [...], "cas": [[step, rax, src],
  ...], "curthread": N}]}``;
* ``analyze`` (pure, :func:`frame_counts` and :func:`summarize`) turns the
  traces into instruction counts per invocation of each named function:
  the instructions from its entry up to and including its ``ret``, callees
  included (a function the compiler inlined is never entered and counts
  nothing), and locks and atomics per invocation of the outer function;
* ``table`` (pure, :func:`case_value`, :func:`handshake_value`) writes issue 10's
  ``docs/results/kcount-accept.json`` from traces named per case and
  kernel.

Which invocations count is decided by a *mark*, a function the invocation
must enter (:data:`MARKS`): a lookup that reached a listening group
(``in_pcblookup_lbgroup``), an accept(2) that returned a connection
(``soaccept``; the non-blocking accept that finds the queue empty does
not), a segment that created a syncache entry (``syncache_add``: the SYN)
or completed one (``syncache_expand``: the handshake's ACK).

Usage (``rxl kcount`` is the same as ``python -m rxl.bench.kcount``)::

    python -m rxl.bench.kcount record --kernel K --port 1234 --samples 40 --out T.json
    python -m rxl.bench.kcount analyze T.json [T2.json ...] [--json]
    python -m rxl.bench.kcount table --trace accept-off pristine T.json ... --out J.json
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from rxl.errors import DataError
from rxl.bench import kcount_gdb, kcount_ops

#: Where tcp_input() looks up every segment's inpcb (sys/netinet/in_pcb.c).
OUTER = "in_pcblookup_mbuf"
#: Functions whose frames are counted inside OUTER when they are entered:
#: the lookup without locks, the lbgroup lookup, and the series' selection.
INNER = ("in_pcblookup_hash_locked", "in_pcblookup_lbgroup", "in_pcblbgroup_select")
#: The function whose presence marks a lookup that reached a listening
#: group: a SYN (or the ACK completing a syncache entry), never an
#: established connection's segment.
GROUP_MARK = "in_pcblookup_lbgroup"
#: Per outer function, the marks an invocation must enter to count, each
#: summarized on its own: a lookup that reached a listening group; an
#: accept(2) that dequeued a connection (soaccept() calls the protocol's
#: accept; sys/kern/uipc_syscalls.c); a segment that made a syncache entry
#: (the SYN) or completed one (the handshake's ACK; sys/netinet/tcp_input.c).
MARKS: Dict[str, Tuple[str, ...]] = {
    "in_pcblookup_mbuf": (GROUP_MARK,),
    "kern_accept4": ("soaccept",),
    "tcp_input": ("syncache_add", "syncache_expand"),
    "syncache_expand": ("syncache_socket",),
}
#: The outer function whose segments ``--only-syn`` filters (its arguments
#: are ``struct mbuf **mp, int *offp, int proto``; sys/netinet/tcp_var.h).
SYN_OUTER = "tcp_input"
#: Give up on a trace after this many steps (a lookup is a few hundred,
#: an accept(2) a few thousand).
STEP_LIMIT = 100000
#: Issue 10's cases and the kernels a case is measured on.
CASES = ("accept-off", "accept-on-untagged", "accept-on-tagged", "syn-on")
VARIANTS = ("pristine", "patched", "patched-old")

_MASK = (1 << 64) - 1

#: The gdb side (rxl.bench.kcount_gdb), re-exported for record.
GDB_CAS_SRC, GDB_SCRIPT = kcount_gdb.GDB_CAS_SRC, kcount_gdb.GDB_SCRIPT
GDB_SYN = kcount_gdb.GDB_SYN


class KcountError(DataError):
    """A trace file that is not what ``record`` writes (one-line message)."""


def frame_counts(pcs: Sequence[int], sps: Sequence[int], entry: int) -> List[int]:
    """Instructions per invocation of the function at ``entry`` in one trace.

    ``pcs``/``sps``: program counter and stack pointer before each executed
    instruction, same length.  An invocation starts where ``pc == entry``
    and ends with the first later instruction whose stack pointer is above
    the entry's (the ``ret`` popped the return address); its count runs
    from the entry up to that point, the ``ret`` included.  An invocation
    still open at the end of the trace counts to the end.  Returns one
    count per invocation, in order; ``[]`` if it was never entered.
    Raises KcountError when the lists differ in length.
    """
    if len(pcs) != len(sps):
        raise KcountError(f"trace has {len(pcs)} pcs but {len(sps)} sps")
    out = []
    i, n = 0, len(pcs)
    while i < n:
        if pcs[i] != entry:
            i += 1
            continue
        sp0 = sps[i]
        j = i + 1
        while j < n and sps[j] <= sp0:
            j += 1
        out.append(j - i)
        i = j
    return out


@dataclass(frozen=True)
class Sample:
    """One recorded invocation: total instructions, per-function counts,
    the marks it entered (:data:`MARKS`), and its locks and atomics (None
    for a trace recorded without disassembly)."""

    total: int
    frames: Dict[str, List[int]]
    group: bool
    complete: bool
    marks: Tuple[str, ...] = ()
    ops: Optional[kcount_ops.Ops] = None


def load(path: str) -> dict:
    """Read a trace file written by ``record`` (``-``: standard input).

    Raises KcountError for a file that is not a trace, OSError when it
    cannot be read.
    """
    text = sys.stdin.read() if path == "-" else Path(path).read_text()
    if path == "-" and not text:
        raise KcountError("-: standard input is empty (it can be read only once)")
    try:
        doc = json.loads(text)
        entries = {k: int(v, 16) for k, v in doc["entries"].items()}
        samples, outer = doc["samples"], doc["outer"]
        if not isinstance(outer, str) or not isinstance(samples, list):
            raise TypeError("outer must be a function name and samples a list")
        asm = kcount_ops.parse_asm(doc["asm"]) if "asm" in doc else None
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise KcountError(f"{path}: not a kcount trace ({exc})") from None
    return {"outer": outer, "entries": entries, "samples": samples, "asm": asm}


def samples_of(doc: dict) -> List[Sample]:
    """Per recorded invocation: its total and the frames of every entry but the outer.

    Raises KcountError for a sample that is not ``{"pc": [...], "sp":
    [...]}`` of integers of equal length, or whose ``cas`` steps or pcs
    do not match the trace's disassembly.
    """
    samples = doc["samples"]
    if not isinstance(samples, list):
        raise KcountError(f"samples: expected a list, got {type(samples).__name__}")
    marks = MARKS.get(doc["outer"], ())
    asm = doc.get("asm")
    rm = [a for n, a in doc["entries"].items() if n in kcount_ops.RM_READ_ENTRIES]
    out = []
    for k, s in enumerate(samples, 1):
        try:
            pcs = [int(p) & _MASK for p in s["pc"]]
            sps = [int(p) & _MASK for p in s["sp"]]
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise KcountError(f"sample {k}: not a trace of integer pc and sp lists "
                              f"({type(exc).__name__}: {exc})") from None
        if len(pcs) != len(sps):
            raise KcountError(f"sample {k}: {len(pcs)} pcs but {len(sps)} sps")
        frames = {name: frame_counts(pcs, sps, addr) for name, addr in doc["entries"].items()
                  if name != doc["outer"]}
        ops = None
        if asm is not None:
            try:
                td = s.get("curthread")
                ops = kcount_ops.count_ops(pcs, asm, kcount_ops.parse_cas(s.get("cas")),
                                           None if td is None else int(td), rm)
            except KeyError as exc:
                raise KcountError(f"sample {k}: no disassembly for pc {exc}") from None
            except (ValueError, TypeError, OverflowError) as exc:
                raise KcountError(f"sample {k}: {exc}") from None
        out.append(Sample(total=len(pcs), frames=frames,
                          group=bool(frames.get(GROUP_MARK)),
                          complete=bool(s.get("complete", True)),
                          marks=tuple(m for m in marks if frames.get(m)), ops=ops))
    return out


def _stats(vals: List[int]) -> dict:
    if not vals:
        return {"n": 0, "median": None, "min": None, "max": None}
    return {"n": len(vals), "median": statistics.median(vals), "min": min(vals),
            "max": max(vals)}


def summarize(samples: Sequence[Sample], mark: str = GROUP_MARK) -> Dict[str, dict]:
    """Median/min/max instructions per function over the marked invocations.

    Only complete samples that entered ``mark`` count (default: a lookup
    that reached a listening group); the others are reported as
    ``other``.  Returns ``{name: {"n", "median", "min", "max"}}`` with
    ``"total"`` for the outer function, ``"locks"`` and ``"atomics"`` per
    invocation of it when the trace has disassembly, plus ``{"other":
    {"n": k}}``.
    """
    grp = [s for s in samples if s.complete and s.frames.get(mark)]
    res: Dict[str, dict] = {}
    res["total"] = _stats([s.total for s in grp])
    if grp and all(s.ops is not None for s in grp):
        res["locks"] = _stats([s.ops.locks for s in grp])
        res["atomics"] = _stats([s.ops.atomics for s in grp])
    names = sorted({n for s in grp for n in s.frames})
    for name in names:
        res[name] = _stats([sum(s.frames[name]) for s in grp if s.frames.get(name)])
    res["other"] = {"n": len(samples) - len(grp)}
    return res


def mark_values(doc: dict) -> Dict[str, Dict[str, int]]:
    """Per mark of the trace's outer function that a complete sample entered,
    issue 10's ``{"instructions", "locks", "atomics"}``: the low median over
    those samples, of each count on its own.  Marks no sample entered are
    left out.  Raises KcountError when the outer function has no marks or
    the trace has no disassembly.
    """
    marks = MARKS.get(doc["outer"])
    if not marks:
        raise KcountError(f"outer {doc['outer']}: no marks; one of {', '.join(MARKS)}")
    if doc.get("asm") is None:
        raise KcountError("trace has no disassembly (recorded before locks and "
                          "atomics were counted); record it again")
    samples = samples_of(doc)
    out: Dict[str, Dict[str, int]] = {}
    for m in marks:
        got = [s for s in samples if s.complete and m in s.marks]
        if got:
            out[m] = {"instructions": statistics.median_low([s.total for s in got]),
                      "locks": statistics.median_low([s.ops.locks for s in got]),
                      "atomics": statistics.median_low([s.ops.atomics for s in got])}
    return out


def _add(values: Sequence[Dict[str, int]]) -> Dict[str, int]:
    return {k: sum(v[k] for v in values) for k in ("instructions", "locks", "atomics")}


def case_value(doc: dict) -> Dict[str, int]:
    """Issue 10's ``{"instructions", "locks", "atomics"}`` of one trace.

    :func:`mark_values` summed over every mark of the trace's outer
    function (:data:`MARKS`; ``tcp_input``: the SYN's segment plus the
    handshake's ACK).  Raises KcountError when the outer function has no
    marks, the trace has no disassembly, or a mark has no sample.
    """
    got = mark_values(doc)
    for m in MARKS[doc["outer"]]:
        if m not in got:
            raise KcountError(f"no complete sample entered {m}")
    return _add(list(got.values()))


#: The half of the TCP handshake a mark's calls are: a segment that made a
#: syncache entry is the SYN; a segment that completed one, or a
#: syncache_expand() that made the socket, is the ACK (tcp_input.c).
HALF = {"syncache_add": "SYN", "syncache_expand": "ACK", "syncache_socket": "ACK"}


def handshake_value(docs: Sequence[dict]) -> Dict[str, int]:
    """``syn-on``: the SYN's value plus the ACK's, from one or more traces.

    Each half comes from exactly one trace: the SYN from ``tcp_input``'s
    segments that entered ``syncache_add``, the ACK from ``tcp_input``'s
    that entered ``syncache_expand`` or from ``syncache_expand`` traced as
    the outer function (the calls that entered ``syncache_socket``).
    Raises KcountError when a half is missing or two traces give it, or as
    :func:`mark_values`.
    """
    halves: Dict[str, Dict[str, int]] = {}
    for doc in docs:
        for mark, value in mark_values(doc).items():
            half = HALF.get(mark)
            if half is None:
                raise KcountError(f"outer {doc['outer']}: {mark} is no half of the handshake")
            if half in halves:
                raise KcountError(f"the handshake's {half} is in two traces; give it once")
            halves[half] = value
    for half in ("SYN", "ACK"):
        if half not in halves:
            raise KcountError(f"no trace has the handshake's {half}")
    return _add([halves["SYN"], halves["ACK"]])


def table_doc(docs: Dict[Tuple[str, str], List[dict]]) -> Dict[str, Dict[str, Dict[str, int]]]:
    """Issue 10's JSON from ``{(case, variant): [trace, ...]}``. Pure.

    ``syn-on`` takes :func:`handshake_value` of its traces, every other
    case :func:`case_value` of its one trace.  Cases and variants come out
    in the order of :data:`CASES` and :data:`VARIANTS`.  Raises
    KcountError (naming the case and variant) for an unknown case or
    variant, more than one trace of an accept case, or as those two.
    """
    doc: Dict[str, Dict[str, Dict[str, int]]] = {}
    for (case, variant), got in docs.items():
        try:
            if case not in CASES or variant not in VARIANTS:
                raise KcountError(f"one of {', '.join(CASES)} on one of {', '.join(VARIANTS)}")
            if case == "syn-on":
                value = handshake_value(got)
            elif len(got) != 1:
                raise KcountError(f"give one trace, not {len(got)}")
            else:
                value = case_value(got[0])
        except KcountError as exc:
            raise KcountError(f"{case} {variant}: {exc}") from None
        doc.setdefault(case, {})[variant] = value
    return {c: {v: doc[c][v] for v in VARIANTS if v in doc[c]} for c in CASES if c in doc}


def symbol_addresses(nm_output: str, names: Sequence[str],
                     optional: Sequence[str] = ()) -> Dict[str, int]:
    """``{name: address}`` for ``names`` and any of ``optional`` from ``nm -P``
    output. Pure.

    Raises KcountError naming the first of ``names`` not found (a kernel
    built without the series has no ``in_pcblbgroup_select``: leave it out).
    """
    found: Dict[str, int] = {}
    want = set(names) | set(optional)
    for line in nm_output.splitlines():
        f = line.split()
        if len(f) >= 3 and f[0] in want and f[1] in "TtWw":
            found.setdefault(f[0], int(f[2], 16))
    for n in names:
        if n not in found:
            raise KcountError(f"no text symbol {n} in the kernel's symbol table")
    return found


def gdb_argv(kernel: str, remote: str, out: str, script: str, *, samples: int,
             entries: Dict[str, int], outer: str = OUTER,
             limit: int = STEP_LIMIT, gdb: str = "gdb", only_syn: bool = False,
             others_run: bool = False) -> List[str]:
    """The gdb command line of ``record``. Pure.

    ``kernel``: the booted kernel file; ``entries``: ``{function:
    address}``, ``outer`` among them; ``remote``: ``HOST:PORT`` of QEMU's
    gdbstub; ``script``: a file holding :data:`GDB_SCRIPT`; ``only_syn``:
    step only the segments with SYN set and ACK clear (``outer`` must be
    ``tcp_input``, whose arguments the filter reads); ``others_run``: let
    the other vCPUs run while one is stepped (gdb's ``scheduler-locking
    off``), for paths that wait on another CPU (a TLB shootdown's IPI, a
    lock a stopped vCPU holds), which otherwise spin until ``limit``.
    Raises KcountError
    if ``outer`` has no address, or ``only_syn`` with another outer.
    """
    if outer not in entries:
        raise KcountError(f"no address for the traced function {outer}")
    if only_syn and outer != SYN_OUTER:
        raise KcountError(f"--only-syn reads {SYN_OUTER}()'s arguments; outer is {outer}")
    def conv(name: str, value) -> List[str]:
        v = f'"{value}"' if isinstance(value, str) else str(value)
        return ["-ex", f"set ${name} = {v}"]

    return ([gdb, "-batch", "-nx", kernel] + conv("kc_outer", outer)
            + conv("kc_entries", ",".join(f"{k}={v:#x}" for k, v in entries.items()))
            + conv("kc_out", out)
            + conv("kc_remote", remote) + conv("kc_samples", samples)
            + conv("kc_limit", limit) + conv("kc_only_syn", int(only_syn))
            + conv("kc_sched", "off" if others_run else "step")
            + ["-x", script])


if __name__ == "__main__":  # pragma: no cover
    from rxl.bench.cli import kcount
    sys.exit(kcount())
