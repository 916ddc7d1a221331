"""Run a planned sweep into its output directory, resuming where a previous run stopped.

``<out>/<name>/`` holds ``store.sqlite`` (see :mod:`accelsim.sweep.store`) and
``points/<identity>/`` with the files of each point the sweep keeps
(:class:`~accelsim.sweep.points.KeepPoints`: a finished point's ``summary.json``
and ``point.json``, and ``layers.csv`` when the sweep asks for it; a failed
point's ``point.json``), written by :mod:`accelsim.sweep.points`.  The rows of a
chunk of points are committed together, after their directories are complete,
and a point with a row is never run again (a failed one only with
``retry_failed``).  A point simulated by a worker that runs another accelsim
version (a cluster machine not upgraded) is recorded as failed.
"""

from __future__ import annotations

import itertools
import math
import os
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import IO, Any

from accelsim.errors import InputError
from accelsim.provenance import git_commit, version
from accelsim.report.result import LAYER_COLUMNS
from accelsim.report.staging import child_directory
from accelsim.report.writer import write_csv_rows
from accelsim.sweep.executors import Executor, chunked
from accelsim.sweep.plan import SweepPlan
from accelsim.sweep.points import DEFAULT_KEEP, KeepPoints, PointsDirectory, Writer, sweep_root
from accelsim.sweep.schema import STORE_NAME, StoredPoint, dumps
from accelsim.sweep.store import Store
from accelsim.sweep.worker import PointOutcome, run_chunk


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
    """The output directory of sweep ``name`` below ``out``.

    Raises:
        OutputError: for a name that is not one plain path component.
    """
    return child_directory(out, name)


CREATOR_WAIT_S = 10.0
"""Seconds a sweep waits for a sweep started at the same time into the same new
directory to make the store's tables, before it makes them itself."""


def pending_points(plan: SweepPlan, out: Path, retry_failed: bool = False) -> int:
    """How many of ``plan``'s points a run would simulate (for a progress bar).

    Reads the store, if there is one, without changing it.  A store that is still an
    empty database (another sweep has just created it) is read again until it has its
    tables, for at most :data:`CREATOR_WAIT_S` (then it has no points).

    Raises:
        InputError: for a damaged store, or a file in its place that is not one.
    """
    directory = sweep_directory(out, plan.name)
    if not os.path.lexists(directory / STORE_NAME):
        return len(plan.points)
    deadline = time.monotonic() + CREATOR_WAIT_S
    while True:
        with Store(directory, empty=True) as store:
            if store.created or time.monotonic() >= deadline:
                done = store.finished(include_failed=not retry_failed)
                break
        time.sleep(0.05)
    return sum(p.task.identity not in done for p in plan.points)


def run_sweep(
    plan: SweepPlan,
    out: Path,
    executor: Executor,
    retry_failed: bool = False,
    on_point: Callable[[PointOutcome], None] | None = None,
    keep_points: KeepPoints | None = None,
) -> SweepReport:
    """Simulate every point of ``plan`` that is not stored yet, committing each chunk of
    points as it ends; the points ``keep_points`` names keep their directory (by
    default all of them for a sweep that asks for each point's ``layers.csv``, else
    :data:`~accelsim.sweep.points.DEFAULT_KEEP`).

    Raises:
        InputError: for a damaged store, or a file in its place that is not one, or a
            sweep asking for layers.csv that keeps not every point.
        OutputError: when the directory or the store cannot be written, or the sweep
            directory or its ``points/`` is a symbolic link.
    """
    started = time.perf_counter()
    keep_points = _keep(plan, keep_points)
    directory = sweep_directory(out, plan.name)
    sweep_root(directory)
    token = secrets.token_hex(16)
    with PointsDirectory(directory, token) as points, Store(directory, write=True) as store:
        store.prepare(_meta(plan), {k: [p.axes[k] for p in plan.points] for k in plan.axes()})
        done = store.finished(include_failed=not retry_failed)
        pending = [p for p in plan.points if p.task.identity not in done]
        # What killed sweeps left in points/, then this process's token, before any entry.
        stale = store.staging_tokens()
        store.forget_tokens(stale - points.clean(stale))
        store.record_token(token, time.time())
        axes = {p.task.identity: p.axes for p in plan.points}
        ran = failed = 0
        tasks = [p.task for p in pending]
        # The first point runs here, told how many follow: when they pay for the
        # compiled engine, this process loads (or compiles and caches) it once, and the
        # workers a pool forks next start with it, and with the parsed input files.
        files = keep_points is KeepPoints.ALL
        first = [run_chunk(tasks[:1], len(tasks), files)] if tasks else []
        following = math.ceil(len(tasks) / executor.workers)
        # Chunks hold whole runs of points that differ only along the fastest dimension.
        fastest = plan.spec.fastest()
        slower = [k for k in plan.axes() if k not in fastest]
        runs = [repr([p.axes[k] for k in slower]) for p in pending[1:]]
        rest = executor.run(chunked(tasks[1:], executor.workers, runs), following, files)
        for chunk in itertools.chain(first, rest):
            outcomes = [_same_version(outcome) for outcome in chunk]
            for outcome in outcomes:
                if keep_points.keeps(outcome.status):
                    points.write(outcome.task.identity, _point_files(outcome))
                else:
                    points.discard(outcome.task.identity)
            store.add(_stored(outcome, axes[outcome.task.identity]) for outcome in outcomes)
            for outcome in outcomes:
                failed += outcome.status != "ok"
                ran += 1
                if on_point is not None:
                    on_point(outcome)
        if not points.clean({token}):
            store.forget_tokens([token])
    return SweepReport(
        directory,
        len(plan.points),
        len(plan.points) - len(pending),
        ran,
        failed,
        time.perf_counter() - started,
    )


