"""Shared fixtures: the repository root and small hardware/energy specs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from accelsim.config.energy import EnergyTable
from accelsim.config.hardware import HardwareSpec
from accelsim.config.loader import load_energy, load_hardware, read_yaml
from accelsim.config.validate import validate_data

ROOT = Path(__file__).resolve().parents[1]


def make_hw(**changes: Any) -> HardwareSpec:
    """The default hardware with dotted-key changes, e.g. ``make_hw(**{"array.rows": 8})``."""
    data = read_yaml(ROOT / "configs" / "hardware" / "default.yaml")
    for key, value in changes.items():
        target = data
        *parents, last = key.split(".")
        for part in parents:
            target = target[part]
        target[last] = value
    return validate_data(HardwareSpec, data, "test")


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture
def default_hw() -> HardwareSpec:
    return load_hardware(ROOT / "configs" / "hardware" / "default.yaml")


@pytest.fixture
def energy_table() -> EnergyTable:
    return load_energy(ROOT / "configs" / "energy" / "horowitz45.yaml")
