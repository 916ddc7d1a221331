"""``accelsim calibrate``: measurements, size classes, the optimiser, physical ranges,
the fitted file, and the bound a calibrated preset never beats."""

from __future__ import annotations

import numpy as np
import pytest

from accelsim.calibration.fit import (
    calibrate,
    check_request,
    cross_validated,
    fit,
    fitted_hardware,
    parameters,
    physical,
)
from accelsim.calibration.measurements import (
    Measurements,
    mape,
    read_measurements,
    size_class,
    size_cycles,
)
from accelsim.calibration.model import (
    compute_bound_us,
    engine_us,
    gemm_features,
    predict_us,
)
from accelsim.calibration.optimize import minimize
from accelsim.cli import main
from accelsim.config.enums import PsumPolicy
from accelsim.config.loader import load_hardware, parse_sets
from accelsim.errors import InputError
from tests.conftest import ROOT

HARDWARE = ROOT / "configs" / "hardware"
SILICON = ROOT / "configs" / "validation" / "silicon"


def test_size_is_scalesims_compute_cycles_on_one_128x128_array() -> None:
    m, n, k = np.array([1, 200]), np.array([1, 300]), np.array([1, 129])
    # (384 + 1 - 2) * 1 * 1 - 1 and (384 + 200 - 2) * 3 * 2 - 1
    assert size_cycles(m, n, k).tolist() == [382, 3491]
    assert size_class(np.array([9999, 10000, 999_999, 1_000_000]), "1e4-1e5").tolist() == [
        False, True, False, False
    ]  # fmt: skip


def test_malformed_rows_are_reported_together(tmp_path) -> None:
    path = tmp_path / "m.csv"
    path.write_text("M,N,K,dtype,latency_us\n4,0,2,bf16,1.0\n4,4,4,fp32,-2\n4,4,4,bf16,1.5\n")
    with pytest.raises(InputError) as err:
        read_measurements(path, "bf16")
    assert [str(p) for p in err.value.problems] == [
        f"{path}: line 2: N: not an integer in 1..16777216 (got '0')",
        f"{path}: line 3: latency_us: not a positive number (got '-2')",
        f"{path}: line 3: dtype: the hardware computes in bf16 (got 'fp32')",
    ]


def test_bundled_measurements_load() -> None:
    v6e = read_measurements(SILICON / "tpu_v6e_gemm_train.csv", "bf16")
    v4 = read_measurements(SILICON / "tpu_v4_gemm_train.csv", "bf16")
    assert (len(v6e), len(v4)) == (630, 260)
    assert (v6e.m[0], v6e.n[0], v6e.k[0], v6e.latency_us[0]) == (69, 4844, 174, 1.9639)


def test_mape() -> None:
    assert mape(np.array([1.1, 1.8]), np.array([1.0, 2.0])) == pytest.approx(10.0)


def test_simplex_finds_a_minimum_inside_the_box() -> None:
    found = minimize(lambda x: float(((x - [0.3, 0.7]) ** 2).sum()), np.array([0.9, 0.1]))
    assert found.x == pytest.approx([0.3, 0.7], abs=1e-3)
    # a minimum outside the box stops on its face
    edge = minimize(lambda x: float(((x - [1.5, 0.5]) ** 2).sum()), np.array([0.2, 0.2]))
    assert edge.x == pytest.approx([1.0, 0.5], abs=1e-3)


def test_ranges_outside_physics_are_refused() -> None:
    hw = load_hardware(HARDWARE / "tpu_v6e.yaml")
    with pytest.raises(InputError) as err:
        check_request(
            hw,
            ["array_efficiency", "speed"],
            {"array_efficiency": (0.5, 1.2)},
            "calibrate",
        )
    assert str(err.value).splitlines() == [
        "calibrate: --fit: unknown parameter (known: op_overhead_us, array_efficiency,"
        " read_bandwidth_gb_s, write_bandwidth_gb_s) (got 'speed')",
        "calibrate: --range array_efficiency: must lie inside its physical range 0.25 to 1"
        " and not be empty (got [0.5, 1.2])",
    ]


