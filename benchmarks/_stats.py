"""Order statistics of timing samples."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["median", "percentile"]


def percentile(samples: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (``0 < q <= 100``); NaN without samples."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def median(samples: Sequence[float]) -> float:
    """The median (mean of the middle two for an even count); NaN without samples."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2
