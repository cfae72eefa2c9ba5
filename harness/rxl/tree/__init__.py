"""tree: a FreeBSD source tree and what is built from it, on the build host.

Owns the patch series as text (``patch``), applied and exported with git
(``series``) and checked (``check``); the tree ``rxl run`` uses, given,
fetched or a work clone (``base``); make.py kernel builds under the build
lock (``build``, the kernel config ``kernconf``, one kernel-toolchain per
base ``toolchain``, stage timings and bars ``progress``); the guest
userlands: the narrowed world and the ATF programs (``world``), with sshd
(``sshworld``), with kyua (``kyuaworld``); the test-rig kernels of ``rxl
learn`` (``rig``); and the ``rxl series`` and ``rxl build`` commands
(``cli``).

May import: ``rxl.decide``, the leaves and ``rxl.cli``; never ``guest``,
``verify``, ``learn``, ``bench`` or ``host``.
"""