def test_a_fit_keeps_every_level_of_a_hierarchy_at_its_rates() -> None:
    sets = [
        "interconnect.levels=[{topology: switch, dims: [2], bandwidth_bytes_per_cycle: 10,"
        " latency_cycles: 500}]"
    ]
    hw = load_hardware(HARDWARE / "tpu_v4.yaml", parse_sets(sets))
    values = {
        "op_overhead_us": 0.5,
        "array_efficiency": 0.8,
        "read_bandwidth_gb_s": 2400.0,
        "write_bandwidth_gb_s": 600.0,
    }
    (level,) = fitted_hardware(hw, values).interconnect.levels
    assert (level.bandwidth_bytes_per_cycle, level.latency_cycles) == (12.5, 400)


def test_the_fitted_file_holds_the_fitted_values() -> None:
    hw = load_hardware(HARDWARE / "tpu_v4.yaml")
    values = {
        "op_overhead_us": 0.5,
        "array_efficiency": 0.8,
        "read_bandwidth_gb_s": 2400.0,
        "write_bandwidth_gb_s": 600.0,
    }
    fitted = fitted_hardware(hw, values)
    assert fitted.clock_mhz == 840.0
    assert fitted.timing.op_overhead_cycles == 420  # 0.5 us at 840 MHz
    # the HBM's 1,142.9 and the links' 47.6 B/cycle and 1,000 cycles at 1,050 MHz keep
    # their rates and times at 840 MHz, the torus kept
    assert fitted.dram.bandwidth_bytes_per_cycle == pytest.approx(1142.9 * 1.25, abs=1e-3)
    assert fitted.interconnect.bandwidth_bytes_per_cycle == pytest.approx(47.6 * 1.25, abs=1e-3)
    assert fitted.interconnect.latency_cycles == 800
    assert fitted.interconnect.dims == (4, 4, 4)
    assert fitted.dram.read_bandwidth_bytes_per_cycle == pytest.approx(2400e3 / 840, abs=1e-3)
    assert fitted.dram.write_bandwidth_bytes_per_cycle == pytest.approx(600e3 / 840, abs=1e-3)
    assert physical(fitted, {}).clock_mhz == 840.0


@pytest.fixture(scope="module")
def v4_fit() -> tuple:
    hw = load_hardware(HARDWARE / "tpu_v4.yaml")
    gemms = read_measurements(SILICON / "tpu_v4_gemm_train.csv", "bf16")
    features = gemm_features(hw, gemms, True, PsumPolicy.CHUNK)
    result = fit(hw, features, gemms, parameters(hw))
    return hw, gemms, features, result


def test_a_fit_improves_on_the_preset_and_stays_in_range(v4_fit) -> None:
    hw, gemms, features, result = v4_fit
    before = mape(predict_us(features, physical(hw, {})), gemms.latency_us)
    assert result.training_mape < before / 2
    for p in parameters(hw):
        assert p.low <= result.values[p.name] <= p.high


def test_a_calibrated_preset_never_beats_its_compute_bound(v4_fit) -> None:
    hw, gemms, _, result = v4_fit
    fitted = fitted_hardware(hw, result.values)
    rng = np.random.default_rng(0)
    dims = rng.integers(1, 8192, size=(3, 200))
    shapes = Measurements(
        np.concatenate([gemms.m, dims[0]]),
        np.concatenate([gemms.n, dims[1]]),
        np.concatenate([gemms.k, dims[2]]),
        np.ones(len(gemms) + 200),
    )
    for overlap in (False, True):
        predicted = engine_us(fitted, shapes, overlap, PsumPolicy.CHUNK)
        bound = compute_bound_us(gemm_features(fitted, shapes, overlap, PsumPolicy.CHUNK),
                                 fitted.clock_mhz)  # fmt: skip
        assert (predicted >= bound).all()
        assert float((predicted / bound).min()) < 1.2  # and the bound is reached closely


def test_the_closed_form_is_the_engines_lone_gemm(v4_fit) -> None:
    # The fitted file (fitted values rounded into it) costed again, so the closed form
    # and the engine price the same bandwidths; they differ by the engine's whole cycles.
    hw, gemms, _, result = v4_fit
    fitted = fitted_hardware(hw, result.values)
    dims = np.random.default_rng(1).integers(1, 6000, size=(3, 100))
    shapes = Measurements(dims[0], dims[1], dims[2], np.ones(100))
    for measured in (gemms, shapes):
        closed = predict_us(gemm_features(fitted, measured, True, PsumPolicy.CHUNK),
                            physical(fitted, {}))  # fmt: skip
        ratio = engine_us(fitted, measured, True) / closed
        assert ratio.min() > 0.999 and ratio.max() < 1.003


