"""The parallel plan of a run (``run.parallel``): how its processors share the step.

Today it holds the tensor-parallel degree; the processors are ``data x tensor``: each
data-parallel replica is a tensor-parallel group of ``tensor`` processors, which
split every transformer block's attention heads and MLP as Megatron-LM does
(:mod:`accelsim.lowering.tensor_parallel`), and the replicas split the batch.  The
plan is shaped to take the other degrees later as fields of their own beside
``tensor`` (``data``, ``pipeline``, ``sequence_parallel``, ``zero``,
``recompute``, ``micro_batch``); a file naming one that is not a field yet is refused
like any unknown key.  ``expert`` spreads each ``moe`` layer's experts over an
expert-parallel group (:mod:`accelsim.mapping.expert_placement`).
"""

from __future__ import annotations

from pydantic import Field

from accelsim.config.base import PositiveInt, Spec


class ParallelSpec(Spec):
    """The run's parallel plan: the tensor-parallel degree (the data-parallel degree is
    the processors over it)."""

    tensor: PositiveInt = Field(
        default=1,
        description="Tensor-parallel degree t (Megatron-LM): attention heads (and key/value"
        " heads), the MLP's inner dimension, the embedding table and the LM head split over"
        " t processors, an all-reduce after each row-parallel linear forward and at each"
        " column-parallel input backward; must divide the processors (data-parallel degree:"
        " processors / t, with assignment: data_parallel above 1).  1: no tensor"
        " parallelism.",
    )
    expert: PositiveInt = Field(
        default=1,
        description="Expert-parallel degree e (GShard, Switch, Megatron-LM): each moe layer's"
        " experts spread over groups of e consecutive processors (experts / e per rank), the"
        " routed tokens sent to their expert's rank by an all-to-all and returned by another"
        " (two in forward, two in backward); every other layer data-parallel over all the"
        " processors, each expert's gradient all-reduced over the ranks holding it (processors"
        " / e).  Must divide every moe layer's experts and the processors; needs assignment"
        " data_parallel and parallel.tensor 1.  1: no expert parallelism.",
    )
