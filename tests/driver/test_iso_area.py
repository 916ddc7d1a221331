"""``run.iso_area``: ADA-GP's steps on a main array (or SRAM) shrunk to the baseline's
area, the baseline untouched, and the match within its stated rounding."""

from __future__ import annotations

from functools import cache

import pytest

import accelsim
from accelsim.driver.silicon import chip_area
from accelsim.errors import ConfigError
from accelsim.report.training import TrainingResult
from tests.conftest import ROOT

MLP = ROOT / "configs" / "runs" / "mlp.yaml"
GP = "run.techniques={gradient_prediction: {}}"
SMALL_GP = (
    "run.techniques={gradient_prediction: {array: {rows: 16, cols: 16, ifmap_kib: 16,"
    " filter_kib: 16, ofmap_kib: 16, weights_kib: 256}}}"
)


@cache
def run(*overrides: str) -> TrainingResult:
    return accelsim.simulate(MLP, overrides=list(overrides))


def areas(result: TrainingResult) -> tuple[float, float]:
    base, bp = result.base.silicon, result.steps["bp"].silicon
    assert base is not None and bp is not None
    return base.area.total_mm2, bp.area.total_mm2


def test_without_iso_area_the_predictor_is_added() -> None:
    result = run(GP)
    base, bp = areas(result)
    assert result.iso_area is None
    assert result.steps["bp"].hardware == result.base.hardware
    # the 64x64 bf16 predictor, its 1.5 MiB of operand SRAM and 2 MiB of weights
    assert bp - base == pytest.approx(42.8965, abs=5e-5)


def test_iso_area_shrinks_the_main_array_by_the_predictors_area() -> None:
    result = run(GP, "run.iso_area=true")
    match = result.iso_area
    assert match is not None
    base, bp = areas(result)
    assert base == areas(run(GP))[0]  # the baseline step keeps the file's hardware
    assert (match.before, match.after) == ("128x128", "98x98")
    assert result.steps["bp"].hardware.array.rows == 98
    assert result.steps["gp"].hardware.array.cols == 98
    assert bp == match.matched_mm2 <= base == match.baseline_mm2
    assert 0 <= base - bp < match.rounding_mm2
    # the main array (and its wiring) gave up the predictor's area, and at most one
    # column of PEs more: the rounding
    given_up = base - chip_area(match.hardware).total_mm2
    assert match.added_mm2 <= given_up < match.added_mm2 + match.rounding_mm2
    assert result.summary()["iso_area"]["after"] == "98x98"


def test_iso_area_can_shrink_the_sram_instead() -> None:
    result = run(SMALL_GP, "run.iso_area=sram")
    match = result.iso_area
    assert match is not None
    assert (match.before, match.after) == ("2048/2048/1024 KiB", "1806/1806/903 KiB")
    base, bp = areas(result)
    assert 0 <= base - bp < match.rounding_mm2
    assert result.steps["bp"].hardware.array == result.base.hardware.array


def test_sram_too_small_to_pay_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        run(GP, "run.iso_area=sram")
    (problem,) = caught.value.problems
    assert problem.path == "run.iso_area"  # blamed on the override that set it
    assert problem.message == (
        "the added hardware (42.9 mm2) costs more than the 2048/2048/1024 KiB of operand"
        " SRAM can give up"
    )
