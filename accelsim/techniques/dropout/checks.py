"""Approximate dropout's load-time checks: each site's rate within reach of its patterns
(a dropout layer's over its neurons, a stochastic-depth layer's over the batch's
samples), and tile patterns beside a technique that packs their weights' gradients."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from accelsim.errors import Problem
from accelsim.techniques.base import GraphRewriter, LoadContext
from accelsim.techniques.dropout.config import ApproximateDropoutConfig, Pattern
from accelsim.techniques.dropout.samples import SampleSite
from accelsim.techniques.dropout.sites import Site


def rate_problems(
    cfg: ApproximateDropoutConfig, sites: Sequence[Site], source: str, where: Callable[[str], str]
) -> list[Problem]:
    """The first dropout site whose rate no pattern period up to ``max_period`` reaches."""
    if cfg.pattern is Pattern.ELEMENT:
        return []
    lo = 1 / cfg.max_period
    for site in sites:
        if site.rate and not lo <= site.rate <= 1 - lo:
            key = "rate" if cfg.rate is not None else "max_period"
            value: Any = cfg.rate if cfg.rate is not None else cfg.max_period
            return [
                Problem(
                    source,
                    where(key),
                    f"dropout rate {site.rate:g} of {site.dropout} is out of reach of"
                    f" patterns with periods up to {cfg.max_period}"
                    f" (rates {lo:g} to {1 - lo:g})",
                    value,
                )
            ]
    return []


def reach_problems(
    samples: Sequence[SampleSite], max_period: int, batch: int, source: str, where: str
) -> list[Problem]:
    """A sample site's rate must be reachable by patterns over the batch's samples, each
    keeping one sample at least (a batch of one has none that drops a sample)."""
    way_out = "; set stochastic_depth: false for its conventional per-sample mask"
    for site in samples:
        if batch < 2:
            why = (
                f"a batch of 1 sample leaves {site.layer} no pattern that keeps some samples"
                f" and drops others (its branch would run or vanish whole){way_out}"
            )
            return [Problem(source, where, why, True)]
        period = min(max_period, batch)
        if site.rate > 1 - 1 / period:
            why = (
                f"stochastic-depth rate {site.rate:g} of {site.layer} is out of reach of"
                f" sample patterns with periods up to {period} (max_period {max_period},"
                f" batch {batch}: rates up to {1 - 1 / period:g}){way_out}"
            )
            return [Problem(source, where, why, True)]
    return []


def grouped_tile_problems(
    load: LoadContext,
    sites: Sequence[Site],
    cfg: ApproximateDropoutConfig,
    source: str,
    where: Callable[[str], str],
) -> list[Problem]:
    """Tile patterns cannot compose with a technique that packs the weight gradients of
    their consumers (:meth:`GraphRewriter.packed_weight_gradients`): a tile pattern skips
    the folds of a weight's tiles in the weight's own index space, and packing moves the
    kept rows or columns of its gradient GEMM together, so that GEMM's folds no longer
    line up with tiles."""
    if cfg.pattern is not Pattern.TILE:
        return []
    consumers = [c for site in sites for c in site.consumers]
    for other in load.techniques:
        if not isinstance(other, GraphRewriter):
            continue
        packed = other.packed_weight_gradients(load)
        clash = [c for c in consumers if c in packed]
        if clash:
            return [
                Problem(
                    source,
                    where("pattern"),
                    f"tile patterns skip folds of {clash[0]}'s weight by its tiles, and"
                    f" {other.name} packs the rows or columns of that weight's gradient,"
                    " so its folds no longer line up with tiles; use pattern: row"
                    f" (or leave {clash[0]} to {other.name})",
                    cfg.pattern.value,
                )
            ]
    return []
