"""YAML files -> validated specs.

The only place that imports ``yaml``.  It reads files strictly (duplicate and
merge keys are errors), applies dotted-key overrides from a run file or from
``--set`` on the command line (:mod:`accelsim.config.overrides`), validates once
and reports every problem as ``file: key.path: problem (got value)``, blamed where
the value was written.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml
from pydantic import BaseModel

from accelsim.config.area import AreaTable
from accelsim.config.energy import EnergyTable
from accelsim.config.files import display_path as display_path
from accelsim.config.files import read_text
from accelsim.config.hardware import HardwareSpec
from accelsim.config.overrides import Origins, deep_copy, merge
from accelsim.config.overrides import Override as Override
from accelsim.config.validate import validate_data
from accelsim.config.yaml_limits import MAX_DEPTH, flow_depth, size_problem
from accelsim.errors import ConfigError, InputError, Problem, printable
from accelsim.resources import bundled_path

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


MERGE_TAG = "tag:yaml.org,2002:merge"


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        if key_node.tag == MERGE_TAG:
            # A merge key writes keys a second time and lets the later value win
            # silently, which duplicate keys may not; and its copies are made before
            # the size cap can count them.
            raise yaml.constructor.ConstructorError(
                None,
                None,
                "merge keys (<<) are not supported: write the keys out, or put shared"
                " settings in one file and change them with overrides",
                key_node.start_mark,
            )
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
        copy: dict[str, Any] = deep_copy(cached)
        return copy
    data = parse_yaml(read_text(path, error, name), name, error)
    if key is not None:
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.pop(next(iter(_PARSED)))
        _PARSED[key] = data
    fresh: dict[str, Any] = deep_copy(data)
    return fresh


# Parsed files of this process by (resolved path, mtime, size): a sweep reads the
# same run, hardware and workload files for every point.  Callers get deep copies.
_PARSED: dict[tuple[str, int, int], dict[str, Any]] = {}
_PARSED_MAX = 256


def parse_yaml(text: str, name: str, error: type[InputError] = ConfigError) -> dict[str, Any]:
    """Parse YAML text as :func:`read_yaml` parses a file's (``name``: the file, for messages).

    Raises:
        InputError: of type ``error`` when the text is malformed, too deep or too large,
            has duplicate keys or is not a mapping.
    """
    if flow_depth(text) > MAX_DEPTH:
        raise error.single(name, "", f"invalid YAML: nested deeper than {MAX_DEPTH} levels")
    return _parse(text, name, error)


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
    """Parse a ``--set`` value the way YAML would (``64`` -> int, ``ws`` -> str); text
    that is not YAML (``a: b: c``) is the string itself.

    Raises:
        ConfigError: for a value too deep or too big (see :data:`MAX_DEPTH`), or a
            mapping whose keys the files may not hold either (a duplicate or merge key).
    """
    if flow_depth(text) > MAX_DEPTH:
        raise ConfigError.single(CLI_SOURCE, "", f"nested deeper than {MAX_DEPTH} levels", text)
    try:
        value = yaml.load(text, Loader=_StrictLoader)
    except yaml.constructor.ConstructorError as exc:
        raise ConfigError.single(CLI_SOURCE, "", f"invalid YAML: {exc.problem}", text) from None
    except yaml.YAMLError:
        return text
    problem = size_problem(value)
    if problem:
        raise ConfigError.single(CLI_SOURCE, "", problem, text)
    return value


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
        try:
            parsed = parse_value(value.strip())
        except ConfigError as exc:
            # Blamed on --set KEY, where the value was written.
            problems = [Problem(CLI_SOURCE, key, p.message, p.value) for p in exc.problems]
            raise ConfigError(problems) from None
        overrides.append(Override(key, parsed, CLI_SOURCE, key))
    return overrides


def validate_with_origins(
    model: type[M],
    data: dict[str, Any],
    file: str,
    overrides: list[Override],
    error: type[InputError] = ConfigError,
) -> tuple[M, Origins]:
    """Apply overrides and validate; return the spec and where each value came from.

    A problem at a key that an override set, or inside a mapping it made, is
    reported against the override (``--set KEY`` or ``run.yaml: overrides.KEY``),
    not the file; the :class:`Origins` blame later problems the same way.
    """
    merged, origins = merge(data, file, overrides)
    try:
        return validate_data(model, merged, file, error=error), origins
    except InputError as exc:
        raise type(exc)(origins.blame(exc.problems)) from None


def validate_with_overrides(
    model: type[M],
    data: dict[str, Any],
    file: str,
    overrides: list[Override],
    error: type[InputError] = ConfigError,
) -> M:
    """Apply overrides and validate, blaming each problem on its true source
    (see :func:`validate_with_origins`)."""
    spec, _ = validate_with_origins(model, data, file, overrides, error)
    return spec


def load_hardware(
    path: Path, overrides: list[Override] | None = None, data: dict[str, Any] | None = None
) -> HardwareSpec:
    """Load and validate a hardware file, with optional overrides (``data``: the file
    already parsed, by :func:`read_yaml`)."""
    return validate_with_overrides(
        HardwareSpec, read_yaml(path) if data is None else data, display_path(path), overrides or []
    )


def load_suite(path: Path) -> SuiteSpec:
    """Load and validate a suite file; check that the workload files it names exist.

    Raises:
        ConfigError: listing every problem, a missing workload file at its model's
            ``models[i].workload`` key (paths are relative to the suite file).
    """
    from accelsim.config.suite import SuiteSpec

    name = display_path(path)
    suite = validate_data(SuiteSpec, read_yaml(path), name)
    missing = [
        Problem(name, f"models[{i}].workload", "file not found", model.workload)
        for i, model in enumerate(suite.models)
        if not (path.parent / model.workload).is_file()
    ]
    if missing:
        raise ConfigError(missing)
    return suite


def load_energy(path: Path, overrides: list[Override] | None = None) -> EnergyTable:
    """Load and validate an energy table file, with optional overrides."""
    table, _ = load_energy_with_origins(path, overrides or [])
    return table


AREA_TABLE = "configs/area/area45.yaml"
"""The area table every run uses (bundled: :func:`~accelsim.resources.bundled_path`)."""


def load_area(path: Path) -> AreaTable:
    """Load and validate an area table file (``configs/area/``)."""
    return validate_data(AreaTable, read_yaml(path), display_path(path))


@functools.cache
def bundled_area_table() -> AreaTable:
    """:data:`AREA_TABLE`, loaded once per process."""
    return load_area(bundled_path(AREA_TABLE))


def load_energy_with_origins(
    path: Path, overrides: list[Override], data: dict[str, Any] | None = None
) -> tuple[EnergyTable, Origins]:
    """:func:`load_energy`, and the :class:`Origins` that blame a later problem (a
    precision the hardware uses and the table lacks) where its value was written
    (``data``: the file already parsed, by :func:`read_yaml`)."""
    if data is None:
        data = read_yaml(path)
    return validate_with_origins(EnergyTable, data, display_path(path), overrides)


def yaml_comment(lines: Iterable[str]) -> str:
    """``lines`` as YAML comment lines (``# line``), every non-printable character
    escaped as in messages (``\\n``, ``\\x85``, ``\\u2028``, ``\\x1b``, a non-UTF-8 file
    name's ``\\udcff``): no text, whoever chose it, starts a line of its own, and the
    file stays UTF-8."""
    return "".join(f"# {printable(line)}".rstrip() + "\n" for line in lines)


def reads_back(text: str, written: M) -> None:
    """Check that ``text``, a YAML file about to be written, reads and validates as
    the spec ``written`` it was made from.

    Raises:
        RuntimeError: when it does not (a bug of the writer: the file is not written).
    """
    try:
        again = validate_data(type(written), parse_yaml(text, "<written file>"), "<written file>")
    except InputError as exc:
        raise RuntimeError(f"the file to write does not read back: {exc}") from None
    if again != written:
        raise RuntimeError("the file to write reads back as another spec than the one written")


def dump_yaml(data: Any) -> str:
    """Render plain data as YAML (block style, keys in insertion order), with
    libyaml's emitter when PyYAML has it (the same text as the Python one on every
    shipped run, suite entry and workload)."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text: str = yaml.dump(data, Dumper=dumper, sort_keys=False, default_flow_style=False)
    return text
