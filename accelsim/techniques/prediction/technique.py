"""ADA-GP: adaptive gradient prediction (Janfaza et al., MICRO 2023, arXiv 2305.13236).

A small predictor network predicts each layer's weight gradient from the layer's
batch-averaged output activations.  Training alternates two kinds of step:

* **BP** (back-propagation): the baseline step, plus predictor inference after
  each layer's forward pass and predictor training (against the true gradient)
  after each layer's backward pass.  The predictions are computed but unused.
* **GP** (gradient prediction): each layer's forward pass, then predictor
  inference for that layer and the update of its weights with the predicted
  gradient, overlapped with the next layer's forward pass.  No backward GEMMs,
  no loss gradient, no activation stash.

After ``warmup_epochs`` of pure BP, a ``fixed`` policy runs a constant share of
GP batches per epoch, and an ``adaptive`` one raises the GP share while the
predictor's error stays under a threshold and lowers it when it does not.  The
error comes from a trace file or a synthetic curve (the simulator trains nothing).

Hardware: a predictor array per processor (``placement: dedicated``) with its
own operand buffers and the shared DRAM, or the main array time-shared
(``placement: shared``).  Batch averaging, pooling and the predictor's loss and
optimizer run on the processor's vector unit.

Provenance of the defaults ([S] the paper's abstract, [R] a third-party
re-implementation's report, ``k3shavkish0re/ADAGP``, [D] our choice); see
``../shared/techniques.md`` section 2 and docs/techniques/gradient-prediction.md:

* tensor reorganisation, one predictor sample per output channel [R];
* pooling to 4x4, 2 conv layers of 64 channels (3x3), one FC layer sized for the
  largest layer and masked for smaller ones [R];
* 5 warm-up epochs [R]; predictor trained with Adam [R];
* predictor array 64x64 WS bf16 (a quarter of the default main array's PEs)
  with 256 KiB / 1 MiB / 256 KiB operand buffers, the adaptive policy constants
  and the synthetic error curve [D].

Layers whose weights are predicted: conv, linear, LSTM and attention weight
matrices.  Biases, norm parameters and embeddings are not predicted: GP steps
leave them unchanged (BP steps train them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from accelsim.config.hardware import ArraySpec, HardwareSpec
from accelsim.errors import ConfigError, Problem
from accelsim.graph.ops import GemmOp, OpGraph
from accelsim.lowering.shapes import LayerInfo
from accelsim.mapping.units import MAIN_ARRAY, ArrayUnit
from accelsim.report.result import RunResult
from accelsim.report.training import Input, Source, StepCost
from accelsim.techniques.base import (
    GraphRewriter,
    KindDefiner,
    LoadContext,
    Section,
    SimulatedStep,
    TechniqueContext,
    TrainingPlan,
)
from accelsim.techniques.plan import measured_errors, read_trace, synthetic_decay
from accelsim.techniques.prediction.config import (
    CURVE_KEYS,
    CURVE_SET,
    DEFAULTS,
    NAME,
    PREDICTOR,
    REIMPL,
    ErrorSignal,
    GradientPredictionConfig,
    Placement,
    Policy,
    ScheduleSpec,
)
from accelsim.techniques.prediction.predictor import (
    MSE_OPS,
    Predictor,
    PredictorStorage,
    predicted_shape,
    predictor_layer_cost,
)
from accelsim.techniques.prediction.rewrite import PredictorRewrite
from accelsim.techniques.prediction.shares import share_range
from accelsim.techniques.provenance import Origin, bundled_trace_inputs, inputs
from accelsim.units import kib_to_bytes, plural


class GradientPrediction(
    GraphRewriter[GradientPredictionConfig], KindDefiner[GradientPredictionConfig]
):
    """ADA-GP as a plug-in: a predictor unit, BP and GP steps, a training schedule."""

    name = NAME
    trains = "it predicts weight gradients in place of the backward pass"
    after: ClassVar[Mapping[str, str]] = dict.fromkeys(
        ("approximate_dropout", "gradient_skipping"),
        "work is removed before work is added: the predictor's ops join the step the"
        " pruning techniques left",
    )

    def defaults(self) -> dict[str, Origin]:
        return DEFAULTS

    def validate(self, load: LoadContext) -> list[Problem]:
        cfg = self.config
        problems = []
        if cfg.placement is Placement.DEDICATED:
            a = cfg.array
            words = load.hardware.word_bytes
            need = a.rows * a.cols * max(words.activations, words.weights, words.gradients)
            problems += [
                Problem(
                    self.source,
                    self.where(f"array.{key}"),
                    f"too small for one {a.rows}x{a.cols} tile (needs >= {need / 1024:g} KiB)",
                    getattr(a, key),
                )
                for key in ("ifmap_kib", "filter_kib", "ofmap_kib")
                if kib_to_bytes(getattr(a, key)) < need
            ]
        try:
            self._errors(load.run_file, load.run.training.epochs, load.infos)
        except ConfigError as exc:
            problems += exc.problems
        return problems

    def extra_arrays(self, hw: HardwareSpec) -> Sequence[ArrayUnit]:
        cfg = self.config
        if cfg.placement is Placement.SHARED:
            return ()
        a = cfg.array
        spec = ArraySpec(rows=a.rows, cols=a.cols, dataflow=a.dataflow, precision=a.precision)
        sizes = (kib_to_bytes(a.ifmap_kib), kib_to_bytes(a.filter_kib), kib_to_bytes(a.ofmap_kib))
        return (ArrayUnit(PREDICTOR, spec, *sizes),)

    def extra_sram_kib(self, hw: HardwareSpec) -> float:
        """The predictor's weight SRAM (either placement)."""
        return self.config.array.weights_kib

    def step_kinds(self, ctx: TechniqueContext) -> Sequence[str]:
        return ("bp", "gp")

    def storage(self, graph: OpGraph, hw: HardwareSpec) -> PredictorStorage:
        """The predictor's weights and Adam state for the layers of ``graph``, and which
        of them its weight SRAM holds."""
        shapes = [predicted_shape(p) for p in graph.parameters]
        largest = max((s[1] for s in shapes if s is not None), default=1)
        return PredictorStorage.of(
            self.config.network,
            largest,
            hw.word_bytes,
            kib_to_bytes(self.config.array.weights_kib),
        )

    def rewrite_graph(self, graph: OpGraph, kind: str, ctx: TechniqueContext) -> OpGraph:
        cfg = self.config
        unit = PREDICTOR if cfg.placement is Placement.DEDICATED else MAIN_ARRAY
        predictor = Predictor(cfg.network, unit, self.storage(graph, ctx.hardware))
        infos = {info.layer.name: info for info in ctx.infos}
        return PredictorRewrite(graph, predictor, infos, gp=kind == "gp").apply(
            graph, ctx.hardware.word_bytes, self.name
        )

    def kind_shares(self, ctx: TechniqueContext) -> list[dict[str, float]]:
        """Per epoch, the GP share the schedule gives (BP the rest)."""
        errors = self._errors(ctx.run_file, ctx.run.training.epochs, ctx.infos)
        fractions = gp_fractions(self.config.schedule, ctx.run.training.epochs, errors)
        return [{"bp": 1 - g, "gp": g} for g in fractions]

    def training(
        self,
        ctx: TechniqueContext,
        base: RunResult,
        steps: Mapping[str, SimulatedStep],
        plan: TrainingPlan,
    ) -> Section:
        fractions = [epoch["gp"] for epoch in plan.shares]
        bp, gp = steps["bp"], steps["gp"]
        layers = {info.layer.name: info for info in ctx.infos}
        placement = self.config.placement
        notes: tuple[str, ...] = ()
        if not any(fractions):
            warmup = self.config.schedule.warmup_epochs
            notes = (
                f"no GP step runs: the {plan.epochs} {plural(plan.epochs, 'epoch')} trained"
                f" {'is' if plan.epochs == 1 else 'are'} all BP (warm-up of {warmup}"
                f" {plural(warmup, 'epoch')}, or the schedule never chose GP), so the speedup is"
                " the predictor's overhead on BP steps; set training.epochs (the paper trains 90)",
            )
        use = {
            "bp": _predictor_use(bp, self.name, placement, base.total_cycles),
            "gp": _predictor_use(gp, self.name, placement),
        }
        by_share, range_lines = share_range(StepCost.of(base), bp.cost, gp.cost)
        details = {
            "policy": self.config.schedule.policy.value,
            "placement": placement.value,
            "gp_fraction": sum(fractions) / plan.epochs,
            "gp_fraction_by_epoch": fractions,
            "error_signal": self._signal(),
            **by_share,
            "predictor": {
                "storage": self.storage(base.graph, ctx.hardware).report(),
                **use,
                "layers": [
                    predictor_layer_cost(
                        self.config.network, layers[p.layer], p, ctx.run.batch_size
                    )
                    for p in base.graph.parameters
                    if predicted_shape(p) is not None
                ],
            },
        }
        lines = (
            (
                "GP share",
                f"{details['gp_fraction']:.3f} of the steps ({details['policy']};"
                f" decided by {details['error_signal']})",
            ),
            *range_lines,
            (
                "predictor on BP",
                f"{use['bp']['overhead_fraction'] * 100:+.1f} % cycles over the baseline step,"
                f" {use['bp']['hidden_fraction'] * 100:.0f} % of its array time hidden",
            ),
        )
        return Section(
            self.name,
            details,
            lines,
            notes,
            inputs=self._inputs(),
        )

    def _signal(self) -> str:
        """What decided the GP share of each epoch: a trace, or our curve."""
        schedule = self.config.schedule
        if schedule.policy is Policy.FIXED:
            return "the fixed gp_fraction"
        if schedule.error_trace is not None:
            return f"the measured predictor-error trace {schedule.error_trace}"
        if schedule.errors is ErrorSignal.MEASURED:
            return "the bundled measured predictor-error trace of a digits model"
        return "our synthetic predictor-error curve"

    def _inputs(self) -> tuple[Input, ...]:
        """The provenance of every input; the synthetic curve's parameters are our choice
        whichever file sets them (nothing measured them)."""
        found = inputs(
            self.config,
            self.defaults(),
            traces=("schedule.error_trace",),
            constants={
                "predictor_loss_ops": (MSE_OPS, (Source.REIMPLEMENTATION, REIMPL + ": MSE")),
                "predictor_optimizer": ("adam", (Source.REIMPLEMENTATION, REIMPL)),
            },
        )
        ours = tuple(
            Input(i.key, i.value, Source.OURS, CURVE_SET)
            if i.key in CURVE_KEYS and i.source is Source.RUN
            else i
            for i in found
        )
        return bundled_trace_inputs(ours, "schedule.errors")

    def _errors(self, run_file: Path, epochs: int, infos: Sequence[LayerInfo]) -> list[float]:
        schedule = self.config.schedule
        if schedule.error_trace is None and schedule.errors is ErrorSignal.MEASURED:
            return measured_errors([info.layer.kind for info in infos], epochs)[1]
        if schedule.error_trace is None:
            return synthetic_decay(schedule.floor, schedule.decay_epochs, epochs)
        return read_trace(
            run_file.parent / schedule.error_trace,
            "predictor_error",
            epochs,
            self.source,
            self.where("schedule.error_trace"),
        )


