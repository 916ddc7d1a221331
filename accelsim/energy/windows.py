"""Peak power's windows: the dynamic energy each window of a step holds.

Windows of ``window`` cycles run back to back from cycle 0 to the step's end (the
last one cut there); each op's energy is spread evenly over its cycles (an op of no
cycles: over one cycle at its start).  The energy a step has spent by a cycle is a
line between the cycles where an op starts or ends (its breakpoints); a window's
energy is that function's rise over the window.

:func:`peak_rate` is the most any window holds per cycle.  A step of a small array
runs for hundreds of thousands of windows but has a few hundred breakpoints, so it
works the exact figure out of few windows: those that hold a breakpoint, and those
within a stretch between two breakpoints whose energy per cycle, with a bound on
the rounding, could reach the largest found.  Every window it works out, it works
out with the same floating-point operations as :func:`window_energy_pj` over all of
them, so the maximum is the same number.
"""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import pairwise
from typing import NamedTuple

import numpy as np

from accelsim.timing.trace import Trace

EXACT = 2**53
"""Cycles below which every window bound and breakpoint is an exact float64."""

ROUNDING = 32 * 2.0**-53
"""Room for the rounding of a window's energy per cycle inside one stretch between
breakpoints, relative to the largest energy spent over a window's cycles plus the
stretch's energy per cycle: its interpolation, subtraction and division round by
less than 20 units of 2^-53 of that."""


class Breakpoints(NamedTuple):
    """The cycles where the step's energy rate changes (sorted) and the energy spent by
    each, in pJ; ``total_pj`` the step's energy (what a cycle after the last holds)."""

    cycles: np.ndarray
    energy_pj: np.ndarray
    total_pj: float


def breakpoints(trace: Trace, op_pj: np.ndarray) -> Breakpoints:
    """The step's energy as a line through its ops' starts and ends.

    On several processors, the rate changes at each breakpoint by the correctly
    rounded sum of its ops' changes there, each op's counted as often as it stands
    for (:attr:`~accelsim.timing.trace.Trace.replicas`): the same line whether the
    processors' ops are each simulated or one replica stands for all."""
    start = trace.start_cycle.astype(np.float64)
    end = np.maximum(trace.end_cycle.astype(np.float64), start + 1)
    rate = op_pj / (end - start)
    times = np.concatenate([start, end])
    order = np.argsort(times, kind="stable")
    steps = np.concatenate([rate, -rate])[order]
    times = times[order]
    if trace.processors > 1:
        stand = np.concatenate([trace.stand_ins()] * 2)[order]
        times, steps = _summed_steps(times, steps, stand, trace.replicas)
    rate_after = np.cumsum(steps)  # the total rate from each breakpoint to the next
    energy_at = np.concatenate([[0.0], np.cumsum(rate_after[:-1] * np.diff(times))])
    if trace.processors > 1:
        return Breakpoints(times, energy_at, float(energy_at[-1]) if len(times) else 0.0)
    return Breakpoints(times, energy_at, float(op_pj.sum()))


