"""What a hardware sweep's point reuses from the points before it in the process: the
fold schedule of an array design, its GEMMs' closed-form columns, the memo of simulated
steps looked up without flattening the step.  Every reuse must give exactly what the
uncached path gives."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from accelsim.config.base import Convention
from accelsim.config.enums import PsumPolicy
from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import simulate_run
from accelsim.graph.memo import RECENT_DESIGNS, per_graph_recent
from accelsim.mapping.schedule import schedule
from accelsim.mapping.units import main_array
from accelsim.timing import engines, gemm_costs
from accelsim.timing.closed_form import ACCELSIM
from accelsim.timing.gemm_costs import ChipOptions, gemm_columns, kept_columns
from accelsim.timing.machine import machine_of
from tests.conftest import ROOT

DEFAULT = ROOT / "configs" / "runs" / "default.yaml"


def _graph_and_hardware(*sets: str) -> tuple[Any, Any]:
    inputs = load_inputs(Path(DEFAULT), parse_sets(["batch_size=2", *sets]))
    return simulate_run(inputs).graph, inputs.hardware


def test_recent_facts_keep_the_designs_used_last() -> None:
    graph, _ = _graph_and_hardware()
    made: list[int] = []

    def make(key: int) -> Any:
        return lambda: made.append(key) or [key]

    first = per_graph_recent(graph, "test", 0, make(0), keep=2)
    assert per_graph_recent(graph, "test", 0, make(0), keep=2) is first
    per_graph_recent(graph, "test", 1, make(1), keep=2)
    per_graph_recent(graph, "test", 0, make(0), keep=2)  # 0 used last: 1 goes next
    per_graph_recent(graph, "test", 2, make(2), keep=2)
    per_graph_recent(graph, "test", 0, make(0), keep=2)
    per_graph_recent(graph, "test", 1, make(1), keep=2)
    assert made == [0, 1, 2, 1]
    assert per_graph_recent(graph, "other kind", 0, make(0), keep=2) == [0]
    assert made == [0, 1, 2, 1, 0]


def test_a_fold_schedule_is_made_once_per_graph_and_array_design() -> None:
    graph, hw = _graph_and_hardware()
    unit = main_array(hw)
    folds = schedule(graph, (unit,))
    assert schedule(graph, (unit,)) is folds
    bigger = dataclasses.replace(unit, ifmap_bytes=2 * unit.ifmap_bytes)
    other = schedule(graph, (bigger,))
    assert other is not folds and other.units[0].unit == bigger
    for i in range(RECENT_DESIGNS):
        schedule(graph, (dataclasses.replace(unit, ifmap_bytes=unit.ifmap_bytes + 1 + i),))
    again = schedule(graph, (unit,))  # forgotten after RECENT_DESIGNS others
    assert again is not folds
    assert all(
        np.array_equal(getattr(a, f.name), getattr(b, f.name))
        for a, b in zip(again.units, folds.units, strict=True)
        for f in dataclasses.fields(a)
        if f.name != "unit"
    )


def test_kept_columns_are_the_closed_forms_once_per_table_and_what_they_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    graph, hw = _graph_and_hardware()
    kept = schedule(graph, (main_array(hw),)).units[0]  # costed by the run already
    table = dataclasses.replace(kept)  # an equal table, costed by nothing yet
    chip = ChipOptions.of(machine_of(hw), Convention.ACCELSIM)
    expected = gemm_columns(table, ACCELSIM, PsumPolicy.CHUNK, False, chip)
    calls: list[int] = []
    real = gemm_costs.gemm_columns
    monkeypatch.setattr(gemm_costs, "gemm_columns", lambda *a: calls.append(1) or real(*a))
    first = kept_columns(table, ACCELSIM, PsumPolicy.CHUNK, False, chip)
    assert first.keys() == expected.keys()
    assert all(np.array_equal(first[k], expected[k]) for k in expected)
    first["compute_cycles"] = first["compute_cycles"] + 1  # the caller's own dict
    # Another DRAM (its bandwidth) or fixed cost per op reads the same columns.
    slower = machine_of(hw.model_copy(update={"dram": hw.dram.model_copy(
        update={"bandwidth_bytes_per_cycle": 16})}))  # fmt: skip
    other = dataclasses.replace(ChipOptions.of(slower, Convention.ACCELSIM), op_overhead_cycles=7)
    second = kept_columns(table, ACCELSIM, PsumPolicy.CHUNK, False, other)
    assert np.array_equal(second["compute_cycles"], expected["compute_cycles"])
    assert calls == [1]
    kept_columns(
        table,
        ACCELSIM,
        PsumPolicy.CHUNK,
        False,
        dataclasses.replace(chip, fewest_reads=not chip.fewest_reads),
    )
    kept_columns(table, ACCELSIM, PsumPolicy.SPILL, False, chip)
    assert calls == [1, 1, 1]
    kept_columns(kept, ACCELSIM, PsumPolicy.CHUNK, False, chip)
    assert calls == [1, 1, 1]


def test_a_memoised_step_is_never_flattened(monkeypatch: pytest.MonkeyPatch) -> None:
    inputs = load_inputs(Path(DEFAULT), parse_sets(["batch_size=2", "array.rows=24"]))
    flats: list[int] = []
    real = engines.Keyed.flat
    monkeypatch.setattr(engines.Keyed, "flat", lambda self: flats.append(1) or real(self))
    first = simulate_run(inputs)
    assert flats == [1]
    again = simulate_run(inputs)
    assert flats == [1]
    assert np.array_equal(again.trace.end_cycle, first.trace.end_cycle)
    assert again.trace.events == first.trace.events
