"""What each pipeline stage's processor holds in DRAM, by class, and the most loaded stage.

A stage (one rank of its tensor-parallel group) is counted from one micro-batch's step
graph: the ops of its chunks' layers (:mod:`accelsim.mapping.pipeline_stages`) and
the parameters they keep or read (the LM head's stage keeps a copy of a table tied to
the first stage's embedding, as Megatron-LM does), as :func:`memory_classes` counts a
processor, but for its activations: the stash of each chunk pass is that of the
chunk's layers for one micro-batch (their backward's reads of what their forward made,
the input received from the stage before included), and the stage holds at once the
stashes of the forwards its schedule has run and whose backwards it has not
(:func:`~accelsim.mapping.pipeline_order.peak_stash` over its order).  Under ZeRO
stages 1 and 2 each stage's classes are sharded over its data-parallel group
(:func:`~accelsim.mapping.zero_memory.zero_classes`) before the most loaded is chosen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from accelsim.config.hardware import HardwareSpec
from accelsim.config.parallel import PipelineSchedule
from accelsim.graph.ops import OpGraph, Parameter
from accelsim.mapping.memory import MemoryBreakdown, classes_of, processors_sharing
from accelsim.mapping.pipeline_order import peak_stash
from accelsim.mapping.pipeline_stages import PipelineCut
from accelsim.mapping.stage_layers import (
    kept_parameters,
    layer_facts,
    reduce_bytes,
    stashes,
    workspace_bytes,
)
from accelsim.mapping.zero_memory import zero_classes

if TYPE_CHECKING:
    from accelsim.config.run import OptimizerSpec


@dataclass(frozen=True)
class StageParts:
    """A cut's stages before their schedule and sharding: each stage's classes but its
    activations, the parameters it keeps, and each chunk's stash for one micro-batch
    (what every schedule, ZeRO stage and data-parallel degree of a cut shares)."""

    classes: tuple[dict[str, int], ...]
    kept: tuple[tuple[Parameter, ...], ...]
    stash_of_chunk: tuple[int, ...]


def stage_parts(
    step: OpGraph,
    cut: PipelineCut,
    optimizer: OptimizerSpec,
    hw: HardwareSpec,
    bucket_bytes: int | None,
) -> StageParts:
    """Each stage's :class:`StageParts` of ``step``, one micro-batch's step graph of
    one rank, counted from its layers (:mod:`accelsim.mapping.stage_layers`)."""
    facts = layer_facts(step)
    chunk_of = cut.chunk_of_layer()
    stage_of = {name: g % cut.stages for name, g in chunk_of.items()}
    layers_of = [
        tuple(name for g in cut.chunks_of_stage(stage) for name in cut.chunks[g])
        for stage in range(cut.stages)
    ]
    stash_of_chunk, _ = stashes(facts, cut.chunks)
    _, stashed = stashes(facts, tuple(layers_of))
    kept_of = kept_parameters(step.parameters, facts, stage_of, cut.stages)
    classes = []
    for stage, (kept, layers) in enumerate(zip(kept_of, layers_of, strict=True)):
        held = {p.weight.key for p in kept} | {p.gradient.key for p in kept if p.grad_op >= 0}
        held |= stashed[stage]
        communication = max(bucket_bytes or 0, reduce_bytes(facts, layers))
        workspace = workspace_bytes(facts, layers, held)
        classes.append(classes_of(kept, 0, optimizer, hw, communication, workspace))
    return StageParts(tuple(classes), tuple(tuple(k) for k in kept_of), tuple(stash_of_chunk))


def stage_memory(
    step: OpGraph,
    cut: PipelineCut,
    schedule: PipelineSchedule,
    micro_batches: int,
    optimizer: OptimizerSpec,
    hw: HardwareSpec,
    bucket_bytes: int | None,
    zero: int = 0,
    data: int = 1,
) -> MemoryBreakdown:
    """The most loaded stage's memory (the first of equals), ``step`` being one
    micro-batch's step graph of one rank, with every stage's total, each stage's
    classes sharded at ZeRO stage ``zero`` (0, 1 or 2) over ``data`` processors."""
    parts = stage_parts(step, cut, optimizer, hw, bucket_bytes)
    return scheduled_memory(parts, cut, schedule, micro_batches, optimizer, hw, zero, data)


def scheduled_memory(
    parts: StageParts,
    cut: PipelineCut,
    schedule: PipelineSchedule,
    micro_batches: int,
    optimizer: OptimizerSpec,
    hw: HardwareSpec,
    zero: int = 0,
    data: int = 1,
) -> MemoryBreakdown:
    """:func:`stage_memory` from the cut's :class:`StageParts`: each stage's peak stash
    by its schedule, its classes sharded at ZeRO stage ``zero``."""
    stages = []
    for stage, (static, kept) in enumerate(zip(parts.classes, parts.kept, strict=True)):
        stash = peak_stash(
            schedule, cut.stages, cut.virtual_stages, micro_batches, stage, parts.stash_of_chunk
        )
        classes = {**static, "activations": stash}
        if zero:
            classes = zero_classes(classes, kept, optimizer, hw.word_bytes, zero, data, 0)
        stages.append(classes)
    totals = [sum(c.values()) for c in stages]
    top = totals.index(max(totals))
    sharing = processors_sharing(hw)
    capacity = hw.dram.capacity_bytes
    return MemoryBreakdown(stages[top], capacity, sharing, top, tuple(stages), zero, data)
