"""Fitting at most four physical parameters of a hardware file to measured GEMMs.

The parameters, each with the physical range a fit must stay in:

========================  ==========================================  =====================
name                      what it sets in the hardware file            physical range
========================  ==========================================  =====================
``op_overhead_us``        ``timing.op_overhead_cycles``                0 to 10 us
``array_efficiency``      ``clock_mhz`` (the file's times this)        0.25 to 1
``read_bandwidth_gb_s``   ``dram.read_bandwidth_bytes_per_cycle``      0.1 to 4 x the file's
``write_bandwidth_gb_s``  ``dram.write_bandwidth_bytes_per_cycle``     0.1 to 1 x the file's
========================  ==========================================  =====================

An array never runs faster than its clock allows, so the efficiency stops at 1 and a
calibrated file never predicts a GEMM faster than its compute bound.  Writes reach
DRAM and stop at its bandwidth; the effective read bandwidth may exceed it (measured
GEMMs launched again and again find operands on chip: the published TPU measurements
read operands at up to 3.5 times the HBM rate), to at most 4 times, beyond which it
describes no memory.  The search stays inside these ranges (the optimiser's box);
a narrower ``--range`` may be asked for, a wider one is refused.  A parameter that
ends on a bound that is not a physical limit is reported as such.

The fit minimises the mean absolute percentage error of :func:`model.predict_us`
over the measurements with :func:`optimize.minimize`, from three starting points.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from accelsim.calibration.measurements import SIZE_CLASSES, Measurements, mape, size_class
from accelsim.calibration.model import GemmFeatures, Physical, gemm_features, predict_us
from accelsim.calibration.optimize import minimize
from accelsim.config.enums import PsumPolicy
from accelsim.config.hardware import HardwareSpec
from accelsim.config.interconnect import InterconnectSpec, LevelSpec
from accelsim.errors import InputError, Problem

MAX_PARAMETERS = 4
Level = TypeVar("Level", InterconnectSpec, LevelSpec)
STARTS = ((0.1, 0.9, 0.3, 0.5), (0.05, 0.6, 0.6, 0.9), (0.3, 1.0, 0.1, 0.2))
"""Starting points of the search, in the unit box of each parameter's range (the
parameters' order in :data:`PARAMETERS`)."""


@dataclass(frozen=True)
class Parameter:
    """A fittable parameter: its name, unit, physical range and which bound is a limit
    of nature (a fit ending there is not pushing against our choice of range)."""

    name: str
    unit: str
    description: str
    low: float
    high: float
    natural_low: bool
    natural_high: bool


def parameters(hw: HardwareSpec) -> tuple[Parameter, ...]:
    """The four parameters and their physical ranges for ``hw``."""
    read, write = nominal_gb_s(hw)
    return (
        Parameter("op_overhead_us", "us", "fixed cost of every op", 0.0, 10.0, True, False),
        Parameter(
            "array_efficiency", "", "clock_mhz as a share of the file's", 0.25, 1.0, False, True
        ),
        Parameter(
            "read_bandwidth_gb_s", "GB/s", "effective DRAM read bandwidth",
            0.1 * read, 4 * read, False, False,
        ),
        Parameter(
            "write_bandwidth_gb_s", "GB/s", "DRAM write bandwidth",
            0.1 * write, write, False, True,
        ),
    )  # fmt: skip


def nominal_gb_s(hw: HardwareSpec) -> tuple[float, float]:
    """The file's DRAM read and write bandwidths in GB/s."""
    dram = hw.dram
    return (
        dram.read_bytes_per_cycle * hw.clock_mhz / 1e3,
        dram.write_bytes_per_cycle * hw.clock_mhz / 1e3,
    )


def file_values(hw: HardwareSpec) -> dict[str, float]:
    """The four parameters' values in ``hw`` itself."""
    read, write = nominal_gb_s(hw)
    return {
        "op_overhead_us": hw.timing.op_overhead_cycles / hw.clock_mhz,
        "array_efficiency": 1.0,
        "read_bandwidth_gb_s": read,
        "write_bandwidth_gb_s": write,
    }


def physical(hw: HardwareSpec, values: Mapping[str, float]) -> Physical:
    """The :class:`Physical` values of ``values`` (the file's for any missing)."""
    v = {**file_values(hw), **values}
    return Physical(
        v["op_overhead_us"],
        hw.clock_mhz * v["array_efficiency"],
        v["read_bandwidth_gb_s"],
        v["write_bandwidth_gb_s"],
    )


