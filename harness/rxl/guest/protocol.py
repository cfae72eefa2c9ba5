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


def split_sentinel(line: str) -> Tuple[str, str]:
    """``(console text before the sentinel, the sentinel from MARK on)`` of a
    console line; ``(line, "")`` when it holds no :data:`MARK`.

    The rc writes each sentinel at the start of its own line, but the serial
    console is shared: a kernel message printed without its newline yet (the
    kernel's printf and userland's writes to the console interleave byte by
    byte: ``em0: link state changed to UP==RXL== CASE ...``), a test's stderr
    that did not end its line, or a capture tool's timestamp (``[  12.345]
    ==RXL== ...``) can stand before it. The sentinel is then still whole
    from its MARK on, and is read there; the text before it is a console
    line of its own (a panic in it still counts). Every reader of the console
    (the parser, the live watcher, learn's results) splits lines here, so
    none of them drops such a line while another reads it."""
    at = line.find(MARK)
    if at < 0:
        return line, ""
    return line[:at], line[at:]

#: Console patterns that mean the kernel died (FreeBSD panic(9), trap and
#: debugger entry messages). ``panic: `` may follow other output on the same
#: line (recorded: ``debug.kdb.panic: 0panic: kdb_sysctl_panic``) but not a
#: dot, so sysctl names such as ``debug.kdb.panic: 0`` alone do not count.
PANIC_PATTERNS: Tuple[re.Pattern, ...] = (
    re.compile(r"(?<!\.)panic: "),
    re.compile(r"\bFatal trap \d+"),
    re.compile(r"\bKDB: enter"),
)

#: The kernel's prompt for a root file system when none mounted
#: (sys/kern/vfs_mountroot.c, parse_dir_ask: ``printf("\nmountroot> ")``, no
#: newline after it, then it reads the console for ever). Matched at the start of a
#: line, finished or not.
MOUNTROOT_PROMPT = re.compile(r"^mountroot>")
#: Console lines that say why the root did not mount, for the message of a boot
#: stopped at :data:`MOUNTROOT_PROMPT` (the 14 module boot: ``kldload: unexpected
#: relocation type 42, symbol index 143``, ``KLD file msdosfs.ko - could not
#: finalize loading``; vfs_mountroot.c: ``Mounting from msdosfs:/dev/ada0s1 failed
#: with error 19.``).
MOUNTROOT_CAUSES: Tuple[re.Pattern, ...] = (
    re.compile(r"^kldload: "),
    re.compile(r"^KLD file .* could not"),
    re.compile(r"^Mounting from \S+ failed"),
)

#: WITNESS(4) reports of a locking bug that does not panic the kernel
#: (sys/kern/subr_witness.c: a lock order reversal, a duplicate acquisition,
#: sleeping or blocking with non-sleepable locks held).  A kernel with
#: WITNESS also prints "WARNING: WITNESS option enabled, expect reduced
#: performance." at boot; that line is no finding and matches none of these.
WITNESS_PATTERNS: Tuple[re.Pattern, ...] = (
    re.compile(r"lock order reversal"),
    re.compile(r"acquiring duplicate lock of same type"),
    re.compile(r"with the following (?:non-sleepable )?locks held:"),
)

#: A second boot on the same console: the kernel's reboot message or its
#: copyright banner (sys/kern/kern_shutdown.c, sys/kern/init_main.c).  Seen
#: between the BEGIN and END sentinels, the guest rebooted mid-run.
REBOOT_PATTERNS: Tuple[re.Pattern, ...] = (
    re.compile(r"^Rebooting\.\.\."),
    re.compile(r"^Copyright \(c\) 1992-\d+ The FreeBSD Project\."),
)

#: WITNESS's line naming the two locks of a reversal it just reported.
LOR_PAIR = re.compile(r"^lock order (.+?) -> (.+?) (?:attempted|established) at:")

#: Reversals of the base tree that every boot of a WITNESS kernel prints
#: before any code of the series runs, so they are notes, not failures:
#: ``callout -> sched lock`` from start_softclock() in mi_startup(), in
#: every recorded boot of tests/data/console/real-*.log (FreeBSD 14.0-STABLE
#: at patches/BASE, patched or not).  A reversal cut off before its pair
#: line counts as a failure.
KNOWN_LORS = frozenset({("callout", "sched lock")})

#: The host sysctls a run must leave as it found them (issue 23: the learn cases
#: once set ``reuseport_lb.learn`` in vnet0 and every lbgroup of the machine then
#: learned): every name under :data:`HOST_SYSCTL_PARENT` that starts with
#: :data:`HOST_SYSCTL_PREFIX`, in the VNET the rc runs in (vnet0).
HOST_SYSCTL_PARENT = "net.inet.tcp"
HOST_SYSCTL_PREFIX = "net.inet.tcp.reuseport_lb"
#: The value recorded for a name that is not a setting: sysctl(8)'s ``-W`` leaves
#: it out (read-only or a statistic, e.g. the groups view, which shows the
#: machine's listening sockets, not a setting a run can leave behind).
HOST_SYSCTL_READ_ONLY = "(read-only)"
#: The phases of the record: before the first case and after the last.
HOST_PHASES = ("before", "after")


def host_sysctl_key(name: str, phase: str) -> str:
    """The key of ``name``'s value in a run's sysctls (``<name>@<phase>``); the
    record's own line is ``<prefix>*@<phase>``, its value the number of names."""
    return f"{name}@{phase}"


def host_sysctl_snapshot(phase: str) -> str:
    """One line of sh (FreeBSD's sh and sysctl(8) only: the own guest's rc has
    no grep) printing a ``SYSCTL <name>@<phase>: <value>`` sentinel for every
    host lbgroup sysctl (:data:`HOST_SYSCTL_PREFIX`; the value of those
    ``sysctl -NW`` does not list is :data:`HOST_SYSCTL_READ_ONLY`), then
    ``SYSCTL <prefix>*@<phase>: <number of names>``, the line that says the
    record was taken. Raises ValueError for a phase not in :data:`HOST_PHASES`."""
    if phase not in HOST_PHASES:
        raise ValueError(f"host sysctl record: phase {phase!r} is not one of {HOST_PHASES}")
    parent, prefix, ro = HOST_SYSCTL_PARENT, HOST_SYSCTL_PREFIX, HOST_SYSCTL_READ_ONLY
    return (f"w=' '; for n in $(sysctl -NW {parent} 2>/dev/null); do w=\"$w$n \"; done; "
            f"k=0; for n in $(sysctl -N {parent} 2>/dev/null); do case \"$n\" in {prefix}*) "
            f"k=$((k + 1)); case \"$w\" in *\" $n \"*) v=$(sysctl -n \"$n\" 2>&1);; "
            f"*) v='{ro}';; esac; echo \"{MARK} SYSCTL {host_sysctl_key('$n', phase)}: $v\";; "
            f"esac; done; echo \"{MARK} SYSCTL {host_sysctl_key(prefix + '*', phase)}: $k\"")
