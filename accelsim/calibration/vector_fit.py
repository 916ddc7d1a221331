"""Fitting the vector unit's physical parameters to measured lone vector ops.

A vector op alone on the chip runs as ``accelsim layer`` runs a lone GEMM: its fixed
cost, then its tile groups, each computing while the next one's reads arrive and its
own writes drain (:func:`accelsim.calibration.model.lone_op_cycles`).  Its fixed cost
is its class's (:class:`~accelsim.config.enums.VectorClass`); its compute is its
operations on the lanes or its bytes through the unit's stream
(``vector_unit.stream_bytes_per_cycle``), whichever takes longer.  The parameters,
each in the range a fit must stay in:

=============================  ===============================================  ==============
name                           what it sets in the hardware file                physical range
=============================  ===============================================  ==============
``elementwise_overhead_us``    ``vector_unit.op_overhead_cycles``               0 to 10 us
``<class>_overhead_us``        ``vector_unit.class_overhead_cycles.<class>``    0 to 10 us
                               (transcendental, reduce, data_movement, norm)
``vector_stream_gb_s``         ``vector_unit.stream_bytes_per_cycle``           0.1 to 1 x the
                                                                                DRAM's
``sine_cosine_ops``            nothing: the measured sine and cosine's          1 to 2,000
                               operations per element
=============================  ===============================================  ==============

The element-wise class's fixed cost is the unit's own (every class without one of its
own pays it); a class the measurements do not have keeps its start and is not written.

The stream stops at the DRAM's bandwidth (``dram.bandwidth_bytes_per_cycle``): a lone
op's operands come from DRAM and go back to it.  Sine and cosine run on the lanes at
a rate no layer of accelsim uses, so their count is fitted for their own predictions
and reported, not written.  Every other parameter of the file (the clock, the DRAM's
read and write bandwidths, fitted on GEMMs) is kept.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from accelsim.calibration.measurements import mape
from accelsim.calibration.model import Orientated, lone_op_cycles
from accelsim.calibration.optimize import minimize
from accelsim.calibration.vector_ops import (
    CLASSES,
    FITTED_OPS,
    OPS,
    VectorMeasurements,
    elements,
)
from accelsim.config.base import Convention
from accelsim.config.enums import (
    DEFAULT_CHUNKS_PER_OP,
    DEFAULT_GROUP_CYCLES,
    PsumPolicy,
    VectorClass,
)
from accelsim.config.hardware import HardwareSpec
from accelsim.errors import MAX_COUNT
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import OpGraph, Phase, Tensor, TensorKind
from accelsim.mapping.schedule import schedule
from accelsim.timing.costs import op_costs
from accelsim.timing.groups import lone_op_groups
from accelsim.timing.machine import machine_of
from accelsim.timing.single_op import single_op_cycles

OVERHEADS = {c: f"{c.value}_overhead_us" for c in VectorClass}
"""Each class's fixed-cost parameter."""
NAMES = (*OVERHEADS.values(), "vector_stream_gb_s", "sine_cosine_ops")
STARTS = tuple(
    (overhead,) * len(OVERHEADS) + shared
    for overhead, shared in ((0.1, (0.5, 0.1)), (0.05, (0.9, 0.3)), (0.3, (0.2, 0.02)))
)
"""Starting points of the search, in the unit box of each parameter's range."""


@dataclass(frozen=True)
class VectorFeatures:
    """Per measured op, on one hardware: its class (the index of its
    :class:`VectorClass`), lane operations (those of sine and cosine apart, as
    elements), bytes read and written; the lanes and DRAM of the file."""

    op_class: np.ndarray
    lane_ops: np.ndarray
    trig_elements: np.ndarray
    read_bytes: np.ndarray
    write_bytes: np.ndarray
    lanes: int
    clock_mhz: float
    read_bytes_per_cycle: float
    write_bytes_per_cycle: float
    latency_cycles: int

    def subset(self, rows: np.ndarray) -> VectorFeatures:
        """The ops at ``rows`` (indices or a mask)."""
        return VectorFeatures(
            self.op_class[rows], self.lane_ops[rows], self.trig_elements[rows],
            self.read_bytes[rows], self.write_bytes[rows], self.lanes, self.clock_mhz,
            self.read_bytes_per_cycle, self.write_bytes_per_cycle, self.latency_cycles,
        )  # fmt: skip


