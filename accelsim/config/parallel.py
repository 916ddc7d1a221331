"""The parallel plan of a run (``run.parallel``): how its processors share the step.

It holds the tensor-parallel degree, the pipeline and the expert-parallel degree: the
processors are ``data x pipeline x tensor``: each tensor-parallel group of ``tensor``
processors splits every transformer block's attention heads and MLP as Megatron-LM
does (:mod:`accelsim.lowering.tensor_parallel`), ``pipeline`` groups hold a stage each
(:mod:`accelsim.mapping.pipeline_stages`, in the order of
:mod:`accelsim.mapping.pipeline_order`), and the replicas split the batch; ``expert``
spreads each ``moe`` layer's experts over an expert-parallel group within the
data-parallel one (:mod:`accelsim.mapping.expert_placement`); ``zero`` shards the
optimizer state, gradients and parameters over each data-parallel group
(:mod:`accelsim.mapping.zero_placement`).  The other degrees are
fields of their own beside these; a file naming one that is not a field is refused
like any unknown key.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated

from pydantic import Field

from accelsim.config.base import NonNegativeInt, PositiveInt, Spec


class PipelineSchedule(str, Enum):
    """The order a pipeline-parallel plan runs its micro-batches in (Narayanan et al.,
    SC 2021): ``1f1b`` (PipeDream-Flush) or ``interleaved`` (each device holds
    ``virtual_stages`` model chunks)."""

    ONE_F_ONE_B = "1f1b"
    INTERLEAVED = "interleaved"


class ParallelSpec(Spec):
    """The run's parallel plan: the tensor-parallel degree and the pipeline (the
    data-parallel degree is the processors over tensor x pipeline)."""

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
        " experts spread over groups of e consecutive data-parallel replicas (experts / e per"
        " rank; with tensor t above 1, the ranks of one tensor position in e replicas, each"
        " expert's MLP split over the tensor group as Megatron-LM's expert tensor parallelism"
        " does; with pipeline above 1, a stage's ranks in e replicas, the all-to-alls in its"
        " passes), the routed tokens sent to their expert's rank by an all-to-all and returned"
        " by another (two in forward, two in backward); every other layer data-parallel, each"
        " expert's gradient all-reduced over the ranks holding it.  Must divide every moe"
        " layer's experts and the replicas; needs assignment data_parallel.  1: no expert"
        " parallelism.",
    )
    pipeline: PositiveInt = Field(
        default=1,
        description="Pipeline-parallel degree p: the transformer's blocks cut into p stages"
        " (the embedding with the first, the LM head with the last), each on a"
        " tensor-parallel group; the processors are data x pipeline x tensor.  1: no"
        " pipeline.",
    )
    schedule: Annotated[PipelineSchedule, Field(strict=False)] = Field(
        default=PipelineSchedule.ONE_F_ONE_B,
        description="The pipeline's order (with pipeline above 1): 1f1b (warm-up of p -"
        " stage - 1 forwards, then one forward one backward, then a cool-down) or"
        " interleaved (virtual_stages model chunks per stage, Narayanan et al. 2021).",
    )
    virtual_stages: PositiveInt = Field(
        default=1,
        description="Model chunks per pipeline stage v (schedule: interleaved only): the"
        " blocks cut into p x v chunks, stage i holding chunks i, i + p, ...",
    )
    micro_batch: PositiveInt | None = Field(
        default=None,
        description="Samples per micro-batch m (with pipeline above 1): a data-parallel"
        " replica's batch / m micro-batches a step, their gradients accumulated.  Null:"
        " one sample.",
    )
    sequence_parallel: bool = Field(
        default=False,
        description="Sequence parallelism (Korthikanti et al. 2022, with tensor above 1): the"
        " layers between the tensor-parallel blocks (norms, dropouts, residual additions, the"
        " position embedding; with expert above 1, a moe layer too: each rank routes its share"
        " and its experts' tokens are all-gathered over the tensor group after the all-to-all,"
        " their outputs reduce-scattered before the return) run on s / t of the sequence on"
        " each rank; each block's forward"
        " all-reduce becomes a reduce-scatter after the row-parallel linear and an all-gather"
        " before the column-parallel one, backward the mirror, and the column-parallel"
        " linear's weight gradient all-gathers its stashed input shard again.",
    )
    zero: Annotated[int, Field(ge=0, le=3)] = Field(
        default=0,
        description="ZeRO stage over each data-parallel group of d processors (Rajbhandari et"
        " al., SC 2020; PyTorch FSDP): 1 shards the optimizer state and fp32 master weights"
        " (the gradients reduce-scattered, each processor updating its 1/d shard, the"
        " updated weights all-gathered), 2 also the gradients, 3 also the weights (each"
        " layer's gathered before its forward and again before its backward, zero_prefetch"
        " layers ahead).  Needs assignment data_parallel and d above 1.  0: every replica"
        " holds everything, gradients all-reduced.",
    )
    zero_prefetch: NonNegativeInt = Field(
        default=1,
        description="With zero 3: how many layers ahead a layer's weights are all-gathered"
        " (the gather of a layer starts once the layer zero_prefetch + 1 before it has"
        " finished, as FSDP's and DeepSpeed's prefetch of the next unit; 0: no prefetch,"
        " each gather after the layer before).",
    )
