"""accelsim: a cycle-level simulator of DNN training accelerators.

The public API: :func:`simulate` a run file in one call, or follow the data flow
step by step: :func:`load_inputs`, :func:`simulate_training`, :func:`write_run`
(with :func:`resolved_config`, the ``resolved_config.yaml`` text). Results are a
:class:`TrainingResult` (``to_dict()``, ``to_records()``), whose ``training`` is
the techniques' :class:`TrainingReport` (a :class:`StepCost` per step kind, each
technique's :class:`Section`).  For notebooks, :func:`load_sweep` reads a sweep's
points as a pandas DataFrame (units in ``attrs["units"]``) and :func:`load_run` a
run directory's summary and tables (:class:`RunTables`).

Also public, for the scripts in ``scripts/``:

* configuration: :func:`parse_sets` (``key=value`` strings to overrides),
  :func:`read_yaml`, :func:`load_energy`, :func:`hardware_from_data` (a
  validated hardware spec from a mapping), :class:`Convention`;
* networks: :func:`collective_cycles` (a collective's cycles on a network
  without contention, by algorithm);
* memory: :func:`step_memory` (one processor's memory by class for a run's plan,
  the step lowered and not simulated, as ``accelsim run --memory-only`` prints it);
* suites: :func:`suite_entries`, :func:`suite_inputs`, :func:`suite_row`,
  :func:`suite_columns`, :func:`write_csv`;
* single layers: :func:`read_topology`, :class:`TopologyLayer`,
  :func:`topology_gemm`, :func:`simulate_layer`, :class:`Phase`;
* means of ratios: :func:`geometric_mean` (speedups), :func:`saving_mean` (savings,
  through their cost ratios);
* plots: :func:`plot_sweep` (``accelsim plot``'s figures of a sweep),
  :func:`plot_speedup`, :func:`plot_sensitivity`, :func:`plot_pipeline_sweep`,
  :func:`plot_dropout_sweep` (matplotlib is imported only when one is called);
* approximate dropout: :func:`write_dropout_distribution` (the SGD search, written
  for a run file's ``distribution:``) and :func:`benchmark_dropout_folds` (its fold
  kernel against the NumPy reference);
* models: :func:`import_model` (an ONNX file or a PyTorch module as a layer table,
  an :class:`ImportResult`), :func:`export_onnx` (a module's training-mode ONNX export,
  as ``import_model`` makes it);
* plan searches: :class:`PlanSearch` (``accelsim plan``'s steps one by one: its
  candidates, their filter, bounds and sweep, the pruned rounds) of a
  :class:`PlanRequest`;
* sweeps: :func:`plan_sweep` (a sweep file's validated points), :func:`run_sweep`
  on an :class:`Executor` (in-process), :class:`PoolExecutor` or
  :class:`DaskExecutor`;
* engines: :func:`benchmark_engines` (the SimPy and compiled event engines on the
  steps of a run, as :class:`EngineTiming`); :func:`simulate_replica_step` (a
  symmetric data-parallel run's step placed, costed and simulated once, one replica
  standing for every processor, as a :class:`ReplicaStep`, or why it cannot be);
* calibration: :func:`read_measurements` (measured GEMM latencies),
  :func:`calibrate` (``accelsim calibrate``'s fit, as a :class:`Calibration`),
  :func:`cross_validated` (each GEMM predicted by a fit on the other folds),
  :func:`gemm_latencies_us` (GEMMs timed as ``accelsim layer`` times them),
  :func:`mape_by_size` (MAPE overall and per size class); for the vector unit,
  :func:`read_vector_measurements` (measured lone vector ops),
  :func:`calibrate_vector_unit` (its fit, as a :class:`VectorCalibration`),
  :func:`cross_validated_vector`, :func:`vector_latencies_us` (ops timed alone by
  the engine's arithmetic) and :func:`vector_mape_by_class` (MAPE per op class).
* documentation: :func:`config_reference` (every key of every input file, with its
  type, unit, default, bounds and description, as Markdown) and
  :func:`provenance_reference` (where each default of a technique comes from).

``import accelsim`` imports none of them: each public name loads its module the
first time it is used (PEP 562), so ``import accelsim`` costs little more than the
interpreter, and a program pays only for what it calls
(``tests/architecture/test_startup.py``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from accelsim._version import __version__

if TYPE_CHECKING:
    from accelsim.api import (
        RunTables,
        collective_cycles,
        hardware_from_data,
        load_run,
        load_sweep,
        plot_sweep,
        simulate,
    )
    from accelsim.calibration.fit import Calibration, calibrate, cross_validated
    from accelsim.calibration.fit import class_errors as mape_by_size
    from accelsim.calibration.measurements import read_measurements
    from accelsim.calibration.model import engine_us as gemm_latencies_us
    from accelsim.calibration.vector_fit import (
        VectorCalibration,
        calibrate_vector_unit,
        cross_validated_vector,
    )
    from accelsim.calibration.vector_fit import engine_vector_us as vector_latencies_us
    from accelsim.calibration.vector_fit import vector_class_errors as vector_mape_by_class
    from accelsim.calibration.vector_ops import read_vector_measurements
    from accelsim.config.base import Convention
    from accelsim.config.loader import load_energy, parse_sets, read_yaml
    from accelsim.driver.bench import EngineTiming, benchmark_engines
    from accelsim.driver.inputs import (
        RunInputs,
        SuiteEntry,
        load_inputs,
        resolved_config,
        suite_entries,
        suite_inputs,
    )
    from accelsim.driver.layer import simulate_layer, topology_gemm
    from accelsim.driver.replica import ReplicaStep, simulate_replica_step
    from accelsim.driver.run import simulate_run, simulate_training, step_memory
    from accelsim.errors import (
        AccelsimError,
        ConfigError,
        GraphError,
        InputError,
        OutputError,
        SimulationError,
        WorkloadError,
    )
    from accelsim.graph.ops import Phase
    from accelsim.importer.model_import import ImportResult, import_model
    from accelsim.importer.torch_source import onnx_bytes as export_onnx
    from accelsim.planner.search import Request as PlanRequest
    from accelsim.planner.session import PlanSearch
    from accelsim.report.means import geometric_mean, saving_mean
    from accelsim.report.plots import plot_sensitivity, plot_speedup
    from accelsim.report.result import RunResult
    from accelsim.report.suite import suite_columns, suite_row
    from accelsim.report.training import Section, StepCost, TrainingReport, TrainingResult
    from accelsim.report.writer import write_csv, write_run
    from accelsim.spec_reference import config_reference, provenance_reference
    from accelsim.sweep import DaskExecutor, Executor, PoolExecutor, plan_sweep, run_sweep
    from accelsim.techniques.dropout.figures import plot_dropout_sweep
    from accelsim.techniques.dropout.folds import benchmark_dropout_folds
    from accelsim.techniques.dropout.patterns import (
        write_distribution as write_dropout_distribution,
    )
    from accelsim.techniques.pipelines.figures import plot_pipeline_sweep
    from accelsim.workload.topology import TopologyLayer, read_topology

# Every public name but __version__, by the module that defines it; each module
# loads when one of its names is first used.
_MODULES = {
    "accelsim.api": (
        "RunTables",
        "collective_cycles",
        "hardware_from_data",
        "load_run",
        "load_sweep",
        "plot_sweep",
        "simulate",
    ),
    "accelsim.calibration.fit": ("Calibration", "calibrate", "cross_validated"),
    "accelsim.calibration.measurements": ("read_measurements",),
    "accelsim.calibration.vector_fit": (
        "VectorCalibration",
        "calibrate_vector_unit",
        "cross_validated_vector",
    ),
    "accelsim.calibration.vector_ops": ("read_vector_measurements",),
    "accelsim.config.base": ("Convention",),
    "accelsim.config.loader": ("load_energy", "parse_sets", "read_yaml"),
    "accelsim.driver.bench": ("EngineTiming", "benchmark_engines"),
    "accelsim.driver.counts": ("write_model_counts",),
    "accelsim.driver.inputs": (
        "RunInputs",
        "SuiteEntry",
        "load_inputs",
        "resolved_config",
        "suite_entries",
        "suite_inputs",
    ),
    "accelsim.driver.layer": ("simulate_layer", "topology_gemm"),
    "accelsim.driver.replica": ("ReplicaStep", "simulate_replica_step"),
    "accelsim.driver.run": ("simulate_run", "simulate_training", "step_memory"),
    "accelsim.errors": (
        "AccelsimError",
        "ConfigError",
        "GraphError",
        "InputError",
        "OutputError",
        "SimulationError",
        "WorkloadError",
    ),
    "accelsim.graph.ops": ("Phase",),
    "accelsim.importer.model_import": ("ImportResult", "import_model"),
    "accelsim.report.means": ("geometric_mean", "saving_mean"),
    "accelsim.planner.session": ("PlanSearch",),
    "accelsim.report.plots": ("plot_sensitivity", "plot_speedup"),
    "accelsim.report.result": ("RunResult",),
    "accelsim.report.suite": ("suite_columns", "suite_row"),
    "accelsim.report.training": ("Section", "StepCost", "TrainingReport", "TrainingResult"),
    "accelsim.report.writer": ("write_csv", "write_run"),
    "accelsim.spec_reference": ("config_reference", "provenance_reference"),
    "accelsim.sweep": ("DaskExecutor", "Executor", "PoolExecutor", "plan_sweep", "run_sweep"),
    "accelsim.techniques.dropout.figures": ("plot_dropout_sweep",),
    "accelsim.techniques.dropout.folds": ("benchmark_dropout_folds",),
    "accelsim.techniques.pipelines.figures": ("plot_pipeline_sweep",),
    "accelsim.workload.topology": ("TopologyLayer", "read_topology"),
}
# Public names defined under another name: public name -> (module, attribute).
_RENAMED = {
    "write_dropout_distribution": ("accelsim.techniques.dropout.patterns", "write_distribution"),
    "export_onnx": ("accelsim.importer.torch_source", "onnx_bytes"),
    "mape_by_size": ("accelsim.calibration.fit", "class_errors"),
    "PlanRequest": ("accelsim.planner.search", "Request"),
    "gemm_latencies_us": ("accelsim.calibration.model", "engine_us"),
    "vector_latencies_us": ("accelsim.calibration.vector_fit", "engine_vector_us"),
    "vector_mape_by_class": ("accelsim.calibration.vector_fit", "vector_class_errors"),
}
_LAZY = {
    **{name: (module, name) for module, names in _MODULES.items() for name in names},
    **_RENAMED,
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'accelsim' has no attribute {name!r}")
    module, attribute = _LAZY[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # later uses skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "AccelsimError",
    "Calibration",
    "ConfigError",
    "Convention",
    "DaskExecutor",
    "EngineTiming",
    "Executor",
    "GraphError",
    "ImportResult",
    "InputError",
    "OutputError",
    "Phase",
    "PlanRequest",
    "PlanSearch",
    "PoolExecutor",
    "ReplicaStep",
    "RunInputs",
    "RunResult",
    "RunTables",
    "Section",
    "SimulationError",
    "StepCost",
    "SuiteEntry",
    "TopologyLayer",
    "TrainingReport",
    "TrainingResult",
    "VectorCalibration",
    "WorkloadError",
    "__version__",
    "benchmark_dropout_folds",
    "benchmark_engines",
    "calibrate",
    "calibrate_vector_unit",
    "collective_cycles",
    "config_reference",
    "cross_validated",
    "cross_validated_vector",
    "export_onnx",
    "gemm_latencies_us",
    "geometric_mean",
    "hardware_from_data",
    "import_model",
    "load_energy",
    "load_inputs",
    "load_run",
    "load_sweep",
    "mape_by_size",
    "parse_sets",
    "plan_sweep",
    "plot_dropout_sweep",
    "plot_pipeline_sweep",
    "plot_sensitivity",
    "plot_speedup",
    "plot_sweep",
    "provenance_reference",
    "read_measurements",
    "read_topology",
    "read_vector_measurements",
    "read_yaml",
    "resolved_config",
    "run_sweep",
    "saving_mean",
    "simulate",
    "simulate_layer",
    "simulate_replica_step",
    "simulate_run",
    "simulate_training",
    "step_memory",
    "suite_columns",
    "suite_entries",
    "suite_inputs",
    "suite_row",
    "topology_gemm",
    "vector_latencies_us",
    "vector_mape_by_class",
    "write_csv",
    "write_dropout_distribution",
    "write_model_counts",
    "write_run",
]
