"""A placed step's ops costed by the run's timing settings."""

from __future__ import annotations

from accelsim.config.enums import CompileMode
from accelsim.driver.inputs import RunInputs
from accelsim.graph.ops import OpGraph
from accelsim.mapping.schedule import FoldSchedule
from accelsim.timing.costs import OpCosts, op_costs


def run_costs(inputs: RunInputs, graph: OpGraph, folds: FoldSchedule) -> OpCosts:
    """The costs of ``graph``'s ops (``folds`` their GEMMs' schedule) on the run's
    machine, by its ``timing`` settings, per kernel when the step is compiled
    (``lowering.compile: fused``)."""
    timing = inputs.run.timing
    return op_costs(
        graph,
        folds,
        inputs.machine,
        timing.convention,
        timing.psums,
        timing.chunks_per_op,
        fold_overlap=timing.fold_overlap,
        group_cycles=timing.group_cycles,
        per_kernel=inputs.run.lowering.compile is CompileMode.FUSED,
        energy=inputs.energy,
    )
