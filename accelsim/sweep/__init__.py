"""Design-point sweeps: expand a sweep file, run its points on an executor into a
resumable SQLite store, and export the results (:mod:`accelsim.sweep.collect`)."""

from __future__ import annotations

from accelsim.sweep.executors import DaskExecutor, Executor, PoolExecutor
from accelsim.sweep.plan import Point, PointTask, SweepPlan, identity, load_sweep, plan_sweep
from accelsim.sweep.run import SweepReport, pending_points, run_sweep, sweep_directory
from accelsim.sweep.store import Store

__all__ = [
    "DaskExecutor",
    "Executor",
    "Point",
    "PointTask",
    "PoolExecutor",
    "Store",
    "SweepPlan",
    "SweepReport",
    "identity",
    "load_sweep",
    "pending_points",
    "plan_sweep",
    "run_sweep",
    "sweep_directory",
]
