"""YAML files -> validated specs.

The only place (with :mod:`accelsim.workload.loader`) that imports ``yaml``.
It reads files strictly (duplicate keys are errors), applies dotted-key
overrides from a run file or from ``--set`` on the command line, validates
once and reports every problem as ``file: key.path: problem (got value)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml
from pydantic import BaseModel

from accelsim.config.energy import EnergyTable
from accelsim.config.files import display_path as display_path
from accelsim.config.files import read_text
from accelsim.config.hardware import HardwareSpec
from accelsim.config.validate import suggest, validate_data
from accelsim.config.yaml_limits import MAX_DEPTH, flow_depth, size_problem
from accelsim.errors import ConfigError, InputError, Problem

if TYPE_CHECKING:
    from accelsim.config.suite import SuiteSpec

M = TypeVar("M", bound=BaseModel)

CLI_SOURCE = "--set"


def _strict(base: Any) -> Any:
    """Loader class ``base`` with duplicate keys rejected and ``1e-9`` read as a float."""
    loader: Any = type(f"Strict{base.__name__}", (base,), {})
    loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
    # YAML 1.1 reads "1e-9" (no dot) as a string; accept it as the float users mean.
    loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
        list("-+0123456789"),
    )
    return loader


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, str | int | float | bool) and key is not None:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"a key must be a plain value, not a {type(key).__name__}",
                key_node.start_mark,
            )
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen[key] = key_node
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


# The pure-Python parser, whose error messages are the ones reported, and libyaml's
# (about 6x faster on the workload files) when PyYAML was built with it.
_StrictLoader = _strict(yaml.SafeLoader)
_FastLoader = _strict(getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def read_yaml(path: Path, error: type[InputError] = ConfigError) -> dict[str, Any]:
    """Read a YAML file whose top level must be a mapping.

    Raises:
        InputError: of type ``error`` when the file is missing, unreadable,
            malformed, has duplicate keys or is not a mapping.
    """
    name = display_path(path)
    try:
        info = path.stat()
        key = (str(path.resolve()), info.st_mtime_ns, info.st_size)
    except OSError:
        key = None  # read_text says why
    cached = _PARSED.get(key) if key is not None else None
    if cached is not None:
        copy: dict[str, Any] = _deep_copy(cached)
        return copy
    text = read_text(path, error, name)
    if flow_depth(text) > MAX_DEPTH:
        raise error.single(name, "", f"invalid YAML: nested deeper than {MAX_DEPTH} levels")
    data = _parse(text, name, error)
    if key is not None:
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.pop(next(iter(_PARSED)))
        _PARSED[key] = data
    fresh: dict[str, Any] = _deep_copy(data)
    return fresh


# Parsed files of this process by (resolved path, mtime, size): a sweep reads the
# same run, hardware and workload files for every point.  Callers get deep copies.
_PARSED: dict[tuple[str, int, int], dict[str, Any]] = {}
_PARSED_MAX = 256


def _parse(text: str, name: str, error: type[InputError]) -> dict[str, Any]:
    try:
        try:
            data = yaml.load(text, Loader=_FastLoader)
        except yaml.YAMLError:
            data = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise error.single(name, where, f"invalid YAML: {problem}") from None
    except RecursionError:
        raise error.single(
            name, "", f"invalid YAML: nested deeper than {MAX_DEPTH} levels"
        ) from None
    too_big = size_problem(data)
    if too_big:
        raise error.single(name, "", too_big)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise error.single(name, "", "expected a mapping at the top level", type(data).__name__)
    return data


def parse_value(text: str) -> Any:
    """Parse a ``--set`` value the way YAML would (``64`` -> int, ``ws`` -> str).

    Raises:
        ConfigError: for a value too deep or too big (see :data:`MAX_DEPTH`).
    """
    if flow_depth(text) > MAX_DEPTH:
        raise ConfigError.single(CLI_SOURCE, "", f"nested deeper than {MAX_DEPTH} levels", text)
    try:
        value = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError:
        return text
    problem = size_problem(value)
    if problem:
        raise ConfigError.single(CLI_SOURCE, "", problem, text)
    return value


@dataclass(frozen=True)
class _Named:
    """A list element addressed by its ``name`` key."""

    name: str


@dataclass(frozen=True)
class Override:
    """One dotted-key override and where it came from (for error messages).

    The key is parsed when the override is made, so a malformed key, or one
    nested deeper than :data:`MAX_DEPTH` levels, is refused where it was written
    whichever input it comes from.

    Raises:
        ConfigError: at ``source`` for a malformed or too deep key.
    """

    key: str
    value: Any
    source: str
    source_path: str
    parts: tuple[str | int | _Named, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "parts", tuple(_split_key(self)))


def parse_sets(items: list[str]) -> list[Override]:
    """Parse ``KEY=VALUE`` strings from the command line."""
    overrides = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError.single(CLI_SOURCE, "", "expected KEY=VALUE", item)
        key = key.strip()
        if not key.isprintable():
            raise ConfigError.single(
                CLI_SOURCE, "", "the key holds a control character (newline, NUL, ...)", key
            )
        overrides.append(Override(key, parse_value(value.strip()), CLI_SOURCE, key))
    return overrides


def apply_overrides(data: dict[str, Any], overrides: list[Override]) -> dict[str, Any]:
    """Return a copy of ``data`` with each dotted key set to its value.

    List elements are addressed by index, ``layers[2].kernel``, or, in a list of
    named mappings, by name, ``layers[fc].out_features`` (names may contain dots).
    """
    result: dict[str, Any] = _deep_copy(data)
    for item in overrides:
        _set(result, item, item.parts)
    return result


def canonical_key(data: dict[str, Any], item: Override) -> str:
    """``item.key`` with list elements named by index, as validation reports them."""
    key = ""
    target: Any = data
    for part in item.parts:
        if isinstance(part, str):
            key = f"{key}.{part}" if key else part
            target = target.get(part) if isinstance(target, dict) else None
        elif isinstance(target, list):
            index = _index(target, part, item)
            key = f"{key}[{index}]"
            target = target[index]
        else:
            key = f"{key}[{part.name if isinstance(part, _Named) else part}]"
            target = None
    return key


def _set(data: dict[str, Any], item: Override, parts: tuple[str | int | _Named, ...]) -> None:
    target: Any = data
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(part, (int, _Named)):
            if not isinstance(target, list):
                raise ConfigError.single(item.source, item.source_path, "not a list", item.value)
            index = _index(target, part, item)
            if last:
                target[index] = item.value
            else:
                target = target[index]
        elif isinstance(target, dict):
            if last:
                target[part] = item.value
            else:
                target = target.setdefault(part, {})
        else:
            raise ConfigError.single(item.source, item.source_path, "no such key", item.value)


def _index(target: list[Any], part: int | str | _Named, item: Override) -> int:
    if isinstance(part, int):
        if not -len(target) <= part < len(target):
            raise ConfigError.single(
                item.source, item.source_path, "no such list element", item.value
            )
        return part % len(target)
    name = part.name if isinstance(part, _Named) else part
    names = [e.get("name") for e in target if isinstance(e, dict)]
    for index, element in enumerate(target):
        if isinstance(element, dict) and element.get("name") == name:
            return index
    raise ConfigError.single(
        item.source,
        item.source_path,
        "no list element of that name; " + suggest(name, [str(n) for n in names]),
        item.value,
    )


# ASCII digits only: str.isdigit() also accepts '²', which int() rejects.
_INDEX = re.compile(r"-?[0-9]+")


def _split_key(item: Override) -> list[str | int | _Named]:
    """Split ``a.b[3].c[fc.1].d`` into ``['a', 'b', 3, 'c', _Named('fc.1'), 'd']``.

    The one parser of dotted keys (``--set``, a run file's ``overrides``, a sweep's
    axes and ``set``, a workload variant's ``overrides``): :class:`Override` calls it.

    Raises:
        ConfigError: for a malformed key, or one of more than :data:`MAX_DEPTH`
            parts (reported with the key as written, at the place that wrote it).
    """
    parts: list[str | int | _Named] = []
    key = item.key
    pos = 0
    while pos < len(key):
        if len(parts) == MAX_DEPTH:
            # Each part is a level of nesting: a key of 1,000 parts made every
            # recursive walk of the data (validation, copies) overflow the stack.
            raise ConfigError.single(
                item.source, "", f"key nested deeper than {MAX_DEPTH} levels", item.source_path
            )
        if key[pos] == "[":
            close = key.find("]", pos)
            inner = key[pos + 1 : close] if close > 0 else ""
            if not inner:
                raise ConfigError.single(item.source, item.source_path, "malformed key", item.key)
            parts.append(int(inner) if _INDEX.fullmatch(inner) else _Named(inner))
            pos = close + 1
            if pos < len(key) and key[pos] == ".":
                pos += 1
            continue
        end = min((i for i in (key.find(".", pos), key.find("[", pos)) if i >= 0), default=len(key))
        name = key[pos:end]
        if not name:
            raise ConfigError.single(item.source, item.source_path, "malformed key", item.key)
        parts.append(name)
        pos = end + 1 if end < len(key) and key[end] == "." else end
    if not parts or key.endswith("."):
        raise ConfigError.single(item.source, item.source_path, "malformed key", item.key)
    return parts


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def validate_with_overrides(
    model: type[M],
    data: dict[str, Any],
    file: str,
    overrides: list[Override],
    error: type[InputError] = ConfigError,
) -> M:
    """Apply overrides, validate, and blame each problem on its true source.

    A problem at a key that an override set is reported against the override
    (``--set key`` or ``run.yaml: overrides.hardware.key``), not the file.
    """
    merged = apply_overrides(data, overrides)
    try:
        return validate_data(model, merged, file, error=error)
    except InputError as exc:
        by_key = {canonical_key(merged, o): o for o in overrides}
        problems = []
        for problem in exc.problems:
            match = next(
                (
                    (k, o)
                    for k, o in by_key.items()
                    if problem.path == k or problem.path.startswith((k + ".", k + "["))
                ),
                None,
            )
            if match is not None:
                key, origin = match
                problem = Problem(
                    origin.source,
                    origin.source_path + problem.path[len(key) :],
                    problem.message,
                    problem.value,
                )
            problems.append(problem)
        raise type(exc)(problems) from None


def load_hardware(path: Path, overrides: list[Override] | None = None) -> HardwareSpec:
    """Load and validate a hardware file, with optional overrides."""
    return validate_with_overrides(
        HardwareSpec, read_yaml(path), display_path(path), overrides or []
    )


def load_suite(path: Path) -> SuiteSpec:
    """Load and validate a suite file."""
    from accelsim.config.suite import SuiteSpec

    return validate_data(SuiteSpec, read_yaml(path), display_path(path))


def load_energy(path: Path, overrides: list[Override] | None = None) -> EnergyTable:
    """Load and validate an energy table file, with optional overrides."""
    return validate_with_overrides(
        EnergyTable, read_yaml(path), display_path(path), overrides or []
    )


def dump_yaml(data: Any) -> str:
    """Render plain data as YAML (block style, keys in insertion order), with
    libyaml's emitter when PyYAML has it (the same text as the Python one on every
    shipped run, suite entry and workload)."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text: str = yaml.dump(data, Dumper=dumper, sort_keys=False, default_flow_style=False)
    return text
