"""Design-point sweeps: expand a sweep file, run its points on an executor into a
resumable SQLite store, and export the results (:mod:`accelsim.sweep.collect`).

Each public name loads its module on first use (PEP 562), so that a command that
reads a finished sweep (``accelsim collect``, ``accelsim plot``) loads none of the
planning and simulation its points needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accelsim.sweep.executors import DaskExecutor, Executor, PoolExecutor
    from accelsim.sweep.plan import Point, PointTask, SweepPlan, identity, load_sweep, plan_sweep
    from accelsim.sweep.run import SweepReport, pending_points, run_sweep, sweep_directory
    from accelsim.sweep.store import Store

_MODULES = {
    "accelsim.sweep.executors": ("DaskExecutor", "Executor", "PoolExecutor"),
    "accelsim.sweep.plan": (
        "Point",
        "PointTask",
        "SweepPlan",
        "identity",
        "load_sweep",
        "plan_sweep",
    ),
    "accelsim.sweep.run": ("SweepReport", "pending_points", "run_sweep", "sweep_directory"),
    "accelsim.sweep.store": ("Store",),
}
_LAZY = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'accelsim.sweep' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # later uses skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


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
