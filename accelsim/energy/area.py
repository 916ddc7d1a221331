"""Area model: a design's silicon area per component, counts x the area table.

Pure: it reads a hardware spec, the array units techniques add and the SRAM they
add beside them, and an :class:`AreaTable` scaled to the chip's node
(``hardware.technology_nm``).  Every component is the whole accelerator's (all its
processors); :attr:`AreaBreakdown.per_processor_mm2` is one processor's share of
what each processor holds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from accelsim.config.area import AreaTable
from accelsim.config.base import Precision
from accelsim.config.dram import DramSharing
from accelsim.config.hardware import HardwareSpec
from accelsim.mapping.units import ArrayUnit, main_array
from accelsim.network.topology import Network, Switch

UM2_PER_MM2 = 1e6
WORD_BITS = {
    Precision.INT8: 8,
    Precision.FP8: 8,
    Precision.INT16: 16,
    Precision.FP16: 16,
    Precision.BF16: 16,
    Precision.FP32: 32,
}
"""Bits of an operand word at each precision."""
CHIP_LEVEL = ("dram_phy", "link_phy")
"""Components that are not repeated in every processor as a whole: the DRAM
interface (one per memory) and the links (counted link by link)."""


@dataclass(frozen=True)
class AreaBreakdown:
    """Area in mm² of each component of the whole accelerator, at its node."""

    components_mm2: Mapping[str, float]
    processors: int
    node_nm: int

    @property
    def total_mm2(self) -> float:
        return math.fsum(self.components_mm2.values())

    @property
    def per_processor_mm2(self) -> float:
        """One processor's area: its share of every component."""
        return self.total_mm2 / self.processors

    def to_dict(self) -> dict[str, float]:
        """``summary.json``'s ``area_mm2``: ``total``, ``per_processor``, each component."""
        return {
            "total": self.total_mm2,
            "per_processor": self.per_processor_mm2,
            **self.components_mm2,
        }


def sram_mm2(table: AreaTable, kib: float) -> float:
    """Area at the table's node of one buffer of ``kib`` KiB: macros of at most the
    largest the fit covers, each interpolated on log-log axes between the table's."""
    if kib <= 0:
        return 0.0
    macros = table.sram.macros
    count = max(1, math.ceil(kib / macros[-1].kib))
    size = kib / count
    upper = next((i for i, m in enumerate(macros) if m.kib >= size), len(macros) - 1)
    lo, hi = macros[max(upper - 1, 0)], macros[max(upper, 1)]
    slope = math.log(hi.mm2 / lo.mm2) / math.log(hi.kib / lo.kib)
    return float(count * lo.mm2 * (size / lo.kib) ** slope)


def pe_um2(table: AreaTable, precision: Precision) -> float:
    """One PE at the table's node: its MAC, two operand registers and an accumulator."""
    bits = 2 * WORD_BITS[precision] + table.accumulator_bits
    return table.mac_um2[precision].value + bits * table.register_um2_per_bit.value


def _array_mm2(table: AreaTable, unit: ArrayUnit, prefix: str) -> dict[str, float]:
    pes = unit.pes
    precision = unit.array.widest_precision
    registers = 2 * WORD_BITS[precision] + table.accumulator_bits
    bit_um2 = table.register_um2_per_bit.value
    parts = {
        f"{prefix}_macs": pes * table.mac_um2[precision].value / UM2_PER_MM2,
        f"{prefix}_registers": pes * registers * bit_um2 / UM2_PER_MM2,
    }
    scratchpad_bits = 8 * unit.array.pe_scratchpad_bytes
    if scratchpad_bits:
        parts[f"{prefix}_scratchpads"] = pes * scratchpad_bits * bit_um2 / UM2_PER_MM2
    return parts


def _processor_mm2(
    hw: HardwareSpec,
    table: AreaTable,
    extra_arrays: Sequence[ArrayUnit],
    extra_sram_kib: Mapping[str, float],
) -> dict[str, float]:
    """One processor's logic and SRAM at the table's node, by component."""
    main = main_array(hw)
    b = hw.buffers
    parts = _array_mm2(table, main, "array")
    parts |= {
        f"sram_{name}": sram_mm2(table, kib)
        for name, kib in (
            ("ifmap", b.ifmap_kib),
            ("filter", b.filter_kib),
            ("ofmap", b.ofmap_kib),
            ("stash", b.stash_kib),
        )
        if kib > 0
    }
    lanes = hw.vector_unit.lanes
    parts["vector_unit"] = lanes * pe_um2(table, hw.vector_unit.precision) / UM2_PER_MM2
    for unit in extra_arrays:
        parts |= _array_mm2(table, unit, unit.name)
        parts[f"{unit.name}_sram"] = sum(
            sram_mm2(table, size / 1024)
            for size in (unit.ifmap_bytes, unit.filter_bytes, unit.ofmap_bytes)
        )
    parts |= {f"{name}_sram": sram_mm2(table, kib) for name, kib in extra_sram_kib.items()}
    return parts


def dram_gb_s(hw: HardwareSpec) -> float:
    """The DRAM bandwidth of the whole accelerator in GB/s (0 for ideal DRAM: no PHY
    is modelled for an infinite bandwidth)."""
    dram = hw.dram
    per_memory = dram.bandwidth_bytes_per_cycle * dram.channels
    if not math.isfinite(per_memory):
        return 0.0
    memories = hw.processors if dram.sharing is DramSharing.PER_PROCESSOR else 1
    return memories * per_memory * hw.clock_mhz * 1e6 / 1e9


def link_gb_s(hw: HardwareSpec) -> float:
    """The bandwidth of the modelled processors' outgoing links together in GB/s: each
    processor's links to its neighbours in the interconnect's topology, whether or not
    they are modelled (a chip of a 4x4x4 torus modelled alone keeps its six links); a
    switch's own links are not a processor's."""
    network = Network.of(hw.interconnect, hw.processors)
    per_cycle = math.fsum(
        network.bandwidth(link)
        for link in network.links()
        if not isinstance(link.source, Switch) and link.source < hw.processors
    )
    return per_cycle * hw.clock_mhz * 1e6 / 1e9


def area(
    hw: HardwareSpec,
    table: AreaTable,
    extra_arrays: Sequence[ArrayUnit] = (),
    extra_sram_kib: Mapping[str, float] = {},
) -> AreaBreakdown:
    """The area of ``hw`` with the array units and the SRAM (name -> KiB, per processor)
    techniques add, at ``hw.technology_nm``: the logic and SRAM scaled from the table's
    node by its cited factor, wiring a fraction of them, the PHYs unscaled."""
    scale = table.node_scaling[hw.technology_nm]
    parts = {
        name: hw.processors * mm2 * scale
        for name, mm2 in _processor_mm2(hw, table, extra_arrays, extra_sram_kib).items()
    }
    parts["wiring"] = table.wiring_fraction.value * math.fsum(parts.values())
    parts["dram_phy"] = dram_gb_s(hw) * table.dram_phy_mm2_per_gb_s.value
    parts["link_phy"] = link_gb_s(hw) * table.link_phy_mm2_per_gb_s.value
    return AreaBreakdown(parts, hw.processors, hw.technology_nm)
