"""The silicon of a run's records: ``summary.json``'s efficiency by its closed forms,
the suite's and sweep's columns, the techniques' hardware and whole-training rates."""

from __future__ import annotations

from functools import cache

import pytest

import accelsim
from accelsim.report.suite import silicon_row, suite_row
from accelsim.report.training import TrainingResult
from accelsim.sweep.schema import StoredPoint, point_row
from accelsim.sweep.worker import point_record
from tests.conftest import ROOT

MLP = ROOT / "configs" / "runs" / "mlp.yaml"
GP = "run.techniques={gradient_prediction: {}}"


@cache
def run(*overrides: str) -> TrainingResult:
    return accelsim.simulate(MLP, overrides=list(overrides))


def test_efficiency_closed_forms() -> None:
    summary = run().base.step_summary()
    silicon = summary.silicon
    assert silicon is not None
    per_s = summary.batch_size / summary.seconds
    rate = silicon.efficiency
    assert rate["samples_per_s"] == per_s
    assert rate["samples_per_s_per_mm2"] == per_s / silicon.area_mm2["total"]
    assert rate["samples_per_s_per_w"] == per_s / silicon.power_w.average
    assert rate["samples_per_j"] == summary.batch_size / (summary.energy_pj.total * 1e-12)
    assert silicon.area_mm2["total"] == pytest.approx(
        sum(v for k, v in silicon.area_mm2.items() if k not in ("total", "per_processor")),
        rel=1e-12,
    )


def test_technique_columns() -> None:
    result = run(GP)
    row = silicon_row(result)
    base = run().base.step_summary().silicon
    training = result.training
    assert base is not None and training is not None
    assert row["area_mm2"] == base.area_mm2["total"]
    assert row["technique_area_mm2"] - row["area_mm2"] == pytest.approx(42.8965, abs=5e-5)
    assert row["technique_samples_per_s_per_mm2"] == pytest.approx(
        base.efficiency["samples_per_s"] * training.speedup / row["technique_area_mm2"],
        rel=1e-12,
    )
    assert row["technique_samples_per_j"] == pytest.approx(
        base.efficiency["samples_per_j"] / (1 - training.energy_reduction), rel=1e-12
    )
    assert suite_row("mlp", result).items() >= row.items()


def test_sweep_columns_are_typed() -> None:
    def cells(result: TrainingResult) -> dict[str, object]:
        record = point_record(result, "default")
        return point_row(StoredPoint("id", 0, "", "ok", None, {}, record, 0.0, 0.0, ""))

    plain, gp = cells(run()), cells(run(GP))
    assert plain["area_mm2"] == gp["area_mm2"] == silicon_row(run())["area_mm2"]
    assert plain["technique_area_mm2"] is None
    assert gp["technique_area_mm2"] == silicon_row(run(GP))["technique_area_mm2"]
    assert "area_mm2" not in str(plain["extra"])
