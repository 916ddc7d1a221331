"""Approximate random dropout over many steps: per-step counts and their cost.

The engine simulates one step (step 0's patterns).  Every other drawn step
changes only the GEMMs its patterns touch, so each of them is counted here,
fold by fold, on the baseline step's schedule: its dimensions after compaction,
what its folds use under tile patterns, compacted per column block
(:func:`accelsim.techniques.dropout.folds.count_surviving`, the Numba kernel when it
pays), then compute cycles, MACs, SRAM and DRAM bytes with the same closed forms
and fold use as the engine
(:func:`accelsim.timing.costs.unit_costs`).

A step's cost is the simulated step's, scaled around it [D]:

* cycles by the ratio of the step's summed per-op roofline time
  (``max(compute, DRAM bytes / bandwidth)`` of every op) to step 0's, never less
  than its bound;
* its bound is the larger of the simulated step's DRAM-traffic bound scaled by the
  step's DRAM bytes and its busiest-unit bound with the array's compute scaled by
  the step's (the interconnect's unchanged): the binding one of the two may
  change from step to step, and the report names the one binding on average;
* energy by the change of each affected GEMM's MAC, SRAM and DRAM counts, each
  priced at the baseline step's energy per count, plus static energy for the
  change of cycles.

The vector ops of a stochastic-depth layer and of its residual branch run for the
step's kept samples: each one's roofline time, DRAM bytes, dynamic energy and vector
unit cycles are the baseline op's scaled by its elements at the step's kept samples
over its elements at the whole batch [D].

Step 0's cost is the simulated one exactly.  Composed with other techniques
(gradient skipping, ADA-GP, a pipeline schedule), the simulated step is the
composed one and the steps are counted on the baseline's GEMMs that the composed
step still runs: each drawn step's change is applied to the composed step as the
same ratio [D].
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelsim.graph.ops import GemmOp, OpGraph, Phase, VectorOp
from accelsim.mapping.schedule import USE_FIELDS, UnitSchedule, schedule_unit, whole_use
from accelsim.mapping.tile_reuse import tile_reuse
from accelsim.mapping.units import main_array
from accelsim.report.result import RunResult
from accelsim.techniques.base import SimulatedStep, StepCost, TechniqueContext
from accelsim.techniques.dropout.folds import count_surviving
from accelsim.techniques.dropout.samples import SAMPLE_DIMS
from accelsim.techniques.dropout.sites import (
    MAPPED,
    Shrink,
    TileWeight,
    shrunk_steps,
    tile_geometry,
)
from accelsim.timing.costs import UNIT_ARRAY, UNIT_COMM, UNIT_VECTOR, unit_costs
from accelsim.timing.gemm_costs import ChipOptions

SRAM = ("ifmap", "filter", "ofmap")


@dataclass(frozen=True)
class StepPlan:
    """What the per-step count needs: shrinks and tile weights by layer, kept units and
    tile patterns per step and site, the tile size, and the layers whose vector ops run
    for a sample site's kept samples (by layer: the site's column of ``kept``) out of
    ``batch``."""

    shrinks: Mapping[tuple[str, Phase], list[Shrink]]
    tiles: Mapping[str, TileWeight]
    kept: np.ndarray
    fetched: np.ndarray  # units a gather along a weight's contiguous dimension moves
    patterns: dict[str, np.ndarray]
    tile: tuple[int, int]
    samples: Mapping[str, int]
    batch: int


@dataclass(frozen=True)
class StepCounts:
    """Per step and affected GEMM of the baseline graph (``[step, gemm]``), and the
    share of each affected vector op's baseline work each step does (``[step, op]``)."""

    op_ids: np.ndarray
    layers: tuple[str, ...]
    costs: dict[str, np.ndarray]  # OpCosts fields, each [step, gemm]
    steps: int
    vector_ids: np.ndarray
    vector_share: np.ndarray


