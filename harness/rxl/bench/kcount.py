"""Instructions, locks and atomics a running guest kernel executes per call.

``make bench-core`` counts a userspace analogue of the lbgroup lookup under
callgrind.  This module measures the real thing: it attaches gdb
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

Four parts:

* ``record`` (:func:`record`: ``nm -P`` for the entries, then gdb with
  :data:`rxl.bench.kcount_gdb.GDB_SCRIPT`; ``--dry-run`` prints its argv,
  :func:`dry_run_lines`) writes a JSON trace
  file: ``{"kernel", "outer", "entries": {name: address}, "asm": {address:
  text}, "samples": [{"pc": [...], "sp": [...], "cas": [[step, rax, src],
  ...], "curthread": N}]}``;
* ``analyze`` (pure, :func:`frame_counts` and :func:`summarize`) turns the
  traces into instruction counts per invocation of each named function:
  the instructions from its entry up to and including its ``ret``, callees
  included (a function the compiler inlined is never entered and counts
  nothing), and locks and atomics per invocation of the outer function;
* ``table`` (pure, :func:`case_value`, :func:`handshake_value`) writes
  ``docs/results/kcount-accept.json`` from traces named per case and
  kernel;
* ``sites`` and ``diff`` (:func:`sites`, :func:`self_counts`): in which
  functions a traced call's locks and atomics are (:func:`symbolizer` maps a
  pc to the kernel text symbol holding it; an inlined lock counts in the
  function it was inlined into), and which functions' own instruction counts
  differ between two traces, so a pristine and a patched trace can be
  compared function by function.

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

import bisect
import json
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from rxl.bench import kcount_gdb, kcount_ops
from rxl.cli.options import read_limited
from rxl.errors import DataError, json_reason, os_reason, show

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
#: The cost table's cases and the kernels a case is measured on.
CASES = ("accept-off", "accept-on-untagged", "accept-on-tagged", "syn-on")
VARIANTS = ("pristine", "patched", "patched-old")

_MASK = (1 << 64) - 1
#: Largest trace read, bytes: 40 samples of a few thousand steps are a few MiB;
#: STEP_LIMIT steps each, about 200 MiB.
MAX_BYTES = 256 << 20
#: Most calls ``record --samples`` takes.  A step is about 44 bytes of the
#: trace's JSON (a pc and an sp, kernel addresses of 20 decimal digits, and
#: their separators), so 10,000 calls of even the shortest traced function (an
#: in_pcblookup of a few hundred steps, ~610 at this bound) fill MAX_BYTES:
#: a trace of more would be one that analyze refuses.  gdb takes any number
#: (``set $kc_samples = 99999999999999999999`` was accepted and never ended).
SAMPLES_MAX = 10000



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


#: A C function name: what --outer, --inner and --mark name, and a trace's entries.
_FUNC = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def check_function(name: str, what: str) -> str:
    """``name`` if it is a C function name, else KcountError naming ``what``."""
    if not isinstance(name, str) or not _FUNC.fullmatch(name):
        raise KcountError(f"{what} {show(name)}: not a C function name")
    return name


def _is_int(v: object) -> bool:
    """An amd64 register value as record writes it: an integer in [0, 2**64)
    (kcount_gdb masks every register read to 64 bits)."""
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 64


class _DuplicateKey(KcountError):
    """A JSON object of a trace that names a key twice."""


def _no_duplicates(pairs: list) -> dict:
    """json's object_pairs_hook: an object that names a key twice is no trace
    (json keeps the last one without a word). Raises ValueError naming it."""
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(f"the key {show(key, 40)!r} is given twice in one object")
        out[key] = value
    return out


#: The keys record writes: of the trace, and of each sample.
TRACE_KEYS = ("outer", "entries", "asm", "samples")
SAMPLE_KEYS = ("pc", "sp", "cas", "curthread", "complete")
#: An address as record writes one ("%#x": 0x and hex digits, 64 bits).
_ADDR = re.compile(r"0x[0-9a-fA-F]{1,16}")
#: Digits of the longest integer a trace holds: 2**64-1 has 20.
_INT_DIGITS = 20


def _json_int(text: str):
    """A JSON integer as json.loads reads it, or None past 2**64's digits: Python's
    int() refuses 4,300 digits or more (with its own words), and no register
    value has more than :data:`_INT_DIGITS`; the checks name the key."""
    return int(text) if len(text.lstrip("-")) <= _INT_DIGITS else None


def _check_sample(k: int, s: object) -> None:
    """Refuse sample ``k`` (1-based) unless it is what record writes."""
    if not isinstance(s, dict):
        raise ValueError(f"sample {k} is not an object with 'pc' and 'sp' lists")
    other = [key for key in s if key not in SAMPLE_KEYS]
    if other:
        raise ValueError(f"sample {k}: {show(other[0], 40)} is no key record writes (a "
                         f"sample has {', '.join(SAMPLE_KEYS)})")
    for key in ("pc", "sp"):
        v = s.get(key)
        if not isinstance(v, list) or not all(_is_int(x) for x in v):
            raise ValueError(f"sample {k}: '{key}' must be a list of integers from 0 to "
                             "2**64-1 (program counters and stack pointers)")
    if not s["pc"]:
        raise ValueError(f"sample {k}: no step (a recorded call enters its function)")
    if len(s["pc"]) != len(s["sp"]):
        raise ValueError(f"sample {k}: {len(s['pc'])} pcs but {len(s['sp'])} sps")
    # record stops a sample at the outer's ret, the first step above its entry's
    # stack pointer, and keeps no such step: a higher one is no call of the outer
    # (the stack grows down: a callee entered above it was read as one)
    up = next((i for i, sp in enumerate(s["sp"]) if sp > s["sp"][0]), None)
    if up is not None:
        raise ValueError(f"sample {k}: step {up + 1}'s stack pointer {s['sp'][up]:#x} is "
                         f"above the entry's {s['sp'][0]:#x}: after the outer function "
                         "returned (record ends a sample at its ret)")
    cas = s.get("cas")
    if cas is not None and not (isinstance(cas, list) and all(
            isinstance(t, list) and len(t) == 3 and all(_is_int(x) for x in t) for t in cas)):
        raise ValueError(f"sample {k}: 'cas' must be a list of [step, rax, src] triples "
                         "of integers from 0 to 2**64-1")
    if cas and max(t[0] for t in cas) >= len(s["pc"]) or cas and min(t[0] for t in cas) < 0:
        raise ValueError(f"sample {k}: a 'cas' step is not a step of the sample")
    if s.get("curthread") is not None and not _is_int(s["curthread"]):
        raise ValueError(f"sample {k}: 'curthread' must be an integer (a thread pointer)")
    if "complete" in s and not isinstance(s["complete"], bool):
        raise ValueError(f"sample {k}: 'complete' must be true or false")


def load(path: str) -> dict:
    """Read a trace file written by ``record`` (``-``: standard input).

    Raises KcountError (one line naming the file and, in the trace's own
    terms, what is wrong) for a file that cannot be read or is not a trace:
    not UTF-8, not JSON, not an object with ``outer`` (a function name),
    ``entries`` (function name -> hex address) and ``samples`` (objects with
    integer ``pc`` and ``sp`` lists of one length, optional ``cas`` triples,
    ``curthread``, ``complete``), or an ``asm`` that is not hex address -> text.
    """
    try:
        data = read_limited(path, "a kcount trace", MAX_BYTES, text=True)
    except OSError as exc:
        raise KcountError(f"{show(path)}: {os_reason(exc)}") from None
    except DataError as exc:
        raise KcountError(str(exc)) from None
    if path == "-" and not data:
        raise KcountError("-: standard input is empty (it can be read only once)")
    where = show(path)
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark an editor added is no content
    except UnicodeDecodeError:
        raise KcountError(f"{where}: not a kcount trace: not UTF-8 text (a trace is the "
                          "JSON rxl kcount record writes)") from None
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicates, parse_int=_json_int)
    except RecursionError:
        raise KcountError(f"{where}: not a kcount trace: JSON nested too deeply") from None
    except _DuplicateKey as exc:
        raise KcountError(f"{where}: not a kcount trace: {exc}") from None
    except ValueError as exc:
        raise KcountError(f"{where}: not a kcount trace: not JSON "
                          f"({json_reason(exc)})") from None
    try:
        if not isinstance(doc, dict):
            raise ValueError("a JSON object with 'outer', 'entries' and 'samples' is "
                             f"expected, not a {'list' if isinstance(doc, list) else 'value'}")
        other = [key for key in doc if key not in TRACE_KEYS]
        if other:
            raise ValueError(f"{show(other[0], 40)} is no key record writes (a trace has "
                             f"{', '.join(TRACE_KEYS)})")
        for key, what in (("outer", "the traced function"),
                          ("entries", "the functions' entry addresses"),
                          ("samples", "the recorded calls")):
            if key not in doc:
                raise ValueError(f"no '{key}' ({what})")
        outer = doc["outer"]
        if not isinstance(outer, str) or not _FUNC.fullmatch(outer):
            raise ValueError("'outer' must be a function name, got " + (
                f"'{show(outer, 40)}'" if isinstance(outer, str) else show(outer, 40)))
        if not isinstance(doc["entries"], dict):
            raise ValueError("'entries' must map function names to hex addresses")
        entries = {}
        for name, addr in doc["entries"].items():
            if not _FUNC.fullmatch(name) or not isinstance(addr, str) or \
                    not _ADDR.fullmatch(addr):
                raise ValueError(f"'entries': {show(name, 40)}: {show(addr, 40)} is not "
                                 "a hex address of a function (0x and hex digits, as "
                                 "record writes it)")
            entries[name] = int(addr, 16)
        if outer not in entries:
            raise ValueError(f"'outer' {outer} has no address in 'entries' (record writes "
                             "the traced function's own)")
        samples = doc["samples"]
        if not isinstance(samples, list):
            raise ValueError("'samples' must be a list of recorded calls")
        if not samples:
            raise ValueError("'samples' is empty: record writes at least one call "
                             "(--samples >= 1)")
        for k, smp in enumerate(samples, 1):
            _check_sample(k, smp)
        asm = None
        if doc.get("asm") is not None:
            if not isinstance(doc["asm"], dict) or not all(
                    isinstance(k, str) and _ADDR.fullmatch(k)
                    and isinstance(v, str) for k, v in doc["asm"].items()):
                raise ValueError("'asm' must map hex addresses to instruction text")
            asm = kcount_ops.parse_asm(doc["asm"])
    except ValueError as exc:
        raise KcountError(f"{where}: not a kcount trace: {exc}") from None
    return {"outer": outer, "entries": entries, "samples": samples, "asm": asm,
            "path": where}


#: What a command with ``--mark`` says of an outer function with no marks
#: (:func:`marked`'s ``no_mark``): analyze, sites, diff.
GIVE_MARK = "give --mark FUNCTION"
#: What ``table`` says instead: it has no ``--mark``; the cost table's value of
#: a trace is its outer function's own marks (:func:`mark_values`).
TABLE_NO_MARK = ("the cost table reads the marks of those outer functions only (it "
                 "takes no --mark); record the trace with one of them as --outer")


def marked(doc: dict, mark: Optional[str] = None,
           samples: Optional[Sequence[Sample]] = None, *,
           no_mark: str = GIVE_MARK) -> Dict[str, List[int]]:
    """The one check of which calls of a trace ``analyze``, ``sites``, ``diff``
    and ``table`` read: per mark, the indices of the complete samples that
    entered it, in mark order. ``no_mark``: what the refusal of an outer
    function with no marks tells to do (:data:`GIVE_MARK`, or table's
    :data:`TABLE_NO_MARK`).

    ``mark`` (``--mark``): that function, which the trace must have recorded
    (among its entries, and not the outer function itself). Without it,
    the outer function's marks (:data:`MARKS`) that a complete sample
    entered. Raises KcountError (one line naming the trace) for an outer
    function with no marks and no ``--mark``, a mark not recorded, or no
    complete sample entering any mark read: a trace that shows nothing.
    """
    where = doc.get("path", "trace")
    if samples is None:
        samples = samples_of(doc)
    if mark is None:
        marks = MARKS.get(doc["outer"])
        if not marks:
            raise KcountError(f"{where}: outer {doc['outer']} has no default mark (one of "
                              f"{', '.join(MARKS)}); {no_mark}")
        for m in marks:
            if m not in doc["entries"]:
                raise KcountError(f"{where}: outer {doc['outer']}'s mark {m} was not "
                                  f"recorded (its functions: "
                                  f"{', '.join(sorted(doc['entries']))})")
    else:
        check_function(mark, "--mark")
        if mark == doc["outer"]:
            raise KcountError(f"--mark {mark}: the outer function of {where} (every call "
                              "enters it); give a function it calls")
        if mark not in doc["entries"]:
            raise KcountError(f"--mark {mark}: {where} did not record it (its functions: "
                              f"{', '.join(sorted(doc['entries']))})")
        marks = (mark,)
    got = {m: [i for i, s in enumerate(samples) if s.complete and s.frames.get(m)]
           for m in marks}
    got = {m: idx for m, idx in got.items() if idx}
    if not got:
        n = sum(1 for s in samples if s.complete)
        raise KcountError(f"{where}: no complete sample entered {' or '.join(marks)} "
                          f"({n} of {len(samples)} complete): no marked call to read")
    return got


def default_mark(doc: dict, mark: Optional[str]) -> str:
    """The mark whose calls ``sites`` and ``diff`` read: ``mark`` (``--mark``), else
    the first of the outer function's marks a complete sample entered
    (:func:`marked`, which raises KcountError)."""
    return next(iter(marked(doc, mark)))


def samples_of(doc: dict) -> List[Sample]:
    """Per recorded invocation: its total and the frames of every entry but the outer.

    Raises KcountError for a sample that is not ``{"pc": [...], "sp":
    [...]}`` of integers of equal length, or whose ``cas`` steps or pcs
    do not match the trace's disassembly.
    """
    where = doc.get("path", "trace")
    samples = doc["samples"]
    try:
        if not isinstance(samples, list):
            raise ValueError("'samples' must be a list of recorded calls")
        for k, smp in enumerate(samples, 1):
            _check_sample(k, smp)
    except ValueError as exc:
        raise KcountError(f"{where}: {exc}") from None
    marks = MARKS.get(doc["outer"], ())
    asm = doc.get("asm")
    rm = [a for n, a in doc["entries"].items() if n in kcount_ops.RM_READ_ENTRIES]
    out = []
    for k, s in enumerate(samples, 1):
        pcs = [p & _MASK for p in s["pc"]]
        sps = [p & _MASK for p in s["sp"]]
        frames = {name: frame_counts(pcs, sps, addr) for name, addr in doc["entries"].items()
                  if name != doc["outer"]}
        ops = None
        if asm is not None:
            try:
                td = s.get("curthread")
                ops = kcount_ops.count_ops(pcs, asm, kcount_ops.parse_cas(s.get("cas")),
                                           td, rm)
            except KeyError as exc:
                pc = exc.args[0]
                raise KcountError(f"{where}: sample {k}: no disassembly for pc "
                                  f"{pc:#x}" if isinstance(pc, int) else
                                  f"{where}: sample {k}: no disassembly for a pc") from None
            except (ValueError, TypeError, OverflowError) as exc:
                raise KcountError(f"{where}: sample {k}: {exc}") from None
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
    the cost table's ``{"instructions", "locks", "atomics"}``: the low median over
    those samples, of each count on its own (:func:`marked`: marks no
    sample entered are left out, and a trace where none is refused).  Raises KcountError when the outer function has no marks or
    the trace has no disassembly.
    """
    if doc.get("asm") is None:
        raise KcountError("trace has no disassembly (recorded before locks and "
                          "atomics were counted); record it again")
    samples = samples_of(doc)
    out: Dict[str, Dict[str, int]] = {}
    for m, idx in marked(doc, samples=samples, no_mark=TABLE_NO_MARK).items():
        got = [samples[i] for i in idx]
        out[m] = {"instructions": statistics.median_low([s.total for s in got]),
                  "locks": statistics.median_low([s.ops.locks for s in got]),
                  "atomics": statistics.median_low([s.ops.atomics for s in got])}
    return out


