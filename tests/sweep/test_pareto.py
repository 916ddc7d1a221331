"""``accelsim plot --kind pareto``: the front computed exactly on small tables (ties,
duplicates, both coordinates minimised), the per-sample metrics of a point (a
technique point's own step), and any two numeric columns by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelsim.cli import main
from accelsim.errors import InputError
from accelsim.sweep.executors import Executor
from accelsim.sweep.pareto import (
    ENERGY_PER_SAMPLE,
    SECONDS_PER_SAMPLE,
    axis_label,
    metric,
    pareto_front,
)
from accelsim.sweep.plan import plan_sweep
from accelsim.sweep.run import run_sweep
from tests.sweep.test_sweep import sweep_file


def test_front_minimises_both() -> None:
    # (1, 3), (2, 2), (3, 1) trade; (2.5, 2.5) is beaten by (2, 2); (4, 0.5) has the
    # least y; (1, 4) ties (1, 3)'s x with a larger y.
    points = [(3.0, 1.0), (1.0, 3.0), (2.0, 2.0), (2.5, 2.5), (4.0, 0.5), (1.0, 4.0)]
    assert pareto_front(points) == [1, 2, 0, 4]


def test_front_keeps_duplicates_and_drops_ties_that_lose() -> None:
    points = [
        (2.0, 2.0),  # 0: on the front, with its duplicate 3
        (1.0, 5.0),  # 1: least x
        (3.0, 2.0),  # 2: ties 0's y at a larger x: dominated
        (2.0, 2.0),  # 3
        (5.0, 1.0),  # 4: least y
        (1.0, 5.0),  # 5: duplicate of 1
        (5.0, 3.0),  # 6: ties 4's x at a larger y: dominated
    ]
    assert pareto_front(points) == [1, 5, 0, 3, 4]
    assert pareto_front([(1.0, 1.0)] * 3) == [0, 1, 2]
    assert pareto_front([]) == []
    # One point beating the others in both: the front is that point alone.
    assert pareto_front([(2.0, 3.0), (1.0, 1.0), (1.0, 2.0), (3.0, 1.0)]) == [1]


def test_per_sample_metrics_use_the_points_own_step() -> None:
    base = {"seconds": 0.032, "energy_pj": 8e9, "batch_size": 32}
    assert metric(base, SECONDS_PER_SAMPLE, "--x") == pytest.approx(0.001)
    assert metric(base, ENERGY_PER_SAMPLE, "--y") == pytest.approx(2.5e8)
    # A technique twice as fast that saves a quarter of the energy, at batch 16.
    technique = {**base, "batch_size": 16, "speedup": 2.0, "energy_reduction": 0.25}
    assert metric(technique, SECONDS_PER_SAMPLE, "--x") == pytest.approx(0.032 / 2 / 16)
    assert metric(technique, ENERGY_PER_SAMPLE, "--y") == pytest.approx(8e9 * 0.75 / 16)
    assert metric(technique, "seconds", "--x") == 0.032  # a column as stored


def test_a_metric_must_be_a_numeric_column() -> None:
    row = {"seconds": 0.5, "energy_pj": 2.0, "batch_size": 4, "workload": "mlp"}
    with pytest.raises(InputError) as excinfo:
        metric(row, "workload", "--y")
    assert str(excinfo.value) == (
        "--y: workload: not a numeric column of every point; the numeric ones:"
        " seconds_per_sample, energy_pj_per_sample, seconds, energy_pj, batch_size (got 'mlp')"
    )


def test_plot_any_two_columns(tmp_path: Path) -> None:
    path = sweep_file(tmp_path, "name: pf\ngrid:\n  array.rows: [8, 16]\n  batch_size: [2, 4]\n")
    with Executor() as executor:
        directory = run_sweep(plan_sweep(path), tmp_path / "out", executor).directory
    plot = ["plot", str(directory), "--kind", "pareto"]
    assert main([*plot, "--output", str(tmp_path / "a.png")]) == 0
    assert (
        main([*plot, "--x", "dram_bytes", "--y", "seconds", "--output", str(tmp_path / "b.svg")])
        == 0
    )
    assert (tmp_path / "b.svg").read_bytes().startswith(b"<?xml")
    assert main([*plot, "--y", "workload"]) == 2


def test_axis_units_suit_the_values() -> None:
    assert axis_label(SECONDS_PER_SAMPLE, [17.1e-6, 2.8e-5]) == (1e6, "time per sample (µs)")
    assert axis_label(SECONDS_PER_SAMPLE, [0.0144]) == (1e3, "time per sample (ms)")
    assert axis_label(SECONDS_PER_SAMPLE, [1.5]) == (1.0, "time per sample (s)")
    assert axis_label(ENERGY_PER_SAMPLE, [3.1e8]) == (1e-6, "energy per sample (µJ)")
    assert axis_label(ENERGY_PER_SAMPLE, [4.3e10]) == (1e-9, "energy per sample (mJ)")
    assert axis_label("dram_bytes", [1e9]) == (1.0, "dram_bytes (bytes)")
    assert axis_label("macs", [1e9]) == (1.0, "macs (multiply-accumulates per step)")
