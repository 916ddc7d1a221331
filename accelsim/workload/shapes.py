"""Shape inference and consistency checks for a workload's layer table.

Shapes are per sample (the batch is a run setting).  Each tensor has a
layout: ``CHW`` feature maps, flat ``FEATURES``, ``SEQUENCE`` (tokens x
features) or integer ``TOKENS``.  Every inconsistency is reported as a
:class:`~accelsim.errors.WorkloadError` at the layer's key path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from accelsim.config.validate import suggest
from accelsim.errors import Problem, WorkloadError
from accelsim.workload import model as wm
from accelsim.workload.model import pair

INPUT_NAME = "input"


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


def input_shape(spec: wm.ImageInput | wm.VectorInput | wm.TokenInput) -> Shape:
    """Shape of the workload's input tensor."""
    if isinstance(spec, wm.ImageInput):
        return Shape(Layout.CHW, (spec.channels, spec.height, spec.width))
    if isinstance(spec, wm.VectorInput):
        return Shape(Layout.FEATURES, (spec.features,))
    return Shape(Layout.TOKENS, (spec.length,))


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


class _ShapeProblem(Exception):
    def __init__(self, key: str, message: str, value: object) -> None:
        super().__init__(message)
        self.key, self.message, self.value = key, message, value


def infer_shapes(workload: wm.Workload, file: str) -> list[LayerInfo]:
    """Resolve every layer's inputs and infer its output shape.

    Args:
        workload: The validated layer table.
        file: Source name for error messages.

    Returns:
        One :class:`LayerInfo` per layer, in order.

    Raises:
        WorkloadError: listing every inconsistent layer.
    """
    shapes: dict[str, Shape] = {INPUT_NAME: input_shape(workload.input)}
    infos: list[LayerInfo] = []
    problems: list[Problem] = []
    consumers: dict[str, int] = {}
    failed: set[str] = set()
    losses = []
    for index, layer in enumerate(workload.layers):
        where = f"layers[{index}]"
        if layer.name in shapes:
            problems.append(Problem(file, f"{where}.name", "duplicate layer name", layer.name))
            continue
        names = (
            tuple(layer.inputs)
            if layer.inputs is not None
            else ((workload.layers[index - 1].name if index else INPUT_NAME),)
        )
        if any(n in failed for n in names):
            failed.add(layer.name)  # already reported where it first went wrong
            continue
        unknown = [n for n in names if n not in shapes]
        if unknown:
            problems.append(
                Problem(
                    file,
                    f"{where}.inputs",
                    "unknown input (inputs must be defined earlier); "
                    + suggest(unknown[0], list(shapes)),
                    unknown[0],
                )
            )
            continue
        in_shapes = tuple(shapes[n] for n in names)
        try:
            out = _infer(layer, in_shapes)
        except _ShapeProblem as exc:
            path = f"{where}.{exc.key}" if exc.key else where
            problems.append(Problem(file, path, exc.message, exc.value))
            failed.add(layer.name)
            continue
        for n in names:
            consumers[n] = consumers.get(n, 0) + 1
        if isinstance(layer, wm.CrossEntropy):
            losses.append(index)
        shapes[layer.name] = out
        infos.append(LayerInfo(index, layer, names, in_shapes, out))
    if not problems:
        problems.extend(_check_losses(workload, losses, consumers, file))
    if problems:
        raise WorkloadError(problems)
    return infos


def _check_losses(
    workload: wm.Workload, losses: list[int], consumers: dict[str, int], file: str
) -> list[Problem]:
    if len(losses) != 1:
        return [
            Problem(
                file,
                "layers",
                "a training workload needs exactly one cross_entropy loss layer",
                len(losses),
            )
        ]
    loss = workload.layers[losses[0]]
    if consumers.get(loss.name):
        return [
            Problem(
                file,
                f"layers[{losses[0]}].name",
                "the loss output cannot feed another layer",
                loss.name,
            )
        ]
    # Every other output must reach the loss, or its layer would get no gradient.
    return [
        Problem(
            file,
            f"layers[{i}].name",
            "output is never used: no later layer reads it and it is not the loss",
            layer.name,
        )
        for i, layer in enumerate(workload.layers)
        if i != losses[0] and not consumers.get(layer.name)
    ]


