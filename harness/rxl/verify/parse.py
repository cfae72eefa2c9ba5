"""Guest console lines -> results. Pure: no I/O beyond what the caller passes in.

The guest's ``/etc/rc`` (template ``guest/templates/rc.j2``) prints everything the
host needs between sentinel lines that start with :data:`MARK`::

    ==RXL== BEGIN <label>
    ==RXL== TOPOLOGY BEGIN
    <kern.sched.topology_spec, as printed by sysctl -n>
    ==RXL== TOPOLOGY END
    ==RXL== SYSCTL <name>: <value>            (sysctl output, prefixed)
    ==RXL== ATF BEGIN
    ==RXL== LIST <prog> <case>                (one per case from `prog -l`)
    ==RXL== CASE <prog> <case> rc=<exit> t=<seconds> <resfile first line>
    ==RXL== ATF END
    ==RXL== END <label>

Everything else on the console (loader, kernel messages) is ignored except
panic patterns (:data:`PANIC_PATTERNS`), which mark the run ``panic``.

Rules (the report's trust depends on them):
  * no ``END`` line -> the run is ``crashed`` (a truncated log never passes);
  * a case listed but without a ``CASE`` line -> status ``crashed``;
  * ``rc=124`` (timeout(1)'s exit status) -> status ``timeout``;
  * ATF result words: passed, failed, skipped, expected_failure, broken;
    anything unreadable -> ``broken``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

from rxl.guest.protocol import MARK, PANIC_PATTERNS

#: ``dev.<driver>.<unit>.iflib.rxq<N>.cpu: <cpu>`` as printed by sysctl(8).
RXQ_RE = re.compile(r"^(dev\.([a-z0-9_]+)\.(\d+)\.iflib\.rxq(\d+)\.cpu):\s*(-?\d+)\s*$")

#: Exit status of FreeBSD's timeout(1) when the command timed out.
TIMEOUT_EXIT = 124

ATF_STATUSES = ("passed", "failed", "skipped", "expected_failure", "broken")
#: Statuses the harness adds: ``timeout`` (per-case limit hit) and
#: ``crashed`` (listed but never reported, i.e. the guest died mid-case).
CASE_STATUSES = ATF_STATUSES + ("timeout", "crashed")

_CASE_RE = re.compile(r"^CASE (\S+) (\S+) rc=(-?\d+) t=(\d+) ?(.*)$")


@dataclass(frozen=True)
class CaseResult:
    """One ATF test case. ``seconds`` is wall time in the guest (whole s)."""

    prog: str
    case: str
    status: str
    reason: str = ""
    exit_code: Optional[int] = None
    seconds: Optional[int] = None

    @property
    def name(self) -> str:
        """``<program basename>:<case>``, the key used in reports."""
        return f"{self.prog.rsplit('/', 1)[-1]}:{self.case}"


@dataclass(frozen=True)
class Group:
    """One ``<group>`` of kern.sched.topology_spec: a cpu_group node."""

    level: int
    cache_level: int
    cpus: Tuple[int, ...]
    flags: Tuple[str, ...]
    children: Tuple["Group", ...] = ()


@dataclass
class RunResult:
    """Everything parsed from one console log.

    ``outcome``: ``completed`` (END seen, no panic), ``panic`` (a panic
    pattern matched; wins over everything) or ``crashed`` (no END line).
    ``rxq``: sysctl name -> CPU. ``socket_of_rxq``: sysctl name -> index of
    the top-level topology group holding that CPU (None if unknown).
    """

    label: str = ""
    outcome: str = "crashed"
    begin_seen: bool = False
    end_seen: bool = False
    panic_lines: List[str] = field(default_factory=list)
    topology_xml: str = ""
    topology: Optional[Group] = None
    rxq: Dict[str, int] = field(default_factory=dict)
    sysctls: Dict[str, str] = field(default_factory=dict)
    cases: List[CaseResult] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    last_line: str = ""

    @property
    def sockets(self) -> List[Tuple[int, ...]]:
        """CPU sets of the top-level topology groups (packages / NUMA nodes)."""
        if self.topology is None:
            return []
        if not self.topology.children:
            return [self.topology.cpus]
        return [g.cpus for g in self.topology.children]

    @property
    def socket_of_rxq(self) -> Dict[str, Optional[int]]:
        out: Dict[str, Optional[int]] = {}
        for name, cpu in self.rxq.items():
            out[name] = next((i for i, cpus in enumerate(self.sockets) if cpu in cpus), None)
        return out

    def to_dict(self) -> dict:
        """JSON-ready dict (topology as nested dicts, cases as dicts)."""
        d = asdict(self)
        d["sockets"] = [list(s) for s in self.sockets]
        d["socket_of_rxq"] = self.socket_of_rxq
        d["cases"] = [dict(asdict(c), name=c.name) for c in self.cases]
        return d


class TopologyParseError(ValueError):
    """kern.sched.topology_spec text that is not the expected XML."""


def _cpu_list(text: str) -> Tuple[int, ...]:
    out = []
    for part in (text or "").replace(" ", "").split(","):
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.extend(range(int(lo), int(hi) + 1))
        else:
            out.append(int(part))
    return tuple(out)


def _group(el: ET.Element) -> Group:
    cpu = el.find("cpu")
    flags = tuple(f.get("name", "") for f in el.findall("flags/flag"))
    kids = tuple(_group(c) for c in el.findall("children/group"))
    return Group(
        level=int(el.get("level", "0")),
        cache_level=int(el.get("cache-level", "0")),
        cpus=_cpu_list(cpu.text if cpu is not None else ""),
        flags=flags,
        children=kids,
    )


def parse_topology(xml_text: str) -> Group:
    """Parse ``kern.sched.topology_spec`` XML into the root :class:`Group`.

    Raises :class:`TopologyParseError` on text that is not ``<groups>`` XML.
    """
    text = xml_text.strip()
    if text.startswith("kern.sched.topology_spec:"):
        text = text.split(":", 1)[1].strip()
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise TopologyParseError(f"topology_spec is not XML: {exc}") from None
    if root.tag != "groups" or root.find("group") is None:
        raise TopologyParseError(f"topology_spec root is <{root.tag}>, expected <groups><group>")
    return _group(root.find("group"))


def _case_from_line(body: str) -> Optional[CaseResult]:
    m = _CASE_RE.match(body)
    if not m:
        return None
    prog, case, rc, secs, res = m.groups()
    rc_i = int(rc)
    res = res.strip()
    word, _, reason = res.partition(":")
    word = word.strip()
    reason = reason.strip()
    if rc_i == TIMEOUT_EXIT:
        status, reason = "timeout", reason or "per-case timeout hit"
    elif word in ATF_STATUSES:
        status = word
    else:
        status, reason = "broken", res or f"no result file (exit {rc_i})"
    return CaseResult(prog, case, status, reason, rc_i, int(secs))


def parse_console(lines: Iterable[str]) -> RunResult:
    """Parse console ``lines`` (str, with or without line endings) into a RunResult.

    Never raises on odd input: malformed sentinel lines are recorded in
    ``notes``; a malformed topology is noted and left as ``None``.
    """
    r = RunResult()
    listed: List[Tuple[str, str]] = []
    reported: Dict[Tuple[str, str], CaseResult] = {}
    in_topo = False
    topo: List[str] = []
    for raw in lines:
        line = raw.rstrip("\r\n").replace("\r", "")
        if line.strip():
            r.last_line = line
        if any(p.search(line) for p in PANIC_PATTERNS) and not line.startswith(MARK):
            r.panic_lines.append(line)
        if in_topo:
            if line.startswith(MARK + " TOPOLOGY END"):
                in_topo = False
                r.topology_xml = "\n".join(topo).strip()
            else:
                topo.append(line)
            continue
        m = RXQ_RE.match(line.strip())
        if m:
            r.rxq[m.group(1)] = int(m.group(5))
            continue
        if not line.startswith(MARK):
            continue
        body = line[len(MARK):].strip()
        if body.startswith("BEGIN"):
            r.begin_seen = True
            r.label = body[len("BEGIN"):].strip()
        elif body.startswith("END"):
            r.end_seen = True
        elif body == "TOPOLOGY BEGIN":
            in_topo, topo = True, []
        elif body.startswith("SYSCTL "):
            name, _, value = body[len("SYSCTL "):].partition(":")
            name, value = name.strip(), value.strip()
            m = RXQ_RE.match(f"{name}: {value}")
            if m:
                r.rxq[name] = int(m.group(5))
            else:
                r.sysctls[name] = value
        elif body.startswith("LIST "):
            parts = body.split()
            if len(parts) == 3:
                listed.append((parts[1], parts[2]))
            else:
                r.notes.append(f"malformed LIST line: {line}")
        elif body.startswith("CASE "):
            c = _case_from_line(body)
            if c is None:
                r.notes.append(f"malformed CASE line: {line}")
            else:
                reported[(c.prog, c.case)] = c
        elif body in ("ATF BEGIN", "ATF END"):
            pass
        elif body.startswith("NOTE "):
            r.notes.append(body[len("NOTE "):])
        else:
            r.notes.append(f"unknown sentinel: {line}")
    if in_topo:
        r.notes.append("topology block not closed (log truncated inside it)")
        r.topology_xml = "\n".join(topo).strip()
    if r.topology_xml:
        try:
            r.topology = parse_topology(r.topology_xml)
        except TopologyParseError as exc:
            r.notes.append(str(exc))
    order = listed + [k for k in reported if k not in set(listed)]
    for key in order:
        if key in reported:
            r.cases.append(reported[key])
        else:
            r.cases.append(CaseResult(key[0], key[1], "crashed",
                                      "listed but no result: the guest stopped mid-run"))
    if r.panic_lines:
        r.outcome = "panic"
    elif r.end_seen:
        r.outcome = "completed"
    else:
        r.outcome = "crashed"
        r.notes.append("no end marker: log truncated (hang, crash or timeout)")
    return r


def parse_file(path: str) -> RunResult:
    """Read a saved console log (bytes decoded as UTF-8, errors replaced) and parse it.

    Raises FileNotFoundError / OSError from open().
    """
    with open(path, "r", encoding="utf-8", errors="replace", newline="") as fh:
        return parse_console(fh.read().splitlines())
