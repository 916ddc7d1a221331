"""The element-wise non-linearities an ``activation`` layer applies, with their
vector-op cost per element."""

from __future__ import annotations

from enum import Enum


class ActivationFunction(str, Enum):
    """Element-wise non-linearities, with their vector-op cost per element."""

    RELU = "relu"
    RELU6 = "relu6"
    GELU = "gelu"
    SIGMOID = "sigmoid"
    TANH = "tanh"
    SILU = "silu"
    HARDSWISH = "hardswish"
    HARDSIGMOID = "hardsigmoid"

    @property
    def forward_ops(self) -> int:
        # Compare/select ops; transcendental functions counted as a few ops each
        # (exp ~ 3, tanh ~ 4), a common vector-unit costing assumption.
        return {
            "relu": 1,
            "relu6": 2,
            "gelu": 8,
            "sigmoid": 4,
            "tanh": 4,
            "silu": 5,
            "hardswish": 4,
            "hardsigmoid": 3,
        }[self.value]

    @property
    def backward_ops(self) -> int:
        return {
            "relu": 1,
            "relu6": 2,
            "gelu": 10,
            "sigmoid": 3,
            "tanh": 3,
            "silu": 6,
            "hardswish": 3,
            "hardsigmoid": 2,
        }[self.value]