@dataclass(frozen=True)
class Fit:
    """A finished fit: the parameters (with the ranges searched), the fitted values,
    the training error and where it stopped."""

    parameters: tuple[Parameter, ...]
    values: dict[str, float]
    training_mape: float
    evaluations: int
    at_bound: tuple[str, ...]


def check_request(
    hw: HardwareSpec, names: Sequence[str], ranges: Mapping[str, tuple[float, float]], where: str
) -> tuple[Parameter, ...]:
    """The parameters to fit, with the ranges asked for.

    Raises:
        InputError: for an unknown name (at ``--fit`` or ``--range``, where it was
            asked for), a repeated one, more than four, none, or a range that is
            empty or leaves the parameter's physical range.
    """
    known = {p.name: p for p in parameters(hw)}
    problems: list[Problem] = []
    for option, asked in (("--fit", names), ("--range", ranges)):
        for name in asked:
            if name not in known:
                problems.append(
                    Problem(where, option, f"unknown parameter (known: {', '.join(known)})", name)
                )
    if len(set(names)) != len(names):
        problems.append(Problem(where, "--fit", "a parameter named twice", list(names)))
    if not names or len(names) > MAX_PARAMETERS:
        problems.append(
            Problem(where, "--fit", f"fit 1 to {MAX_PARAMETERS} parameters", list(names))
        )
    chosen: list[Parameter] = []
    for name in names:
        p = known.get(name)
        if p is None:
            continue
        low, high = ranges.get(name, (p.low, p.high))
        if not (p.low <= low < high <= p.high):
            problems.append(
                Problem(
                    where,
                    f"--range {name}",
                    f"must lie inside its physical range {p.low:.4g} to {p.high:.4g}"
                    f"{' ' + p.unit if p.unit else ''} and not be empty",
                    [low, high],
                )
            )
            continue
        chosen.append(Parameter(p.name, p.unit, p.description, low, high, *_natural(p, low, high)))
    if problems:
        raise InputError(problems)
    return tuple(chosen)


def _natural(p: Parameter, low: float, high: float) -> tuple[bool, bool]:
    return (p.natural_low and low == p.low, p.natural_high and high == p.high)


def fit(
    hw: HardwareSpec, features: GemmFeatures, gemms: Measurements, chosen: Sequence[Parameter]
) -> Fit:
    """Fit the ``chosen`` parameters of ``hw`` to ``gemms`` (costed as ``features``)."""
    low = np.asarray([p.low for p in chosen])
    span = np.asarray([p.high - p.low for p in chosen])
    order = [p.name for p in parameters(hw)]

    def values(x: np.ndarray) -> dict[str, float]:
        return {p.name: float(v) for p, v in zip(chosen, low + x * span, strict=True)}

    def error(x: np.ndarray) -> float:
        return mape(predict_us(features, physical(hw, values(x))), gemms.latency_us)

    best = None
    spent = 0
    for start in STARTS:
        x0 = np.asarray([start[order.index(p.name)] for p in chosen])
        found = minimize(error, x0)
        spent += found.evaluations
        if best is None or found.value < best.value:
            best = found
    assert best is not None
    edge = 1e-3
    at_bound = tuple(
        p.name
        for p, x in zip(chosen, best.x, strict=True)
        if (x < edge and not p.natural_low) or (x > 1 - edge and not p.natural_high)
    )
    return Fit(tuple(chosen), values(best.x), best.value, spent, at_bound)


def class_errors(predicted: np.ndarray, gemms: Measurements) -> dict[str, tuple[int, float]]:
    """Per size class (and overall, ``all``), the GEMMs and the MAPE of ``predicted``."""
    sizes = gemms.size_cycles
    out = {"all": (len(gemms), mape(predicted, gemms.latency_us))}
    for label, _, _ in SIZE_CLASSES:
        mask = size_class(sizes, label)
        out[label] = (int(mask.sum()), mape(predicted[mask], gemms.latency_us[mask]))
    big = sizes >= 1e5
    out[">= 1e5"] = (int(big.sum()), mape(predicted[big], gemms.latency_us[big]))
    return out