def vector_shares(graph: OpGraph, plan: StepPlan) -> tuple[np.ndarray, np.ndarray]:
    """The vector ops of ``graph`` that run for a sample site's kept samples, and the
    share of their elements each step runs (``[step, op]``: ``ceil(e kept / batch) / e``)."""
    ids, shares = [], []
    for op in graph.ops:
        col = plan.samples.get(op.layer)
        if col is None or not isinstance(op, VectorOp) or op.phase not in SAMPLE_DIMS:
            continue
        ids.append(op.op_id)
        shares.append(-(-op.elements * plan.kept[:, col] // plan.batch) / max(op.elements, 1))
    steps = plan.kept.shape[0]
    share = np.stack(shares, axis=1) if shares else np.zeros((steps, 0))
    return np.asarray(ids, np.int64), share


def count_steps(ctx: TechniqueContext, base: RunResult, plan: StepPlan) -> StepCounts:
    """Dims, surviving folds, cycles, MACs, SRAM and DRAM bytes of every step's GEMMs."""
    hw = ctx.hardware
    unit = main_array(hw)
    table = schedule_unit(base.graph, unit, tile_reuse(base.graph, (unit, *ctx.extra_arrays)))
    dataflow = unit.array.dataflow
    rows_mapped, cols_mapped = MAPPED[dataflow]
    picked: list[int] = []
    own: list[int] = []  # each picked GEMM's count
    dims: list[np.ndarray] = []
    b_dims: list[np.ndarray] = []  # k and n of the B operand's fetched extent
    geometry: list[tuple[int, int, TileWeight] | None] = []
    steps = plan.kept.shape[0]
    for j, op_id in enumerate(table.op_index.tolist()):
        op = base.graph.ops[op_id]
        assert isinstance(op, GemmOp)
        shrinks = plan.shrinks.get((op.layer, op.phase), [])
        w = plan.tiles.get(op.layer)
        geo = tile_geometry(op, w, dataflow)
        if not shrinks and geo is None:
            continue
        picked.append(j)
        own.append(op.count)
        shrunk = shrunk_steps(op, shrinks, plan.kept)
        dims.append(np.stack([shrunk[d] for d in ("m", "n", "k", "count")], axis=1))
        fetched = shrunk_steps(op, shrinks, plan.kept, plan.fetched)
        b_dims.append(np.stack([fetched["k"], fetched["n"]], axis=1))
        geometry.append(None if geo is None or w is None else (*geo, w))
    g = len(picked)
    idx = np.asarray(picked, np.int64)
    mnk = np.stack(dims, axis=1) if dims else np.zeros((steps, 0, 4), np.int64)
    m, n, k, count = (mnk[:, :, i].astype(np.int64) for i in range(4))
    b_kn = np.stack(b_dims, axis=1) if b_dims else np.zeros((steps, 0, 2), np.int64)
    named = {"m": m, "n": n, "k": k}
    sr, sc = named[rows_mapped], named[cols_mapped]
    t = named[({"m", "n", "k"} - {rows_mapped, cols_mapped}).pop()]
    rows, cols = unit.array.rows, unit.array.cols
    # tile patterns leave the dims alone: step 0's are every step's
    fields = {
        "sr": sr[0], "sc": sc[0], "t": t[0],
        "rows": np.full(g, rows, np.int64), "cols": np.full(g, cols, np.int64),
        "sr_is": np.asarray([x[0] if x else 0 for x in geometry], np.int64),
        "sc_is": np.asarray([x[1] if x else 0 for x in geometry], np.int64),
        "w_in": np.asarray([x[2].w_in if x else 1 for x in geometry], np.int64),
        "w_out": np.asarray([x[2].w_out if x else 1 for x in geometry], np.int64),
        "part": np.asarray([x[2].part if x else 1 for x in geometry], np.int64),
        "tile_rows": np.full(g, plan.tile[0], np.int64),
        "tile_cols": np.full(g, plan.tile[1], np.int64),
    }  # fmt: skip
    site = np.asarray([x[2].site if x else -1 for x in geometry], np.int64)
    use = count_surviving(fields, plan.patterns, site) if plan.tiles else None
    # the schedule's count of each GEMM (its share on this array) scaled as the op's
    counts = table.count[idx] * count // np.asarray(own, np.int64)
    flat = _flat_table(table, idx, steps, (m, n, k, sr, sc, t, counts), b_kn, use)
    run = ctx.run
    timing = run.timing
    costs = unit_costs(
        flat,
        timing.convention,
        timing.psums,
        timing.chunks_per_op,
        fold_overlap=timing.fold_overlap,
        chip=ChipOptions.of(base.machine, timing.convention),
    )
    shaped = {name: v.reshape(steps, g) for name, v in costs.items()}
    op_ids = table.op_index[idx]
    layers = tuple(base.graph.ops[i].layer for i in op_ids.tolist())
    return StepCounts(op_ids, layers, shaped, steps, *vector_shares(base.graph, plan))


def _flat_table(
    table: UnitSchedule,
    idx: np.ndarray,
    steps: int,
    dims: tuple[np.ndarray, ...],
    b_kn: np.ndarray,
    use: np.ndarray | None,
) -> UnitSchedule:
    """The rows ``idx`` of ``table`` repeated for every step with that step's dims (and
    counts), B's
    fetched ``k x n`` extent (``[step, gemm, 2]``) and what its running folds use
    (``[step, gemm, field]``, :data:`USE_FIELDS`; None: all of them run)."""
    m, n, k, sr, sc, t, count = (d.reshape(-1) for d in dims)
    b_k, b_n = b_kn[:, :, 0].reshape(-1), b_kn[:, :, 1].reshape(-1)
    rows, cols = table.unit.array.rows, table.unit.array.cols
    uses: dict[str, Any] = (
        whole_use(sr, sc, t, rows, cols)
        if use is None
        else {name: use[:, :, i].reshape(-1) for i, name in enumerate(USE_FIELDS)}
    )

    def rep(a: np.ndarray) -> np.ndarray:
        return np.tile(a[idx], steps)

    m0, n0, k0 = rep(table.m), rep(table.n), rep(table.k)
    return dataclasses.replace(
        table,
        op_index=np.arange(m.shape[0], dtype=np.int64),
        dataflow=rep(table.dataflow),
        sr=sr, sc=sc, t=t,
        row_folds=-(-sr // rows), col_folds=-(-sc // cols),
        m=m, n=n, k=k,
        count=count,
        a_footprint=rep(table.a_footprint) * m * k // (m0 * k0),
        b_footprint=rep(table.b_footprint) * b_k * b_n // (k0 * n0),
        a_word=rep(table.a_word), b_word=rep(table.b_word), c_word=rep(table.c_word),
        a_on_chip=rep(table.a_on_chip), b_on_chip=rep(table.b_on_chip),
        c_on_chip=rep(table.c_on_chip),
        a_tiled=rep(table.a_tiled), b_tiled=rep(table.b_tiled),
        c_unwritten=rep(table.c_unwritten), stationary_served=rep(table.stationary_served),
        **uses,
    )  # fmt: skip


def _dram(c: Mapping[str, np.ndarray]) -> np.ndarray:
    total: np.ndarray = (
        c["dram_ifmap_read_bytes"]
        + c["dram_filter_read_bytes"]
        + c["dram_ofmap_read_bytes"]
        + c["dram_ofmap_write_bytes"]
    )
    return total


def _counts(c: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What each energy component is proportional to."""
    out = {"mac": c["macs"], "dram": _dram(c)}
    for b in SRAM:
        out[f"sram_{b}"] = c[f"sram_{b}_read_bytes"] + c[f"sram_{b}_write_bytes"]
    return out


def _gemm_energy(base: RunResult, ids: np.ndarray, c: Mapping[str, np.ndarray]) -> np.ndarray:
    """Dynamic energy ``[step, gemm]`` of the GEMMs ``ids`` of the baseline graph with the
    counts ``c``: each MAC, SRAM and DRAM count priced at the baseline op's energy per
    count of that component."""
    bc = base.trace.costs
    base_counts = _counts({name: getattr(bc, name)[ids] for name in _FIELDS})
    energy = np.zeros(c["macs"].shape)
    for comp, values in _counts(c).items():
        priced = base.energy.op_component_pj[comp][ids]
        per = np.divide(
            priced, base_counts[comp], out=np.zeros_like(priced), where=base_counts[comp] > 0
        )
        energy += values * per
    return energy


def step_costs(
    ctx: TechniqueContext, base: RunResult, step: SimulatedStep, counts: StepCounts
) -> dict[str, np.ndarray]:
    """Cycles, bound cycles, energy and DRAM bytes of every drawn step of one kind."""
    ops = base.graph.ops

    def present(ids: np.ndarray, kind: type[GemmOp] | type[VectorOp]) -> np.ndarray:
        """Which of the baseline's ops ``ids`` the composed step still runs (as ops of
        their kind, layer and phase)."""
        runs = {(op.layer, op.phase) for op in step.result.graph.ops if isinstance(op, kind)}
        return np.asarray([(ops[i].layer, ops[i].phase) in runs for i in ids.tolist()], bool)

    keep, keep_v = present(counts.op_ids, GemmOp), present(counts.vector_ids, VectorOp)
    ids, v, share = counts.op_ids[keep], counts.vector_ids[keep_v], counts.vector_share[:, keep_v]
    c = {name: values[:, keep] for name, values in counts.costs.items()}
    bc = base.trace.costs
    dram_bound = base.machine.dram[0].bound
    base_dram = bc.dram_read_bytes + bc.dram_ofmap_write_bytes
    roofline = np.maximum(bc.compute_cycles, dram_bound(base_dram))
    others = np.ones(len(base.graph.ops), bool)
    others[ids] = False
    others[v] = False
    vector_dram = (base_dram[v] * share).sum(axis=1)
    time = (
        roofline[others].sum()
        + np.maximum(c["compute_cycles"], dram_bound(_dram(c))).sum(axis=1)
        + (roofline[v] * share).sum(axis=1)
    )
    dram = base_dram[others].sum() + _dram(c).sum(axis=1) + vector_dram
    on_array = (bc.unit == UNIT_ARRAY) & others
    compute = bc.compute_cycles[on_array].sum() + c["compute_cycles"].sum(axis=1)
    on_vector = (bc.unit == UNIT_VECTOR) & others
    vector = bc.compute_cycles[on_vector].sum() + (bc.compute_cycles[v] * share).sum(axis=1)
    cost: StepCost = step.cost
    cycles = cost.cycles * time / time[0]
    ratios = (compute / compute[0], dram / dram[0], vector / vector[0] if vector[0] else None)
    bounds = _bounds(step.result, *ratios)
    # a placer's bound is per part of its step (a pipeline's mini-batch): scale alike
    simulated = bounds[cost.binding_bound][0]
    scale = cost.bound_cycles / simulated if simulated else 1.0
    bound = np.max(np.stack(list(bounds.values())), axis=0) * scale
    cycles = np.maximum(cycles, bound)
    gemm_energy = _gemm_energy(base, ids, c)
    vector_energy = (base.energy.op_pj[v] * share).sum(axis=1)
    energy = cost.energy_pj + (gemm_energy - gemm_energy[0]).sum(axis=1)
    energy += vector_energy - vector_energy[0]
    # leakage: the whole simulated graph's static power, for the change of cycles
    energy += (
        step.result.energy.static_pj / max(step.result.total_cycles, 1) * (cycles - cost.cycles)
    )
    dram_bytes = cost.dram_bytes + (_dram(c) - _dram(c)[0]).sum(axis=1)
    if len(v):
        dram_bytes = dram_bytes + (vector_dram - vector_dram[0])
    return {
        "cycles": cycles,
        "bound_cycles": bound,
        "energy_pj": energy,
        "dram_bytes": dram_bytes,
        **{f"bound_{name}": value * scale for name, value in bounds.items()},
    }


def _bounds(
    result: RunResult, array: np.ndarray, dram: np.ndarray, vector: np.ndarray | None
) -> dict[str, np.ndarray]:
    """Per drawn step, the cycle bounds of :meth:`RunResult.cycle_bounds` of the simulated
    ``result``: DRAM traffic scaled by the step's ``dram`` ratio; the busiest unit, the
    main array's compute scaled by the step's ``array`` ratio (the vector unit's by its
    ``vector`` ratio, when one is given) against every other unit's (busiest processor
    each); the interconnect's as simulated."""
    simulated = result.cycle_bounds()
    c, processors = result.trace.costs, result.hardware.processors
    busiest = {}
    for unit in range(len(c.unit_names)):
        if unit == UNIT_COMM:
            continue
        work = np.zeros(processors)
        mine = c.unit == unit
        np.add.at(work, result.trace.processor[mine], c.compute_cycles[mine])
        busiest[unit] = float(work.max())
    scaled = busiest.pop(UNIT_VECTOR, 0.0) * (1.0 if vector is None else vector)
    others = np.maximum(
        max((v for u, v in busiest.items() if u != UNIT_ARRAY), default=0.0), scaled
    )
    return {
        "dram": simulated["dram"] * dram,
        "interconnect": np.full_like(dram, simulated["interconnect"]),
        "compute": np.maximum(busiest[UNIT_ARRAY] * array, others),
    }


_FIELDS = (
    "macs",
    "dram_ifmap_read_bytes",
    "dram_filter_read_bytes",
    "dram_ofmap_read_bytes",
    "dram_ofmap_write_bytes",
    *(f"sram_{b}_{rw}_bytes" for b in SRAM for rw in ("read", "write")),
)


def _mean(values: np.ndarray) -> float:
    """The mean as step 0's value plus the mean change: exactly step 0's when no step
    differs from it (a plain mean of equal floats may round)."""
    return float(values[0] + (values - values[0]).mean())


def _spread(values: np.ndarray) -> dict[str, float]:
    return {
        "mean": _mean(values),
        "std": float(values.std()),
        "min": float(values.min()),
        "max": float(values.max()),
    }


def expected(costs: Mapping[str, np.ndarray]) -> StepCost:
    """The mean step of the drawn steps whose costs are ``costs`` (:func:`step_costs`),
    its bound binding where the mean of the per-step bounds is largest."""
    means = {name: _mean(costs[f"bound_{name}"]) for name in ("dram", "interconnect", "compute")}
    return StepCost(
        _mean(costs["cycles"]),
        _mean(costs["energy_pj"]),
        _mean(costs["dram_bytes"]),
        _mean(costs["bound_cycles"]),
        max(means, key=lambda name: means[name]),
    )


def spread(costs: Mapping[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """Mean, spread and range over the drawn steps of their cycles and energy."""
    return {"cycles": _spread(costs["cycles"]), "energy_pj": _spread(costs["energy_pj"])}


def skipped_report(base: RunResult, counts: StepCounts) -> dict[str, Any]:
    """MACs and folds the drawn steps skip against conventional dropout (the baseline
    step), in all and per layer: means over the steps."""
    bc = base.trace.costs
    skipped_macs = bc.macs[counts.op_ids][None, :] - counts.costs["macs"]
    skipped_folds = bc.folds[counts.op_ids][None, :] - counts.costs["folds"]
    gemm_energy = _gemm_energy(base, counts.op_ids, counts.costs)
    layers: dict[str, dict[str, Any]] = {}
    for layer in dict.fromkeys(counts.layers):
        mine = np.asarray([name == layer for name in counts.layers])
        baseline_macs = float(bc.macs[counts.op_ids[mine]].sum())
        skipped = float(skipped_macs[:, mine].sum(axis=1).mean())
        layers[layer] = {
            "baseline_macs": baseline_macs,
            "skipped_macs": skipped,
            "skipped_mac_fraction": skipped / max(baseline_macs, 1.0),
            "skipped_folds": float(skipped_folds[:, mine].sum(axis=1).mean()),
            "gemm_compute_cycles": _spread(counts.costs["compute_cycles"][:, mine].sum(axis=1)),
            "gemm_energy_pj": _spread(gemm_energy[:, mine].sum(axis=1)),
        }
    return {
        "skipped_macs": float(skipped_macs.sum(axis=1).mean()),
        "skipped_mac_fraction": float(skipped_macs.sum(axis=1).mean() / max(int(bc.macs.sum()), 1)),
        "skipped_folds": float(skipped_folds.sum(axis=1).mean()),
        "layers": layers,
    }
