"""Expand a sweep file into points, validate every point, and name each by its identity.

A point is the base run file plus one ``--set``-style override per axis (and the
sweep's fixed ``set`` keys).  Every point is loaded exactly as ``accelsim run``
would load it before any is simulated; all their problems are reported together,
each blamed on the sweep file's key that chose the bad value.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import math
import secrets
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from accelsim.collections_policy import fewer_collections
from accelsim.config.loader import Override, display_path, read_yaml
from accelsim.config.sections import nested_sections
from accelsim.config.validate import validate_data
from accelsim.driver.inputs import InputCache, RunInputs, model_overrides, suite_entries
from accelsim.errors import ConfigError, InputError, Problem
from accelsim.provenance import version
from accelsim.resources import bundled_path
from accelsim.sweep.processes import can_fork, process_pool
from accelsim.sweep.schema import strict
from accelsim.sweep.spec import MODEL_AXIS, SweepSpec

MAX_POINTS = 10_000
"""Most points a sweep may have unless the caller raises it (``accelsim sweep --max-points``):
planning validates and names every point before anything is simulated (about 0.1 ms
a point along hardware axes, more where a point changes the workload)."""

# Run-file keys that name things rather than set them: two points that differ only
# here simulate the same thing (the referenced files' contents are hashed instead).
_NOT_IDENTITY = ("name", "description", "hardware", "workload", "energy", "overrides")


@dataclass(frozen=True)
class PointTask:
    """What a worker needs to simulate one point: picklable plain data.

    ``sets`` are ``(key, value, source, source_path)`` tuples for
    :class:`~accelsim.config.loader.Override`; ``plan`` names the planning that made
    the task (random), so that a worker loads the points of one plan through one
    :class:`~accelsim.driver.inputs.InputCache` and a later plan reads the files again.
    """

    plan: str
    identity: str
    index: int
    label: str
    base: str
    sets: tuple[tuple[str, Any, str, str], ...]
    layers: bool

    def overrides(self) -> list[Override]:
        return [Override(*item) for item in self.sets]


@dataclass(frozen=True)
class Point:
    """One validated point: its axis values (as the sweep file wrote them) and task."""

    axes: Mapping[str, Any]
    task: PointTask


@dataclass(frozen=True)
class SweepPlan:
    """A validated sweep: its spec, file (``None`` for a sweep given as a mapping) and
    points in sweep order."""

    spec: SweepSpec
    path: Path | None
    points: tuple[Point, ...]

    @property
    def name(self) -> str:
        return self.spec.name

    def axes(self) -> list[str]:
        return self.spec.axes()


def load_sweep(path: Path) -> SweepSpec:
    """Read and validate a sweep file (not its points).

    Raises:
        ConfigError: for a bad sweep file.
    """
    return validate_data(SweepSpec, read_yaml(path), display_path(path))


def identity(inputs: RunInputs) -> str:
    """The point's identity: a hash of its canonical resolved configuration and the
    accelsim version (16 hex digits)."""
    return Identities()(inputs)


class Identities:
    """Point identities (:func:`identity`), each input's canonical JSON made once per
    object: the points of a sweep loaded through one
    :class:`~accelsim.driver.inputs.InputCache` share their unchanged inputs' objects."""

    def __init__(self) -> None:
        self._texts: OrderedDict[int, tuple[object, str]] = OrderedDict()

    def __call__(self, inputs: RunInputs) -> str:
        # json.dumps(..., sort_keys=True) of {"accelsim", "energy", "hardware", "run",
        # "workload"}, assembled from each section's own sorted text.
        sections = {
            "accelsim": json.dumps(version()),
            "energy": self._text(inputs.energy, _dumped),
            "hardware": self._sectioned(inputs.hardware),
            "run": self._text(inputs.run, _run_dumped),
            "workload": self._text(inputs.workload, _workload_dumped),
        }
        text = "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in sections.items()) + "}"
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def _sectioned(self, spec: BaseModel) -> str:
        """``spec``'s canonical JSON (as :meth:`_text` makes it with a plain dump), each
        nested section's text made once per section object: the points of a sweep
        share most of their hardware's sections."""
        known = self._texts.get(id(spec))
        if known is not None and known[0] is spec:
            return known[1]
        sections = nested_sections(type(spec))
        fields = type(spec).model_fields
        parts = {
            k: json.dumps(v, sort_keys=True, separators=(",", ":"))
            for k, v in spec.model_dump(mode="json", exclude=_section_names(type(spec))).items()
        }
        for name in sections:
            value, info = getattr(spec, name), fields[name]
            if not info.exclude and not (info.exclude_if is not None and info.exclude_if(value)):
                parts[name] = self._text(value, _dumped)
        text = "{" + ",".join(f"{_quoted(k)}:{parts[k]}" for k in sorted(parts)) + "}"
        self._keep(spec, text)
        return text

    def _text(self, spec: BaseModel, dump: Callable[[BaseModel], Any]) -> str:
        known = self._texts.get(id(spec))
        if known is not None and known[0] is spec:
            self._texts.move_to_end(id(spec))
            return known[1]
        text = json.dumps(dump(spec), sort_keys=True, separators=(",", ":"))
        self._keep(spec, text)
        return text

    def _keep(self, spec: BaseModel, text: str) -> None:
        self._texts[id(spec)] = (spec, text)
        if len(self._texts) > _KEPT_TEXTS:
            self._texts.popitem(last=False)


