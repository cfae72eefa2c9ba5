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
  * no ``BEGIN`` line at all -> ``crashed``, noted as not a console log
    (empty, binary, UTF-16, a JUnit file) or a guest that never reached
    its rc;
  * no ``END`` line, or no ``BEGIN`` before it -> the run is ``crashed`` (a
    truncated log, or one holding only an end marker, never passes);
  * an ``ATF BEGIN`` without its ``ATF END`` -> ``crashed``;
  * a line no single run prints -> ``damaged``, the line named: a second
    ``CASE`` or ``LIST`` line for one case, a ``LIST`` or ``CASE`` line
    outside ``ATF BEGIN``..``ATF END``, an ``ATF END`` with no ``ATF
    BEGIN``, a second ``TOPOLOGY`` block (the first is kept), a second
    ``SYSCTL`` of one name with another value (the first is kept), a sentinel after the ``END``
    line (the rc's own ``NOTE`` lines excepted; a ``BEGIN`` there is a
    second run, which :func:`parse_runs` splits off), an rx queue whose
    CPU is no CPU id (0 to :data:`CPU_MAXSIZE` - 1), no CPU of the run's
    topology block, or differs from an earlier row of the same queue;
  * a case listed but without a ``CASE`` line -> status ``crashed``;
  * ``rc=124`` (timeout(1)'s exit status) -> status ``timeout``;
  * ATF result words: passed, failed, skipped, expected_failure, broken;
    anything unreadable -> ``broken``; so is a result word its exit
    status contradicts, by kyua's rule (engine/atf_result.cpp,
    ``atf_result::apply``): passed, skipped and expected_failure exit 0,
    failed exits 1 (:data:`RESULT_EXIT`);
  * a reason of several lines (atf-c writes ``atf_tc_fail``'s newlines as
    they are, and the rc sees only the last line) is rebuilt from the
    console lines since the previous sentinel: from the last one that
    starts with a result word, joined with `` / `` (:func:`_whole_result`);
  * a sentinel that a kernel message cut in two (the rc's write of
    ``==RXL== CASE mod``, the kernel's ``igb0: link state changed to DOWN``
    and its newline, then the rc's ``ules kldload rc=0 ...``: userland's
    console output and the kernel's printf share the serial line byte by
    byte) is read rejoined, with a note naming both lines and the message,
    when exactly one cut leaves a device message (:data:`_KMSG_RE`) and
    rejoins a line that reads as a sentinel while the cut one does not
    (:func:`_spliced`); the message is still read for panics;
  * a sentinel that other console text stands before on its line (a kernel
    message not yet ended, a test's unended stderr, a capture tool's
    timestamp: :func:`rxl.guest.protocol.split_sentinel`) is read from its
    :data:`MARK` on, with a note naming the line and the text; the text is
    read as a console line of its own (for panics);
  * nothing raises: an unreadable line (a number too long for the field, a
    stray token) and a topology block the topology parser refuses
    (:func:`rxl.decide.topology.parse_spec`) become ``notes``;
  * every note about the log itself starts with the line it is about,
    ``line N:`` (1 = the first line given; as KUnit's parser keeps
    ``LineStream.line_number()``), so the line can be found in the log; the
    guest's own ``NOTE`` lines and the known lock order reversals are kept
    as they are;
  * linear in the log's lines: a log of 200,000 cases parses in seconds.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Callable, Deque, Dict, Iterable, List, Optional, Sequence, Tuple

from rxl.cli.options import BOM, SYSCTL_NAME
from rxl.decide.cpugroup import Group, TopologyError, cpu_ranges
from rxl.decide.topology import parse_spec
from rxl.errors import show
from rxl.guest.protocol import (KNOWN_LORS, LOR_PAIR, MARK, PANIC_PATTERNS, REBOOT_PATTERNS,
                                WITNESS_PATTERNS, split_sentinel)

