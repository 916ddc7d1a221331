"""One lowering rule per family of layer kinds, registered by kind (see :mod:`.base`)."""

from accelsim.lowering.rules import attention, conv, dense, recurrent, vector
from accelsim.lowering.rules.base import REGISTRY, LayerRule, register, rule_for

__all__ = [
    "REGISTRY",
    "LayerRule",
    "attention",
    "conv",
    "dense",
    "recurrent",
    "register",
    "rule_for",
    "vector",
]
