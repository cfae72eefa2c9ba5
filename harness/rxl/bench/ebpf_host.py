"""Whether this Linux host can load the accept rig's eBPF selectors.

Two things no package installs, checked by ``rxl bench accept`` before an
eBPF setup starts (:func:`rxl.bench.ebpf.unavailable`) and listed by
``rxl doctor --for bench``:

* privilege: loading an SK_REUSEPORT program and its maps needs root, or
  the capabilities CAP_BPF (39) and CAP_NET_ADMIN (12) in the effective
  set (bit numbers of linux/capability.h; CapEff of /proc/self/status);
* the kernel: Linux >= :data:`KERNEL_MIN` (5.12), the first with BPF's
  atomic instructions that return the old value (BPF_FETCH), which the
  programs' tickets and counters use (``-mcpu=v3``).
"""

from __future__ import annotations

import os
import platform
import re
from typing import Optional, Tuple

#: First Linux release with BPF_FETCH atomics (the selectors' counters).
KERNEL_MIN: Tuple[int, int] = (5, 12)
#: linux/capability.h bit numbers.
CAP_NET_ADMIN = 12
CAP_BPF = 39


def cap_eff(status_text: Optional[str] = None) -> int:
    """The effective capability set (``CapEff:`` of /proc/self/status, hex) as an
    int; 0 when it cannot be read (not Linux) or holds no such line."""
    if status_text is None:
        try:
            with open("/proc/self/status") as fh:
                status_text = fh.read()
        except OSError:
            return 0
    m = re.search(r"^CapEff:\s*([0-9a-fA-F]{1,32})\s*$", status_text, re.M)
    return int(m.group(1), 16) if m else 0


def privilege_problem(euid: Optional[int] = None, caps: Optional[int] = None) -> Optional[str]:
    """None when root or CAP_BPF and CAP_NET_ADMIN are effective, else why not."""
    euid = os.geteuid() if euid is None else euid
    if euid == 0:
        return None
    caps = cap_eff() if caps is None else caps
    need = (1 << CAP_BPF) | (1 << CAP_NET_ADMIN)
    if caps & need == need:
        return None
    return "loading BPF needs root (or CAP_BPF and CAP_NET_ADMIN)"


def kernel_release(release: Optional[str] = None) -> Optional[Tuple[int, int]]:
    """(major, minor) of a Linux release string (``6.1.0-18-amd64``), or None."""
    release = platform.release() if release is None else release
    m = re.match(r"(\d{1,4})\.(\d{1,4})", release or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def kernel_problem(system: Optional[str] = None, release: Optional[str] = None
                   ) -> Optional[str]:
    """None on Linux >= :data:`KERNEL_MIN`, else why not (one line)."""
    system = platform.system() if system is None else system
    if system != "Linux":
        return f"eBPF SK_REUSEPORT needs Linux (this is {system})"
    v = kernel_release(release)
    want = f"{KERNEL_MIN[0]}.{KERNEL_MIN[1]}"
    if v is None:
        return f"kernel release {release or platform.release()!r} unknown; need Linux >= {want}"
    if v < KERNEL_MIN:
        return (f"Linux {v[0]}.{v[1]} is older than {want} "
                "(BPF atomics that return the old value)")
    return None
