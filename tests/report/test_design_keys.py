"""Every hardware field a sweep can vary identifies the design: changing it alone
changes ``summary.json``'s ``design`` and the sweep store's typed columns.

The fields are walked from the pydantic spec here (every DRAM model's included), not
taken from :mod:`accelsim.config.design`, so a field that module missed fails."""

from __future__ import annotations

import json
import types
from collections.abc import Iterator
from enum import Enum
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pytest
from pydantic import BaseModel, ValidationError

import accelsim
from accelsim.config.design import design_columns, design_key, design_values
from accelsim.config.hardware import HardwareSpec
from accelsim.report.result import design_knobs
from accelsim.report.summary import DesignKnobs
from accelsim.sweep.schema import EXTRA_COLUMN, KNOB_COLUMNS, StoredPoint, point_row
from tests.conftest import ROOT

SMOKE = ROOT / "configs" / "runs" / "smoke.yaml"
BATCH = 4
NOT_DESIGN = {"name", "description", "calibrated_under"}  # the file, not the design
# Values of the list fields, each valid alone on the smoke run's one processor.
LISTS = {
    "array.dataflows": [("ws", "os", "is")],
    "array.rates": [{"int8": 2}, {"bf16": 1, "fp8": 2}],
    "array.rates_source": ["a datasheet"],
    "interconnect.dims": [(2,)],
    "interconnect.levels": [
        ({"topology": "switch", "dims": [2], "bandwidth_bytes_per_cycle": 8.0},)
    ],
}


def members(annotation: Any) -> list[Any]:
    if get_origin(annotation) is Annotated:
        return members(get_args(annotation)[0])
    if get_origin(annotation) in (Union, types.UnionType):
        return [m for arg in get_args(annotation) for m in members(arg)]
    return [annotation]


def leaf_fields(spec: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, list[Any]]]:
    """``(dotted path, the types it admits)`` of every leaf field, each DRAM model's."""
    for name, info in spec.model_fields.items():
        if not prefix and name in NOT_DESIGN:
            continue
        types_ = members(info.annotation)
        specs = [t for t in types_ if isinstance(t, type) and issubclass(t, BaseModel)]
        if specs:
            for nested in specs:
                yield from leaf_fields(nested, f"{prefix}{name}.")
        else:
            yield prefix + name, types_


def sweepable() -> dict[str, list[Any]]:
    """Each leaf path and every type any spec gives it (``dram.model``: each model's
    literal)."""
    found: dict[str, list[Any]] = {}
    for path, types_ in leaf_fields(HardwareSpec):
        found.setdefault(path, []).extend(types_)
    return found


