"""The input shapes an import is given: one model input's dimensions per sample, or a
sequence of them, one per input in the model's order."""

from __future__ import annotations

from collections.abc import Sequence

Dims = tuple[int, ...]
InputShapes = Dims | Sequence[Dims]
"""``(3, 224, 224)`` for a model of one input; ``[(16, 64), (32, 64)]`` for several."""


def several(shapes: InputShapes) -> tuple[Dims, ...]:
    """Every input's dimensions: ``(3, 224, 224)`` -> ``((3, 224, 224),)``; a sequence of
    shapes as it is."""
    ints = [d for d in shapes if isinstance(d, int)]
    if len(ints) == len(shapes):
        return (tuple(ints),)
    return tuple(tuple(d) for d in shapes if not isinstance(d, int))
