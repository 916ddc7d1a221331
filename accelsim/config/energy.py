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

    reference_kib: Kib = Field(description="Capacity at which the per-byte energies apply.")
    read_pj_per_byte: Picojoules = Field(
        description="Energy of reading one byte from an SRAM of reference_kib."
    )
    write_pj_per_byte: Picojoules = Field(
        description="Energy of writing one byte to an SRAM of reference_kib."
    )
    # Published fits are 0.5 to 1; 4 already makes a 1 TiB SRAM's energy astronomical.
    capacity_exponent: Annotated[float, Field(ge=0, le=4, allow_inf_nan=False)] = Field(
        description="Exponent of the capacity scaling: a buffer of C KiB costs"
        " E_ref * (C / reference_kib) ** capacity_exponent per byte."
    )

    def pj_per_byte(self, capacity_kib: float, write: bool) -> float:
        """Access energy per byte of an SRAM of ``capacity_kib``."""
        base = self.write_pj_per_byte if write else self.read_pj_per_byte
        return float(base * (capacity_kib / self.reference_kib) ** self.capacity_exponent)


class StaticPowerSpec(Spec):
    """Leakage power, charged for the whole run time of every processor."""

    pe_mw: NonNegativeFloat = Field(default=0.0, description="Leakage of one PE of the array.")
    sram_mw_per_kib: NonNegativeFloat = Field(
        default=0.0, description="Leakage of one KiB of on-chip SRAM."
    )
    vector_lane_mw: NonNegativeFloat = Field(
        default=0.0, description="Leakage of one vector-unit lane."
    )


class EnergyTable(Spec):
    """One technology's energy numbers (pJ per event, mW for leakage)."""

    name: Name = Field(description="The table's name (technology node and source).")
    unit: Literal["pJ"] = Field(description="The energy unit of every number in the file.")
    sources: list[Name] = Field(
        min_length=1, description="The papers or tools each number comes from, one per entry."
    )
    mac_pj: dict[PrecisionField, Picojoules] = Field(
        description="Energy of one MAC on the array, per precision."
    )
    vector_op_pj: dict[PrecisionField, Picojoules] = Field(
        description="Energy of one vector-lane operation, per precision."
    )
    sram: SramEnergySpec = Field(description="SRAM access energy and its capacity scaling.")
    dram_read_pj_per_bit: Picojoules = Field(description="Energy of reading one bit from DRAM.")
    dram_write_pj_per_bit: Picojoules = Field(description="Energy of writing one bit to DRAM.")
    interconnect_pj_per_bit: NonNegativePicojoules = Field(
        description="Energy of moving one bit over a processor link."
    )
    static: StaticPowerSpec = Field(
        default_factory=StaticPowerSpec,
        description="Leakage power, charged for the whole run on every processor.",
    )
