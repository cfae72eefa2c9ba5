"""The host-side connection driver of a learning run: bounded, loopback only.

:func:`drive_phase` / :func:`drive_run` open connections to learnd through
QEMU's ``hostfwd`` on 127.0.0.1, bounded in count and time, one phase
(warm-up, measured) after another; :func:`port_connector` chooses the
client source ports (QEMU hands them to the guest as the foreign port);
:func:`drive_requests` keeps connections open and sends requests on them
in a closed loop (``rxl learn --requests``); :class:`Conductor` starts a
run's connections when the guest says it is ready.
"""

from __future__ import annotations

import queue
import random
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from rxl.guest.protocol import MARK
from rxl.learn.plan import (KEEP_BYTE, LOOPBACK_HOSTS, PHASE_BYTES, SNAP_BYTE, LearnError,
                            Phase, Requests)


@dataclass
class PhaseResult:
    """What the driver did in one phase. ``seconds``: wall time."""

    name: str
    attempts: int = 0
    ok: int = 0
    failed: int = 0
    seconds: float = 0.0
    stopped_by: str = ""


def connect_once(port: int, byte: str, *, host: str = "127.0.0.1",
                 timeout: float = 5.0, src_port: Optional[int] = None) -> bool:
    """One connection: connect, send ``byte``, wait for learnd's ``k``. True on success.

    ``src_port``: bind the client to this local port first (None: the
    kernel picks). Raises LearnError for a host outside
    :data:`LOOPBACK_HOSTS`; a port already in use is a failed attempt.
    """
    if host not in LOOPBACK_HOSTS:
        raise LearnError(f"refusing to connect to {host}: loopback only")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            if src_port is not None:
                s.bind((host, src_port))
            s.connect((host, port))
            s.sendall(byte.encode("ascii"))
            return s.recv(1) == b"k"
    except OSError:
        return False


#: Client source ports for :func:`port_connector` (both parities; below
#: Linux's default ephemeral range 32768-60999 would be fine too, this
#: range just avoids the well-known and registered low ports).
SRC_PORT_RANGE = (20000, 61000)


def port_connector(mode: str = "random", *, seed: int = 6,
                   port_range: Tuple[int, int] = SRC_PORT_RANGE,
                   connect: Callable[..., bool] = connect_once,
                   tries: int = 5) -> Callable[[int, str], bool]:
    """A ``connect(port, byte)`` for the driver that chooses client source ports.

    QEMU's user networking hands the host client's source port to the guest
    as the connection's foreign port (measured: ``rxl learn`` run of
    2026-11-30, docs/results/learning.md), and Linux's connect(2) prefers
    even ephemeral ports, so with ``mode="kernel"`` every guest-side foreign
    port is even and the lbgroup tuple hash (``INP_PCBLBGROUP_PKTHASH``: the
    port pair XORed into the low bits) never selects odd-indexed members.

    ``mode="random"`` walks a seeded random permutation of ``port_range``,
    so a port comes back only after every other port of the range has been
    used: at a few hundred connections a second, later than the 60 s
    TIME_WAIT of either side.  Drawing with replacement reused ports within
    TIME_WAIT, and such a reuse fails more often for some members than
    others (docs/results/learning.md, "Where the exact share goes"); the
    driver's retry with a fresh port then skewed which ports, and so which
    slots, the measured connections had.  A failed try moves on to the next
    port, up to ``tries`` per connection.  The returned function counts
    failed tries in its ``retries`` attribute.  Raises LearnError for an
    unknown mode or an empty range.
    """
    if mode == "kernel":
        def plain(port: int, byte: str) -> bool:
            return connect(port, byte)
        plain.retries = 0
        plain.open = lambda port: open_kept(port)
        return plain
    if mode != "random":
        raise LearnError(f"client port mode {mode!r}: 'random' or 'kernel'")
    lo, hi = port_range
    if not 0 < lo < hi <= 65536:
        raise LearnError(f"bad client port range {port_range}")
    order = list(range(lo, hi))
    random.Random(seed).shuffle(order)
    pos = [0]
    lock = threading.Lock()

    def go(port: int, byte: str) -> bool:
        for _ in range(tries):
            with lock:
                src = order[pos[0] % len(order)]
                pos[0] += 1
            if connect(port, byte, src_port=src):
                return True
            with lock:
                go.retries += 1
        return False
    def kept(port: int) -> Optional[socket.socket]:
        for _ in range(tries):
            with lock:
                src = order[pos[0] % len(order)]
                pos[0] += 1
            s = open_kept(port, src_port=src)
            if s is not None:
                return s
            with lock:
                go.retries += 1
        return None
    go.retries = 0
    go.open = kept
    return go


