"""The input shapes an import is given: one model input's dimensions per sample, or a
sequence of them, one per input in the model's order; and each input's element type
when a module is exported."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from accelsim.errors import WorkloadError

Dims = tuple[int, ...]
InputShapes = Dims | Sequence[Dims]
"""``(3, 224, 224)`` for a model of one input; ``[(16, 64), (32, 64)]`` for several."""
InputType = Literal["float", "int", "bool"]
"""An exported input's elements: floats (random), integers (zeros: token ids, or a mask
of ones and zeros such as Hugging Face's ``attention_mask``) or booleans (false: a
padding mask such as ``src_key_padding_mask``). Only the graph's shapes are read, so the
values do not matter."""
INPUT_TYPES: tuple[InputType, ...] = ("float", "int", "bool")


def several(shapes: InputShapes) -> tuple[Dims, ...]:
    """Every input's dimensions: ``(3, 224, 224)`` -> ``((3, 224, 224),)``; a sequence of
    shapes as it is."""
    ints = [d for d in shapes if isinstance(d, int)]
    if len(ints) == len(shapes):
        return (tuple(ints),)
    return tuple(tuple(d) for d in shapes if not isinstance(d, int))


def element_types(count: int, tokens: bool, types: Sequence[str] | None) -> tuple[InputType, ...]:
    """The element type of each of ``count`` inputs: ``types`` (one per input), floats by
    default; ``tokens`` makes the first ``int``.

    Raises:
        WorkloadError: for ``types`` not one per input, or a type not of
            :data:`INPUT_TYPES`.
    """
    if types is None:
        given: list[InputType] = ["float"] * count
    elif len(types) != count:
        message = f"give one per input ({count})"
        raise WorkloadError.single("module", "input_types", message, list(types))
    else:
        given = []
        for index, kind in enumerate(types):
            if kind not in INPUT_TYPES:
                message = "expected " + ", ".join(INPUT_TYPES)
                raise WorkloadError.single("module", f"input_types[{index}]", message, kind)
            given.append(INPUT_TYPES[INPUT_TYPES.index(kind)])
    return ("int", *given[1:]) if tokens and given else tuple(given)
