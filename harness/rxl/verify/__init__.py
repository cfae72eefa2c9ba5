"""verify: the main job, ``rxl run``: is the series right in a real kernel?

Owns the run's stages (series -> build -> world -> image -> boot -> parse
-> report), each a function returning one stage record, and the pipeline
that chains them; the stages of a run on an SSH target (``remote``:
probe, kernel install, run, kyua; ``remote_stages``); the console parser (``parse``: console lines -> results);
the reports (``report``: report.json, junit.xml, the table); and the
``rxl run``, ``rxl parse`` and ``rxl doctor`` commands (``cli``).

May import: ``rxl.decide``, ``rxl.tree``, ``rxl.guest`` and ``rxl.paths``;
never ``learn`` or ``bench``.
"""
