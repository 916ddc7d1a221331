"""What self-attention and cross-attention share: an attention layer's sizes and the
backward ops of ``AV`` and the softmax."""

from __future__ import annotations

from dataclasses import dataclass

from accelsim.config.enums import VectorClass
from accelsim.graph.ops import Epilogue, Phase, Tensor, TensorKind
from accelsim.lowering.context import StepContext
from accelsim.lowering.rules.vector import DROPOUT_FWD_OPS, SOFTMAX_BWD_OPS
from accelsim.lowering.shapes import LayerInfo
from accelsim.workload import model as wm


@dataclass(frozen=True)
class AttentionDims:
    """An attention layer's sizes for ``n`` samples: ``steps`` queries of width ``d``
    (its first input), ``keys`` keys from an input of width ``features`` (its second
    input under cross-attention; else the first: ``keys`` is ``steps``) and as many
    values from one of width ``value_features`` (its third input when it has one, else
    the keys').  Split over ``shards`` ranks of a tensor-parallel group, it has
    ``heads`` of the layer's query heads and ``kv`` of its key/value heads, and
    ``inner`` (their width) of the model width ``d``."""

    steps: int
    d: int
    dh: int
    kv: int
    group: int
    n: int
    keys: int
    features: int
    value_features: int
    heads: int

    @classmethod
    def of(cls, layer: wm.Attention, info: LayerInfo, n: int, shards: int = 1) -> AttentionDims:
        shapes = info.in_shapes
        steps, d = shapes[0].dims
        keys, features = shapes[min(1, len(shapes) - 1)].dims
        values = shapes[-1].dims[1]
        kv, heads = layer.key_value_heads // shards, layer.heads // shards
        dh = d // layer.heads
        return cls(steps, d, dh, kv, heads // kv, n, keys, features, values, heads)

    @property
    def inner(self) -> int:
        """Width of the queries (and of the context the output projection reads)."""
        return self.heads * self.dh

    @property
    def kv_width(self) -> int:
        """Width of the K (or V) projection: the key/value heads' sizes."""
        return self.kv * self.dh

    @property
    def qkv_width(self) -> int:
        return self.inner + 2 * self.kv_width

    @property
    def rows(self) -> int:
        """Rows of the query projection: every query position of every sample."""
        return self.n * self.steps

    @property
    def key_rows(self) -> int:
        """Rows of the key and value projection: every key position of every sample."""
        return self.n * self.keys

    @property
    def queries(self) -> int:
        """Rows of a per-head GEMM: the group's queries stacked."""
        return self.group * self.steps

    @property
    def per_head(self) -> int:
        """Per-head GEMMs: one per sample and key/value head."""
        return self.n * self.kv


def drop_scores(ctx: StepContext, name: str, probs: Tensor) -> tuple[Tensor, Tensor]:
    """Attention dropout on ``probs``: the dropped probabilities (what ``AV`` reads) and
    the mask, one byte per score (a boolean tensor, as Megatron-LM keeps it)."""
    dropped = ctx.t(f"{name}.dropped", TensorKind.ACTIVATION, probs.elements)
    mask = Tensor(f"{name}.dropout_mask", TensorKind.ACTIVATION, probs.elements, 1)
    ctx.b.vector(
        f"{name}.dropout.fwd",
        name,
        Phase.FWD,
        probs.elements,
        DROPOUT_FWD_OPS,
        [probs],
        [dropped, mask],
        epilogue=Epilogue.ELEMENTWISE,
        op_class=VectorClass.ELEMENTWISE,
    )
    ctx.saved[f"{name}.dropout"] = (dropped, mask)
    return dropped, mask


def probs_backward(
    ctx: StepContext,
    name: str,
    s: AttentionDims,
    datt: Tensor,
    probs: Tensor,
    values: Tensor,
    dvalues: Tensor,
) -> Tensor:
    """From the gradient ``datt`` of ``AV``'s output: ``dP`` (``AV`` read V from
    ``values``), ``dV`` written into its part of ``dvalues`` (a partial write), the
    attention dropout's gradient when the layer drops scores (:func:`drop_scores`) and
    the softmax's gradient, the scores' gradient returned."""
    b, bi = ctx.b, Phase.BWD_INPUT
    queries, keys, dh, count = s.queries, s.keys, s.dh, s.per_head
    dropout = ctx.saved.get(f"{name}.dropout")
    read = probs if dropout is None else dropout[0]
    dprobs = ctx.t(f"{name}.dprobs", TensorKind.GRADIENT, probs.elements)
    dscores = ctx.t(f"{name}.dscores", TensorKind.GRADIENT, probs.elements)
    ddropped = (
        dprobs
        if dropout is None
        else ctx.t(f"{name}.ddropped", TensorKind.GRADIENT, probs.elements)
    )
    b.gemm(f"{name}.av.dprobs", name, bi, queries, keys, dh, count, datt, values, ddropped)
    # dV of a key/value head sums over its group's queries: K = group x Lq.
    b.gemm(f"{name}.av.dv", name, bi, keys, dh, queries, count, read, datt, dvalues, partial=True)
    if dropout is not None:
        b.vector(
            f"{name}.dropout.bwd", name, bi, probs.elements, 1, [ddropped, dropout[1]], [dprobs],
            epilogue=Epilogue.ELEMENTWISE, op_class=VectorClass.ELEMENTWISE,
        )  # fmt: skip
    b.vector(
        f"{name}.softmax.bwd",
        name,
        bi,
        probs.elements,
        SOFTMAX_BWD_OPS,
        [dprobs, probs],
        [dscores],
        op_class=VectorClass.NORM,
    )
    return dscores
