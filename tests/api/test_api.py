"""The public Python API (``import accelsim``): its names, ``simulate`` and the result records.

``simulate`` must give the numbers ``python -m accelsim run`` writes to
``summary.json`` for the same run file and overrides, and ``import accelsim``
must stay light (no matplotlib, no numba).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import accelsim
from tests.conftest import ROOT as REPO

SMOKE = "configs/runs/smoke.yaml"
MLP = "configs/runs/mlp.yaml"
GP = "run.techniques={gradient_prediction: {}}"
# ``auto`` picks an engine by what the process has loaded and simulated before, and
# summary.json names it: pinned where an in-process run is compared with the CLI.
SIMPY = "timing.engine=simpy"
RECORD_KEYS = {
    "step",
    "total_cycles",
    "seconds",
    "energy_pj",
    "dram_bytes",
    "macs",
    "utilization",
    "interconnect_bytes",
}


def python(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python ARGS`` from the repository root."""
    env = {k: v for k, v in os.environ.items() if k != "ACCELSIM_DEBUG"}
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def cli_summary(out: Path, run_file: str, *sets: str) -> dict[str, Any]:
    """``summary.json`` of ``python -m accelsim run RUN_FILE --set ... --out OUT``."""
    args = [arg for s in sets for arg in ("--set", s)]
    out.mkdir(parents=True, exist_ok=True)
    result = python("-m", "accelsim", "run", run_file, *args, "--out", str(out))
    assert result.returncode == 0, result.stderr
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    summary: dict[str, Any] = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    return summary


def as_json(data: dict[str, Any]) -> Any:
    """``data`` as it reads back from a JSON file."""
    return json.loads(json.dumps(data))


# ------------------------------------------------------------------------- names


def test_every_name_in_all_exists() -> None:
    assert accelsim.__all__ == sorted(accelsim.__all__)
    assert len(set(accelsim.__all__)) == len(accelsim.__all__)
    for name in accelsim.__all__:
        assert getattr(accelsim, name) is not None, name


def test_star_import_works() -> None:
    namespace: dict[str, Any] = {}
    exec("from accelsim import *", namespace)
    assert set(accelsim.__all__) <= namespace.keys()
    assert namespace["simulate"] is accelsim.simulate


@pytest.mark.parametrize("heavy", ["matplotlib", "numba"])
def test_import_accelsim_does_not_import(heavy: str) -> None:
    code = f"import accelsim, sys; assert {heavy!r} not in sys.modules"
    result = python("-c", code)
    assert result.returncode == 0, result.stderr


def test_scripts_import_only_the_public_api() -> None:
    for script in sorted((REPO / "scripts").glob("*.py")):
        text = script.read_text(encoding="utf-8")
        assert "from accelsim." not in text, script.name
        assert "import accelsim." not in text, script.name


# ---------------------------------------------------------------------- simulate


def test_simulate_str_path_matches_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    result = accelsim.simulate(SMOKE, overrides=[SIMPY])
    assert isinstance(result, accelsim.TrainingResult)
    cli = cli_summary(tmp_path, SMOKE, SIMPY)
    assert result.base.total_cycles == cli["total_cycles"]
    assert as_json(result.to_dict()) == cli


def test_simulate_path_with_overrides_matches_the_cli(tmp_path: Path) -> None:
    default = accelsim.simulate(REPO / MLP).base.batch_size
    assert default != 4
    result = accelsim.simulate(REPO / MLP, overrides=["batch_size=4"])
    cli = cli_summary(tmp_path, MLP, "batch_size=4")
    assert result.base.batch_size == 4
    assert result.to_dict()["batch_size"] == cli["batch_size"] == 4
    assert result.base.total_cycles == cli["total_cycles"]


def test_bad_override_raises_config_error_naming_the_key() -> None:
    with pytest.raises(accelsim.ConfigError) as excinfo:
        accelsim.simulate(REPO / SMOKE, overrides=["batch_size=-1"])
    assert any("batch_size" in str(p) for p in excinfo.value.problems)
    assert "batch_size" in str(excinfo.value)


def test_step_by_step_writes_what_the_cli_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    inputs = accelsim.load_inputs(Path(MLP), accelsim.parse_sets(["batch_size=4", GP, SIMPY]))
    result = accelsim.simulate_training(inputs)
    api_dir = accelsim.write_run(result, accelsim.resolved_config(inputs), tmp_path / "api")
    cli_summary(tmp_path / "cli", MLP, "batch_size=4", GP, SIMPY)
    cli_dir = tmp_path / "cli" / api_dir.name
    api_files = sorted(p.relative_to(api_dir) for p in api_dir.rglob("*") if p.is_file())
    cli_files = sorted(p.relative_to(cli_dir) for p in cli_dir.rglob("*") if p.is_file())
    assert api_files == cli_files
    assert Path("steps/gp/summary.json") in api_files
    for name in api_files:
        assert (api_dir / name).read_bytes() == (cli_dir / name).read_bytes(), name


