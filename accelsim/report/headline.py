"""A step's headline: the whole-step scalars a suite row and a sweep point's record hold.

:meth:`~accelsim.report.result.RunResult.step_summary` is built on it, so a record
made from the headline alone (a sweep point that keeps no files) holds the numbers
``summary.json`` would; it leaves out what only the summary has (the step's work by
stage and owner, its stash, groups and communication), worked out per op.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from accelsim.report.design_knobs import DesignKnobs
from accelsim.report.silicon import SiliconSummary


@dataclass(frozen=True)
class StepHeadline:
    """A simulated step's whole-step scalars, as its ``summary.json`` holds them.

    Attributes:
        workload: The workload's name.
        settings: The run settings the summary records (``step`` among them).
        batch_size: Samples in the step.
        design: The hardware's design keys.
        parameters: Parameters the step's graph trains.
        macs: MACs of every op.
        total_cycles: Cycles of the step.
        seconds: The step's time at the hardware's clock.
        utilization: Main-array MACs over the main arrays' peak for the step.
        array_stall_cycles: Cycles the main arrays' ops stalled, summed over ops.
        stall_fraction: Those stalls as a share of the used processors' steps.
        dram_read_bytes: Bytes read from DRAM.
        dram_write_bytes: Bytes written to DRAM.
        interconnect_bytes: Bytes sent over the interconnect.
        energy_pj: The step's energy.
        energy_by_component_pj: That energy by component.
        silicon: Its area, power and efficiency (None without a silicon model).
    """

    workload: str
    settings: Mapping[str, str]
    batch_size: int
    design: DesignKnobs
    parameters: int
    macs: int
    total_cycles: int
    seconds: float
    utilization: float
    array_stall_cycles: int
    stall_fraction: float
    dram_read_bytes: int
    dram_write_bytes: int
    interconnect_bytes: int
    energy_pj: float
    energy_by_component_pj: Mapping[str, float]
    silicon: SiliconSummary | None
