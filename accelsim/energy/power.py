"""Power: a step's average and peak power, from its energy, its trace and its area.

Pure, like the energy model.  Dynamic power is the energy model's op energy (every
component but its ``static`` term) over time; leakage is the area model's, the
chip's area times the area table's leakage per mm² (:mod:`accelsim.energy.area`),
in place of the energy table's static term, which counts units rather than area.

* average: the step's dynamic energy over the step's time, plus leakage;
* peak: the most dynamic energy any window of ``power.peak_window_cycles`` cycles
  holds (windows back to back from cycle 0, the last one cut at the step's end),
  over that window's time, plus leakage (at most :data:`MAX_WINDOWS` windows: a
  longer step's are longer).  Each op's energy is spread evenly over
  its cycles (an op of no cycles: over one cycle at its start).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelsim.config.area import AreaTable, OnExceed
from accelsim.config.hardware import HardwareSpec
from accelsim.energy.area import AreaBreakdown
from accelsim.energy.model import EnergyBreakdown
from accelsim.energy.windows import peak_rate
from accelsim.timing.trace import Trace

PJ_PER_J = 1e12
MW_PER_W = 1e3
MAX_WINDOWS = 1_000_000
"""Most windows peak power is measured over: a longer step's windows are longer than
``power.peak_window_cycles``, as many cycles as it takes (``power_w`` records the
window used)."""


@dataclass(frozen=True)
class PowerFigures:
    """A step's power in W: average and peak (both with leakage), and their parts."""

    average_w: float
    peak_w: float
    dynamic_w: float
    leakage_w: float
    window_cycles: int
    tdp_w: float | None

    @property
    def over_tdp(self) -> bool:
        """Whether the average power exceeds the TDP (never without one)."""
        return self.tdp_w is not None and self.average_w > self.tdp_w

    def to_dict(self) -> dict[str, Any]:
        """``summary.json``'s ``power_w``."""
        return {
            "average": self.average_w,
            "peak": self.peak_w,
            "dynamic": self.dynamic_w,
            "leakage": self.leakage_w,
            "peak_window_cycles": self.window_cycles,
            "tdp": self.tdp_w,
            "over_tdp": self.over_tdp,
        }


def power(
    trace: Trace, energy: EnergyBreakdown, area: AreaBreakdown, hw: HardwareSpec, table: AreaTable
) -> PowerFigures:
    """The step's power on ``hw`` (``hw.power``'s window and TDP)."""
    hz = hw.clock_mhz * 1e6
    cycles = max(trace.total_cycles, 1)
    op_pj = energy.op_pj
    dynamic_w = energy.op_total_pj / PJ_PER_J / (cycles / hz)
    leakage_w = area.total_mm2 * table.leakage_mw_per_mm2.value / MW_PER_W
    window = max(hw.power.peak_window_cycles, -(-cycles // MAX_WINDOWS))
    peak_dynamic_w = peak_rate(trace, op_pj, window) / PJ_PER_J * hz
    return PowerFigures(
        average_w=dynamic_w + leakage_w,
        # never below the average (the windows' mean), float rounding aside
        peak_w=max(peak_dynamic_w, dynamic_w) + leakage_w,
        dynamic_w=dynamic_w,
        leakage_w=leakage_w,
        window_cycles=window,
        tdp_w=hw.power.tdp_w,
    )


def tdp_problem(figures: PowerFigures, on_exceed: OnExceed) -> str | None:
    """What to refuse a step for: its average power over the TDP with ``on_exceed:
    error`` (None when it keeps to it, or when the hardware only reports it)."""
    if not figures.over_tdp or on_exceed is OnExceed.REPORT:
        return None
    return (
        f"the step's average power, {figures.average_w:.4g} W, exceeds it; set"
        " power.on_exceed: report to simulate it anyway"
    )


@dataclass(frozen=True)
class Silicon:
    """What a step's hardware costs in silicon: its area and the step's power."""

    area: AreaBreakdown
    power: PowerFigures