#: ``dev.<driver>.<unit>.iflib.rxq<N>.cpu: <value>`` as printed by sysctl(8)
#: (iflib.c's SYSCTL_ADD_INT "cpu" under each rx queue); the value is checked
#: apart (:func:`_cpu_id`), so a row with a bad one is named, never skipped.
RXQ_RE = re.compile(r"^(dev\.[a-z0-9_]+\.[0-9]{1,9}\.iflib\.rxq[0-9]{1,9}\.cpu):\s*(.*?)\s*$")
#: CPU ids run from 0 to CPU_MAXSIZE - 1 (sys/sys/_cpuset.h: 1024).
CPU_MAXSIZE = 1024
#: Longest excerpt of a console line quoted in a note.
NOTE_CHARS = 160

#: Exit status of FreeBSD's timeout(1) when the command timed out.
TIMEOUT_EXIT = 124

ATF_STATUSES = ("passed", "failed", "skipped", "expected_failure", "broken")
#: Statuses the harness adds: ``timeout`` (per-case limit hit) and
#: ``crashed`` (listed but never reported, i.e. the guest died mid-case).
CASE_STATUSES = ATF_STATUSES + ("timeout", "crashed")
#: The exit status each result word needs (kyua, engine/atf_result.cpp,
#: ``atf_result::apply``: EXIT_SUCCESS for passed, skipped and
#: expected_failure, EXIT_FAILURE for failed); another is ``broken``.
RESULT_EXIT = {"passed": 0, "skipped": 0, "expected_failure": 0, "failed": 1}

#: ``RunResult.outcome``, in the order the first that applies is taken.
OUTCOMES = ("panic", "witness", "rebooted", "crashed", "damaged", "completed")


def _host_after(body: str) -> bool:
    """A sentinel body of the host-sysctl record taken after the cases when kyua ran
    them (``SYSCTL <name>@after: <value>``, rxl.guest.protocol.host_sysctl_snapshot):
    written by the harness after the console's END marker, and counted there."""
    if not body.startswith("SYSCTL "):
        return False
    key = body[len("SYSCTL "):].split(":", 1)[0].strip()
    return key.endswith("@after") and " " not in key


#: Exit statuses and seconds fit 9 (ASCII) digits; more is a damaged line.
_CASE_RE = re.compile(r"^CASE (\S+) (\S+) rc=(-?[0-9]{1,9}) t=([0-9]{1,9})(?: (.*))?$")
#: A label as the rc template writes it: one word of printable ASCII.
_LABEL_RE = re.compile(r"[!-~]{1,64}")
#: Words one of which every pattern :meth:`_Reader.kernel` looks for holds
#: (rxl.guest.protocol's PANIC, WITNESS and REBOOT patterns, LOR_PAIR): a line
#: with none of them (nearly every console line) costs one search of literals,
#: not eight of patterns (a log at the 64 MiB cap took 11 s).
KERNEL_WORDS = ("panic: ", "Fatal trap", "KDB: enter", "lock order", "duplicate lock",
                "locks held:", "Rebooting...", "Copyright (c)")
_KERNEL_ANY = re.compile("|".join(re.escape(w) for w in KERNEL_WORDS))
#: A SYSCTL line's name: a sysctl MIB name (rxl.cli.options.SYSCTL_NAME), for
#: the host record a prefix with '*' (how many names it held) and '@PHASE'
#: (rxl.guest.protocol.host_sysctl_key).
_SYSCTL_NAME_RE = re.compile(SYSCTL_NAME.pattern + r"\*?(?:@[A-Za-z0-9_]+)?")


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
    (no END line, no BEGIN before it, or an ATF section never closed),
    ``damaged`` (a line no single run prints, named in ``notes``), else
    ``completed`` (:data:`OUTCOMES`).  Only ``completed`` can pass.
    ``begin_line``: the log's line of the run's BEGIN (0: none).
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
    begin_line: int = 0

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


