"""The load-time checks of a run's expert-parallel degree (``run.parallel.expert``)
against its hardware, workload and techniques; its placement
(:func:`~accelsim.mapping.expert_placement.expert_parallel`, re-exported for the
driver)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelsim.config.hardware import HardwareSpec
from accelsim.config.run import AssignmentPolicy, RunSpec
from accelsim.driver.parallel import clip_norm_problems, tensor_degree
from accelsim.errors import Problem
from accelsim.lowering.shapes import LayerInfo
from accelsim.mapping.expert_placement import expert_parallel as expert_parallel
from accelsim.techniques.base import Technique
from accelsim.workload import model as wm

_UNEVEN = (
    "not with layer {layer}'s overflow dropless: its ranks' experts would compute unequal"
    " tokens and exchange unequal pieces, an all-to-all the network does not model"
    " (overflow pad or drop keeps every expert's buffer equal)"
)
"""Why an expert-parallel plan refuses a dropless ``moe`` layer."""

_SPLIT = (
    "must divide layer {layer}'s inner width {f} (each expert's MLP splits over the"
    " tensor-parallel group)"
)
"""Why a tensor-parallel degree is refused with a moe layer."""


def expert_degree(run: RunSpec) -> int:
    """The run's expert-parallel degree (1 without a plan)."""
    return 1 if run.parallel is None else run.parallel.expert


def expert_problems(
    run: RunSpec,
    hw: HardwareSpec,
    infos: Sequence[LayerInfo],
    techniques: Sequence[Technique[Any]],
    source: str,
) -> list[Problem]:
    """What a plan cannot run with a workload's moe layers: a tensor-parallel degree that
    does not divide an expert's inner width (without experts under sequence
    parallelism, which refuses the layer); then, with expert parallelism, processors or
    a moe layer's experts it does not divide (with tensor parallelism: the replicas of
    ``t`` ranks), a dropless moe layer, a workload without a moe layer, a batch the
    replicas do not divide, no data parallelism, gradient clipping and any technique
    (with a pipeline, the replicas are those of ``pipeline x tensor`` ranks)."""
    e, t = expert_degree(run), tensor_degree(run)
    moes = [i.layer for i in infos if isinstance(i.layer, wm.Moe)]
    sequence = run.parallel is not None and run.parallel.sequence_parallel
    split = [
        Problem(source, "parallel.tensor", _SPLIT.format(layer=m.name, f=m.intermediate), t)
        for m in moes
        if m.intermediate % t and (not sequence or e > 1)
    ]
    if e == 1:
        return split
    key, stages = "parallel.expert", 1 if run.parallel is None else run.parallel.pipeline
    if hw.processors % (stages * t):
        return split  # the pipeline's own problem (driver/pipeline.py) says why
    replicas = hw.processors // (stages * t)
    if replicas % e:
        return [Problem(source, key, f"must divide the {_replicas(hw, replicas, t, stages)}", e)]
    problems = split + [
        Problem(
            source,
            key,
            f"must divide layer {m.name}'s {m.experts} experts (each rank holds experts / e)",
            e,
        )
        for m in moes
        if m.experts % e
    ]
    problems += [
        Problem(source, key, _UNEVEN.format(layer=m.name), e)
        for m in moes
        if m.overflow == "dropless"
    ]
    if not moes:
        problems.append(
            Problem(source, key, "needs a moe layer to spread (the workload has none)", e)
        )
    if run.assignment is not AssignmentPolicy.DATA_PARALLEL:
        why = (
            "runs every layer but the experts data-parallel over the processors: needs"
            " assignment data_parallel"
        )
        problems.append(Problem(source, key, why, e))
    elif run.batch_size % replicas and stages == 1:  # a pipeline's micro-batches say
        what = f"{replicas} processors" if t == 1 else f"{replicas} data-parallel replicas"
        why = (
            f"must be a multiple of the {what} with parallel.expert above 1 (every rank of an"
            " expert group routes as many tokens)"
        )
        problems.append(Problem(source, "batch_size", why, run.batch_size))
    problems += clip_norm_problems(run, "expert", e, source)
    for technique in techniques:
        why = (
            "not with parallel.expert above 1: its rewrites and placements do not know the"
            " expert-parallel all-to-alls"
        )
        problems.append(Problem(source, f"techniques.{technique.name}", why, e))
    return problems


def _replicas(hw: HardwareSpec, replicas: int, t: int, stages: int) -> str:
    """The data-parallel replicas an expert degree must divide, as a problem names them."""
    if stages > 1:
        return f"{replicas} data-parallel replicas of {stages * t} processors"
    return f"{hw.processors} processors" if t == 1 else f"{replicas} replicas of {t} ranks"
