"""The verdict's rule that a run leaves the host's lbgroup sysctls as it found them.

Issue 23: the learn cases once set ``net.inet.tcp.reuseport_lb.learn`` in
vnet0, and while they ran every other lbgroup of the machine learned too; the
cases now set their knobs in their own vnet jails, and this rule makes sure of
it on every way of running. Each run's rc (``guest/templates/rc.j2``: the own
guest's console, and run.sh over SSH) records every ``net.inet.tcp.reuseport_lb*``
sysctl of the VNET it runs in before its first case and after its last
(:func:`rxl.guest.protocol.host_sysctl_snapshot`); when kyua runs the cases after
run.sh, :class:`rxl.verify.remote.RemoteRun` records them after kyua. The record
arrives as ``SYSCTL`` sentinels, in :attr:`rxl.verify.parse.RunResult.sysctls`
under ``<name>@before`` and ``<name>@after``, and ``<prefix>*@<phase>`` says how
many names that record held.

:func:`reasons` fails a run whose record is missing (a run that stopped, or an
rc without it), a name that appeared or vanished, or a setting whose value
differs; each run gets a note saying what was compared.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional

from rxl.guest.protocol import HOST_SYSCTL_PREFIX, HOST_SYSCTL_READ_ONLY, host_sysctl_key
from rxl.verify import parse


def record(run: parse.RunResult, phase: str) -> Optional[Dict[str, str]]:
    """The run's record of ``phase`` (``before``, ``after``): sysctl name -> value,
    or None when the run has no such record (no ``<prefix>*@<phase>`` line)."""
    if host_sysctl_key(HOST_SYSCTL_PREFIX + "*", phase) not in run.sysctls:
        return None
    tail = "@" + phase
    return {k[:-len(tail)]: v for k, v in run.sysctls.items()
            if k.endswith(tail) and k.startswith(HOST_SYSCTL_PREFIX) and not k[:-len(tail)]
            .endswith("*")}


def differences(before: Mapping[str, str], after: Mapping[str, str]) -> List[str]:
    """What differs from ``before`` to ``after`` (name -> value), one phrase per
    name, by name: ``NAME: V before, W after``, ``NAME: appeared (W)``, ``NAME:
    vanished (was V)``; read-only names count only when they appear or vanish."""
    out = []
    for name in sorted(set(before) | set(after)):
        if name not in before:
            out.append(f"{name}: appeared after the cases ({after[name]})")
        elif name not in after:
            out.append(f"{name}: vanished after the cases (was {before[name]})")
        elif before[name] != after[name] and HOST_SYSCTL_READ_ONLY not in (before[name],
                                                                           after[name]):
            out.append(f"{name}: {before[name]} before the cases, {after[name]} after")
    return out


def reasons(runs: Mapping[str, parse.RunResult]) -> List[str]:
    """The rule's failures over every run (``label: host sysctl ...``, one line
    each), empty when every run recorded the host's lbgroup sysctls before and
    after its cases and they are equal; notes each run with what it compared."""
    out = []
    for label, run in runs.items():
        before, after = record(run, "before"), record(run, "after")
        missing = [p for p, r in (("before", before), ("after", after)) if r is None]
        if missing:
            out.append(f"{label}: host sysctls {HOST_SYSCTL_PREFIX}*: no record "
                       f"{' or '.join(missing)} the cases (the run stopped early, or its rc "
                       "does not record them)")
            continue
        assert before is not None and after is not None
        said = [p for p, r in (("before", before), ("after", after))
                if run.sysctls[host_sysctl_key(HOST_SYSCTL_PREFIX + "*", p)] != str(len(r))]
        if said:
            out.append(f"{label}: host sysctls {HOST_SYSCTL_PREFIX}*: the record "
                       f"{' and '.join(said)} the cases lacks lines (its count line says "
                       "more names than it holds)")
            continue
        diff = differences(before, after)
        out += [f"{label}: host sysctl {d}" for d in diff]
        settings = sum(1 for v in before.values() if v != HOST_SYSCTL_READ_ONLY)
        run.notes.append(f"host sysctls {HOST_SYSCTL_PREFIX}*: {len(before)} names "
                         f"({settings} settings) before the cases, {len(after)} after: "
                         + ("equal" if not diff else f"{len(diff)} differ"))
    return out