@pytest.mark.parametrize(("chip", "training_mape"), [("v4", 13.4), ("v6e", 9.5)])
def test_the_shipped_calibrated_presets_never_beat_their_compute_bound(
    chip: str, training_mape: float
) -> None:
    hw = load_hardware(HARDWARE / f"tpu_{chip}_calibrated.yaml")
    gemms = read_measurements(SILICON / f"tpu_{chip}_gemm_train.csv", "bf16")
    predicted = engine_us(hw, gemms, True)
    bound = compute_bound_us(gemm_features(hw, gemms, True, PsumPolicy.CHUNK), hw.clock_mhz)
    assert (predicted >= bound).all()
    # as docs/validation-silicon.md reports
    assert mape(predicted, gemms.latency_us) == pytest.approx(training_mape, abs=0.05)


def test_calibrate_writes_a_file_layer_uses(tmp_path, capsys) -> None:
    out = tmp_path / "fitted.yaml"
    args = ["calibrate", str(SILICON / "tpu_v4_gemm_train.csv"), "--hardware",
            str(HARDWARE / "tpu_v4.yaml"), "--out", str(out), "--fold-overlap",
            "--fit", "op_overhead_us,write_bandwidth_gb_s"]  # fmt: skip
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "op_overhead_us" in printed and "array_efficiency" not in printed.split("MAPE")[0]
    # v4's training half has no GEMM above 1e6 cycles (the fifth class): it shows no error
    table = {line[:28].strip(): line[28:].split() for line in printed.splitlines()}
    assert table["GEMMs"][4] == "0" and table["fitted, closed form"][4] == "-"
    fitted = load_hardware(out)
    assert fitted.clock_mhz == 1050  # not fitted
    assert fitted.timing.op_overhead_cycles > 0
    assert main(["layer", "--hardware", str(out), "--gemm", "64", "64", "64",
                 "--fold-overlap", "--json"]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["layer", "--hardware", str(out), "--gemm", "64", "64", "64"]) == 0
    assert "m=64 n=64 k=64 (fwd) on 8 x 128x128 ws, accelsim" in capsys.readouterr().out


@pytest.mark.slow
def test_a_held_out_prediction_never_sees_its_own_measurement() -> None:
    # 40 GEMMs in 4 folds: doubling one GEMM's measured latency moves no prediction of
    # its own fold (fitted without it) and every prediction of the other folds' GEMMs
    # may move (their fits saw it).
    hw = load_hardware(HARDWARE / "tpu_v4.yaml")
    gemms = read_measurements(SILICON / "tpu_v4_gemm_train.csv", "bf16").subset(np.arange(40))
    before = cross_validated(calibrate(hw, gemms, fold_overlap=True), 4)
    changed = gemms.subset(np.arange(40))
    changed.latency_us[7] *= 2
    after = cross_validated(calibrate(hw, changed, fold_overlap=True), 4)
    fold = next(f for f in np.array_split(np.random.default_rng(0).permutation(40), 4) if 7 in f)
    np.testing.assert_array_equal(after[fold], before[fold])
    assert not np.array_equal(np.delete(after, fold), np.delete(before, fold))


def test_calibrate_prints_a_cross_validation_and_refuses_too_few_folds(tmp_path, capsys) -> None:
    out = tmp_path / "fitted.yaml"
    args = ["calibrate", str(SILICON / "tpu_v4_gemm_train.csv"), "--hardware",
            str(HARDWARE / "tpu_v4.yaml"), "--out", str(out)]  # fmt: skip
    assert main([*args, "--folds", "1"]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("calibrate: --folds: must be 2 to 20 (each fold is one more fit) (got 1)")
    )
    assert not out.exists()
    assert main([*args, "--folds", "5"]) == 0
    held = next(line for line in capsys.readouterr().out.splitlines() if "5-fold" in line)
    assert held.startswith("held out, 5-fold") and len(held[28:].split()) == 6