def _printable(text: str) -> str:
    """``text`` from the log with every control character escaped (``\\x1b``,
    ``\\x07``, ``\\t``: an OSC or CSI sequence in a panic message must not
    reach the terminal that shows the report) and non-ASCII as
    backslash escapes, a byte that was not UTF-8 (its surrogate escape,
    :func:`decode`) as ``\\xNN``: one line of printable ASCII, whatever
    stdout's encoding."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(c if c.isprintable() and c.isascii() else
                   f"\\x{ord(c) - 0xdc00:02x}" if "\udc80" <= c <= "\udcff" else
                   c.encode("unicode_escape").decode("ascii") for c in text)


def decode(data: bytes) -> str:
    """A console log's bytes as text: UTF-8, a byte that is not UTF-8 kept as
    its surrogate escape, so that :func:`_printable` shows it as ``\\xNN``
    (as :func:`rxl.errors.show` does), not as U+FFFD; a leading byte-order mark
    (:data:`rxl.cli.options.BOM`) dropped, as every text reader drops it."""
    return data.decode("utf-8", errors="surrogateescape").removeprefix(BOM)


def _quote(line: str) -> str:
    """A console line for a note: printable (:func:`_printable`), at most
    :data:`NOTE_CHARS`."""
    text = _printable(line)
    return text if len(text) <= NOTE_CHARS else text[:NOTE_CHARS] + "..."


def _case_from_line(body: str) -> Optional[CaseResult]:
    m = _CASE_RE.match(body)
    if not m:
        return None
    prog, case, rc, secs, res = m.groups()
    rc_i = int(rc)
    res = (res or "").strip()
    word, _, reason = res.partition(":")
    word = word.strip()
    reason = reason.strip()
    if rc_i == TIMEOUT_EXIT:
        status, reason = "timeout", reason or "per-case timeout hit"
    elif word in RESULT_EXIT and rc_i != RESULT_EXIT[word]:
        status, reason = "broken", (f"{word} but exit {rc_i} (a {word} case exits "
                                    f"{RESULT_EXIT[word]})" + (f": {reason}" if reason else ""))
    elif word in ATF_STATUSES:
        status = word
    else:
        status, reason = "broken", res or f"no result file (exit {rc_i})"
    return CaseResult(_printable(prog), _printable(case), status, _printable(reason), rc_i,
                      int(secs))


#: A kernel message as the console prints it: a device's or a subsystem's
#: name, a colon and its text ("igb0: link state changed to DOWN",
#: "uhub0: 2 ports with 2 removable"): what :func:`_spliced` may cut out.
_KMSG_RE = re.compile(r"[a-z][a-z0-9_.]{0,31}: \S.*")
#: Sentinels read whole or noted, never mended: the rc prints many, and
#: :func:`_sentinel_reads` does not judge them.
_UNMENDED = ("SYSCTL ", "TOPOLOGY ", "NOTE ")
#: Longest sentinel line :func:`_spliced` tries to mend (its cuts are tried
#: one by one): the rc's lines are far shorter.
_SPLICE_MAX = 1024


def _sentinel_reads(line: str) -> bool:
    """Whether ``line`` is a whole LIST, CASE, END, BEGIN or ATF sentinel."""
    body = line[len(MARK):].strip()
    if body.startswith("CASE "):
        return _case_from_line(body) is not None
    if body.startswith("LIST "):
        return len(body.split()) == 3
    if body in ("ATF BEGIN", "ATF END"):
        return True
    word, _, label = body.partition(" ")
    return word in ("BEGIN", "END") and _LABEL_RE.fullmatch(label) is not None


def _spliced(line: str, nxt: str,
             expected: Callable[[str], bool]) -> Optional[Tuple[str, str]]:
    """``(rejoined sentinel, kernel message)`` when the sentinel ``line`` was
    cut in two by a kernel message (``MARK + a + message``, then ``b`` on the
    next line, ``nxt``): ``line`` does not read as a sentinel
    (:func:`_sentinel_reads`), ``nxt`` is no sentinel, and exactly one cut
    leaves a :data:`_KMSG_RE` message after ``a`` and makes ``MARK + a + b``
    a sentinel the run expects there (``expected``: a CASE line for a case
    listed and not yet reported, the END of the run's label). None
    otherwise: no cut, or more than one ("CASE m" + "odigb0: ..." and "CASE
    mod" + "igb0: ..." both leave a device message; only one names a listed
    case)."""
    if not line.startswith(MARK) or len(line) > _SPLICE_MAX or not nxt.strip() or \
            MARK in nxt or _sentinel_reads(line):
        return None
    found = []
    for i in range(len(MARK) + 1, len(line)):
        if _KMSG_RE.fullmatch(line[i:]) and _sentinel_reads(line[:i] + nxt) and \
                expected(line[:i] + nxt):
            found.append((line[:i] + nxt, line[i:]))
    return found[0] if len(found) == 1 else None


def _unread_result(body: str) -> Optional[str]:
    """Why a CASE line's result is counted ``broken`` though it is not an
    ATF ``broken`` result (a word no ATF result starts with, or one its exit
    status contradicts); None when it is read as written (or there is no
    result at all: the case died before writing one)."""
    m = _CASE_RE.match(body)
    res = (m.group(5) or "").strip() if m else ""
    word = res.partition(":")[0].strip()
    if not res or int(m.group(3)) == TIMEOUT_EXIT or word == "broken":
        return None
    if word in RESULT_EXIT and int(m.group(3)) != RESULT_EXIT[word]:
        return f"{word} but exit {m.group(3)}"
    if word not in ATF_STATUSES:
        return f"no ATF result word ({', '.join(ATF_STATUSES)}) in {_quote(res)!r}"
    return None


#: Console lines kept between sentinels for a multi-line result.
RESULT_LINES = 200


def _whole_result(line: str, since: Sequence[str]) -> str:
    """A CASE line whose result is the last line of a multi-line reason,
    with the reason's head found in ``since`` (the console lines after the
    previous sentinel) put back; the line unchanged when it needs nothing."""
    if not since:
        return line
    m = _CASE_RE.match(line[len(MARK):].strip())
    if not m or (m.group(5) or "").strip().partition(":")[0].strip() in ATF_STATUSES:
        return line
    for i in range(len(since) - 1, -1, -1):
        word = since[i].partition(":")[0].strip()
        if word in ATF_STATUSES and since[i].startswith(word):
            parts = [p.strip() for p in since[i:] + [m.group(5) or ""] if p.strip()]
            prog, case, rc, secs = m.group(1, 2, 3, 4)
            return f"{MARK} CASE {prog} {case} rc={rc} t={secs} " + " / ".join(parts)
    return line


def _cpu_id(value: str) -> Optional[int]:
    """``value`` as a CPU id (0 to :data:`CPU_MAXSIZE` - 1, ASCII digits as sysctl(8)
    prints them), else None."""
    if not re.fullmatch(r"[0-9]{1,4}", value) or int(value) >= CPU_MAXSIZE:
        return None
    return int(value)


class _Reader:
    """The state of one run's parse while its lines go by (:func:`parse_console`)."""

    def __init__(self, r: RunResult, first: int) -> None:
        self.r = r
        self.first = first
        self.at: Dict[str, int] = {}  # the lines later notes cite: TOPOLOGY BEGIN, END, ...
        self.listed: Dict[Tuple[str, str], int] = {}    # case -> its LIST line
        self.reported: Dict[Tuple[str, str], Tuple[CaseResult, int]] = {}
        self.rxq_at: Dict[str, int] = {}
        self.in_topo = self.atf_open = self.topo_extra = False
        self.topo: List[str] = []
        self.damaged = 0

    def damage(self, n: int, what: str) -> None:
        """Line ``n`` is one no single run prints: noted, and the run ``damaged``."""
        self.damaged += 1
        self.r.notes.append(f"line {n}: {what}")

    def outside(self, n: int, word: str, line: str) -> None:
        """Line ``n``, a sentinel or rx queue row before any BEGIN, is outside
        every run: named, never counted into the run that follows."""
        self.damage(n, f"{word} before any BEGIN: a line outside every run, not "
                       f"counted: {_quote(line)}")

    def outside_atf(self, n: int, word: str, line: str) -> None:
        """Line ``n``, a LIST or CASE line, is outside ``ATF BEGIN``..``ATF END``,
        where the rc prints none: named, never counted (a case there passed
        no test run)."""
        where = (f"after ATF END (line {self.at['atf end']})" if "atf end" in self.at
                 else "before ATF BEGIN" if "atf" not in self.at else "outside ATF BEGIN..END")
        self.damage(n, f"a {word} line {where}, outside the tests: not counted: "
                       f"{_quote(line)}")

    def rxq(self, n: int, name: str, value: str, line: str) -> None:
        cpu = _cpu_id(value)
        if cpu is None:
            self.damage(n, f"rx queue CPU is no CPU id (0 to {CPU_MAXSIZE - 1}): "
                           f"{_quote(line)}")
        elif name in self.r.rxq and self.r.rxq[name] != cpu:
            self.damage(n, f"{name} is {cpu} here, {self.r.rxq[name]} at line "
                           f"{self.rxq_at[name]}: not counted")
        elif name not in self.r.rxq:
            self.r.rxq[name] = cpu
            self.rxq_at[name] = n

    def line(self, line: str, n: int) -> None:
        """Console line ``n`` into the run.  May raise ValueError on a damaged line."""
        r = self.r
        if not line.startswith(MARK):
            self.kernel(line, n)
        if self.in_topo:
            if line.startswith(MARK + " TOPOLOGY END") and self.topo_extra:
                self.in_topo = self.topo_extra = False  # a second block: left out
            elif self.topo_extra:
                pass
            elif line.startswith(MARK + " TOPOLOGY END"):
                r.topology_xml = "\n".join(self.topo).strip()
                self.in_topo = False
                if not r.topology_xml:
                    r.notes.append(f"line {self.at['topology']}: an empty topology block "
                                   "(no kern.sched.topology_spec): placement not judged")
            else:
                self.topo.append(line)
            return
        m = RXQ_RE.match(line.strip()) if ".iflib.rxq" in line else None
        if m:
            if not r.begin_seen:
                self.outside(n, "rx queue row", line)
            elif r.end_seen:
                self.damage(n, f"rx queue row after the end marker (line {self.at['end']}): "
                               f"not counted: {_quote(line)}")
            else:
                self.rxq(n, m.group(1), m.group(2), line)
            return
        if not line.startswith(MARK):
            return
        body = line[len(MARK):].strip()
        if not r.begin_seen and not body.startswith(("BEGIN", "END", "NOTE ")) and \
                not _host_after(body):  # the harness's record after kyua: its own lines
            self.outside(n, body.split(" ", 1)[0] or "a sentinel", line)
            return
        if r.end_seen and not body.startswith("NOTE ") and not _host_after(body):
            word = "a second run" if body.startswith("BEGIN") else body.split(" ", 1)[0]
            self.damage(n, f"{word or 'a sentinel'} after the end marker (line "
                           f"{self.at['end']}): not counted: {_quote(line)}")
            return
        self.sentinel(body, line, n)

    def expects(self, line: str) -> bool:
        """Whether the sentinel ``line`` is one this run still expects: a CASE
        line of a listed case with no CASE line yet, the END of its label, an
        ATF BEGIN or ATF END where one belongs (for :func:`_spliced`)."""
        body = line[len(MARK):].strip()
        if body.startswith("CASE "):
            c = _case_from_line(body)
            return c is not None and self.atf_open and (c.prog, c.case) in self.listed \
                and (c.prog, c.case) not in self.reported
        if body == "ATF BEGIN":
            return self.r.begin_seen and "atf" not in self.at
        if body == "ATF END":
            return self.atf_open
        word, _, label = body.partition(" ")
        return word == "END" and self.r.begin_seen and not self.r.end_seen and \
            show(label) == self.r.label

    def kernel(self, line: str, n: int) -> None:
        """A console line that is no sentinel: panics, WITNESS, a second boot."""
        if not _KERNEL_ANY.search(line):  # most lines: one search, not eight
            return
        r = self.r
        if any(p.search(line) for p in PANIC_PATTERNS):
            r.panic_lines.append(_printable(line))
        if any(p.search(line) for p in WITNESS_PATTERNS):
            r.witness_lines.append(_printable(line))
        pair = LOR_PAIR.match(line)
        if pair and pair.groups() in KNOWN_LORS and r.witness_lines and \
                r.witness_lines[-1].startswith("lock order reversal"):
            r.witness_lines.pop()
            r.notes.append(f"known lock order reversal of the base tree: {_quote(line)}")
        if r.begin_seen and not r.end_seen and any(p.search(line) for p in REBOOT_PATTERNS):
            self.at.setdefault("reboot", n)
            r.reboot_lines.append(_printable(line))

    def sentinel(self, body: str, line: str, n: int) -> None:
        r = self.r
        if body.startswith("BEGIN"):
            if r.begin_seen:
                self.at.setdefault("reboot", n)
                r.reboot_lines.append(_printable(line))  # rc ran again: the guest rebooted
            else:
                r.begin_line = n
            label = body[len("BEGIN"):].strip()
            if not r.begin_seen or not r.label:
                if not _LABEL_RE.fullmatch(label):
                    self.damage(n, "a BEGIN without a label" if not label else
                                f"label '{show(label)}' is not one word of printable "
                                "ASCII (the rc writes its run's label)")
                r.label = show(label)
                self.at["begin"] = n
            r.begin_seen = True
        elif body.startswith("END"):
            label = body[len("END"):].strip()
            if r.begin_seen and not r.end_seen and show(label) != r.label:
                self.damage(n, f"END {show(label)} closes BEGIN {r.label} (line "
                               f"{self.at['begin']})")
            r.end_seen = True
            self.at.setdefault("end", n)
        elif body == "TOPOLOGY BEGIN":
            if "topology" in self.at:
                # the rc prints one block: a second must not replace the first
                self.damage(n, f"a second TOPOLOGY BEGIN (the first at line "
                               f"{self.at['topology']}): not counted")
                self.topo_extra = True
            else:
                self.topo.clear()
                self.at["topology"] = n
            self.in_topo = True
        elif body.startswith("SYSCTL "):
            name, sep, value = body[len("SYSCTL "):].partition(":")
            name, value = name.strip(), value.strip()
            m = RXQ_RE.match(f"{name}: {value}")
            if not sep or not _SYSCTL_NAME_RE.fullmatch(name):
                # sysctl(8) prints NAME: VALUE (the value may be empty, a name never is)
                r.notes.append(f"line {n}: malformed SYSCTL line (not NAME: VALUE): "
                               f"{_quote(line)}")
            elif m:
                self.rxq(n, name, value, line)
            elif name in r.sysctls and r.sysctls[name] != _printable(value):
                self.damage(n, f"SYSCTL {name} is {_quote(value)!r} here, "
                               f"{r.sysctls[name]!r} at line {self.at[f'sysctl {name}']}: "
                               "not counted")
            elif name not in r.sysctls:
                r.sysctls[name] = _printable(value)
                self.at[f"sysctl {name}"] = n
        elif body.startswith("LIST "):
            parts = body.split()
            if len(parts) != 3:
                r.notes.append(f"line {n}: malformed LIST line: {_quote(line)}")
            elif not self.atf_open:
                self.outside_atf(n, "LIST", line)
            elif (_printable(parts[1]), _printable(parts[2])) in self.listed:
                key = (_printable(parts[1]), _printable(parts[2]))
                self.damage(n, f"a second LIST line for {key[0]} {key[1]} (the first at "
                               f"line {self.listed[key]}): not counted")
            else:  # printable, as the CASE line's names are (_case_from_line)
                self.listed[(_printable(parts[1]), _printable(parts[2]))] = n
        elif body.startswith("CASE "):
            c = _case_from_line(body)
            if c is None:
                r.notes.append(f"line {n}: malformed CASE line: {_quote(line)}")
            elif not self.atf_open:
                self.outside_atf(n, "CASE", line)
            elif (c.prog, c.case) in self.reported:
                self.damage(n, f"a second CASE line for {c.prog} {c.case} (the first at line "
                               f"{self.reported[(c.prog, c.case)][1]}): not counted")
            else:
                self.reported[(c.prog, c.case)] = (c, n)
                unread = _unread_result(body)
                if unread:
                    r.notes.append(f"line {n}: {c.prog} {c.case} counted broken: {unread}")
                if (c.prog, c.case) not in self.listed:
                    self.damage(n, f"a CASE line for {c.prog} {c.case}, which no LIST line "
                                   "announced")
        elif body == "ATF BEGIN":
            if "atf" in self.at:
                self.damage(n, f"a second ATF BEGIN (the first at line {self.at['atf']})")
            else:
                self.at["atf"] = n
            self.atf_open = True
        elif body == "ATF END":
            if not self.atf_open:
                self.damage(n, "an ATF END without its ATF BEGIN" if "atf" not in self.at
                            else f"a second ATF END (the first at line {self.at['atf end']})")
            self.at.setdefault("atf end", n)
            self.atf_open = False
        elif body.startswith("NOTE "):
            r.notes.append(_quote(body[len("NOTE "):]))
        else:
            r.notes.append(f"line {n}: unknown sentinel: {_quote(line)}")

    def finish(self, n: int) -> RunResult:
        """The run after its last line, ``n`` (0: none): topology, cases, outcome."""
        r = self.r
        if self.in_topo and not self.topo_extra:
            r.notes.append(f"line {self.at['topology']}: topology block not closed (log "
                           "truncated inside it)")
            r.topology_xml = "\n".join(self.topo).strip()
        if r.topology_xml:
            try:
                r.topology = parse_spec(r.topology_xml, name="console topology block").root
            except (TopologyError, RecursionError) as exc:
                # without it the queue placement cannot be judged: no completed run
                self.damage(self.at["topology"], _quote(str(exc)))
        ncpu = r.sysctls.get("hw.ncpu")
        if r.topology is not None and ncpu is not None and \
                ncpu != str(len(r.topology.cpus)):
            self.damage(self.at["sysctl hw.ncpu"], f"hw.ncpu {_quote(ncpu)}, but the "
                        f"topology block (line {self.at['topology']}) has "
                        f"{len(r.topology.cpus)} CPUs")
        queues: Dict[str, List[int]] = {}
        for name in r.rxq:
            dev, _, q = name[:-len(".cpu")].rpartition(".iflib.rxq")
            queues.setdefault(dev, []).append(int(q))
        for dev, qs in queues.items():
            absent = sorted(set(range(max(qs) + 1)) - set(qs))
            if absent:
                first = min(self.rxq_at[k] for k in r.rxq if k.startswith(dev + ".iflib."))
                self.damage(first, f"{dev} has rx queues {cpu_ranges(sorted(qs))} but not "
                                   f"{cpu_ranges(absent)} (iflib numbers them from 0)")
        if r.topology is not None:
            for name, cpu in r.rxq.items():
                if cpu not in r.topology.cpus:
                    self.damage(self.rxq_at[name], f"{name} is CPU {cpu}, no CPU of the "
                                f"run's topology (line {self.at['topology']}: "
                                f"{cpu_ranges(r.topology.cpus)})")
        for key in self.listed:
            if key in self.reported:
                r.cases.append(self.reported[key][0])
            else:
                r.cases.append(CaseResult(key[0], key[1], "crashed",
                                          "listed but no result: the guest stopped mid-run"))
        r.cases += [c for key, (c, _) in self.reported.items() if key not in self.listed]
        if r.panic_lines:
            r.outcome = "panic"
        elif r.witness_lines:
            r.outcome = "witness"
        elif r.reboot_lines:
            r.outcome = "rebooted"
            r.notes.append(f"line {self.at['reboot']}: the guest booted again before its end "
                           "marker")
        elif not r.begin_seen and not r.end_seen:
            r.outcome = "crashed"
            r.notes.append(f"line {n}: no {MARK} BEGIN: not a console log, or the guest never "
                           "reached its rc" if n >= self.first else
                           f"an empty log: no {MARK} BEGIN: not a console log")
        elif not r.end_seen:
            r.outcome = "crashed"
            r.notes.append(f"line {n}: no end marker: log truncated (hang, crash or timeout)")
        elif not r.begin_seen:
            r.outcome = "crashed"
            r.notes.append(f"line {self.at['end']}: an end marker but no BEGIN: not a whole run")
        elif self.atf_open:
            r.outcome = "crashed"
            r.notes.append(f"line {self.at['atf']}: ATF BEGIN without ATF END: the tests "
                           "never finished")
        elif self.damaged:
            r.outcome = "damaged"
        else:
            r.outcome = "completed"
        return r


