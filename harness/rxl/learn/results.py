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
from rxl.guest.protocol import MARK, split_sentinel
from rxl.learn.plan import LEARNING, LearnError, config_of

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
    #: Per kind (W, C, READY, SET, ...), each line read without a note: its
    #: number (from 1) and text; W's and C's run parallel to ``workers`` and
    #: ``counts`` (the checks across lines name them: :func:`_check_lines`).
    lines_of: Dict[str, List[Tuple[int, str]]] = field(default_factory=dict)
    #: Lines of this label kept as notes (malformed): what a sum that does not
    #: add up may be missing.
    unread: List[int] = field(default_factory=list)
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


#: What each RUN value is (learnd.c: -P 1..65535, sysconf's online CPUs, -Q).
_RANGE = {"port": "TCP port (1 to 65535)", "ncpu": "count of CPUs (1 or more)",
          "nq": "count of receive queues"}


def _count_or_none(text: str, key: str) -> Optional[int]:
    """:func:`_int` of ``text``, None where it raises."""
    try:
        return _int(text, key, "")
    except LearnError:
        return None


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
    for key, low, high in (("port", 1, 65535), ("ncpu", 1, None), ("nq", 0, None)):
        v = _count_or_none(kv.get(key, ""), key)
        if v is None or v < low or (high is not None and v > high):
            r.damage.append(f"line {n}: RUN's {key}= is no {_RANGE[key]} "
                            f"({key}={kv.get(key, '(missing)')[:24]}): {line[:200]}")
        elif key == "ncpu" and any(c >= v for c in pins):
            r.damage.append(f"line {n}: RUN's pin= names CPU {max(pins)}, but ncpu={v} "
                            f"(the guest's CPUs are 0 to {v - 1}): {line[:200]}")
    for key in ("hcpu_opt", "tag_opt"):
        if key in kv and not re.fullmatch(r"0x[0-9a-f]{1,16}", kv[key]):
            r.damage.append(f"line {n}: RUN's {key}= is no hex number (learnd prints "
                            f"0x%lx): {line[:200]}")


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
    wcpu is not its pinned worker's CPU, a second RUN, DONE or END line, any
    line of the run after its END, a SET line whose value is not the one the
    run's configuration sets (:func:`_check_set`), lines that contradict each
    other (:func:`_check_lines`); two BEGIN lines of one label are in
    ``begins`` (the caller refuses them).
    """
    runs: Dict[str, RunSummary] = {}
    view_of: Dict[Tuple[str, int], Dict] = {}
    for lineno, raw in enumerate(lines, 1):
        before, line = split_sentinel(raw.rstrip("\r\n").replace("\r", ""))
        if not line:
            continue
        m = _LEARN_RE.match(line[len(MARK):].strip())
        if not m:
            continue
        kind, label, rest = m.group(1), m.group(2), m.group(3).strip()
        r = runs.setdefault(label, RunSummary(label))
        if before:  # read from its MARK on, as rxl.verify.parse reads a console
            r.notes.append(f"line {lineno}: console text before the sentinel on its line "
                           f"({before[:80]!r}): the sentinel read from {MARK} on")
        if "END" in r.first_at and kind != "BEGIN":  # a BEGIN starts a second run (refused)
            r.damage.append(f"line {lineno}: a {kind} line of run {label} after its END "
                            f"(line {r.first_at['END']}: learn-rc's last): {line[:200]}")
            continue
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
                seq, worker = v.pop("seq"), v.pop("worker")
                if worker in r.snaps.get(seq, {}):  # learnd prints each once per snapshot
                    r.damage.append(f"line {lineno}: a second S line of snapshot {seq}'s "
                                    f"worker {worker}: {line[:200]}")
                    continue
                r.snaps.setdefault(seq, {})[worker] = v
            elif kind == "SS":
                v = _ints(kv, ("seq", "t_ms", "swtch", "intr_err"), line)
                seq = v.pop("seq")
                if seq in r.snap_sys:
                    r.damage.append(f"line {lineno}: a second SS line of snapshot {seq}: "
                                    f"{line[:200]}")
                    continue
                r.snap_sys[seq] = v
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
                by_type = r.ftypes.setdefault(kv.get("phase", "?"), {})
                if v["ftype"] in by_type:  # learnd prints each (phase, ftype) once
                    raise LearnError(f"malformed learnd line (a second FT of phase "
                                     f"{kv.get('phase', '?')[:8]} ftype {v['ftype']}): "
                                     f"{line[:200]}")
                by_type[v["ftype"]] = v["n"]
            elif kind == "DONE":
                r.done = kv
                _check_done(r, kv, lineno, line)
            elif kind == "SET":
                pairs = re.findall(r"(\S+)=(\S+)", rest)
                r.sets.update(pairs)
                _check_set(r, pairs, lineno, line)
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
            else:  # not a line learnd or learn-rc writes: unread, and named where it counts
                raise LearnError(f"unknown LEARN line {kind[:16]} (not one learnd or learn-rc "
                                 f"writes): {line[:200]}")
            r.lines_of.setdefault(kind, []).append((lineno, line))
        except LearnError as exc:
            r.notes.append(f"line {lineno}: {exc}")
            r.unread.append(lineno)
    for r in runs.values():
        if "DONE" in r.first_at and "END" not in r.first_at:
            r.damage.append(f"line {r.first_at['DONE']}: a DONE line and no END line after it "
                            "(learn-rc did not finish the run)")
        _check_lines(r)
        r.damage.sort(key=lambda d: int(d.split(":", 1)[0].split()[1]))  # "line N: ..."
    return runs


#: Parts of an S line's count and their whole (learnd.c answer(): a request is
#: counted in ureqs when its handshake CPU is unknown, else in xreqs when it is
#: not the worker's; a wait that slept is counted in xwakes when its request's
#: connection was received elsewhere).
_SNAP_PARTS = ((("xreqs", "ureqs"), "reqs"), (("xwakes",), "slept"))


def _check_snapshots(r: RunSummary) -> None:
    """learnd's snapshots (S, SS lines, printed in snapshot order) agree with
    themselves: an S line's parts no larger than their whole
    (:data:`_SNAP_PARTS`); from one snapshot to the next each worker's counts
    and the system's (``t_ms``, ``swtch``: vm.stats.sys.v_swtch, which counts
    from the guest's boot, far from its 32 bits' wrap) never go back (-1, not
    known, is not compared). A line that does is damage, naming it and the
    line before."""
    last: Dict[object, Tuple[int, Dict[str, int]]] = {}
    for kind, keys in (("S", SNAP_KEYS), ("SS", ("t_ms", "swtch"))):
        for n, line in r.lines_of.get(kind, []):
            kv = dict(_KV_RE.findall(line))
            v = {k: _count_or_none(kv.get(k, ""), k) for k in keys}
            if kind == "S":
                for parts, whole in _SNAP_PARTS:
                    if None not in [v[p] for p in parts] + [v[whole]] and \
                            sum(v[p] for p in parts) > v[whole]:
                        r.damage.append(f"line {n}: {' + '.join(parts)} = "
                                        f"{sum(v[p] for p in parts)}, more than {whole}="
                                        f"{v[whole]} (a part of it): {line[:200]}")
            who = (kind, kv.get("worker"))
            if who in last:
                at, before = last[who]
                back = [k for k in keys if before[k] is not None and v[k] is not None and
                        before[k] >= 0 and v[k] >= 0 and v[k] < before[k]]
                if back:
                    k = back[0]
                    r.damage.append(f"line {n}: {k}={v[k]} went back from {before[k]} (line "
                                    f"{at}, the snapshot before): {line[:200]}")
            last[who] = (n, v)


def _check_set(r: RunSummary, pairs: Sequence[Tuple[str, str]], n: int, line: str) -> None:
    """learn-rc's SET line says the learning sysctl's value after it set it to the
    run's configuration's (rxl.learn.plan.LEARNING: learn-off and tagged 0,
    learn-on and learn-spread 1; a pristine run sets nothing): another value, or
    ``missing`` (it could not be set), damages the run, which is then not what its
    label says. A label of no configuration is not checked."""
    try:
        config, _ = config_of(r.label)
    except LearnError:
        return  # analyze refuses the label itself
    want = LEARNING[config]
    for name, value in pairs:
        if want is None:
            r.damage.append(f"line {n}: a {config} run sets no sysctl, but this line "
                            f"sets {name}: {line[:200]}")
        elif value != str(want):
            r.damage.append(f"line {n}: {name}={value[:24]}, but a {config} run sets it "
                            f"to {want}: {line[:200]}")


def _check_lines(r: RunSummary) -> None:
    """What learnd prints about one run agrees with itself (learnd.c main): READY
    and RUN give the same workers= and port=; one W line per worker, in worker
    order, with the CPU RUN's pin= gives it (cpus[w], -1 with pin=none) and
    accepts= the sum of its C lines' n= (every connection it counts it also
    accepts); a C line's worker one of RUN's, its q= -1 or below RUN's nq= (the
    queue rx_queue() picks); per phase the FT lines' n= adding up to the C
    lines' (each connection is counted in both); DONE's accepted= the sum of the
    W lines' accepts= (the sums only for a run with its DONE line, printed after
    them all); a K line's worker one of RUN's, its foreign ports 1 to 65535 and
    handshake CPUs below RUN's ncpu=. Whatever contradicts goes in ``damage``, naming its line."""
    run_at = r.first_at.get("RUN")
    info = r.info if run_at else {}
    nw = _count_or_none(info.get("workers", ""), "workers")
    nq = _count_or_none(info.get("nq", ""), "nq")
    pin = info.get("pin", "")
    pins: Optional[List[int]] = None
    if pin == "none":
        pins = []
    elif pin:
        got = [_count_or_none(c, "pin") for c in pin.split(",")]
        pins = got if None not in got and (nw is None or len(got) == nw) else None
    for n, line in r.lines_of.get("READY", []):
        kv = dict(_KV_RE.findall(line))
        for key in ("workers", "port"):
            if run_at and kv.get(key) != info.get(key):
                r.damage.append(f"line {n}: READY's {key}={kv.get(key, '(missing)')[:24]}, "
                                f"but RUN's (line {run_at}) {key}={info.get(key, '')[:24]}: "
                                f"{line[:200]}")
    seen: Dict[int, int] = {}
    for pos, (w, (n, line)) in enumerate(zip(r.workers, r.lines_of.get("W", []))):
        i = w["worker"]
        if i in seen:
            r.damage.append(f"line {n}: a second W line of worker {i} (the first at line "
                            f"{seen[i]}): {line[:200]}")
            continue
        seen[i] = n
        if nw is not None and i >= nw:
            r.damage.append(f"line {n}: worker={i}, but RUN's (line {run_at}) workers={nw}: "
                            f"{line[:200]}")
        elif i != pos:
            r.damage.append(f"line {n}: the W line of worker {i} where worker {pos}'s is "
                            f"due (learnd prints them in order): {line[:200]}")
        elif pins is not None and w["cpu"] != (pins[i] if pins else -1):
            r.damage.append(f"line {n}: cpu={w['cpu']}, but RUN's (line {run_at}) pin={pin} "
                            f"gives worker {i} " + (f"CPU {pins[i]}" if pins else "none (-1)")
                            + f": {line[:200]}")
    if nw is not None and "DONE" in r.first_at and len(seen) < nw:  # all printed by then
        lack = [i for i in range(nw) if i not in seen]
        r.damage.append(f"line {run_at}: RUN's workers={nw}, but no W line of "
                        f"{counted(len(lack), 'worker')} ({', '.join(map(str, lack[:8]))})")
    per_worker: Dict[int, int] = {}
    per_phase: Dict[str, int] = {}
    for c, (n, line) in zip(r.counts, r.lines_of.get("C", [])):
        per_worker[c.worker] = per_worker.get(c.worker, 0) + c.n
        per_phase[c.phase] = per_phase.get(c.phase, 0) + c.n
        if nw is not None and c.worker >= nw:
            r.damage.append(f"line {n}: worker={c.worker}, but RUN's (line {run_at}) "
                            f"workers={nw}: {line[:200]}")
        if nq is not None and c.q >= nq:
            r.damage.append(f"line {n}: q={c.q}, but RUN's (line {run_at}) nq={nq} "
                            f"(a queue is 0 to nq - 1, or -1 unknown): {line[:200]}")
    ncpu = _count_or_none(info.get("ncpu", ""), "ncpu")
    for n, line in r.lines_of.get("K", []):
        kw = _count_or_none(dict(_KV_RE.findall(line)).get("worker", ""), "worker")
        items = line.split("worker=", 1)[1].split()[1:]
        hcpus = [int(h) for _, _, h in (it.partition(":") for it in items)]
        ports = [int(p) for p, _, _ in (it.partition(":") for it in items)]
        if nw is not None and kw is not None and kw >= nw:
            r.damage.append(f"line {n}: worker={kw}, but RUN's (line {run_at}) "
                            f"workers={nw}: {line[:200]}")
        if any(not 1 <= p <= 65535 for p in ports):
            bad = next(p for p in ports if not 1 <= p <= 65535)
            r.damage.append(f"line {n}: foreign port {bad} is no TCP port (1 to 65535): "
                            f"{line[:200]}")
        if ncpu is not None and any(h >= ncpu for h in hcpus):
            r.damage.append(f"line {n}: handshake CPU {max(hcpus)}, but RUN's (line "
                            f"{run_at}) ncpu={ncpu}: {line[:200]}")
    _check_snapshots(r)
    if "DONE" not in r.first_at:
        return  # learnd prints DONE after all of them: a run cut short is refused as such
    unread = (f" (line {r.unread[0]}, unreadable, is not counted"
              + (f"; {len(r.unread) - 1} more" if len(r.unread) > 1 else "") + ")"
              if r.unread else "")
    for w, (n, line) in zip(r.workers, r.lines_of.get("W", [])):
        if seen.get(w["worker"]) == n and w["accepts"] != per_worker.get(w["worker"], 0):
            r.damage.append(f"line {n}: accepts={w['accepts']}, but worker {w['worker']}'s "
                            f"C lines count {per_worker.get(w['worker'], 0)} connections"
                            f"{unread}: {line[:200]}")
    for ph, by_type in r.ftypes.items():
        if sum(by_type.values()) != per_phase.get(ph, 0):
            at = next(n for n, ln in r.lines_of.get("FT", []) if f" phase={ph} " in ln)
            r.damage.append(f"line {at}: phase {ph}'s FT lines count "
                            f"{sum(by_type.values())} connections, its C lines "
                            f"{per_phase.get(ph, 0)}{unread}")
    done = _count_or_none(r.done.get("accepted", ""), "accepted")
    if done is not None and r.workers:
        total = sum(w["accepts"] for w in r.workers)
        if done != total:
            r.damage.append(f"line {r.first_at['DONE']}: DONE's accepted={done}, but the W "
                            f"lines' accepts= add up to {total}{unread}")
