"""accelsim: a cycle-level simulator of DNN training accelerators.

The public API: :func:`simulate` a run file in one call, or follow the data flow
step by step: :func:`load_inputs`, :func:`simulate_training`, :func:`write_run`.
"""

from __future__ import annotations

__version__ = "0.1.0"

from accelsim.api import simulate
from accelsim.driver.inputs import RunInputs, load_inputs
from accelsim.driver.run import simulate_run, simulate_training
from accelsim.errors import (
    AccelsimError,
    ConfigError,
    InputError,
    OutputError,
    SimulationError,
    WorkloadError,
)
from accelsim.report.result import RunResult, TrainingResult
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
    "simulate",
    "simulate_run",
    "simulate_training",
    "write_run",
]