def parse_console(lines: Iterable[str], first_line: int = 1) -> RunResult:
    """Parse console ``lines`` (str, with or without line endings) into a RunResult.

    ``first_line``: the number notes give the first of ``lines`` (a run
    :func:`parse_runs` split off a longer log keeps that log's numbers).
    Never raises on odd input: malformed or unreadable sentinel lines are
    recorded in ``notes``; a topology block the topology parser refuses is
    noted and left as ``None``.  Linear in the number of lines.
    """
    reader = _Reader(RunResult(), first_line)
    r = reader.r
    since: Deque[str] = deque(maxlen=RESULT_LINES)
    n = first_line - 1
    it = iter(lines)
    ahead: Optional[str] = None

    def feed(line: str, at: int) -> None:
        """Console line ``line`` (a sentinel, or text that holds none) of log line ``at``."""
        if line.strip():
            r.last_line = _printable(line)
        if not line.startswith(MARK):
            since.append(line)
            line_in = line
        else:
            line_in = _whole_result(line, list(since)) if reader.atf_open else line
            since.clear()
        try:
            reader.line(line_in, at)
        except (ValueError, OverflowError) as exc:
            r.notes.append(f"line {at}: unreadable line ({exc.__class__.__name__}): "
                           f"{_quote(line)}")

    while True:
        raw = next(it, None) if ahead is None else ahead
        ahead = None
        if raw is None:
            break
        n += 1
        at = n
        line = raw.rstrip("\r\n").replace("\r", "")
        before, sentinel = split_sentinel(line)
        if before and sentinel:
            r.notes.append(f"line {n}: console text before the sentinel on its line "
                           f"('{_quote(before)}'): the sentinel read from {MARK} on")
            feed(before, at)
            line = sentinel
        if line.startswith(MARK) and not _sentinel_reads(line) and \
                not line[len(MARK):].lstrip().startswith(_UNMENDED):
            ahead = next(it, None)
            cut = _spliced(line, ahead.rstrip("\r\n").replace("\r", ""),
                           reader.expects) if ahead is not None else None
            if cut is not None:
                # the kernel's line is a console line like any other (a panic)
                reader.kernel(cut[1], n)
                r.notes.append(f"line {n}: a kernel message cut this sentinel in two "
                               f"({_quote(cut[1])}); read with line {n + 1} as "
                               f"{_quote(cut[0])}")
                line, ahead = cut[0], None
                n += 1
        feed(line, at)
    return reader.finish(n)


