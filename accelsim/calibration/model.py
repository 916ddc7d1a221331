"""The latency of a lone measured GEMM as a closed form of the fitted parameters.

``accelsim layer`` times a lone GEMM from its costs (:mod:`accelsim.timing.costs`)
with the engine's arithmetic (:mod:`accelsim.timing.single_op`).  A fit evaluates
hundreds of GEMMs at every step of its optimiser, so :func:`gemm_features` costs
each GEMM once, in each orientation, with the parameters a fit leaves alone (the
arrays, buffers and word sizes), and :func:`predict_us` prices them for any
values of the fitted ones, as the engine runs a lone op (the run's default tile
groups, :func:`~accelsim.timing.groups.lone_op_groups`): the fixed cost per op
passes, the prologue (first tiles) arrives, then ``G`` tile groups of ``c``
compute cycles each; while group ``j`` computes, the next group's reads (``f``
cycles of the channel) are fetched and group ``j``'s outputs (``d`` cycles) drain
behind it, first come first served; then the last output tile drains.  With
``C`` the compute and ``T`` the traffic past the prologue and epilogue, the groups
take ``C + d`` when ``c >= f + d`` (compute-bound: the last group's drain is
left), else ``T + max(c - f, 0) + max(c - d, 0)`` (the channel idles while the
first group computes past its fetch and while the last computes past its
predecessor's drain).  That is exact up to the engine's rounding to whole cycles
at a DRAM latency of 0; each way across the channel adds a nonzero latency once.
``accelsim calibrate`` reports how far the engine lands from it on the fitted file.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from accelsim.calibration.measurements import Measurements
from accelsim.config.base import Convention
from accelsim.config.enums import DEFAULT_CHUNKS_PER_OP, DEFAULT_GROUP_CYCLES, PsumPolicy
from accelsim.config.hardware import HardwareSpec, Orientation
from accelsim.driver.layer import gemm_for, layer_graph
from accelsim.errors import MAX_COUNT, MAX_COUNT_TEXT, InputError, LimitError
from accelsim.graph.ops import Phase
from accelsim.mapping.schedule import schedule
from accelsim.timing.costs import OpCosts, op_costs
from accelsim.timing.groups import lone_op_groups
from accelsim.timing.machine import machine_of
from accelsim.timing.single_op import single_op_cycles


@dataclass(frozen=True)
class Orientated:
    """Per GEMM, in one orientation: compute cycles without the fixed cost per op,
    DRAM bytes read and written, and those of the prologue and epilogue."""

    compute_cycles: np.ndarray
    read_bytes: np.ndarray
    write_bytes: np.ndarray
    prologue_bytes: np.ndarray
    epilogue_bytes: np.ndarray

    def subset(self, rows: np.ndarray) -> Orientated:
        """The GEMMs at ``rows`` (indices or a mask)."""
        return Orientated(*(getattr(self, f.name)[rows] for f in fields(self)))


@dataclass(frozen=True)
class GemmFeatures:
    """The measured GEMMs costed on one hardware: as given and transposed (the
    transpose only with ``mapping.orientation: best``)."""

    given: Orientated
    transposed: Orientated | None
    macs: np.ndarray
    latency_cycles: int
    peak_macs_per_cycle: int

    def subset(self, rows: np.ndarray) -> GemmFeatures:
        """The GEMMs at ``rows`` (indices or a mask)."""
        return GemmFeatures(
            self.given.subset(rows),
            None if self.transposed is None else self.transposed.subset(rows),
            self.macs[rows],
            self.latency_cycles,
            self.peak_macs_per_cycle,
        )


@dataclass(frozen=True)
class Physical:
    """Values of the four physical parameters (the hardware's own for any not fitted)."""

    op_overhead_us: float
    clock_mhz: float
    read_gb_s: float
    write_gb_s: float


def gemm_features(
    hw: HardwareSpec, gemms: Measurements, fold_overlap: bool, psums: PsumPolicy
) -> GemmFeatures:
    """Cost every GEMM of ``gemms`` on ``hw`` (no fixed cost per op, given orientation)."""
    plain = hw.model_copy(
        update={
            "timing": hw.timing.model_copy(update={"op_overhead_cycles": 0}),
            "mapping": hw.mapping.model_copy(update={"orientation": Orientation.AS_GIVEN}),
        }
    )
    dims = list(zip(gemms.m.tolist(), gemms.n.tolist(), gemms.k.tolist(), strict=True))
    given = _orientated(plain, dims, fold_overlap, psums)
    transposed = None
    if hw.mapping.orientation is Orientation.BEST:
        transposed = _orientated(plain, [(n, m, k) for m, n, k in dims], fold_overlap, psums)
    return GemmFeatures(
        given,
        transposed,
        gemms.m * gemms.n * gemms.k,
        hw.dram.latency_cycles,
        hw.array.pes,
    )


def _orientated(
    hw: HardwareSpec, dims: list[tuple[int, int, int]], fold_overlap: bool, psums: PsumPolicy
) -> Orientated:
    """Each GEMM of ``dims`` costed, each distinct one once."""
    costed: dict[tuple[int, int, int], tuple[int, int, int, int, int]] = {}
    for m, n, k in dims:
        if (m, n, k) not in costed:
            c = _lone_gemm_costs(hw, m, n, k, fold_overlap, psums, None)
            costed[m, n, k] = (
                int(c.compute_cycles[0]),
                int(c.dram_read_bytes[0]),
                int(c.dram_ofmap_write_bytes[0]),
                int(c.prologue_bytes[0]),
                int(c.epilogue_bytes[0]),
            )
    columns = [costed[d] for d in dims]
    arrays = np.asarray(columns, np.float64).reshape(len(dims), 5).T
    return Orientated(*arrays)


def _lone_gemm_costs(
    hw: HardwareSpec,
    m: int,
    n: int,
    k: int,
    fold_overlap: bool,
    psums: PsumPolicy,
    group_cycles: int | None,
) -> OpCosts:
    """The costs of ``C[m x n] = A[m x k] . B[k x n]`` run alone on ``hw``'s array, as
    ``accelsim layer`` lowers it (``group_cycles`` None: the per-op tile groups)."""
    graph = layer_graph(hw, gemm_for(m, n, k, Phase.FWD), Phase.FWD)
    machine = machine_of(hw)
    return op_costs(
        graph,
        schedule(graph, (machine.array,)),
        machine,
        Convention.ACCELSIM,
        psums,
        DEFAULT_CHUNKS_PER_OP,
        fold_overlap=fold_overlap,
        group_cycles=group_cycles,
    )


def lone_op_cycles(o: Orientated, overhead: int, read: float, write: float, lat: int) -> np.ndarray:
    """Cycles of each GEMM (or vector op) alone (see the module docstring)."""
    compute = o.compute_cycles
    busy = np.maximum(compute + overhead, np.ceil((o.read_bytes + o.write_bytes) / read))
    # past 2^62 cycles the group count no longer changes, and int64 ends at 2^63
    capped = np.minimum(busy, MAX_COUNT).astype(np.int64)
    groups = lone_op_groups(capped, DEFAULT_GROUP_CYCLES, DEFAULT_CHUNKS_PER_OP)
    prologue = np.where(groups == 1, o.read_bytes, o.prologue_bytes)  # one group: all of it
    fetch = (o.read_bytes - prologue) / read
    drain = (o.write_bytes - o.epilogue_bytes) / write
    c, f, d = compute / groups, fetch / np.maximum(groups - 1, 1), drain / groups
    body = np.where(
        c >= f + d,
        compute + d,
        fetch + drain + np.maximum(c - f, 0) + np.maximum(c - d, 0),
    )
    ends: np.ndarray = (
        overhead
        + lat * ((prologue > 0).astype(float) + (o.write_bytes > 0))
        + prologue / read
        + body
        + o.epilogue_bytes / write
    )
    return ends


def _first_order(o: Orientated, read: float, write: float) -> np.ndarray:
    """The orientation criterion of :class:`~accelsim.timing.gemm_costs.ChipOptions`."""
    longer: np.ndarray = np.maximum(o.compute_cycles, o.read_bytes / read + o.write_bytes / write)
    return longer


def predict_us(features: GemmFeatures, p: Physical) -> np.ndarray:
    """Predicted latency of each GEMM, in microseconds, at the values ``p``."""
    overhead = round(p.op_overhead_us * p.clock_mhz)
    read = p.read_gb_s * 1e3 / p.clock_mhz  # GB/s over MHz: bytes per cycle
    write = p.write_gb_s * 1e3 / p.clock_mhz
    lat = features.latency_cycles
    cycles = lone_op_cycles(features.given, overhead, read, write, lat)
    t = features.transposed
    if t is not None:
        flip = _first_order(t, read, write) < _first_order(features.given, read, write)
        cycles = np.where(flip, lone_op_cycles(t, overhead, read, write, lat), cycles)
    us: np.ndarray = cycles / p.clock_mhz
    return us


def compute_bound_us(features: GemmFeatures, clock_mhz: float) -> np.ndarray:
    """Each GEMM's compute bound: its MACs at every PE's peak, in microseconds."""
    bound: np.ndarray = features.macs / features.peak_macs_per_cycle / clock_mhz
    return bound


def engine_us(
    hw: HardwareSpec,
    gemms: Measurements,
    fold_overlap: bool,
    psums: PsumPolicy = PsumPolicy.CHUNK,
) -> np.ndarray:
    """Each GEMM's latency as ``accelsim layer`` gives it on ``hw`` (its costs and the
    engine's arithmetic for a lone op, :mod:`accelsim.timing.single_op`), in us; each
    distinct GEMM simulated once.

    Raises:
        InputError: at the GEMM's first row of ``gemms.source`` when it takes more
            than :data:`~accelsim.errors.MAX_COUNT` cycles on ``hw`` (worded for the
            command's use: ``hw`` the fitted file).
    """
    machine = machine_of(hw)
    timed: dict[tuple[int, int, int], float] = {}
    dims = list(zip(gemms.m.tolist(), gemms.n.tolist(), gemms.k.tolist(), strict=True))
    for index, (m, n, k) in enumerate(dims):
        if (m, n, k) in timed:
            continue
        try:
            costs = _lone_gemm_costs(hw, m, n, k, fold_overlap, psums, DEFAULT_GROUP_CYCLES)
            cycles = single_op_cycles(costs, machine)
        except LimitError:
            raise InputError.single(
                gemms.source,
                gemms.row(index),
                f"the GEMM takes more than {MAX_COUNT_TEXT} cycles ({MAX_COUNT:.3g}) on the"
                " fitted hardware, beyond what an event's time is kept in",
                f"{m} x {n} x {k}",
            ) from None
        timed[m, n, k] = cycles / hw.clock_mhz
    return np.asarray([timed[d] for d in dims])
