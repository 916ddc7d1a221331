"""Dotted-key overrides of a file's data, and where each value came from.

An :class:`Override` sets one key (``array.rows``, ``layers[fc].out_features``)
of a file's data; ``--set``, a run file's ``overrides``, a sweep's axes and a
workload variant's ``overrides`` all make them, and this module holds the one
parser of their keys.  :func:`merge` applies them and returns the
:class:`Origins` of the result: which override wrote each key, or made each
mapping on the way to it.  Every problem later found in the file's data, by
validation or by any check after it (shapes, techniques, the run's own rules),
is blamed through :meth:`Origins.blame` on the place the user wrote the value:
``--set KEY``, ``run.yaml: overrides.KEY``, a sweep's ``grid.KEY``, or the file.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from accelsim.config.validate import join_path, suggest
from accelsim.config.yaml_limits import MAX_DEPTH
from accelsim.errors import ConfigError, Problem


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

    Attributes:
        key: The dotted key inside the target file (``array.rows``).
        value: The value to set.
        source: Where the user wrote it: ``--set``, or the file that holds it.
        source_path: The key as written there (``hardware.array.rows``,
            ``overrides.hardware.array.rows``, ``grid.array.rows``).
        parts: ``key`` parsed: names, list indices and named list elements.
        cache_key: What the override decides, hashable: its key, value (typed:
            ``1``, ``1.0`` and ``true`` differ, :func:`frozen`) and where it was written.

    Raises:
        ConfigError: at ``source`` for a malformed or too deep key.
    """

    key: str
    value: Any
    source: str
    source_path: str
    parts: tuple[str | int | _Named, ...] = field(init=False, repr=False, compare=False)
    cache_key: Hashable = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "parts", tuple(_split_key(self)))
        key = (self.key, frozen(self.value), self.source, self.source_path)
        object.__setattr__(self, "cache_key", key)

    def written_at(self, path: str) -> tuple[str, str] | None:
        """Where the value at key path ``path`` of the target file was written, if this
        override set it or a mapping above it: its source and the key as written there
        (``--set``, ``dram.capacity_gib``)."""
        if not _within(path, self.key):
            return None
        return self.source, self.source_path + path[len(self.key) :]


@dataclass(frozen=True)
class Origins:
    """Which override wrote each key of a file's data after :func:`merge`.

    Attributes:
        file: The file the data was read from, as messages name it.
        written: ``(key path, source, key as written there)`` for every key an
            override set and every mapping it made on the way to its key; an
            override's entries replace those below the key it set.
    """

    file: str
    written: tuple[tuple[str, str, str], ...] = ()

    def locate(self, path: str) -> tuple[str, str]:
        """The file and key path to report a problem at ``path`` of this data against:
        the override that wrote ``path`` or the deepest key above it, else the file."""
        best: tuple[str, str, str] | None = None
        for key, source, shown in self.written:
            if _within(path, key) and (best is None or len(key) >= len(best[0])):
                best = (key, source, shown)
        if best is None:
            return self.file, path
        key, source, shown = best
        return source, shown + path[len(key) :]

    def blame(self, problems: list[Problem]) -> list[Problem]:
        """``problems`` with each one in this file's data blamed on the override
        that wrote its key (``--set KEY``, ``run.yaml: overrides.KEY``, ...)."""
        blamed = []
        for problem in problems:
            if problem.file == self.file and problem.path:
                file, path = self.locate(problem.path)
                problem = Problem(file, path, problem.message, problem.value)
            blamed.append(problem)
        return blamed


def merge(
    data: dict[str, Any], file: str, overrides: list[Override]
) -> tuple[dict[str, Any], Origins]:
    """A copy of ``data`` with each dotted key set to its value, and its :class:`Origins`.

    List elements are addressed by index, ``layers[2].kernel``, or, in a list of
    named mappings, by name, ``layers[fc].out_features`` (names may contain dots).
    A key inside a mapping the file lacks makes the mapping.

    Raises:
        ConfigError: at the override's source for a key that does not fit the data.
    """
    result: dict[str, Any] = deep_copy(data)
    written: list[tuple[str, str, str]] = []
    for item in overrides:
        paths, made = _set(result, item)
        key = paths[-1]
        written = [w for w in written if not _within(w[0], key)]
        written.append((key, item.source, item.source_path))
        # The mappings the override made hold plain names below them (a made mapping
        # has no list to index), so their keys as written are prefixes of its own.
        for i in range(made, len(paths) - 1):
            below = ".".join(str(p) for p in item.parts[i + 1 :])
            written.append((paths[i], item.source, item.source_path.removesuffix("." + below)))
    return result, Origins(file, tuple(written))


def _within(path: str, key: str) -> bool:
    """Whether key path ``path`` is ``key`` or lies below it."""
    return path == key or path.startswith((key + ".", key + "["))


def _set(data: dict[str, Any], item: Override) -> tuple[list[str], int]:
    """Set ``item``'s value in ``data``: the key path of each part and the index of
    the first mapping it made (the part count when it made none)."""
    target: Any = data
    parts = item.parts
    paths: list[str] = []
    path = ""
    made = len(parts)
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(part, (int, _Named)):
            if not isinstance(target, list):
                raise ConfigError.single(item.source, item.source_path, "not a list", item.value)
            index = _index(target, part, item)
            path = join_path(path, index)
            if last:
                target[index] = item.value
            else:
                target = target[index]
        elif isinstance(target, dict):
            path = join_path(path, part)
            if last:
                target[part] = item.value
            else:
                if part not in target:
                    made = min(made, i)
                    target[part] = {}
                target = target[part]
        else:
            raise ConfigError.single(item.source, item.source_path, "no such key", item.value)
        paths.append(path)
    return paths, made


def _index(target: list[Any], part: int | _Named, item: Override) -> int:
    if isinstance(part, int):
        if not -len(target) <= part < len(target):
            raise ConfigError.single(
                item.source, item.source_path, "no such list element", item.value
            )
        return part % len(target)
    names = [e.get("name") for e in target if isinstance(e, dict)]
    for index, element in enumerate(target):
        if isinstance(element, dict) and element.get("name") == part.name:
            return index
    raise ConfigError.single(
        item.source,
        item.source_path,
        "no list element of that name; " + suggest(part.name, [str(n) for n in names]),
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


def deep_copy(value: Any) -> Any:
    """A copy of plain data (mappings and lists copied, other values shared)."""
    if isinstance(value, dict):
        return {k: deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [deep_copy(v) for v in value]
    return value


def frozen(value: Any) -> Hashable:
    """Plain data as a hashable key that tells types apart (``1``, ``1.0`` and ``true``
    differ)."""
    if isinstance(value, dict):
        return ("{}", tuple((k, frozen(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("[]", tuple(frozen(v) for v in value))
    return (type(value).__name__, value)
