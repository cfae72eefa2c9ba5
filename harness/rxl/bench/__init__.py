"""bench: what things cost, measured.

Owns the accept-distribution rig (``rxl bench accept``: ``accept``, the C
server ``acceptd.c``), which measures the design's Linux neighbours
(EPOLLEXCLUSIVE, SO_REUSEPORT and its CPU-steering variants) with one
workload; the userspace cost of the cores under callgrind (``core``,
``python -m rxl.bench.core``, ``make bench-core``); and the instructions,
lock acquisitions and atomics per call of a booted kernel via QEMU's
gdbstub (``kcount``, ``rxl kcount``: recording, counting, the table, the
sites; ``kcount_ops`` says which instructions of a trace are locks and
atomics; ``kcount_gdb`` is the script gdb's own interpreter runs); the
setsockopt cost in the guest (``lbsetsock``); whether this host can load the
eBPF selectors (``ebpf_host``).  Commands live in ``cli``.

May import: ``decide``, ``tree``, ``guest``, ``verify``, ``learn``, the
leaves and ``rxl.cli``; never ``host``.
"""