def vector_features(hw: HardwareSpec, ops: VectorMeasurements) -> VectorFeatures:
    """What each measured op of ``ops`` reads, writes and computes (:data:`OPS`)."""
    n = len(ops)
    lane_ops, trig, reads, writes = (np.zeros(n) for _ in range(4))
    for name, kind in OPS.items():
        rows = ops.op == name
        if not rows.any():
            continue
        d0, d1, d2 = ops.d0[rows], ops.d1[rows], ops.d2[rows]
        size = d0 * d1 * d2
        reads[rows] = sum(elements(share, d0, d1, d2) * word for share, word in kind.reads)
        writes[rows] = sum(elements(share, d0, d1, d2) * word for share, word in kind.writes)
        if kind.ops_per_element == FITTED_OPS:
            trig[rows] = size
        else:
            lane_ops[rows] = size * kind.ops_per_element
    dram = hw.dram
    order = list(VectorClass)
    classes = np.asarray([order.index(OPS[str(op)].op_class) for op in ops.op], np.int64)
    return VectorFeatures(
        classes, lane_ops, trig, reads, writes, hw.vector_unit.lanes, hw.clock_mhz,
        dram.read_bytes_per_cycle, dram.write_bytes_per_cycle, dram.latency_cycles,
    )  # fmt: skip


def ranges(hw: HardwareSpec) -> dict[str, tuple[float, float]]:
    """Each parameter's physical range on ``hw`` (see the module docstring)."""
    dram_gb_s = hw.dram.bandwidth_bytes_per_cycle * hw.clock_mhz / 1e3
    return {
        **{name: (0.0, 10.0) for name in OVERHEADS.values()},
        "vector_stream_gb_s": (0.1 * dram_gb_s, dram_gb_s),
        "sine_cosine_ops": (1.0, 2000.0),
    }


def predict_us(f: VectorFeatures, values: Mapping[str, float]) -> np.ndarray:
    """Each op's latency alone, in microseconds, at the parameter ``values``."""
    clock = f.clock_mhz
    by_class = np.asarray([_cycles(values[name], clock) for name in OVERHEADS.values()])
    overhead = by_class[f.op_class]
    stream = values["vector_stream_gb_s"] * 1e3 / clock
    ops = f.lane_ops + f.trig_elements * values["sine_cosine_ops"]
    compute = np.maximum(np.ceil(ops / f.lanes), np.ceil((f.read_bytes + f.write_bytes) / stream))
    read, write = f.read_bytes_per_cycle, f.write_bytes_per_cycle
    busy = np.maximum(compute + overhead, np.ceil((f.read_bytes + f.write_bytes) / read))
    capped = np.minimum(busy, MAX_COUNT).astype(np.int64)
    groups = lone_op_groups(capped, DEFAULT_GROUP_CYCLES, DEFAULT_CHUNKS_PER_OP)
    sides = Orientated(
        compute, f.read_bytes, f.write_bytes, f.read_bytes // groups, f.write_bytes // groups
    )
    us: np.ndarray = lone_op_cycles(sides, overhead, read, write, f.latency_cycles) / clock
    return us


def _cycles(us: float, clock_mhz: float) -> int:
    """A time in cycles at ``clock_mhz``, to the nearest (halves up), as written."""
    return math.floor(us * clock_mhz + 0.5)


@dataclass(frozen=True)
class VectorFit:
    """A finished fit: the ranges searched, the fitted values, the training error, and
    the classes the fitted ops have (the others' fixed costs are their starts)."""

    ranges: dict[str, tuple[float, float]]
    values: dict[str, float]
    training_mape: float
    evaluations: int
    measured: tuple[VectorClass, ...]


def fit_vector(hw: HardwareSpec, f: VectorFeatures, ops: VectorMeasurements) -> VectorFit:
    """Fit the parameters to ``ops`` (costed as ``f``) by their MAPE."""
    box = ranges(hw)
    low = np.asarray([box[n][0] for n in NAMES])
    span = np.asarray([box[n][1] - box[n][0] for n in NAMES])

    def values(x: np.ndarray) -> dict[str, float]:
        return {n: float(v) for n, v in zip(NAMES, low + x * span, strict=True)}

    def error(x: np.ndarray) -> float:
        return mape(predict_us(f, values(x)), ops.latency_us)

    found = [minimize(error, np.asarray(start)) for start in STARTS]
    best = min(found, key=lambda m: m.value)
    measured = tuple(c for i, c in enumerate(VectorClass) if (f.op_class == i).any())
    evaluations = sum(m.evaluations for m in found)
    return VectorFit(box, values(best.x), best.value, evaluations, measured)


@dataclass(frozen=True)
class VectorCalibration:
    """A vector fit and what it was made from: the file and the ops fitted, the ops
    costed once, the fitted file."""

    hardware: HardwareSpec
    ops: VectorMeasurements
    features: VectorFeatures
    fit: VectorFit
    fitted: HardwareSpec


def calibrate_vector_unit(hw: HardwareSpec, ops: VectorMeasurements) -> VectorCalibration:
    """Fit the vector unit of ``hw`` (its fixed cost per class and stream, and the
    measured sine and cosine's operations per element) to ``ops``, each measured alone."""
    features = vector_features(hw, ops)
    result = fit_vector(hw, features, ops)
    fitted = vector_hardware(hw, result.values, result.measured)
    return VectorCalibration(hw, ops, features, result, fitted)