_KEPT_TEXTS = 64


@functools.cache
def _quoted(key: str) -> str:
    """A key as JSON writes it."""
    return json.dumps(key)


@functools.cache
def _section_names(model: type[BaseModel]) -> set[str]:
    """The nested sections of ``model`` (callers must not change the set)."""
    return set(nested_sections(model))


def _dumped(spec: BaseModel) -> Any:
    return spec.model_dump(mode="json")


def _run_dumped(spec: BaseModel) -> Any:
    return {k: v for k, v in _dumped(spec).items() if k not in _NOT_IDENTITY}


def _workload_dumped(spec: BaseModel) -> Any:
    return spec.model_dump(mode="json", exclude_none=True)


MAPPING_SOURCE = "<sweep>"
"""How messages name a sweep given as a mapping rather than a file."""


PARALLEL_POINTS = 20_000
"""Sweeps of at least this many points (before ``exclude``) are planned by ``jobs``
forked processes when :func:`plan_sweep` is given more than one."""

SHARES_PER_JOB = 8
"""Contiguous shares of a sweep's combinations per planning process: the sweep's own
process takes in the first shares' verdicts while later ones are still planned."""


@dataclass(frozen=True)
class _Expansion:
    """What turns a sweep into its points' overrides (picklable: planning processes
    receive it)."""

    spec: SweepSpec
    directory: Path
    source: str
    models: dict[str, Path]
    base: Path
    fixed: tuple[Override, ...]

    def points(
        self, cache: InputCache, start: int = 0, stop: int | None = None
    ) -> Iterator[tuple[dict[str, Any], list[Override] | tuple[Problem, ...], str]]:
        """Each point's axis values, overrides (a section set before the keys inside it,
        whichever wrote it first; the problems of a model axis's workload file instead)
        and label, in sweep order, excludes dropped: of the combinations ``start`` to
        ``stop`` of the axes' values."""
        combinations = _combinations(
            self.spec, self.directory, self.source, self.models, start, stop
        )
        orders: dict[tuple[str, ...], list[int]] = {}
        for axes, sets, label in combinations:
            final = _by_depth([*self.fixed, *sets], orders)
            if MODEL_AXIS in axes:
                try:
                    final = model_overrides(self.base, self.models[axes[MODEL_AXIS]], final, cache)
                except InputError as exc:
                    yield axes, tuple(exc.problems), label
                    continue
            yield axes, final, label


Verdict = str | tuple[Problem, ...]
"""A point's identity, or the problems that make it invalid."""


def _verdict(
    expansion: _Expansion,
    cache: InputCache,
    identities: Identities,
    final: list[Override] | tuple[Problem, ...],
) -> Verdict:
    """The identity of the point whose overrides are ``final``, or its problems."""
    if isinstance(final, tuple):
        return final
    try:
        return identities(cache.load(expansion.base, final))
    except InputError as exc:
        return tuple(exc.problems)


def _verdicts(expansion: _Expansion, start: int, stop: int) -> list[Verdict]:
    """The verdicts of the points of combinations ``start`` to ``stop``, in sweep order,
    in a planning process."""
    cache, identities = _Planning.cache, _Planning.identities
    points = expansion.points(cache, start, stop)
    return [_verdict(expansion, cache, identities, final) for _, final, _ in points]


class _Planning:
    """A planning process's input cache and identities, kept from share to share."""

    cache = InputCache()
    identities = Identities()


