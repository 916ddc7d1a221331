"""A workload's counts as ``accelsim models`` prints them (made by
:func:`accelsim.lowering.stats.model_stats`; this module imports nothing heavy, so the
counts cached for the bundled suite print without lowering a model)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelStats:
    """Counts for one sample (batch 1); ``training_macs`` is forward + dX + dW."""

    name: str
    input: str
    params: int
    forward_macs: int
    training_macs: int
    layers: int