def cross_validated_vector(calibration: VectorCalibration, folds: int, seed: int = 0) -> np.ndarray:
    """Each op of ``calibration`` with its latency (us, the closed form) as predicted
    by the same fit on the other ``folds - 1`` of ``folds`` random folds (``seed``)."""
    hw, ops, f = calibration.hardware, calibration.ops, calibration.features
    order = np.random.default_rng(seed).permutation(len(ops))
    predicted = np.zeros(len(ops))
    for held in np.array_split(order, folds):
        train = np.setdiff1d(order, held)
        result = fit_vector(hw, f.subset(train), ops.subset(train))
        predicted[held] = predict_us(f.subset(held), result.values)
    return predicted


def vector_hardware(
    hw: HardwareSpec, values: Mapping[str, float], measured: tuple[VectorClass, ...]
) -> HardwareSpec:
    """``hw`` with the fitted vector unit, at the file's clock: the element-wise fixed
    cost as the unit's, every other ``measured`` class's as its own, in cycles, and its
    stream in bytes per cycle."""
    clock = hw.clock_mhz
    unit = hw.vector_unit
    update: dict[str, object] = {
        "stream_bytes_per_cycle": round(values["vector_stream_gb_s"] * 1e3 / clock, 3)
    }
    if VectorClass.ELEMENTWISE in measured:
        update["op_overhead_cycles"] = _cycles(values[OVERHEADS[VectorClass.ELEMENTWISE]], clock)
    own = {
        c.value: _cycles(values[OVERHEADS[c]], clock)
        for c in measured
        if c is not VectorClass.ELEMENTWISE
    }
    update["class_overhead_cycles"] = unit.class_overhead_cycles.model_copy(update=own)
    return hw.model_copy(update={"vector_unit": unit.model_copy(update=update)})


def vector_class_errors(
    predicted: np.ndarray, ops: VectorMeasurements
) -> dict[str, tuple[int, float]]:
    """Per op class (and overall, ``all``), the ops and the MAPE of ``predicted``."""
    classes = ops.op_class
    out = {"all": (len(ops), mape(predicted, ops.latency_us))}
    for op_class in CLASSES:
        mask = classes == op_class.value
        out[op_class.value] = (int(mask.sum()), mape(predicted[mask], ops.latency_us[mask]))
    return out


def vector_graph(hw: HardwareSpec, op: str, d0: int, d1: int, d2: int, trig_ops: int) -> OpGraph:
    """The step of one measured op alone: a vector op reading and writing its tensors
    (:data:`OPS`), ``trig_ops`` operations per element for sine and cosine."""
    kind = OPS[op]
    dims = (np.asarray(d0), np.asarray(d1), np.asarray(d2))

    def tensors(side: str, shares: tuple[tuple[str, int], ...]) -> list[Tensor]:
        return [
            Tensor(f"{side}{j}", TensorKind.ACTIVATION, int(elements(share, *dims)), word)
            for j, (share, word) in enumerate(shares)
        ]

    per_element = trig_ops if kind.ops_per_element == FITTED_OPS else kind.ops_per_element
    builder = GraphBuilder(hw.word_bytes)
    builder.vector(
        op, op, Phase.FWD, d0 * d1 * d2, per_element,
        tensors("in", kind.reads), tensors("out", kind.writes), op_class=kind.op_class,
    )  # fmt: skip
    return builder.build()


def engine_vector_us(hw: HardwareSpec, ops: VectorMeasurements, trig_ops: float) -> np.ndarray:
    """Each measured op's latency as the engine times it alone on ``hw`` (its costs
    and :mod:`accelsim.timing.single_op`'s arithmetic), in us; each distinct op and
    shape simulated once, sine and cosine at ``trig_ops`` (rounded) per element."""
    machine = machine_of(hw)
    timed: dict[tuple[str, int, int, int], float] = {}
    rows = list(
        zip(ops.op.tolist(), ops.d0.tolist(), ops.d1.tolist(), ops.d2.tolist(), strict=True)
    )
    for row in rows:
        if row in timed:
            continue
        graph = vector_graph(hw, *row, round(trig_ops))
        costs = op_costs(
            graph, schedule(graph, (machine.array,)), machine, Convention.ACCELSIM,
            PsumPolicy.CHUNK, DEFAULT_CHUNKS_PER_OP, group_cycles=DEFAULT_GROUP_CYCLES,
        )  # fmt: skip
        timed[row] = single_op_cycles(costs, machine) / hw.clock_mhz
    return np.asarray([timed[r] for r in rows])