def _add(values: Sequence[Dict[str, int]]) -> Dict[str, int]:
    return {k: sum(v[k] for v in values) for k in ("instructions", "locks", "atomics")}


def case_value(doc: dict) -> Dict[str, int]:
    """The cost table's ``{"instructions", "locks", "atomics"}`` of one trace.

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
    """The cost table's JSON from ``{(case, variant): [trace, ...]}``. Pure.

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
    gdbstub; ``script``: a file holding :data:`rxl.bench.kcount_gdb.GDB_SCRIPT`; ``only_syn``:
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
        # a gdb string literal: no quote, backslash or control character can be in it
        if isinstance(value, str) and any(c in '"\\' or ord(c) < 32 for c in value):
            raise KcountError(f"{value.encode('unicode_escape').decode()}: gdb's ${name} "
                              "cannot hold a double quote, a backslash or a control character")
        v = f'"{value}"' if isinstance(value, str) else str(value)
        return ["-ex", f"set ${name} = {v}"]

    return ([gdb, "-batch", "-nx", kernel] + conv("kc_outer", outer)
            + conv("kc_entries", ",".join(f"{k}={v:#x}" for k, v in entries.items()))
            + conv("kc_out", out)
            + conv("kc_remote", remote) + conv("kc_samples", samples)
            + conv("kc_limit", limit) + conv("kc_only_syn", int(only_syn))
            + conv("kc_sched", "off" if others_run else "step")
            + ["-x", script])


