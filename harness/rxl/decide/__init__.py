"""decide: what the kernel decides, modelled and bound (no I/O beyond the C build).

Owns the cpu_group tree (``cpugroup``) and where topologies come from
(``topology``: built-in shapes, ``kern.sched.topology_spec`` dumps via
``dump``), how far a connection travels (``distance``), the reference model
of the deal and the receive-CPU choice (``model``), the expected outcomes
per policy (``outcomes``), the cffi binding to the C cores under ``sys/``
(``core``, also ``python -m rxl.decide.core``), the libFuzzer targets of the
same cores (``fuzz``, ``python -m rxl.decide.fuzz``, sources in
``tests/fuzz/``), the commands' documents and tables (``report``), and the
``rxl deal / spread / outcomes`` commands (``cli``).

May import: only the leaves ``rxl.errors`` and ``rxl.paths`` and the command
line's home ``rxl.cli`` (it is the bottom of the harness); every other
package may import it.
"""
