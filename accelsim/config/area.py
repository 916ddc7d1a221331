"""Area table spec: silicon area per component at a technology node, loaded from
``configs/area/``, and the hardware file's ``power`` section.

A table is data, not code, like an energy table: every coefficient carries its
value, the node it was published at and the key of its source in ``sources``;
``node_scaling`` holds the cited factor that takes an area from the table's node to
another.  :mod:`accelsim.energy.area` multiplies the coefficients by a design's
counts.
"""

from __future__ import annotations

import itertools
from enum import Enum
from typing import Annotated, Literal

from pydantic import Field, model_validator

from accelsim.config.base import (
    Kib,
    Name,
    PositiveFloat,
    PrecisionField,
    RuleViolation,
    Spec,
)

NodeNm = Annotated[int, Field(gt=0, le=1000)]
"""A technology node in nm."""


class Coefficient(Spec):
    """One published number: its value, the node it was published at, its source."""

    value: Annotated[float, Field(ge=0, le=1e12, allow_inf_nan=False)] = Field(
        description="The number, in the unit its key names."
    )
    node_nm: NodeNm = Field(description="The technology node the value was published at.")
    source: Name = Field(description="The key of its source in the table's sources.")
    note: str = Field(default="", description="How the value was read or derived.")


class SramMacro(Spec):
    """One SRAM macro of the fit: its capacity and area."""

    kib: Kib = Field(description="Capacity of the macro, KiB.")
    mm2: PositiveFloat = Field(description="Area of the macro, mm².")


class SramAreaSpec(Spec):
    """SRAM area by macro size: the area of a macro of C KiB interpolated between the
    ``macros`` on log-log axes (the first or last segment's slope outside them); a
    buffer larger than the largest macro is several macros of equal size."""

    macros: list[SramMacro] = Field(
        min_length=2, description="Macros of increasing capacity and their areas."
    )
    node_nm: NodeNm = Field(description="The technology node the areas were computed at.")
    source: Name = Field(description="The key of their source in the table's sources.")
    note: str = Field(default="", description="How the areas were computed.")

    @model_validator(mode="after")
    def _check_increasing(self) -> SramAreaSpec:
        sizes = [m.kib for m in self.macros]
        if any(b <= a for a, b in itertools.pairwise(sizes)):
            raise RuleViolation("macros", "capacities must increase", sizes)
        return self


class AreaTable(Spec):
    """One technology's area coefficients (um², mm², mW per mm²), each with its source."""

    name: Name = Field(description="The table's name.")
    node_nm: NodeNm = Field(
        description="The node every coefficient is used at (its own node"
        " may differ where a source's convention equates them)."
    )
    sources: dict[Name, Name] = Field(
        min_length=1, description="Source key -> the paper, tool or file it is."
    )
    mac_um2: dict[PrecisionField, Coefficient] = Field(
        description="Area of one MAC (multiplier and accumulating adder), per precision."
    )
    accumulator_bits: Annotated[int, Field(gt=0, le=128)] = Field(
        description="Bits of a PE's accumulator register (its partial sum)."
    )
    register_um2_per_bit: Coefficient = Field(
        description="Area of one bit of a pipeline register (a PE's operand and partial-sum"
        " registers)."
    )
    sram: SramAreaSpec = Field(description="SRAM area by macro size.")
    dram_phy_mm2_per_gb_s: Coefficient = Field(
        description="Area of the DRAM interface (PHY and controller) per GB/s of bandwidth."
    )
    link_phy_mm2_per_gb_s: Coefficient = Field(
        description="Area of a processor link's PHY per GB/s of its bandwidth (one direction)."
    )
    wiring_fraction: Coefficient = Field(
        description="Wiring and on-chip network overhead, as a fraction of the logic and SRAM"
        " area it joins."
    )
    leakage_mw_per_mm2: Coefficient = Field(description="Leakage power per mm² of logic and SRAM.")
    node_scaling: dict[NodeNm, PositiveFloat] = Field(
        description="Node -> the factor an area at node_nm is multiplied by at that node."
    )
    scaling_source: Name = Field(description="The key of node_scaling's source in sources.")

    @model_validator(mode="after")
    def _check_sources(self) -> AreaTable:
        for path, key in self._source_keys():
            if key not in self.sources:
                raise RuleViolation(
                    path, f"no such key in sources ({', '.join(self.sources)})", key
                )
        if self.node_scaling.get(self.node_nm) != 1.0:
            raise RuleViolation(
                f"node_scaling.{self.node_nm}",
                "must be 1 at the table's own node",
                self.node_scaling.get(self.node_nm),
            )
        return self

    def _source_keys(self) -> list[tuple[str, str]]:
        keys = [(f"mac_um2.{p.value}.source", c.source) for p, c in self.mac_um2.items()]
        keys += [
            (f"{name}.source", getattr(self, name).source)
            for name in (
                "register_um2_per_bit",
                "dram_phy_mm2_per_gb_s",
                "link_phy_mm2_per_gb_s",
                "wiring_fraction",
                "leakage_mw_per_mm2",
            )
        ]
        keys += [("sram.source", self.sram.source), ("scaling_source", self.scaling_source)]
        return keys


class OnExceed(str, Enum):
    """What a run does when a step's average power exceeds ``power.tdp_w``."""

    ERROR = "error"
    REPORT = "report"


class PowerSpec(Spec):
    """The chip's power budget and how its peak is measured."""

    tdp_w: PositiveFloat | None = Field(
        default=None,
        description="Thermal design power of the whole accelerator (all processors), W; a"
        " step whose average power exceeds it is refused or reported (on_exceed). null:"
        " no cap.",
    )
    on_exceed: Annotated[OnExceed, Field(strict=False)] = Field(
        default=OnExceed.ERROR,
        description="When a step's average power exceeds tdp_w: refuse the run (error) or"
        " simulate it and report it as over its TDP (report).",
    )
    peak_window_cycles: Annotated[int, Field(gt=0, le=2**40)] = Field(
        default=1000,
        description="Peak power is the most dynamic energy any window of this many cycles"
        " (from cycle 0, back to back) holds, over the window's time, plus leakage.",
    )


TechnologyNm = Literal[130, 90, 65, 45, 32, 20, 16, 14, 10, 7]
"""The nodes the area table scales to (Stillmaker and Baas's, 130 nm to 7 nm)."""