# ----------------------------------------------------------------------- records


def test_to_dict_is_the_summary() -> None:
    result = accelsim.simulate(REPO / SMOKE)
    assert result.to_dict() == result.summary()


def test_records_of_a_run_without_techniques() -> None:
    result = accelsim.simulate(REPO / SMOKE)
    (record,) = result.to_records()
    summary = result.base.summary()
    assert record == {
        "step": "base",
        "total_cycles": summary["total_cycles"],
        "seconds": summary["seconds"],
        "energy_pj": summary["energy_pj"]["total"],
        "dram_bytes": summary["dram_bytes"]["total"],
        "macs": summary["macs"]["total"],
        "utilization": summary["utilization"],
        "interconnect_bytes": summary["interconnect_bytes"],
    }


def test_records_of_gradient_prediction_match_the_cli(tmp_path: Path) -> None:
    result = accelsim.simulate(REPO / MLP, overrides=[GP, SIMPY])
    records = result.to_records()
    assert len(records) == 1 + len(result.steps)
    assert [r["step"] for r in records] == ["base", "bp", "gp"]
    for record in records:
        assert record.keys() == RECORD_KEYS
        assert all(isinstance(v, int | float) for k, v in record.items() if k != "step")
    for record, step in zip(records[1:], result.steps.values(), strict=True):
        assert record["total_cycles"] == step.total_cycles
        assert record["dram_bytes"] == step.dram_bytes
    cli = cli_summary(tmp_path, MLP, GP, SIMPY)
    assert as_json(result.to_dict()) == cli
    assert records[0]["total_cycles"] == cli["total_cycles"]
    assert {k: v["cycles"] for k, v in cli["training"]["steps"].items()} == {
        r["step"]: r["total_cycles"] for r in records
    }


def test_collective_cycles_times_every_kind_as_the_network_page_shows() -> None:
    """docs/model/network.md's example: 6144 B on a 2x4 torus at 64 B/cycle without
    latency.  multi_dim: 48 cycles along dimension 0 (half the buffer), 18 along
    dimension 1 (two rings of 3 steps of 384 B), the all-reduce both ways.  A ring
    over 0..7: an all-to-all's step k passes (8 - k) x 768 B, each link once a step:
    12 x (7 + 6 + ... + 1) = 336; a broadcast 7 hops of 6144 B: 7 x 96 = 672."""
    torus = {
        "topology": "torus",
        "dims": [2, 4],
        "bandwidth_bytes_per_cycle": 64,
        "latency_cycles": 0,
    }
    cycles = {
        kind: accelsim.collective_cycles(torus, 8, kind, 6144, algorithm)
        for kind, algorithm in (
            ("all_reduce", "multi_dim"),
            ("all_gather", "multi_dim"),
            ("reduce_scatter", "multi_dim"),
            ("all_to_all", "ring"),
            ("broadcast", "ring"),
        )
    }
    assert cycles == {
        "all_reduce": 132,
        "all_gather": 66,
        "reduce_scatter": 66,
        "all_to_all": 336,
        "broadcast": 672,
    }
    # A message from 0 to 1 on a pair: one step of 6144 B.
    assert accelsim.collective_cycles(torus | {"dims": [2]}, 2, "point_to_point", 6144) == 96


def test_collective_cycles_times_a_schedule_and_names_what_is_wrong() -> None:
    """A ring all-reduce of 8 KiB on a one-way ring of 4 at 64 bytes a cycle and 10
    cycles a link: 6 steps of 10 + 2048 / 64; a bad interconnect is a ConfigError, a
    collective the algorithm cannot run or processors the network does not hold a
    ValueError."""
    ring = {"bandwidth_bytes_per_cycle": 64.0, "latency_cycles": 10}
    assert accelsim.collective_cycles(ring, 4, "all_reduce", 8192, "ring") == 6 * (10 + 32)
    with pytest.raises(accelsim.ConfigError):
        accelsim.collective_cycles({"latency_cycles": 10}, 4, "all_reduce", 8192)
    with pytest.raises(ValueError, match="halving_doubling cannot run a all_to_all"):
        accelsim.collective_cycles(ring, 4, "all_to_all", 8192, "halving_doubling")
    torus = {**ring, "topology": "torus", "dims": [2, 2]}
    with pytest.raises(ValueError, match="2 x 2 = 4 processors, not the 8"):
        accelsim.collective_cycles(torus, 8, "all_reduce", 8192)
