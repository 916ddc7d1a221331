"""Power: a hand-timed trace's windows, average and peak with the area's leakage, and
the TDP refused or reported."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import accelsim
from accelsim.config.loader import bundled_area_table
from accelsim.energy.area import AreaBreakdown
from accelsim.energy.model import EnergyBreakdown
from accelsim.energy.power import power
from accelsim.energy.windows import window_energy_pj
from accelsim.errors import ConfigError
from tests.conftest import ROOT, make_hw

MLP = ROOT / "configs" / "runs" / "mlp.yaml"


def trace(starts: list[int], ends: list[int], total: int) -> SimpleNamespace:
    return SimpleNamespace(
        start_cycle=np.array(starts), end_cycle=np.array(ends), total_cycles=total, processors=1
    )


def test_windows_of_a_hand_timed_trace() -> None:
    # op A: 1,000 pJ over cycles 0-1,000; op B: 2,000 pJ over 500-1,500; op C: 300 pJ
    # and no cycles at 1,700 (over one cycle there); a 2,000-cycle step in windows of 500.
    t = trace([0, 500, 1700], [1000, 1500, 1700], 2000)
    energy, lengths = window_energy_pj(t, np.array([1000.0, 2000.0, 300.0]), 500)  # type: ignore[arg-type]
    assert energy == pytest.approx([500, 1500, 1000, 300], rel=1e-12)
    assert lengths.tolist() == [500, 500, 500, 500]
    # a last window cut at the step's end
    energy, lengths = window_energy_pj(t, np.array([1000.0, 2000.0, 300.0]), 800)  # type: ignore[arg-type]
    # A 800 + B 300 cycles x 2 pJ; A 200 + B 700 x 2; C
    assert energy == pytest.approx([800 + 600, 200 + 1400, 300], rel=1e-12)
    assert lengths.tolist() == [800, 800, 400]


def test_average_and_peak_with_leakage_by_area() -> None:
    hw = make_hw(**{"power.peak_window_cycles": 500})  # 1 GHz
    t = trace([0, 500], [1000, 1500], 2000)
    energy = EnergyBreakdown({"mac": np.array([1000.0, 2000.0])}, static_pj=12345.0)
    chip = AreaBreakdown({"array_macs": 10.0}, 1, 45)
    figures = power(t, energy, chip, hw, bundled_area_table())  # type: ignore[arg-type]
    # 3,000 pJ over 2 us = 1.5 mW; the busiest window, 1,500 pJ in 0.5 us = 3 mW;
    # leakage 10 mm^2 x 11.7 mW/mm^2 = 117 mW (the energy table's static term aside)
    assert figures.dynamic_w == pytest.approx(1.5e-3, rel=1e-12)
    assert figures.leakage_w == pytest.approx(0.117, rel=1e-12)
    assert figures.average_w == pytest.approx(0.1185, rel=1e-12)
    assert figures.peak_w == pytest.approx(0.120, rel=1e-12)
    assert not figures.over_tdp


def test_tdp_refused_or_reported() -> None:
    with pytest.raises(ConfigError) as caught:
        accelsim.simulate(MLP, overrides=["power.tdp_w=1"])
    (problem,) = caught.value.problems
    assert (problem.file, problem.path) == ("--set", "power.tdp_w")  # where it was set
    assert problem.message.startswith("the step's average power, 24.73 W, exceeds it;")
    assert problem.message.endswith("set power.on_exceed: report to simulate it anyway")
    result = accelsim.simulate(MLP, overrides=["power.tdp_w=1", "power.on_exceed=report"])
    summary = result.base.step_summary().silicon
    assert summary is not None
    assert summary.power_w.over_tdp and summary.power_w.tdp == 1.0
    assert summary.power_w.average == pytest.approx(24.728, abs=1e-3)
