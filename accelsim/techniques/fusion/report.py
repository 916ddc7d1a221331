"""What optimizer fusion reports per step kind: its speedup beside a bound that knows
the phase order, and the parameters' DRAM bytes simulated and derived; and the loop
order of each backward-fused layer."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from accelsim.config.run import OptimizerSpec
from accelsim.report.result import RunResult
from accelsim.techniques.base import SimulatedStep
from accelsim.techniques.fusion.config import FusionMode
from accelsim.techniques.fusion.loop_order import LayerOrder, LoopOrder
from accelsim.techniques.fusion.traffic import derived_traffic, parameter_dram_bytes


def kind_figures(
    base: RunResult, step: SimulatedStep, mode: FusionMode, optimizer: OptimizerSpec, at: str
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """A step kind's figures (``by_kind``'s entry) and the lines ``accelsim run`` prints
    of it (labels ending in ``at``)."""
    params = sum(p.update_elements for p in base.graph.parameters)
    derived = derived_traffic(base, step.result, mode, optimizer)
    # a whole pipeline's graph holds several steps: per step, as its cost is;
    # each data-parallel replica updates its own copy: per replica
    per_step = step.cost.dram_bytes / max(step.result.dram_bytes, 1) / derived.replicas
    simulated = parameter_dram_bytes(step.result) * per_step
    updated = max(derived.updated_elements, 1)  # every replica's, mini-batch's
    in_dram = derived.gradient_in_dram / updated
    speedup = base.total_cycles / max(step.cost.cycles, 1)
    bound_cycles, binding = phase_ordered_bound(step)
    bound = base.total_cycles / max(bound_cycles, 1)
    figures = {
        "cycles_saved_fraction": 1 - step.cost.cycles / base.total_cycles,
        "energy_saved_fraction": 1 - step.cost.energy_pj / base.energy.total_pj,
        "speedup": speedup,
        "speedup_bound": bound,
        "binding_bound": binding,
        "replicas": derived.replicas,
        "parameter_dram_bytes": simulated,
        "bytes_per_parameter": simulated / max(params, 1),
        "derived_parameter_dram_bytes": derived.dram_bytes * per_step,
        "derived_bytes_per_parameter": derived.dram_bytes * per_step / max(params, 1),
        "derived_weight_pass_bytes": derived.weight_pass_bytes * per_step,
        "gradient_in_dram_share": in_dram,
        "weight_in_dram_share": derived.weight_in_dram / updated,
    }
    lines = [
        (
            f"fused step{at}",
            f"{speedup:.3f} x the baseline step (at most {bound:.3f} x: {binding} bound)",
        ),
        (
            f"parameter traffic{at}",
            f"{simulated / max(params, 1):.2f} B per parameter"
            f"{' and replica' if derived.replicas > 1 else ''} simulated,"
            f" {derived.dram_bytes * per_step / max(params, 1):.2f} derived"
            f" (gradient through DRAM for {in_dram * 100:.1f} % of the updated"
            " elements)",
        ),
    ]
    return figures, lines


def phase_ordered_bound(step: SimulatedStep) -> tuple[float, str]:
    """The lower bound on a step kind's cycles and what binds it: the step's own
    (:class:`~accelsim.report.training.StepCost`), or, when tighter, the forward pass
    as simulated, then the binding bound of what waits for its end
    (:meth:`~accelsim.report.result.RunResult.ordered_cycle_bounds`).  No update,
    fused or not, overlaps the forward pass it follows, and the forward pass is what
    it is whatever the backward pass does, so the bytes-over-bandwidth bound of the
    whole step, which lets them overlap, is loose.  Only for a step costed as its
    whole simulation (a pipeline's period is costed per mini-batch)."""
    cost, result = step.cost, step.result
    if cost.cycles != result.total_cycles:
        return cost.bound_cycles, cost.binding_bound
    parts = result.ordered_cycle_bounds()
    after = max(parts.after, key=lambda k: parts.after[k])
    ordered = parts.before_end_cycles + parts.after[after]
    if ordered <= cost.bound_cycles:
        return cost.bound_cycles, cost.binding_bound
    return ordered, f"forward pass as simulated, then {after}"


def order_line(orders: Mapping[str, LayerOrder]) -> str:
    """How many trained weights take each loop order, and why ``dX`` runs first."""
    counts = Counter(o.order for o in orders.values())
    spill = sum(1 for o in orders.values() if o.order is LoopOrder.DX_FIRST and o.spill_forced)
    return (
        f"{counts[LoopOrder.TILE_SHARED]} weights take W's tiles from dX,"
        f" {counts[LoopOrder.DX_FIRST]} run dX first ({spill} of them where sharing"
        f" would spill dX's partial sums), {counts[LoopOrder.NO_DX]} have no dX"
        " (per weight: sections.optimizer_fusion.loop_orders)"
    )
