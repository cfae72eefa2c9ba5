"""guest: a FreeBSD guest the harness boots and talks to.

Owns the QEMU argv and guest shapes (``qemu``), staging a guest root from
built files and the rc/loader.rc templates (``image``, ``templates/``),
the console transport that tees, watches and times a boot (``console``),
the sentinel protocol both sides share (``protocol``), the SSH transport
(``ssh``: the session; ``sshbase``: targets, errors, keys, the dry run),
what the own guest needs for sshd (``sshguest``), targets and guest shapes
as data (``targets``), the bhyve argv (``bhyve``), and the ``rxl vm`` and
``rxl targets`` commands (``cli``).

May import: ``rxl.decide`` and the leaf ``rxl.paths``; never ``tree``,
``verify``, ``learn`` or ``bench``.
"""
