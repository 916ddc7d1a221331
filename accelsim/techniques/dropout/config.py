"""Approximate dropout's settings and where their defaults come from."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

from pydantic import Field

from accelsim.config.base import NonNegativeInt, PositiveInt, Spec
from accelsim.report.training import Source
from accelsim.techniques.provenance import Origin

NAME = "approximate_dropout"
"""Approximate dropout's name in run files, and the owner of the ops it adds."""

Rate = Annotated[float, Field(ge=0, lt=1)]
MAX_STEPS = 12_800
"""The most steps a run draws (``steps`` doubled until the kept shares are near)."""

_SEARCH = "our choice: the SGD search's settings"
DEFAULTS: dict[str, Origin] = {
    "rate": (Source.RUN, "none: each dropout layer's own rate, from the workload"),
    "pattern": (Source.RECALLED, "row and tile patterns of Song et al., recalled"),
    "tile.rows": (Source.OURS, "none: the main array's rows, so tiles align with folds"),
    "tile.cols": (Source.OURS, "none: the main array's columns, so tiles align with folds"),
    "steps": (Source.OURS, "our choice: the fewest steps drawn for the mean and spread"),
    "kept_tolerance": (
        Source.OURS,
        "our choice: the mean kept share within 0.5 % of its expectation",
    ),
    "max_period": (Source.OURS, "our choice: the pattern family's longest period"),
    "distribution": (Source.OURS, "none: the distribution our SGD search finds"),
    "skip_updates": (Source.OURS, "our choice: dropped rows are still updated"),
    "stochastic_depth": (
        Source.OURS,
        "our choice: row patterns drop whole samples of stochastic-depth branches",
    ),
    "search_iterations": (Source.OURS, _SEARCH),
    "feature_maps.rate": (Source.OURS, "our choice: off"),
    "feature_maps.scores": (Source.OURS, "none: log-normal sensitivity scores, our choice"),
    "search_seed": (Source.OURS, _SEARCH),
}
"""Where each setting's default comes from (``../shared/techniques.md`` section 4)."""


class Pattern(str, Enum):
    ELEMENT = "element"
    ROW = "row"
    TILE = "tile"


class TileSpec(Spec):
    """Tile of the weight matrix a tile pattern drops (rows along the weight's input
    dimension); unset: the main array's rows and columns, so tiles align with folds."""

    rows: PositiveInt | None = Field(
        default=None, description="Tile rows; null: the main array's rows."
    )
    cols: PositiveInt | None = Field(
        default=None, description="Tile columns; null: the main array's columns."
    )


class FeatureMapSpec(Spec):
    """Sensitivity-aware dropping of convolutions' input feature maps.

    ``rate``: the share of each eligible convolution's input maps dropped (0: off).
    ``scores``: CSV of ``layer,channel,score`` (relative to the run file); without
    it, scores are drawn from a log-normal with the run's seed [D].  The least
    sensitive maps are dropped.
    """

    rate: Rate = Field(
        default=0.0, description="Share of each eligible convolution's input maps dropped (0: off)."
    )
    scores: str | None = Field(
        default=None,
        description="CSV of layer,channel,score relative to the run file; null: log-normal"
        " scores drawn from the run's seed.",
    )


class ApproximateDropoutConfig(Spec):
    """``techniques.approximate_dropout`` in a run file."""

    rate: Rate | None = Field(
        default=None,
        description="Every dropout layer's rate; null: each layer's own rate from the workload.",
    )
    pattern: Annotated[Pattern, Field(strict=False)] = Field(
        default=Pattern.ROW,
        description="element (conventional dropout: the baseline step), row (drop whole"
        " neurons, shrinking the GEMMs) or tile (drop tiles of the readers' weights, masking"
        " folds).",
    )
    tile: TileSpec = Field(default_factory=TileSpec, description="The tile of tile patterns.")
    steps: PositiveInt = Field(
        default=100, description="The fewest steps drawn, each with its own patterns."
    )
    kept_tolerance: Annotated[float, Field(gt=0, le=1)] = Field(
        default=0.005,
        description="Draw steps (from steps, doubling, at most 12,800) until every site's"
        " mean kept share of its units (or tiles) is within this share of its expectation.",
    )
    max_period: Annotated[int, Field(ge=2, le=64)] = Field(
        default=16,
        description="Longest pattern period: rates 1/max_period to 1 - 1/max_period reachable.",
    )
    distribution: str | None = Field(
        default=None,
        description="A JSON file of pattern probabilities (scripts/dropout_search.py writes"
        " one), relative to the run file; null: the SGD search runs.",
    )
    skip_updates: bool = Field(
        default=False,
        description="Row patterns: also skip the optimizer update of dropped rows and columns.",
    )
    stochastic_depth: bool = Field(
        default=True,
        description="Row patterns: drop the samples of each stochastic-depth layer's"
        " residual branch by a regular pattern over the batch, so the branch runs for the"
        " kept samples alone (false: its conventional per-sample mask).",
    )
    search_iterations: PositiveInt = Field(
        default=1000, description="Iterations of the SGD search for the pattern distribution."
    )
    feature_maps: FeatureMapSpec = Field(
        default_factory=FeatureMapSpec,
        description="Sensitivity-aware dropping of convolutions' input feature maps.",
    )
    search_seed: NonNegativeInt = Field(default=0, description="Seed of the SGD search.")
