"""A simulated step's record: its trace priced (energy, area, power) and kept with the
graph and the settings it ran under, as a :class:`~accelsim.report.result.RunResult`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelsim.config.enums import CompileMode
from accelsim.driver.inputs import RunInputs
from accelsim.driver.settings import step_settings
from accelsim.driver.silicon import silicon_of
from accelsim.energy.model import estimate_energy
from accelsim.errors import SimulationError
from accelsim.graph.ops import OpGraph
from accelsim.mapping.units import ArrayUnit
from accelsim.report.result import RunResult
from accelsim.techniques.base import Technique
from accelsim.timing.trace import Trace


def step_result(
    inputs: RunInputs,
    graph: OpGraph,
    trace: Trace,
    step: str,
    extra_arrays: Sequence[ArrayUnit] = (),
    techniques: Sequence[Technique[Any]] = (),
) -> RunResult:
    """The record of ``graph``'s step of kind ``step`` simulated as ``trace``.

    Raises:
        ConfigError: when the step's average power exceeds the TDP and the hardware
            says ``power.on_exceed: error``.
        SimulationError: if the utilization leaves [0, 1] (a bug, never printed).
    """
    run, machine = inputs.run, inputs.machine
    hw = machine.hardware
    energy = estimate_energy(trace, hw, inputs.energy)
    silicon = silicon_of(inputs.source, hw, trace, energy, extra_arrays, techniques)
    compiled = run.lowering.compile is CompileMode.FUSED
    settings = step_settings(run, hw, step, trace.engine, compiled)
    workload = inputs.workload
    result = RunResult(
        run.name,
        workload.name,
        run.batch_size,
        settings,
        machine,
        graph,
        trace,
        energy,
        workload.source,
        tuple(workload.notes or ()),
        silicon,
    )
    utilization = result.utilization()
    if not 0 <= utilization <= 1:
        raise SimulationError(f"{step} step: utilization {utilization!r} outside [0, 1]")
    return result
