"""Write a run's result files into ``<out>/<run-name>/``.

Files are written into a temporary sibling directory first and moved into
place only when all of them are complete, so a failure never leaves a
half-written run, and an existing run is replaced only with ``force``.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from accelsim.errors import OutputError
from accelsim.report.result import LAYER_COLUMNS, OP_COLUMNS, RunResult, TrainingResult


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def run_directory(out: Path, name: str) -> Path:
    """Directory that holds the results of run ``name`` below ``out``."""
    return out / name


def check_writable(directory: Path, force: bool) -> None:
    """Refuse to overwrite an existing run directory unless ``force``.

    Raises:
        OutputError: if ``directory`` exists and ``force`` is false.
    """
    if directory.exists() and not force:
        raise OutputError(
            f"{directory}: run directory exists; pass --force to overwrite it"
            " or --out to write elsewhere"
        )


def write_csv(path: Path, columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> None:
    """Write ``rows`` as CSV with a header of ``columns``."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


@contextmanager
def staged_directory(target: Path, force: bool) -> Iterator[Path]:
    """Yield an empty sibling of ``target`` to fill; move it into place on success.

    The old ``target`` (replaced only with ``force``) survives any failure, and
    a half-filled staging directory is always removed.

    Raises:
        OutputError: if ``target`` exists without ``force`` or cannot be written.
    """
    check_writable(target, force)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        staging.chmod(0o777 & ~_umask())
    except OSError as exc:
        raise OutputError(f"{target.parent}: cannot create the results directory: {exc}") from None
    try:
        yield staging
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    except OSError as exc:
        raise OutputError(f"{target}: cannot write results: {exc}") from None
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def write_run_files(
    directory: Path, result: RunResult | TrainingResult, resolved_config: str
) -> None:
    """Write ``resolved_config.yaml``, ``ops.csv``, ``layers.csv`` and ``summary.json``.

    For a :class:`TrainingResult` these describe the baseline step (its summary
    holds the training report) and each technique step kind gets the same files
    in ``steps/<kind>/``.
    """
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "resolved_config.yaml").write_text(resolved_config, encoding="utf-8")
    base = result.base if isinstance(result, TrainingResult) else result
    write_csv(directory / "ops.csv", OP_COLUMNS, base.op_rows())
    write_csv(directory / "layers.csv", LAYER_COLUMNS, base.layer_rows())
    (directory / "summary.json").write_text(
        json.dumps(result.summary(), indent=2) + "\n", encoding="utf-8"
    )
    if isinstance(result, TrainingResult):
        for kind, step in result.steps.items():
            write_run_files(directory / "steps" / kind, step, resolved_config)


def write_run(
    result: RunResult | TrainingResult, resolved_config: str, out: Path, force: bool = False
) -> Path:
    """Write a run's files into ``out/<run-name>/``, replacing it only with ``force``.

    Returns:
        The run directory.

    Raises:
        OutputError: if the directory exists without ``force`` or cannot be written.
    """
    name = result.base.name if isinstance(result, TrainingResult) else result.name
    target = run_directory(out, name)
    with staged_directory(target, force) as staging:
        write_run_files(staging, result, resolved_config)
    return target
