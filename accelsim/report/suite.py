"""Suite tables: one row per model of a suite run (``suite.csv``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelsim.energy.model import COMPONENTS
from accelsim.report.silicon import SILICON_COLUMNS as SILICON_COLUMNS
from accelsim.report.training import TrainingResult

BASE_COLUMNS = (
    "model",
    "workload",
    "workload_variant",
    "batch_size",
    "params",
    "macs",
    "total_cycles",
    "seconds",
    "utilization",
    "stall_fraction",
    "dram_bytes",
    "dram_read_bytes",
    "dram_write_bytes",
    "energy_pj",
    *(f"energy_{name}_pj" for name in COMPONENTS),
)


def silicon_row(result: TrainingResult) -> dict[str, float]:
    """The :data:`SILICON_COLUMNS` of ``result`` (the technique's only with techniques)."""
    silicon = result.base.headline.silicon
    if silicon is None:
        return {}
    rate = silicon.efficiency
    row = {
        "area_mm2": silicon.area_mm2["total"],
        "power_w": silicon.power_w.average,
        "peak_power_w": silicon.power_w.peak,
        "samples_per_s_per_mm2": rate["samples_per_s_per_mm2"],
        "samples_per_s_per_w": rate["samples_per_s_per_w"],
        "samples_per_j": rate["samples_per_j"],
    }
    training = result.training
    areas = [s.silicon.area.total_mm2 for s in result.steps.values() if s.silicon is not None]
    if training is None or not areas:
        return row
    area = max(areas)
    return row | {
        "technique_area_mm2": area,
        "technique_samples_per_s_per_mm2": rate["samples_per_s"] * training.speedup / area,
        "technique_samples_per_j": rate["samples_per_j"] / (1 - training.energy_reduction),
    }


def suite_columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The base columns, then any extra ones the rows carry (e.g. extra units' energy)."""
    columns = list(BASE_COLUMNS)
    for row in rows:
        columns += [k for k in row if k not in columns]
    return columns


def suite_row(model: str, result: TrainingResult) -> dict[str, Any]:
    """The ``suite.csv`` row of one model: its baseline step, and the training report if any.

    A training report adds its scalars (:meth:`~accelsim.report.training.TrainingReport.flat`):
    the whole-training ``speedup`` with its bound, ``energy_reduction`` and
    ``dram_reduction``, each step kind's cycles, and each technique's own
    top-level numbers and words (e.g. ``gp_fraction``).
    """
    s = result.base.headline
    row: dict[str, Any] = {
        "model": model,
        "workload": s.workload,
        "workload_variant": s.settings["workload_variant"],
        "batch_size": s.batch_size,
        "params": s.parameters,
        "macs": s.macs,
        "total_cycles": s.total_cycles,
        "seconds": s.seconds,
        "utilization": round(s.utilization, 6),
        "stall_fraction": round(s.stall_fraction, 6),
        "dram_bytes": s.dram_read_bytes + s.dram_write_bytes,
        "dram_read_bytes": s.dram_read_bytes,
        "dram_write_bytes": s.dram_write_bytes,
        "energy_pj": round(s.energy_pj, 3),
        **{f"energy_{k}_pj": round(v, 3) for k, v in s.energy_by_component_pj.items()},
    }
    row |= silicon_row(result)
    if result.training is not None:
        row |= result.training.flat()
    return row
