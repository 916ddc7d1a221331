"""Workload files other than YAML layer tables, told apart by their file suffix.

A reader turns a file into the data a workload YAML would hold (``name``,
``input``, ``layers``, and ``source`` and ``notes`` saying where it comes from and
what it assumes), which is then validated like a hand-written table, overrides
included.  Readers are imported only when a file of theirs is read.  A file whose
suffix has no reader is read as YAML.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from accelsim.config.loader import read_yaml
from accelsim.errors import WorkloadError

TableReader = Callable[[Path], dict[str, Any]]
"""Reads one file into workload data; raises :class:`~accelsim.errors.WorkloadError`."""

READERS: dict[str, tuple[str, str]] = {
    ".csv": ("accelsim.workload.topology", "topology_table"),
    ".onnx": ("accelsim.importer.model_import", "onnx_table"),
    ".onnx.gz": ("accelsim.importer.model_import", "onnx_table"),
}
"""The module and function of the reader of each suffix (lower case, with the dot; the
longest suffix a file name ends with chooses)."""


def reader_for(path: Path) -> TableReader | None:
    """The reader of ``path``'s suffix (in any letter case), or None for a YAML table."""
    name = path.name.lower()
    suffixes = [suffix for suffix in READERS if name.endswith(suffix)]
    if not suffixes:
        return None
    module, function = READERS[max(suffixes, key=len)]
    reader: TableReader = getattr(importlib.import_module(module), function)
    return reader


def read_table(path: Path) -> dict[str, Any]:
    """The workload data of ``path``: its reader's, or its YAML's.

    Raises:
        WorkloadError: for a file its reader or the YAML parser refuses.
    """
    reader = reader_for(path)
    return read_yaml(path, WorkloadError) if reader is None else reader(path)
