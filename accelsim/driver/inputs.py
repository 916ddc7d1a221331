"""Load a run: the run file and every file it references, validated together.

Everything that can be checked without simulating is checked here, techniques'
settings included, so ``accelsim check`` and ``accelsim run`` reject the same
inputs before any simulation starts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from accelsim.config.energy import EnergyTable
from accelsim.config.hardware import HardwareSpec
from accelsim.config.loader import (
    Override,
    display_path,
    dump_yaml,
    load_energy_with_origins,
    load_hardware,
    load_suite,
    read_yaml,
)
from accelsim.config.run import AssignmentPolicy, RunSpec
from accelsim.config.run_file import RunFile, load_run_file
from accelsim.config.validate import suggest
from accelsim.energy.model import check_table
from accelsim.errors import ConfigError, InputError, Problem, WorkloadError
from accelsim.lowering.infer import load_model
from accelsim.lowering.shapes import LayerInfo
from accelsim.mapping.units import ArrayUnit
from accelsim.techniques.base import LoadContext, Technique
from accelsim.techniques.registry import compose_problems, load_techniques
from accelsim.workload.model import Workload

T = TypeVar("T")


@dataclass(frozen=True)
class RunInputs:
    """Everything a run needs, loaded and validated."""

    run_file: RunFile
    hardware: HardwareSpec
    energy: EnergyTable
    workload: Workload
    infos: tuple[LayerInfo, ...]
    techniques: tuple[Technique, ...] = ()

    @property
    def run(self) -> RunSpec:
        return self.run_file.run

    @property
    def extra_arrays(self) -> tuple[ArrayUnit, ...]:
        """Array units the techniques add to every processor."""
        return tuple(a for t in self.techniques for a in t.add_components(self.hardware))

    @property
    def source(self) -> str:
        """The run file, as error messages name it."""
        return display_path(self.run_file.path)


def load_inputs(path: Path, sets: list[Override] | None = None) -> RunInputs:
    """Load a run file and every file it references, reporting all their problems at once.

    Raises:
        ConfigError: for problems in the run, hardware or energy files (with any
            workload problems found too).
        WorkloadError: when only the workload file has problems.
    """
    run_file = load_run_file(path, sets)
    errors: list[InputError] = []

    def attempt(load: Callable[[Path, list[Override]], T], target: Path, section: str) -> T | None:
        try:
            return load(target, run_file.overrides[section])
        except InputError as exc:
            errors.append(exc)
            return None

    hardware = attempt(load_hardware, run_file.hardware_path, "hardware")
    priced = attempt(load_energy_with_origins, run_file.energy_path, "energy")
    variant = run_file.run.workload_variant
    chosen = (
        None
        if variant is None
        else Override("workload_variant", variant, *run_file.origins.locate("workload_variant"))
    )
    model = attempt(lambda p, o: load_model(p, o, chosen), run_file.workload_path, "workload")
    if errors or hardware is None or priced is None or model is None:
        raise type(errors[0])([p for e in errors for p in e.problems])
    energy, energy_origins = priced
    workload, infos = model
    source = display_path(run_file.path)
    try:
        techniques = load_techniques(run_file.run.techniques, source)
    except ConfigError as exc:
        raise ConfigError(run_file.origins.blame(exc.problems)) from None
    load = LoadContext(run_file.run, run_file.path, hardware, tuple(infos), tuple(techniques))
    problems = [
        *_run_problems(run_file.run, hardware, source),
        *compose_problems(techniques, source),
        *(p for t in techniques for p in t.validate(load)),
    ]
    if problems:
        # Checked after the run file's own validation: blamed the same way, on
        # the place that wrote each value (``--set KEY`` or the run file).
        raise ConfigError(run_file.origins.blame(problems))
    inputs = RunInputs(run_file, hardware, energy, workload, tuple(infos), tuple(techniques))
    try:
        check_table(energy, hardware, display_path(run_file.energy_path), inputs.extra_arrays)
    except ConfigError as exc:
        raise ConfigError(energy_origins.blame(exc.problems)) from None
    return inputs


def _run_problems(run: RunSpec, hw: HardwareSpec, source: str) -> list[Problem]:
    """Problems of the run's own settings with this hardware."""
    if run.assignment is AssignmentPolicy.DATA_PARALLEL and run.batch_size < hw.processors:
        return [
            Problem(
                source,
                "batch_size",
                f"data_parallel needs at least one sample per processor ({hw.processors})",
                run.batch_size,
            )
        ]
    return []


