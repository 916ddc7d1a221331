"""Load a run: the run file and every file it references, validated together.

Everything that can be checked without simulating is checked here, techniques'
settings included, so ``accelsim check`` and ``accelsim run`` reject the same
inputs before any simulation starts.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from accelsim.config.calibrated import applied, run_problems
from accelsim.config.energy import EnergyTable
from accelsim.config.hardware import HardwareSpec
from accelsim.config.loader import (
    Override,
    display_path,
    dump_yaml,
    load_energy_with_origins,
    load_suite,
    read_yaml,
)
from accelsim.config.overrides import Origins
from accelsim.config.run import AssignmentPolicy, RunMode, RunSpec
from accelsim.config.run_file import RunFile, read_run_file, route_sets
from accelsim.config.sections import validate_by_sections
from accelsim.config.validate import suggest
from accelsim.driver.precision import precision_problems, run_hardware
from accelsim.energy.model import check_table
from accelsim.errors import ConfigError, InputError, Problem, WorkloadError
from accelsim.lowering.infer import load_model
from accelsim.lowering.shapes import LayerInfo
from accelsim.mapping.units import ArrayUnit
from accelsim.resources import bundled_path
from accelsim.techniques.base import GraphRewriter, LoadContext, Technique
from accelsim.techniques.registry import compose_problems, load_techniques
from accelsim.timing.machine import Machine, machine_of
from accelsim.workload.formats import read_table
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
    techniques: tuple[Technique[Any], ...] = ()

    @property
    def run(self) -> RunSpec:
        return self.run_file.run

    @property
    def machine(self) -> Machine:
        """The hardware built (:func:`~accelsim.timing.machine.machine_of`: once per spec)."""
        return machine_of(self.hardware)

    @property
    def extra_arrays(self) -> tuple[ArrayUnit, ...]:
        """Array units the graph rewriters add to every processor."""
        rewriters = [t for t in self.techniques if isinstance(t, GraphRewriter)]
        return tuple(a for t in rewriters for a in t.extra_arrays(self.hardware))

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
    return InputCache().load(path, sets)


CACHED_SECTIONS = 256
"""Validated files an :class:`InputCache` keeps (least recently used dropped first)."""


class InputCache:
    """Loads runs, reading each file once and validating a file's data once per
    distinct list of overrides (the last :data:`CACHED_SECTIONS` kept).

    A sweep loads every point through one cache: its points share the base run
    file and differ in a few keys, so a point of a hardware-only axis validates only
    the hardware file's data again, and points that share a workload get the same
    :class:`~accelsim.workload.model.Workload` and layer shapes (the same objects),
    which lets :mod:`accelsim.driver.run` reuse their lowered step.  Files are read
    at first use and taken as unchanged for the cache's life.  Loading through a
    cache gives what :func:`load_inputs` gives, problems included.
    """

    def __init__(self) -> None:
        self._files: dict[tuple[Path, type[InputError]], dict[str, Any] | InputError] = {}
        self._sections: OrderedDict[Hashable, Any] = OrderedDict()
        self._paths: dict[Path, Path] = {}

    def load(self, path: Path, sets: list[Override] | None = None) -> RunInputs:
        """:func:`load_inputs` through this cache."""
        run_file = self.run_file(path, sets)
        errors: list[InputError] = []

        def attempt(section: str, make: Callable[[list[Override]], T], *key: Hashable) -> T | None:
            overrides = run_file.overrides[section]
            try:
                return self._once((section, *key, _key(overrides)), lambda: make(overrides))
            except InputError as exc:
                errors.append(exc)
                return None

        hw_path, energy_path = run_file.hardware_path, run_file.energy_path
        hardware = attempt("hardware", lambda o: self._hardware(hw_path, o), hw_path)
        priced = attempt(
            "energy",
            lambda o: load_energy_with_origins(energy_path, o, self.data(energy_path)),
            energy_path,
        )
        variant = run_file.run.workload_variant
        chosen = (
            None
            if variant is None
            else Override("workload_variant", variant, *run_file.origins.locate("workload_variant"))
        )
        model = attempt(
            "workload",
            lambda o: self._model(run_file.workload_path, o, chosen),
            run_file.workload_path,
            _key([] if chosen is None else [chosen]),
        )
        if errors or hardware is None or priced is None or model is None:
            raise type(errors[0])([p for e in errors for p in e.problems])
        energy, energy_origins = priced
        workload, infos = model
        run_file = self._calibrated(run_file, hardware, display_path(hw_path))
        return _checked(run_file, hardware, energy, energy_origins, workload, infos)

    def _calibrated(self, run_file: RunFile, hardware: HardwareSpec, source: str) -> RunFile:
        """``run_file`` with the run settings ``hardware`` was calibrated under
        (:mod:`accelsim.config.calibrated`) where it leaves them unset.

        Raises:
            ConfigError: where the run file, an override or ``--set`` sets one of them
                to another value.
        """
        record = hardware.calibrated_settings
        if not record:
            return run_file
        data, origins = self.data(run_file.path), run_file.origins
        written = {}
        for key in record:
            section, _, name = key.partition(".")
            where = origins.locate(key)
            if where[0] != origins.file or name in (data.get(section) or {}):
                written[key] = where
        updates, problems = run_problems(record, source, run_file.run, written)
        if problems:
            raise ConfigError(problems)
        if not updates:
            return run_file
        return replace(run_file, run=applied(run_file.run, updates, source))

    def run_file(self, path: Path, sets: list[Override] | None = None) -> RunFile:
        """:func:`~accelsim.config.run_file.load_run_file` through this cache."""
        path = self._bundled(path)
        routed = route_sets(sets or [])
        run_sets = routed["run"]
        read = self._once(
            ("run", path, _key(run_sets)),
            lambda: read_run_file(path, self.data(path), run_sets),
        )
        return read.with_sets(routed)

    def hardware(self, path: Path) -> HardwareSpec:
        """The hardware file at ``path`` as it is, without any override, through this
        cache (a point of a sweep sets its values beside it).

        Raises:
            ConfigError: when the file alone is not a valid hardware spec.
        """
        return self._once(("hardware", path, _key([])), lambda: self._hardware(path, []))

    def _bundled(self, path: Path) -> Path:
        """:func:`~accelsim.resources.bundled_path`, once per path."""
        found = self._paths.get(path)
        if found is None:
            found = self._paths[path] = bundled_path(path)
        return found

    def data(self, path: Path) -> dict[str, Any]:
        """:func:`~accelsim.config.loader.read_yaml`, once per file (callers must not
        change what it returns)."""
        return self._read((path, ConfigError), lambda: read_yaml(path))

    def workload_data(self, path: Path) -> dict[str, Any]:
        """:func:`~accelsim.workload.formats.read_table` (a YAML layer table or another
        workload file), once per file (callers must not change what it returns)."""
        return self._read((path, WorkloadError), lambda: read_table(path))

    def _read(
        self, key: tuple[Path, type[InputError]], read: Callable[[], dict[str, Any]]
    ) -> dict[str, Any]:
        if key not in self._files:
            try:
                self._files[key] = read()
            except InputError as exc:
                self._files[key] = exc
        known = self._files[key]
        if isinstance(known, InputError):
            raise type(known)(known.problems)
        return known

    def _hardware(self, path: Path, overrides: list[Override]) -> HardwareSpec:
        """:func:`~accelsim.config.loader.load_hardware`, each section the overrides
        touch validated once per distinct set of its overrides
        (:func:`~accelsim.config.sections.validate_by_sections`)."""
        return validate_by_sections(
            HardwareSpec,
            self.data(path),
            display_path(path),
            overrides,
            lambda key, make: self._once(("hardware sections", path, key), make),
        )

    def _model(
        self, path: Path, overrides: list[Override], variant: Override | None
    ) -> tuple[Workload, tuple[LayerInfo, ...]]:
        workload, infos = load_model(path, overrides, variant, self.workload_data(path))
        return workload, tuple(infos)

    def _once(self, key: Hashable, make: Callable[[], T]) -> T:
        """``make()`` once per ``key`` (its :class:`InputError` too, raised again)."""
        sections = self._sections
        if key in sections:
            sections.move_to_end(key)
            made = sections[key]
        else:
            try:
                made = make()
            except InputError as exc:
                made = exc
            sections[key] = made
            if len(sections) > CACHED_SECTIONS:
                sections.popitem(last=False)
        if isinstance(made, InputError):
            raise type(made)(made.problems)
        result: T = made
        return result


def _key(overrides: list[Override]) -> Hashable:
    """What decides a file's data after ``overrides``: each override's key, value
    (typed: ``1``, ``1.0`` and ``true`` differ) and where it was written."""
    return tuple(o.cache_key for o in overrides)


def _checked(
    run_file: RunFile,
    hardware: HardwareSpec,
    energy: EnergyTable,
    energy_origins: Origins,
    workload: Workload,
    infos: tuple[LayerInfo, ...],
) -> RunInputs:
    """The run's inputs, its techniques loaded and every check across files made.

    Raises:
        ConfigError: for the techniques' settings, the run's rules with this hardware,
            or an energy table that lacks a precision the hardware uses.
    """
    source = display_path(run_file.path)
    hardware = run_hardware(run_file, hardware, source)
    try:
        techniques = load_techniques(run_file.run.techniques, source)
    except ConfigError as exc:
        raise ConfigError(run_file.origins.blame(exc.problems)) from None
    load = LoadContext(run_file.run, run_file.path, hardware, infos, tuple(techniques))
    problems = [
        *_run_problems(run_file.run, hardware, source),
        *_mode_problems(run_file.run, techniques, source),
        *precision_problems(hardware, techniques, source),
        *compose_problems(techniques, source),
        *_plan_problems(run_file.run, hardware, infos, techniques, source),
        *(p for t in techniques for p in t.validate(load)),
    ]
    if problems:
        # Checked after the run file's own validation: blamed the same way, on
        # the place that wrote each value (``--set KEY`` or the run file).
        raise ConfigError(run_file.origins.blame(problems))
    inputs = RunInputs(run_file, hardware, energy, workload, infos, tuple(techniques))
    try:
        check_table(energy, hardware, display_path(run_file.energy_path), inputs.extra_arrays)
    except ConfigError as exc:
        raise ConfigError(energy_origins.blame(exc.problems)) from None
    return inputs


def _plan_problems(
    run: RunSpec,
    hardware: HardwareSpec,
    infos: tuple[LayerInfo, ...],
    techniques: Sequence[Technique[Any]],
    source: str,
) -> list[Problem]:
    """What the run's parallel plan cannot run with (nothing without a plan: its
    checks, and the pipeline schedules and placements they import, load only for a
    run that has one)."""
    if run.parallel is None:
        return []
    from accelsim.driver.expert_parallel import expert_problems
    from accelsim.driver.parallel import parallel_problems
    from accelsim.driver.zero import zero_problems

    return [
        *parallel_problems(run, hardware, infos, techniques, source),
        *expert_problems(run, hardware, infos, techniques, source),
        *zero_problems(run, hardware, techniques, source),
    ]


def _mode_problems(
    run: RunSpec, techniques: Sequence[Technique[Any]], source: str
) -> list[Problem]:
    """A technique in a forward pass alone: every one works on a training step."""
    if run.mode is RunMode.TRAINING:
        return []
    return [
        Problem(
            source,
            f"techniques.{t.name}",
            f"not in mode {run.mode.value}, a forward pass alone: {t.trains}",
        )
        for t in techniques
    ]


def _run_problems(run: RunSpec, hw: HardwareSpec, source: str) -> list[Problem]:
    """Problems of the run's own settings with this hardware."""
    # each replica a pipeline of tensor-parallel groups
    plan = run.parallel
    replicas = hw.processors // (1 if plan is None else plan.tensor * plan.pipeline)
    if run.assignment is AssignmentPolicy.DATA_PARALLEL and run.batch_size < replicas:
        per = "processor" if replicas == hw.processors else "replica"
        return [
            Problem(
                source,
                "batch_size",
                f"data_parallel needs at least one sample per {per} ({replicas})",
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


def model_overrides(
    run_path: Path, workload_path: Path, sets: list[Override], cache: InputCache | None = None
) -> list[Override]:
    """``sets`` followed by the overrides that make ``workload_path`` the run's workload
    (files read through ``cache`` when given).

    A ``workload_variant`` the model does not define (a CIFAR variant for a
    language model, say) is dropped for that model.
    """
    files = cache or InputCache()
    workload = Override("workload", str(workload_path.resolve()), "suite", "workload")
    run = files.run_file(run_path, [*sets, workload]).run
    variants = files.workload_data(workload_path).get("variants")
    extra = [workload]
    if run.workload_variant is not None and not (
        isinstance(variants, dict) and run.workload_variant in variants
    ):
        extra.append(Override("workload_variant", None, "suite", "workload_variant"))
    return [*sets, *extra]
