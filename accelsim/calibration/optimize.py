"""A bounded Nelder-Mead simplex search, for the few parameters of a calibration.

The objective (a mean absolute percentage error over measured GEMMs) is piecewise
smooth with kinks wherever a GEMM changes between compute- and DRAM-bound or
between orientations, and has no gradient worth the name; a simplex search needs
none and, with four parameters, converges in a few hundred evaluations of a
closed form.  Parameters live in the unit box (the caller maps them to their
ranges); a trial point outside it is clipped back onto it.  The search restarts
from its best point until a restart no longer improves, the usual cure for a
simplex that collapsed early.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

REFLECT, EXPAND, CONTRACT, SHRINK = 1.0, 2.0, 0.5, 0.5


@dataclass(frozen=True)
class Minimum:
    """Where the search stopped, the objective there, and the evaluations spent."""

    x: np.ndarray
    value: float
    evaluations: int


def minimize(
    f: Callable[[np.ndarray], float],
    x0: np.ndarray,
    *,
    step: float = 0.25,
    tolerance: float = 1e-7,
    max_evaluations: int = 4000,
) -> Minimum:
    """Minimise ``f`` over the unit box from ``x0``.

    Args:
        f: The objective, of a point of the unit box.
        x0: The starting point (clipped into the box).
        step: The initial simplex's edge, in box units.
        tolerance: Stop a round when the simplex's values span less than this.
        max_evaluations: Stop after this many evaluations of ``f`` in all.
    """
    best = np.clip(np.asarray(x0, float), 0.0, 1.0)
    value = f(best)
    spent = 1
    while spent < max_evaluations:
        x, v, used = _simplex(f, best, step, tolerance, max_evaluations - spent)
        spent += used
        if v >= value - tolerance:
            if v < value:
                best, value = x, v
            break
        best, value = x, v
    return Minimum(best, value, spent)


def _simplex(
    f: Callable[[np.ndarray], float], x0: np.ndarray, step: float, tolerance: float, budget: int
) -> tuple[np.ndarray, float, int]:
    """One Nelder-Mead round from a simplex around ``x0``."""
    d = x0.shape[0]
    points = [x0]
    for i in range(d):
        p = x0.copy()
        p[i] = p[i] + step if p[i] + step <= 1.0 else p[i] - step
        points.append(p)
    simplex = np.asarray(points)
    values = np.asarray([f(p) for p in simplex])
    used = d + 1
    while used + 2 <= budget and values.max() - values.min() > tolerance:
        order = np.argsort(values, kind="stable")
        simplex, values = simplex[order], values[order]
        centroid = simplex[:-1].mean(axis=0)
        worst = simplex[-1].copy()

        def trial(
            scale: float, centroid: np.ndarray = centroid, worst: np.ndarray = worst
        ) -> np.ndarray:
            point: np.ndarray = np.clip(centroid + scale * (worst - centroid), 0.0, 1.0)
            return point

        reflected = trial(-REFLECT)
        fr = f(reflected)
        used += 1
        if fr < values[0]:
            expanded = trial(-EXPAND)
            fe = f(expanded)
            used += 1
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = trial(CONTRACT if fr >= values[-1] else -CONTRACT)
            fc = f(contracted)
            used += 1
            if fc < min(fr, values[-1]):
                simplex[-1], values[-1] = contracted, fc
            else:
                simplex[1:] = simplex[0] + SHRINK * (simplex[1:] - simplex[0])
                values[1:] = [f(p) for p in simplex[1:]]
                used += d
    i = int(np.argmin(values))
    return simplex[i], float(values[i]), used
