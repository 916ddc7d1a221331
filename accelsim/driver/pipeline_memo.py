"""What a process's pipeline plans of one rank graph share, kept for its next runs: the
candidates of a plan search (:mod:`accelsim.planner`) simulated one after the other in
a sweep worker.

A pipeline plan's rank graph (one micro-batch's step on the first stage's tensor
group, :func:`~accelsim.driver.pipeline_step.rank_step`) and everything simulated from
it depend on the tensor-parallel degree, the micro-batch, sequence parallelism and the
techniques (recomputation), and not on the pipeline degree (but with expert
parallelism: its expert group's processors are a replica's ``pipeline x tensor``
apart), its schedule and virtual
stages, the ZeRO stage or the data-parallel degree: a chunk's forward and backward
passes, a stage's update (and its shard's, by the replicas), the whole graph's tables
and the memory of one micro-batch's stages by cut are each made once for every plan
that shares them (:class:`~accelsim.driver.pipeline_step.PassMemo`,
:class:`~accelsim.driver.pipeline.MemoryMemo`).  The key holds the run with those
plan fields at their defaults and every other setting, the hardware, the energy
table, the step kind and the identity of the workload objects (a sweep worker's
:class:`~accelsim.driver.inputs.InputCache` shares them), so a plan gets the numbers
it would get alone (``tests/planner/test_plan_memo.py``).

What a process keeps does not grow with the plans it runs: the last
:data:`SHARED_RANK_GRAPHS` rank graphs, each with its ops' kinds, its tables, the op
lists of its last :data:`~accelsim.driver.pipeline_step.KEPT_CUTS` cuts and stages, one
micro-batch's step graph for the memory, and numbers (each pass's cycles by a digest of
its signature, each stage's sums, each hop, each cut's stage memory: some kilobytes a
cut of the graph), all dropped with the graph.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import ClassVar

from accelsim.config.run import RunSpec
from accelsim.driver import pipeline as pipelines
from accelsim.driver.inputs import RunInputs
from accelsim.driver.pipeline_step import PassMemo
from accelsim.graph.ops import OpGraph
from accelsim.mapping.memory import MemoryBreakdown
from accelsim.report.result import RunResult
from accelsim.timing.pipeline_step import PipelineStep

SHARED_RANK_GRAPHS = 2
"""Rank graphs (with what was simulated from them) a process keeps; a plan search
orders its candidates so that those sharing one follow each other, and hands a
worker those of one rank graph together (:mod:`accelsim.planner.grouped`): a graph of
32 tensor ranks of GPT-3 175B with its tables and memo holds about 400 MB."""

NOT_SHARING = ("pipeline", "schedule", "virtual_stages", "zero", "zero_prefetch")
"""The fields of the parallel plan a rank graph and its passes do not depend on."""


@dataclass
class _Shared:
    """One rank graph's shared work, with the workload objects its key names by
    identity (held, so that the identities stay unique)."""

    sources: tuple[object, ...]
    passes: PassMemo = field(default_factory=PassMemo)
    memory: pipelines.MemoryMemo = field(default_factory=pipelines.MemoryMemo)
    tables: RunResult | None = None


class _Kept:
    graphs: ClassVar[OrderedDict[Hashable, _Shared]] = OrderedDict()


def shared_run(run: RunSpec) -> RunSpec:
    """``run`` with the plan's fields of :data:`NOT_SHARING` at their defaults (the
    key holds its JSON: a run's techniques are a mapping), but for the pipeline degree
    with expert parallelism (the rank graph's expert group spans the stages' strides)."""
    plan = run.parallel
    assert plan is not None
    kept = ("pipeline",) if plan.expert > 1 else ()  # its expert groups' processors
    fields = type(plan).model_fields
    defaults = {name: fields[name].default for name in NOT_SHARING if name not in kept}
    return run.model_copy(update={"parallel": plan.model_copy(update=defaults)})


def _shared(inputs: RunInputs, kind: str) -> _Shared:
    sources = (inputs.infos, inputs.workload)
    key = (
        kind,
        shared_run(inputs.run).model_dump_json(),
        inputs.hardware,
        inputs.energy.model_dump_json(),  # the tables' energy (run.energy names only a path)
        *map(id, sources),
    )
    kept = _Kept.graphs
    entry = kept.get(key)
    if entry is None:
        entry = kept[key] = _Shared(sources)
        if len(kept) > SHARED_RANK_GRAPHS:
            kept.popitem(last=False)
    kept.move_to_end(key)
    return entry


def pipeline_memory(
    inputs: RunInputs, kind: str, step_of_batch: Callable[[int], OpGraph]
) -> MemoryBreakdown:
    """:func:`~accelsim.driver.pipeline.pipeline_memory` of the run, its stages' parts
    shared with the process's other plans of the same rank graph."""
    memo = _shared(inputs, kind).memory
    return pipelines.pipeline_memory(inputs.run, inputs.hardware, inputs.infos, step_of_batch, memo)


def simulated_pipeline(
    inputs: RunInputs,
    kind: str,
    step_of_batch: Callable[[int], OpGraph],
    simulate: Callable[[OpGraph, str], RunResult],
) -> tuple[RunResult, PipelineStep]:
    """The run's pipeline step (:func:`~accelsim.driver.pipeline.simulated_pipeline`,
    each pass simulated by ``simulate``) and its rank graph simulated whole (the
    tables), shared with the process's other plans of the same rank graph."""
    entry = _shared(inputs, kind)
    graph, step = pipelines.simulated_pipeline(
        inputs.run,
        inputs.hardware,
        inputs.machine.network,
        inputs.infos,
        step_of_batch,
        lambda pass_graph: simulate(pass_graph, "pass").trace.total_cycles,
        entry.passes,
    )
    if entry.tables is None:
        entry.tables = simulate(graph, kind)
    return entry.tables, step


def forget() -> None:
    """Drop every rank graph kept, with what was simulated from it."""
    _Kept.graphs.clear()
