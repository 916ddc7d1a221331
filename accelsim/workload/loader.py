"""``workloads/*.yaml`` -> validated :class:`~accelsim.workload.model.Workload`."""

from __future__ import annotations

from pathlib import Path

from accelsim.config.loader import Override, display_path, read_yaml, validate_with_overrides
from accelsim.errors import WorkloadError
from accelsim.workload.model import Workload
from accelsim.workload.shapes import infer_shapes


def load_workload(path: Path, overrides: list[Override] | None = None) -> Workload:
    """Load a layer table, validate it and check that its shapes are consistent.

    Raises:
        WorkloadError: for schema problems and for shape inconsistencies, each
            reported at its ``layers[i].key`` path.
    """
    name = display_path(path)
    workload = validate_with_overrides(
        Workload, read_yaml(path, WorkloadError), name, overrides or [], WorkloadError
    )
    infer_shapes(workload, name)
    return workload
