"""The whole flow of a run: lower -> rewrite -> place -> schedule -> cost -> simulate -> energy.

:func:`simulate_training` simulates the baseline step and every step kind the
run's techniques define, and assembles the training report.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

from accelsim.config.enums import AttentionKernels, CompileMode
from accelsim.config.run import AssignmentPolicy, OnCapacity
from accelsim.config.symmetry import Symmetry
from accelsim.driver import pipeline as pipelines
from accelsim.driver import pipeline_memo
from accelsim.driver.costing import run_costs
from accelsim.driver.expert_parallel import expert_degree, expert_parallel
from accelsim.driver.inputs import RunInputs
from accelsim.driver.limits import limit_problems
from accelsim.driver.parallel import replicated, tensor_degree, tensor_plan
from accelsim.driver.silicon import iso_area_match
from accelsim.driver.step_result import step_result
from accelsim.driver.zero import sharded_memory, unsymmetric, zero_placed, zero_stage
from accelsim.errors import ConfigError, GraphError, LimitError, SimulationError
from accelsim.graph.check import graph_problems
from accelsim.graph.ops import OpGraph
from accelsim.lowering.epilogues import fuse_epilogues
from accelsim.lowering.flash_attention import AttentionBudget
from accelsim.lowering.shapes import model_inputs
from accelsim.lowering.step import lower
from accelsim.mapping import placement
from accelsim.mapping.memory import MemoryBreakdown, memory_breakdown, memory_problem
from accelsim.mapping.placement import StepGraph, split_batch
from accelsim.mapping.residency import keep_stash_on_chip
from accelsim.mapping.schedule import schedule
from accelsim.mapping.tensor_placement import tensor_parallel
from accelsim.mapping.units import ArrayUnit
from accelsim.report.result import RunResult
from accelsim.report.training import TrainingReport, TrainingResult
from accelsim.techniques.base import (
    BASE,
    GraphRewriter,
    Rewrite,
    SampledRewriter,
    SimulatedStep,
    StepCost,
    Technique,
    TechniqueContext,
    TrainingPlan,
    kind_definers,
    placers,
)
from accelsim.timing import symmetry
from accelsim.timing.costs import OpCosts
from accelsim.timing.tile_groups import simulate_grouped as simulate
from accelsim.timing.trace import Trace, launched

Progress = Callable[[str], None]
"""Told before each simulation of a run what it simulates (``"gp step, 9,044 ops"``):
a run may simulate many graphs (a placement's candidates) and take a while."""


class _Run:
    """One run's simulations, sharing lowered steps and simulated graphs."""

    def __init__(self, inputs: RunInputs, progress: Progress | None = None) -> None:
        self.inputs = inputs
        self.progress = progress
        self.extra = inputs.extra_arrays
        self._simulated: dict[int, tuple[OpGraph, RunResult]] = {}
        self._lowered: dict[int, OpGraph] = {}
        self.base: RunResult | None = None
        self.ctx = TechniqueContext(
            inputs.run,
            inputs.run_file.path,
            inputs.hardware,
            inputs.machine,
            inputs.workload,
            inputs.infos,
            self.extra,
            lambda graph: self.simulate(graph, "candidate"),
            self.cost_of,
        )
        # inputs.techniques are in the order they compose (techniques/order.py)
        self.rewriters = [t for t in inputs.techniques if isinstance(t, GraphRewriter)]
        self.placer = next(iter(placers(inputs.techniques)), None)
        self.tensor = tensor_plan(inputs.run, inputs.infos)

    def lowered(self, batch: int) -> OpGraph:
        """One replica's step at ``batch`` samples, lowered once per run (and reused by
        the process's next runs of the same workload objects, :func:`_reused`)."""
        if batch not in self._lowered:
            inputs = self.inputs
            words, strided = inputs.hardware.word_bytes, inputs.run.lowering.strided_dx
            lowering = inputs.run.lowering
            flash = lowering.compile is CompileMode.FUSED and (
                lowering.attention is AttentionKernels.FLASH
            )
            budget = AttentionBudget.of(inputs.hardware) if flash else None
            mode, plan, e = inputs.run.mode, self.tensor, expert_degree(inputs.run)
            split = (tensor_degree(inputs.run), plan is not None and plan.sequence)
            self._lowered[batch] = _reused(
                ("lowered", batch, words, strided, budget, mode, *split, e),
                (inputs.infos, inputs.workload),
                lambda: lower(
                    inputs.infos, inputs.workload, batch, words, strided, budget, mode, plan, e
                ),
            )
        return self._lowered[batch]

    def step_graph(self, kind: str, replace: Mapping[str, Rewrite] | None = None) -> StepGraph:
        """Makes one replica's step graph of ``kind`` for a batch size: the lowered step
        rewritten by every technique (or, for a technique named in ``replace``, by the
        pass given for it), each rewrite checked (:func:`graph_problems`), then its
        epilogues fused (``lowering.fuse_epilogues``, after every rewrite, as a
        compiler fuses the graph it is given)."""
        swap = replace or {}
        fusion = self.inputs.run.lowering.fuse_epilogues
        chains = self.inputs.run.lowering.compile is CompileMode.FUSED

        def make(batch: int) -> OpGraph:
            graph = self.lowered(batch)
            if kind == BASE:
                return fuse_epilogues(graph, fusion, chains)
            for technique in self.rewriters:
                rewrite = swap.get(technique.name)
                if rewrite is None:
                    graph = technique.rewrite_graph(graph, kind, self.ctx)
                else:
                    graph = rewrite(graph)
                problems = graph_problems(graph, tuple(model_inputs(self.inputs.workload)))
                if problems:
                    raise GraphError(
                        f"techniques.{technique.name} made an ill-formed {kind!r} step"
                        f" graph: {'; '.join(problems[:3])}"
                        + (f" (and {len(problems) - 3} more)" if len(problems) > 3 else "")
                    )
            return fuse_epilogues(graph, fusion, chains)

        return make

    def placed(self, kind: str, base: RunResult | None) -> OpGraph:
        """The step of ``kind`` on the processors, with its optimizer updates (the
        baseline's reused, :func:`_reused`, as it depends on no technique)."""
        if kind != BASE or (self.placer is not None and base is not None):
            return self.place(self.step_graph(kind), base)
        inputs = self.inputs
        run, hw = inputs.run, inputs.hardware
        key = (
            "placed",
            run.batch_size,
            hw.word_bytes,
            run.lowering,
            hw.buffers,
            run.assignment,
            run.data_parallel,
            hw.processors,
            run.optimizer,
            run.mode,
            run.parallel,
        )
        return _reused(
            key, (inputs.infos, inputs.workload), lambda: self.place(self.step_graph(kind), None)
        )

    def place(self, step: StepGraph, base: RunResult | None) -> OpGraph:
        """A step graph on the processors, with its optimizer updates: placed by the
        placing technique (given the baseline it balances on), or by ``assignment``."""
        run, hw = self.inputs.run, self.inputs.hardware
        copied = run.assignment is AssignmentPolicy.DATA_PARALLEL and self.placer is None
        ops = (lambda: len(step(self.local_batch()).ops)) if copied else None
        pipelines.refuse_copies(hw, self.inputs.source, ops)
        if self.placer is not None and base is not None:
            return self.placer.place(self.ctx, step, base)
        if expert_degree(run) > 1:
            return expert_parallel(step, run, hw)
        if zero_stage(run) > 0:
            return zero_placed(step, run, hw, tensor_degree(run))
        if self.tensor is not None:
            return tensor_parallel(
                step,
                run.batch_size,
                hw.processors,
                self.tensor.degree,
                run.optimizer,
                hw.word_bytes,
                run.data_parallel.bucket_bytes,
            )
        return placement.place(
            run.assignment,
            step,
            run.batch_size,
            hw.processors,
            run.optimizer,
            hw.word_bytes,
            run.data_parallel.bucket_bytes,
        )

    def local_batch(self) -> int:
        """The first data-parallel replica's samples (the batch, on one replica)."""
        run, hw = self.inputs.run, self.inputs.hardware
        if run.assignment is not AssignmentPolicy.DATA_PARALLEL:
            return run.batch_size
        return split_batch(run.batch_size, hw.processors // tensor_degree(run))[0]

    def memory(self) -> MemoryBreakdown:
        """What one processor holds for the run's step (the first step kind a technique
        rewrites, else the baseline), by class: the step graph of the first data-parallel
        replica's local batch, one rank's, before placement."""
        run, hw = self.inputs.run, self.inputs.hardware
        kinds = _kinds(self.inputs.techniques, self.ctx) if self.rewriters else [BASE]
        if pipelines.pipeline_degree(run) > 1:
            return pipeline_memo.pipeline_memory(self.inputs, kinds[0], self.step_graph(kinds[0]))
        step = self.step_graph(kinds[0])(self.local_batch())
        memory = memory_breakdown(step, run.optimizer, hw, run.data_parallel.bucket_bytes)
        return sharded_memory(memory, step.parameters, run, hw)

    def step(self, kind: str, result: RunResult, base: RunResult) -> SimulatedStep:
        """A simulated graph of ``kind`` and what one step of it costs: the placer's
        steady state, or its totals, then each sampled rewriter's mean over its draws."""
        cost = self.placer.step_cost(result) if self.placer is not None else StepCost.of(result)
        step = SimulatedStep(result, cost)
        for technique in self.inputs.techniques:
            if isinstance(technique, SampledRewriter):
                step = SimulatedStep(result, technique.expected_cost(self.ctx, base, kind, step))
        return step

    def cost_of(self, kind: str, replace: Mapping[str, Rewrite]) -> StepCost:
        """``TechniqueContext.cost_of``: a step of ``kind`` with the rewrites of the
        techniques ``replace`` names replaced, placed, simulated and costed as the
        run's own steps are (after the baseline)."""
        if self.base is None:
            raise SimulationError("a step's variant is costed before the baseline step")
        result = self.simulate(self.place(self.step_graph(kind, replace), self.base), kind)
        return self.step(kind, result, self.base).cost

    def forget(self) -> None:
        """Drop the simulated graphs kept for reuse (a placement's candidates)."""
        self._simulated.clear()

    def simulate(self, graph: OpGraph, step: str) -> RunResult:
        """Simulate a placed graph of a step kind (each graph object once).

        The baseline step runs on the plain hardware, without the techniques'
        units, masks or corrections.
        """
        cached = self._simulated.get(id(graph))
        if cached is not None and cached[0] is graph:
            result = cached[1]
            return dataclasses.replace(result, settings={**result.settings, "step": step})
        if self.progress is not None:
            self.progress(f"{step} step, {len(graph.ops):,} ops")
        if step == BASE:
            result = simulate_graph(self.inputs, graph, step)
        else:
            result = simulate_graph(self.inputs, graph, step, self.extra, self.inputs.techniques)
        self._simulated[id(graph)] = (graph, result)
        return result


REUSED_GRAPHS = 16
"""Lowered and placed baseline graphs a process keeps for its next runs."""


class _Reused:
    """The graphs :func:`_reused` keeps (least recently used dropped first), with the
    objects whose identity their keys hold."""

    graphs: ClassVar[OrderedDict[Hashable, tuple[tuple[object, ...], OpGraph]]] = OrderedDict()


def _reused(
    key: tuple[Hashable, ...], sources: tuple[object, ...], make: Callable[[], OpGraph]
) -> OpGraph:
    """The graph ``make()`` gives, made once per ``key`` and the identity of ``sources``
    (a run's workload and layer shapes): the points of a sweep that a worker loads
    through one :class:`~accelsim.driver.inputs.InputCache` share these objects when
    they share the workload, so a point that differs only in hardware that the graph
    does not depend on (``key`` holds every setting it does) reuses it.  Graphs are
    immutable; a run never changes one it is given."""
    full = (*key, *map(id, sources))
    graphs = _Reused.graphs
    known = graphs.get(full)
    if known is not None:
        graphs.move_to_end(full)
        return known[1]
    graph = make()
    graphs[full] = (sources, graph)  # holding the sources keeps their ids unique
    if len(graphs) > REUSED_GRAPHS:
        graphs.popitem(last=False)
    return graph


def simulate_graph(
    inputs: RunInputs,
    graph: OpGraph,
    step: str = BASE,
    extra_arrays: Sequence[ArrayUnit] = (),
    techniques: Sequence[Technique[Any]] = (),
) -> RunResult:
    """Simulate an op graph already placed on processors, on the run's hardware.

    ``extra_arrays`` are array units beyond the main one that its GEMMs may
    name; the sampled rewriters among ``techniques`` say what the folds of the GEMMs
    whose folds they skip or compact use.

    Raises:
        ConfigError: if the step's counts or cycles exceed
            :data:`~accelsim.errors.MAX_COUNT`, or its power the TDP
            (:func:`~accelsim.driver.step_result.step_result`).
        SimulationError: if the utilization leaves [0, 1] (a bug, never printed).
    """
    run, machine = inputs.run, inputs.machine
    hw = machine.hardware
    problems = limit_problems(graph, inputs.source, run.batch_size)
    if problems:
        raise ConfigError(problems)
    graph = keep_stash_on_chip(graph, hw.buffers.stash_bytes)
    folds = schedule(graph, (machine.array, *extra_arrays))
    for technique in techniques:
        if isinstance(technique, SampledRewriter):
            uses = technique.fold_uses(graph, folds)
            if uses:
                folds = folds.with_uses(uses)
    compiled = run.lowering.compile is CompileMode.FUSED
    costs = run_costs(inputs, graph, folds)
    try:
        trace = _simulated(graph, costs, inputs)
    except LimitError as exc:
        raise ConfigError.single(inputs.source, "", str(exc)) from None
    if compiled:
        trace = launched(trace, hw.timing.program_cycles())
    return step_result(inputs, graph, trace, step, extra_arrays, techniques)


def _simulated(graph: OpGraph, costs: OpCosts, inputs: RunInputs) -> Trace:
    """The step's trace: simulated on one processor of each role where the
    data-parallel replicas are symmetric and ``run.data_parallel.symmetry`` allows
    it (:mod:`accelsim.timing.symmetry`), else on every processor."""
    run, machine = inputs.run, inputs.machine
    if run.data_parallel.symmetry is not Symmetry.AUTO:
        return simulate(graph, costs, machine, run.timing.engine)
    found = unsymmetric(run) or symmetry.roles(graph, costs, machine)
    if isinstance(found, str):
        trace = simulate(graph, costs, machine, run.timing.engine)
        said = replicated(run, machine.processors, inputs.techniques)
        return dataclasses.replace(trace, unsymmetric=found) if said else trace
    return symmetry.simulate(graph, costs, machine, run.timing.engine, found)


@contextmanager
def _blamed(inputs: RunInputs) -> Iterator[None]:
    """A :class:`ConfigError` raised inside the block with each problem blamed where
    its value was written (:meth:`~accelsim.config.run_file.RunFile.blame`): a
    technique finds some only while simulating (a pipeline's DRAM capacity)."""
    try:
        yield
    except ConfigError as exc:
        raise type(exc)(inputs.run_file.blame(exc.problems)) from None


def simulate_run(inputs: RunInputs) -> RunResult:
    """Simulate the run's baseline training step (no technique applied): once, one
    replica standing for every processor, where that serves it
    (:func:`~accelsim.driver.replica.replica_result`)."""
    with _blamed(inputs):
        compact = _once(inputs, None)
        if compact is not None:
            return compact
        sim = _Run(inputs)
        return sim.simulate(sim.placed(BASE, None), BASE)


def simulate_training(inputs: RunInputs, progress: Progress | None = None) -> TrainingResult:
    """Simulate the baseline step and every step kind the run's techniques define,
    telling ``progress`` (if given) before each simulation what it simulates.

    Step kinds are those of the technique that defines kinds (ADA-GP's ``bp``
    and ``gp``), each rewritten by every technique and placed by the placing
    technique if there is one; without kinds, a technique that rewrites or
    places runs one step kind named after it (the first such, in the order
    techniques compose).  The training report's shared numbers are computed once,
    for these composed steps.

    Raises:
        ConfigError: for a problem found while simulating, blamed where its value was
            written (:meth:`~accelsim.config.run_file.RunFile.blame`).
    """
    with _blamed(inputs):
        return _training(inputs, progress)


def step_memory(inputs: RunInputs) -> MemoryBreakdown:
    """What one processor of the run holds in DRAM, by class, without simulating the
    step (:meth:`_Run.memory`)."""
    with _blamed(inputs):
        return _Run(inputs).memory()


def _checked_memory(sim: _Run) -> MemoryBreakdown | None:
    """The memory of a run with a parallel plan (and no pipeline, which keeps its own
    account), refused when it does not fit and the run says ``on_capacity: error``."""
    inputs = sim.inputs
    if inputs.run.parallel is None or sim.placer is not None:
        return None
    memory = sim.memory()
    if not memory.fits and inputs.run.on_capacity is OnCapacity.ERROR:
        raise ConfigError.single(
            inputs.source,
            "hardware.dram.capacity_gib",
            f"{memory_problem(memory)}; set on_capacity: report to simulate it anyway",
            inputs.hardware.dram.capacity_gib,
        )
    return memory


def _training(inputs: RunInputs, progress: Progress | None) -> TrainingResult:
    """:func:`simulate_training`, its problems as found."""
    sim = _Run(inputs, progress)
    memory = _checked_memory(sim)
    compact = _once(inputs, progress)
    if compact is not None:
        return TrainingResult(compact, {}, None, memory)
    if pipelines.pipeline_degree(inputs.run) > 1:  # composed from its passes
        kind = _kinds(inputs.techniques, sim.ctx)[0] if sim.rewriters else BASE
        tables, step = pipeline_memo.simulated_pipeline(
            inputs, kind, sim.step_graph(kind), sim.simulate
        )  # its tables: one micro-batch of every chunk simulated whole
        return TrainingResult(tables, {}, None, memory, pipeline=step)
    base = sim.simulate(sim.placed(BASE, None), BASE)
    sim.base = base
    if not inputs.techniques:
        return TrainingResult(base, {}, None, memory)
    match = iso_area_match(inputs)
    if match is not None:  # the techniques' steps on the shrunk hardware
        sim = _Run(dataclasses.replace(inputs, hardware=match.hardware), progress)
        sim.base = base
    steps: dict[str, SimulatedStep] = {}
    for kind in _kinds(inputs.techniques, sim.ctx):
        result = sim.simulate(sim.placed(kind, base), kind)
        sim.forget()
        steps[kind] = sim.step(kind, result, base)
    report = _report(inputs.techniques, sim.ctx, base, steps)
    return TrainingResult(base, {k: s.result for k, s in steps.items()}, report, memory, match)


def _once(inputs: RunInputs, progress: Progress | None) -> RunResult | None:
    """The baseline step simulated once, one replica standing for every processor
    (:func:`~accelsim.driver.replica.replica_result`), None where that does not serve
    the run."""
    from accelsim.driver.replica import replica_result  # it builds on this module's _Run

    found = replica_result(inputs, progress)
    return None if isinstance(found, str) else found


def _kinds(techniques: tuple[Technique[Any], ...], ctx: TechniqueContext) -> list[str]:
    definers = kind_definers(techniques)
    if definers:
        return list(definers[0].step_kinds(ctx))
    return [t.name for t in placers(techniques)] or [techniques[0].name]


def _report(
    techniques: tuple[Technique[Any], ...],
    ctx: TechniqueContext,
    base: RunResult,
    steps: Mapping[str, SimulatedStep],
) -> TrainingReport:
    """The training report: the steps' costs shared out over training by the plan of the
    technique that defines step kinds (or every step of the one kind), and each
    technique's section."""
    training = ctx.run.training
    definer = next(iter(kind_definers(techniques)), None)
    if definer is not None:
        shares = definer.kind_shares(ctx)
    else:
        (kind,) = steps
        shares = [{kind: 1.0}] * training.epochs
    plan = TrainingPlan(training.epochs, training.batches_per_epoch, tuple(shares))
    sections = [t.training(ctx, base, steps, plan) for t in techniques]
    costs = {BASE: StepCost.of(base), **{kind: s.cost for kind, s in steps.items()}}
    return TrainingReport.of([t.name for t in techniques], plan, costs, sections)


def rewritten_step(inputs: RunInputs, batch: int) -> OpGraph:
    """One replica's step graph of ``batch`` samples before placement, rewritten by the
    run's techniques (the first step kind they define, else the baseline), as
    :func:`step_memory` counts it."""
    with _blamed(inputs):
        sim = _Run(inputs)
        kinds = _kinds(inputs.techniques, sim.ctx) if sim.rewriters else [BASE]
        return sim.step_graph(kinds[0])(batch)
