"""Gradient skipping's settings and where their defaults come from."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

from pydantic import Field

from accelsim.config.base import PositiveFloat, PositiveInt, Spec
from accelsim.report.training import Source
from accelsim.techniques.provenance import Origin

NAME = "gradient_skipping"
"""Gradient skipping's name in run files, and the owner of the ops it adds."""

Fraction = Annotated[float, Field(ge=0, le=1)]

OUR_MODEL = "our model: the paper's abstract gives no rule or number"
_CURVE = "our synthetic curve: floor + (1 - floor) exp(-epoch / (decay_epochs (0.5 + depth)))"
DEFAULTS: dict[str, Origin] = {
    "grouping": (
        Source.RECALLED,
        "groups of semantically related parameters [S]; filter groups, recalled",
    ),
    "skip_fraction": (Source.OURS, "none: the monitor decides, our model"),
    "update_trace": (Source.OURS, "none: the statistics setting decides"),
    "statistics": (
        Source.TRACE,
        "measured: the bundled digits traces (scripts/training_signals.py), mapped by"
        " layer kind and depth",
    ),
    "threshold": (Source.OURS, OUR_MODEL),
    "group_spread": (Source.OURS, OUR_MODEL + ": groups' averages log-normal around the layer's"),
    "recheck_iterations": (Source.OURS, OUR_MODEL + ": a skipped group's mean wait to re-check"),
    "floor": (Source.OURS, _CURVE),
    "decay_epochs": (Source.OURS, _CURVE + "; earlier layers converge first, recalled"),
    "levels": (Source.OURS, "our choice: skipped shares rounded to quarters"),
}
"""Where each setting's default comes from (``../shared/techniques.md`` section 5)."""


class Grouping(str, Enum):
    FILTER = "filter"
    ROW = "row"
    LAYER = "layer"


class Statistics(str, Enum):
    MEASURED = "measured"
    SYNTHETIC = "synthetic"


class GradientSkippingConfig(Spec):
    """``techniques.gradient_skipping`` in a run file."""

    grouping: Annotated[Grouping, Field(strict=False)] = Field(
        default=Grouping.FILTER,
        description="A group of related parameters: a filter (output channel), a row (input"
        " channel) or a whole layer.",
    )
    skip_fraction: Fraction | None = Field(
        default=None,
        description="A fixed share of every grouped weight's groups skipped in every step;"
        " unset: the monitor's decisions over training (threshold, statistics).",
    )
    update_trace: str | None = Field(
        default=None,
        description="CSV of layer,epoch,statistic (relative to the run file): each layer's"
        " mean monitored |dw| / |w| per epoch, in the units of threshold, measured in a"
        " real training run; unset: the statistics setting decides.",
    )
    statistics: Annotated[Statistics, Field(strict=False)] = Field(
        default=Statistics.MEASURED,
        description="Without update_trace: measured (the bundled per-group traces of small"
        " models trained on digits, mapped by layer kind and depth) or synthetic (our"
        " curve: floor, decay_epochs, group_spread).",
    )
    threshold: PositiveFloat = Field(
        default=0.5,
        description="A trained group stops computing its weight gradient while its |dw| /"
        " |w| is below this (in units of its layer's epoch-0 mean).",
    )
    group_spread: Annotated[float, Field(ge=0, le=10)] = Field(
        default=0.5,
        description="Log-normal spread of a group's average around its layer's (sigma of"
        " its logarithm); 0: every group of a layer alike.",
    )
    recheck_iterations: Annotated[int, Field(ge=1, le=10**6)] = Field(
        default=10,
        description="A skipped group is re-checked on each step with probability 1 / this"
        " (drawn per group with the run's seed; 1: every step, so nothing is skipped).",
    )
    floor: Fraction = Field(
        default=0.05,
        description="Synthetic curve: the statistic a layer settles to, in units of its"
        " epoch-0 value.",
    )
    decay_epochs: PositiveFloat = Field(
        default=8.0,
        description="Synthetic curve: the decay time, in epochs, of the layer half way"
        " down the network (earlier layers decay faster).",
    )
    levels: PositiveInt = Field(
        default=4,
        description="Each layer's skipped share is rounded to a multiple of 1 / levels,"
        " so that epochs share simulated step kinds.",
    )
