"""Energy table spec: pJ per event for each component, loaded from ``configs/energy/``.

A table is data, not code: the numbers and their sources live in the YAML file
(one ``sources`` entry per cited paper or tool).  :mod:`accelsim.energy.model`
multiplies these by the simulator's event counts.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from accelsim.config.base import (
    Kib,
    Name,
    NonNegativeFloat,
    NonNegativePicojoules,
    Picojoules,
    PrecisionField,
    Spec,
)


class SramEnergySpec(Spec):
    """SRAM access energy per byte, scaled with capacity.

    ``E(C) = pj_per_byte_at_reference * (C / reference_kib) ** capacity_exponent``.
    """

    reference_kib: Kib
    read_pj_per_byte: Picojoules
    write_pj_per_byte: Picojoules
    # Published fits are 0.5 to 1; 4 already makes a 1 TiB SRAM's energy astronomical.
    capacity_exponent: Annotated[float, Field(ge=0, le=4, allow_inf_nan=False)]


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
    mac_pj: dict[PrecisionField, Picojoules]
    vector_op_pj: dict[PrecisionField, Picojoules]
    sram: SramEnergySpec
    dram_read_pj_per_bit: Picojoules
    dram_write_pj_per_bit: Picojoules
    interconnect_pj_per_bit: NonNegativePicojoules
    static: StaticPowerSpec = Field(default_factory=StaticPowerSpec)