def record_names(outer: str, inner: Sequence[str]) -> List[str]:
    """``outer`` first, then ``inner`` and the outer's marks, each once."""
    return [outer] + [n for n in dict.fromkeys(list(inner) + list(MARKS.get(outer, ())))
                      if n != outer]


def dry_run_lines(kernel: str, port: int, samples: int, outer: str, names: Sequence[str],
                  out: str, only_syn: bool = False, **kw) -> List[str]:
    """The nm and gdb command lines :func:`record` would run (addresses shown as 0)."""
    script = str(Path(tempfile.gettempdir()) / "rxl-kcount-XXXXXX.py")
    return [shlex.join(["nm", "-P", kernel]),
            f"# {script}: rxl.bench.kcount_gdb.GDB_SCRIPT; <addresses> from nm",
            shlex.join(gdb_argv(kernel, f"127.0.0.1:{port}", str(Path(out).resolve()),
                                  script, samples=samples, outer=outer,
                                  entries={n: 0 for n in names}, only_syn=only_syn,
                                  **kw))]


def record(kernel: str, port: int, samples: int, outer: str, names: Sequence[str],
           out: str, only_syn: bool = False, **kw) -> None:
    """Record ``samples`` invocations of ``outer`` into ``out`` (JSON).

    ``only_syn``: step only SYN segments; ``kw``: ``limit``, ``others_run``
    (:func:`gdb_argv`).
    Raises KcountError when nm fails, a name is not in the kernel, or gdb
    exits non-zero or leaves no trace.
    """
    r = subprocess.run(["nm", "-P", kernel], capture_output=True, text=True)
    if r.returncode != 0:
        raise KcountError(f"nm -P {kernel} failed: {r.stderr.strip()}")
    entries = symbol_addresses(r.stdout, names, kcount_ops.RM_READ_ENTRIES)
    with tempfile.NamedTemporaryFile("w", prefix="rxl-kcount-", suffix=".py") as f:
        f.write(kcount_gdb.GDB_SCRIPT)
        f.flush()
        argv = gdb_argv(kernel, f"127.0.0.1:{port}", str(Path(out).resolve()), f.name,
                          samples=samples, outer=outer, entries=entries,
                          only_syn=only_syn, **kw)
        r = subprocess.run(argv)
    if r.returncode != 0 or not Path(out).is_file():
        raise KcountError(f"gdb exited {r.returncode}; no trace in {out}")


