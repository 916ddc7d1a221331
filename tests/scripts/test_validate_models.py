"""The whole-model validation script (scripts/validate_models.py): its errors from rows
made by hand, and one measured row predicted in both compile modes."""

from __future__ import annotations

import pytest

from tests.conftest import load_script


def test_errors_per_model_and_overall() -> None:
    """Two rows of one model: predicted 110 and 80 us against 100 us measured (eager,
    +10 % and -20 %: MAPE 15 %, signed -5 %), 100 and 100 (fused: 0 %), 90 and 90
    (flash: -10 %)."""
    vm = load_script("validate_models")
    kernels = {"eager": 161, "fused": 100, "flash": 88}
    rows = [
        vm.Row("gpt2", 128, b, 100.0, {"eager": e, "fused": 100.0, "flash": 90.0}, 161, kernels)
        for b, e in ((1, 110.0), (8, 80.0))
    ]
    assert vm.mape(rows, "eager") == pytest.approx((15.0, -5.0))
    assert vm.mape(rows, "fused") == (0.0, 0.0)
    text = vm.page(rows, 1.0)
    summary = (
        "| GPT-2 (124 M) | 2 | 161 | 100 | 15.0 % | -5.0 % | 0.0 % | +0.0 % | 10.0 % | -10.0 % |"
    )
    assert summary in text
    assert "| GPT-2 (124 M) | 128 | 8 | 100 | 80 | -20.0 % | 100 | +0.0 % | 90 | -10.0 % |" in text


def test_a_measured_row_predicted_three_ways() -> None:
    """GPT-2 at 128 tokens, batch 1, on the calibrated TPU v4 preset: every measured
    row is read (35 with a device time: Qwen at 1024 x 32 ran out of memory); the fused
    program launches fewer kernels than the forward pass has ops (88 with flash
    attention, 161 ops) and runs faster."""
    vm = load_script("validate_models")
    rows = vm.measured()
    assert len(rows) == 35 and ("qwen2.5-0.5b", 1024, 32) not in [r[:3] for r in rows]
    row = vm.predict("gpt2", 128, 1, 495.0)
    # eager: every op a kernel (one chip: no transfer); flash: 88 kernels
    assert (row.ops, row.kernels["eager"], row.kernels["flash"]) == (161, 161, 88)
    assert row.predicted_us["flash"] < row.predicted_us["fused"] < row.predicted_us["eager"]
    assert row.kernels["flash"] < row.kernels["fused"] < row.kernels["eager"]
