"""Iso-area: the hardware a technique's steps run on when they pay for the hardware
they add (``run.iso_area``) out of the main array or its SRAM.

Pure, over the area model: the baseline's area is the hardware file's; the
technique's is that hardware with what its techniques add, shrunk until it is no
larger.  Rounding, stated:

* array: the rows are scaled by the square root of the share of PEs the added area
  leaves, rounded down; the columns are then the most that keep the total within the
  baseline's.  The total falls short of the baseline's by less than one column of
  PEs (``rounding_mm2``).
* sram: every operand buffer (and the stash, if any) is scaled by one factor, the
  largest found by bisection that keeps the total within the baseline's, each then
  rounded down to a whole KiB.  The total falls short by less than the area of one
  more KiB in every buffer (``rounding_mm2``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from accelsim.config.area import AreaTable
from accelsim.config.hardware import HardwareSpec
from accelsim.config.iso_area import Shrink
from accelsim.energy.area import area
from accelsim.mapping.units import ArrayUnit

BISECTIONS = 60
"""Halvings of the SRAM factor's interval: far below a KiB for any buffer."""


class NoMatch(ValueError):
    """The added hardware cannot be paid for by what shrinks (a problem of the input)."""


@dataclass(frozen=True)
class IsoAreaMatch:
    """What shrank, from what to what, and the areas (mm²) before and after."""

    shrinks: Shrink
    before: str
    after: str
    baseline_mm2: float
    added_mm2: float
    matched_mm2: float
    rounding_mm2: float
    hardware: HardwareSpec

    def to_dict(self) -> dict[str, Any]:
        """``summary.json``'s ``iso_area``."""
        return {
            "shrinks": self.shrinks.value,
            "before": self.before,
            "after": self.after,
            "baseline_mm2": self.baseline_mm2,
            "added_mm2": self.added_mm2,
            "matched_mm2": self.matched_mm2,
            "rounding_mm2": self.rounding_mm2,
        }


def iso_area(
    hw: HardwareSpec,
    table: AreaTable,
    shrink: Shrink,
    extra_arrays: Sequence[ArrayUnit],
    extra_sram_kib: Mapping[str, float],
) -> IsoAreaMatch:
    """``hw`` shrunk by ``shrink`` so that with the added hardware its area is at most
    ``hw``'s alone.

    Raises:
        NoMatch: when no array or SRAM that small can hold the added hardware's cost.
    """
    baseline = area(hw, table).total_mm2

    def total(shrunk: HardwareSpec) -> float:
        return area(shrunk, table, extra_arrays, extra_sram_kib).total_mm2

    added = total(hw) - baseline
    match = _array if shrink is Shrink.ARRAY else _sram
    shrunk, before, after, rounding = match(hw, total, baseline)
    return IsoAreaMatch(shrink, before, after, baseline, added, total(shrunk), rounding, shrunk)


def _with_array(hw: HardwareSpec, rows: int, cols: int) -> HardwareSpec:
    return hw.model_copy(update={"array": hw.array.model_copy(update={"rows": rows, "cols": cols})})


def _array(
    hw: HardwareSpec, total: Callable[[HardwareSpec], float], baseline: float
) -> tuple[HardwareSpec, str, str, float]:
    a = hw.array
    column = total(_with_array(hw, a.rows, a.cols)) - total(_with_array(hw, a.rows, a.cols - 1))
    per_pe = column / a.rows  # of every array of the processors, with its wiring
    share = 1 - (total(hw) - baseline) / (per_pe * a.rows * a.cols)
    rows = math.floor(a.rows * math.sqrt(share)) if share > 0 else 0
    cols = _most(a.cols, lambda c: total(_with_array(hw, max(rows, 1), c)) <= baseline)
    if rows < 1 or cols < 1:
        raise NoMatch(
            f"the added hardware ({total(hw) - baseline:.4g} mm2) costs more than the"
            f" {a.rows}x{a.cols} array can give up"
        )
    shrunk = _with_array(hw, rows, cols)
    return shrunk, f"{a.rows}x{a.cols}", f"{rows}x{cols}", per_pe * rows


def _most(limit: int, fits: Callable[[int], bool]) -> int:
    """The largest n in [1, limit] that ``fits`` (monotone: true up to some n), or 0."""
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    return low


def _buffers(hw: HardwareSpec, factor: float, whole: bool) -> HardwareSpec:
    b = hw.buffers
    sizes = {
        name: getattr(b, name) * factor
        for name in ("ifmap_kib", "filter_kib", "ofmap_kib", "stash_kib")
    }
    if whole:
        sizes = {name: float(math.floor(kib)) for name, kib in sizes.items()}
    return hw.model_copy(update={"buffers": b.model_copy(update=sizes)})


def _sram(
    hw: HardwareSpec, total: Callable[[HardwareSpec], float], baseline: float
) -> tuple[HardwareSpec, str, str, float]:
    b = hw.buffers
    before = f"{b.ifmap_kib:g}/{b.filter_kib:g}/{b.ofmap_kib:g} KiB"
    if total(_buffers(hw, 0.0, False)) > baseline:
        raise NoMatch(
            f"the added hardware ({total(hw) - baseline:.4g} mm2) costs more than the"
            f" {before} of operand SRAM can give up"
        )
    low, high = 0.0, 1.0
    for _ in range(BISECTIONS):
        middle = (low + high) / 2
        low, high = (
            (middle, high) if total(_buffers(hw, middle, False)) <= baseline else (low, middle)
        )
    shrunk = _buffers(hw, low, True)
    try:
        HardwareSpec.model_validate(shrunk.model_dump())
    except ValidationError as exc:
        raise NoMatch(
            f"the SRAM that pays for the added hardware is too small for one array tile"
            f" ({exc.errors()[0]['msg']})"
        ) from None
    s = shrunk.buffers
    after = f"{s.ifmap_kib:g}/{s.filter_kib:g}/{s.ofmap_kib:g} KiB"
    grown = {n: getattr(s, n) + 1 for n in ("ifmap_kib", "filter_kib", "ofmap_kib")}
    one_more = shrunk.model_copy(update={"buffers": s.model_copy(update=grown)})
    return shrunk, before, after, total(one_more) - total(shrunk)
