"""Approximate random dropout's graph rewrite: the plan drawn for a run, GEMMs shrunk
to the kept rows (row patterns and feature maps), conventional dropout ops scaled
to the kept units, the optimizer update of dropped rows skipped (``skip_updates``),
and the vector-unit work of generating patterns and scoring feature maps; what the
folds of GEMMs whose weights tile patterns drop use in the simulated step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from accelsim.config.enums import VectorClass
from accelsim.config.hardware import WordBytesSpec
from accelsim.graph import links, passes, queries
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import (
    Access,
    GemmOp,
    Op,
    OpGraph,
    Parameter,
    ParamKind,
    Phase,
    Stage,
    TensorKey,
    TensorKind,
    VectorOp,
)
from accelsim.lowering.shapes import LayerInfo
from accelsim.mapping.schedule import FoldSchedule
from accelsim.mapping.units import MAIN_ARRAY
from accelsim.techniques.dropout.folds import compacted_use
from accelsim.techniques.dropout.samples import (
    SAMPLE_DIMS,
    SampleSite,
    parameter_names,
    scaled_samples,
)
from accelsim.techniques.dropout.sites import Shrink, Site, TileWeight, shrunk_dims, tile_geometry

PATTERN_OPS = 2  # per unit and step: a modulo compare and an index compaction [D]
SCORE_OPS = 2  # per input element: |x| and an add into its map's sum [D]


@dataclasses.dataclass(frozen=True)
class Plan:
    """Everything drawn for a run: sites, per-step patterns and kept counts."""

    sites: tuple[Site, ...]
    not_compacted: tuple[str, ...]
    convs: tuple[LayerInfo, ...]
    conv_kept: tuple[int, ...]
    samples: tuple[SampleSite, ...]
    refused_samples: Mapping[str, str]  # stochastic-depth layers not acted on: why
    batch: int  # the run's samples a step's sample patterns are over
    shrinks: Mapping[tuple[str, Phase], list[Shrink]]
    tiles: Mapping[str, TileWeight]
    kept: np.ndarray  # [step, site]: kept units (row sites, convs, then sample sites)
    fetched: np.ndarray  # [step, site]: units the DRAM bursts of a gather of them move
    patterns: dict[str, np.ndarray]  # period/offset/keep [step, site] (row or tile sites)
    search_error: tuple[float, ...]  # per row site, then sample site
    kept_share: tuple[tuple[float, float], ...]  # the same: expected and drawn mean
    sensitivity_kept: Mapping[str, float]
    tile: tuple[int, int]
    compact: bool  # row patterns: dropped neurons' elements disappear too

    @property
    def first_sample(self) -> int:
        """The column of ``kept`` of the first sample site."""
        return len(self.sites) + len(self.convs)


def shrunk_graph(
    graph: OpGraph, plan: Plan, kept: np.ndarray, fetched: np.ndarray, words: WordBytesSpec
) -> OpGraph:
    """``graph`` with one step's patterns (:func:`shrunk_op`), and without the dropout
    layers' masks: a pattern is drawn again from its period and offset, so no op
    writes a mask and the backward op no longer reads it
    (:func:`~accelsim.graph.links.unread`).  A dropout layer's forward op recomputed in
    the backward stage for its mask (forward work in the backward stage) is then read
    by nothing, and goes too."""
    masks = _masks(graph, plan)
    params = parameter_names(graph)
    ops = tuple(shrunk_op(op, plan, (kept, fetched), masks, params) for op in graph.ops)
    reads = {
        op.op_id: a.tensor.key
        for op in ops
        if isinstance(op, VectorOp)
        for a in op.reads
        if a.tensor.name in masks
    }
    shrunk = links.unread(dataclasses.replace(graph, ops=ops), reads)
    read = {a.tensor.key for op in shrunk.ops for a in queries.reads_of(op)}

    def idle(op: Op) -> bool:
        again = op.phase is Phase.FWD and op.stage is Stage.BACKWARD
        return again and all(a.tensor.key not in read for a in queries.writes_of(op))

    if not any(map(idle, shrunk.ops)):
        return shrunk
    return passes.rewrite(shrunk, words, drop=idle)[0]


def _masks(graph: OpGraph, plan: Plan) -> frozenset[str]:
    """The names of the dropout layers' masks: what a dropout layer's backward op reads
    of what its forward ops (or a recomputation of them) write, in every version."""
    sites = {site.dropout for site in plan.sites} | {site.layer for site in plan.samples}
    made: dict[str, set[TensorKey]] = {}
    found: set[str] = set()
    for op in graph.ops:
        if op.layer not in sites or not isinstance(op, VectorOp):
            continue
        if op.phase is Phase.FWD:
            made.setdefault(op.layer, set()).update(a.tensor.key for a in op.writes)
        elif op.phase is Phase.BWD_INPUT:
            mine = made.get(op.layer, set())
            found.update(a.tensor.name for a in op.reads if a.tensor.key in mine)
    return frozenset(found)


def shrunk_op(
    op: Op,
    plan: Plan,
    units: tuple[np.ndarray, np.ndarray],
    masks: frozenset[str],
    params: frozenset[str],
) -> Op:
    """``op`` with the dimensions and element counts of one step's patterns (``units``:
    kept units per site, and those a gather along a weight's contiguous dimension
    moves, whole DRAM bursts); a dropout layer's op writes none of ``masks``; a
    branch's vector op touches ``params`` (parameters, their gradients) whole."""
    kept, fetched = units
    if isinstance(op, GemmOp):
        shrinks = plan.shrinks.get((op.layer, op.phase))
        if not shrinks:
            return op
        d = shrunk_dims(op, shrinks, kept)
        f = shrunk_dims(op, shrinks, kept, fetched)
        a = op.a_elements * d["m"] * d["k"] // (op.m * op.k)
        b = op.b_elements * f["k"] * f["n"] // (op.k * op.n)
        return dataclasses.replace(
            op, m=d["m"], n=d["n"], k=d["k"], count=d["count"], a_elements=a, b_elements=b
        )
    if not isinstance(op, VectorOp):
        return op
    for i, site in enumerate(plan.sites):
        if op.layer == site.dropout:
            op = _dropout_op(op, site, plan, int(kept[i]), masks)
        elif plan.compact and (op.layer in site.chain or op.layer == site.producer):
            op = _scaled(op, int(kept[i]), site.units)
    if op.phase not in SAMPLE_DIMS:
        return op
    for j, sample in enumerate(plan.samples):
        if op.layer == sample.layer:
            op = dataclasses.replace(op, writes=_unmasked(op.writes, masks))
        if op.layer == sample.layer or op.layer in sample.branch:
            op = scaled_samples(op, int(kept[plan.first_sample + j]), plan.batch, params)
    return op


