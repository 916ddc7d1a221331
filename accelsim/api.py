"""The Python API: simulate a run file in one call.

>>> import accelsim
>>> result = accelsim.simulate("configs/runs/default.yaml", overrides=["batch_size=8"])
>>> result.base.total_cycles  # doctest: +SKIP
>>> result.to_records()       # one flat record per step kind  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from accelsim.config.hardware import HardwareSpec
from accelsim.config.loader import parse_sets
from accelsim.config.validate import validate_data
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import simulate_training
from accelsim.report.result import TrainingResult


def simulate(run_file: str | Path, overrides: Sequence[str] = ()) -> TrainingResult:
    """Load ``run_file`` with ``overrides`` (``key=value`` strings, as ``--set``) and
    simulate the baseline step and every step kind of its techniques.

    Raises:
        ConfigError: for bad run, hardware or energy files or overrides.
        WorkloadError: for a bad workload file.
    """
    return simulate_training(load_inputs(Path(run_file), parse_sets(list(overrides))))


def hardware_from_data(data: Mapping[str, Any], source: str = "<data>") -> HardwareSpec:
    """Validate ``data`` (a hardware file's mapping, e.g. from :func:`read_yaml`) as a
    hardware spec; ``source`` names it in error messages.

    Raises:
        ConfigError: listing every problem in ``data``.
    """
    return validate_data(HardwareSpec, dict(data), source)
