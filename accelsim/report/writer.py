"""Write a run's result files into ``<out>/<workload>_<run-name>[_<techniques>]/``.

Files are written into a hidden staging sibling first and moved into place
only when all of them are complete (:mod:`accelsim.report.staging`), so a
failure never leaves a half-written run, and an existing run is replaced only
with ``force``.  JSON is strict: a non-finite number is an error, never
``Infinity`` or ``NaN`` in a file.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Sequence
from operator import itemgetter
from pathlib import Path
from typing import IO, Any

from accelsim._version import __version__
from accelsim.config.base import MAX_NAME_CHARS
from accelsim.report.result import LAYER_COLUMNS, RunResult
from accelsim.report.staging import check_writable, child_directory, staged_directory
from accelsim.report.training import TrainingResult

__all__ = [
    "check_writable",
    "run_directory",
    "run_directory_name",
    "staged_directory",
    "write_csv",
    "write_csv_rows",
    "write_run",
    "write_run_files",
]


def run_directory(out: Path, name: str) -> Path:
    """Directory that holds the results of run ``name`` below ``out``.

    Raises:
        OutputError: for a name that is not one plain path component.
    """
    return child_directory(out, name)


def run_directory_name(
    name: str, workload: str, variant: str | None, techniques: Sequence[str]
) -> str:
    """The default directory of a run: ``<workload>[-<variant>]_<name>[_<techniques>]``,
    the techniques in the order they compose, joined by ``-``; characters a run name
    may not hold (in a workload's name) become ``-``, and the whole is cut to
    :data:`MAX_NAME_CHARS` characters.

    ``configs/runs/default.yaml`` (``name: default``) writes ``resnet18_default``;
    with ``--set workload=...mlp.yaml``, ``mlp_default``; with ADA-GP,
    ``resnet18_default_gradient_prediction``: runs of different models or techniques
    never share a directory.
    """
    model = re.sub(r"[^A-Za-z0-9._-]", "-", f"{workload}-{variant}" if variant else workload)
    parts = [model.lstrip("._-") or "model", name, *(["-".join(techniques)] if techniques else [])]
    return "_".join(parts)[:MAX_NAME_CHARS]


def write_csv(path: Path, columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> None:
    """Write ``rows`` as CSV with a header of ``columns`` into the file ``path``
    (see :func:`write_csv_rows`)."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        write_csv_rows(handle, columns, rows)


def write_csv_rows(handle: IO[str], columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> None:
    """Write ``rows`` as CSV with a header of ``columns`` to the open text file ``handle``.

    As :class:`csv.DictWriter` would: a missing column is empty, a key that is
    not a column is a ``ValueError``; rows with exactly the columns (all of ours)
    take a faster path.
    """
    fields = list(columns)
    known = set(fields)
    get = itemgetter(*fields) if len(fields) > 1 else lambda row: tuple(row[f] for f in fields)

    def values(row: dict[str, Any]) -> Sequence[Any]:
        if row.keys() == known:
            return get(row)
        extra = row.keys() - known
        if extra:
            names = ", ".join(repr(name) for name in extra)
            raise ValueError(f"dict contains fields not in fieldnames: {names}")
        return [row.get(name, "") for name in fields]

    writer = csv.writer(handle, lineterminator="\n")
    writer.writerow(fields)
    writer.writerows(map(values, rows))


def write_run_files(
    directory: Path, result: RunResult | TrainingResult, resolved_config: str
) -> None:
    """Write ``resolved_config.yaml``, ``ops.csv``, ``layers.csv`` and ``summary.json``.

    ``resolved_config.yaml`` starts with a comment naming the accelsim version
    (``summary.json`` records it as ``accelsim_version``).

    For a :class:`TrainingResult` these describe the baseline step (its summary
    holds the training report) and each technique step kind gets the same files
    in ``steps/<kind>/``.
    """
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "resolved_config.yaml").write_text(
        f"# written by accelsim {__version__}\n{resolved_config}", encoding="utf-8"
    )
    base = result.base if isinstance(result, TrainingResult) else result
    with (directory / "ops.csv").open("w", newline="", encoding="utf-8") as handle:
        handle.write(base.ops_csv())
    write_csv(directory / "layers.csv", LAYER_COLUMNS, base.layer_rows())
    (directory / "summary.json").write_text(
        json.dumps(result.summary(), indent=2, allow_nan=False) + "\n", encoding="utf-8"
    )
    if isinstance(result, TrainingResult):
        for kind, step in result.steps.items():
            write_run_files(directory / "steps" / kind, step, resolved_config)


def write_run(
    result: RunResult | TrainingResult, resolved_config: str, out: Path, force: bool = False
) -> Path:
    """Write a run's files into ``out/`` in its directory (:func:`run_directory_name`),
    replacing it only with ``force``.

    Returns:
        The run directory.

    Raises:
        OutputError: if the directory exists without ``force`` or cannot be written.
    """
    base = result.base if isinstance(result, TrainingResult) else result
    training = result.training if isinstance(result, TrainingResult) else None
    techniques = training.techniques if training is not None else []
    variant = base.settings.get("workload_variant") or None
    target = run_directory(out, run_directory_name(base.name, base.workload, variant, techniques))
    with staged_directory(target, force) as staging:
        write_run_files(staging, result, resolved_config)
    return target
