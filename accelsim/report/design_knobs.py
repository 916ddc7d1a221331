"""The ``design`` record of a summary: the design point as numbers
(:class:`DesignKnobs`), what a sweep varies and a plot puts on an axis."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from accelsim.report.record_fields import checked as _check
from accelsim.report.record_fields import get_checked as _get

_BANDWIDTH, _IDEAL = "dram_bandwidth_bytes_per_cycle", "dram_ideal"
_MODEL, _CHANNELS, _OTHERS = "dram_model", "dram_channels", "other_keys"

OtherValue = str | int | float | bool | None
"""An other design key's value, as strict JSON holds it."""


@dataclass(frozen=True)
class DesignKnobs:
    """The design point as numbers: what a sweep varies and a plot puts on an axis.

    ``dataflow`` is the array's (``os``, ``ws`` or ``is``); buffer sizes are KiB
    per processor; the DRAM figures are the channel's (per processor with
    ``dram.sharing: per_processor``).  Ideal memory (``.inf`` bandwidth) is
    written as a ``null`` bandwidth and ``dram_ideal: true``, since strict JSON
    has no infinity; ``dram_ideal`` is false otherwise.  ``dram_model`` is the
    ``dram.model`` (``fifo``, ``interleaved``, ...) and ``dram_channels`` its channels.
    ``other_keys`` are every other hardware field's design key
    (:func:`~accelsim.config.design.design_values`: ``array_count``,
    ``dram_arbitration``, ...), the DRAM model's own keys first (``dram.row_bytes``:
    ``dram_row_bytes``), each written beside the fields above.
    """

    rows: int
    cols: int
    dataflow: str
    ifmap_kib: float
    filter_kib: float
    ofmap_kib: float
    stash_kib: float
    dram_bandwidth_bytes_per_cycle: float
    dram_latency_cycles: int
    processors: int
    clock_mhz: float
    batch_size: int
    dram_model: str = "fifo"
    dram_channels: int = 1
    other_keys: Mapping[str, OtherValue] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for f in fields(self):
            if f.name == _OTHERS:
                data |= self.other_keys
                continue
            data[f.name] = getattr(self, f.name)
            if f.name == _BANDWIDTH:
                ideal = math.isinf(self.dram_bandwidth_bytes_per_cycle)
                data[_BANDWIDTH] = None if ideal else self.dram_bandwidth_bytes_per_cycle
                data[_IDEAL] = ideal
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DesignKnobs:
        """Read a ``design`` record back; a key an older record lacks is taken at its
        default (fifo, one channel, no other keys)."""
        ideal = _check(data.get(_IDEAL, False), _IDEAL, bool)
        return cls(
            rows=_get(data, "rows", int),
            cols=_get(data, "cols", int),
            dataflow=_get(data, "dataflow", str),
            ifmap_kib=_get(data, "ifmap_kib", float),
            filter_kib=_get(data, "filter_kib", float),
            ofmap_kib=_get(data, "ofmap_kib", float),
            stash_kib=_get(data, "stash_kib", float),
            dram_bandwidth_bytes_per_cycle=math.inf if ideal else _get(data, _BANDWIDTH, float),
            dram_latency_cycles=_get(data, "dram_latency_cycles", int),
            processors=_get(data, "processors", int),
            clock_mhz=_get(data, "clock_mhz", float),
            batch_size=_get(data, "batch_size", int),
            dram_model=_check(data.get(_MODEL, "fifo"), _MODEL, str),
            dram_channels=_check(data.get(_CHANNELS, 1), _CHANNELS, int),
            other_keys={k: _scalar(v, k) for k, v in data.items() if k not in NAMED_DESIGN_KEYS},
        )


NAMED_DESIGN_KEYS = {f.name for f in fields(DesignKnobs)} | {_IDEAL}
"""The keys of a ``design`` record that are not among its ``other_keys``."""


def _scalar(value: Any, where: str) -> OtherValue:
    """``value`` if it is a JSON scalar (a string, number, bool or null)."""
    if value is not None and not isinstance(value, str | int | float | bool):
        raise ValueError(
            f"summary: {where}: expected a string, number, bool or null (got {value!r})"
        )
    return value
