"""The loss check's settings and where their defaults come from."""

from __future__ import annotations

from pydantic import Field

from accelsim.config.base import PositiveInt, Spec
from accelsim.report.training import Source
from accelsim.techniques.provenance import Origin

NAME = "loss_check"
"""Its name in run files, and the owner of the op it adds."""

DEFAULTS: dict[str, Origin] = {
    "ops_per_element": (Source.OURS, "our choice: a test for infinity or NaN and a flag"),
}
"""Where each setting's default comes from."""


class LossCheckConfig(Spec):
    """``techniques.loss_check`` in a run file."""

    ops_per_element: PositiveInt = Field(
        default=2, description="Vector ops per element of the loss gradient it checks."
    )
