"""What layer rules lower into: one replica's tensors, parameters and gradients in flight."""

from __future__ import annotations

import dataclasses
from typing import Any

from accelsim.config.enums import VectorClass
from accelsim.config.run import StridedDx
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import (
    NO_EXPERT,
    Epilogue,
    Parameter,
    ParamKind,
    Phase,
    Tensor,
    TensorKind,
)
from accelsim.lowering.flash_attention import AttentionBudget
from accelsim.lowering.shapes import LayerInfo


class StepContext:
    """State of lowering one replica's step, shared by every layer rule.

    Attributes:
        b: The graph builder.
        n: Samples in this replica's batch.
        strided_dx: How strided convolutions compute ``dX``.
        acts: Activation tensor of every layer output (and of the input).
        requires_grad: Layers whose output needs a gradient.
        params: Trainable tensors, in creation order.
        param_index: Position in ``params`` of each trainable tensor, by weight name.
        saved: What a layer's forward pass left for its backward pass, by layer.
        slices: Gradients of parts of a layer's output (``split`` layers), by layer.
        attention: The buffers a fused attention kernel's blocks fit in, or None for
            attention as separate ops (``lowering.compile``).
        head_shards: Per attention layer a tensor-parallel group splits, the ranks its
            heads are split over (:mod:`accelsim.lowering.tensor_parallel`).
        expert_ranks: The ranks of an expert-parallel group each ``moe`` layer's experts
            are spread over (1: every expert on this processor).
        expert_shards: The tensor-parallel ranks each expert's inner width is split
            over (1: each expert whole on its rank).
        expert_gathered: Whether each tensor rank routes its share of the sequence and
            its experts' tokens are all-gathered over the tensor group after the
            all-to-all (sequence parallelism with expert parallelism).
    """

    def __init__(
        self,
        builder: GraphBuilder,
        batch: int,
        strided_dx: StridedDx,
        attention: AttentionBudget | None = None,
    ) -> None:
        self.b = builder
        self.n = batch
        self.strided_dx = strided_dx
        self.attention = attention
        self.acts: dict[str, Tensor] = {}
        self.requires_grad: set[str] = set()
        self.partials: dict[str, list[Tensor]] = {}
        self.params: list[Parameter] = []
        self.param_index: dict[str, int] = {}
        self.saved: dict[str, Any] = {}
        self.slices: dict[str, list[Tensor]] = {}
        self.head_shards: dict[str, int] = {}
        self.expert_ranks = 1
        self.expert_shards = 1
        self.expert_gathered = False

    def t(self, name: str, kind: TensorKind, elements: int) -> Tensor:
        return self.b.tensor(name, kind, elements)

    # -- parameters ----------------------------------------------------------------------
    def param(
        self,
        layer: str,
        suffix: str,
        elements: int,
        kind: ParamKind,
        rows: int,
        expert: int = NO_EXPERT,
    ) -> Tensor:
        """Create a trainable tensor ``layer.suffix`` and its gradient ``layer.dsuffix``
        (of ``expert`` of a ``moe`` layer, or of none)."""
        name = f"{layer}.{suffix}"
        weight = self.b.tensor(name, TensorKind.WEIGHT, elements, parameter=name)
        grad = self.b.tensor(f"{layer}.d{suffix}", TensorKind.GRADIENT, elements, parameter=name)
        self.param_index[weight.name] = len(self.params)
        self.params.append(Parameter(layer, weight, grad, -1, kind, rows, expert=expert))
        return weight

    def parameter(self, layer: str, suffix: str) -> Parameter:
        return self.params[self.param_index[f"{layer}.{suffix}"]]

    def grad_done(self, layer: str, suffix: str, op_id: int) -> None:
        """Record that op ``op_id`` finishes the gradient of ``layer.suffix``."""
        at = self.param_index[f"{layer}.{suffix}"]
        self.params[at] = dataclasses.replace(self.params[at], grad_op=op_id)

    def bias_grad(self, layer: str, suffix: str, g: Tensor) -> None:
        """The gradient of a bias: the sum of the output gradient ``g`` over positions."""
        p = self.parameter(layer, suffix)
        op = self.b.vector(
            f"{layer}.d{suffix}",
            layer,
            Phase.BWD_WEIGHT,
            g.elements,
            1,
            [g],
            [p.gradient],
            epilogue=Epilogue.ELEMENTWISE,  # a sum per channel: any tile order will do
            op_class=VectorClass.REDUCE,
        )
        self.grad_done(layer, suffix, op)

    # -- gradients -----------------------------------------------------------------------
    def out_grad(self, info: LayerInfo) -> Tensor | None:
        """The gradient of a layer's output, summing the partial ones its readers gave."""
        name = info.layer.name
        parts = self.partials.get(name, [])
        if name in self.slices:
            # The gradients of a split's parts make up one gradient of the whole
            # output, a view of them (a part nobody reads has a zero gradient).
            whole_grad = self.t(f"{name}.grad_parts", TensorKind.GRADIENT, self.acts[name].elements)
            parts = [*parts, self.b.alias(whole_grad, self.slices[name])]
        if not parts:
            return None
        if len(parts) == 1:
            return parts[0]
        grad = self.t(f"{name}.grad", TensorKind.GRADIENT, parts[0].elements)
        self.b.vector(
            f"{name}.grad_accum",
            name,
            Phase.BWD_INPUT,
            grad.elements,
            len(parts) - 1,
            parts,
            [grad],
            epilogue=Epilogue.ELEMENTWISE,
            op_class=VectorClass.ELEMENTWISE,
        )
        return grad

    def give(self, info: LayerInfo, index: int, grad: Tensor) -> None:
        """Hand a partial gradient to the layer's ``index``-th input."""
        self.partials.setdefault(info.inputs[index], []).append(grad)

    def give_slice(self, info: LayerInfo, grad: Tensor) -> None:
        """Hand the gradient of a part of the layer's only input (a ``split``)."""
        self.slices.setdefault(info.inputs[0], []).append(grad)

    def wants(self, info: LayerInfo, index: int = 0) -> bool:
        """Whether the layer's ``index``-th input needs a gradient."""
        return info.inputs[index] in self.requires_grad

    def dx(self, info: LayerInfo, index: int = 0) -> Tensor:
        """A new gradient tensor for the layer's ``index``-th input."""
        source = self.acts[info.inputs[index]]
        name = f"{info.inputs[index]}.grad<-{info.layer.name}"
        if info.inputs.count(info.inputs[index]) > 1:
            name += f"#{index}"  # a layer reading one tensor twice (x . x^T) gives two
        return self.t(name, TensorKind.GRADIENT, source.elements)
