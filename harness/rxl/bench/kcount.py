"""Instructions a running guest kernel executes per lookup, by single-stepping.

``make bench-core`` counts a userspace analogue of the lbgroup lookup under
callgrind (issue 2).  This module measures the real thing: it attaches gdb
to QEMU's gdbstub (``-gdb tcp:127.0.0.1:PORT``), breaks at the entry of a
kernel function (default ``in_pcblookup_mbuf``, where tcp_input() looks up
the inpcb of every segment), single-steps that one vCPU until the function
returns, and records every program counter and stack pointer.  QEMU masks
interrupts and timers while single-stepping (its default ``sstep`` flags),
and gdb keeps the other vCPUs stopped (``scheduler-locking step``), so a
trace is the function's own path and nothing else.

Two halves:

* ``record`` (runs gdb; ``--dry-run`` prints its argv) writes a JSON trace
  file: ``{"kernel", "outer", "entries": {name: address}, "samples":
  [{"pc": [...], "sp": [...]}]}``;
* ``analyze`` (pure, :func:`frame_counts` and :func:`summarize`) turns the
  traces into instruction counts per invocation of each named function:
  the instructions from its entry up to and including its ``ret``, callees
  included.  A function the compiler inlined is never entered and counts
  nothing.

Usage (``rxl kcount`` is the same as ``python -m rxl.bench.kcount``)::

    python -m rxl.bench.kcount record --kernel K --port 1234 --samples 40 --out T.json
    python -m rxl.bench.kcount analyze T.json [T2.json ...] [--json]
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence


#: Where tcp_input() looks up every segment's inpcb (sys/netinet/in_pcb.c).
OUTER = "in_pcblookup_mbuf"
#: Functions whose frames are counted inside OUTER when they are entered:
#: the lookup without locks, the lbgroup lookup, and the series' selection.
INNER = ("in_pcblookup_hash_locked", "in_pcblookup_lbgroup", "in_pcblbgroup_select")
#: The function whose presence marks a lookup that reached a listening
#: group: a SYN (or the ACK completing a syncache entry), never an
#: established connection's segment.
GROUP_MARK = "in_pcblookup_lbgroup"
#: Give up on a trace after this many steps (a lookup is a few hundred).
STEP_LIMIT = 100000

_MASK = (1 << 64) - 1

#: The gdb side, run with ``gdb -batch -nx -x <this text>``; parameters come
#: through gdb convenience variables set with -ex before it.
GDB_SCRIPT = r'''
import json

import gdb

def _s(name):
    return gdb.convenience_variable(name).string()

def _i(name):
    return int(gdb.convenience_variable(name))

MASK = (1 << 64) - 1
outer, out = _s("kc_outer"), _s("kc_out")
nsamples, limit = _i("kc_samples"), _i("kc_limit")
gdb.execute("set pagination off")
gdb.execute("set confirm off")
gdb.execute("set suppress-cli-notifications on")
# The kernel is a FreeBSD ELF; Debian's gdb has no FreeBSD OS ABI and then
# rejects QEMU's register description unless told the architecture first.
gdb.execute("set osabi none")
gdb.execute("set architecture i386:x86-64")
gdb.execute("target remote " + _s("kc_remote"))
gdb.execute("set scheduler-locking step")

# Addresses come from the host (nm): Debian's gdb reads this FreeBSD
# kernel's minimal symbols 32 bits wide and would cut them off.
entries = dict((k, int(v, 16)) for k, v in
               (e.split("=") for e in _s("kc_entries").split(",")))
bp = gdb.Breakpoint("*%#x" % entries[outer], internal=True)
inf = gdb.selected_inferior()
samples = []
while len(samples) < nsamples:
    gdb.execute("continue", to_string=True)
    fr = gdb.selected_frame()
    pc0 = int(fr.pc()) & MASK
    if pc0 != entries[outer]:
        continue
    sp0 = int(fr.read_register("rsp")) & MASK
    ret = int.from_bytes(bytes(inf.read_memory(sp0, 8)), "little")
    pcs, sps = [pc0], [sp0]
    bp.enabled = False
    while len(pcs) < limit:
        gdb.execute("stepi", to_string=True)
        fr = gdb.selected_frame()
        pc = int(fr.pc()) & MASK
        sp = int(fr.read_register("rsp")) & MASK
        if pc == ret and sp > sp0:
            break
        pcs.append(pc)
        sps.append(sp)
    bp.enabled = True
    samples.append({"pc": pcs, "sp": sps, "complete": len(pcs) < limit})
    gdb.write("kcount: sample %d: %d instructions\n" % (len(samples), len(pcs)))
bp.delete()
with open(out, "w") as f:
    json.dump({"outer": outer, "entries": {k: "%#x" % v for k, v in entries.items()},
               "samples": samples}, f)
gdb.execute("detach")
'''


class KcountError(ValueError):
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
    """One recorded lookup: total instructions and per-function counts."""

    total: int
    frames: Dict[str, List[int]]
    group: bool
    complete: bool


def load(path: str) -> dict:
    """Read a trace file written by ``record``. Raises KcountError, OSError."""
    try:
        doc = json.loads(Path(path).read_text())
        entries = {k: int(v, 16) for k, v in doc["entries"].items()}
        samples = doc["samples"]
        outer = doc["outer"]
    except (ValueError, KeyError, TypeError) as exc:
        raise KcountError(f"{path}: not a kcount trace ({exc})") from None
    return {"outer": outer, "entries": entries, "samples": samples}


def samples_of(doc: dict) -> List[Sample]:
    """Per recorded lookup: its total and the frames of every entry but the outer.

    Raises KcountError for a sample that is not ``{"pc": [...], "sp":
    [...]}`` of integers of equal length.
    """
    samples = doc["samples"]
    if not isinstance(samples, list):
        raise KcountError(f"samples: expected a list, got {type(samples).__name__}")
    out = []
    for k, s in enumerate(samples, 1):
        try:
            pcs = [int(p) & _MASK for p in s["pc"]]
            sps = [int(p) & _MASK for p in s["sp"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise KcountError(f"sample {k}: not a trace of integer pc and sp lists "
                              f"({type(exc).__name__}: {exc})") from None
        if len(pcs) != len(sps):
            raise KcountError(f"sample {k}: {len(pcs)} pcs but {len(sps)} sps")
        frames = {name: frame_counts(pcs, sps, addr) for name, addr in doc["entries"].items()
                  if name != doc["outer"]}
        out.append(Sample(total=len(pcs), frames=frames,
                          group=bool(frames.get(GROUP_MARK)),
                          complete=bool(s.get("complete", True))))
    return out


def summarize(samples: Sequence[Sample]) -> Dict[str, dict]:
    """Median/min/max instructions per function over the group lookups.

    Only complete samples that entered :data:`GROUP_MARK` count (a SYN's
    lookup); the others are reported as ``other``.  Returns ``{name:
    {"n", "median", "min", "max"}}`` with ``"total"`` for the outer
    function, plus ``{"other": {"n": k}}``.
    """
    grp = [s for s in samples if s.group and s.complete]
    res: Dict[str, dict] = {}

    def stats(vals: List[int]) -> dict:
        if not vals:
            return {"n": 0, "median": None, "min": None, "max": None}
        return {"n": len(vals), "median": statistics.median(vals), "min": min(vals),
                "max": max(vals)}

    res["total"] = stats([s.total for s in grp])
    names = sorted({n for s in grp for n in s.frames})
    for name in names:
        res[name] = stats([sum(s.frames[name]) for s in grp if s.frames.get(name)])
    res["other"] = {"n": len(samples) - len(grp)}
    return res


def symbol_addresses(nm_output: str, names: Sequence[str]) -> Dict[str, int]:
    """``{name: address}`` for ``names`` from ``nm -P`` output. Pure.

    Raises KcountError naming the first symbol not found (a kernel built
    without the series has no ``in_pcblbgroup_select``: leave it out).
    """
    found: Dict[str, int] = {}
    for line in nm_output.splitlines():
        f = line.split()
        if len(f) >= 3 and f[0] in names and f[1] in "TtWw":
            found.setdefault(f[0], int(f[2], 16))
    for n in names:
        if n not in found:
            raise KcountError(f"no text symbol {n} in the kernel's symbol table")
    return found


def gdb_argv(kernel: str, remote: str, out: str, script: str, *, samples: int,
             entries: Dict[str, int], outer: str = OUTER,
             limit: int = STEP_LIMIT, gdb: str = "gdb") -> List[str]:
    """The gdb command line of ``record``. Pure.

    ``kernel``: the booted kernel file; ``entries``: ``{function:
    address}``, ``outer`` among them; ``remote``: ``HOST:PORT`` of QEMU's
    gdbstub; ``script``: a file holding :data:`GDB_SCRIPT`.  Raises
    KcountError if ``outer`` has no address.
    """
    if outer not in entries:
        raise KcountError(f"no address for the traced function {outer}")
    def conv(name: str, value) -> List[str]:
        v = f'"{value}"' if isinstance(value, str) else str(value)
        return ["-ex", f"set ${name} = {v}"]

    return ([gdb, "-batch", "-nx", kernel] + conv("kc_outer", outer)
            + conv("kc_entries", ",".join(f"{k}={v:#x}" for k, v in entries.items()))
            + conv("kc_out", out)
            + conv("kc_remote", remote) + conv("kc_samples", samples)
            + conv("kc_limit", limit) + ["-x", script])


if __name__ == "__main__":  # pragma: no cover
    from rxl.bench.cli import kcount
    sys.exit(kcount())
