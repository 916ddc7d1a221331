"""Energy model: event counts x energy table, plus leakage x time.

Pure: it reads the trace's counters and an :class:`EnergyTable` and computes
nothing about timing.  Dynamic energy is attributed to ops (and so to phases
and layers); leakage is charged for the whole run on every processor.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accelsim.config.energy import EnergyTable
from accelsim.config.hardware import HardwareSpec
from accelsim.errors import ConfigError, Problem
from accelsim.timing.trace import Trace
from accelsim.units import BITS_PER_BYTE

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
    """Energy in pJ: per op (dynamic), per op and component, and leakage."""

    op_component_pj: dict[str, np.ndarray]
    static_pj: float

    @property
    def op_pj(self) -> np.ndarray:
        return sum(self.op_component_pj.values(), np.zeros_like(self.op_component_pj["mac"]))

    @property
    def by_component_pj(self) -> dict[str, float]:
        totals = {name: float(v.sum()) for name, v in self.op_component_pj.items()}
        totals["static"] = self.static_pj
        return totals

    @property
    def total_pj(self) -> float:
        return float(self.op_pj.sum()) + self.static_pj


def check_table(table: EnergyTable, hw: HardwareSpec, table_file: str) -> None:
    """Check that ``table`` prices every precision that ``hw`` uses.

    Raises:
        ConfigError: naming the missing entries.
    """
    problems = []
    if hw.array.precision not in table.mac_pj:
        problems.append(
            Problem(
                table_file,
                "mac_pj",
                f"no entry for the array precision of hardware '{hw.name}'",
                hw.array.precision.value,
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


def sram_pj_per_byte(table: EnergyTable, capacity_kib: float, write: bool) -> float:
    """Access energy per byte of an SRAM of ``capacity_kib``."""
    sram = table.sram
    base = sram.write_pj_per_byte if write else sram.read_pj_per_byte
    return float(base * (capacity_kib / sram.reference_kib) ** sram.capacity_exponent)


def static_power_mw(table: EnergyTable, hw: HardwareSpec) -> float:
    """Leakage of the whole accelerator (all processors) in mW."""
    s = table.static
    b = hw.buffers
    per_processor = (
        hw.array.rows * hw.array.cols * s.pe_mw
        + (b.ifmap_kib + b.filter_kib + b.ofmap_kib + b.stash_kib) * s.sram_mw_per_kib
        + hw.vector_unit.lanes * s.vector_lane_mw
    )
    return hw.processors * per_processor


def estimate_energy(trace: Trace, hw: HardwareSpec, table: EnergyTable) -> EnergyBreakdown:
    """Price every counted event of ``trace`` with ``table``."""
    c = trace.costs
    b = hw.buffers

    def sram(capacity_kib: float, reads: np.ndarray, writes: np.ndarray) -> np.ndarray:
        return reads * sram_pj_per_byte(
            table, capacity_kib, write=False
        ) + writes * sram_pj_per_byte(table, capacity_kib, write=True)

    dram_read = c.dram_read_bytes * BITS_PER_BYTE * table.dram_read_pj_per_bit
    dram_write = c.dram_ofmap_write_bytes * BITS_PER_BYTE * table.dram_write_pj_per_bit
    components = {
        "mac": c.macs * table.mac_pj[hw.array.precision],
        "vector": c.vector_ops * table.vector_op_pj[hw.vector_unit.precision],
        "sram_ifmap": sram(b.ifmap_kib, c.sram_ifmap_read_bytes, c.sram_ifmap_write_bytes),
        "sram_filter": sram(b.filter_kib, c.sram_filter_read_bytes, c.sram_filter_write_bytes),
        "sram_ofmap": sram(b.ofmap_kib, c.sram_ofmap_read_bytes, c.sram_ofmap_write_bytes),
        "dram": dram_read + dram_write,
        "interconnect": c.interconnect_bytes * BITS_PER_BYTE * table.interconnect_pj_per_bit,
    }
    seconds = trace.total_cycles / (hw.clock_mhz * 1e6)
    static_pj = static_power_mw(table, hw) * 1e-3 * seconds * 1e12
    return EnergyBreakdown(
        op_component_pj={k: np.asarray(v, np.float64) for k, v in components.items()},
        static_pj=static_pj,
    )
