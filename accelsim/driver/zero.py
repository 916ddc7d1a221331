"""The load-time checks of a run's ZeRO stage (``run.parallel.zero``) and its placement
(:mod:`accelsim.mapping.zero_placement`) of the step on the processors."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from accelsim.config.hardware import HardwareSpec
from accelsim.config.run import AssignmentPolicy, RunSpec
from accelsim.errors import Problem
from accelsim.graph.ops import OpGraph, Parameter
from accelsim.mapping import placement
from accelsim.mapping.memory import MemoryBreakdown
from accelsim.mapping.placement import StepGraph
from accelsim.mapping.tensor_placement import tensor_parallel
from accelsim.mapping.zero_memory import zero_classes
from accelsim.mapping.zero_placement import sharded, zero3_data_parallel
from accelsim.techniques.base import Technique


def zero_stage(run: RunSpec) -> int:
    """The run's ZeRO stage (0 without a plan)."""
    return 0 if run.parallel is None else run.parallel.zero


def data_degree(run: RunSpec, hw: HardwareSpec) -> int:
    """The data-parallel degree: the processors over the tensor and pipeline degrees."""
    if run.parallel is None:
        return hw.processors
    return hw.processors // (run.parallel.tensor * run.parallel.pipeline)


def zero_problems(
    run: RunSpec, hw: HardwareSpec, techniques: Sequence[Technique[Any]], source: str
) -> list[Problem]:
    """What a ZeRO stage cannot run with: no data parallelism (one replica, or another
    assignment), stage 3 with a pipeline or a batch the replicas do not share evenly,
    an expert plan, gradient clipping, and the techniques that say they cannot (stages
    1 and 2 with a pipeline are composed by :mod:`accelsim.driver.pipeline_step`)."""
    zero = zero_stage(run)
    if zero == 0:
        return []
    assert run.parallel is not None
    key, problems = "parallel.zero", []
    data = data_degree(run, hw)
    if run.assignment is not AssignmentPolicy.DATA_PARALLEL or data < 2:
        why = (
            "shards over the data-parallel group: needs assignment data_parallel and at"
            f" least 2 replicas (the plan leaves {data})"
        )
        problems.append(Problem(source, key, why, zero))
    if zero == 3 and run.parallel.pipeline > 1:
        problems.append(Problem(source, key, _GATHERED_IN_A_PIPELINE, zero))
    if run.parallel.expert > 1:
        why = (
            "not with parallel.expert above 1: sharding over the data-parallel group"
            " of an expert-parallel plan's processors is not modelled"
        )
        problems.append(Problem(source, key, why, zero))
    if zero == 3 and data > 1 and run.batch_size % data:
        why = (
            f"must be a multiple of the {data} replicas with parallel.zero 3 (every replica"
            " gathers each layer's weights for the same work)"
        )
        problems.append(Problem(source, "batch_size", why, run.batch_size))
    if run.optimizer.clip_global_norm is not None:
        why = (
            "not with parallel.zero above 0: the global norm of the sharded gradients needs"
            " an all-reduce over the data-parallel group, which is not modelled"
        )
        problems.append(Problem(source, "optimizer.clip_global_norm", why, zero))
    for technique in techniques:
        refused = technique.zero_problem()
        if refused is not None:
            problems.append(Problem(source, f"techniques.{technique.name}", refused, zero))
    return problems


_GATHERED_IN_A_PIPELINE = (
    "3 not with parallel.pipeline above 1: it gathers each layer's weights before each"
    " micro-batch's forward and backward pass, inside the passes a pipeline's step"
    " simulates once for all micro-batches (the gathers, and their prefetch across"
    " passes, are not modelled there)"
)
"""Why ZeRO stage 3 is refused with a pipeline plan."""


GATHERS_BESIDE_TENSOR = (
    "ZeRO stage 3 with tensor parallelism: each tensor rank's weight gathers over its"
    " data-parallel group share links with the tensor groups' collectives, which the"
    " sends of one simulated replica do not load as the whole step does"
)
"""Why ``run.data_parallel.symmetry: auto`` simulates every processor of such a step."""


def unsymmetric(run: RunSpec) -> str:
    """Why the run's step is simulated on every processor whatever its symmetry (ZeRO
    stage 3 with tensor parallelism), or an empty string."""
    plan = run.parallel
    return GATHERS_BESIDE_TENSOR if plan and plan.zero == 3 and plan.tensor > 1 else ""


def zero_placed(step: StepGraph, run: RunSpec, hw: HardwareSpec, tensor: int) -> OpGraph:
    """The step on the processors at the run's ZeRO stage (above 0), with its updates:
    a data-parallel or tensor-parallel placement sharded
    (:func:`~accelsim.mapping.zero_placement.sharded`), or stage 3's own."""
    assert run.parallel is not None
    zero, bucket = run.parallel.zero, run.data_parallel.bucket_bytes
    words = hw.word_bytes
    if zero == 3:
        return zero3_data_parallel(
            step,
            run.batch_size,
            hw.processors,
            run.optimizer,
            words,
            bucket,
            run.parallel.zero_prefetch,
            tensor,
        )
    if tensor > 1:
        graph = tensor_parallel(
            step, run.batch_size, hw.processors, tensor, run.optimizer, words, bucket
        )
    else:
        graph = placement.data_parallel(
            step, run.batch_size, hw.processors, run.optimizer, words, bucket
        )
    return sharded(graph, words, zero)


def sharded_memory(
    memory: MemoryBreakdown, parameters: Sequence[Parameter], run: RunSpec, hw: HardwareSpec
) -> MemoryBreakdown:
    """``memory`` sharded at the run's ZeRO stage over its data-parallel group
    (:func:`~accelsim.mapping.zero_memory.zero_classes`); as it is at stage 0."""
    if run.parallel is None or run.parallel.zero == 0:
        return memory
    zero, data = run.parallel.zero, data_degree(run, hw)
    classes = zero_classes(
        memory.bytes_by_class,
        parameters,
        run.optimizer,
        hw.word_bytes,
        zero,
        data,
        run.parallel.zero_prefetch,
    )
    return dataclasses.replace(memory, bytes_by_class=classes, zero=zero, data=data)