def _predictor_use(
    step: SimulatedStep, owner: str, placement: Placement, base_cycles: int | None = None
) -> dict[str, Any]:
    """Predictor MACs, array busy time, energy and (for BP) how much of it is hidden.

    The predictor's ops are those ``owner`` (ADA-GP) added, none of another
    technique's.  MACs, busy time and energy are those of the whole simulated step
    graph (every mini-batch of a pipeline); the overhead compares one step's cost
    with the baseline step's cycles.
    """
    result = step.result
    c = result.trace.costs
    aux = [op.owner == owner for op in result.graph.ops]
    durations = result.trace.end_cycle - result.trace.start_cycle
    busy = sum(
        int(durations[op.op_id])
        for op in result.graph.ops
        if op.owner == owner and isinstance(op, GemmOp)
    )
    use: dict[str, Any] = {
        "macs": int(sum(int(m) for m, a in zip(c.macs, aux, strict=True) if a)),
        "busy_cycles": busy,
        "energy_pj": float(
            sum(float(e) for e, a in zip(result.energy.op_pj, aux, strict=True) if a)
        ),
    }
    if base_cycles is not None:
        overhead = step.cost.cycles - base_cycles
        use["overhead_cycles"] = overhead
        use["overhead_fraction"] = overhead / max(base_cycles, 1)
        use["hidden_fraction"] = (
            min(1.0, max(0.0, 1 - overhead / busy))
            if busy and placement is Placement.DEDICATED
            else 0.0
        )
    return use


def gp_fractions(schedule: ScheduleSpec, epochs: int, errors: Sequence[float]) -> list[float]:
    """The share of GP batches in each epoch under ``schedule``, given per-epoch errors."""
    fractions = []
    share = schedule.start
    for epoch in range(epochs):
        if epoch < schedule.warmup_epochs:
            fractions.append(0.0)
            continue
        if schedule.policy is Policy.FIXED:
            fractions.append(schedule.gp_fraction)
            continue
        if epoch > schedule.warmup_epochs:
            change = schedule.step if errors[epoch] < schedule.error_threshold else -schedule.step
            share = min(schedule.maximum, max(schedule.minimum, share + change))
        fractions.append(share)
    return fractions