def _is_begin(line: str) -> bool:
    return line.startswith(MARK) and line[len(MARK):].strip().startswith("BEGIN")


def _is_end(line: str) -> bool:
    return line.startswith(MARK) and line[len(MARK):].strip().startswith("END")


def split_runs(lines: Sequence[str]) -> List[Tuple[int, Sequence[str]]]:
    """A log of several runs one after another (``cat patched.log
    pristine.log``) as ``[(first line number, its lines)]``: a new run starts
    at each ``BEGIN`` line that follows an ``END`` line.  The console lines
    between one run's END and the next BEGIN stay with the earlier run (a
    panic there is that kernel's).  One run (or none): the whole log."""
    starts = [0]
    ended = False
    for i, raw in enumerate(lines):
        if MARK not in raw:
            continue
        line = split_sentinel(raw.rstrip("\r\n").replace("\r", ""))[1]
        if ended and _is_begin(line):
            starts.append(i)
            ended = False
        elif _is_end(line):
            ended = True
    bounds = starts + [len(lines)]
    return [(bounds[k] + 1, lines[bounds[k]:bounds[k + 1]]) for k in range(len(starts))]


def parse_runs(lines: Sequence[str]) -> List[RunResult]:
    """Each run of a log of several (:func:`split_runs`), parsed with the
    whole log's line numbers; a log of one run gives one."""
    return [parse_console(chunk, first) for first, chunk in split_runs(lines)]


def parse_file(path: str) -> RunResult:
    """Read a saved console log (bytes decoded by :func:`decode`) and parse it.

    Raises FileNotFoundError / OSError from open().
    """
    with open(path, "rb") as fh:
        return parse_console(decode(fh.read()).splitlines())