def candidates(value: Any, types_: list[Any]) -> list[Any]:
    """Values other than ``value`` that the field's types admit, most plausible first."""
    out: list[Any] = []
    for kind in types_:
        if get_origin(kind) is Literal:
            out += list(get_args(kind))
        elif isinstance(kind, type) and issubclass(kind, Enum):
            out += list(kind)
    if isinstance(value, bool):
        out.append(not value)
    elif isinstance(value, int) and not isinstance(value, Enum):
        out += [value * 2, value + 1, value // 2, value - 1]
    elif isinstance(value, float):
        out += [64.0] if value == float("inf") else [value * 2, value / 2, value + 1]
    elif value is None:
        out += [1, 2, 64.0]
    return [c for c in out if c != value and not (isinstance(c, Enum) and c.value == value)]


def base_hardware(model: str) -> HardwareSpec:
    """The smoke run's hardware, its DRAM of ``model`` (with two channels where the model
    may have them, so that a channel more or fewer stays the model) and a fixed cost of
    8 cycles per op (a kernel's share of it, at most the whole, can then move alone)."""
    hw = accelsim.load_inputs(SMOKE).hardware
    channels = 1 if model == "fifo" else 2
    dram = {**hw.dram.model_dump(), "model": model, "channels": channels}
    timing = {**hw.timing.model_dump(), "op_overhead_cycles": 8}
    return HardwareSpec.model_validate({**hw.model_dump(), "dram": dram, "timing": timing})


def changed(hw: HardwareSpec, path: str, types_: list[Any]) -> HardwareSpec | None:
    """``hw`` with the field at ``path`` alone set to another valid value (None where
    ``hw`` has no such field or no other value of it is valid: a row buffer's model
    cannot change alone, its own keys would be unknown to another model)."""
    *sections, name = path.split(".")
    current: Any = hw
    for section in sections:
        current = getattr(current, section)
    if name not in type(current).model_fields:
        return None  # a field of another DRAM model
    for value in LISTS.get(path, candidates(getattr(current, name), types_)):
        data = hw.model_dump()
        spot = data
        for section in sections:
            spot = spot.setdefault(section, {})
        spot[name] = value
        try:
            return HardwareSpec.model_validate(data)
        except ValidationError:
            continue
    return None


def design(hw: HardwareSpec) -> dict[str, Any]:
    return design_knobs(hw, BATCH).to_dict()


def stored(record: dict[str, Any]) -> dict[str, Any]:
    point = StoredPoint("id", 0, "", "ok", None, {}, record, 0.0, 0.0, "")
    return point_row(point)


FIELDS = sweepable()
MODELS = ("fifo", "interleaved", "row_buffer")


def test_every_field_has_a_design_key_of_its_own() -> None:
    keys = [design_key(path) for path in FIELDS]
    assert len(set(keys)) == len(keys) == len(design_columns())
    assert set(keys) == {key for key, _ in design_columns()}
    assert {key for key, _ in design_columns()} <= {name for name, _ in KNOB_COLUMNS}


@pytest.mark.parametrize("path", sorted(FIELDS))
def test_changing_a_field_alone_changes_the_design_and_the_store_columns(path: str) -> None:
    tried = 0
    for model in MODELS:
        base = base_hardware(model)
        other = changed(base, path, FIELDS[path])
        if other is None:
            continue
        tried += 1
        before, after = design(base), design(other)
        moved = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
        assert design_key(path) in moved, (model, before, after)
        assert moved <= {name for name, _ in KNOB_COLUMNS} | {"dram_ideal"}
        row_before, row_after = stored(before), stored(after)
        assert row_before[design_key(path)] != row_after[design_key(path)]
        assert design_key(path) not in json.loads(row_after[EXTRA_COLUMN])
        # The record reads back as it was written.
        assert DesignKnobs.from_dict(json.loads(json.dumps(after))).to_dict() == after
    assert tried, f"{path}: no other valid value found on any DRAM model"


def test_the_design_names_the_fields_a_run_sets() -> None:
    sets = ["array.count=2", "dram.arbitration=priority", "dram.burst_bytes=32"]
    sets += ["interconnect.bandwidth_bytes_per_cycle=.inf", "mapping.orientation=best"]
    result = accelsim.simulate(SMOKE, sets)
    written = result.base.summary()["design"]
    assert {k: written[k] for k in ("array_count", "dram_arbitration", "dram_burst_bytes")} == {
        "array_count": 2,
        "dram_arbitration": "priority",
        "dram_burst_bytes": 32,
    }
    # Strict JSON: an ideal link is ".inf", as the sweep store spells it.
    assert written["interconnect_bandwidth_bytes_per_cycle"] == ".inf"
    assert written["mapping_orientation"] == "best"
    assert written == {**design_values(result.base.hardware), **written}
    assert result.base.summary()["array"] == "2 x 32x32 os"


def test_a_design_record_refuses_a_key_that_is_no_scalar() -> None:
    record = design(base_hardware("fifo"))
    with pytest.raises(ValueError) as caught:
        DesignKnobs.from_dict(record | {"array_count": [2]})
    assert str(caught.value) == (
        "summary: array_count: expected a string, number, bool or null (got [2])"
    )
