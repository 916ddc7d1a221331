"""Activation recomputation's settings and where their defaults come from."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

from pydantic import Field

from accelsim.config.base import PositiveInt, Spec
from accelsim.report.training import Source
from accelsim.techniques.provenance import Origin

NAME = "recomputation"
"""Recomputation's name in run files, and the owner of the ops it adds."""


class Policy(str, Enum):
    FULL = "full"
    SELECTIVE = "selective"
    EVERY = "every"


DEFAULTS: dict[str, Origin] = {
    "policy": (
        Source.OURS,
        "our choice: full applies to every workload; selective, Korthikanti et al.'s"
        " policy for transformers, needs attention layers",
    ),
    "keep_every": (
        Source.OURS,
        "our choice: every second block (a transformer layer's two sub-layers);"
        " read by policy every only",
    ),
}
"""Where each setting's default comes from."""


class RecomputationConfig(Spec):
    """``techniques.recomputation`` in a run file."""

    policy: Annotated[Policy, Field(strict=False)] = Field(
        default=Policy.FULL,
        description="full (keep each block's input, recompute the rest of the block),"
        " selective (recompute attention's scores and softmax only) or every (keep every"
        " keep_every-th block's output); a block ends at a layer every later path passes"
        " through.",
    )
    keep_every: PositiveInt = Field(
        default=2,
        description="policy every: the blocks recomputed from one kept input (1 is full).",
    )
