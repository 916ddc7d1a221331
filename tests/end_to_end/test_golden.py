"""Golden end-to-end runs: whole-step numbers must not drift without a reason.

The expected files in ``tests/golden/`` are written by
``scripts/update_golden.py``; a failing test means the model changed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import simulate_run
from tests.conftest import ROOT

GOLDEN = ROOT / "tests" / "golden"

# name -> (run file, --set overrides)
CASES: dict[str, tuple[str, list[str]]] = {
    "smoke": ("configs/runs/smoke.yaml", []),
    "mlp_adam_b128": ("configs/runs/mlp.yaml", []),
    "resnet18_b4": ("configs/runs/default.yaml", ["batch_size=4"]),
    "resnet18_b4_os_scalesim_2proc": (
        "configs/runs/default.yaml",
        [
            "batch_size=4",
            "array.dataflow=os",
            "timing.convention=scalesim",
            "processors=2",
            "assignment=data_parallel",
        ],
    ),
}


def golden_path(name: str) -> Path:
    return GOLDEN / f"{name}.json"


def golden_record(name: str) -> dict[str, Any]:
    """The numbers of case ``name`` that the golden file pins."""
    run_file, sets = CASES[name]
    summary = simulate_run(load_inputs(ROOT / run_file, parse_sets(sets))).summary()
    return _flatten(
        {
            "total_cycles": summary["total_cycles"],
            "macs": summary["macs"],
            "vector_ops": summary["vector_ops"],
            "array_stall_cycles": summary["array_stall_cycles"],
            "dram_bytes": summary["dram_bytes"],
            "interconnect_bytes": summary["interconnect_bytes"],
            "stash": summary["stash"],
            "energy_pj": summary["energy_pj"]["by_component"],
        }
    )


def _flatten(record: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in record.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


@pytest.mark.parametrize("kernels", ["numpy", "numba"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str, kernels: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both implementations of the fold-level closed forms give the pinned numbers."""
    monkeypatch.setenv("ACCELSIM_KERNELS", kernels)
    expected = json.loads(golden_path(name).read_text())
    assert golden_record(name) == pytest.approx(expected, rel=1e-9)
