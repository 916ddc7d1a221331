"""A symmetric data-parallel step placed, costed and simulated once, one replica
standing for every processor (:mod:`accelsim.mapping.replication`,
:mod:`accelsim.timing.replica`): ``processors x ops`` work done as ``ops``.

:func:`simulate_replica_step` gives processor 0's ops and the all-reduces the costs
and cycles the step of every replica gives them (``symmetry: full``), and
:func:`replica_totals` the step's totals (MACs, vector ops, bytes moved) expanded by
the count.  :func:`replica_result` is ``accelsim run``'s baseline step when the
path serves it (:func:`accelsim.driver.run.simulate_training` takes it first): the
step's record with every op but a collective standing for every processor's
(:attr:`~accelsim.timing.trace.Trace.replicas`), which the reports add up.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from accelsim.config.enums import CompileMode
from accelsim.config.hardware import MAX_COPIED_PROCESSORS
from accelsim.driver.costing import run_costs
from accelsim.driver.inputs import RunInputs
from accelsim.driver.limits import QUANTITIES, limit_problems, op_counts
from accelsim.driver.pipeline import pipeline_degree
from accelsim.driver.run import Progress, _Run
from accelsim.driver.step_result import step_result
from accelsim.errors import ConfigError, LimitError
from accelsim.graph.ops import CommOp
from accelsim.mapping.replication import Replicated, replicated, replication_problem
from accelsim.mapping.residency import keep_stash_on_chip
from accelsim.mapping.schedule import schedule
from accelsim.report.result import RunResult
from accelsim.techniques.base import BASE
from accelsim.timing.costs import OpCosts
from accelsim.timing.replica import replica_problem, simulate_replica
from accelsim.timing.trace import Trace, launched


@dataclass(frozen=True)
class ReplicaStep:
    """A data-parallel step simulated once: ``replicated`` (processor 0's replica,
    its updates and the all-reduces, standing for ``replicated.count`` processors),
    its ops' ``costs`` and its ``trace`` (every processor's timing processor 0's)."""

    replicated: Replicated
    costs: OpCosts
    trace: Trace


def simulate_replica_step(inputs: RunInputs) -> ReplicaStep | str:
    """The run's baseline step (one replica's step graph lowered as ``accelsim run``
    lowers it) placed once and simulated on processor 0, or why it cannot be
    (:func:`~accelsim.mapping.replication.replication_problem` from the specs, then
    :func:`~accelsim.timing.replica.replica_problem` on the placed graph).

    Raises:
        ConfigError: if an op's counts exceed :data:`~accelsim.errors.MAX_COUNT`.
    """
    run, machine = inputs.run, inputs.machine
    hw = machine.hardware
    why = replication_problem(run, hw)
    if why:
        return why
    placed = replicated(_Run(inputs).step_graph(BASE), run, hw)
    problems = limit_problems(placed.graph, inputs.source, run.batch_size)
    if problems:
        raise ConfigError(problems)
    graph = keep_stash_on_chip(placed.graph, hw.buffers.stash_bytes)
    why = replica_problem(graph, machine)
    if why:
        return why
    costs = run_costs(inputs, graph, schedule(graph, (machine.array,)))
    trace = simulate_replica(graph, costs, machine, run.timing.engine)
    if run.lowering.compile is CompileMode.FUSED:
        trace = launched(trace, hw.timing.program_cycles())
    return ReplicaStep(Replicated(graph, placed.count), costs, trace)


def replica_totals(step: Replicated) -> dict[str, int]:
    """The whole step's MACs, vector ops and bytes read and written
    (:func:`~accelsim.driver.limits.step_totals` of every replica's graph): each op of
    the replica ``count`` times, each all-reduce (every processor's already) once."""
    totals = [0] * len(QUANTITIES)
    for op in step.graph.ops:
        times = 1 if isinstance(op, CommOp) else step.count
        for i, value in enumerate(op_counts(op)):
            totals[i] += value * times
    return dict(zip(QUANTITIES, totals, strict=True))


def replica_result(inputs: RunInputs, progress: Progress | None = None) -> RunResult | str:
    """The run's baseline step simulated once (:func:`simulate_replica_step`) as its
    record, or why it cannot be, telling ``progress`` (if given) before it simulates.

    Raises:
        ConfigError: for a run of more than
            :data:`~accelsim.config.hardware.MAX_COPIED_PROCESSORS` processors (and no
            pipeline) that cannot be simulated once, with the reason; if an op's counts
            or the step's cycles exceed :data:`~accelsim.errors.MAX_COUNT`.
    """
    run, hw = inputs.run, inputs.hardware
    why = replication_problem(run, hw)
    if not why:
        if progress is not None:
            progress(f"{BASE} step, one replica standing for {hw.processors:,} processors")
        try:
            step = simulate_replica_step(inputs)
        except LimitError as exc:
            raise ConfigError.single(inputs.source, "", str(exc)) from None
        if not isinstance(step, str):
            trace = replace(step.trace, replicas=step.replicated.count)
            return step_result(inputs, step.replicated.graph, trace, BASE)
        why = step
    if hw.processors > MAX_COPIED_PROCESSORS and pipeline_degree(run) <= 1:
        raise ConfigError.single(
            inputs.source,
            "hardware.processors",
            f"above {MAX_COPIED_PROCESSORS:,} only with parallel.pipeline above 1 or for a"
            f" data-parallel step simulated once, one replica standing for every processor,"
            f" and this one cannot be: {why}",
            hw.processors,
        )
    return why
