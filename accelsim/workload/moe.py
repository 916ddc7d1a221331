"""The ``moe`` layer kind's spec: a mixture-of-experts MLP (its lowering:
:mod:`accelsim.lowering.rules.moe`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from accelsim.config.base import PositiveInt
from accelsim.workload.inputs import KIND
from accelsim.workload.layer_base import LayerBase


class Moe(LayerBase):
    """A mixture-of-experts MLP (Mixtral's sparse MoE block, Jiang et al. 2024): a router
    (a linear layer to ``experts`` logits, a softmax, the ``top_k`` largest kept and
    renormalised), each expert a SwiGLU MLP (``w1`` and ``w3`` to ``intermediate``,
    SiLU of ``w1``'s output times ``w3``'s, ``w2`` back to the width; no biases), and
    the combine: each token's ``top_k`` expert outputs weighted by its gates and summed.
    Each expert computes ``ceil(capacity_factor x tokens x top_k / experts)`` tokens
    unless ``overflow`` says otherwise; ``hot_load`` skews the router's split
    (:mod:`accelsim.lowering.expert_load`)."""

    kind: Literal["moe"] = Field(description=KIND)
    experts: PositiveInt = Field(description="Experts (each a SwiGLU MLP of its own).")
    top_k: PositiveInt = Field(description="Experts each token is sent to; at most experts.")
    intermediate: PositiveInt = Field(description="Inner width of each expert's MLP.")
    capacity_factor: Annotated[float, Field(gt=0, le=1000, allow_inf_nan=False)] = Field(
        default=1.0,
        description="Tokens an expert computes under overflow drop, as a multiple of its"
        " even share tokens x top_k / experts (rounded up); 1: no slack (a balanced router"
        " drops no token).",
    )
    hot_load: Annotated[float, Field(ge=1, le=1000, allow_inf_nan=False)] = Field(
        default=1.0,
        description="Load imbalance: the tokens the router sends the hottest expert (the"
        " layer's first) as a multiple of the even share tokens x top_k / experts (the"
        " max-over-mean load MoE papers report), the other experts sharing the rest evenly"
        " (this split is our choice); at most experts / top_k (each token picks an expert"
        " once).  1: a balanced router.",
    )
    overflow: Literal["drop", "pad", "dropless"] = Field(
        default="drop",
        description="What an expert does with its tokens: drop (GShard, Switch Transformer:"
        " every expert computes its capacity, padded, and drops the tokens over it), pad"
        " (DeepSpeed-MoE's drop_tokens false: the capacity raised to the hottest expert's"
        " tokens, every expert padded to it, none dropped; capacity_factor unused) or"
        " dropless (MegaBlocks: each expert computes exactly its own tokens; capacity_factor"
        " unused).",
    )
