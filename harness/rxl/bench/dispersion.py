"""How uneven one run's accepts are: figures that do not hide imbalance.

Every function takes the per-worker accept counts of one run (a sequence
of non-negative ints, one per worker in registration order) and is pure.
An even spread has ``cv == 0``, ``max_min == 1``, ``idle == 0`` and a
top-k share of ``k / n``; one worker taking everything has
``cv == sqrt(n - 1)``, ``max_min == inf`` (with n > 1), ``idle == n - 1``
and a top-k share of 1.

Why these (a mean and a range hide imbalance): the first/last
columns of the first rig looked only at ranks 0 and n-1 (with 256 workers
75% went to six in the middle and both said 0%), and per-rank means were
rounded to integers (a mean of 0.5 read as 0).  Top-k share, idle count,
the coefficient of variation and max/min describe the whole vector.
"""

from __future__ import annotations

import math
import statistics
from typing import Dict, Sequence


def _check(counts: Sequence[int]) -> None:
    if not counts:
        raise ValueError("no workers")
    if any(c < 0 for c in counts):
        raise ValueError(f"negative accept count in {list(counts)}")


def idle(counts: Sequence[int]) -> int:
    """Workers that accepted nothing.  Raises ValueError on no workers."""
    _check(counts)
    return sum(1 for c in counts if c == 0)


def cv(counts: Sequence[int]) -> float:
    """Coefficient of variation: population stdev / mean (0 = even).

    0.0 when nothing was accepted (nothing to be uneven about).  Raises
    ValueError on no workers or a negative count.
    """
    _check(counts)
    mean = statistics.fmean(counts)
    if mean == 0:
        return 0.0
    return statistics.pstdev(counts) / mean


def max_min(counts: Sequence[int]) -> float:
    """Busiest over least busy worker; ``inf`` when a worker is idle and
    another is not, 1.0 when nothing was accepted."""
    _check(counts)
    hi, lo = max(counts), min(counts)
    if hi == 0:
        return 1.0
    return math.inf if lo == 0 else hi / lo


def default_k(n: int) -> int:
    """k of the top-k share: the busiest quarter of the workers, at least
    one (an even spread gives them 25%, whatever n)."""
    if n < 1:
        raise ValueError("no workers")
    return max(1, math.ceil(n / 4))


def top_k_share(counts: Sequence[int], k: int) -> float:
    """Share (0..1) of the accepts taken by the k busiest workers.

    0.0 when nothing was accepted.  Raises ValueError unless 1 <= k <= n.
    """
    _check(counts)
    if not 1 <= k <= len(counts):
        raise ValueError(f"k must be 1..{len(counts)}, got {k}")
    total = sum(counts)
    if total == 0:
        return 0.0
    return sum(sorted(counts, reverse=True)[:k]) / total


def figures(counts: Sequence[int]) -> Dict[str, float]:
    """All of the above for one run: ``idle``, ``cv``, ``max_min``,
    ``k`` and ``top_k`` (share of the default_k busiest)."""
    k = default_k(len(counts))
    return {"idle": idle(counts), "cv": cv(counts),
            "max_min": max_min(counts), "k": k,
            "top_k": top_k_share(counts, k)}