def _scaled(op: VectorOp, kept: int, units: int) -> VectorOp:
    def acc(a: Access) -> Access:
        return Access(a.tensor, a.elements * kept // units)

    return dataclasses.replace(
        op,
        elements=op.elements * kept // units,
        reads=tuple(map(acc, op.reads)),
        writes=tuple(map(acc, op.writes)),
    )


def _dropout_op(op: VectorOp, site: Site, plan: Plan, kept: int, masks: frozenset[str]) -> VectorOp:
    """A dropout layer's op without its element mask: a scale by ``1 / (1 - p)`` of the
    kept elements (forward) or of their gradients (backward); it writes no mask (its
    read of one goes in :func:`shrunk_graph`)."""
    op = dataclasses.replace(op, ops_per_element=1, writes=_unmasked(op.writes, masks))
    return _scaled(op, kept, site.units) if plan.compact else op


def _unmasked(writes: tuple[Access, ...], masks: frozenset[str]) -> tuple[Access, ...]:
    """``writes`` without those of a dropout layer's mask."""
    return tuple(a for a in writes if a.tensor.name not in masks)


def skipped_update(p: Parameter, plan: Plan, kept: np.ndarray, fetched: np.ndarray) -> Parameter:
    """A parameter whose update only touches the rows and columns its step keeps: a
    producer's kept rows, a reader's kept input columns as whole DRAM bursts
    (``fetched``: the inputs are the weight's contiguous dimension)."""
    fraction = 1.0
    for i, site in enumerate(plan.sites):
        share = int(kept[i]) / site.units
        if p.layer == site.producer:
            fraction *= share
        elif p.layer in site.consumers and p.kind is ParamKind.WEIGHT:
            # each input feature owns one weight per output row
            fraction *= 1 - (site.units - int(fetched[i])) * p.rows / p.weight.elements
    if fraction == 1.0:
        return p
    elements = max(1, round(p.weight.elements * fraction))
    return dataclasses.replace(
        p,
        weight=dataclasses.replace(p.weight, elements=elements),
        gradient=dataclasses.replace(p.gradient, elements=elements),
    )


def add_aux(
    graph: OpGraph, plan: Plan, words: WordBytesSpec, tile: tuple[int, int], owner: str
) -> OpGraph:
    """Pattern generation after each dropout and stochastic-depth layer's forward op (a
    unit per neuron, tile or sample), and sensitivity scoring
    after each dropped conv's forward op (it picks the maps of the next step): ops of
    the technique ``owner``."""
    units = {}
    for site in plan.sites:
        if plan.tiles:
            w = plan.tiles[site.consumers[0]]
            units[site.dropout] = -(-w.part // tile[0]) * -(-w.w_out // tile[1])
        else:
            units[site.dropout] = site.units
    units.update(dict.fromkeys((site.layer for site in plan.samples), plan.batch))
    convs = {info.layer.name: info for info in plan.convs}
    first_fwd: set[int] = set()
    seen: set[str] = set()
    for op in graph.ops:
        if queries.forward_work(op) and op.layer not in seen:
            seen.add(op.layer)
            first_fwd.add(op.op_id)

    def emit(builder: GraphBuilder, op: Op) -> None:
        if op.op_id not in first_fwd:
            return
        if op.layer in units:
            index = builder.tensor(f"{op.layer}.pattern", TensorKind.ACTIVATION, units[op.layer])
            builder.vector(
                f"{op.layer}.pattern",
                op.layer,
                Phase.AUX,
                units[op.layer],
                PATTERN_OPS,
                [],
                [index],
                op_class=VectorClass.ELEMENTWISE,
            )
        info = convs.get(op.layer)
        if info is not None and isinstance(op, GemmOp):
            builder.vector(
                f"{op.layer}.score", op.layer, Phase.AUX, op.a.elements, SCORE_OPS, [op.a], [],
                op_class=VectorClass.REDUCE,  # a sum per map
            )  # fmt: skip

    rewritten, _ = passes.rewrite(graph, words, emit_after=emit, owner=owner)
    return rewritten


def tile_uses(graph: OpGraph, schedule: FoldSchedule, plan: Plan) -> dict[int, np.ndarray]:
    """What the running folds of the main array's GEMMs whose weights ``plan``'s first
    step tiles use under its tile patterns (compacted per column block:
    :func:`~accelsim.techniques.dropout.folds.compacted_use`), by op id."""
    uses = {}
    for unit in schedule.units:
        if unit.unit.name != MAIN_ARRAY:
            continue
        rows, cols = unit.unit.array.rows, unit.unit.array.cols
        for j, op_id in enumerate(unit.op_index.tolist()):
            op = graph.ops[op_id]
            assert isinstance(op, GemmOp)
            w = plan.tiles.get(op.layer)
            geometry = tile_geometry(op, w, unit.unit.array.dataflow)
            if w is None or geometry is None:
                continue
            sr_is, sc_is = geometry
            pattern = (
                int(plan.patterns["period"][0, w.site]),
                int(plan.patterns["offset"][0, w.site]),
                bool(plan.patterns["keep"][0, w.site]),
            )
            uses[op_id] = compacted_use(
                int(unit.sr[j]),
                int(unit.sc[j]),
                int(unit.t[j]),
                rows,
                cols,
                sr_is,
                sc_is,
                w.w_in,
                w.w_out,
                w.part,
                plan.tile,
                pattern,
            )
    return uses
