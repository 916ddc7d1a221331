"""Approximate random dropout (Song et al., "DNN Training Acceleration via Exploring
GPGPU Friendly Sparsity", arXiv 2203.05705; DATE'19 "Approximate Random Dropout").

Conventional dropout draws a random mask per element, stores it and multiplies by
it, so every MAC still runs: that is the baseline step.  Approximate random
dropout draws a regular pattern per step instead, so whole GEMM rows or tiles
disappear:

* ``pattern: row`` drops neurons (period and offset over the neuron index); the
  kept neurons are compacted, so the producer's and consumers' GEMMs shrink to
  the kept count and the array runs ``ceil(k n / C)`` folds
  (:mod:`accelsim.techniques.dropout_sites`); a consumer's weight is gathered
  along its contiguous dimension in whole DRAM bursts (``dram.burst_bytes``);
* ``pattern: tile`` drops tiles of the consumers' weights (DropConnect on
  blocks); the surviving tiles are compacted per column block
  (:mod:`accelsim.timing.dropout_folds`), and what the GEMM fetches from DRAM
  follows its running folds (:func:`accelsim.timing.costs.op_costs`);
* ``pattern: element`` is conventional dropout: the baseline step, exactly;
* ``feature_maps.rate`` drops each convolution's least sensitive input maps
  (sensitivity-aware dropping for CNNs), shrinking ``C.R.S``.

Each step's pattern per site is drawn from the distribution the SGD search
(:mod:`accelsim.techniques.dropout_patterns`) finds for the site's rate, with the
run's ``seed``.  The event engine simulates step 0's patterns (the graph rewrite
and the fold masks); the other ``steps - 1`` are counted fold by fold (surviving
folds, MACs, SRAM and DRAM bytes of every affected GEMM) and priced relative to
the simulated step, see :mod:`accelsim.techniques.dropout_steps`.

Provenance: the technique and its reported speedups [S] (``../shared/techniques.md``
section 4); pattern families, the tile geometry, the regularisers of the search,
the cost of pattern generation and of sensitivity scoring, and the synthetic
sensitivity scores [D].
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from enum import Enum
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from accelsim.config.base import NonNegativeInt, PositiveInt, Spec
from accelsim.config.hardware import HardwareSpec
from accelsim.config.validate import suggest
from accelsim.errors import ConfigError, Problem
from accelsim.graph.ops import (
    GemmOp,
    OpGraph,
    Phase,
)
from accelsim.lowering.shapes import INPUT_NAME, LayerInfo
from accelsim.mapping.schedule import FoldSchedule
from accelsim.mapping.units import MAIN_ARRAY
from accelsim.report.result import RunResult
from accelsim.report.training import Source
from accelsim.techniques.base import (
    LoadContext,
    RewritePhase,
    Section,
    SimulatedStep,
    StepCost,
    Technique,
    TechniqueContext,
    TrainingPlan,
)
from accelsim.techniques.dropout_patterns import PatternFamily, load_distribution, search
from accelsim.techniques.dropout_rewrite import (
    PATTERN_OPS,
    SCORE_OPS,
    Plan,
    add_aux,
    shrunk_graph,
    skipped_update,
)
from accelsim.techniques.dropout_sites import (
    Shrink,
    Site,
    TileWeight,
    droppable_convs,
    feature_map_shrinks,
    find_sites,
    row_shrinks,
    tile_geometry,
    tile_weights,
)
from accelsim.techniques.dropout_steps import (
    StepCounts,
    StepPlan,
    count_steps,
    expected,
    skipped_report,
    spread,
    step_costs,
)
from accelsim.techniques.plan import cell, read_csv
from accelsim.techniques.provenance import Origin, inputs
from accelsim.timing.dropout_folds import compacted_use

Rate = Annotated[float, Field(ge=0, lt=1)]
MAX_STEPS = 12_800
"""The most steps a run draws (``steps`` doubled until the kept shares are near)."""

_SEARCH = "our choice: the SGD search's settings"
DEFAULTS: dict[str, Origin] = {
    "rate": (Source.RUN, "none: each dropout layer's own rate, from the workload"),
    "pattern": (Source.RECALLED, "row and tile patterns of Song et al., recalled"),
    "tile.rows": (Source.OURS, "none: the main array's rows, so tiles align with folds"),
    "tile.cols": (Source.OURS, "none: the main array's columns, so tiles align with folds"),
    "steps": (Source.OURS, "our choice: the fewest steps drawn for the mean and spread"),
    "kept_tolerance": (
        Source.OURS,
        "our choice: the mean kept share within 0.5 % of its expectation",
    ),
    "max_period": (Source.OURS, "our choice: the pattern family's longest period"),
    "distribution": (Source.OURS, "none: the distribution our SGD search finds"),
    "skip_updates": (Source.OURS, "our choice: dropped rows are still updated"),
    "search_iterations": (Source.OURS, _SEARCH),
    "feature_maps.rate": (Source.OURS, "our choice: off"),
    "feature_maps.scores": (Source.OURS, "none: log-normal sensitivity scores, our choice"),
    "search_seed": (Source.OURS, _SEARCH),
}
"""Where each setting's default comes from (``../shared/techniques.md`` section 4)."""


