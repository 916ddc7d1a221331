"""Run a planned sweep into its output directory, resuming where a previous run stopped.

``<out>/<name>/`` holds ``store.sqlite`` (see :mod:`accelsim.sweep.store`) and
``points/<identity>/`` with each finished point's ``summary.json`` (and
``layers.csv`` when the sweep asks for it).  A point's directory is complete
before its row is committed, and a point with a row is never run again (a
failed one only with ``retry_failed``).  A point simulated by a worker that runs
another accelsim version (a cluster machine not upgraded) is recorded as failed.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from accelsim.config.loader import display_path
from accelsim.errors import OutputError
from accelsim.provenance import git_commit, version
from accelsim.report.result import LAYER_COLUMNS
from accelsim.report.writer import write_csv
from accelsim.sweep.executors import Executor, chunked
from accelsim.sweep.plan import SweepPlan
from accelsim.sweep.store import POINTS_DIR, Store, StoredPoint
from accelsim.sweep.worker import PointOutcome


@dataclass(frozen=True)
class SweepReport:
    """What one invocation did: points in the sweep, already stored, run, failed."""

    directory: Path
    points: int
    skipped: int
    ran: int
    failed: int
    seconds: float


def sweep_directory(out: Path, name: str) -> Path:
    """The output directory of sweep ``name`` below ``out``."""
    return out / name


def pending_points(plan: SweepPlan, out: Path, retry_failed: bool = False) -> int:
    """How many of ``plan``'s points a run would simulate (for a progress bar)."""
    with Store(sweep_directory(out, plan.name)) as store:
        done = store.finished(include_failed=not retry_failed)
    return sum(p.task.identity not in done for p in plan.points)


def run_sweep(
    plan: SweepPlan,
    out: Path,
    executor: Executor,
    retry_failed: bool = False,
    on_point: Callable[[PointOutcome], None] | None = None,
) -> SweepReport:
    """Simulate every point of ``plan`` that is not stored yet, committing each as it ends.

    Raises:
        OutputError: when the directory or the store cannot be written.
    """
    started = time.perf_counter()
    directory = sweep_directory(out, plan.name)
    with Store(directory) as store:
        axes = {k: [p.axes[k] for p in plan.points] for k in plan.axes()}
        store.prepare(
            {
                "name": plan.name,
                "description": plan.spec.description,
                "sweep_file": display_path(plan.path),
                "sweep": plan.spec.model_dump(mode="json"),
                "axes": plan.axes(),
                "accelsim_version": version(),
                "git_commit": git_commit(),
            },
            axes,
        )
        done = store.finished(include_failed=not retry_failed)
        pending = [p for p in plan.points if p.task.identity not in done]
        by_identity = {p.task.identity: p for p in plan.points}
        points_dir = directory / POINTS_DIR
        _remove_partial(points_dir)
        ran = failed = 0
        for outcomes in executor.run(chunked([p.task for p in pending], executor.workers)):
            for outcome in outcomes:
                if outcome.accelsim_version != version():
                    outcome = replace(
                        outcome,
                        status="failed",
                        error=f"worker {outcome.worker} runs accelsim "
                        f"{outcome.accelsim_version}, this sweep {version()}",
                        record={},
                    )
                if outcome.status == "ok":
                    _write_point(points_dir, outcome)
                else:
                    failed += 1
                store.add(
                    StoredPoint(
                        identity=outcome.task.identity,
                        point=outcome.task.index,
                        label=outcome.task.label,
                        status=outcome.status,
                        error=outcome.error,
                        axes=by_identity[outcome.task.identity].axes,
                        record=outcome.record,
                        wall_seconds=outcome.wall_seconds,
                        finished_at=time.time(),
                        worker=outcome.worker,
                    )
                )
                ran += 1
                if on_point is not None:
                    on_point(outcome)
    return SweepReport(
        directory,
        len(plan.points),
        len(plan.points) - len(pending),
        ran,
        failed,
        time.perf_counter() - started,
    )


def _remove_partial(points_dir: Path) -> None:
    """Remove the half-written point directories a killed sweep left behind."""
    if points_dir.is_dir():
        for entry in points_dir.glob(".*"):
            shutil.rmtree(entry, ignore_errors=True)


def _write_point(points_dir: Path, outcome: PointOutcome) -> None:
    """Write a point's files into a hidden sibling, then move it into place."""
    target = points_dir / outcome.task.identity
    try:
        points_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=points_dir))
        (staging / "summary.json").write_text(outcome.summary_json, encoding="utf-8")
        point = {"label": outcome.task.label, "sets": outcome.task.sets}
        (staging / "point.json").write_text(
            json.dumps(point, indent=2, default=str) + "\n", encoding="utf-8"
        )
        if outcome.task.layers:
            write_csv(staging / "layers.csv", LAYER_COLUMNS, outcome.layer_rows)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    except OSError as exc:
        raise OutputError(f"{target}: cannot write the point's results: {exc}") from None
