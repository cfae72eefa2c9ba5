"""``rxl doctor``: the host tools and Python modules the slow tiers need.

:data:`DOCTOR_CHECKS` lists each with its Debian install line;
:func:`doctor_results` says which are present.
"""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path
from typing import Callable, List, Optional, Tuple


#: (what, how to check, Debian install line). Checks: "bin:NAME", "file:PATH", "py:MODULE".
DOCTOR_CHECKS: Tuple[Tuple[str, str, str], ...] = (
    ("qemu-system-x86_64", "bin:qemu-system-x86_64", "apt-get install -y qemu-system-x86"),
    ("OVMF firmware", "ovmf", "apt-get install -y ovmf"),
    ("clang-16", "bin:clang-16", "apt-get install -y clang-16"),
    ("ld.lld-16", "bin:ld.lld-16", "apt-get install -y lld-16"),
    ("llvm-readelf-16", "bin:llvm-readelf-16", "apt-get install -y llvm-16"),
    ("llvm-ar-16", "bin:llvm-ar-16", "apt-get install -y llvm-16"),
    ("bmake", "bin:bmake", "apt-get install -y bmake"),
    ("flock", "bin:flock", "apt-get install -y util-linux"),
    ("git", "bin:git", "apt-get install -y git"),
    # rxl bench accept --setup ebpf-deal / ebpf-numa-rr (issue 16).
    ("clang (BPF target, bench eBPF)", "bin:clang", "apt-get install -y clang"),
    ("libbpf headers (bench eBPF)", "file:/usr/include/bpf/libbpf.h",
     "apt-get install -y libbpf-dev"),
    ("python: click", "py:click", "pip install click"),
    ("python: jinja2", "py:jinja2", "pip install jinja2"),
    ("python: yaml", "py:yaml", "pip install pyyaml"),
    ("python: pexpect (console)", "py:pexpect", "pip install pexpect"),
)
#: What each other way to run needs besides the above (``rxl doctor --for``):
#: ``ssh``: rxl run --target (paramiko; the target needs sshd and the harness key);
#: ``bhyve``: rxl vm --start on a FreeBSD host (bhyve, bhyvectl, the edk2-bhyve firmware).
MODE_CHECKS = {
    "guest": (),
    "ssh": (("python: paramiko (SSH targets)", "py:paramiko", "pip install paramiko"),),
    "bhyve": (("bhyve", "bin:bhyve", "pkg: FreeBSD base system (amd64)"),
              ("bhyvectl", "bin:bhyvectl", "pkg: FreeBSD base system (amd64)"),
              ("UEFI firmware for bhyve", "file:/usr/local/share/uefi-firmware/BHYVE_UEFI.fd",
               "pkg install edk2-bhyve")),
}


def doctor_results(which: Callable[[str], Optional[str]] = shutil.which,
                   is_file: Callable[[str], bool] = lambda p: Path(p).is_file(),
                   mode: str = "guest") -> List[Tuple[str, bool, str]]:
    """(name, present, install line) for each of :data:`DOCTOR_CHECKS` and, for
    ``mode`` (a key of :data:`MODE_CHECKS`), that way's own checks; ``bhyve``
    has only its own (a FreeBSD host needs none of the Linux build tools)."""
    from rxl.guest.qemu import find_ovmf
    out = []
    checks = MODE_CHECKS[mode] if mode == "bhyve" else DOCTOR_CHECKS + MODE_CHECKS[mode]
    for name, check, install in checks:
        if check.startswith("bin:"):
            ok = which(check[4:]) is not None
        elif check == "ovmf":
            ok = find_ovmf() is not None
        elif check.startswith("file:"):
            ok = is_file(check[5:])
        else:
            try:
                importlib.import_module(check[3:])
                ok = True
            except ImportError:
                ok = False
        out.append((name, ok, install))
    return out
