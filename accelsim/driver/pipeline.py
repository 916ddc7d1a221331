"""The pipeline of a run's parallel plan (``run.parallel.pipeline``): its load-time
checks, its cut and its micro-batches, the memory of its most loaded stage, and its
step (:mod:`accelsim.driver.pipeline_step`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelsim.config.hardware import MAX_COPIED_PROCESSORS, HardwareSpec
from accelsim.config.parallel import ParallelSpec, PipelineSchedule
from accelsim.config.run import AssignmentPolicy, RunSpec
from accelsim.driver.pipeline_step import PassMemo, Simulated, pipeline_step, rank_step
from accelsim.errors import ConfigError, Problem
from accelsim.graph.ops import OpGraph
from accelsim.lowering.shapes import LayerInfo
from accelsim.mapping.memory import MemoryBreakdown
from accelsim.mapping.pipeline_memory import StageParts, scheduled_memory, stage_parts
from accelsim.mapping.pipeline_order import order_problem
from accelsim.mapping.pipeline_stages import PipelineCut, cut_problem, cut_stages
from accelsim.network.topology import Network
from accelsim.techniques.base import Technique, placers
from accelsim.timing.pipeline_step import PipelineStep


def pipeline_degree(run: RunSpec) -> int:
    """The run's pipeline-parallel degree (1 without a plan)."""
    return 1 if run.parallel is None else run.parallel.pipeline


def micro_batch_samples(plan: ParallelSpec) -> int:
    """The samples of one micro-batch (one when the plan does not say)."""
    return plan.micro_batch or 1


