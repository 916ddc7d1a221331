"""A problem found only while simulating is blamed where its value was written: a
pipeline's DRAM capacity check (``techniques/pipelines/``), which runs after the
inputs are loaded, names the override that set ``dram.capacity_gib``, not the run
file (:meth:`accelsim.config.run_file.RunFile.blame`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import simulate_run, simulate_training
from accelsim.errors import ConfigError
from tests.conftest import ROOT
from tests.techniques.pipelines.test_pipelining import run_file

NEED = (
    "gpipe: processors 0-3, sharing one channel, need 44.6 MiB of DRAM (weights, gradients"
    " and optimizer state 44.4 MiB, weight versions 0.0 MiB, stashed activations 0.1 MiB),"
    " more than the 0.0 MiB of its channel; set on_capacity: report to simulate it anyway"
)
GPIPE = ["processors=4", "run.techniques={gpipe: {}}"]


@pytest.mark.parametrize(
    ("sets", "extra", "blamed"),
    [
        (["dram.capacity_gib=1e-300"], "", "--set: dram.capacity_gib"),
        (["hardware.dram.capacity_gib=1e-300"], "", "--set: hardware.dram.capacity_gib"),
        # a mapping set whole, then a key beside the capacity: the mapping wrote it
        (
            ["dram={capacity_gib: 1e-300, bandwidth_bytes_per_cycle: 64}", "dram.latency_cycles=3"],
            "",
            "--set: dram.capacity_gib",
        ),
        (
            ["run.overrides={hardware.dram.capacity_gib: 1e-300}"],
            "",
            "--set: run.overrides.hardware.dram.capacity_gib",
        ),
        (
            [],
            "overrides: {hardware.dram.capacity_gib: 1.0e-300}\n",
            "run.yaml: overrides.hardware.dram.capacity_gib",
        ),
    ],
)
def test_a_capacity_too_small_is_blamed_where_it_was_written(
    tmp_path: Path, sets: list[str], extra: str, blamed: str
) -> None:
    path = run_file(tmp_path, "mlp", batch=16)
    path.write_text(path.read_text(encoding="utf-8") + extra, encoding="utf-8")
    inputs = load_inputs(path, parse_sets([*GPIPE, *sets]))
    with pytest.raises(ConfigError) as raised:
        simulate_training(inputs)
    shown = blamed.replace("run.yaml", str(path))
    assert str(raised.value) == f"{shown}: {NEED} (got 1e-300)"


def test_a_capacity_in_the_hardware_file_stays_on_the_run_file(tmp_path: Path) -> None:
    """No override wrote it: the run file, which puts the schedule on that hardware."""
    hardware = yaml.safe_load((ROOT / "configs/hardware/default.yaml").read_text("utf-8"))
    hardware["dram"]["capacity_gib"] = 1e-300
    small = tmp_path / "small.yaml"
    small.write_text(yaml.safe_dump(hardware), encoding="utf-8")
    path = run_file(tmp_path, "mlp", batch=16)
    path.write_text(path.read_text("utf-8").replace(
        str(ROOT / "configs/hardware/default.yaml"), str(small)), encoding="utf-8")  # fmt: skip
    with pytest.raises(ConfigError) as raised:
        simulate_training(load_inputs(path, parse_sets(GPIPE)))
    assert str(raised.value) == f"{path}: hardware.dram.capacity_gib: {NEED} (got 1e-300)"


def test_a_step_too_large_is_blamed_on_the_batch_size_where_it_was_written() -> None:
    """The step's counts are checked while simulating too (``driver/limits.py``)."""
    sets = parse_sets(
        [
            "workload=workloads/mlp.yaml",
            "batch_size=10000000",
            "workload.layers[fc2].out_features=2000000000",
        ]
    )
    with pytest.raises(ConfigError) as raised:
        simulate_run(load_inputs(ROOT / "configs/runs/default.yaml", sets))
    assert str(raised.value).splitlines()[0] == (
        "--set: batch_size: layer fc2: one op's MACs (4.1e+19) exceed the limit of 2^62"
        " (4.61e+18) of an op's counts; lower the batch size or the workload's layer sizes"
        " (got 10000000)"
    )
