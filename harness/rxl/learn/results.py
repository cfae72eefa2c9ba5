"""learnd's summary lines from a console log: LEARN BEGIN/READY/RUN/W/C/K/G/GL/S/SS/I/...

:func:`parse_learn` turns the ``==RXL== LEARN`` lines the guest's learnd
prints into one :class:`RunSummary` per run (per-worker counts, per-phase
connections); malformed lines raise :class:`~rxl.learn.plan.LearnError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from rxl.errors import counted
from rxl.guest.protocol import MARK
from rxl.learn.plan import LearnError

_LEARN_RE = re.compile(r"^LEARN (\w+) (\S+)(.*)$")
_KV_RE = re.compile(r"(\w+)=(\S+)")


@dataclass(frozen=True)
class Count:
    """Connections of one phase by worker, worker CPU, handshake CPU and RSS queue (-1: unknown)."""

    phase: str
    worker: int
    wcpu: int
    hcpu: int
    q: int
    n: int


@dataclass
class RunSummary:
    """learnd's summary of one run, as printed on the console."""

    label: str
    ready: bool = False
    info: Dict[str, str] = field(default_factory=dict)
    workers: List[Dict[str, int]] = field(default_factory=list)
    counts: List[Count] = field(default_factory=list)
    ftypes: Dict[str, Dict[int, int]] = field(default_factory=dict)
    done: Dict[str, str] = field(default_factory=dict)
    sets: Dict[str, str] = field(default_factory=dict)
    sysctls: Dict[str, str] = field(default_factory=dict)
    rc: Optional[int] = None
    notes: List[str] = field(default_factory=list)
    #: Why the run's numbers cannot be taken as they are (learnd exited
    #: non-zero, no END line, a DONE value that is no number, a pin list or
    #: a C line that contradicts the run's own lines), each naming its line:
    #: rxl.learn.metrics.analyze_log fails the run on any.
    damage: List[str] = field(default_factory=list)
    #: Line (from 1) of each BEGIN of this label: two are two runs of one label.
    begins: List[int] = field(default_factory=list)
    #: Line of the first RUN, DONE and END line of this label.
    first_at: Dict[str, int] = field(default_factory=dict)
    #: With learnd -K: (worker, foreign port, handshake CPU) per measured
    #: connection, in accept order per worker.
    conns: List[Tuple[int, int, int]] = field(default_factory=list)
    #: With learnd -G: each copy of the groups view as a dict with ``seq``,
    #: ``t_ms``, ``phase``, ``err``, ``x`` (the counts, see
    #: :func:`rxl.learn.groups.parse_counts`) and ``lines`` (the sysctl's).
    views: List[Dict] = field(default_factory=list)
    #: With requests (``s`` connections): snapshot seq -> worker -> its
    #: counts (``rconns reqs xreqs ureqs slept xwakes nvcsw nivcsw``; -1:
    #: unknown) from the S lines.
    snaps: Dict[int, Dict[int, Dict[str, int]]] = field(default_factory=dict)
    #: snapshot seq -> the system's line (SS: ``t_ms swtch intr_err``).
    snap_sys: Dict[int, Dict[str, int]] = field(default_factory=dict)
    #: snapshot seq -> hw.intrnames name -> hw.intrcnt count (I lines).
    intr: Dict[int, Dict[str, int]] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """learnd printed its DONE line."""
        return bool(self.done)

    @property
    def pins(self) -> List[int]:
        """CPU of each worker (rank order); -1 when not pinned."""
        return [w["cpu"] for w in self.workers]


#: learnd prints counts, ids and errnos (module doc of learnd.c): at most 20
#: digits (64 bits); only a CPU or queue may be -1 (unpinned, unknown).
_MAX_DIGITS = 20
_MAY_BE_MINUS_ONE = frozenset({"cpu", "wcpu", "hcpu", "q", "rc", "nvcsw", "nivcsw",
                                "swtch"})
#: The counts of an S line (learnd.c snapshot_counts).
SNAP_KEYS = ("rconns", "reqs", "xreqs", "ureqs", "slept", "xwakes", "nvcsw", "nivcsw")


def _int(text: str, key: str, line: str) -> int:
    """One learnd number; LearnError (one line, cut) for anything else,
    including 5,000 digits, which int() itself refuses with a ValueError."""
    digits = text[1:] if text.startswith("-") else text
    if not (digits.isascii() and digits.isdigit()) or len(digits) > _MAX_DIGITS or \
            int(text) < (-1 if key in _MAY_BE_MINUS_ONE else 0):
        raise LearnError(f"malformed learnd line ({key}={text[:24]}): {line[:200]}")
    return int(text)