class Pattern(str, Enum):
    ELEMENT = "element"
    ROW = "row"
    TILE = "tile"


class TileSpec(Spec):
    """Tile of the weight matrix a tile pattern drops (rows along the weight's input
    dimension); unset: the main array's rows and columns, so tiles align with folds."""

    rows: PositiveInt | None = Field(
        default=None, description="Tile rows; null: the main array's rows."
    )
    cols: PositiveInt | None = Field(
        default=None, description="Tile columns; null: the main array's columns."
    )


class FeatureMapSpec(Spec):
    """Sensitivity-aware dropping of convolutions' input feature maps.

    ``rate``: the share of each eligible convolution's input maps dropped (0: off).
    ``scores``: CSV of ``layer,channel,score`` (relative to the run file); without
    it, scores are drawn from a log-normal with the run's seed [D].  The least
    sensitive maps are dropped.
    """

    rate: Rate = Field(
        default=0.0, description="Share of each eligible convolution's input maps dropped (0: off)."
    )
    scores: str | None = Field(
        default=None,
        description="CSV of layer,channel,score relative to the run file; null: log-normal"
        " scores drawn from the run's seed.",
    )


class ApproximateDropoutConfig(Spec):
    """``techniques.approximate_dropout`` in a run file."""

    rate: Rate | None = Field(
        default=None,
        description="Every dropout layer's rate; null: each layer's own rate from the workload.",
    )
    pattern: Annotated[Pattern, Field(strict=False)] = Field(
        default=Pattern.ROW,
        description="element (conventional dropout: the baseline step), row (drop whole"
        " neurons, shrinking the GEMMs) or tile (drop tiles of the readers' weights, masking"
        " folds).",
    )
    tile: TileSpec = Field(default_factory=TileSpec, description="The tile of tile patterns.")
    steps: PositiveInt = Field(
        default=100, description="The fewest steps drawn, each with its own patterns."
    )
    kept_tolerance: Annotated[float, Field(gt=0, le=1)] = Field(
        default=0.005,
        description="Draw steps (from steps, doubling, at most 12,800) until every site's"
        " mean kept share of its units (or tiles) is within this share of its expectation.",
    )
    max_period: Annotated[int, Field(ge=2, le=64)] = Field(
        default=16,
        description="Longest pattern period: rates 1/max_period to 1 - 1/max_period reachable.",
    )
    distribution: str | None = Field(
        default=None,
        description="A JSON file of pattern probabilities (scripts/dropout_search.py writes"
        " one), relative to the run file; null: the SGD search runs.",
    )
    skip_updates: bool = Field(
        default=False,
        description="Row patterns: also skip the optimizer update of dropped rows and columns.",
    )
    search_iterations: PositiveInt = Field(
        default=1000, description="Iterations of the SGD search for the pattern distribution."
    )
    feature_maps: FeatureMapSpec = Field(
        default_factory=FeatureMapSpec,
        description="Sensitivity-aware dropping of convolutions' input feature maps.",
    )
    search_seed: NonNegativeInt = Field(default=0, description="Seed of the SGD search.")


