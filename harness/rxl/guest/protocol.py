"""What the guest prints and the host looks for on its console.

The guest's ``/etc/rc`` (``templates/rc.j2``, and learn's ``learn-rc.j2``)
brackets everything the host needs between sentinel lines starting with
:data:`MARK`; :mod:`rxl.guest.console` watches for them and for
:data:`PANIC_PATTERNS`, and the console parser (``rxl.verify``) reads them
back.  One place, so the two sides cannot drift.
"""

from __future__ import annotations

import re
from typing import Tuple

#: Prefix of every sentinel line printed by the guest's /etc/rc.
MARK = "==RXL=="

#: Console patterns that mean the kernel died (FreeBSD panic(9), trap and
#: debugger entry messages). ``panic: `` may follow other output on the same
#: line (recorded: ``debug.kdb.panic: 0panic: kdb_sysctl_panic``) but not a
#: dot, so sysctl names such as ``debug.kdb.panic: 0`` alone do not count.
PANIC_PATTERNS: Tuple[re.Pattern, ...] = (
    re.compile(r"(?<!\.)panic: "),
    re.compile(r"\bFatal trap \d+"),
    re.compile(r"\bKDB: enter"),
)
