"""learn: learning runs, ``rxl learn``: does commit 4 learn on a real NIC?

Owns the run plan (configurations, phases, boots, the guest server's build
and rc: ``plan``, ``learnd.c``, ``templates/learn-rc.j2``), the options and
their checks (``request``), one invocation's builds, dry run and boots
(``session``), the host-side connection driver (``drive``), the LEARN
console lines (``results``), the metrics beside the model and the table
(``metrics``), the kernel's groups view per window (``groups``), the
per-connection recompute of the kernel's slot choice (``ports``,
``jsolve.c``, also ``python -m rxl.learn.ports``), and the ``rxl learn``
command (``cli``).

May import: ``rxl.decide``, ``rxl.tree``, ``rxl.guest``, ``rxl.verify``, the
leaves and ``rxl.cli``; never ``bench`` or ``host``.
"""