def drive_phase(port: int, phase: Phase, *, concurrency: int = 1,
                connect: Callable[[int, str], bool] = connect_once,
                clock: Callable[[], float] = time.monotonic,
                max_consecutive_failures: int = 200) -> PhaseResult:
    """Open connections for one phase; returns counts. Bounded in count and time.

    Stops at ``phase.max_s`` seconds or ``phase.max_conns`` attempts, or
    once ``phase.min_s`` passed and ``phase.min_conns`` succeeded, or after
    ``max_consecutive_failures`` failures in a row (the guest is gone).
    ``concurrency`` > 1 uses that many threads; 1 runs in the caller.
    """
    if concurrency < 1:
        raise LearnError(f"concurrency must be >= 1, got {concurrency}")
    res = PhaseResult(phase.name)
    lock = threading.Lock()
    t0 = clock()
    state = {"streak": 0}

    def claim() -> bool:
        with lock:
            el = clock() - t0
            if el >= phase.max_s:
                res.stopped_by = res.stopped_by or "max_s"
            elif res.attempts >= phase.max_conns:
                res.stopped_by = res.stopped_by or "max_conns"
            elif el >= phase.min_s and res.ok >= phase.min_conns:
                res.stopped_by = res.stopped_by or "done"
            elif state["streak"] >= max_consecutive_failures:
                res.stopped_by = res.stopped_by or "failures"
            else:
                res.attempts += 1
                return True
            return False

    def loop() -> None:
        while claim():
            good = connect(port, phase.byte)
            with lock:
                if good:
                    res.ok += 1
                    state["streak"] = 0
                else:
                    res.failed += 1
                    state["streak"] += 1

    if concurrency == 1:
        loop()
    else:
        threads = [threading.Thread(target=loop, daemon=True) for _ in range(concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(phase.max_s + 60)
    res.seconds = clock() - t0
    return res


def drive_run(port: int, phases: Sequence[Phase], *, concurrency: int = 1,
              connect: Callable[[int, str], bool] = connect_once,
              clock: Callable[[], float] = time.monotonic, quit_tries: int = 5,
              sleep: Callable[[float], None] = time.sleep,
              requests: Optional[Requests] = None) -> List[PhaseResult]:
    """Every phase in order, then (with ``requests``) :func:`drive_requests`,
    then the quit connection (up to ``quit_tries``, 1 s apart).

    A phase in which no connection succeeded ends the phases (the guest is
    not answering); the quit connection is still tried.
    """
    out: List = []
    for ph in phases:
        r = drive_phase(port, ph, concurrency=concurrency, connect=connect, clock=clock)
        out.append(r)
        if r.attempts and not r.ok:
            # Nothing got through: the guest does not answer; skip to quit.
            r.stopped_by += " (no connection succeeded: later phases skipped)"
            break
    else:
        if requests is not None:
            out.append(drive_requests(port, requests, concurrency=concurrency,
                                      open_conn=getattr(connect, "open", None),
                                      clock=clock, sleep=sleep))
    q = PhaseResult("quit")
    t0 = clock()
    for _ in range(quit_tries):
        q.attempts += 1
        if connect(port, PHASE_BYTES["quit"]):
            q.ok += 1
            break
        q.failed += 1
        sleep(1.0)
    q.seconds = clock() - t0
    out.append(q)
    return out


def open_kept(port: int, *, host: str = "127.0.0.1", timeout: float = 5.0,
              src_port: Optional[int] = None) -> Optional[socket.socket]:
    """A measured connection that stays open for requests: connect, send
    :data:`~rxl.learn.plan.KEEP_BYTE`, wait for learnd's ``k`` (it has
    accepted and kept it).  The socket (blocking, ``timeout`` s), or None
    on failure.  Raises LearnError for a host outside :data:`LOOPBACK_HOSTS`."""
    if host not in LOOPBACK_HOSTS:
        raise LearnError(f"refusing to connect to {host}: loopback only")
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # The client closes first, so its ports sit in TIME_WAIT: another
        # run's connection from one of them to another port is still fine.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if src_port is not None:
            s.bind((host, src_port))
        s.connect((host, port))
        s.sendall(KEEP_BYTE.encode("ascii"))
        if s.recv(1) == b"k":
            return s
    except OSError:
        pass
    s.close()
    return None


#: One request and one answer (learnd.c REQ_LEN): two little-endian u32,
#: the client's thread and a sequence number; learnd answers its CPU and
#: the same sequence number.
REQ = struct.Struct("<II")


@dataclass
class RequestResult:
    """What the driver did in a request phase: connections kept open,
    requests answered, snapshots learnd took (``s`` connections), the
    closed loop's wall time."""

    name: str = "requests"
    attempts: int = 0
    ok: int = 0
    failed: int = 0
    requests: int = 0
    errors: int = 0
    snapshots: int = 0
    seconds: float = 0.0
    stopped_by: str = ""


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed by learnd")
        buf += chunk
    return buf


def drive_requests(port: int, plan_: Requests, *, concurrency: int = 1,
                   open_conn: Optional[Callable[[int], Optional[socket.socket]]] = None,
                   connect: Callable[[int, str], bool] = connect_once,
                   clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep,
                   snap_tries: int = 5) -> RequestResult:
    """The request phase: open ``plan_.connections`` kept connections (each
    accepted before the next opens), ask learnd for snapshot 0, stay idle
    ``plan_.idle_s``, snapshot 1, then ``concurrency`` threads each run a
    closed loop (one request outstanding) over its share of the connections
    (connection i to thread i mod concurrency) until each carried
    ``plan_.requests``; snapshot 2; close them.  ``open_conn(port)`` opens a
    kept connection (default :func:`open_kept`, the kernel's port; the
    port connector's ``open`` walks its ports); ``connect(port, byte)`` asks
    for a snapshot, up to ``snap_tries`` times.  The figures are learnd's
    (rxl.learn.wakeups); this only counts what it sent.  A thread stops at
    its first failed request (counted in ``errors``).  Raises LearnError
    for ``concurrency`` < 1."""
    if concurrency < 1:
        raise LearnError(f"concurrency must be >= 1, got {concurrency}")
    opener = open_conn or (lambda p: open_kept(p))
    res = RequestResult()
    conns: List[socket.socket] = []
    for _ in range(plan_.connections):
        res.attempts += 1
        s = opener(port)
        if s is None:
            res.failed += 1
            if res.failed >= 50 and not conns:
                res.stopped_by = "no connection succeeded"
                return res
            continue
        conns.append(s)
    res.ok = len(conns)

    def snap() -> None:
        for _ in range(snap_tries):
            if connect(port, SNAP_BYTE):
                res.snapshots += 1
                return

    lock = threading.Lock()

    def loop(t: int, mine: Sequence[socket.socket]) -> None:
        done = errors = 0
        try:
            for seq in range(plan_.requests):
                for s in mine:
                    s.sendall(REQ.pack(t, seq))
                    _, echo = REQ.unpack(_recv_exact(s, REQ.size))
                    if echo != seq:
                        raise OSError(f"answer {echo} to request {seq}")
                    done += 1
        except OSError:
            errors = 1
        with lock:
            res.requests += done
            res.errors += errors

    try:
        snap()
        sleep(plan_.idle_s)
        snap()
        t0 = clock()
        threads = [threading.Thread(target=loop, args=(t, conns[t::concurrency]), daemon=True)
                   for t in range(min(concurrency, len(conns)))]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        res.seconds = clock() - t0
        snap()
    finally:
        for s in conns:
            s.close()
    res.stopped_by = "done" if res.requests == len(conns) * plan_.requests else "errors"
    return res


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (for the hostfwd rule)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


#: The guest's learnd says a run is ready for connections (templates/learn-rc.j2).
READY = re.compile(re.escape(MARK) + r" LEARN READY (\S+)")


class Conductor:
    """Drives the host's connections whenever the guest prints ``LEARN READY <label>``.

    ``on_line`` is given to :func:`rxl.guest.console.watch` as its ``echo``; a
    daemon thread waits (bounded by ``wait_s`` per run) for the next ready
    label and runs :func:`drive_run` against ``port``.
    """

    def __init__(self, port: int, phases: Sequence[Phase], nruns: int, *,
                 concurrency: int, wait_s: float, echo: Callable[[str], None],
                 connect: Callable[[int, str], bool] = connect_once,
                 requests: Optional[Requests] = None):
        self.port, self.phases, self.nruns = port, list(phases), nruns
        self.requests = requests
        self.connect = connect
        self.concurrency, self.wait_s, self.echo = concurrency, wait_s, echo
        self.q: "queue.Queue[Optional[str]]" = queue.Queue()
        self.results: Dict[str, List[PhaseResult]] = {}
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def on_line(self, line: str) -> None:
        self.echo(f"  {line}")
        m = READY.match(line)
        if m:
            self.q.put(m.group(1))

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.q.put(None)
        self.thread.join(30)

    def _loop(self) -> None:
        for _ in range(self.nruns):
            try:
                label = self.q.get(timeout=self.wait_s)
            except queue.Empty:
                self.echo("  driver: no LEARN READY line in time; stopping the driver")
                return
            if label is None:
                return
            before = getattr(self.connect, "retries", 0)
            res = drive_run(self.port, self.phases, concurrency=self.concurrency,
                            connect=self.connect, requests=self.requests)
            self.results[label] = res
            retried = getattr(self.connect, "retries", 0) - before
            self.echo("  driver: " + label + ": " + "; ".join(
                f"{r.name} {r.ok}/{r.attempts} ok in {r.seconds:.0f} s"
                + (f", {r.requests} requests, {r.snapshots} snapshots"
                   if isinstance(r, RequestResult) else "")
                + (f" ({r.stopped_by})" if r.stopped_by else "") for r in res)
                + f"; {retried} tries retried on a fresh client port")
