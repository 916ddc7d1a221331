"""The configuration reference, rendered from the validated specs themselves.

Every file accelsim reads is validated by a pydantic spec (:mod:`accelsim.config`,
:mod:`accelsim.workload.model`, :mod:`accelsim.sweep.spec` and each technique's
``Config``), and every field of a spec carries ``Field(description=...)``.  This
module walks those specs from the root of each kind of file and renders one row
per key: its dotted path, type, unit (read from the name's suffix, as the specs
name every physical quantity), default and bounds, beside the description.  The
documentation site shows :func:`config_reference`; nothing of it is written by
hand, so it cannot disagree with what the loader accepts.

It sits above :mod:`accelsim.sweep` in the import order because it reaches every
spec, techniques included; the simulator never imports it.
"""

from __future__ import annotations

import math
import types
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from accelsim.config.area import AreaTable
from accelsim.config.base import Spec
from accelsim.config.energy import EnergyTable
from accelsim.config.hardware import HardwareSpec
from accelsim.config.run import RunSpec
from accelsim.config.suite import SuiteSpec
from accelsim.sweep.spec import SweepSpec
from accelsim.techniques.provenance import leaves
from accelsim.techniques.registry import REGISTRY, technique_class
from accelsim.workload.model import Workload

# Suffix -> unit, longest suffix first (``_pj_per_bit`` before ``_pj``).
UNIT_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("_bytes_per_cycle", "bytes/cycle"),
    ("_pj_per_byte", "pJ/byte"),
    ("_pj_per_bit", "pJ/bit"),
    ("_mw_per_kib", "mW/KiB"),
    ("_mw_per_mm2", "mW/mm²"),
    ("_mm2_per_gb_s", "mm²/(GB/s)"),
    ("_um2_per_bit", "µm²/bit"),
    ("_um2", "µm²"),
    ("_mm2", "mm²"),
    ("_nm", "nm"),
    ("tdp_w", "W"),
    ("_bytes", "bytes"),
    ("_kib", "KiB"),
    ("_gib", "GiB"),
    ("_cycles", "cycles"),
    ("_epochs", "epochs"),
    ("_mhz", "MHz"),
    ("_pj", "pJ"),
    ("_mw", "mW"),
)

# The files, each with the spec that validates it and where its keys start.
FILES: tuple[tuple[str, str, type[Spec]], ...] = (
    ("Run file", "in `configs/runs/*.yaml`", RunSpec),
    ("Hardware file", "in `configs/hardware/*.yaml`", HardwareSpec),
    ("Energy table", "in `configs/energy/*.yaml`", EnergyTable),
    ("Area table", "in `configs/area/*.yaml`", AreaTable),
    ("Workload file", "in `workloads/*.yaml`", Workload),
    ("Suite file", "in `configs/suites/*.yaml`", SuiteSpec),
    ("Sweep file", "in `configs/sweeps/*.yaml`", SweepSpec),
)


@dataclass(frozen=True)
class FieldRow:
    """One key of one spec, as the reference shows it.

    Attributes:
        model: The spec class that declares the key.
        key: Dotted path from the file's top level (``dram.latency_cycles``).
        type: The accepted values, in words.
        unit: The unit from the key's suffix, or empty.
        default: The default, ``required`` when the key must be given.
        bounds: The numeric or length bounds, or empty.
        description: The field's ``Field(description=...)``, or empty when missing.
    """

    model: type[BaseModel]
    key: str
    type: str
    unit: str
    default: str
    bounds: str
    description: str


def unit_of(name: str) -> str:
    """The unit a key's suffix names (``capacity_gib`` -> ``GiB``), or empty."""
    for suffix, unit in UNIT_SUFFIXES:
        if name.endswith(suffix):
            return unit
    return ""


def _number(value: object) -> str:
    if isinstance(value, float) and math.isinf(value):
        return ".inf"
    if isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, float) and not value.is_integer():
            return f"{value:g}"
        return f"{int(value):,}" if abs(value) < 1e15 else f"{value:g}"
    return str(value)


def _strip(annotation: Any) -> tuple[Any, list[Any]]:
    """The annotation without ``Annotated`` layers, and the metadata they carried."""
    metadata: list[Any] = []
    while get_origin(annotation) is Annotated:
        args = get_args(annotation)
        annotation = args[0]
        for extra in args[1:]:
            metadata.extend(extra.metadata if isinstance(extra, FieldInfo) else [extra])
    return annotation, metadata


def _members(annotation: Any) -> list[Any]:
    if get_origin(annotation) in (Union, types.UnionType):
        return list(get_args(annotation))
    return [annotation]


