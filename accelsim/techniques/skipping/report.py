"""What gradient skipping's report reads of its decisions and of simulated steps."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from accelsim.graph.ops import Phase
from accelsim.lowering.optimizer import MONITOR_OPS_PER_ELEMENT
from accelsim.report.result import RunResult
from accelsim.techniques.base import BASE, StepCost, TrainingPlan
from accelsim.techniques.skipping.config import NAME
from accelsim.techniques.skipping.schedule import SkipSchedule


def mean_share(shares: Mapping[str, float], groups: Mapping[str, int]) -> float:
    """The share of all groups that per-layer ``shares`` skip."""
    total = sum(groups.values())
    return sum(shares.get(layer, 0.0) * n for layer, n in groups.items()) / max(total, 1)


def layer_report(decided: SkipSchedule, plan: TrainingPlan) -> dict[str, dict[str, Any]]:
    """Per grouped layer: its groups, the share of them it skips over training (re-checks
    counted), and the first epoch it skips any."""
    out = {}
    for layer, n in decided.groups.items():
        by_epoch = [
            sum(w * decided.kinds[k].get(layer, 0.0) for k, w in e.items()) for e in plan.shares
        ]
        first = next((e for e, v in enumerate(by_epoch) if v > 0), None)
        out[layer] = {
            "groups": n,
            "skip_fraction": sum(by_epoch) / max(len(by_epoch), 1),
            "first_epoch": first,
        }
    return out


def gemm_macs(result: RunResult) -> dict[str, int]:
    """MACs of a simulated step by phase (dW, dX), and the monitor's vector ops."""
    costs = result.trace.costs
    by: dict[str, int] = {"dw_macs": 0, "dx_macs": 0, "monitor_vector_ops": 0}
    for op in result.graph.ops:
        if op.phase is Phase.BWD_WEIGHT:
            by["dw_macs"] += int(costs.macs[op.op_id])
        elif op.phase is Phase.BWD_INPUT:
            by["dx_macs"] += int(costs.macs[op.op_id])
    for p in result.graph.parameters:
        if p.monitor_groups and p.grad_op >= 0:
            by["monitor_vector_ops"] += MONITOR_OPS_PER_ELEMENT * p.update_elements
    monitors = [op for op in result.graph.ops if op.owner == NAME]
    by["monitor_vector_ops"] += sum(int(costs.vector_ops[op.op_id]) for op in monitors)
    return by


RECHECKS = (2, 10, 100, 1000)
"""The ``recheck_iterations`` a synthetic-curve run reports its speedup at."""

THRESHOLD_FACTORS = (0.5, 1.0, 2.0)
"""The thresholds, as multiples of the run's, it reports its speedup at."""


def sensitivity(
    decide: Callable[[float, int], SkipSchedule],
    cost: Callable[[Mapping[str, float]], StepCost],
    base: StepCost,
    plan: TrainingPlan,
    threshold: float,
    recheck: int,
) -> tuple[dict[str, Any], str]:
    """The whole-training speedup at :data:`RECHECKS` (the run's threshold) and at
    :data:`THRESHOLD_FACTORS` times the threshold (the run's ``recheck_iterations``):
    ``decide`` makes the schedule at a setting, ``cost`` one step of a skip set.

    Returns:
        The speedups for ``summary.json`` and the line ``accelsim run`` prints.
    """

    def speedup(decided: SkipSchedule) -> float:
        used = {k for epoch in decided.shares for k in epoch}
        costs = {k: cost(decided.kinds[k]) for k in used}
        whole = TrainingPlan(plan.epochs, plan.batches_per_epoch, decided.shares)
        cycles = whole.totals({BASE: base, **costs})["cycles"]
        return cycles.baseline / cycles.technique

    by_recheck = {r: speedup(decide(threshold, r)) for r in RECHECKS}
    by_threshold = {
        f * threshold: speedup(decide(f * threshold, recheck)) for f in THRESHOLD_FACTORS
    }
    details = {
        "note": "our synthetic curve decides the schedule: the speedup at other settings of"
        " our model, each with the others as in the run",
        "recheck_iterations": {str(r): v for r, v in by_recheck.items()},
        "threshold": {f"{t:g}": v for t, v in by_threshold.items()},
    }
    text = (
        "recheck_iterations "
        + ", ".join(f"{r}: {v:.3f} x" for r, v in by_recheck.items())
        + "; threshold "
        + ", ".join(f"{t:g}: {v:.3f} x" for t, v in by_threshold.items())
    )
    return details, text
