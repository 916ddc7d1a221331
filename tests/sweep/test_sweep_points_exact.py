"""Sweep points are standalone runs: a hardware sweep's points, simulated one after
another in one worker (reusing the lowered step, the per-graph facts and the timing of
an equal flat step), give each point's summary and record exactly as a fresh run of
that point alone, on both engines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from accelsim.config.loader import Override
from accelsim.driver import run as run_module
from accelsim.driver.inputs import InputCache, load_inputs
from accelsim.driver.run import simulate_training
from accelsim.sweep import plan_sweep
from accelsim.sweep.worker import hardware_label, point_record, run_chunk
from accelsim.timing import engines
from tests.conftest import ROOT

DEFAULT = ROOT / "configs" / "runs" / "default.yaml"


def _alone(base: Path, task_sets: list[Override]) -> tuple[str, dict[str, Any]]:
    """A point's summary.json text and record from a fresh run: no reused graph or timing."""
    run_module._Reused.graphs.clear()
    engines._Memo.steps.clear()
    inputs = load_inputs(base, task_sets)
    result = simulate_training(inputs)
    text = json.dumps(result.summary(), indent=2, allow_nan=False) + "\n"
    return text, point_record(result, hardware_label(inputs, InputCache()))


@pytest.mark.parametrize("engine", ["simpy", "compiled"])
def test_hardware_points_equal_their_standalone_runs(tmp_path: Path, engine: str) -> None:
    # the 10,000-point sweep's axes at two array shapes: its ifmap buffers vary fastest,
    # so that consecutive points share their flat step where the buffer changes nothing
    # (an output-stationary one's, past the size its tiles need)
    path = tmp_path / "sw.yaml"
    path.write_text(
        f"name: exact\nbase: {DEFAULT}\nset:\n  timing.engine: {engine}\ngrid:\n"
        "  array.rows: [64, 256]\n  array.cols: [128]\n  array.dataflow: [os, ws]\n"
        "  dram.bandwidth_bytes_per_cycle: [64]\n"
        "  buffers.ifmap_kib: [128, 384, 1024, 4096]\n",
        encoding="utf-8",
    )
    tasks = [p.task for p in plan_sweep(path).points]
    run_module._Reused.graphs.clear()
    engines._Memo.steps.clear()
    hits = engines._Memo.hits
    outcomes = run_chunk(tasks, len(tasks), files=True)
    assert engines._Memo.hits > hits  # some points reused an equal step's timing
    for task, outcome in zip(tasks, outcomes, strict=True):
        assert outcome.status == "ok", outcome.error
        text, record = _alone(Path(task.base), task.overrides())
        assert json.loads(text)["engine"] == engine
        assert outcome.summary_json == text
        assert outcome.record == record