def pipeline_problems(
    run: RunSpec,
    hw: HardwareSpec,
    infos: Sequence[LayerInfo],
    techniques: Sequence[Technique[Any]],
    source: str,
) -> list[Problem]:
    """What a pipeline plan cannot run with: processors that tensor x pipeline does not
    divide, a batch the replicas' micro-batches do not divide, a table with fewer
    blocks than chunks, virtual stages without the interleaved schedule, micro-batches
    the interleaved schedule cannot order, and the techniques that say they cannot
    (a placing technique always: the plan's schedule is the pipeline)."""
    plan = run.parallel
    if plan is None or plan.pipeline == 1:
        return []
    key = "parallel.pipeline"
    p, v = plan.pipeline, plan.virtual_stages
    if plan.schedule is PipelineSchedule.ONE_F_ONE_B and v > 1:
        why = "only with schedule: interleaved (1f1b runs one chunk a stage)"
        return [Problem(source, "parallel.virtual_stages", why, v)]
    if hw.processors % (p * plan.tensor):
        why = f"times parallel.tensor ({plan.tensor}) must divide the {hw.processors} processors"
        return [Problem(source, key, why, p)]
    problems = []
    cut = cut_problem(infos, p, v)
    if cut is not None:
        problems.append(Problem(source, key, cut, p))
    replicas = hw.processors // (p * plan.tensor)
    if replicas > 1 and run.assignment is not AssignmentPolicy.DATA_PARALLEL:
        why = (
            f"leaves {replicas} pipelines of {p * plan.tensor} processors: assignment"
            " data_parallel runs them as replicas"
        )
        problems.append(Problem(source, key, why, p))
    m = micro_batch_samples(plan)
    if run.batch_size % (replicas * m):
        why = (
            f"must divide each of the {replicas} data-parallel replicas' share of the"
            f" batch of {run.batch_size} samples"
        )
        problems.append(Problem(source, "parallel.micro_batch", why, m))
    else:
        refused = order_problem(plan.schedule, p, run.batch_size // (replicas * m))
        if refused is not None:
            problems.append(Problem(source, "parallel.micro_batch", refused, m))
    placing = {t.name for t in placers(techniques)}
    chunk_of_layer = {} if cut is not None else cut_stages(infos, p, v).chunk_of_layer()
    for technique in techniques:
        if technique.name in placing:
            why = (
                "not with parallel.pipeline above 1: the plan's schedule is the pipeline"
                " (two pipelines; use one)"
            )
        else:
            refused = technique.pipeline_problem(infos, chunk_of_layer)
            if refused is None:
                continue
            why = refused
        problems.append(Problem(source, f"techniques.{technique.name}", why, p))
    return problems


@dataclass
class MemoryMemo:
    """What the memories of one micro-batch's step graph share whatever their schedule,
    ZeRO stage or data-parallel degree: the graph and its stages' parts by cut
    (:mod:`accelsim.driver.pipeline_memo` keeps one per rank graph)."""

    step: OpGraph | None = None
    parts: dict[tuple[object, ...], StageParts] = field(default_factory=dict)
    """By the stages and each chunk's layers."""


def pipeline_memory(
    run: RunSpec,
    hw: HardwareSpec,
    infos: Sequence[LayerInfo],
    step_of_batch: Callable[[int], OpGraph],
    memo: MemoryMemo | None = None,
) -> MemoryBreakdown:
    """The memory of the most loaded stage of the run's pipeline (one rank of it, of
    the first data-parallel replica), from one micro-batch's step graph (``memo``'s
    when it has one, with its stages' parts), sharded at the plan's ZeRO stage over
    each stage's data-parallel group."""
    plan, m, micro_batches, cut = _cut(run, hw, infos)
    memo = MemoryMemo() if memo is None else memo
    key = (cut.stages, *(tuple(chunk) for chunk in cut.chunks))
    if key not in memo.parts:
        if memo.step is None:
            memo.step = step_of_batch(m)
        bucket = run.data_parallel.bucket_bytes
        memo.parts[key] = stage_parts(memo.step, cut, run.optimizer, hw, bucket)
    data = hw.processors // (plan.pipeline * plan.tensor)
    return scheduled_memory(
        memo.parts[key], cut, plan.schedule, micro_batches, run.optimizer, hw, plan.zero, data
    )


def _cut(
    run: RunSpec, hw: HardwareSpec, infos: Sequence[LayerInfo]
) -> tuple[ParallelSpec, int, int, PipelineCut]:
    """The run's plan, its samples per micro-batch, its micro-batches a replica and its
    cut into chunks."""
    plan = run.parallel
    assert plan is not None
    m = micro_batch_samples(plan)
    replicas = hw.processors // (plan.pipeline * plan.tensor)
    cut = cut_stages(infos, plan.pipeline, plan.virtual_stages)
    return plan, m, run.batch_size // (replicas * m), cut


def simulated_pipeline(
    run: RunSpec,
    hw: HardwareSpec,
    network: Network,
    infos: Sequence[LayerInfo],
    step_of_batch: Callable[[int], OpGraph],
    simulated: Simulated,
    memo: PassMemo | None = None,
) -> tuple[OpGraph, PipelineStep]:
    """The step of the run's pipeline plan (:mod:`accelsim.driver.pipeline_step`), each
    pass simulated by ``simulated``, and the graph of one micro-batch of every chunk on
    the first stage's tensor group that its passes were cut from (``memo``'s when it
    has one: another plan's of the same rank graph, with its passes' cycles)."""
    _, m, micro_batches, cut = _cut(run, hw, infos)
    memo = PassMemo() if memo is None else memo
    graph = memo.rank_graph(lambda: rank_step(run, hw, step_of_batch, m))
    return graph, pipeline_step(run, hw, network, cut, graph, micro_batches, simulated, memo)


MAX_COPIED_OPS = 2_000_000
"""Most ops a run copying the step on every processor places (the processors times a
copy's ops): the placed graph's memory and time grow with them, about 3.6 KB an op
(ResNet-152 on 1,024 processors, 1.54 million ops, takes 5.5 GiB)."""


def refuse_copies(hw: HardwareSpec, source: str, copy_ops: Callable[[], int] | None) -> None:
    """Refuses to place a step with a copy on every processor (every plan but a
    pipeline's) on more than :data:`MAX_COPIED_PROCESSORS` processors, or when the
    copies (``copy_ops()`` ops each, counted once the processors pass; None: the step
    is not copied, but placed by a technique or an assignment) make more than
    :data:`MAX_COPIED_OPS` ops.

    Raises:
        ConfigError: ``hardware.processors`` above either.
    """
    if hw.processors > MAX_COPIED_PROCESSORS:
        why = (
            f"above {MAX_COPIED_PROCESSORS:,} only with parallel.pipeline above 1: every other"
            " plan places a copy of the step on every processor"
        )
        raise ConfigError.single(source, "hardware.processors", why, hw.processors)
    if copy_ops is None:
        return
    ops = copy_ops()
    placed = hw.processors * ops
    if placed > MAX_COPIED_OPS:
        why = (
            f"a copy of the step ({ops:,} ops) on every processor places {placed:,} ops,"
            f" more than the {MAX_COPIED_OPS:,} a run places (its memory and time grow with"
            " them): simulate it with parallel.pipeline above 1, as data parallelism without"
            " a parallel plan or technique (one replica standing for every processor), or on"
            " fewer processors"
        )
        raise ConfigError.single(source, "hardware.processors", why, hw.processors)
