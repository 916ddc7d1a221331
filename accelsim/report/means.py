"""Means of ratios, as every table and figure reports them: geometric.

A speedup or a cost ratio averages geometrically (the mean of 2x and 0.5x is
1x); a saving ``s`` is a cost ratio ``1 - s``, so the mean saving is that of the
geometric mean of the ratios.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def geometric_mean(values: Sequence[float]) -> float:
    """The geometric mean of the positive finite ``values`` (NaN when there are none)."""
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    if not positive:
        return math.nan
    return math.exp(sum(math.log(v) for v in positive) / len(positive))


def saving_mean(fractions: Sequence[float]) -> float:
    """The saving of the geometric mean of the cost ratios ``1 - fraction``."""
    return 1.0 - geometric_mean([1.0 - f for f in fractions])
