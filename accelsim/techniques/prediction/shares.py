"""ADA-GP's figures over the GP share: what a run gives at fixed shares of GP steps.

A training run's cost is linear in its share ``g`` of GP steps: one step costs
``(1 - g) T_bp + g T_gp`` on average, so the speedup over the baseline step is
``T_base / ((1 - g) T_bp + g T_gp)`` and the energy reduction ``1 - ((1 - g) E_bp
+ g E_gp) / E_base``, whatever schedule reaches that mean share (warm-up epochs
are GP share 0).  The adaptive schedule's headline is one point of this line; the
line itself (at :data:`SHARES`, and at the share that gives the paper's average
speedup) says how much of the headline the schedule's share decides.
"""

from __future__ import annotations

from typing import Any

from accelsim.report.training import StepCost

SHARES = (0.3, 0.5, 0.7)
"""The GP shares every run reports (our choice: the middle of the range and either side)."""

PAPER_SPEEDUP = 1.47
"""ADA-GP's average speedup over its fifteen models (the paper's abstract [S])."""

PAPER_ENERGY_REDUCTION = 0.34
"""ADA-GP's average energy reduction (the paper's abstract [S])."""


def at_share(base: StepCost, bp: StepCost, gp: StepCost, share: float) -> dict[str, float]:
    """Speedup (and the most it could be: the steps' summed cycle bounds) and energy
    reduction of a run whose steps are ``share`` GP, the rest BP."""
    cycles = (1 - share) * bp.cycles + share * gp.cycles
    bound = (1 - share) * bp.bound_cycles + share * gp.bound_cycles
    energy = (1 - share) * bp.energy_pj + share * gp.energy_pj
    return {
        "gp_fraction": share,
        "speedup": base.cycles / cycles,
        "speedup_bound": base.cycles / bound,
        "energy_reduction": 1 - energy / base.energy_pj,
    }


def share_for(base: StepCost, bp: StepCost, gp: StepCost, speedup: float) -> float | None:
    """The GP share at which the run's speedup is ``speedup``; ``None`` when no share
    in [0, 1] gives it."""
    if gp.cycles == bp.cycles:
        return None
    share = (base.cycles / speedup - bp.cycles) / (gp.cycles - bp.cycles)
    return share if 0 <= share <= 1 else None


def share_range(
    base: StepCost, bp: StepCost, gp: StepCost
) -> tuple[dict[str, Any], tuple[tuple[str, str], ...]]:
    """The figures at :data:`SHARES` and at the paper's speedup, for ``summary.json``,
    and the lines ``accelsim run`` prints of them."""
    points = [at_share(base, bp, gp, g) for g in SHARES]
    paper = share_for(base, bp, gp, PAPER_SPEEDUP)
    details: dict[str, Any] = {
        "by_gp_fraction": points,
        "paper": {
            "speedup": PAPER_SPEEDUP,
            "energy_reduction": PAPER_ENERGY_REDUCTION,
            "note": "the paper's average over its fifteen models (abstract)",
            "gp_fraction": paper,
            **(
                {"energy_reduction_here": at_share(base, bp, gp, paper)["energy_reduction"]}
                if paper is not None
                else {}
            ),
        },
    }
    text = "; ".join(
        f"{p['gp_fraction']:.1f}: {p['speedup']:.3f} x (at most {p['speedup_bound']:.3f} x),"
        f" energy {-p['energy_reduction'] * 100:+.1f} %"
        for p in points
    )
    here = (
        f"at GP share {paper:.3f}, energy"
        f" {-details['paper']['energy_reduction_here'] * 100:+.1f} % (the paper: -34 %)"
        if paper is not None
        else "no GP share from 0 to 1 gives it on this model"
    )
    lines = (
        ("at GP share", text),
        (f"paper's {PAPER_SPEEDUP:g} x", here),
    )
    return details, lines
