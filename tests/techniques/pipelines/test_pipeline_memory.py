"""What a pipeline schedule keeps in DRAM, against ``dram.capacity_gib``
(techniques/pipelines/memory.py): hand counts on the MLP, the refusal and the report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import simulate_training
from accelsim.errors import ConfigError
from tests.conftest import ROOT
from tests.techniques.pipelines.test_pipelining import pipeline, run_file

# MLP 784-2048-2048-10, batch 16, momentum, PipeDream on 3 stages: fc1 relu1 | fc2 |
# relu2 fc3 loss.  Every parameter element holds a bf16 weight (2 B), a bf16 gradient
# (2 B) and an fp32 momentum (4 B): 8 B.
FC1 = 784 * 2048 + 2048  # 1,607,680 elements
FC2 = 2048 * 2048 + 2048  # 4,196,352
FC3 = 2048 * 10 + 10  # 20,490
# Stage s of 3 keeps 3 - s mini-batches in flight and 2 - s extra weight versions.
# Stashed activations: the input samples (16 x 784 x 2 B, read by fc1's dW) and
# relu1.out (16 x 2048 x 2 B) on stage 0, three in flight; relu2.out and the loss's
# probabilities (16 x 10 x 2 B) on stage 2.
EXPECTED = [
    {
        "parameter_bytes": 8 * FC1,
        "weight_versions": 2,
        "weight_stash_bytes": 2 * 2 * FC1,
        "activation_stash_bytes": 3 * (16 * 784 * 2 + 16 * 2048 * 2),
    },
    {
        "parameter_bytes": 8 * FC2,
        "weight_versions": 1,
        "weight_stash_bytes": 1 * 2 * FC2,
        "activation_stash_bytes": 0,
    },
    {
        "parameter_bytes": 8 * FC3,
        "weight_versions": 0,
        "weight_stash_bytes": 0,
        "activation_stash_bytes": 16 * 2048 * 2 + 16 * 10 * 2,
    },
]
SETS = ["processors=3", "run.techniques={pipedream: {mini_batches: 7}}"]


def train(tmp_path: Path, *sets: str) -> dict[str, object]:
    path = run_file(tmp_path, "mlp", batch=16)
    return pipeline(simulate_training(load_inputs(path, parse_sets([*SETS, *sets]))))


@pytest.mark.parametrize("sharing", ["per_processor", "shared"])
def test_footprint_by_hand(tmp_path: Path, sharing: str) -> None:
    report = train(tmp_path, f"dram.sharing={sharing}")
    rows = report["processors"]
    assert isinstance(rows, list)
    for row, expected in zip(rows, EXPECTED, strict=True):
        assert {k: row[k] for k in expected} == expected
        assert row["footprint_bytes"] == sum(
            v for k, v in expected.items() if k != "weight_versions"
        )
    footprints = [row["footprint_bytes"] for row in rows]
    channels = (
        [{"processors": [p], "footprint_bytes": f, "fits": True} for p, f in enumerate(footprints)]
        if sharing == "per_processor"
        else [{"processors": [0, 1, 2], "footprint_bytes": sum(footprints), "fits": True}]
    )
    assert report["memory"] == {
        "sharing": sharing,
        "capacity_bytes": 16 * 2**30,  # the default 16 GiB per channel
        "channels": channels,
    }
    assert report["fits"] is True
    assert report["warnings"] == []


def test_a_schedule_that_does_not_fit_is_refused(tmp_path: Path) -> None:
    """Processor 1 (fc2) needs 8 x 4,196,352 + 2 x 4,196,352 = 41,963,520 B (40.0 MiB);
    0.039 GiB is 41,875,931 B (39.9 MiB)."""
    with pytest.raises(ConfigError) as raised:
        train(tmp_path, "dram.sharing=per_processor", "dram.capacity_gib=0.039")
    assert str(raised.value).endswith(
        "--set: dram.capacity_gib: pipedream: processor 1 needs 40.0 MiB of DRAM"
        " (weights, gradients and optimizer state 32.0 MiB, weight versions 8.0 MiB, stashed"
        " activations 0.0 MiB), more than the 39.9 MiB of its channel; set on_capacity:"
        " report to simulate it anyway (got 0.039)"
    )


def test_one_shared_channel_holds_every_processor(tmp_path: Path) -> None:
    """Shared DRAM: the three processors' 61,757,328 B (58.9 MiB) against 0.05 GiB
    (51.2 MiB), though each alone would fit."""
    with pytest.raises(
        ConfigError,
        match=r"pipedream: processors 0-2, sharing one channel, need 58\.9 MiB of DRAM"
        r" \(weights, gradients and optimizer state 44\.4 MiB, weight versions 14\.1 MiB,"
        r" stashed activations 0\.3 MiB\), more than the 51\.2 MiB of its channel",
    ):
        train(tmp_path, "dram.capacity_gib=0.05")


def test_on_capacity_report_simulates_and_says_it_does_not_fit(tmp_path: Path) -> None:
    report = train(
        tmp_path, "dram.sharing=per_processor", "dram.capacity_gib=0.039", "run.on_capacity=report"
    )
    assert report["fits"] is False
    memory = report["memory"]
    assert isinstance(memory, dict)
    assert [c["fits"] for c in memory["channels"]] == [True, False, True]
    assert report["warnings"] == [
        "does not fit in DRAM: processor 1 needs 40.0 MiB of DRAM (weights, gradients and"
        " optimizer state 32.0 MiB, weight versions 8.0 MiB, stashed activations 0.0 MiB),"
        " more than the 39.9 MiB of its channel"
    ]


def test_the_cli_refuses_with_exit_2_and_no_traceback(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "accelsim",
            "run",
            str(run_file(tmp_path, "mlp", batch=16)),
            "--out",
            str(tmp_path / "out"),
            *[item for s in [*SETS, "dram.capacity_gib=0.05"] for item in ("--set", s)],
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("--set: dram.capacity_gib: pipedream: processors 0-2")
    assert not (tmp_path / "out" / "pipe").exists()


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("0", "input should be greater than 0"),
        (".inf", "expected a finite number"),
        ("true", "expected a number"),
    ],
)
def test_bad_capacities(tmp_path: Path, value: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=rf"dram\.capacity_gib: {problem}"):
        train(tmp_path, f"dram.capacity_gib={value}")


def test_bad_on_capacity(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"run\.on_capacity: input should be 'error' or 'report' \(got 'warn'\)"
    ):
        train(tmp_path, "run.on_capacity=warn")
