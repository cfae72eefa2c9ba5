"""``rxl kcount sites``: where a traced call's locks and atomics are, by function.

Issue 10's steady-state target allows no added lock and no atomic "on a
line another CPU writes".  The counts of ``rxl kcount table`` say whether
the patched kernel adds any; this says in which functions they are, so a
pristine and a patched trace can be compared function by function.

:func:`symbolizer` maps a program counter to the kernel text symbol that
contains it (``nm -P`` output, pure); :func:`sites` counts, in one
recorded invocation, the atomics and lock acquisitions per function
(:mod:`rxl.bench.kcount_ops` defines both).  An inlined lock is counted in
the function it was inlined into.
"""

from __future__ import annotations

import bisect
import statistics
import subprocess
from collections import Counter
from typing import Callable, Dict, List, Tuple

from rxl.bench import kcount as K
from rxl.bench import kcount_ops


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
    samples = K.samples_of(doc)
    idx = [i for i, s in enumerate(samples) if s.complete and mark in s.marks]
    if not idx:
        raise K.KcountError(f"no complete sample entered {mark}")
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
    samples = K.samples_of(doc)
    idx = [i for i, s in enumerate(samples) if s.complete and mark in s.marks]
    if not idx:
        raise K.KcountError(f"no complete sample entered {mark}")
    med = statistics.median_low([samples[i].total for i in idx])
    return next(i for i in idx if samples[i].total == med)


def command():
    """The click command ``rxl kcount sites`` (added in rxl.bench.cli)."""
    import click

    @click.command("sites")
    @click.argument("trace", type=click.Path(exists=True, dir_okay=False))
    @click.option("--kernel", required=True, type=click.Path(exists=True, dir_okay=False),
                  help="The kernel the trace was recorded on (symbols).")
    @click.option("--mark", help="Which marked calls (default: the outer's first mark).")
    def sites_cmd(trace, kernel, mark):
        """Atomics and locks per function in the median marked call of TRACE."""
        try:
            doc = K.load(trace)
            if doc.get("asm") is None:
                raise K.KcountError("trace has no disassembly")
            mark = mark or K.MARKS.get(doc["outer"], ("",))[0]
            i = median_sample(doc, mark)
            got = sites(doc["samples"][i], doc["asm"], symbolizer(_nm(kernel)))
        except K.KcountError as exc:
            raise click.ClickException(str(exc))
        click.echo(f"{trace}: sample {i + 1} (median of the calls entering {mark})")
        for f, (a, lk) in got.items():
            click.echo(f"  {f:36} atomics {a:3}  locks {lk:3}")
        click.echo(f"  {'total':36} atomics {sum(a for a, _ in got.values()):3}  "
                   f"locks {sum(lk for _, lk in got.values()):3}")

    return sites_cmd


def _nm(kernel: str) -> str:
    r = subprocess.run(["nm", "-P", kernel], capture_output=True, text=True)
    if r.returncode:
        raise K.KcountError(f"nm -P {kernel}: {r.stderr.strip()}")
    return r.stdout


def diff_command():
    """The click command ``rxl kcount diff`` (added in rxl.bench.cli)."""
    import click

    @click.command("diff")
    @click.argument("base", type=click.Path(exists=True, dir_okay=False))
    @click.argument("base_kernel", type=click.Path(exists=True, dir_okay=False))
    @click.argument("other", type=click.Path(exists=True, dir_okay=False))
    @click.argument("other_kernel", type=click.Path(exists=True, dir_okay=False))
    @click.option("--mark", help="Which marked calls (default: the outer's first mark).")
    @click.option("--top", default=25, show_default=True, help="Rows to print.")
    def diff_cmd(base, base_kernel, other, other_kernel, mark, top):
        """Per function, the median own instructions of the marked calls of
        BASE (on BASE_KERNEL) and OTHER: the functions that differ."""
        try:
            da, db = K.load(base), K.load(other)
            mark = mark or K.MARKS.get(da["outer"], ("",))[0]
            a = self_counts(da, mark, symbolizer(_nm(base_kernel)))
            b = self_counts(db, mark, symbolizer(_nm(other_kernel)))
        except K.KcountError as exc:
            raise click.ClickException(str(exc))
        rows = self_diff(a, b)
        click.echo(f"{'function':36} {'base':>7} {'other':>7} {'delta':>7}  ({mark})")
        for f, x, y in rows[:top]:
            click.echo(f"{f:36} {x:7} {y:7} {y - x:+7}")
        click.echo(f"{'sum of the medians':36} {sum(a.values()):7} {sum(b.values()):7} "
                   f"{sum(b.values()) - sum(a.values()):+7}")

    return diff_cmd

