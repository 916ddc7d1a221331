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
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from accelsim.errors import OutputError
from accelsim.report.result import LAYER_COLUMNS, OP_COLUMNS, RunResult


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


def write_run(result: RunResult, resolved_config: str, out: Path, force: bool = False) -> Path:
    """Write ``resolved_config.yaml``, ``ops.csv``, ``layers.csv`` and ``summary.json``.

    Args:
        result: The simulated step.
        resolved_config: The YAML text of every input after overrides.
        out: Parent directory of run directories.
        force: Replace an existing run directory.

    Returns:
        The run directory.

    Raises:
        OutputError: if the directory exists without ``force`` or cannot be written.
    """
    target = run_directory(out, result.name)
    check_writable(target, force)
    try:
        out.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{result.name}.", dir=out))
        staging.chmod(0o777 & ~_umask())
    except OSError as exc:
        raise OutputError(f"{out}: cannot create the results directory: {exc}") from None
    try:
        (staging / "resolved_config.yaml").write_text(resolved_config, encoding="utf-8")
        write_csv(staging / "ops.csv", OP_COLUMNS, result.op_rows())
        write_csv(staging / "layers.csv", LAYER_COLUMNS, result.layer_rows())
        (staging / "summary.json").write_text(
            json.dumps(result.summary(), indent=2) + "\n", encoding="utf-8"
        )
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    except OSError as exc:
        raise OutputError(f"{target}: cannot write results: {exc}") from None
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target
