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
from accelsim.sweep.plan import PointTask
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


def _tasks(tmp_path: Path, engine: str, axes: str) -> list[PointTask]:
    """The tasks of a sweep of the default run over ``axes`` (the sweep file's text from
    ``grid:`` or ``zip:`` on) on ``engine``, nothing reused yet in this process."""
    path = tmp_path / "sw.yaml"
    path.write_text(
        f"name: exact\nbase: {DEFAULT}\nset:\n  timing.engine: {engine}\n{axes}",
        encoding="utf-8",
    )
    run_module._Reused.graphs.clear()
    engines._Memo.steps.clear()
    return [p.task for p in plan_sweep(path).points]


@pytest.mark.parametrize("engine", ["simpy", "compiled"])
def test_hardware_points_equal_their_standalone_runs(tmp_path: Path, engine: str) -> None:
    # the 10,000-point sweep's axes at two array shapes: its ifmap buffers vary fastest,
    # so that consecutive points share their flat step where the buffer changes nothing
    # (an output-stationary one's, past the size its tiles need)
    tasks = _tasks(
        tmp_path,
        engine,
        "grid:\n  array.rows: [64, 256]\n  array.cols: [128]\n  array.dataflow: [os, ws]\n"
        "  dram.bandwidth_bytes_per_cycle: [64]\n  buffers.ifmap_kib: [128, 384, 1024, 4096]\n",
    )
    hits = engines._Memo.hits
    outcomes = run_chunk(tasks, len(tasks), files=True)
    assert engines._Memo.hits > hits  # some points reused an equal step's timing
    for task, outcome in zip(tasks, outcomes, strict=True):
        assert outcome.status == "ok", outcome.error
        text, record = _alone(Path(task.base), task.overrides())
        assert json.loads(text)["engine"] == engine
        assert outcome.summary_json == text
        assert outcome.record == record


def _summary_numbers(summary: dict[str, Any]) -> dict[str, Any]:
    """The record's numbers as ``summary.json`` holds them (rounded as the record is)."""
    energy = summary["energy_pj"]
    return {
        "macs": summary["macs"]["total"],
        "total_cycles": summary["total_cycles"],
        "seconds": summary["seconds"],
        "utilization": round(summary["utilization"], 6),
        "stall_fraction": round(summary["stall_fraction"], 6),
        "array_stall_cycles": summary["array_stall_cycles"],
        "dram_bytes": summary["dram_bytes"]["total"],
        "dram_read_bytes": summary["dram_bytes"]["read"],
        "dram_write_bytes": summary["dram_bytes"]["write"],
        "interconnect_bytes": summary["interconnect_bytes"],
        "params": summary["parameters"],
        "energy_pj": round(energy["total"], 3),
        **{f"energy_{k}_pj": round(v, 3) for k, v in energy["by_component"].items()},
        "area_mm2": summary["area_mm2"]["total"],
        "power_w": summary["power_w"]["average"],
        "peak_power_w": summary["power_w"]["peak"],
        "samples_per_j": summary["efficiency"]["samples_per_j"],
        **summary["design"],
    }


@pytest.mark.parametrize("engine", ["simpy", "compiled"])
def test_a_chunk_varying_every_axis_equals_standalone_runs(tmp_path: Path, engine: str) -> None:
    # one zip group over every axis of the 10,000-point sweep: each point of the chunk
    # differs from the one before in its array's rows, columns and dataflow, its DRAM
    # bandwidth and its ifmap buffer; the records made without files (from the step's
    # headline) hold the numbers of each point's summary.json
    tasks = _tasks(
        tmp_path,
        engine,
        "zip:\n  - array.rows: [16, 256, 48, 128]\n    array.cols: [192, 32, 112, 16]\n"
        "    array.dataflow: [ws, os, ws, os]\n"
        "    dram.bandwidth_bytes_per_cycle: [16, 256, 32, 128]\n"
        "    buffers.ifmap_kib: [4096, 128, 768, 384]\n",
    )
    without = run_chunk(tasks, len(tasks), files=False)
    with_files = run_chunk(tasks, len(tasks), files=True)
    for task, bare, kept in zip(tasks, without, with_files, strict=True):
        assert bare.status == "ok", bare.error
        assert bare.summary_json == ""
        text, record = _alone(Path(task.base), task.overrides())
        assert kept.summary_json == text
        assert bare.record == kept.record == record
        numbers = _summary_numbers(json.loads(text))
        assert {k: record[k] for k in numbers} == numbers
