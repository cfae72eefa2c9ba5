"""``rxl kcount record``: gdb on QEMU's gdbstub, single-stepping one function.

:func:`record_names` says which functions' entries to look up (the outer
one, the inner ones, the outer's marks); :func:`dry_run_lines` is what
``--dry-run`` prints; :func:`record` looks the entries up with ``nm -P``,
runs gdb with :data:`rxl.bench.kcount.GDB_SCRIPT` and leaves the trace
file.  Errors: :class:`rxl.bench.kcount.KcountError`, one line.
"""

from __future__ import annotations

import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import List, Sequence

from rxl.bench import kcount as K


def record_names(outer: str, inner: Sequence[str]) -> List[str]:
    """``outer`` first, then ``inner`` and the outer's marks, each once."""
    return [outer] + [n for n in dict.fromkeys(list(inner) + list(K.MARKS.get(outer, ())))
                      if n != outer]


def dry_run_lines(kernel: str, port: int, samples: int, outer: str, names: Sequence[str],
                  out: str, only_syn: bool = False, **kw) -> List[str]:
    """The nm and gdb command lines :func:`record` would run (addresses shown as 0)."""
    script = str(Path(tempfile.gettempdir()) / "rxl-kcount-XXXXXX.py")
    return [shlex.join(["nm", "-P", kernel]),
            f"# {script}: rxl.bench.kcount.GDB_SCRIPT; <addresses> from nm",
            shlex.join(K.gdb_argv(kernel, f"127.0.0.1:{port}", str(Path(out).resolve()),
                                  script, samples=samples, outer=outer,
                                  entries={n: 0 for n in names}, only_syn=only_syn,
                                  **kw))]


def record(kernel: str, port: int, samples: int, outer: str, names: Sequence[str],
           out: str, only_syn: bool = False, **kw) -> None:
    """Record ``samples`` invocations of ``outer`` into ``out`` (JSON).

    ``only_syn``: step only SYN segments; ``kw``: ``limit``, ``others_run``
    (:func:`rxl.bench.kcount.gdb_argv`).
    Raises KcountError when nm fails, a name is not in the kernel, or gdb
    exits non-zero or leaves no trace.
    """
    r = subprocess.run(["nm", "-P", kernel], capture_output=True, text=True)
    if r.returncode != 0:
        raise K.KcountError(f"nm -P {kernel} failed: {r.stderr.strip()}")
    entries = K.symbol_addresses(r.stdout, names, K.kcount_ops.RM_READ_ENTRIES)
    with tempfile.NamedTemporaryFile("w", prefix="rxl-kcount-", suffix=".py") as f:
        f.write(K.GDB_SCRIPT)
        f.flush()
        argv = K.gdb_argv(kernel, f"127.0.0.1:{port}", str(Path(out).resolve()), f.name,
                          samples=samples, outer=outer, entries=entries,
                          only_syn=only_syn, **kw)
        r = subprocess.run(argv)
    if r.returncode != 0 or not Path(out).is_file():
        raise K.KcountError(f"gdb exited {r.returncode}; no trace in {out}")