def fitted_hardware(hw: HardwareSpec, values: Mapping[str, float]) -> HardwareSpec:
    """``hw`` with the fitted ``values`` written into its fields.  A fitted efficiency
    slows the clock; every other rate and latency keeps its time (bytes per second,
    nanoseconds), so its per-cycle number scales with the clock."""
    p = physical(hw, values)
    clock = round(p.clock_mhz, 3)
    scale = hw.clock_mhz / clock

    def cycles(n: int) -> int:
        return math.floor(n / scale + 0.5)

    dram = hw.dram.model_copy(
        update={
            "bandwidth_bytes_per_cycle": round(hw.dram.bandwidth_bytes_per_cycle * scale, 3),
            "latency_cycles": cycles(hw.dram.latency_cycles),
            "read_bandwidth_bytes_per_cycle": round(p.read_gb_s * 1e3 / clock, 3),
            "write_bandwidth_bytes_per_cycle": round(p.write_gb_s * 1e3 / clock, 3),
        }
    )

    def at_clock(level: Level) -> Level:
        """A level of the interconnect with its bandwidth and latency at the fitted clock."""
        return level.model_copy(
            update={
                "bandwidth_bytes_per_cycle": round(level.bandwidth_bytes_per_cycle * scale, 3),
                "latency_cycles": cycles(level.latency_cycles),
            }
        )

    link = at_clock(hw.interconnect).model_copy(
        update={"levels": tuple(at_clock(level) for level in hw.interconnect.levels)}
    )
    timing = hw.timing.model_copy(
        update={"op_overhead_cycles": math.floor(p.op_overhead_us * clock + 0.5)}
    )
    return hw.model_copy(
        update={"clock_mhz": clock, "dram": dram, "interconnect": link, "timing": timing}
    )


@dataclass(frozen=True)
class Calibration:
    """A fit and what it was made from: the file and the GEMMs fitted, the GEMMs
    costed once, the fitted file."""

    hardware: HardwareSpec
    gemms: Measurements
    features: GemmFeatures
    fit: Fit
    fitted: HardwareSpec


def calibrate(
    hw: HardwareSpec,
    gemms: Measurements,
    *,
    fold_overlap: bool,
    psums: PsumPolicy = PsumPolicy.CHUNK,
    names: Sequence[str] = (),
    ranges: Mapping[str, tuple[float, float]] | None = None,
    where: str = "calibrate",
) -> Calibration:
    """Fit ``names`` (all four by default) of ``hw``'s parameters, searched in
    ``ranges`` (their physical ranges by default), to ``gemms``.

    Raises:
        InputError: for a request :func:`check_request` refuses (named by ``where``).
    """
    chosen = check_request(hw, list(names) or [p.name for p in parameters(hw)], ranges or {}, where)
    features = gemm_features(hw, gemms, fold_overlap, psums)
    result = fit(hw, features, gemms, chosen)
    return Calibration(hw, gemms, features, result, fitted_hardware(hw, result.values))


MAX_FOLDS = 20
"""Most folds of a cross-validation: each is one more fit over nearly every GEMM."""


def check_folds(folds: int, gemms: Measurements, where: str) -> None:
    """Refuse a cross-validation of fewer than 2 folds, more than :data:`MAX_FOLDS`, or
    more folds than GEMMs.

    Raises:
        InputError: naming ``--folds`` at ``where``.
    """
    if len(gemms) <= MAX_FOLDS:
        top, bound = len(gemms), f"the {len(gemms)} GEMMs measured"
    else:
        top, bound = MAX_FOLDS, f"{MAX_FOLDS} (each fold is one more fit)"
    if not 2 <= folds <= top:
        raise InputError.single(where, "--folds", f"must be 2 to {bound}", folds)


def cross_validated(
    calibration: Calibration, folds: int, *, seed: int = 0, where: str = "calibrate"
) -> np.ndarray:
    """Each GEMM of ``calibration`` with its latency (us, the fit's closed form) as
    predicted by the same fit (its parameters and ranges) on the other ``folds - 1``
    of ``folds`` random folds (``seed``): every GEMM predicted once by a fit that did
    not see it.  The GEMMs are not costed again.

    Raises:
        InputError: for fewer than 2 folds, more than :data:`MAX_FOLDS` or more than
            GEMMs (named by ``where``).
    """
    hw, gemms, features = calibration.hardware, calibration.gemms, calibration.features
    chosen = calibration.fit.parameters
    check_folds(folds, gemms, where)
    order = np.random.default_rng(seed).permutation(len(gemms))
    predicted = np.zeros(len(gemms))
    for held in np.array_split(order, folds):
        train = np.setdiff1d(order, held)
        result = fit(hw, features.subset(train), gemms.subset(train), chosen)
        predicted[held] = predict_us(features.subset(held), physical(hw, result.values))
    return predicted