def type_name(annotation: Any) -> str:
    """The values an annotation accepts, in words (``int``, ``one of os, ws, is``)."""
    annotation, _ = _strip(annotation)
    members = _members(annotation)
    if len(members) > 1:
        named = [type_name(m) for m in members if m is not type(None)]
        text = " or ".join(dict.fromkeys(named))
        return text + " or null" if type(None) in members else text
    origin = get_origin(annotation)
    if origin is Literal:
        return " or ".join(f"`{a}`" for a in get_args(annotation))
    if origin in (list, tuple):  # a tuple[X, ...]: a list in the file
        return f"list of {type_name(get_args(annotation)[0])}"
    if origin is dict:
        key, value = get_args(annotation)
        return f"mapping of {type_name(key)} to {type_name(value)}"
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return "one of " + ", ".join(f"`{m.value}`" for m in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "mapping"
    return _PLAIN.get(annotation, getattr(annotation, "__name__", str(annotation)))


_PLAIN: dict[Any, str] = {
    int: "integer",
    float: "number",
    str: "string",
    bool: "true or false",
    Any: "any",
}

_BOUND_SYMBOLS = (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤"))


def bounds_of(info: FieldInfo) -> str:
    """The bounds a field's constraints put on its value or its length, in words."""
    _, metadata = _strip(info.annotation)
    for member in _members(_strip(info.annotation)[0]):
        metadata.extend(_strip(member)[1])
    metadata.extend(info.metadata)
    parts: list[str] = []
    for item in metadata:
        for attr, symbol in _BOUND_SYMBOLS:
            value = getattr(item, attr, None)
            if value is not None and isinstance(item, annotated_types.BaseMetadata):
                parts.append(f"{symbol} {_number(value)}")
        if isinstance(item, annotated_types.MinLen):
            parts.append(f"length ≥ {item.min_length}")
        if isinstance(item, annotated_types.MaxLen):
            parts.append(f"length ≤ {item.max_length}")
        pattern = getattr(item, "pattern", None)
        if isinstance(pattern, str):
            parts.append(f"matches `{pattern}`")
    return ", ".join(dict.fromkeys(parts))


def default_of(info: FieldInfo) -> str:
    """A field's default as a file would write it, or ``required``."""
    if info.default_factory is not None:
        value: Any = info.default_factory()  # type: ignore[call-arg]
    elif info.default is PydanticUndefined:
        return "required"
    else:
        value = info.default
    if isinstance(value, BaseModel):
        return "its keys' defaults"
    if isinstance(value, Enum):
        return f"`{value.value}`"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, dict | list | tuple) and not value:
        return "`{}`" if isinstance(value, dict) else "`[]`"
    if isinstance(value, str):
        return f'`"{value}"`' if value == "" else f"`{value}`"
    if isinstance(value, float):
        return "`.inf`" if math.isinf(value) else f"`{value:g}`"
    return f"`{value}`"


def _nested(annotation: Any) -> list[type[BaseModel]]:
    """The spec models a field holds directly (not inside a list or a mapping)."""
    bare, _ = _strip(annotation)
    return [
        m
        for m in (_strip(member)[0] for member in _members(bare))
        if isinstance(m, type) and issubclass(m, BaseModel)
    ]


def _listed(annotation: Any) -> list[type[BaseModel]]:
    """The spec models a field holds as list items or mapping values."""
    bare, _ = _strip(annotation)
    found: list[type[BaseModel]] = []
    for member in _members(bare):
        member, _ = _strip(member)
        if get_origin(member) in (list, dict):
            found.extend(_nested(get_args(member)[-1]))
        elif get_origin(member) is tuple:  # tuple[X, ...]
            found.extend(_nested(get_args(member)[0]))
    return found


def field_rows(model: type[BaseModel], prefix: str = "") -> Iterator[FieldRow]:
    """One row per key of ``model``, a nested spec flattened into dotted keys.

    Specs held in a list, a mapping or a union of several specs (workload layers
    and inputs, variants) are not flattened: :func:`spec_tables` gives each its
    own table.
    """
    model.model_rebuild()
    for name, info in model.model_fields.items():
        key = f"{prefix}{name}"
        yield _row(model, key, name, info)
        nested = _nested(info.annotation)
        family = _family(nested)
        if family is not None:
            yield from _family_rows(family, nested, f"{key}.")
        elif len(nested) == 1:
            yield from field_rows(nested[0], f"{key}.")


def _row(model: type[BaseModel], key: str, name: str, info: FieldInfo) -> FieldRow:
    return FieldRow(
        model=model,
        key=key,
        type=type_name(info.annotation),
        unit=unit_of(name),
        default=default_of(info),
        bounds=bounds_of(info),
        description=info.description or "",
    )


def _family(members: list[type[BaseModel]]) -> type[BaseModel] | None:
    """The spec of their own that the members of a union of specs all extend (a DRAM
    model's spec extends ``DramSpec``), or None (the union is of unrelated specs)."""
    if len(members) < 2:
        return None
    for base in members[0].__mro__:
        if base in (Spec, BaseModel) or not issubclass(base, BaseModel):
            return None
        if all(issubclass(m, base) for m in members):
            return base
    return None


def _family_rows(
    base: type[BaseModel], members: list[type[BaseModel]], prefix: str
) -> Iterator[FieldRow]:
    """The keys of a union of specs extending ``base``: ``base``'s keys, then each
    member's name (its ``Literal`` key, ``model``) and the keys it adds."""
    tags = {
        name
        for name, info in base.model_fields.items()
        if all(get_origin(m.model_fields[name].annotation) is Literal for m in members)
    }
    yield from (row for row in field_rows(base, prefix) if row.key[len(prefix) :] not in tags)
    for member in members:
        member.model_rebuild()
        for name, info in member.model_fields.items():
            if name in tags or name not in base.model_fields:
                yield _row(member, f"{prefix}{name}", name, info)


def _label(spec: type[BaseModel]) -> str:
    """How a table of one member of a list or union is titled: its ``kind``, or its name."""
    kind = spec.model_fields.get("kind")
    if kind is not None and get_origin(kind.annotation) is Literal:
        return f"`kind: {get_args(kind.annotation)[0]}`"
    return spec.__name__


def _tables(
    title: str, where: str, root: type[BaseModel], prefix: str
) -> Iterator[tuple[str, str, type[BaseModel], str]]:
    """The table of ``root``, then one per spec it holds that ``field_rows`` leaves out."""
    yield title, where, root, prefix
    seen: set[type[BaseModel]] = {root}
    pending = [root]
    while pending:
        model = pending.pop(0)
        model.model_rebuild()
        for name, info in model.model_fields.items():
            nested = _nested(info.annotation)
            apart = len(nested) > 1 and _family(nested) is None  # not rows of the same table
            separate = _listed(info.annotation) + (nested if apart else [])
            for spec in nested + _listed(info.annotation):
                if spec in seen:
                    continue
                seen.add(spec)
                pending.append(spec)
                if spec in separate:
                    yield f"{title}: {_label(spec)}", f"as an entry of `{name}`", spec, ""


def spec_tables() -> Iterator[tuple[str, str, type[BaseModel], str]]:
    """Every table of the reference: (title, where it is written, spec, key prefix).

    The files of :data:`FILES`, each spec they hold in a list, a mapping or a union
    (one table per workload input and layer kind), and each technique's settings
    under ``techniques.<name>``.
    """
    for title, where, root in FILES:
        yield from _tables(title, where, root, "")
    for name in REGISTRY:
        cls = technique_class(name)
        assert cls is not None
        yield from _tables(
            f"Technique `{name}`",
            f"in a run file, under `techniques.{name}`",
            cls.Config,
            f"techniques.{name}.",
        )


def all_rows() -> Iterator[FieldRow]:
    """Every row of every table of the reference."""
    for _title, _where, model, prefix in spec_tables():
        yield from field_rows(model, prefix)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") or " "


def _table(rows: list[FieldRow]) -> str:
    lines = [
        "| key | type | unit | default | bounds | description |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            "| "
            + " | ".join(
                _cell(text)
                for text in (
                    f"`{row.key}`",
                    row.type,
                    row.unit,
                    row.default,
                    row.bounds,
                    row.description,
                )
            )
            + " |"
        )
    return "\n".join(lines)


def config_reference() -> str:
    """The configuration reference as Markdown: one section and table per spec.

    Nested specs are flattened into dotted keys (``dram.latency_cycles``); specs
    held in lists or mappings (workload inputs, layers, variants, suite models) get
    tables of their own, as do the settings of each technique.
    """
    sections: list[str] = []
    for title, where, model, prefix in spec_tables():
        doc = (model.__doc__ or "").strip().split("\n\n")[0]
        doc = " ".join(doc.replace("``", "`").split())
        if doc.startswith("`techniques."):
            doc = ""
        intro = f"Written {where}." + (f" {doc}" if doc else "")
        rows = list(field_rows(model, prefix))
        sections.append(f"## {title}\n\n{intro}\n\n{_table(rows)}\n")
    return "\n".join(sections)


def provenance_reference(technique: str) -> str:
    """Where each default of a technique's settings comes from, as a Markdown table.

    The table its reports state (:mod:`accelsim.techniques.provenance`): each
    setting's default with its source (``paper``, ``reimplementation``,
    ``recalled``, ``ours``, or ``run`` when the run must choose) and the basis in
    words.  A run that sets a value reports it as the run's; a run that names a file
    of measured statistics reports it as a trace.

    Raises:
        KeyError: ``technique`` is not a registered technique.
    """
    cls = technique_class(technique)
    if cls is None:
        raise KeyError(technique)
    plugin = cls(cls.Config(), "")
    origins = plugin.defaults()
    lines = ["| setting | default | source | basis |", "|---|---|---|---|"]
    for key, value, _ in leaves(plugin.config):
        source, basis = origins[key]
        shown = value.value if isinstance(value, Enum) else value
        lines.append(
            "| "
            + " | ".join(
                _cell(text)
                for text in (
                    f"`{key}`",
                    f"`{shown}`" if shown is not None else "null",
                    source.value,
                    basis,
                )
            )
            + " |"
        )
    return "\n".join(lines)