def _keep(plan: SweepPlan, keep_points: KeepPoints | None) -> KeepPoints:
    """What the sweep keeps: ``keep_points``, by default every point's directory for a
    sweep asking for ``layers.csv``, else :data:`DEFAULT_KEEP`.

    Raises:
        InputError: for a sweep asking for ``layers.csv`` that keeps not every point.
    """
    if not plan.spec.layers:
        return keep_points or DEFAULT_KEEP
    if keep_points not in (None, KeepPoints.ALL):
        raise InputError.single(
            "--keep-points",
            "",
            "the sweep file asks for each point's layers.csv (layers: true), kept in the"
            " point's directory: use --keep-points all",
            keep_points.value,
        )
    return KeepPoints.ALL


def _meta(plan: SweepPlan) -> dict[str, Any]:
    """What the store's ``meta`` table records (the sweep file by its resolved path;
    ``None`` for a sweep given as a mapping, whose contents ``sweep`` holds)."""
    return {
        "name": plan.name,
        "description": plan.spec.description,
        "sweep_file": None if plan.path is None else str(plan.path.resolve()),
        "sweep": plan.spec.model_dump(),
        "axes": plan.axes(),
        "accelsim_version": version(),
        "git_commit": git_commit(),
    }


def _same_version(outcome: PointOutcome) -> PointOutcome:
    """``outcome``, failed if a worker of another accelsim version simulated it."""
    if outcome.accelsim_version == version():
        return outcome
    return replace(
        outcome,
        status="failed",
        error=f"worker {outcome.worker} runs accelsim {outcome.accelsim_version},"
        f" this sweep {version()}",
        record={},
    )


def _stored(outcome: PointOutcome, axes: Mapping[str, Any]) -> StoredPoint:
    return StoredPoint(
        identity=outcome.task.identity,
        point=outcome.task.index,
        label=outcome.task.label,
        status=outcome.status,
        error=outcome.error,
        axes=axes,
        record=outcome.record,
        wall_seconds=outcome.wall_seconds,
        finished_at=time.time(),
        worker=outcome.worker,
    )


def _point_files(outcome: PointOutcome) -> dict[str, Writer]:
    """A point's files: ``point.json`` (its label and overrides, each with the sweep
    file's resolved path; a failed point's error), and a finished point's
    ``summary.json`` and, if asked for, ``layers.csv``."""
    ok = outcome.status == "ok"
    point: dict[str, Any] = {"label": outcome.task.label, "sets": outcome.task.sets}
    files: dict[str, Writer] = {}
    if ok:
        files["summary.json"] = partial(_write_text, outcome.summary_json)
    else:
        point["error"] = outcome.error
    files["point.json"] = partial(_write_text, dumps(point, indent=2, default=str) + "\n")
    if ok and outcome.task.layers:
        files["layers.csv"] = partial(
            write_csv_rows, columns=LAYER_COLUMNS, rows=outcome.layer_rows
        )
    return files


def _write_text(text: str, handle: IO[str]) -> Any:
    return handle.write(text)
