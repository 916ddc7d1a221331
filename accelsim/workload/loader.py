"""``workloads/*.yaml`` (or a file :mod:`accelsim.workload.formats` reads) -> validated
:class:`~accelsim.workload.model.Workload`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelsim.config.loader import Override, display_path, validate_with_origins
from accelsim.config.overrides import Origins
from accelsim.config.validate import join_path, suggest
from accelsim.errors import WorkloadError
from accelsim.workload.formats import read_table
from accelsim.workload.model import Workload
from accelsim.workload.repeat import expand_repeats


def load_workload(
    path: Path, overrides: list[Override] | None = None, variant: Override | None = None
) -> Workload:
    """Load a layer table, apply a variant and overrides, and validate it.

    Its shapes are checked by :func:`accelsim.lowering.infer.infer_shapes`.

    Args:
        path: The workload YAML file, or a file of a suffix
            :data:`~accelsim.workload.formats.READERS` reads (``.csv``: a SCALE-Sim
            topology).
        overrides: Dotted-key overrides (from a run file or ``--set``), applied last.
        variant: The run's ``workload_variant`` (its value names one of the
            file's ``variants``), applied before ``overrides``.

    Raises:
        WorkloadError: for an unknown variant (blamed on where it was chosen),
            and schema problems, each at its key path.
    """
    workload, _ = load_workload_with_origins(path, overrides, variant)
    return workload


def load_workload_with_origins(
    path: Path,
    overrides: list[Override] | None = None,
    variant: Override | None = None,
    data: dict[str, Any] | None = None,
) -> tuple[Workload, Origins]:
    """:func:`load_workload`, and the :class:`~accelsim.config.overrides.Origins` that
    blame a later problem (a shape) on the override that wrote the value (``data``: the
    file already read, by :func:`~accelsim.workload.formats.read_table`)."""
    name = display_path(path)
    if data is None:
        data = read_table(path)
    data, copies = expand_repeats(data, name)
    repeats = Origins(name, copies)
    chosen = [] if variant is None else _variant_overrides(data, name, variant)
    try:
        workload, origins = validate_with_origins(
            Workload, data, name, chosen + (overrides or []), WorkloadError
        )
    except WorkloadError as exc:
        blamed = repeats.blame(exc.problems)  # the copies of a block's layer: one problem
        raise WorkloadError(list({str(p): p for p in blamed}.values())) from None
    return workload, Origins(name, copies + origins.written)


def _variant_overrides(data: dict[str, object], name: str, variant: Override) -> list[Override]:
    variants = data.get("variants")
    known = variants if isinstance(variants, dict) else {}
    spec = known.get(variant.value)
    if not isinstance(spec, dict):
        hint = (
            suggest(str(variant.value), [str(v) for v in known])
            if known
            else (f"{name} defines no variants")
        )
        raise WorkloadError.single(
            variant.source, variant.source_path, "unknown workload variant; " + hint, variant.value
        )
    where = join_path(join_path("variants", str(variant.value)), "overrides")
    changes = spec.get("overrides")
    items = changes.items() if isinstance(changes, dict) else ()
    return [Override(str(k), v, name, join_path(where, str(k))) for k, v in items]
