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
    ==RXL== CASE <prog> <case> rc=<exit> t=<seconds> <last line of the result>
    ==RXL== ATF END
    ==RXL== END <label>

Everything else on the console (loader, kernel messages) is ignored except
panic patterns (:data:`PANIC_PATTERNS`), which mark the run ``panic``,
WITNESS warnings (:data:`WITNESS_PATTERNS`), which mark it ``witness``, and
a second boot, which marks it ``rebooted``.

Rules (the report's trust depends on them):
  * no ``END`` line, or no ``BEGIN`` before it -> the run is ``crashed`` (a
    truncated log, or one holding only an end marker, never passes);
  * an ``ATF BEGIN`` without its ``ATF END`` -> ``crashed``;
  * a case listed but without a ``CASE`` line -> status ``crashed``;
  * ``rc=124`` (timeout(1)'s exit status) -> status ``timeout``;
  * ATF result words: passed, failed, skipped, expected_failure, broken;
    anything unreadable -> ``broken``;
  * a reason of several lines (atf-c writes ``atf_tc_fail``'s newlines as
    they are, and the rc sees only the last line) is rebuilt from the
    console lines since the previous sentinel: from the last one that
    starts with a result word, joined with `` / `` (:func:`_whole_result`);
  * nothing raises: an unreadable line (a number too long for the field, a
    stray token) and a topology block the topology parser refuses
    (:func:`rxl.decide.topology.parse_spec`) become ``notes``;
  * every note about the log itself starts with the line it is about,
    ``line N:`` (1 = the first line given; as KUnit's parser keeps
    ``LineStream.line_number()``), so the line can be found in the log; the
    guest's own ``NOTE`` lines and the known lock order reversals are kept
    as they are.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Deque, Dict, Iterable, List, Optional, Sequence, Tuple

from rxl.decide.cpugroup import Group, TopologyError
from rxl.decide.topology import parse_spec
from rxl.guest.protocol import (KNOWN_LORS, LOR_PAIR, MARK, PANIC_PATTERNS, REBOOT_PATTERNS,
                                WITNESS_PATTERNS)

#: ``dev.<driver>.<unit>.iflib.rxq<N>.cpu: <cpu>`` as printed by sysctl(8).
#: A CPU id has at most 4 digits (CPU_MAXSIZE = 1024); longer is unreadable.
RXQ_RE = re.compile(r"^(dev\.([a-z0-9_]+)\.(\d{1,9})\.iflib\.rxq(\d{1,9})\.cpu):\s*(-?\d{1,9})\s*$")
#: Longest excerpt of a console line quoted in a note.
NOTE_CHARS = 160

#: Exit status of FreeBSD's timeout(1) when the command timed out.
TIMEOUT_EXIT = 124

ATF_STATUSES = ("passed", "failed", "skipped", "expected_failure", "broken")
#: Statuses the harness adds: ``timeout`` (per-case limit hit) and
#: ``crashed`` (listed but never reported, i.e. the guest died mid-case).
CASE_STATUSES = ATF_STATUSES + ("timeout", "crashed")

#: Exit statuses and seconds fit 9 digits; more is a damaged line.
_CASE_RE = re.compile(r"^CASE (\S+) (\S+) rc=(-?\d{1,9}) t=(\d{1,9}) ?(.*)$")


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


@dataclass
class RunResult:
    """Everything parsed from one console log.

    ``outcome``, first that applies: ``panic`` (a panic pattern matched),
    ``witness`` (a WITNESS warning such as a lock order reversal, other
    than the base tree's :data:`~rxl.guest.protocol.KNOWN_LORS`),
    ``rebooted`` (the guest booted again before its END line), ``crashed``
    (no END line, no BEGIN before it, or an ATF section never closed), else
    ``completed``.  Only ``completed`` can pass.
    ``topology``: the root cpu_group (:class:`rxl.decide.cpugroup.Group`)
    or None.  ``rxq``: sysctl name -> CPU. ``socket_of_rxq``: sysctl name
    -> index of the top-level topology group holding that CPU (None if
    unknown).
    """

    label: str = ""
    outcome: str = "crashed"
    begin_seen: bool = False
    end_seen: bool = False
    panic_lines: List[str] = field(default_factory=list)
    witness_lines: List[str] = field(default_factory=list)
    reboot_lines: List[str] = field(default_factory=list)
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


def _quote(line: str) -> str:
    """A console line for a note: printable, at most :data:`NOTE_CHARS`."""
    text = line.encode("ascii", "backslashreplace").decode("ascii")
    return text if len(text) <= NOTE_CHARS else text[:NOTE_CHARS] + "..."


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


#: Console lines kept between sentinels for a multi-line result.
RESULT_LINES = 200


def _whole_result(line: str, since: Sequence[str]) -> str:
    """A CASE line whose result is the last line of a multi-line reason,
    with the reason's head found in ``since`` (the console lines after the
    previous sentinel) put back; the line unchanged when it needs nothing."""
    m = _CASE_RE.match(line[len(MARK):].strip())
    if not m or m.group(5).strip().partition(":")[0].strip() in ATF_STATUSES:
        return line
    for i in range(len(since) - 1, -1, -1):
        word = since[i].partition(":")[0].strip()
        if word in ATF_STATUSES and since[i].startswith(word):
            parts = [p.strip() for p in since[i:] + [m.group(5)] if p.strip()]
            prog, case, rc, secs = m.group(1, 2, 3, 4)
            return f"{MARK} CASE {prog} {case} rc={rc} t={secs} " + " / ".join(parts)
    return line


def parse_console(lines: Iterable[str]) -> RunResult:
    """Parse console ``lines`` (str, with or without line endings) into a RunResult.

    Never raises on odd input: malformed or unreadable sentinel lines are
    recorded in ``notes``; a topology block the topology parser refuses is
    noted and left as ``None``.
    """
    r = RunResult()
    at: Dict[str, int] = {}  # where: the line of TOPOLOGY BEGIN, ATF BEGIN, END, ...
    listed: List[Tuple[str, str]] = []
    reported: Dict[Tuple[str, str], CaseResult] = {}
    in_topo = atf_open = False
    topo: List[str] = []
    since: Deque[str] = deque(maxlen=RESULT_LINES)
    n = 0
    for n, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n").replace("\r", "")
        if line.strip():
            r.last_line = line
        if not line.startswith(MARK):
            since.append(line)
            line_in = line
        else:
            line_in = _whole_result(line, list(since)) if atf_open else line
            since.clear()
        try:
            in_topo, atf_open = _line(r, line_in, in_topo, atf_open, topo, listed, reported,
                                      n, at)
        except (ValueError, OverflowError) as exc:
            r.notes.append(f"line {n}: unreadable line ({exc.__class__.__name__}): "
                           f"{_quote(line)}")
    if in_topo:
        r.notes.append(f"line {at['topology']}: topology block not closed (log truncated "
                       "inside it)")
        r.topology_xml = "\n".join(topo).strip()
    if r.topology_xml:
        try:
            r.topology = parse_spec(r.topology_xml, name="console topology block").root
        except (TopologyError, RecursionError) as exc:
            r.notes.append(f"line {at['topology']}: {_quote(str(exc))}")
    order = listed + [k for k in reported if k not in set(listed)]
    for key in order:
        if key in reported:
            r.cases.append(reported[key])
        else:
            r.cases.append(CaseResult(key[0], key[1], "crashed",
                                      "listed but no result: the guest stopped mid-run"))
    if r.panic_lines:
        r.outcome = "panic"
    elif r.witness_lines:
        r.outcome = "witness"
    elif r.reboot_lines:
        r.outcome = "rebooted"
        r.notes.append(f"line {at['reboot']}: the guest booted again before its end marker")
    elif not r.end_seen:
        r.outcome = "crashed"
        r.notes.append(f"line {n}: no end marker: log truncated (hang, crash or timeout)"
                       if n else "an empty log: no end marker (hang, crash or timeout)")
    elif not r.begin_seen:
        r.outcome = "crashed"
        r.notes.append(f"line {at['end']}: an end marker but no BEGIN: not a whole run")
    elif atf_open:
        r.outcome = "crashed"
        r.notes.append(f"line {at['atf']}: ATF BEGIN without ATF END: the tests never finished")
    else:
        r.outcome = "completed"
    return r


def _line(r: RunResult, line: str, in_topo: bool, atf_open: bool, topo: List[str],
          listed: List[Tuple[str, str]], reported: Dict[Tuple[str, str], CaseResult],
          n: int, at: Dict[str, int]) -> Tuple[bool, bool]:
    """Console line ``n`` into ``r``; returns the new (in topology block, in
    ATF section) state; ``at`` keeps the lines later notes cite.  May raise
    ValueError on a damaged line."""
    if not line.startswith(MARK):
        if any(p.search(line) for p in PANIC_PATTERNS):
            r.panic_lines.append(line)
        if any(p.search(line) for p in WITNESS_PATTERNS):
            r.witness_lines.append(line)
        pair = LOR_PAIR.match(line)
        if pair and pair.groups() in KNOWN_LORS and r.witness_lines and \
                r.witness_lines[-1].startswith("lock order reversal"):
            r.witness_lines.pop()
            r.notes.append(f"known lock order reversal of the base tree: {_quote(line)}")
        if r.begin_seen and not r.end_seen and any(p.search(line) for p in REBOOT_PATTERNS):
            at.setdefault("reboot", n)
            r.reboot_lines.append(line)
    if in_topo:
        if line.startswith(MARK + " TOPOLOGY END"):
            r.topology_xml = "\n".join(topo).strip()
            return False, atf_open
        topo.append(line)
        return True, atf_open
    m = RXQ_RE.match(line.strip())
    if m:
        r.rxq[m.group(1)] = int(m.group(5))
        return in_topo, atf_open
    if not line.startswith(MARK):
        return in_topo, atf_open
    body = line[len(MARK):].strip()
    if body.startswith("BEGIN"):
        if r.begin_seen and not r.end_seen:
            at.setdefault("reboot", n)
            r.reboot_lines.append(line)  # rc ran again: the guest rebooted
        r.begin_seen = True
        r.label = body[len("BEGIN"):].strip()
    elif body.startswith("END"):
        r.end_seen = True
        at.setdefault("end", n)
    elif body == "TOPOLOGY BEGIN":
        topo.clear()
        at["topology"] = n
        return True, atf_open
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
            r.notes.append(f"line {n}: malformed LIST line: {_quote(line)}")
    elif body.startswith("CASE "):
        c = _case_from_line(body)
        if c is None:
            r.notes.append(f"line {n}: malformed CASE line: {_quote(line)}")
        else:
            reported[(c.prog, c.case)] = c
    elif body == "ATF BEGIN":
        at["atf"] = n
        return in_topo, True
    elif body == "ATF END":
        return in_topo, False
    elif body.startswith("NOTE "):
        r.notes.append(_quote(body[len("NOTE "):]))
    else:
        r.notes.append(f"line {n}: unknown sentinel: {_quote(line)}")
    return in_topo, atf_open


def parse_file(path: str) -> RunResult:
    """Read a saved console log (bytes decoded as UTF-8, errors replaced) and parse it.

    Raises FileNotFoundError / OSError from open().
    """
    with open(path, "r", encoding="utf-8", errors="replace", newline="") as fh:
        return parse_console(fh.read().splitlines())
