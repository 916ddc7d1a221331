"""Energy table spec: pJ per event for each component, loaded from ``configs/energy/``.

A table is data, not code: the numbers and their sources live in the YAML file
(one ``sources`` entry per cited paper or tool).  :mod:`accelsim.energy.model`
multiplies these by the simulator's event counts.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from accelsim.config.base import (
    Name,
    NonNegativeFloat,
    PositiveFloat,
    PrecisionField,
    Spec,
)


class SramEnergySpec(Spec):
    """SRAM access energy per byte, scaled with capacity.

    ``E(C) = pj_per_byte_at_reference * (C / reference_kib) ** capacity_exponent``.
    """

    reference_kib: PositiveFloat
    read_pj_per_byte: PositiveFloat
    write_pj_per_byte: PositiveFloat
    capacity_exponent: NonNegativeFloat


class StaticPowerSpec(Spec):
    """Leakage power, charged for the whole run time of every processor."""

    pe_mw: NonNegativeFloat = 0.0
    sram_mw_per_kib: NonNegativeFloat = 0.0
    vector_lane_mw: NonNegativeFloat = 0.0


class EnergyTable(Spec):
    """One technology's energy numbers (pJ per event, mW for leakage)."""

    name: Name
    unit: Literal["pJ"]
    sources: list[Name] = Field(min_length=1)
    mac_pj: dict[PrecisionField, PositiveFloat]
    vector_op_pj: dict[PrecisionField, PositiveFloat]
    sram: SramEnergySpec
    dram_read_pj_per_bit: PositiveFloat
    dram_write_pj_per_bit: PositiveFloat
    interconnect_pj_per_bit: NonNegativeFloat
    static: StaticPowerSpec = Field(default_factory=StaticPowerSpec)
