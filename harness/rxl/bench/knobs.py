"""The accept rig's server and client knobs, and run labels.

:class:`Knobs` holds what ``acceptd`` does with a connection once it has
it (server model, work, holding, accepts per wakeup), how the client
behaves (open or closed loop, aborting clients) and the per-setup knobs
(untagged rank, least-connections lag, accept-mutex delay).  It builds
its part of the server's argv, validates, and adds its time to the run's
deadline.  :func:`run_label` names a run by the parameters it actually
ran with, read back from the server's JSON, so a label never claims a
default the run did not use (``reorder1`` is not ``reorder16``).

Defaults and their sources:

* ``server="loop"``: the event-loop model (each worker keeps accepting
  while it holds connections), the default because it is
  what event-loop servers (nginx, Envoy, node) do; ``serial`` is the first
  rig's accept-work-close model.
* ``hold_ms=0``: close after the response, as the first rig did.
* ``accepts_per_wakeup=0`` (unlimited): drain until EAGAIN, nginx's
  ``multi_accept on``; 1 is ``multi_accept off`` (one accept per event).
  acceptd bounds one drain at 64 (MAXBATCH), as it always did.
* ``lag_ms=10``: a balancer re-reading its backends' counts every 10 ms;
  our choice, stated with every handoff-lc label that differs.
* ``mutex_delay_ms=500``: nginx's ``accept_mutex_delay`` default.
* ``concurrency=8``: closed-loop connections in flight, one per default
  worker.
* ``requests=0``: the accept workload (each connection one response).  A
  positive value is the request workload (rxl.bench.wakeups): that many
  requests per connection, ``in_flight=1`` per client process (one client
  pinned per receiving CPU, ``rx_cpus`` None: every CPU), each after
  ``think_us=0`` of client sleep, with an ``idle_ms=1000`` window before
  them to measure the background.  ``deal_counts="tags"``: ebpf-deal's map
  is dealt from the workers' tags alone (nothing counted, the kernel's
  state before learning); ``"rx"`` deals it from the receiving CPUs'
  connection counts, what learning at accept(2) converges to.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import List, Optional, Tuple

SERVERS = ("loop", "serial")
WORK_KINDS = ("sleep", "cpu")
CLIENTS = ("open", "closed")
ABORT_KINDS = ("reset", "handshake")

DEFAULT_LAG_MS = 10.0
DEFAULT_MUTEX_DELAY_MS = 500.0
DEFAULT_CONCURRENCY = 8
DEFAULT_IDLE_MS = 1000.0
DEAL_COUNTS = ("tags", "rx")

#: acceptd's bounds: -H in us up to one hour, -l up to 10000, -L up to
#: 60 s, -D 1 ms..10 s, -a 0..64.
MAX_HOLD_MS = 3600000.0
MAX_CONCURRENCY = 10000
MAX_LAG_MS = 60000.0
MAX_BATCH = 64
#: acceptd's -q, -F, -Z (us) and -I (ms) bounds.
MAX_REQUESTS = 1000000
MAX_IN_FLIGHT = 1024
MAX_THINK_US = 10000000.0
MAX_IDLE_MS = 60000.0
#: Allowance per request in the run's deadline, ms: a cross-CPU round
#: trip to a halted vCPU took 0.5 ms on the 2-vCPU build host.
REQUEST_ALLOWANCE_MS = 2.0

#: Setups that only exist in the event-loop model (acceptd refuses them
#: with -M serial): the point of each is how a loop registers or receives.
LOOP_ONLY = frozenset({"et", "exclusive-et", "accept-mutex", "handoff-rr",
                       "handoff-lc"})


def finite(value: float, option: str, lo: float, hi: float) -> float:
    """``value`` if it is a finite number in [lo, hi], else ValueError
    naming ``option`` (NaN and infinity pass plain range checks)."""
    if not isinstance(value, (int, float)) or math.isnan(value) or \
            math.isinf(value):
        raise ValueError(f"{option} must be a finite number, got {value}")
    if not lo <= value <= hi:
        # .15g: 3600001 must not print as 3.6e+06, the bound it is above.
        raise ValueError(f"{option} must be {lo:.15g}..{hi:.15g}, "
                         f"got {value:.15g}")
    return float(value)


def parse_hold(text: str) -> Optional[float]:
    """``--hold-ms``: milliseconds, or ``client`` (None: until the client
    closes).  Raises ValueError."""
    t = text.strip().lower()
    if t == "client":
        return None
    try:
        v = float(t)
    except ValueError:
        raise ValueError(f"--hold-ms must be milliseconds or 'client', "
                         f"got {text!r}") from None
    return finite(v, "--hold-ms", 0, MAX_HOLD_MS)


def parse_batch(text: str) -> int:
    """``--accepts-per-wakeup``: 1..64 (decimal ASCII digits) or ``unlimited``,
    returned as 0 (acceptd's ``-a 0``; ``0`` itself is not a count the option
    takes).  Raises ValueError."""
    t = text.strip().lower()
    if t == "unlimited":
        return 0
    if not re.fullmatch(r"[0-9]{1,3}", t):
        raise ValueError(f"--accepts-per-wakeup must be 1..{MAX_BATCH} or "
                         f"'unlimited', got {text!r}")
    v = int(t)
    if not 1 <= v <= MAX_BATCH:
        raise ValueError(f"--accepts-per-wakeup must be 1..{MAX_BATCH} or "
                         f"'unlimited', got {text!r}")
    return v


def parse_untagged(text: str) -> Optional[int]:
    """``--untagged``: ``last`` (None, the server's default: rank
    workers-1), ``none`` (-1: every listener tagged) or a rank.  Raises
    ValueError."""
    t = text.strip().lower()
    if t == "last":
        return None
    if t == "none":
        return -1
    try:
        v = int(t)
    except ValueError:
        raise ValueError(f"--untagged must be none, last or a rank, "
                         f"got {text!r}") from None
    if v < 0:
        raise ValueError(f"--untagged rank must be >= 0, got {v}")
    return v


@dataclass(frozen=True)
class Knobs:
    """Server model, client and per-setup knobs of one run.

    Units: ms for times (the server takes us, rounded); ``hold_ms`` None
    means until the client closes; ``accepts_per_wakeup`` 0 is unlimited;
    ``abort_share`` a fraction 0..1 of the connections; ``untagged`` None
    for the server's default (the last rank), -1 for none; ``requests``
    per connection (0: the accept workload), ``think_us`` in us,
    ``idle_ms`` in ms, ``rx_cpus`` CPU ids or None for every CPU.
    """

    server: str = "loop"
    work_kind: str = "sleep"
    hold_ms: Optional[float] = 0.0
    accepts_per_wakeup: int = 0
    client: str = "open"
    concurrency: int = DEFAULT_CONCURRENCY
    abort_share: float = 0.0
    abort_kind: str = "reset"
    untagged: Optional[int] = None
    lag_ms: float = DEFAULT_LAG_MS
    mutex_delay_ms: float = DEFAULT_MUTEX_DELAY_MS
    requests: int = 0
    in_flight: int = 1
    think_us: float = 0.0
    idle_ms: float = DEFAULT_IDLE_MS
    rx_cpus: Optional[Tuple[int, ...]] = None
    deal_counts: str = "tags"

    def validate(self, workers: int) -> None:
        """Raise ValueError on a value acceptd would refuse."""
        for name, val, allowed in (("--server", self.server, SERVERS),
                                   ("--work-kind", self.work_kind,
                                    WORK_KINDS),
                                   ("--client", self.client, CLIENTS),
                                   ("--abort-kind", self.abort_kind,
                                    ABORT_KINDS)):
            if val not in allowed:
                raise ValueError(f"{name} must be one of "
                                 f"{', '.join(allowed)}, got {val!r}")
        if self.hold_ms is not None:
            finite(self.hold_ms, "--hold-ms", 0, MAX_HOLD_MS)
        if not 0 <= self.accepts_per_wakeup <= MAX_BATCH:
            raise ValueError(f"--accepts-per-wakeup must be 1..{MAX_BATCH} "
                             f"or unlimited, got {self.accepts_per_wakeup}")
        if not 1 <= self.concurrency <= MAX_CONCURRENCY:
            raise ValueError(f"--concurrency must be 1..{MAX_CONCURRENCY}, "
                             f"got {self.concurrency}")
        finite(self.abort_share, "--abort-share", 0, 1)
        finite(self.lag_ms, "--lag-ms", 0, MAX_LAG_MS)
        finite(self.mutex_delay_ms, "--mutex-delay-ms", 1, 10000)
        if self.untagged is not None and self.untagged >= workers:
            raise ValueError(f"--untagged rank must be below --workers "
                             f"({workers}), got {self.untagged}")
        self._validate_requests()

    def _validate_requests(self) -> None:
        if self.deal_counts not in DEAL_COUNTS:
            raise ValueError(f"--deal-counts must be one of "
                             f"{', '.join(DEAL_COUNTS)}, got "
                             f"{self.deal_counts!r}")
        if not isinstance(self.requests, int) or \
                not 0 <= self.requests <= MAX_REQUESTS:
            raise ValueError(f"--requests must be 0..{MAX_REQUESTS}, "
                             f"got {self.requests}")
        if not 1 <= self.in_flight <= MAX_IN_FLIGHT:
            raise ValueError(f"--in-flight must be 1..{MAX_IN_FLIGHT}, "
                             f"got {self.in_flight}")
        finite(self.think_us, "--think-us", 0, MAX_THINK_US)
        finite(self.idle_ms, "--idle-ms", 0, MAX_IDLE_MS)
        if self.rx_cpus is not None and (
                not self.rx_cpus or len(set(self.rx_cpus)) !=
                len(self.rx_cpus) or min(self.rx_cpus) < 0):
            raise ValueError(f"--rx-cpus must name each CPU once, got "
                             f"{list(self.rx_cpus)}")
        if self.requests == 0:
            for opt, off in (("--rx-cpus", self.rx_cpus is not None),
                             ("--in-flight", self.in_flight != 1),
                             ("--think-us", self.think_us != 0),
                             ("--idle-ms", self.idle_ms != DEFAULT_IDLE_MS)):
                if off:
                    raise ValueError(f"{opt} goes with --requests (the "
                                     f"request workload)")
            return
        for opt, off in (("--server serial", self.server != "loop"),
                         ("--client closed", self.client != "open"),
                         ("--hold-ms", self.hold_ms != 0),
                         ("--abort-share", self.abort_share != 0)):
            if off:
                raise ValueError(f"{opt} does not apply with --requests: "
                                 f"its clients hold every connection "
                                 f"open and run their own closed loop "
                                 f"in the event-loop model")

    def check_setup(self, setup: str) -> None:
        """Raise ValueError if ``setup`` cannot run in this model."""
        if self.server == "serial" and setup in LOOP_ONLY:
            raise ValueError(f"setup {setup} needs --server loop (it is "
                             f"about how an event loop accepts)")

    def argv(self) -> List[str]:
        """acceptd options for these knobs."""
        hold = -1 if self.hold_ms is None else int(round(self.hold_ms * 1000))
        out = ["-M", self.server, "-T", self.work_kind, "-H", str(hold),
               "-a", str(self.accepts_per_wakeup),
               "-L", str(int(round(self.lag_ms * 1000))),
               "-D", str(int(round(self.mutex_delay_ms * 1000)))]
        if self.client == "closed":
            out += ["-l", str(self.concurrency)]
        if self.abort_share > 0:
            out += ["-x", str(int(round(self.abort_share * 1000))),
                    "-X", self.abort_kind]
        if self.untagged is not None:
            out += ["-u", "none" if self.untagged < 0 else str(self.untagged)]
        if self.requests:
            out += ["-q", str(self.requests), "-F", str(self.in_flight),
                    "-Z", str(int(round(self.think_us))),
                    "-I", str(int(round(self.idle_ms)))]
            if self.rx_cpus is not None:
                out += ["-R", ",".join(str(c) for c in self.rx_cpus)]
        return out

    def extra_ms(self, connections: int) -> float:
        """Time these knobs add to a run beyond the client's schedule, ms:
        a held connection's hold (the run waits for the last to end), the
        closed loop's holds in sequence per slot, aborted clients' settle."""
        hold = self.hold_ms or 0.0
        if self.requests:
            return self.idle_ms + connections * self.requests * (
                self.think_us / 1000.0 + REQUEST_ALLOWANCE_MS)
        if self.client == "closed":
            rounds = math.ceil(connections / self.concurrency)
            return rounds * (hold + 1.0)
        return hold + (500.0 if self.abort_share else 0.0)


def run_label(raw: dict) -> str:
    """A run's label from the parameters in acceptd's JSON (version 1 or 2).

    The setup name, ``reorder`` with its interval, then every knob that
    differs from its default: ``serial``, ``work=5ms`` (``cpu`` when
    spinning), ``hold=2000ms`` or ``hold=client``, ``batch=1``,
    ``closed x8``, ``abort=10%reset``, ``untagged=none``, ``lag=50ms``.
    """
    setup = raw.get("setup", "?")
    if setup in ("reorder", "reorder16"):
        setup = f"reorder{raw.get('reorder_every', 16)}"
    parts = [setup]
    if raw.get("server") == "serial":     # version 1 has no models
        parts.append("serial")
    work = raw.get("work_us", 0) / 1000.0
    if work:
        kind = "cpu" if raw.get("work_kind") == "cpu" else ""
        parts.append(f"work={work:g}ms{kind and ' ' + kind}")
    hold = raw.get("hold_us", 0)
    if hold == -1:
        parts.append("hold=client")
    elif hold:
        parts.append(f"hold={hold / 1000.0:g}ms")
    if raw.get("accepts_per_wakeup", 0):
        parts.append(f"batch={raw['accepts_per_wakeup']}")
    if raw.get("client") == "closed":
        parts.append(f"closed x{raw.get('concurrency')}")
    if raw.get("abort_permille", 0):
        parts.append(f"abort={raw['abort_permille'] / 10:g}%"
                     f"{raw.get('abort_kind', '')}")
    if raw.get("setup") == "incoming-cpu":
        u = raw.get("untagged_rank", raw.get("workers", 0) - 1)
        if u != raw.get("workers", 0) - 1:
            parts.append("untagged=none" if u < 0 else f"untagged={u}")
    if raw.get("setup") == "handoff-lc" and \
            raw.get("lag_us", 10000) != int(DEFAULT_LAG_MS * 1000):
        parts.append(f"lag={raw['lag_us'] / 1000.0:g}ms")
    rq = raw.get("requests")
    if rq:
        parts.append(f"requests={rq.get('per_connection')}")
        if rq.get("in_flight", 1) != 1:
            parts.append(f"in-flight={rq['in_flight']}")
        if rq.get("think_us"):
            parts.append(f"think={rq['think_us']}us")
        rx = rq.get("rx_cpus", [])
        if sorted(rx) != list(range(raw.get("ncpu", len(rx)))):
            parts.append("rx=" + ",".join(str(c) for c in rx))
    # Set by the harness for ebpf-deal (acceptd only reads the map).
    if raw.get("deal_counts") == "rx":
        parts.append("deal=rx")
    if raw.get("setup") == "accept-mutex" and \
            raw.get("mutex_delay_us", 500000) != \
            int(DEFAULT_MUTEX_DELAY_MS * 1000):
        parts.append(f"delay={raw['mutex_delay_us'] / 1000.0:g}ms")
    return " ".join(parts)