def resolved_data(inputs: RunInputs) -> dict[str, Any]:
    """Every input after overrides, as plain data: enough to repeat the run."""
    return {
        "run": inputs.run.model_dump(mode="json"),
        "hardware": inputs.hardware.model_dump(mode="json"),
        "energy": inputs.energy.model_dump(mode="json"),
        "workload": inputs.workload.model_dump(mode="json", exclude_none=True),
    }


def resolved_config(inputs: RunInputs) -> str:
    """YAML of every input after overrides: enough to repeat the run.

    Each technique's section lists every one of its settings, the defaults included
    (``gradient_prediction: {}`` becomes its whole configuration), in the order the
    run names them.  (A sweep point's identity hashes :func:`resolved_data`, which
    keeps the sections as written, so it does not change with a technique's
    defaults' spelling.)
    """
    data = resolved_data(inputs)
    configs = {t.name: t.config.model_dump(mode="json") for t in inputs.techniques}
    data["run"]["techniques"] = {name: configs[name] for name in inputs.run.techniques}
    return dump_yaml(data)


@dataclass(frozen=True)
class SuiteEntry:
    """One model of a suite and its workload file."""

    name: str
    workload_path: Path


def suite_entries(suite_path: Path, selected: list[str] | None = None) -> list[SuiteEntry]:
    """The models of a suite file, optionally only those named in ``selected`` (in suite order).

    Raises:
        ConfigError: for a bad suite file or an unknown model name.
    """
    suite = load_suite(suite_path)
    entries = [SuiteEntry(m.name, suite_path.parent / m.workload) for m in suite.models]
    if selected is None:
        return entries
    known = [e.name for e in entries]
    unknown = [name for name in selected if name not in known]
    if unknown:
        raise ConfigError(
            [Problem("--models", "", "unknown model; " + suggest(n, known), n) for n in unknown]
        )
    return [e for e in entries if e.name in selected]


def suite_models(suite_path: Path) -> list[tuple[Workload, list[LayerInfo]]]:
    """Every model of a suite file loaded and its shapes inferred, in suite order.

    Raises:
        InputError: for a bad suite file, or listing the problems of every model's
            workload file at once.
    """
    models = []
    errors: list[InputError] = []
    for entry in suite_entries(suite_path):
        try:
            models.append(load_model(entry.workload_path))
        except InputError as exc:
            errors.append(exc)
    if errors:
        raise type(errors[0])([p for e in errors for p in e.problems])
    return models


def suite_inputs(run_path: Path, entry: SuiteEntry, sets: list[Override]) -> RunInputs:
    """Load the run file with its workload replaced by ``entry``'s.

    A ``workload_variant`` the model does not define (a CIFAR variant for a
    language model, say) is dropped for that model.
    """
    return load_inputs(run_path, model_overrides(run_path, entry.workload_path, sets))


def model_overrides(run_path: Path, workload_path: Path, sets: list[Override]) -> list[Override]:
    """``sets`` followed by the overrides that make ``workload_path`` the run's workload.

    A ``workload_variant`` the model does not define (a CIFAR variant for a
    language model, say) is dropped for that model.
    """
    workload = Override("workload", str(workload_path.resolve()), "suite", "workload")
    run = load_run_file(run_path, [*sets, workload]).run
    variants = read_yaml(workload_path, WorkloadError).get("variants")
    extra = [workload]
    if run.workload_variant is not None and not (
        isinstance(variants, dict) and run.workload_variant in variants
    ):
        extra.append(Override("workload_variant", None, "suite", "workload_variant"))
    return [*sets, *extra]
