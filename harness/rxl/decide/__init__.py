"""decide: what the kernel decides, modelled and bound (no I/O beyond the C build).

Owns the cpu_group topology (parsing ``kern.sched.topology_spec``, built-in
shapes), the reference model of the deal and the receive-CPU choice
(``model``), the expected outcomes per policy (``outcomes``), the cffi
binding to the C cores under ``sys/`` (``core``, also ``python -m
rxl.decide.core``), the libFuzzer targets of the same cores (``fuzz``,
``python -m rxl.decide.fuzz``, sources in ``tests/fuzz/``), and the ``rxl
deal / spread / outcomes`` commands (``cli``).

May import: nothing of rxl (it is the bottom of the harness); every other
package may import it.
"""