def symbolizer(nm_output: str) -> Callable[[int], str]:
    """A function mapping a pc to the name of the text symbol holding it,
    from ``nm -P`` output. Pure.

    Only text symbols (``T``/``t``/``W``/``w``) count; a pc below the
    first one maps to ``"?"``.  Of two symbols at one address the first
    listed wins.
    """
    syms: Dict[int, str] = {}
    for line in nm_output.splitlines():
        f = line.split()
        if len(f) >= 3 and f[1] in "TtWw":
            try:
                syms.setdefault(int(f[2], 16), f[0])
            except ValueError:
                continue
    addrs = sorted(syms)

    def name(pc: int) -> str:
        i = bisect.bisect_right(addrs, pc) - 1
        return syms[addrs[i]] if i >= 0 else "?"

    return name


def sites(sample: dict, asm: Dict[int, str], name: Callable[[int], str]) -> Dict[str, Tuple[int, int]]:
    """``{function: (atomics, locks)}`` of one recorded invocation.

    ``sample``: a trace sample (``pc``, ``cas``, ``curthread``); ``asm``:
    the trace's parsed disassembly. rmlock reads are not listed (they take
    no atomic; see kcount_ops). Raises KeyError for a pc without
    disassembly.
    """
    pcs = [int(p) & ((1 << 64) - 1) for p in sample["pc"]]
    atom: Counter = Counter(name(pc) for pc in pcs if kcount_ops.is_atomic(asm[pc]))
    lock: Counter = Counter()
    td = sample.get("curthread")
    for step, rax, src in kcount_ops.parse_cas(sample.get("cas")):
        if kcount_ops.acquisition(rax, src, None if td is None else int(td)):
            lock[name(pcs[step])] += 1
    return {f: (atom[f], lock[f]) for f in sorted(set(atom) | set(lock))}


