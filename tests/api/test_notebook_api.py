"""The notebook API (``load_sweep``, ``load_run``, in-memory sweeps) and where paths
resolve: bundled ``configs/`` and ``workloads/`` from anywhere, ``--set`` files from
the working directory."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

import accelsim
from accelsim import cli
from accelsim.sweep import Executor, Store, plan_sweep, run_sweep
from accelsim.sweep.collect import collect, column_unit
from tests.conftest import ROOT

SMOKE = ROOT / "configs" / "runs" / "smoke.yaml"


def test_an_in_memory_sweep_with_bundled_paths_loads_as_a_dataframe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # nothing named configs/ here: the bundled files are used
    sweep = {
        "name": "rows",
        "base": "configs/runs/smoke.yaml",
        "suite": "configs/suites/default.yaml",
        "models": ["mlp"],
        "grid": {"array.rows": [8, 16]},
    }
    plan = plan_sweep(sweep)
    assert plan.path is None and [p.axes for p in plan.points] == [
        {"model": "mlp", "array.rows": 8},
        {"model": "mlp", "array.rows": 16},
    ]
    directory = run_sweep(plan, tmp_path / "out", Executor()).directory
    with Store(directory) as store:
        assert store.meta()["sweep_file"] is None
    frame = accelsim.load_sweep(directory)
    columns, rows = collect(directory)
    assert list(frame.columns) == columns and len(frame) == 2
    assert frame["array.rows"].tolist() == [8, 16]
    assert frame["total_cycles"].tolist() == [r["total_cycles"] for r in rows]
    alone = accelsim.simulate(SMOKE, ["array.rows=8"])
    assert frame["total_cycles"][0] == alone.base.total_cycles
    units = frame.attrs["units"]
    assert (units["energy_pj"], units["total_cycles"], units["dram_bytes"]) == (
        "pJ",
        "cycles",
        "bytes",
    )
    assert units["dram_bandwidth_bytes_per_cycle"] == "bytes per cycle"
    assert units["utilization"] == "fraction of peak MACs (0 to 1)"
    assert column_unit("energy_reduction").startswith("fraction (0.25 = 25 % saved")
    assert units["model"] == "" and units["array.rows"] == ""
    assert (units["dram_capacity_gib"], units["word_bytes_weights"]) == (
        "GiB",
        "bytes per element",
    )
    assert frame["array_count"].tolist() == [1, 1]


def test_a_sweep_mapping_reports_problems_against_its_own_name() -> None:
    with pytest.raises(accelsim.ConfigError) as caught:
        plan_sweep({"name": "x", "base": "nowhere.yaml", "grid": {"array.rows": [8]}})
    assert str(caught.value) == "<sweep>: base: file not found (got 'nowhere.yaml')"


def test_load_run_reads_the_summary_and_the_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gp = "run.techniques={gradient_prediction: {}}"
    assert cli.main(["run", str(SMOKE), "--out", str(tmp_path), "--set", gp]) == 0
    capsys.readouterr()
    run = accelsim.load_run(tmp_path / "mlp_smoke_gradient_prediction")
    assert run.summary["total_cycles"] == run.ops["end_cycle"].max()
    energy = run.summary["energy_pj"]
    assert math.isclose(
        run.ops["energy_pj"].sum() + energy["by_component"]["static"], energy["total"]
    )
    assert run.layers["layer"].tolist()[0] == "fc1"
    assert sorted(run.steps) == ["bp", "gp"]
    assert run.steps["gp"].steps == {}
    assert run.summary["training"]["techniques"] == ["gradient_prediction"]
    with pytest.raises(accelsim.InputError) as caught:
        accelsim.load_run(tmp_path)
    assert str(caught.value).startswith(
        f"{tmp_path}: not a readable run directory: No such file or directory"
    )


def test_simulate_finds_bundled_configs_from_any_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = accelsim.simulate(SMOKE).base.total_cycles
    monkeypatch.chdir(tmp_path)
    assert accelsim.simulate("configs/runs/smoke.yaml").base.total_cycles == here


def test_set_workload_is_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(ROOT / "workloads" / "mlp_dropout.yaml", tmp_path / "mine.yaml")
    monkeypatch.chdir(tmp_path)
    out = ["--out", str(tmp_path / "out")]
    assert cli.main(["run", str(SMOKE), *out, "--set", "workload=mine.yaml"]) == 0
    assert (tmp_path / "out" / "mlp_dropout_smoke" / "summary.json").is_file()
    # A bundled workload by its package path, from a directory without one.
    assert cli.main(["run", str(SMOKE), *out, "--set", "workload=workloads/lstm_ptb.yaml"]) == 0
    assert (tmp_path / "out" / "lstm_ptb_smoke" / "summary.json").is_file()
    capsys.readouterr()
    assert cli.main(["run", str(SMOKE), *out, "--set", "hardware=nope.yaml"]) == 2
    assert capsys.readouterr().err == "--set: hardware: file not found (got 'nope.yaml')\n"


def test_init_copies_the_inputs_with_working_references(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"
    assert cli.main(["init", str(project)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        f"wrote {project}/: configs/ (8 run files), workloads/ (26 models)"
    )
    # The copies are what runs: the run file's hardware reference names the copy.
    hardware = project / "configs" / "hardware" / "scalesim.yaml"
    hardware.write_text(
        hardware.read_text(encoding="utf-8").replace("rows: 32", "rows: 24"), encoding="utf-8"
    )
    monkeypatch.chdir(project)
    assert cli.main(["run", "configs/runs/smoke.yaml", "--out", "out"]) == 0
    summary = accelsim.load_run(project / "out" / "mlp_smoke").summary
    assert (summary["design"]["rows"], summary["design"]["cols"]) == (24, 32)
    capsys.readouterr()
    assert cli.main(["init", str(project)]) == 2
    assert capsys.readouterr().err == (
        f"{project}: already holds configs/ and workloads/; choose a new directory\n"
    )
