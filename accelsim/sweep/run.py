"""Run a planned sweep into its output directory, resuming where a previous run stopped.

``<out>/<name>/`` holds ``store.sqlite`` (see :mod:`accelsim.sweep.store`) and
``points/<identity>/`` with each finished point's ``summary.json`` and
``point.json`` (and ``layers.csv`` when the sweep asks for it), written by
:mod:`accelsim.sweep.points`.  A point's directory is complete before its row is
committed, and a point with a row is never run again (a failed one only with
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

from accelsim.provenance import git_commit, version
from accelsim.report.result import LAYER_COLUMNS
from accelsim.report.staging import child_directory
from accelsim.report.writer import write_csv_rows
from accelsim.sweep.executors import Executor, chunked
from accelsim.sweep.plan import SweepPlan
from accelsim.sweep.points import PointsDirectory, Writer, sweep_root
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
) -> SweepReport:
    """Simulate every point of ``plan`` that is not stored yet, committing each as it ends.

    Raises:
        InputError: for a damaged store, or a file in its place that is not one.
        OutputError: when the directory or the store cannot be written, or the sweep
            directory or its ``points/`` is a symbolic link.
    """
    started = time.perf_counter()
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
        first = [run_chunk(tasks[:1], len(tasks))] if tasks else []
        following = math.ceil(len(tasks) / executor.workers)
        rest = executor.run(chunked(tasks[1:], executor.workers), following)
        for outcomes in itertools.chain(first, rest):
            for outcome in map(_same_version, outcomes):
                if outcome.status == "ok":
                    points.write(outcome.task.identity, _point_files(outcome))
                else:
                    failed += 1
                store.add(_stored(outcome, axes[outcome.task.identity]))
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
    """A point's files: ``summary.json``, ``point.json`` (its label and overrides, each
    with the sweep file's resolved path) and, if asked for, ``layers.csv``."""
    point = {"label": outcome.task.label, "sets": outcome.task.sets}
    files: dict[str, Writer] = {
        "summary.json": partial(_write_text, outcome.summary_json),
        "point.json": partial(_write_text, dumps(point, indent=2, default=str) + "\n"),
    }
    if outcome.task.layers:
        files["layers.csv"] = partial(
            write_csv_rows, columns=LAYER_COLUMNS, rows=outcome.layer_rows
        )
    return files


def _write_text(text: str, handle: IO[str]) -> Any:
    return handle.write(text)