def _ints(kv: Dict[str, str], keys: Sequence[str], line: str) -> Dict[str, int]:
    missing = [k for k in keys if k not in kv]
    if missing:
        raise LearnError(f"malformed learnd line (need {', '.join(keys)}): {line[:200]}")
    return {k: _int(kv[k], k, line) for k in keys}


#: Kinds whose rest is key=value items: a key given twice is a malformed line
#: (the last would win; the others, GL/I/K/SET/SYSCTL, carry text or items).
_KV_KINDS = frozenset({"READY", "RUN", "W", "C", "G", "S", "SS", "FT", "DONE", "END"})
#: DONE's values (learnd.c): two counts and how the run stopped.
_DONE_STOPS = ("quit", "deadline")


def _kv(kind: str, rest: str, line: str) -> Dict[str, str]:
    pairs = _KV_RE.findall(rest)
    kv = dict(pairs)
    if kind in _KV_KINDS and len(kv) != len(pairs):
        seen: set = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise LearnError(f"malformed learnd line ({twice}= twice): {line[:200]}")
    return kv


def _check_done(r: RunSummary, kv: Dict[str, str], n: int, line: str) -> None:
    """DONE's accepted= and elapsed_ms= are counts and stop= quit or deadline,
    else the run is damaged (its line named)."""
    for key in ("accepted", "elapsed_ms"):
        try:
            _int(kv.get(key, ""), key, line)
        except LearnError:
            r.damage.append(f"line {n}: DONE's {key}= is no count "
                            f"({key}={kv.get(key, '(missing)')[:24]}): {line[:200]}")
    if kv.get("stop") not in _DONE_STOPS:
        r.damage.append(f"line {n}: DONE's stop= is not quit or deadline: {line[:200]}")


def _check_run(r: RunSummary, kv: Dict[str, str], n: int, line: str) -> None:
    """RUN's pin= is ``none`` or one CPU per worker (learn-rc gives learnd -w
    the count of its -c list), else the run is damaged (its line named)."""
    pin, workers = kv.get("pin", ""), kv.get("workers", "")
    try:
        nw = _int(workers, "workers", line)
        pins = [] if pin == "none" else [_int(c, "pin", line) for c in pin.split(",")]
    except LearnError:
        r.damage.append(f"line {n}: RUN's workers= or pin= is unreadable: {line[:200]}")
        return
    if pins and len(pins) != nw:
        r.damage.append(f"line {n}: RUN's pin= lists {counted(len(pins), 'CPU')} for "
                        f"workers={nw}: {line[:200]}")


