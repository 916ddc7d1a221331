"""One lowering rule per family of layer kinds, registered by kind (see :mod:`.base`)."""

from accelsim.lowering.rules import (
    attention,
    bridge,
    conv,
    conv_transpose,
    dense,
    elementwise,
    learned,
    matmul,
    moe,
    norm,
    recurrent,
    resample,
    vector,
)
from accelsim.lowering.rules.base import REGISTRY, LayerRule, register, rule_for

__all__ = [
    "REGISTRY",
    "LayerRule",
    "attention",
    "bridge",
    "conv",
    "conv_transpose",
    "dense",
    "elementwise",
    "learned",
    "matmul",
    "moe",
    "norm",
    "recurrent",
    "register",
    "resample",
    "rule_for",
    "vector",
]
