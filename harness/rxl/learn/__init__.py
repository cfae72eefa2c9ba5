"""learn: learning runs, ``rxl learn``: does commit 3 learn on a real NIC?

Owns the run plan (configurations, phases, boots, the guest server's build
and rc: ``plan``, ``learnd.c``, ``templates/learn-rc.j2``), the host-side
connection driver, the parsing and analysis of the LEARN console lines,
the per-connection recompute of the kernel's slot choice (``ports``,
``jsolve.c``, also ``python -m rxl.learn.ports``), and the ``rxl learn``
command (``cli``).

May import: ``rxl.decide``, ``rxl.tree``, ``rxl.guest``, ``rxl.verify``
and ``rxl.paths``; never ``bench``.
"""