def parse_learn(lines: Iterable[str]) -> Dict[str, RunSummary]:
    """learnd / learn-rc sentinel lines -> run label -> :class:`RunSummary`. Pure.

    Lines (prefix :data:`rxl.guest.protocol.MARK`): ``LEARN BEGIN|READY|RUN|W|C|K|FT|
    DONE|SET|SYSCTL|END|G|GL|S|SS|I <label> key=value...`` (``I``: ``seq= n=`` then
    an interrupt's name, which may hold blanks; ``K``: ``worker=<i>`` then
    ``<fport>:<hcpu>`` items, learnd -K; ``G``: ``seq= t_ms= phase= err= x=``
    and ``GL``: ``seq=<i>`` then one line of the groups view, learnd -G;
    a W line's ``tag=`` is kept as text). Other lines are ignored; a
    malformed LEARN line is kept in the run's ``notes`` (a console can
    interleave kernel messages), never raised. What makes a run's numbers
    untrustworthy goes in its ``damage``, naming the line: an END with rc
    other than 0, a DONE without an END after it, a DONE value that is no
    number, a RUN whose pin list does not match workers=, a C line whose
    wcpu is not its pinned worker's CPU, a second RUN, DONE or END line; two
    BEGIN lines of one label are in ``begins`` (the caller refuses them).
    """
    runs: Dict[str, RunSummary] = {}
    view_of: Dict[Tuple[str, int], Dict] = {}
    for lineno, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n").replace("\r", "")
        if not line.startswith(MARK):
            continue
        m = _LEARN_RE.match(line[len(MARK):].strip())
        if not m:
            continue
        kind, label, rest = m.group(1), m.group(2), m.group(3).strip()
        r = runs.setdefault(label, RunSummary(label))
        try:
            kv = _kv(kind, rest, line)
            if kind in ("RUN", "DONE", "END"):
                if kind in r.first_at:  # two runs' lines under one label would be mixed
                    r.damage.append(f"line {lineno}: a second {kind} line of run {label} "
                                    f"(the first at line {r.first_at[kind]}): {line[:200]}")
                    continue
                r.first_at[kind] = lineno
            if kind == "BEGIN":
                r.begins.append(lineno)
            elif kind == "READY":
                r.ready = True
            elif kind == "RUN":
                r.info = kv
                _check_run(r, kv, lineno, line)
            elif kind == "W":
                r.workers.append(_ints(kv, ("worker", "cpu", "accepts", "errors", "pinerr"), line))
                if "tag" in kv:
                    r.workers[-1]["tag"] = kv["tag"]
            elif kind == "G":
                v = _ints(kv, ("seq", "t_ms", "err"), line)
                if kv.get("phase") is None or "x" not in kv:
                    raise LearnError(f"malformed learnd line (phase, x): {line}")
                view = {**v, "phase": kv["phase"], "x": kv["x"], "lines": []}
                view_of[(label, v["seq"])] = view
                r.views.append(view)
            elif kind == "GL":
                seq, _, text = rest.partition(" ")
                key = (label, _int(seq[4:], "seq", line)) if seq.startswith("seq=") \
                    else None
                if key not in view_of:
                    raise LearnError(f"malformed learnd line (GL before its G): {line}")
                view_of[key]["lines"].append(text)
            elif kind == "C":
                v = _ints(kv, ("worker", "wcpu", "hcpu", "q", "n"), line)
                ph = kv.get("phase", "")
                if ph not in ("w", "m", "q", "x"):
                    raise LearnError(f"malformed learnd line (phase): {line}")
                w = next((w for w in r.workers if w["worker"] == v["worker"]), None)
                if w is not None and w["cpu"] >= 0 and w["pinerr"] == 0 and \
                        v["wcpu"] >= 0 and v["wcpu"] != w["cpu"]:
                    r.damage.append(f"line {lineno}: wcpu={v['wcpu']} but worker "
                                    f"{v['worker']} is pinned to CPU {w['cpu']} (its W line): "
                                    f"{line[:200]}")
                r.counts.append(Count(ph, v["worker"], v["wcpu"], v["hcpu"], v["q"], v["n"]))
            elif kind == "K":
                w = _ints(kv, ("worker",), line)["worker"]
                for item in rest.split()[1:]:
                    port, sep, hcpu = item.partition(":")
                    try:
                        if not sep:
                            raise LearnError(item)
                        r.conns.append((w, _int(port, "port", line), _int(hcpu, "hcpu", line)))
                    except LearnError:
                        raise LearnError(f"malformed learnd line (K item {item[:24]!r}): "
                                         f"{line[:200]}") from None
            elif kind == "S":
                v = _ints(kv, ("seq", "worker") + SNAP_KEYS, line)
                r.snaps.setdefault(v.pop("seq"), {})[v.pop("worker")] = v
            elif kind == "SS":
                v = _ints(kv, ("seq", "t_ms", "swtch", "intr_err"), line)
                r.snap_sys[v.pop("seq")] = v
            elif kind == "I":
                seq, n, name = (rest.split(None, 2) + ["", ""])[:3]
                if not (seq.startswith("seq=") and n.startswith("n=") and name):
                    raise LearnError(f"malformed learnd line (I seq= n= name): {line[:200]}")
                counts = r.intr.setdefault(_int(seq[4:], "seq", line), {})
                if name in counts:
                    raise LearnError(f"malformed learnd line (interrupt {name!r} twice): "
                                     f"{line[:200]}")
                counts[name] = _int(n[2:], "n", line)
            elif kind == "FT":
                v = _ints(kv, ("ftype", "n"), line)
                r.ftypes.setdefault(kv.get("phase", "?"), {})[v["ftype"]] = v["n"]
            elif kind == "DONE":
                r.done = kv
                _check_done(r, kv, lineno, line)
            elif kind == "SET":
                r.sets.update(re.findall(r"(\S+)=(\S+)", rest))
            elif kind == "SYSCTL":
                name, _, value = rest.partition(":")
                r.sysctls[name.strip()] = value.strip()
            elif kind == "END":
                try:
                    r.rc = _int(kv.get("rc", ""), "rc", line)
                except LearnError:
                    r.damage.append(f"line {lineno}: END without a readable rc=: {line[:200]}")
                else:
                    if r.rc != 0:
                        r.damage.append(f"line {lineno}: learnd exited {r.rc}: {line[:200]}")
            else:
                r.notes.append(f"unknown learn line: {line}")
        except LearnError as exc:
            r.notes.append(f"line {lineno}: {exc}")
    for r in runs.values():
        if "DONE" in r.first_at and "END" not in r.first_at:
            r.damage.append(f"line {r.first_at['DONE']}: a DONE line and no END line after it "
                            "(learn-rc did not finish the run)")
    return runs
