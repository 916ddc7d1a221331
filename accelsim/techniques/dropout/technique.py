"""Approximate random dropout (Song et al., "DNN Training Acceleration via Exploring
GPGPU Friendly Sparsity", arXiv 2203.05705; DATE'19 "Approximate Random Dropout").

Conventional dropout draws a random mask per element, stores it and multiplies by
it, so every MAC still runs: that is the baseline step.  Approximate random
dropout draws a regular pattern per step instead, so whole GEMM rows or tiles
disappear:

* ``pattern: row`` drops neurons (period and offset over the neuron index); the
  kept neurons are compacted, so the producer's and consumers' GEMMs shrink to
  the kept count and the array runs ``ceil(k n / C)`` folds
  (:mod:`accelsim.techniques.dropout.sites`); a consumer's weight is gathered
  along its contiguous dimension in whole DRAM bursts (``dram.burst_bytes``);
* ``pattern: tile`` drops tiles of the consumers' weights (DropConnect on
  blocks); the surviving tiles are compacted per column block
  (:mod:`accelsim.techniques.dropout.folds`), and what the GEMM fetches from DRAM
  follows its running folds (:func:`accelsim.timing.costs.op_costs`);
* ``pattern: element`` is conventional dropout: the baseline step, exactly;
* ``feature_maps.rate`` drops each convolution's least sensitive input maps
  (sensitivity-aware dropping for CNNs), shrinking ``C.R.S``;
* with row patterns, a ``stochastic_depth`` layer's samples are dropped by a regular
  pattern over the batch, so its residual branch runs for the kept samples alone
  (:mod:`accelsim.techniques.dropout.samples`).

Each step's pattern per site is drawn from the distribution the SGD search
(:mod:`accelsim.techniques.dropout.patterns`) finds for the site's rate, with the
run's ``seed``.  The event engine simulates step 0's patterns (the graph rewrite
and the fold masks); the other ``steps - 1`` are counted fold by fold (surviving
folds, MACs, SRAM and DRAM bytes of every affected GEMM) and priced relative to
the simulated step, see :mod:`accelsim.techniques.dropout.steps`.

Provenance: the technique and its reported speedups [S] (``../shared/techniques.md``
section 4); stochastic depth, Huang et al., ECCV 2016 [S]; pattern families, the tile
geometry, the regularisers of the search, the cost of pattern generation and of
sensitivity scoring, the synthetic sensitivity scores, and acting on stochastic depth
with a regular pattern over the batch's samples [D].
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path

import numpy as np

from accelsim.config.hardware import HardwareSpec
from accelsim.errors import ConfigError, Problem
from accelsim.graph.ops import GemmOp, OpGraph, Phase
from accelsim.lowering.shapes import LayerInfo
from accelsim.mapping.schedule import FoldSchedule
from accelsim.report.result import RunResult
from accelsim.report.training import Source
from accelsim.techniques.base import (
    LoadContext,
    SampledRewriter,
    Section,
    SimulatedStep,
    StepCost,
    TechniqueContext,
    TrainingPlan,
)
from accelsim.techniques.dropout.checks import (
    grouped_tile_problems,
    rate_problems,
    reach_problems,
)
from accelsim.techniques.dropout.config import (
    DEFAULTS,
    MAX_STEPS,
    NAME,
    ApproximateDropoutConfig,
    Pattern,
)
from accelsim.techniques.dropout.depth import (
    sample_columns,
    sample_family,
    sample_lines,
    sample_probabilities,
    sample_report,
    sample_sites,
)
from accelsim.techniques.dropout.patterns import (
    PatternFamily,
    draw,
    load_distribution,
    search,
    site_chances,
)
from accelsim.techniques.dropout.rewrite import (
    PATTERN_OPS,
    SCORE_OPS,
    Plan,
    add_aux,
    shrunk_graph,
    skipped_update,
    tile_uses,
)
from accelsim.techniques.dropout.samples import sample_shrinks
from accelsim.techniques.dropout.scores import sensitivity_scores
from accelsim.techniques.dropout.sites import (
    Shrink,
    Site,
    TileWeight,
    droppable_convs,
    feature_map_shrinks,
    find_sites,
    row_shrinks,
    tile_weights,
)
from accelsim.techniques.dropout.steps import (
    StepCounts,
    StepPlan,
    count_steps,
    expected,
    skipped_report,
    spread,
    step_costs,
)
from accelsim.techniques.provenance import Origin, inputs


class ApproximateDropout(SampledRewriter[ApproximateDropoutConfig]):
    """Approximate random dropout as a plug-in: graph rewrite, fold masks, step statistics."""

    trains = "it skips the tiles dropout drops in training (a forward pass runs with dropout off)"
    name = NAME

    def __init__(self, config: ApproximateDropoutConfig, source: str) -> None:
        super().__init__(config, source)
        self._plans: dict[tuple[str, int, int], Plan] = {}
        self._current: Plan | None = None  # the plan of the graph being simulated
        self._counted: tuple[RunResult, StepCounts] | None = None
        self._per_step: dict[int, tuple[RunResult, dict[str, np.ndarray]]] = {}

    def defaults(self) -> dict[str, Origin]:
        return DEFAULTS

    @cached_property
    def family(self) -> PatternFamily:
        return PatternFamily.up_to(self.config.max_period)

    def zero_problem(self) -> str | None:
        """Approximate dropout rewrites a replica's GEMMs and leaves its updates and
        collectives to placement: it composes with every stage."""
        return None

    def validate(self, load: LoadContext) -> list[Problem]:
        cfg = self.config
        problems = []
        sites, _ = find_sites(load.infos, cfg.rate)
        problems += rate_problems(cfg, sites, self.source, self.where)
        samples, _ = sample_sites(cfg, load.infos)
        problems += reach_problems(
            samples,
            cfg.max_period,
            load.run.batch_size,
            self.source,
            self.where("stochastic_depth"),
        )
        if (
            not sites
            and not samples
            and cfg.pattern is not Pattern.ELEMENT
            and not cfg.feature_maps.rate
        ):
            problems.append(
                Problem(
                    self.source,
                    self.where("pattern"),
                    f"the workload has no dropout layer a {cfg.pattern.value} pattern can"
                    " compact (set feature_maps.rate for a CNN)",
                    cfg.pattern.value,
                )
            )
        if cfg.feature_maps.rate and not droppable_convs(load.infos):
            problems.append(
                Problem(
                    self.source,
                    self.where("feature_maps.rate"),
                    "the workload has no convolution whose input maps may be dropped"
                    " (ungrouped, fed by another layer, with two or more input maps)",
                    cfg.feature_maps.rate,
                )
            )
        problems += grouped_tile_problems(load, sites, self.config, self.source, self.where)
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

    def _distribution(self, run_file: Path) -> tuple[float, np.ndarray]:
        assert self.config.distribution is not None
        return load_distribution(
            run_file.parent / self.config.distribution,
            self.family,
            self.source,
            self.where("distribution"),
        )

    def _scores(
        self, run_file: Path, infos: Sequence[LayerInfo], seed: int
    ) -> dict[str, np.ndarray]:
        """Sensitivity of every input map of each droppable conv (:func:`sensitivity_scores`)."""
        return sensitivity_scores(
            self.config.feature_maps.scores,
            run_file,
            infos,
            seed,
            self.source,
            self.where("feature_maps.scores"),
        )

    def plan(self, ctx: TechniqueContext, gemms: Sequence[GemmOp]) -> Plan:
        """Sites, per-step patterns and kept counts of the run (drawn from its seed)."""
        key = (ctx.workload.name, ctx.run.seed, ctx.run.batch_size)
        cached = self._plans.get(key)
        if cached is not None:
            self._current = cached
            return cached
        cfg = self.config
        infos = {i.layer.name: i for i in ctx.infos}
        sites: list[Site] = []
        not_compacted: list[str] = []
        if cfg.pattern is not Pattern.ELEMENT:
            found, not_compacted = find_sites(ctx.infos, cfg.rate)
            sites = [s for s in found if s.rate > 0]
        samples, refused = sample_sites(cfg, ctx.infos)
        not_compacted += list(refused)
        batch = ctx.run.batch_size
        convs = droppable_convs(ctx.infos) if cfg.feature_maps.rate else []
        tiles = tile_weights(sites, infos) if cfg.pattern is Pattern.TILE else {}
        chances = [self._probabilities(ctx, site, i, tiles) for i, site in enumerate(sites)]
        chances += [
            sample_probabilities(cfg, s, len(sites) + j, batch) for j, s in enumerate(samples)
        ]
        drawn, means = draw(ctx.run.seed, chances, cfg.steps, cfg.kept_tolerance, MAX_STEPS)
        steps = drawn[0].shape[0] if drawn else cfg.steps
        periods = np.empty((steps, len(sites)), np.int64)
        offsets = np.empty((steps, len(sites)), np.int64)
        keeps = np.empty((steps, len(sites)), bool)
        kept = np.empty((steps, len(sites) + len(convs) + len(samples)), np.int64)
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
        first = len(sites) + len(convs)
        for j in range(len(samples)):
            family = sample_family(cfg.max_period, batch)
            kept[:, first + j] = family.kept_rows(drawn[len(sites) + j], batch)
            fetched[:, first + j] = kept[:, first + j]
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
        for part in (
            feature_map_shrinks(convs, len(sites)),
            sample_shrinks(samples, infos, first, batch),
        ):
            for key2, extra in part.items():
                shrinks.setdefault(key2, []).extend(extra)
        plan = Plan(
            tuple(sites),
            tuple(not_compacted),
            tuple(convs),
            tuple(conv_kept),
            tuple(samples),
            refused,
            batch,
            shrinks,
            tiles,
            kept,
            fetched,
            {"period": periods, "offset": offsets, "keep": keeps},
            tuple(error for _, error, _ in chances),
            tuple(zip((float(q @ share) for q, _, share in chances), means, strict=True)),
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
        cfg = self.config
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
        return site_chances(drops, q, site.rate)

    def tile_size(self, hw: HardwareSpec) -> tuple[int, int]:
        t = self.config.tile
        return (t.rows or hw.array.rows, t.cols or hw.array.cols)

    def rewrite_graph(self, graph: OpGraph, kind: str, ctx: TechniqueContext) -> OpGraph:
        gemms = [op for op in graph.ops if isinstance(op, GemmOp)]
        plan = self.plan(ctx, gemms)
        if not plan.sites and not plan.convs and not plan.samples:
            return graph
        kept = plan.kept[0]
        shrunk = shrunk_graph(graph, plan, kept, plan.fetched[0], ctx.hardware.word_bytes)
        if self.config.skip_updates and self.config.pattern is Pattern.ROW:
            parameters = (skipped_update(p, plan, kept, plan.fetched[0]) for p in graph.parameters)
            shrunk = dataclasses.replace(shrunk, parameters=tuple(parameters))
        return add_aux(
            shrunk, plan, ctx.hardware.word_bytes, self.tile_size(ctx.hardware), self.name
        )

    def fold_uses(self, graph: OpGraph, schedule: FoldSchedule) -> Mapping[int, np.ndarray]:
        plan = self._current
        if self.config.pattern is not Pattern.TILE or plan is None:
            return {}
        return tile_uses(graph, schedule, plan)

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
            sample_columns(plan),
            plan.batch,
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
        cfg = self.config
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
            "stochastic_depth": sample_report(drawn),
            "feature_maps": {
                info.layer.name: {
                    "channels": info.in_shapes[0].dims[0],
                    "kept": drawn.conv_kept[j],
                    "sensitivity_kept": drawn.sensitivity_kept[info.layer.name],
                }
                for j, info in enumerate(drawn.convs)
            },
        }
        names = [s.dropout for s in drawn.sites] + [s.layer for s in drawn.samples]
        warnings = tuple(
            f"{name}: the mean kept share of {drawn.kept.shape[0]:,} drawn steps,"
            f" {got:.4f}, is {abs(got - want) / want * 100:.2f} % from its expectation {want:.4f}"
            " (more than kept_tolerance); the report is of the drawn steps"
            for name, (want, got) in zip(names, drawn.kept_share, strict=True)
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
            *sample_lines(drawn),
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