def _one(layer: wm.Layer, in_shapes: tuple[Shape, ...], *layouts: Layout) -> Shape:
    if len(in_shapes) != 1:
        raise _ShapeProblem("inputs", f"{layer.kind} takes exactly one input", len(in_shapes))
    shape = in_shapes[0]
    if layouts and shape.layout not in layouts:
        wanted = " or ".join(x.value for x in layouts)
        raise _ShapeProblem("", f"{layer.kind} needs a {wanted} input", str(shape))
    return shape


def _infer(layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
    if isinstance(layer, wm.Conv2d):
        x = _one(layer, in_shapes, Layout.CHW)
        c, h, w = x.dims
        if c % layer.groups:
            raise _ShapeProblem("groups", f"must divide the {c} input channels", layer.groups)
        if layer.out_channels % layer.groups:
            raise _ShapeProblem(
                "groups", f"must divide out_channels {layer.out_channels}", layer.groups
            )
        p, q = conv_output_hw(
            h, w, pair(layer.kernel), pair(layer.stride), pair(layer.padding), pair(layer.dilation)
        )
        if p < 1 or q < 1:
            raise _ShapeProblem("kernel", f"larger than the padded {h}x{w} input", layer.kernel)
        return Shape(Layout.CHW, (layer.out_channels, p, q))
    if isinstance(layer, wm.Linear):
        x = _one(layer, in_shapes, Layout.FEATURES, Layout.SEQUENCE)
        return Shape(x.layout, (*x.dims[:-1], layer.out_features))
    if isinstance(layer, (wm.MaxPool, wm.AvgPool)):
        x = _one(layer, in_shapes, Layout.CHW)
        c, h, w = x.dims
        stride = pair(layer.stride if layer.stride is not None else layer.kernel)
        p, q = conv_output_hw(h, w, pair(layer.kernel), stride, pair(layer.padding))
        if p < 1 or q < 1:
            raise _ShapeProblem("kernel", f"larger than the padded {h}x{w} input", layer.kernel)
        return Shape(Layout.CHW, (c, p, q))
    if isinstance(layer, wm.GlobalAvgPool):
        x = _one(layer, in_shapes, Layout.CHW)
        return Shape(Layout.FEATURES, (x.dims[0],))
    if isinstance(layer, wm.BatchNorm):
        return _one(layer, in_shapes, Layout.CHW, Layout.FEATURES)
    if isinstance(layer, wm.LayerNorm):
        return _one(layer, in_shapes, Layout.FEATURES, Layout.SEQUENCE)
    if isinstance(layer, wm.TokenSelect):
        x = _one(layer, in_shapes, Layout.SEQUENCE)
        if layer.index >= x.dims[0]:
            raise _ShapeProblem("index", f"beyond the {x.dims[0]} tokens", layer.index)
        return Shape(Layout.FEATURES, (x.dims[1],))
    if isinstance(layer, (wm.Activation, wm.Softmax, wm.Dropout)):
        return _one(layer, in_shapes, Layout.CHW, Layout.FEATURES, Layout.SEQUENCE)
    if isinstance(layer, wm.Flatten):
        x = _one(layer, in_shapes, Layout.CHW, Layout.FEATURES)
        return Shape(Layout.FEATURES, (x.numel,))
    if isinstance(layer, wm.CrossEntropy):
        _one(layer, in_shapes, Layout.FEATURES, Layout.SEQUENCE)
        return Shape(Layout.FEATURES, (1,))
    if isinstance(layer, wm.Embedding):
        x = _one(layer, in_shapes, Layout.TOKENS)
        return Shape(Layout.SEQUENCE, (x.dims[0], layer.embedding_dim))
    if isinstance(layer, wm.Lstm):
        x = _one(layer, in_shapes, Layout.SEQUENCE)
        return Shape(Layout.SEQUENCE, (x.dims[0], layer.hidden_size))
    if isinstance(layer, wm.Attention):
        x = _one(layer, in_shapes, Layout.SEQUENCE)
        if x.dims[1] % layer.heads:
            raise _ShapeProblem("heads", f"must divide the model width {x.dims[1]}", layer.heads)
        return x
    if isinstance(layer, wm.Add):
        return _merge(layer, in_shapes, concat=False)
    if isinstance(layer, wm.Concat):
        return _merge(layer, in_shapes, concat=True)
    raise AssertionError(f"unhandled layer kind {layer.kind}")


def _merge(layer: wm.Layer, in_shapes: tuple[Shape, ...], concat: bool) -> Shape:
    if len(in_shapes) < 2:
        raise _ShapeProblem("inputs", f"{layer.kind} needs at least two inputs", len(in_shapes))
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
            raise _ShapeProblem(
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
