"""Systolic-array units: the main array of each processor, plus any a technique adds.

Every GEMM op names the unit it runs on (``GemmOp.unit``).  The main array is
``"array"``; a technique may add another per processor (ADA-GP's gradient
predictor, for example) with its own array shape, dataflow, precision and
operand buffers, sharing the processor's DRAM channel.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelsim.config.hardware import ArraySpec, HardwareSpec

MAIN_ARRAY = "array"


@dataclass(frozen=True)
class ArrayUnit:
    """One kind of systolic array, present once in every processor."""

    name: str
    array: ArraySpec
    ifmap_bytes: int
    filter_bytes: int
    ofmap_bytes: int

    @property
    def pes(self) -> int:
        return self.array.pes

    @property
    def sram_kib(self) -> float:
        return (self.ifmap_bytes + self.filter_bytes + self.ofmap_bytes) / 1024


def main_array(hw: HardwareSpec) -> ArrayUnit:
    """The processor's own array and operand buffers."""
    b = hw.buffers
    return ArrayUnit(MAIN_ARRAY, hw.array, b.ifmap_bytes, b.filter_bytes, b.ofmap_bytes)