class ApproximateDropout(Technique):
    """Approximate random dropout as a plug-in: graph rewrite, fold masks, step statistics."""

    name = "approximate_dropout"
    Config = ApproximateDropoutConfig
    rewrite_phase = RewritePhase.PRUNE

    def __init__(self, config: Spec, source: str) -> None:
        super().__init__(config, source)
        self._plans: dict[tuple[str, int], Plan] = {}
        self._current: Plan | None = None  # the plan of the graph being simulated
        self._counted: tuple[RunResult, StepCounts] | None = None
        self._per_step: dict[int, tuple[RunResult, dict[str, np.ndarray]]] = {}

    @property
    def settings(self) -> ApproximateDropoutConfig:
        assert isinstance(self.config, ApproximateDropoutConfig)
        return self.config

    def defaults(self) -> dict[str, Origin]:
        return DEFAULTS

    @cached_property
    def family(self) -> PatternFamily:
        return PatternFamily.up_to(self.settings.max_period)

    def validate(self, load: LoadContext) -> list[Problem]:
        cfg = self.settings
        problems = []
        sites, _ = find_sites(load.infos, cfg.rate)
        if cfg.pattern is not Pattern.ELEMENT:
            lo = 1 / cfg.max_period
            for site in sites:
                if site.rate and not lo <= site.rate <= 1 - lo:
                    key = "rate" if cfg.rate is not None else "max_period"
                    value: Any = cfg.rate if cfg.rate is not None else cfg.max_period
                    problems.append(
                        Problem(
                            self.source,
                            self.where(key),
                            f"dropout rate {site.rate:g} of {site.dropout} is out of reach of"
                            f" patterns with periods up to {cfg.max_period}"
                            f" (rates {lo:g} to {1 - lo:g})",
                            value,
                        )
                    )
                    break
        if not sites and cfg.pattern is not Pattern.ELEMENT and not cfg.feature_maps.rate:
            problems.append(
                Problem(
                    self.source,
                    self.where("pattern"),
                    f"the workload has no dropout layer a {cfg.pattern.value} pattern can"
                    " compact (set feature_maps.rate for a CNN)",
                    cfg.pattern.value,
                )
            )
        if cfg.feature_maps.rate and not droppable_convs(load.infos, INPUT_NAME):
            problems.append(
                Problem(
                    self.source,
                    self.where("feature_maps.rate"),
                    "the workload has no convolution whose input maps may be dropped"
                    " (ungrouped, fed by another layer, with two or more input maps)",
                    cfg.feature_maps.rate,
                )
            )
        problems += self._grouped_tiles(load, sites)
        side = min(load.hardware.array.rows, load.hardware.array.cols)
        for key in ("rows", "cols"):
            size = getattr(cfg.tile, key)
            if size is not None and size > side:
                problems.append(
                    Problem(
                        self.source,
                        self.where(f"tile.{key}"),
                        f"a tile must fit in one fold: at most the array's smaller side, {side}",
                        size,
                    )
                )
        try:
            if cfg.distribution is not None:
                rate, _ = self._distribution(load.run_file)
                problems += [
                    Problem(
                        self.source,
                        self.where("distribution"),
                        f"is for rate {rate:g}, but {site.dropout} drops at {site.rate:g}",
                        cfg.distribution,
                    )
                    for site in sites[:1]
                    if cfg.pattern is not Pattern.ELEMENT and abs(site.rate - rate) > 1e-9
                ]
            if cfg.feature_maps.scores is not None:
                self._scores(load.run_file, load.infos, 0)
        except ConfigError as exc:
            problems += exc.problems
        return problems

    def _grouped_tiles(self, load: LoadContext, sites: Sequence[Site]) -> list[Problem]:
        """Tile patterns cannot compose with a technique that packs the weight
        gradients of their consumers (:meth:`Technique.packed_weight_gradients`): a
        tile pattern skips the folds of a weight's tiles in the weight's own index
        space, and packing moves the kept rows or columns of its gradient GEMM
        together, so that GEMM's folds no longer line up with tiles."""
        if self.settings.pattern is not Pattern.TILE:
            return []
        consumers = [c for site in sites for c in site.consumers]
        for other in load.techniques:
            packed = other.packed_weight_gradients(load)
            clash = [c for c in consumers if c in packed]
            if clash:
                return [
                    Problem(
                        self.source,
                        self.where("pattern"),
                        f"tile patterns skip folds of {clash[0]}'s weight by its tiles, and"
                        f" {other.name} packs the rows or columns of that weight's gradient,"
                        " so its folds no longer line up with tiles; use pattern: row"
                        f" (or leave {clash[0]} to {other.name})",
                        self.settings.pattern.value,
                    )
                ]
        return []

    def _distribution(self, run_file: Path) -> tuple[float, np.ndarray]:
        assert self.settings.distribution is not None
        return load_distribution(
            run_file.parent / self.settings.distribution,
            self.family,
            self.source,
            self.where("distribution"),
        )

    def _scores(
        self, run_file: Path, infos: Sequence[LayerInfo], seed: int
    ) -> dict[str, np.ndarray]:
        """Sensitivity of every input map of each droppable conv: from the file or synthetic.

        Every row of the file names a droppable convolution, one of its input maps
        once, and a finite score >= 0; each conv has a score for every map, not all 0.

        Raises:
            ConfigError: at ``feature_maps.scores`` for a file that cannot be read or
                leaves a map without a score; in the file, each bad row at its line.
        """
        path = self.settings.feature_maps.scores
        channels = {
            i.layer.name: i.in_shapes[0].dims[0] for i in droppable_convs(infos, INPUT_NAME)
        }
        if path is None:
            rng = np.random.default_rng(seed)
            return {name: rng.lognormal(0.0, 1.0, c) for name, c in channels.items()}
        where = self.where("feature_maps.scores")
        name, rows = read_csv(
            run_file.parent / path, ("layer", "channel", "score"), self.source, where
        )
        scores = {layer: np.full(c, np.nan) for layer, c in channels.items()}
        first: dict[tuple[str, int], int] = {}
        problems: list[Problem] = []
        for line, row in rows:
            layer = (row.get("layer") or "").strip()
            if layer not in scores:
                problems.append(
                    Problem(
                        name,
                        f"line {line}",
                        "layer: not a convolution whose input maps may be dropped; "
                        + (suggest(layer, list(scores)) if scores else "the workload has none"),
                        layer,
                    )
                )
                continue
            maps = scores[layer].shape[0]
            channel = cell(
                name,
                line,
                row,
                "channel",
                int,
                range(maps).__contains__,
                f"an input map of {layer}, 0 to {maps - 1}",
                problems,
            )
            score = cell(
                name,
                line,
                row,
                "score",
                float,
                lambda v: math.isfinite(v) and v >= 0,
                "a finite number >= 0",
                problems,
            )
            if channel is None or score is None:
                continue
            earlier = first.setdefault((layer, channel), line)
            if earlier != line:
                problems.append(
                    Problem(
                        name,
                        f"line {line}",
                        f"a second score for {layer} channel {channel}"
                        f" (the first is line {earlier})",
                        score,
                    )
                )
                continue
            scores[layer][channel] = score
        if problems:
            raise ConfigError(problems)
        for layer, s in scores.items():
            if np.isnan(s).any():
                raise ConfigError.single(
                    self.source,
                    where,
                    f"no score for input map {int(np.isnan(s).argmax())} of {layer}"
                    f" (it has {s.shape[0]}; every input map of every droppable"
                    " convolution needs one)",
                    path,
                )
            if not s.any():
                raise ConfigError.single(
                    name, "", f"every score of {layer} is 0: its maps cannot be ranked"
                )
        return scores

    def plan(self, ctx: TechniqueContext, gemms: Sequence[GemmOp]) -> Plan:
        """Sites, per-step patterns and kept counts of the run (drawn from its seed)."""
        key = (ctx.workload.name, ctx.run.seed)
        cached = self._plans.get(key)
        if cached is not None:
            self._current = cached
            return cached
        cfg = self.settings
        infos = {i.layer.name: i for i in ctx.infos}
        sites: list[Site] = []
        not_compacted: list[str] = []
        if cfg.pattern is not Pattern.ELEMENT:
            found, not_compacted = find_sites(ctx.infos, cfg.rate)
            sites = [s for s in found if s.rate > 0]
        convs = droppable_convs(ctx.infos, INPUT_NAME) if cfg.feature_maps.rate else []
        tiles = tile_weights(sites, infos) if cfg.pattern is Pattern.TILE else {}
        chances = [self._probabilities(ctx, site, i, tiles) for i, site in enumerate(sites)]
        errors = [error for _, error, _ in chances]
        expected = [float(q @ share) for q, _, share in chances]
        steps = cfg.steps
        while True:  # enough steps that each site's mean kept share is near its expectation
            rng = np.random.default_rng(ctx.run.seed)
            drawn = [rng.choice(len(self.family), size=steps, p=q) for q, _, _ in chances]
            means = [
                float(share[d].mean()) for d, (_, _, share) in zip(drawn, chances, strict=True)
            ]
            near = all(
                abs(m - e) <= cfg.kept_tolerance * e for m, e in zip(means, expected, strict=True)
            )
            if near or steps >= MAX_STEPS:
                break
            steps = min(2 * steps, MAX_STEPS)
        periods = np.empty((steps, len(sites)), np.int64)
        offsets = np.empty((steps, len(sites)), np.int64)
        keeps = np.empty((steps, len(sites)), bool)
        kept = np.empty((steps, len(sites) + len(convs)), np.int64)
        per_burst = max(1, ctx.hardware.dram.burst_bytes // ctx.hardware.word_bytes.weights)
        fetched = np.empty_like(kept)
        for i, site in enumerate(sites):
            periods[:, i] = self.family.period[drawn[i]]
            offsets[:, i] = self.family.offset[drawn[i]]
            keeps[:, i] = self.family.keep[drawn[i]]
            if cfg.pattern is Pattern.ROW:
                kept[:, i] = self.family.kept_rows(drawn[i], site.units)
                fetched[:, i] = self.family.burst_rows(site.units, per_burst)[drawn[i]]
            else:
                kept[:, i] = fetched[:, i] = site.units
        scores = self._scores(ctx.run_file, ctx.infos, ctx.run.seed)
        conv_kept = []
        sensitivity = {}
        for j, info in enumerate(convs):
            s = scores[info.layer.name]
            dropped = int(cfg.feature_maps.rate * s.shape[0])
            kept[:, len(sites) + j] = fetched[:, len(sites) + j] = s.shape[0] - dropped
            conv_kept.append(s.shape[0] - dropped)
            order = np.sort(s)
            sensitivity[info.layer.name] = float(order[dropped:].sum() / order.sum())
        shrinks: dict[tuple[str, Phase], list[Shrink]] = {}
        if cfg.pattern is Pattern.ROW:
            shrinks.update(row_shrinks(sites, infos, gemms))
        for key2, more in feature_map_shrinks(convs, len(sites)).items():
            shrinks.setdefault(key2, []).extend(more)
        plan = Plan(
            tuple(sites),
            tuple(not_compacted),
            tuple(convs),
            tuple(conv_kept),
            shrinks,
            tiles,
            kept,
            fetched,
            {"period": periods, "offset": offsets, "keep": keeps},
            tuple(errors),
            tuple(zip(expected, means, strict=True)),
            sensitivity,
            self.tile_size(ctx.hardware),
            cfg.pattern is Pattern.ROW,
        )
        self._plans[key] = plan
        self._current = plan
        return plan

    def _probabilities(
        self, ctx: TechniqueContext, site: Site, index: int, tiles: Mapping[str, TileWeight]
    ) -> tuple[np.ndarray, float, np.ndarray]:
        """The site's pattern distribution (from the file or the search), its worst
        per-unit deviation from the site's rate, and the share of units (or tiles)
        each pattern keeps."""
        cfg = self.settings
        if cfg.pattern is Pattern.TILE:
            tr, tc = self.tile_size(ctx.hardware)
            w = tiles[site.consumers[0]]
            drops = self.family.tile_drops(-(-w.part // tr), -(-w.w_out // tc))
        else:
            drops = self.family.row_drops(site.units)
        if cfg.distribution is not None:
            _, q = self._distribution(ctx.run_file)
        else:
            q = search(
                drops, site.rate, iterations=cfg.search_iterations, seed=cfg.search_seed + index
            ).probabilities
        q = q / q.sum()
        kept_share: np.ndarray = 1 - drops.mean(axis=1)
        return q, float(np.abs(q @ drops - site.rate).max()), kept_share

    def tile_size(self, hw: HardwareSpec) -> tuple[int, int]:
        t = self.settings.tile
        return (t.rows or hw.array.rows, t.cols or hw.array.cols)

    def rewrite_graph(self, graph: OpGraph, kind: str, ctx: TechniqueContext) -> OpGraph:
        gemms = [op for op in graph.ops if isinstance(op, GemmOp)]
        plan = self.plan(ctx, gemms)
        if not plan.sites and not plan.convs:
            return graph
        kept = plan.kept[0]
        shrunk = shrunk_graph(graph, plan, kept, plan.fetched[0], ctx.hardware.word_bytes)
        if self.settings.skip_updates and self.settings.pattern is Pattern.ROW:
            parameters = (skipped_update(p, plan, kept, plan.fetched[0]) for p in graph.parameters)
            shrunk = dataclasses.replace(shrunk, parameters=tuple(parameters))
        return add_aux(
            shrunk, plan, ctx.hardware.word_bytes, self.tile_size(ctx.hardware), self.name
        )

    def mask_tiles(
        self, graph: OpGraph, schedule: FoldSchedule, rng: np.random.Generator
    ) -> Mapping[int, np.ndarray]:
        plan = self._current
        if self.settings.pattern is not Pattern.TILE or plan is None:
            return {}
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

    def _step_plan(self, ctx: TechniqueContext, base: RunResult) -> StepPlan:
        gemms = [op for op in base.graph.ops if isinstance(op, GemmOp)]
        plan = self.plan(ctx, gemms)
        return StepPlan(
            plan.shrinks,
            plan.tiles,
            plan.kept,
            plan.fetched,
            plan.patterns,
            self.tile_size(ctx.hardware),
        )

    def _counts(self, ctx: TechniqueContext, base: RunResult) -> StepCounts:
        """Every drawn step's GEMMs, counted once per baseline."""
        if self._counted is None or self._counted[0] is not base:
            self._counted = (base, count_steps(ctx, base, self._step_plan(ctx, base)))
        return self._counted[1]

    def _drawn(
        self, ctx: TechniqueContext, base: RunResult, step: SimulatedStep
    ) -> dict[str, np.ndarray]:
        """The cost of each drawn step around the simulated ``step`` (once per step)."""
        found = self._per_step.get(id(step.result))
        if found is None or found[0] is not step.result:
            found = (step.result, step_costs(ctx, base, step, self._counts(ctx, base)))
            self._per_step[id(step.result)] = found
        return found[1]

    def expected_cost(
        self, ctx: TechniqueContext, base: RunResult, kind: str, step: SimulatedStep
    ) -> StepCost:
        """The mean over the ``steps`` drawn steps (the engine simulates step 0's)."""
        return expected(self._drawn(ctx, base, step))

    def training(
        self,
        ctx: TechniqueContext,
        base: RunResult,
        steps: Mapping[str, SimulatedStep],
        plan: TrainingPlan,
    ) -> Section:
        gemms = [op for op in base.graph.ops if isinstance(op, GemmOp)]
        drawn = self.plan(ctx, gemms)
        cfg = self.settings
        skipped = skipped_report(base, self._counts(ctx, base))
        details = {
            "pattern": cfg.pattern.value,
            "steps_drawn": int(drawn.kept.shape[0]),
            "batch_size": ctx.run.batch_size,
            "by_kind": {
                kind: {
                    "simulated_cycles": step.result.total_cycles,
                    "per_step": spread(self._drawn(ctx, base, step)),
                }
                for kind, step in steps.items()
            },
            **skipped,
            "sites": [
                {
                    "dropout": s.dropout,
                    "rate": s.rate,
                    "units": s.units,
                    "producer": s.producer,
                    "consumers": list(s.consumers),
                    "kept_mean": float(drawn.kept[:, i].mean()),
                    "kept_share_expected": drawn.kept_share[i][0],
                    "kept_share_drawn": drawn.kept_share[i][1],
                    "search_max_error": drawn.search_error[i],
                }
                for i, s in enumerate(drawn.sites)
            ],
            "not_compacted": list(drawn.not_compacted),
            "feature_maps": {
                info.layer.name: {
                    "channels": info.in_shapes[0].dims[0],
                    "kept": drawn.conv_kept[j],
                    "sensitivity_kept": drawn.sensitivity_kept[info.layer.name],
                }
                for j, info in enumerate(drawn.convs)
            },
        }
        warnings = tuple(
            f"{site.dropout}: the mean kept share of {drawn.kept.shape[0]:,} drawn steps,"
            f" {got:.4f}, is {abs(got - want) / want * 100:.2f} % from its expectation {want:.4f}"
            " (more than kept_tolerance); the report is of the drawn steps"
            for site, (want, got) in zip(drawn.sites, drawn.kept_share, strict=True)
            if abs(got - want) > cfg.kept_tolerance * want
        )
        lines = (
            (
                "steps drawn",
                f"{drawn.kept.shape[0]:,} ({cfg.pattern.value} patterns; kept shares within"
                f" {cfg.kept_tolerance * 100:g} % of their expectation)",
            ),
            (
                "MACs skipped",
                f"{skipped['skipped_macs']:,.0f} per step"
                f" ({skipped['skipped_mac_fraction'] * 100:.1f} % of the baseline's),"
                f" {skipped['skipped_folds']:,.1f} folds",
            ),
        )
        return Section(
            self.name,
            details,
            lines,
            warnings=warnings,
            inputs=inputs(
                cfg,
                self.defaults(),
                traces=("feature_maps.scores",),
                constants={
                    "pattern_ops_per_unit": (PATTERN_OPS, (Source.OURS, "our choice")),
                    "score_ops_per_element": (SCORE_OPS, (Source.OURS, "our choice")),
                },
            ),
        )
