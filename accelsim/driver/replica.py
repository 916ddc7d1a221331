"""A symmetric data-parallel step placed, costed and simulated once, one replica
standing for every processor (:mod:`accelsim.mapping.replication`,
:mod:`accelsim.timing.replica`): ``processors x ops`` work done as ``ops``.

:func:`simulate_replica_step` gives processor 0's ops and the all-reduces the costs
and cycles the step of every replica gives them (``symmetry: full``), and
:func:`replica_totals` the step's totals (MACs, vector ops, bytes moved) expanded by
the count.  ``accelsim run`` does not take this path yet: its reports read every
processor's ops.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelsim.config.enums import CompileMode
from accelsim.driver.costing import run_costs
from accelsim.driver.inputs import RunInputs
from accelsim.driver.limits import QUANTITIES, limit_problems, op_counts
from accelsim.driver.run import _Run
from accelsim.errors import ConfigError
from accelsim.graph.ops import CommOp
from accelsim.mapping.replication import Replicated, replicated, replication_problem
from accelsim.mapping.residency import keep_stash_on_chip
from accelsim.mapping.schedule import schedule
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
