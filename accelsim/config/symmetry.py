"""Whether a data-parallel step's symmetric replicas are simulated once."""

from __future__ import annotations

from enum import Enum


class Symmetry(str, Enum):
    """``auto``: where the replicas are symmetric (:mod:`accelsim.timing.symmetry`),
    simulate one of each role and infer the others; ``full``: simulate every one
    (not ``off``, which YAML reads as false)."""

    AUTO = "auto"
    FULL = "full"