def self_counts(doc: dict, mark: str, name: Callable[[int], str]) -> Dict[str, int]:
    """``{function: instructions}``: per function, the low median over the
    complete samples that entered ``mark`` of the instructions executed
    with the pc inside that function (its own, callees not included; a
    sample that never ran it counts 0). Raises KcountError if no sample
    entered ``mark``."""
    idx = marked(doc, mark)[mark]
    per = [Counter(name(int(p) & ((1 << 64) - 1)) for p in doc["samples"][i]["pc"])
           for i in idx]
    funcs = set().union(*per)
    return {f: statistics.median_low([c.get(f, 0) for c in per]) for f in sorted(funcs)}


def self_diff(a: Dict[str, int], b: Dict[str, int]) -> List[Tuple[str, int, int]]:
    """``(function, a, b)`` for every function whose count differs, largest
    difference first (ties by name). Pure."""
    rows = [(f, a.get(f, 0), b.get(f, 0)) for f in set(a) | set(b)
            if a.get(f, 0) != b.get(f, 0)]
    return sorted(rows, key=lambda r: (-abs(r[2] - r[1]), r[0]))


def median_sample(doc: dict, mark: str) -> int:
    """Index of the complete sample that entered ``mark`` whose instruction
    count is the low median of those samples. Raises KcountError if none."""
    samples = samples_of(doc)
    idx = marked(doc, mark, samples)[mark]
    med = statistics.median_low([samples[i].total for i in idx])
    return next(i for i in idx if samples[i].total == med)


def kernel_symbols(kernel: str, option: str = "--kernel") -> str:
    """``nm -P`` of ``kernel`` (what :func:`symbolizer` reads), after the one
    check of a kernel file (rxl.tree.build.check_kernel_file, as record's:
    BadOption naming ``option`` for an empty file, a program, a PIE...).
    Raises KcountError when nm fails."""
    from rxl.tree import build as tree_build  # rxl.tree imports nothing of bench
    tree_build.check_kernel_file(kernel, option)
    r = subprocess.run(["nm", "-P", kernel], capture_output=True, text=True)
    if r.returncode:
        raise KcountError(f"nm -P {kernel}: {r.stderr.strip()}")
    return r.stdout


if __name__ == "__main__":  # pragma: no cover
    from rxl.bench.cli import kcount_group  # the command line imports this module
    sys.exit(kcount_group())
