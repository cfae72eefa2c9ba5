"""guest: a FreeBSD guest the harness boots and talks to.

Owns the QEMU argv, guest shapes and the QEMU process (``qemu``), staging a
guest root from built files and the rc/loader.rc templates (``image``,
``templates/``), the console transport that tees, watches and times a boot
(``console``), the sentinel protocol both sides share (``protocol``), the SSH
transport (``ssh``: targets, the session, the dry-run stand-in; ``sshkeys``:
the client key, fingerprints, known_hosts), what the own guest's root needs
for sshd and staging it (``sshguest``), the own guest kept running as an SSH
target (``up``: ``rxl guest up / down``), targets and guest shapes as data
(``targets``), the bhyve argv (``bhyve``), and the ``rxl vm``, ``rxl
targets`` and ``rxl guest`` commands (``cli``).

May import: ``rxl.decide`` and ``rxl.tree`` (a root is staged from what tree
built), the leaves and ``rxl.cli``; never ``verify``, ``learn``, ``bench`` or
``host``.
"""
