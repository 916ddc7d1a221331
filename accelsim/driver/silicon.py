"""A simulated step's silicon: the area of the hardware it ran on and its power,
checked against the hardware's TDP."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelsim.config.hardware import HardwareSpec
from accelsim.config.iso_area import shrinks
from accelsim.config.loader import bundled_area_table
from accelsim.driver.inputs import RunInputs
from accelsim.energy.area import AreaBreakdown, area
from accelsim.energy.iso_area import IsoAreaMatch, NoMatch, iso_area
from accelsim.energy.model import EnergyBreakdown
from accelsim.energy.power import Silicon, power, tdp_problem
from accelsim.errors import ConfigError
from accelsim.mapping.units import ArrayUnit
from accelsim.techniques.base import GraphRewriter, Technique
from accelsim.timing.trace import Trace


def added_sram_kib(hw: HardwareSpec, techniques: Sequence[Technique[Any]]) -> dict[str, float]:
    """The SRAM each technique adds to every processor beside its array units, by name."""
    found = {t.name: t.extra_sram_kib(hw) for t in techniques if isinstance(t, GraphRewriter)}
    return {name: kib for name, kib in found.items() if kib > 0}


def chip_area(
    hw: HardwareSpec,
    extra_arrays: Sequence[ArrayUnit] = (),
    techniques: Sequence[Technique[Any]] = (),
) -> AreaBreakdown:
    """The area of ``hw`` with what ``techniques`` add (their array units and SRAM)."""
    return area(hw, bundled_area_table(), extra_arrays, added_sram_kib(hw, techniques))


def silicon_of(
    source: str,
    hw: HardwareSpec,
    trace: Trace,
    energy: EnergyBreakdown,
    extra_arrays: Sequence[ArrayUnit] = (),
    techniques: Sequence[Technique[Any]] = (),
) -> Silicon:
    """The step's area and power on ``hw`` (with what ``techniques`` add).

    Raises:
        ConfigError: at ``hardware.power.tdp_w`` of the run file ``source`` (which the
            driver blames on the override that set it, if one did), when the step's
            average power exceeds it and ``power.on_exceed`` is ``error``.
    """
    chip = chip_area(hw, extra_arrays, techniques)
    figures = power(trace, energy, chip, hw, bundled_area_table())
    problem = tdp_problem(figures, hw.power.on_exceed)
    if problem is not None:
        raise ConfigError.single(source, "hardware.power.tdp_w", problem, hw.power.tdp_w)
    return Silicon(chip, figures)


def iso_area_match(inputs: RunInputs) -> IsoAreaMatch | None:
    """The hardware the techniques' steps run on under ``run.iso_area`` (None when it
    is off, or when the techniques add no hardware).

    Raises:
        ConfigError: at ``iso_area`` of the run file, when what shrinks cannot pay for
            what the techniques add.
    """
    shrink = shrinks(inputs.run.iso_area)
    hw, techniques = inputs.hardware, inputs.techniques
    added = added_sram_kib(hw, techniques)
    if shrink is None or not (inputs.extra_arrays or added):
        return None
    try:
        return iso_area(hw, bundled_area_table(), shrink, inputs.extra_arrays, added)
    except NoMatch as exc:
        raise ConfigError.single(inputs.source, "iso_area", str(exc), inputs.run.iso_area) from None
