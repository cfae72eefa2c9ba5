"""host: this build host, what every stage needs on it and how to install it.

Owns the list of needs (tools, headers, firmware, the eBPF privileges) and
their checks and installs (``doctor``), and the ``rxl doctor`` command
(``cli``).

May import: every other package (the needs are read off the stages' own
argv builders and constants); no package imports it.
"""
