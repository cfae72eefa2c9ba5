"""guest: a FreeBSD guest the harness boots and talks to.

Owns the QEMU argv and guest shapes (``qemu``), staging a guest root from
built files and the rc/loader.rc templates (``image``, ``templates/``),
the console transport that tees, watches and times a boot (``console``),
and the sentinel protocol both sides share (``protocol``).  The SSH
transport belongs here too.

May import: ``rxl.decide`` and the leaf ``rxl.paths``; never ``tree``,
``verify``, ``learn`` or ``bench``.
"""
