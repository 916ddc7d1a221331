"""Simulate sweep points: the function every executor runs, in any process.

A worker never touches the store or the output directory: it returns each
point's outcome (its flat record and, when the sweep keeps the point's files,
its ``summary.json`` text and optionally its layer rows) to the sweep's
process, which writes them.  A process loads the
points of one plan through one :class:`~accelsim.driver.inputs.InputCache`: it
reads each input file once and validates each file's data once per distinct set
of overrides, and points that share a workload share its objects, so their
lowered and placed baseline step is reused (:mod:`accelsim.driver.run`).
"""

from __future__ import annotations

import json
import os
import socket
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from accelsim.driver.inputs import InputCache, RunInputs
from accelsim.driver.run import simulate_training
from accelsim.errors import AccelsimError, InputError
from accelsim.provenance import version
from accelsim.report.suite import suite_row
from accelsim.report.training import TrainingResult
from accelsim.sweep.plan import PointTask
from accelsim.timing.engines import followed_by


@dataclass(frozen=True)
class PointOutcome:
    """What simulating one point gave: ``status`` ``ok`` or ``failed`` (with ``error``)."""

    task: PointTask
    status: str
    error: str | None
    record: dict[str, Any] = field(default_factory=dict)
    summary_json: str = ""
    layer_rows: tuple[dict[str, Any], ...] = ()
    wall_seconds: float = 0.0
    worker: str = ""
    accelsim_version: str = ""


def point_record(result: TrainingResult, hardware: str) -> dict[str, Any]:
    """The flat record of one point: its workload and ``hardware`` label, design knobs,
    the techniques (``+``-joined, in the order they compose; ``none``) and the run's
    settings, then :func:`~accelsim.report.suite.suite_row`'s numbers and the training
    report's scalars, all from the baseline step's headline
    (:class:`~accelsim.report.headline.StepHeadline`), not its whole summary."""
    summary = result.base.headline
    row = suite_row("", result)
    row.pop("model")
    row.pop("batch_size")
    return {
        "workload": summary.workload,
        "hardware": hardware,
        **summary.design.to_dict(),
        "techniques": row.pop("techniques", "none"),
        **{k: v for k, v in summary.settings.items() if k != "step"},
        **row,
        "array_stall_cycles": summary.array_stall_cycles,
        "interconnect_bytes": summary.interconnect_bytes,
    }


class _Loaded:
    """The input cache of the plan whose points this process ran last."""

    plan = ""
    inputs = InputCache()

    @classmethod
    def cache(cls, plan: str) -> InputCache:
        if plan != cls.plan:
            cls.plan, cls.inputs = plan, InputCache()
        return cls.inputs


def hardware_label(inputs: RunInputs, cache: InputCache) -> str:
    """The accelerator's name, followed by the point's array in parentheses when that is
    not the array of the hardware file the name comes from (a sweep over ``array.rows``
    keeps the file's name, ``default-128x128``, on a 32-row point)."""
    hw = inputs.hardware
    try:
        own = cache.hardware(inputs.run_file.hardware_path).array.label
    except InputError:  # the file alone is no hardware: its values need the overrides
        own = None
    return hw.name if own == hw.array.label else f"{hw.name} ({hw.array.label})"


def run_point(task: PointTask, files: bool = True) -> PointOutcome:
    """Simulate one point; a failure becomes a ``failed`` outcome, never an exception.
    Without ``files`` (the sweep keeps no directory for a finished point) the outcome
    has no ``summary.json`` text or layer rows."""
    worker = f"{socket.gethostname()}:{os.getpid()}"
    started = time.perf_counter()
    try:
        cache = _Loaded.cache(task.plan)
        inputs = cache.load(Path(task.base), task.overrides())
        result = simulate_training(inputs)
        outcome = PointOutcome(
            task,
            "ok",
            None,
            point_record(result, hardware_label(inputs, cache)),
            json.dumps(result.summary(), indent=2, allow_nan=False) + "\n" if files else "",
            tuple(result.base.layer_rows()) if task.layers and files else (),
        )
    except AccelsimError as exc:
        outcome = PointOutcome(task, "failed", str(exc))
    except Exception as exc:
        where = traceback.extract_tb(exc.__traceback__)[-1]
        message = f"internal error: {type(exc).__name__}: {exc} ({where.filename}:{where.lineno})"
        outcome = PointOutcome(task, "failed", message)
    return replace(
        outcome,
        wall_seconds=time.perf_counter() - started,
        worker=worker,
        accelsim_version=version(),
    )


def run_chunk(
    tasks: Sequence[PointTask], following: int = 0, files: bool = True
) -> list[PointOutcome]:
    """:func:`run_point` on each task in turn (one round trip to a worker), telling the
    engine chooser (:func:`~accelsim.timing.engines.followed_by`) that about
    ``following`` more points will run in this process: a sweep whose work pays for
    loading, or compiling, the compiled engine uses it from its first point."""
    with followed_by(following):
        return [run_point(task, files) for task in tasks]
