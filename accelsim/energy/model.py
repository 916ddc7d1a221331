"""Energy model: event counts x energy table, plus leakage x time.

Pure: it reads the trace's counters and an :class:`EnergyTable` and computes
nothing about timing.  Dynamic energy is attributed to ops (and so to phases
and layers); leakage is charged for the whole run on every processor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from accelsim.config.energy import EnergyTable
from accelsim.config.hardware import HardwareSpec
from accelsim.errors import ConfigError, Problem
from accelsim.mapping.units import MAIN_ARRAY, ArrayUnit, main_array
from accelsim.timing.unit_codes import UNIT_ARRAY, UNIT_VECTOR
from accelsim.timing.weights import processor_sum
from accelsim.units import BITS_PER_BYTE

if TYPE_CHECKING:
    from accelsim.timing.trace import Trace

COMPONENTS = (
    "mac",
    "vector",
    "sram_ifmap",
    "sram_filter",
    "sram_ofmap",
    "dram",
    "interconnect",
    "static",
)


@dataclass(frozen=True)
class EnergyBreakdown:
    """Energy in pJ: per op (dynamic), per op and component, and leakage;
    ``component_totals_pj`` each component's whole step (the ops' sum by default;
    :func:`estimate_energy` adds them up over the processors,
    :func:`~accelsim.timing.weights.processor_sum`) and ``dynamic_pj`` every op's."""

    op_component_pj: dict[str, np.ndarray]
    static_pj: float
    component_totals_pj: dict[str, float] | None = None
    dynamic_pj: float | None = None

    @property
    def op_pj(self) -> np.ndarray:
        return sum(self.op_component_pj.values(), np.zeros_like(self.op_component_pj["mac"]))

    @property
    def by_component_pj(self) -> dict[str, float]:
        totals = self.component_totals_pj
        if totals is None:
            totals = {name: float(v.sum()) for name, v in self.op_component_pj.items()}
        return {**totals, "static": self.static_pj}

    @property
    def op_total_pj(self) -> float:
        """The dynamic energy of the whole step."""
        return float(self.op_pj.sum()) if self.dynamic_pj is None else self.dynamic_pj

    @property
    def total_pj(self) -> float:
        return self.op_total_pj + self.static_pj


def check_table(
    table: EnergyTable, hw: HardwareSpec, table_file: str, extra_arrays: Sequence[ArrayUnit] = ()
) -> None:
    """Check that ``table`` prices every precision that ``hw`` (and extra arrays) use.

    Raises:
        ConfigError: naming the missing entries.
    """
    problems = []
    for unit in (main_array(hw), *extra_arrays):
        if unit.array.precision not in table.mac_pj:
            problems.append(
                Problem(
                    table_file,
                    "mac_pj",
                    f"no entry for the {_which(unit)} precision of hardware '{hw.name}'",
                    unit.array.precision.value,
                )
            )
    if hw.vector_unit.precision not in table.vector_op_pj:
        problems.append(
            Problem(
                table_file,
                "vector_op_pj",
                f"no entry for the vector-unit precision of hardware '{hw.name}'",
                hw.vector_unit.precision.value,
            )
        )
    if problems:
        raise ConfigError(problems)


def _which(unit: ArrayUnit) -> str:
    return "array" if unit.name == MAIN_ARRAY else f"'{unit.name}' array"


def sram_pj_per_byte(table: EnergyTable, capacity_kib: float, write: bool) -> float:
    """Access energy per byte of an SRAM of ``capacity_kib``."""
    return table.sram.pj_per_byte(capacity_kib, write)


def static_power_mw(
    table: EnergyTable, hw: HardwareSpec, extra_arrays: Sequence[ArrayUnit] = ()
) -> float:
    """Leakage of the whole accelerator (all processors, all units) in mW."""
    s = table.static
    b = hw.buffers
    per_processor = (
        hw.array.pes * s.pe_mw
        + (b.ifmap_kib + b.filter_kib + b.ofmap_kib + b.stash_kib) * s.sram_mw_per_kib
        + hw.vector_unit.lanes * s.vector_lane_mw
        + sum(u.pes * s.pe_mw + u.sram_kib * s.sram_mw_per_kib for u in extra_arrays)
    )
    return hw.processors * per_processor


def estimate_energy(trace: Trace, hw: HardwareSpec, table: EnergyTable) -> EnergyBreakdown:
    """Price every counted event of ``trace`` with ``table``.

    The main array and the vector unit (which works through the main array's
    ofmap buffer) give ``mac``, ``vector`` and ``sram_*``; every extra array unit
    ``U`` gives ``U_mac`` and ``U_sram`` rows of its own.
    """
    c = trace.costs

    def sram(capacity_bytes: int, reads: np.ndarray, writes: np.ndarray) -> np.ndarray:
        kib = capacity_bytes / 1024
        return reads * sram_pj_per_byte(table, kib, write=False) + writes * sram_pj_per_byte(
            table, kib, write=True
        )

    main, *extra = c.arrays or (main_array(hw),)
    on_main = (c.unit == UNIT_ARRAY) | (c.unit == UNIT_VECTOR)
    dram_read = c.dram_read_bytes * BITS_PER_BYTE * table.dram_read_pj_per_bit
    dram_write = c.dram_ofmap_write_bytes * BITS_PER_BYTE * table.dram_write_pj_per_bit
    components = {
        "mac": np.where(c.unit == UNIT_ARRAY, c.macs, 0) * table.mac_pj[main.array.precision],
        "vector": c.vector_ops * table.vector_op_pj[hw.vector_unit.precision],
        "sram_ifmap": on_main
        * sram(main.ifmap_bytes, c.sram_ifmap_read_bytes, c.sram_ifmap_write_bytes),
        "sram_filter": on_main
        * sram(main.filter_bytes, c.sram_filter_read_bytes, c.sram_filter_write_bytes),
        "sram_ofmap": on_main
        * sram(main.ofmap_bytes, c.sram_ofmap_read_bytes, c.sram_ofmap_write_bytes),
        "dram": dram_read + dram_write,
        "interconnect": c.interconnect_bytes * BITS_PER_BYTE * table.interconnect_pj_per_bit,
    }
    for unit in extra:
        mine = c.unit == c.unit_names.index(unit.name)
        components[f"{unit.name}_mac"] = mine * c.macs * table.mac_pj[unit.array.precision]
        components[f"{unit.name}_sram"] = mine * (
            sram(unit.ifmap_bytes, c.sram_ifmap_read_bytes, c.sram_ifmap_write_bytes)
            + sram(unit.filter_bytes, c.sram_filter_read_bytes, c.sram_filter_write_bytes)
            + sram(unit.ofmap_bytes, c.sram_ofmap_read_bytes, c.sram_ofmap_write_bytes)
        )
    seconds = trace.total_cycles / (hw.clock_mhz * 1e6)
    static_pj = static_power_mw(table, hw, extra) * 1e-3 * seconds * 1e12
    per_op = {k: np.asarray(v, np.float64) for k, v in components.items()}
    energy = EnergyBreakdown(op_component_pj=per_op, static_pj=static_pj)
    return replace(
        energy,
        component_totals_pj={k: processor_sum(trace, v) for k, v in per_op.items()},
        dynamic_pj=processor_sum(trace, energy.op_pj),
    )
