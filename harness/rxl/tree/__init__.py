"""tree: a FreeBSD source tree and what is built from it, on the build host.

Owns the patch series (parse, apply, export, check: ``series``), make.py
kernel builds under the build lock (``build``), the guest userland and ATF
programs (``world``), the test-rig kernels of ``rxl learn`` (``rig``), and
the ``rxl series`` and ``rxl build`` commands (``cli``).

May import: ``rxl.decide`` and the leaf ``rxl.paths``; never ``guest``,
``verify``, ``learn`` or ``bench``.
"""
