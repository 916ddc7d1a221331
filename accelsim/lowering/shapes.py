"""Per-sample tensor shapes and the helpers layer rules infer them with.

Shapes are per sample (the batch is a run setting).  Each tensor has a
layout: ``CHW`` feature maps, flat ``FEATURES``, ``SEQUENCE`` (tokens x
features) or integer ``TOKENS``.  A rule reports an inconsistency by raising
:class:`ShapeProblem`, which :mod:`accelsim.lowering.infer` turns into a
:class:`~accelsim.errors.WorkloadError` at the layer's key path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from accelsim.workload import inputs as wi
from accelsim.workload import model as wm
from accelsim.workload.inputs import INPUT_NAME as INPUT_NAME


class Layout(str, Enum):
    CHW = "chw"
    FEATURES = "features"
    SEQUENCE = "sequence"
    TOKENS = "tokens"


@dataclass(frozen=True)
class Shape:
    """A per-sample tensor shape with its layout."""

    layout: Layout
    dims: tuple[int, ...]

    @property
    def numel(self) -> int:
        return math.prod(self.dims)

    @property
    def channels(self) -> int:
        """Channels of a feature map, or the feature (last) dimension otherwise."""
        return self.dims[0] if self.layout is Layout.CHW else self.dims[-1]

    def __str__(self) -> str:
        return f"{self.layout.value} {'x'.join(map(str, self.dims))}"


@dataclass(frozen=True)
class LayerInfo:
    """A layer with its resolved inputs and inferred shapes."""

    index: int
    layer: wm.Layer
    inputs: tuple[str, ...]
    in_shapes: tuple[Shape, ...]
    out_shape: Shape


def input_shape(
    spec: wi.ImageInput | wi.VectorInput | wi.TokenInput | wi.SequenceInput,
) -> Shape:
    """Shape of the workload's input tensor."""
    if isinstance(spec, wi.ImageInput):
        return Shape(Layout.CHW, (spec.channels, spec.height, spec.width))
    if isinstance(spec, wi.VectorInput):
        return Shape(Layout.FEATURES, (spec.features,))
    if isinstance(spec, wi.SequenceInput):
        return Shape(Layout.SEQUENCE, (spec.length, spec.features))
    return Shape(Layout.TOKENS, (spec.length,))


def model_inputs(workload: wm.Workload) -> dict[str, Shape]:
    """The shape of every input of ``workload`` by the name layers read it by:
    :data:`INPUT_NAME` first, then its ``extra_inputs`` in order."""
    extra = {name: input_shape(spec) for name, spec in workload.extra_inputs.items()}
    return {INPUT_NAME: input_shape(workload.input), **extra}


def inputs_text(workload: wm.Workload) -> str:
    """The inputs of ``workload`` in words: ``chw 3x32x32``, or ``sequence 16x64 +
    memory sequence 32x64`` with extra inputs."""
    shapes = model_inputs(workload)
    extra = [f"{name} {shape}" for name, shape in shapes.items() if name != INPUT_NAME]
    return " + ".join([str(shapes[INPUT_NAME]), *extra])


def conv_output_hw(
    h: int,
    w: int,
    kernel: tuple[int, int],
    stride: tuple[int, int],
    padding: tuple[int, int],
    dilation: tuple[int, int] = (1, 1),
) -> tuple[int, int]:
    """Output height and width of a conv or pooling window (floor mode)."""
    p = (h + 2 * padding[0] - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    q = (w + 2 * padding[1] - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    return p, q


class ShapeProblem(Exception):
    """A layer's shape inconsistency at ``key`` (relative to the layer), raised by a rule."""

    def __init__(self, key: str, message: str, value: object) -> None:
        super().__init__(message)
        self.key, self.message, self.value = key, message, value


def one_input(layer: wm.Layer, in_shapes: tuple[Shape, ...], *layouts: Layout) -> Shape:
    """The single input shape of ``layer``, which must have one of ``layouts`` (if given)."""
    if len(in_shapes) != 1:
        raise ShapeProblem("inputs", f"{layer.kind} takes exactly one input", len(in_shapes))
    shape = in_shapes[0]
    if layouts and shape.layout not in layouts:
        wanted = " or ".join(x.value for x in layouts)
        raise ShapeProblem("", f"{layer.kind} needs a {wanted} input", str(shape))
    return shape


def merge(layer: wm.Layer, in_shapes: tuple[Shape, ...], concat: bool) -> Shape:
    if len(in_shapes) < 2:
        raise ShapeProblem("inputs", f"{layer.kind} needs at least two inputs", len(in_shapes))
    first = in_shapes[0]
    for shape in in_shapes[1:]:
        same = (
            shape.layout is first.layout
            and (
                (shape.dims[1:] == first.dims[1:])
                if first.layout is Layout.CHW
                else (shape.dims[:-1] == first.dims[:-1])
            )
            if concat
            else shape == first
        )
        if not same:
            raise ShapeProblem(
                "inputs",
                f"{layer.kind} inputs have incompatible shapes {first} and {shape}",
                [str(s) for s in in_shapes],
            )
    if not concat:
        return first
    total = sum(s.channels for s in in_shapes)
    if first.layout is Layout.CHW:
        return Shape(Layout.CHW, (total, *first.dims[1:]))
    return Shape(first.layout, (*first.dims[:-1], total))
