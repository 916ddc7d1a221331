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
from accelsim.techniques.fusion.traffic import (
    DerivedTraffic,
    derived_traffic,
    exposed_update_cycles,
    parameter_dram_bytes,
)
from accelsim.timing.memory import traffic_bound


def kind_figures(
    base: RunResult,
    step: SimulatedStep,
    mode: FusionMode,
    optimizer: OptimizerSpec,
    at: str,
    alone: bool,
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """A step kind's figures (``by_kind``'s entry) and the lines ``accelsim run`` prints
    of it (labels ending in ``at``); with the hand band (:func:`hand_band`) when fusion
    is the run's only technique (``alone``)."""
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
    band = hand_band(base, derived, mode, bound) if alone else None
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
        "hand_band": list(band) if band else None,
    }
    within = f"hand band {band[0]:.3f}-{band[1]:.3f} x; " if band else ""
    lines = [
        (
            f"fused step{at}",
            f"{speedup:.3f} x the baseline step ({within}at most {bound:.3f} x: {binding} bound)",
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


def hand_band(
    base: RunResult, derived: DerivedTraffic, mode: FusionMode, bound: float
) -> tuple[float, float]:
    """The speedup a hand count expects of fusing the baseline step ``base``, from its
    exposed update ``U`` (:func:`~accelsim.techniques.fusion.traffic.exposed_update_cycles`:
    the cycles only updates run in), its cycles ``T``, and the bytes fusion removes
    (``derived``: per element whose gradient stays on chip, the gradient's write by
    ``dW`` and its read by the update; per element whose weight tile ``dX`` serves,
    the weight's read), at the DRAM's bound.

    * backward, at least ``T / (T - R_u)``: the updates gain no overlap and only stop
      moving their reads of g and W (``R_u``, in cycles; the eager update is DRAM-bound);
      at most ``T / (T - U - R_g)``: the whole exposed update hidden and the backward
      pass shorter by the gradient writes it no longer makes (``R_g``);
    * forward, at least 1 (no overlap gained, the forward pass not DRAM-bound), at most
      ``T / (T - U)``;

    each upper end capped at the step's phase-ordered ``bound``."""
    t = base.total_cycles
    exposed = exposed_update_cycles(base)
    if mode is not FusionMode.BACKWARD:
        return 1.0, min(t / max(t - exposed, 1), bound)
    words = base.hardware.word_bytes
    on_chip = derived.updated_elements - derived.gradient_in_dram
    memory = base.machine.dram[0]
    # g's bytes, written by dW and read by the update alike; W's read by the update
    gradient = traffic_bound(memory, on_chip * words.gradients / derived.replicas, 0.0)
    weight = traffic_bound(memory, derived.weight_served * words.weights / derived.replicas, 0.0)
    return t / max(t - gradient - weight, 1), min(t / max(t - exposed - gradient, 1), bound)


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
    """How many trained weights take each loop order, why ``dX`` runs first, and the
    partial sums that sharing spills."""
    counts = Counter(o.order for o in orders.values())
    spill = sum(1 for o in orders.values() if o.order is LoopOrder.DX_FIRST and o.spill_forced)
    spilling = [o.spill_bytes for o in orders.values() if o.spill_bytes > 0]
    spilled = (
        f" ({len(spilling)} of them spilling dX's partial sums:"
        f" {sum(spilling) / 1e6:.2f} MB written and read back)"
        if spilling
        else ""
    )
    return (
        f"{counts[LoopOrder.TILE_SHARED]} weights take W's tiles from dX{spilled},"
        f" {counts[LoopOrder.DX_FIRST]} run dX first ({spill} of them where sharing"
        f" would spill dX's partial sums), {counts[LoopOrder.NO_DX]} have no dX"
        " (per weight: sections.optimizer_fusion.loop_orders)"
    )
