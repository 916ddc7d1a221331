"""The layer-rule contract and its registry.

A rule covers one family of layer kinds: its output shape, its parameters
(with their :class:`~accelsim.graph.ops.ParamKind`), its forward ops and its
backward ops.  A new layer kind is one spec class in
:mod:`accelsim.workload.model` and one rule registered here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from accelsim.graph.ops import Tensor
from accelsim.lowering.context import StepContext
from accelsim.lowering.shapes import LayerInfo, Shape
from accelsim.workload import model as wm


class LayerRule(ABC):
    """How one family of layers is shaped and lowered.

    Attributes:
        kinds: The ``kind`` values of the layers it handles.
        has_params: Whether its layers have trainable tensors.
        is_loss: Whether it starts the backward pass (its backward gets no
            output gradient).
    """

    kinds: ClassVar[tuple[str, ...]]
    has_params: ClassVar[bool] = False
    is_loss: ClassVar[bool] = False

    @abstractmethod
    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        """The output shape per sample; raises :class:`~accelsim.lowering.shapes.ShapeProblem`."""

    @abstractmethod
    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        """Emit the forward ops that compute ``y`` from ``xs`` (and create parameters)."""

    @abstractmethod
    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        """Emit the backward ops, given the output gradient ``g`` (None for a loss)."""

    def inference(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        """Emit the ops that compute ``y`` from ``xs`` in a forward pass alone
        (``run.mode: forward``, the model in evaluation mode): by default its training
        forward ops; a layer that only training runs (a loss) emits none, one that
        evaluation switches off (dropout) hands its input on."""
        self.forward(ctx, info, xs, y)

    def dw_columns_per_input(self, info: LayerInfo) -> int | None:
        """How many columns of the weight-gradient GEMM each input channel (or input
        feature) owns, so that its columns group by input; None when the weight's
        gradient does not group that way (recurrent, attention and embedding weights).

        Its rows are the output channels.  A technique that groups the weight by
        input reads the group count off the current GEMM: its columns over this.
        """
        return None


REGISTRY: dict[str, LayerRule] = {}


def register(rule: type[LayerRule]) -> type[LayerRule]:
    """Class decorator: register a rule for each of its ``kinds``."""
    for kind in rule.kinds:
        if kind in REGISTRY:
            raise ValueError(f"two rules for layer kind {kind!r}")
        REGISTRY[kind] = rule()
    return rule


def rule_for(layer: wm.Layer) -> LayerRule:
    """The rule of ``layer``'s kind."""
    return REGISTRY[layer.kind]