def _summed_steps(
    times: np.ndarray, steps: np.ndarray, stand: np.ndarray, replicas: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each distinct time of sorted ``times`` and the exact sum of its ``steps``
    correctly rounded, those ``stand`` marks counted ``replicas`` times."""
    if not len(times):
        return times, steps
    first = np.flatnonzero(np.concatenate([[True], times[1:] != times[:-1]]))
    ends = [*first.tolist(), len(times)]
    values, stands = steps.tolist(), stand.tolist()
    summed = []
    for a, b in pairwise(ends):
        here = values[a:b]
        if replicas == 1 or not any(stands[a:b]):
            summed.append(math.fsum(here))
            continue
        alone = sum((Fraction(v) for v, s in zip(here, stands[a:b], strict=True) if not s), ZERO)
        each = sum((Fraction(v) for v, s in zip(here, stands[a:b], strict=True) if s), ZERO)
        summed.append(float(alone + replicas * each))
    return times[first], np.asarray(summed, np.float64)


ZERO = Fraction(0)


def window_energy_pj(trace: Trace, op_pj: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Dynamic energy in each window of ``window`` cycles, and each window's cycles."""
    total = max(trace.total_cycles, 1)
    bounds = _all_bounds(total, window)
    low, high = bounds[:-1], bounds[1:]
    if not len(op_pj):
        return np.zeros(len(low)), high - low
    return _rise(breakpoints(trace, op_pj), low, high), high - low


def peak_rate(trace: Trace, op_pj: np.ndarray, window: int) -> float:
    """The most dynamic energy per cycle any window holds (pJ; 0 for no op): the
    maximum of :func:`window_energy_pj`'s energies over their cycles."""
    total = max(trace.total_cycles, 1)
    if not len(op_pj):
        return 0.0
    line = breakpoints(trace, op_pj)
    last = float(line.cycles[-1])
    if total + window >= EXACT or last + window >= EXACT or not np.isfinite(line.energy_pj).all():
        energy, lengths = window_energy_pj(trace, op_pj, window)
        return float(np.max(energy / lengths, initial=0.0))
    count = -(-total // window)  # the bounds are exact: as many as _all_bounds makes
    cycles = line.cycles.astype(np.int64)
    # The windows that hold a breakpoint (at a bound: both windows), the first and the last.
    edge = cycles[(cycles % window == 0) & (cycles > 0)] // window - 1
    held = np.concatenate([cycles // window, edge, [0, count - 1]])
    held = np.sort(np.minimum(held, count - 1))  # np.unique would load numpy.ma
    held = held[np.concatenate([[True], held[1:] != held[:-1]])]
    best = _most(line, held, window, total, 0.0)
    # Each stretch between breakpoints, and the windows wholly inside it.
    gap = np.flatnonzero(np.diff(line.cycles) > 0)
    first = cycles[gap] // window + 1
    final = np.minimum(-(-cycles[gap + 1] // window) - 2, count - 2)
    inside = final >= first
    gap, first, final = gap[inside], first[inside], final[inside]
    slope = (line.energy_pj[gap + 1] - line.energy_pj[gap]) / (
        line.cycles[gap + 1] - line.cycles[gap]
    )
    scale = float(np.max(np.abs(line.energy_pj))) / window
    reach = slope + ROUNDING * (scale + np.abs(slope))
    near = reach > best
    if near.any():
        best = _most(line, _ranges(first[near], final[near]), window, total, best)
    return best


def _all_bounds(total: int, window: int) -> np.ndarray:
    """Every window's bounds, from cycle 0 to ``total``."""
    return np.minimum(np.arange(0, total + window, window, dtype=np.float64), total)


def _rise(line: Breakpoints, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """The energy spent from each ``low`` cycle to its ``high`` cycle."""
    at = np.interp(
        np.concatenate([low, high]), line.cycles, line.energy_pj, left=0.0, right=line.total_pj
    )
    rise: np.ndarray = at[len(low) :] - at[: len(low)]
    return rise


def _most(line: Breakpoints, which: np.ndarray, window: int, total: int, best: float) -> float:
    """The larger of ``best`` and the most energy per cycle windows ``which`` hold."""
    low = np.minimum(which * float(window), total)
    high = np.minimum((which + 1) * float(window), total)
    return max(best, float(np.max(_rise(line, low, high) / (high - low), initial=0.0)))


def _ranges(first: np.ndarray, final: np.ndarray) -> np.ndarray:
    """The integers from each ``first`` to its ``final``, both included, concatenated."""
    lengths = final - first + 1
    offsets = np.repeat(first - np.cumsum(lengths) + lengths, lengths)
    ranges: np.ndarray = np.arange(int(lengths.sum()), dtype=np.int64) + offsets
    return ranges
