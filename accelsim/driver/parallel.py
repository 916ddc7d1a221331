"""The load-time checks of a run's parallel plan (``run.parallel``) against its hardware,
workload and techniques, and the tensor plan of its layers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelsim.config.hardware import HardwareSpec
from accelsim.config.run import AssignmentPolicy, RunSpec
from accelsim.driver.pipeline import pipeline_degree, pipeline_problems
from accelsim.errors import Problem
from accelsim.lowering.sequence_parallel import KEY as SEQUENCE_KEY
from accelsim.lowering.sequence_parallel import sequence_problems
from accelsim.lowering.shapes import LayerInfo
from accelsim.lowering.tensor_parallel import TensorPlan, plan_tensor, tensor_problems
from accelsim.techniques.base import Technique, placers


def tensor_degree(run: RunSpec) -> int:
    """The run's tensor-parallel degree (1 without a plan)."""
    return 1 if run.parallel is None else run.parallel.tensor


def replicated(run: RunSpec, processors: int, techniques: Sequence[Technique[Any]]) -> bool:
    """Whether the run's ``processors`` are data-parallel replicas or tensor-parallel
    ranks placed by ``assignment`` (no placing technique, no pipeline plan, whose passes
    are simulated on one tensor group): a step symmetry could serve."""
    return (
        processors > 1
        and not placers(techniques)
        and pipeline_degree(run) == 1
        and (run.assignment is AssignmentPolicy.DATA_PARALLEL or tensor_degree(run) > 1)
    )


TENSOR_PLANS = 32
"""Tensor plans a process keeps, by the layer shapes' identity (a plan search's
candidates share them)."""

_plans: dict[tuple[int, int, bool], tuple[Sequence[LayerInfo], TensorPlan]] = {}


def tensor_plan(run: RunSpec, infos: Sequence[LayerInfo]) -> TensorPlan | None:
    """The layers the run's tensor-parallel group splits; None without one."""
    degree = tensor_degree(run)
    if degree == 1:
        return None
    assert run.parallel is not None
    return _planned(infos, degree, run.parallel.sequence_parallel)


def _planned(infos: Sequence[LayerInfo], degree: int, sequence: bool) -> TensorPlan:
    """:func:`plan_tensor`, kept for the process's next runs of the same layer shapes."""
    key = (id(infos), degree, sequence)
    if key not in _plans:
        if len(_plans) >= TENSOR_PLANS:
            del _plans[next(iter(_plans))]
        _plans[key] = (infos, plan_tensor(infos, degree, sequence))  # infos held: ids stay
    return _plans[key][1]


def parallel_problems(
    run: RunSpec,
    hw: HardwareSpec,
    infos: Sequence[LayerInfo],
    techniques: Sequence[Technique[Any]],
    source: str,
) -> list[Problem]:
    """What a parallel plan cannot run with: its pipeline's problems
    (:func:`pipeline_problems`, and gradient clipping), then the tensor-parallel
    degree's: processors it does not divide, more than one replica without data
    parallelism, heads it does not divide, gradient clipping and the techniques that say
    they cannot."""
    t = tensor_degree(run)
    problems = pipeline_problems(run, hw, infos, techniques, source)
    sequence = run.parallel is not None and run.parallel.sequence_parallel
    if t == 1 and sequence:
        why = (
            "needs parallel.tensor above 1 (it splits the layers between the tensor-parallel"
            " blocks)"
        )
        problems.append(Problem(source, SEQUENCE_KEY, why, True))
    if pipeline_degree(run) > 1:
        problems += clip_norm_problems(run, "pipeline", pipeline_degree(run), source)
    if t == 1 or problems:
        return problems
    key = "parallel.tensor"
    if hw.processors % t:
        return [Problem(source, key, f"must divide the {hw.processors} processors", t)]
    data = hw.processors // (t * pipeline_degree(run))
    problems = tensor_problems(infos, t, source)
    if sequence and not problems:
        routed = run.parallel is not None and run.parallel.expert > 1
        problems += sequence_problems(infos, _planned(infos, t, True), source, routed)
    if data > 1 and run.assignment is not AssignmentPolicy.DATA_PARALLEL:
        why = (
            f"leaves {data} groups of {t} processors: assignment data_parallel runs them as"
            " replicas (or set parallel.tensor to the processors)"
        )
        problems.append(Problem(source, key, why, t))
    problems += clip_norm_problems(run, "tensor", t, source)
    for technique in techniques:
        refused = technique.tensor_parallel_problem()
        if refused is None and sequence:
            refused = technique.sequence_parallel_problem()
        if refused is not None:
            problems.append(Problem(source, f"techniques.{technique.name}", refused, t))
    return problems


def clip_norm_problems(run: RunSpec, group: str, degree: int, source: str) -> list[Problem]:
    """Gradient clipping refused under a ``group`` parallelism of ``degree`` above 1:
    the global norm's all-reduce over the group is not modelled."""
    if run.optimizer.clip_global_norm is None:
        return []
    why = (
        f"not with parallel.{group} above 1: the norm's all-reduce over the"
        f" {group}-parallel group is not modelled"
    )
    return [Problem(source, "optimizer.clip_global_norm", why, degree)]
