"""``summary.json``'s silicon: ``area_mm2``, ``power_w`` and ``efficiency``.

``area_mm2`` is the area model's (:mod:`accelsim.energy.area`): ``total``,
``per_processor`` and each component; ``power_w`` the power model's
(:mod:`accelsim.energy.power`): ``average``, ``peak``, their ``dynamic`` and
``leakage`` parts, the window peak power was measured over, the ``tdp`` and whether
the step is ``over_tdp``; ``efficiency`` the step's samples per second per mm² and
per W (average power), and its samples per J of the energy model's step energy.
A record written before these keys existed reads back without them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the sweep's schema reads the column names without numpy
    from accelsim.energy.power import Silicon

KEYS = ("area_mm2", "power_w", "efficiency")
"""The top-level keys of ``summary.json`` this module writes."""
SILICON_COLUMNS = (
    "area_mm2",
    "power_w",
    "peak_power_w",
    "samples_per_s_per_mm2",
    "samples_per_s_per_w",
    "samples_per_j",
    "technique_area_mm2",
    "technique_samples_per_s_per_mm2",
    "technique_samples_per_j",
)
"""The columns of ``suite.csv`` and a sweep's points
(:func:`accelsim.report.suite.silicon_row`): the baseline step's area, average and
peak power and efficiency (``summary.json``'s ``area_mm2``, ``power_w``,
``efficiency``); with techniques, the area of the hardware their steps run on (their
units added, or shrunk to the baseline's by ``run.iso_area``), the whole training's
samples per second per mm² of it (the baseline's rate times the speedup) and its
samples per J (the baseline's over one less the energy reduction)."""
RECORD_KEYS = (*KEYS, "iso_area")
"""Those and the key of what an iso-area run shrank (the training result's): none of
them a setting."""


@dataclass(frozen=True)
class PowerSummary:
    """``power_w``: a step's power in W (:class:`~accelsim.energy.power.PowerFigures`)."""

    average: float
    peak: float
    dynamic: float
    leakage: float
    peak_window_cycles: int
    tdp: float | None
    over_tdp: bool

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> PowerSummary:
        """``power_w`` read back.

        Raises:
            ValueError: for a missing key or a value of the wrong type.
        """
        kinds: dict[str, tuple[type, ...]] = {
            "average": (float,),
            "peak": (float,),
            "dynamic": (float,),
            "leakage": (float,),
            "peak_window_cycles": (int,),
            "tdp": (float, type(None)),
            "over_tdp": (bool,),
        }
        for key, kind in kinds.items():
            value = data.get(key)
            if type(value) not in kind:
                raise ValueError(f"summary: power_w.{key}: wrong type (got {value!r})")
        return cls(**{key: data[key] for key in kinds})


@dataclass(frozen=True)
class SiliconSummary:
    """A step's area, power and efficiency as ``summary.json`` holds them."""

    area_mm2: Mapping[str, float]
    power_w: PowerSummary
    efficiency: Mapping[str, float]

    @classmethod
    def of(cls, silicon: Silicon, samples: int, seconds: float, energy_pj: float) -> SiliconSummary:
        """The summary of ``silicon`` for a step of ``samples`` in ``seconds`` that
        takes ``energy_pj``."""
        area = silicon.area.to_dict()
        power = PowerSummary(**silicon.power.to_dict())
        per_s = samples / seconds if seconds > 0 else 0.0
        efficiency = {
            "samples_per_s": per_s,
            "samples_per_s_per_mm2": per_s / area["total"],
            "samples_per_s_per_w": per_s / silicon.power.average_w,
            "samples_per_j": samples / (energy_pj * 1e-12),
        }
        return cls(area, power, efficiency)

    def to_dict(self) -> dict[str, Any]:
        return {
            "area_mm2": dict(self.area_mm2),
            "power_w": dataclasses.asdict(self.power_w),
            "efficiency": dict(self.efficiency),
        }

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> SiliconSummary | None:
        """The silicon of a ``summary.json`` record, or None when it has none.

        Raises:
            ValueError: when a key is there but not a mapping.
        """
        if "area_mm2" not in data:
            return None
        area, power, efficiency = (_mapping(data, key) for key in KEYS)
        return cls(area, PowerSummary.read(power), efficiency)


def _mapping(data: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    if not isinstance(value, dict):
        raise ValueError(f"summary: {key}: expected a mapping (got {value!r})")
    return value


def silicon_dict(silicon: SiliconSummary | None) -> dict[str, Any]:
    """The keys ``silicon`` adds to ``summary.json`` (none without it)."""
    return {} if silicon is None else silicon.to_dict()


AREA_TABLE_NM = 45
"""The node of the bundled area table and the default ``technology_nm``."""


def silicon_rows(silicon: SiliconSummary | None, node_nm: Any) -> list[tuple[str, str]]:
    """The console's lines of ``silicon`` (none without it) for a chip at ``node_nm``;
    at another node than :data:`AREA_TABLE_NM` the power line says its dynamic energy
    is the energy table's, unscaled (docs/model/area_power.md)."""
    if silicon is None:
        return []
    area, power, rate = silicon.area_mm2, silicon.power_w, silicon.efficiency
    over = ""
    if power.tdp is not None:
        over = f", {'over' if power.over_tdp else 'within'} its {power.tdp:g} W TDP"
    if node_nm not in (None, AREA_TABLE_NM):  # the energy tables are not scaled by node
        over += f"; dynamic energy as the energy table gives it, not scaled to {node_nm} nm"
    return [
        (
            "area",
            f"{area['total']:,.1f} mm2 at {node_nm} nm ({area['per_processor']:,.1f} per"
            " processor)",
        ),
        (
            "power",
            f"{power.average:,.1f} W average, {power.peak:,.1f} W peak over"
            f" {power.peak_window_cycles:,} cycles (leakage {power.leakage:,.2f} W){over}",
        ),
        (
            "efficiency",
            f"{rate['samples_per_s_per_mm2']:,.4g} samples/s per mm2,"
            f" {rate['samples_per_s_per_w']:,.4g} per W, {rate['samples_per_j']:,.4g}"
            " samples per J",
        ),
    ]