def _forked_verdicts(expansion: _Expansion, count: int, jobs: int) -> Iterator[Verdict]:
    """Every point's verdict, in sweep order, from ``jobs`` processes, the ``count``
    combinations of the axes' values cut into :data:`SHARES_PER_JOB` contiguous shares
    per process and handed out in order."""
    shares = jobs * SHARES_PER_JOB
    size = -(-count // shares)
    with process_pool(jobs, f"planning the sweep ({jobs} worker processes)") as pool:
        futures = [
            pool.submit(_verdicts, expansion, k * size, min(count, (k + 1) * size))
            for k in range(shares)
        ]
        for verdicts in pool.ordered(futures):
            yield from verdicts


def plan_sweep(
    sweep: Path | str | Mapping[str, Any], max_points: int = MAX_POINTS, jobs: int = 1
) -> SweepPlan:
    """Expand and validate every point of a sweep file, or of a sweep given as a mapping
    with a sweep file's keys.

    A file's paths (``base``, ``suite``, a ``workload`` axis) are relative to the file;
    a mapping's to the working directory.  Either way a ``configs/...`` or
    ``workloads/...`` path found in neither place is the bundled file's, as on the
    command line.  Each point's overrides name the sweep file by its resolved path,
    so a point records the same thing whatever the working directory.

    Args:
        sweep: The sweep file, or its contents as a mapping.
        max_points: The most points the sweep may have (before ``exclude``), checked
            before any point is expanded.
        jobs: Processes that load and name the points of a sweep of at least
            :data:`PARALLEL_POINTS` points, each a contiguous share (forked; where
            the platform cannot fork, and for smaller sweeps, this process alone).
            The plan is the same whatever ``jobs`` is.

    Raises:
        ConfigError: for a bad sweep or one of more than ``max_points`` points, or
            listing every problem of every point (each once, in sweep order).
        WorkerError: when a planning process died.
    """
    if isinstance(sweep, Mapping):
        path, source = None, MAPPING_SOURCE
        spec = validate_data(SweepSpec, dict(sweep), source)
        directory, resolved = Path.cwd(), source
    else:
        path = bundled_path(sweep)
        spec, source = load_sweep(path), display_path(path)
        directory, resolved = path.parent, str(path.resolve())
    base = _relative(directory, spec.base)
    if not base.is_file():
        raise ConfigError.single(source, "base", "file not found", spec.base)
    models = _models(spec, directory, source)
    count = math.prod(
        [len(models) or 1, *map(len, spec.grid.values())]
        + [len(next(iter(group.values()))) for group in spec.zip]
    )
    if count > max_points:
        raise ConfigError.single(
            source,
            "",
            f"{count:,} points (the product of the axes' lengths, before exclude) exceed"
            f" the limit of {max_points:,}; split the sweep, or raise the limit with"
            " --max-points N (accelsim sweep and accelsim check)",
        )
    fixed = tuple(
        Override(k, _resolve(k, v, directory), source, f"set.{k}") for k, v in spec.set.items()
    )
    expansion = _Expansion(spec, directory, source, models, base, fixed)
    forked = jobs > 1 and count >= PARALLEL_POINTS and can_fork()
    verdicts = _forked_verdicts(expansion, count, jobs) if forked else None
    points, problems = _planned(expansion, verdicts, resolved)
    if problems:
        raise ConfigError(problems)
    if not points:
        raise ConfigError.single(source, "exclude", "excludes every point of the sweep")
    return SweepPlan(spec, path, tuple(points))


def _planned(
    expansion: _Expansion, forked: Iterator[Verdict] | None, resolved: str
) -> tuple[list[Point], list[Problem]]:
    """Every valid point of ``expansion`` (its verdicts from ``forked`` processes, or
    made here), and every problem, each once, in sweep order.  Overrides the sweep
    wrote are recorded against its ``resolved`` path."""
    source, base_file = expansion.source, str(expansion.base.resolve())
    problems: list[Problem] = []
    points: list[Point] = []
    seen: dict[str, int] = {}
    cache, identities = InputCache(), Identities()
    token = secrets.token_hex(8)
    records: dict[Hashable, tuple[str, Any, str, str]] = {}  # an override's, in a task

    def record(o: Override) -> tuple[str, Any, str, str]:
        found = records.get(o.cache_key)
        if found is None:
            where = resolved if o.source == source else o.source
            found = records[o.cache_key] = (o.key, o.value, where, o.source_path)
        return found

    with fewer_collections():  # a few objects per point, freed by reference counting
        for axes, final, label in expansion.points(cache):
            verdict = (
                next(forked)
                if forked is not None
                else _verdict(expansion, cache, identities, final)
            )
            if not isinstance(verdict, str):
                problems += [p for p in verdict if p not in problems]
                continue
            assert not isinstance(final, tuple)  # a point with problems has no identity
            if verdict in seen:
                problems.append(
                    Problem(
                        source, "", f"two points are the same design (point {seen[verdict]})", axes
                    )
                )
                continue
            seen[verdict] = len(points)
            task = PointTask(
                token,
                verdict,
                len(points),
                label,
                base_file,
                tuple(map(record, final)),
                expansion.spec.layers,
            )
            points.append(Point(dict(axes), task))
    return points, problems


def _by_depth(
    overrides: list[Override], orders: dict[tuple[str, ...], list[int]]
) -> list[Override]:
    """``overrides`` sorted (stably) by how deep each sets: the order worked out once per
    sequence of keys in ``orders`` (the points of a sweep share theirs)."""
    keys = tuple(o.key for o in overrides)
    order = orders.get(keys)
    if order is None:
        order = orders[keys] = sorted(range(len(keys)), key=lambda i: _depth(overrides[i]))
    return [overrides[i] for i in order]


def _depth(item: Override) -> int:
    """How deep ``item`` sets: ``techniques`` 0, ``techniques.x.y`` 2, ``layers[1].k`` 2."""
    return item.key.count(".") + item.key.count("[")


def _text(value: Any) -> str:
    """An axis value as a label shows it (``.inf`` as YAML spells it)."""
    shown = strict(value)
    return shown if isinstance(shown, str) else json.dumps(shown)


def _relative(directory: Path, name: str) -> Path:
    """``name`` below ``directory``, else the bundled file of that name if there is one."""
    path = directory / name
    bundled = bundled_path(name)
    return bundled if not path.exists() and bundled.is_absolute() else path


def _models(spec: SweepSpec, directory: Path, source: str) -> dict[str, Path]:
    """The suite's models (name -> workload file), or none without a suite."""
    if spec.suite is None:
        return {}
    suite_path = _relative(directory, spec.suite)
    try:
        entries = suite_entries(suite_path, spec.models)
    except InputError as exc:
        raise ConfigError(
            [
                Problem(source, "models", p.message, p.value) if p.file == "--models" else p
                for p in exc.problems
            ]
        ) from None
    return {e.name: e.workload_path for e in entries}


def _combinations(
    spec: SweepSpec,
    directory: Path,
    source: str,
    models: Mapping[str, Path],
    start: int = 0,
    stop: int | None = None,
) -> Iterator[tuple[dict[str, Any], list[Override], str]]:
    """Each point's axis values, overrides and label, in sweep order, excludes dropped
    (each axis value's override and label made once), of the combinations ``start``
    to ``stop`` of the axes' values."""
    Item = tuple[str, Any, Override | None, str]
    dims: list[list[list[Item]]] = []
    if models:
        dims.append([[(MODEL_AXIS, name, None, f"{MODEL_AXIS}={_text(name)}")] for name in models])

    def item(key: str, value: Any, where: str) -> Item:
        made = Override(key, _resolve(key, value, directory), source, where)
        return key, value, made, f"{key}={_text(value)}"

    for key, values in spec.grid.items():
        dims.append([[item(key, v, f"grid.{key}")] for v in values])
    for i, group in enumerate(spec.zip):
        length = len(next(iter(group.values())))
        dims.append(
            [[item(k, vs[j], f"zip[{i}].{k}") for k, vs in group.items()] for j in range(length)]
        )
    for combo in itertools.islice(itertools.product(*dims), start, stop):
        items = [entry for part in combo for entry in part]
        axes = {key: value for key, value, _, _ in items}
        if any(all(axes.get(k) == v for k, v in entry.items()) for entry in spec.exclude):
            continue
        sets = [made for _, _, made, _ in items if made is not None]
        yield axes, sets, ", ".join(shown for _, _, _, shown in items)


def _resolve(key: str, value: Any, directory: Path) -> Any:
    """A ``workload``, ``hardware`` or ``energy`` value names a file relative to the
    sweep file's ``directory`` (else a bundled one)."""
    files = ("workload", "hardware", "energy")
    if key in (*files, *(f"run.{f}" for f in files)) and isinstance(value, str):
        return str(_relative(directory, value).resolve())
    return value
