"""A calibrated hardware file's ``calibrated_under``: the run settings it was fitted
under, taken by every command, and a conflicting setting or flag refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

from accelsim.calibration.measurements import read_measurements
from accelsim.calibration.model import engine_us
from accelsim.cli import main
from accelsim.config.loader import Override, load_hardware, parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.errors import ConfigError
from tests.conftest import ROOT

HARDWARE = ROOT / "configs" / "hardware"
V6E = HARDWARE / "tpu_v6e_calibrated.yaml"
SHOWN_V6E = "configs/hardware/tpu_v6e_calibrated.yaml"
SILICON = ROOT / "configs" / "validation" / "silicon"


def _set(key: str, value: object) -> Override:
    return Override(key, value, "--set", key)


def test_the_calibrated_presets_record_how_they_were_fitted() -> None:
    for chip in ("tpu_v6e", "tpu_v4"):
        hw = load_hardware(HARDWARE / f"{chip}_calibrated.yaml")
        assert hw.calibrated_settings == {"timing.fold_overlap": True, "timing.psums": "chunk"}
    assert load_hardware(HARDWARE / "tpu_v6e.yaml").calibrated_settings == {}


def test_a_record_names_only_run_settings_with_their_values() -> None:
    with pytest.raises(ConfigError) as err:
        load_hardware(V6E, [_set("calibrated_under.timing.fold_overlap", "x")])
    assert str(err.value.problems[0]) == (
        "--set: calibrated_under.timing.fold_overlap: not a value of timing.fold_overlap:"
        " Input should be a valid boolean (got 'x')"
    )
    with pytest.raises(ConfigError) as err:
        load_hardware(V6E, [_set("calibrated_under.mapping.orientation", "best")])
    assert str(err.value.problems[0]).startswith(
        "--set: calibrated_under.mapping.orientation: not a run setting of timing or"
        " lowering (known: timing.convention, timing.psums, timing.fold_overlap,"
    )


def _run(*sets: str):  # type: ignore[no-untyped-def]
    return load_inputs(
        ROOT / "configs" / "runs" / "gpt2_small.yaml",
        parse_sets([f"hardware={V6E}", *sets]),
    )


def test_a_run_takes_the_recorded_settings_it_leaves_unset() -> None:
    inputs = _run()
    assert inputs.run.timing.fold_overlap is True
    assert inputs.run.timing.psums.value == "chunk"
    assert _run("timing.fold_overlap=true").run.timing.fold_overlap is True  # the same: fine


def test_a_run_setting_another_value_is_refused_where_it_was_set(tmp_path) -> None:
    with pytest.raises(ConfigError) as err:
        _run("timing.fold_overlap=false", "timing.psums=spill")
    assert [str(p) for p in err.value.problems] == [
        f"--set: timing.fold_overlap: {SHOWN_V6E} was calibrated with timing.fold_overlap: true"
        " (its calibrated_under); leave it unset, or use another hardware file (got False)",
        f"--set: timing.psums: {SHOWN_V6E} was calibrated with timing.psums: chunk"
        " (its calibrated_under); leave it unset, or use another hardware file (got 'spill')",
    ]
    run = tmp_path / "run.yaml"
    run.write_text(
        f"name: r\nhardware: {V6E}\nworkload: {ROOT / 'workloads' / 'mlp.yaml'}\n"
        f"energy: {ROOT / 'configs' / 'energy' / 'horowitz45.yaml'}\n"
        "timing: {fold_overlap: false}\n"
    )
    with pytest.raises(ConfigError) as err:
        load_inputs(run)
    assert str(err.value.problems[0]).startswith(
        f"{run}: timing.fold_overlap: {SHOWN_V6E} was calibrated with timing.fold_overlap: true"
    )


def test_a_run_that_cannot_take_the_record_is_told_why() -> None:
    with pytest.raises(ConfigError) as err:
        _run("timing.convention=scalesim")
    assert str(err.value.problems[0]).startswith(
        f"{SHOWN_V6E}: calibrated_under.timing: the run cannot take the settings the file was"
        " calibrated with:"
    )


def test_layer_takes_the_record_and_refuses_a_conflicting_flag(capsys) -> None:
    args = ["layer", "--hardware", str(V6E), "--gemm", "512", "512", "512", "--json"]
    assert main(args) == 0
    record = json.loads(capsys.readouterr().out)
    assert (record["fold_overlap"], record["psums"]) == (True, "chunk")
    assert main([*args, "--no-fold-overlap"]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(
            f"{SHOWN_V6E}: calibrated_under.timing.fold_overlap: the file was calibrated with"
            " timing.fold_overlap: true; --no-fold-overlap asks for another value (use the file"
            " as it was fitted, or another hardware file) (got False)"
        )
    )
    assert main([*args, "--psums", "spill"]) == 2
    assert "calibrated_under.timing.psums" in capsys.readouterr().err
    assert main(["layer", "--hardware", str(HARDWARE / "tpu_v6e.yaml"), "--gemm", "8", "8", "8",
                 "--json"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["fold_overlap"] is False


def test_layer_on_training_rows_gives_the_pages_per_row_prediction(tmp_path, capsys) -> None:
    # the page's calibrated rows: each GEMM timed alone on the preset with fold overlap
    gemms = read_measurements(SILICON / "tpu_v6e_gemm_train.csv", "bf16")
    rows = np.arange(0, len(gemms), 90)
    sample = gemms.subset(rows)
    page = engine_us(load_hardware(V6E), sample, True)
    topology = tmp_path / "rows.csv"
    topology.write_text(
        "Layer, M, N, K,\n"
        + "".join(f"g{i}, {m}, {n}, {k},\n" for i, (m, n, k) in
                  enumerate(zip(sample.m, sample.n, sample.k, strict=True)))
    )  # fmt: skip
    assert main(["layer", "--hardware", str(V6E), "--topology", str(topology), "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    clock = load_hardware(V6E).clock_mhz
    np.testing.assert_allclose([r["total_cycles"] / clock for r in records], page, rtol=1e-12)


def test_a_refit_keeps_the_record_and_refuses_a_conflicting_flag(tmp_path, capsys) -> None:
    out = tmp_path / "refit.yaml"
    args = ["calibrate", str(SILICON / "tpu_v4_gemm_train.csv"), "--hardware",
            str(HARDWARE / "tpu_v4_calibrated.yaml"), "--out", str(out),
            "--fit", "op_overhead_us"]  # fmt: skip
    assert main([*args, "--no-fold-overlap"]) == 2
    assert "calibrated_under.timing.fold_overlap" in capsys.readouterr().err
    assert not out.exists()
    assert main(args) == 0
    assert load_hardware(out).calibrated_settings == {
        "timing.fold_overlap": True,
        "timing.psums": "chunk",
    }
