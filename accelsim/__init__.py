"""accelsim: a cycle-level simulator of DNN training accelerators.

The public API mirrors the data flow: load a run, simulate it, write the result.
"""

from __future__ import annotations

__version__ = "0.1.0"

from accelsim.errors import (
    AccelsimError,
    ConfigError,
    InputError,
    OutputError,
    SimulationError,
    WorkloadError,
)
from accelsim.pipeline import RunInputs, load_inputs, simulate_run
from accelsim.report.result import RunResult
from accelsim.report.writer import write_run

__all__ = [
    "AccelsimError",
    "ConfigError",
    "InputError",
    "OutputError",
    "RunInputs",
    "RunResult",
    "SimulationError",
    "TrainingResult",
    "WorkloadError",
    "__version__",
    "load_inputs",
    "simulate_run",
    "simulate_training",
    "write_run",
]
