"""Percentiles, one definition for every report (`kb eval`, eval/bench*.py): nearest rank,
the smallest value with at least q of the values at or below it."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0 < q <= 1) by nearest rank; NaN for no values."""
    s = sorted(values)
    if not s:
        return float("nan")
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]
