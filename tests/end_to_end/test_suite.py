"""The suite runner and the model list: ``accelsim suite`` and ``accelsim models``."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import suite_entries, suite_inputs
from accelsim.errors import ConfigError
from tests.conftest import ROOT

RUN = ROOT / "configs" / "runs" / "default.yaml"


def small_suite(tmp_path: Path) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(
        "name: small\n"
        "models:\n"
        f"  - {{name: mlp, workload: {ROOT / 'workloads' / 'mlp.yaml'}}}\n"
        f"  - {{name: resnet18, workload: {ROOT / 'workloads' / 'resnet18.yaml'}}}\n",
        encoding="utf-8",
    )
    return path


def accelsim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "accelsim", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def test_suite_writes_one_row_per_model_and_a_plot(tmp_path: Path) -> None:
    suite = small_suite(tmp_path)
    out = tmp_path / "out"
    done = accelsim(
        "suite",
        str(RUN),
        "--suite",
        str(suite),
        "--out",
        str(out),
        "--set",
        "batch_size=4",
        "--set",
        "workload_variant=cifar10",
    )
    assert done.returncode == 0, done.stderr
    target = out / "default"
    with (target / "suite.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [r["model"] for r in rows] == ["mlp", "resnet18"]
    # The MLP has no CIFAR variant, so it runs as defined; ResNet-18 runs its variant.
    assert [r["workload_variant"] for r in rows] == ["", "cifar10"]
    for row in rows:
        summary = json.loads((target / row["model"] / "summary.json").read_text())
        assert int(row["total_cycles"]) == summary["total_cycles"] > 0
        assert summary["batch_size"] == 4
        assert float(row["energy_pj"]) == pytest.approx(summary["energy_pj"]["total"], rel=1e-9)
    assert (target / "suite.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Its stderr is a pipe, no terminal: no progress bar, no carriage return.
    assert done.stderr == "" and "suite total" in done.stdout
    again = accelsim("suite", str(RUN), "--suite", str(suite), "--out", str(out))
    assert again.returncode == 2 and "--force" in again.stderr


def test_suite_models_filter_and_unknown_names(tmp_path: Path) -> None:
    suite = small_suite(tmp_path)
    assert [e.name for e in suite_entries(suite, ["resnet18"])] == ["resnet18"]
    with pytest.raises(
        ConfigError,
        match=r"--models: unknown model; did you mean 'resnet18'\? "
        r"\(got 'resnet19'\)",
    ):
        suite_entries(suite, ["resnet19"])


def test_suite_inputs_replace_the_workload(tmp_path: Path) -> None:
    entry = suite_entries(small_suite(tmp_path), ["mlp"])[0]
    inputs = suite_inputs(RUN, entry, parse_sets(["workload_variant=cifar10"]))
    assert inputs.workload.name == "mlp"
    assert inputs.run.workload_variant is None
    assert inputs.run.name == "default"


def test_models_json(tmp_path: Path) -> None:
    done = accelsim("models", "--suite", str(small_suite(tmp_path)), "--json")
    assert done.returncode == 0, done.stderr
    models = json.loads(done.stdout)
    assert [m["name"] for m in models] == ["mlp", "resnet18"]
    assert {"name", "params", "forward_macs", "training_macs", "layers"} <= set(models[1])
    resnet = models[1]
    assert resnet["params"] == 11_689_512 and resnet["forward_macs"] == 1_814_073_344
    # Training MACs: forward + dW (= forward) + dX (= forward minus conv1, which has none).
    assert resnet["training_macs"] == 3 * 1_814_073_344 - 112 * 112 * 64 * 147
    assert models[0]["layers"] == 6
