"""verify: the main job, ``rxl run``: is the series right in a real kernel?

Owns the run interface (``machine``: where the cases run, and the stages
every machine shares) and its three machines: the own guest over the serial
console or SSH (``ownguest``) and a machine reached over SSH (``target``,
driven by ``remote``, with kyua's path in ``kyua``); the request types
(``request``), the pipeline that chains and records the stages
(``pipeline``), the checks before the first stage (``preflight``), kernel
stamps and the series' base (``kernels``); the console parser (``parse``:
console lines -> results), where the RX queues landed (``placement``), the
reports (``report``: the verdict, report.json, junit.xml, the table), the
rule that a run leaves the host's lbgroup sysctls as it found them
(``hostsysctl``); the
kernel's groups view (``inspect``); and the ``rxl run``, ``rxl parse`` and
``rxl inspect`` commands (``cli``).

May import: ``rxl.decide``, ``rxl.tree``, ``rxl.guest``, the leaves and
``rxl.cli``; never ``learn``, ``bench`` or ``host``.
"""
