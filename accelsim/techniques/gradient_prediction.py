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

import dataclasses
from collections.abc import Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, model_validator

from accelsim.config.base import (
    Dataflow,
    DataflowField,
    Kib,
    NonNegativeInt,
    NonNegativeKib,
    PositiveFloat,
    Precision,
    PrecisionField,
    RuleViolation,
    Spec,
)
from accelsim.config.hardware import ArrayDim, ArraySpec, HardwareSpec, WordBytesSpec
from accelsim.errors import ConfigError, Problem
from accelsim.graph import passes, queries
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import GemmOp, Op, OpGraph, Parameter, Stage, Tensor
from accelsim.lowering.shapes import LayerInfo
from accelsim.mapping.units import MAIN_ARRAY, ArrayUnit
from accelsim.report.result import RunResult
from accelsim.report.training import Source
from accelsim.techniques.base import (
    LoadContext,
    Section,
    SimulatedStep,
    Technique,
    TechniqueContext,
    TrainingPlan,
)
from accelsim.techniques.plan import read_trace, synthetic_decay
from accelsim.techniques.predictor import (
    MSE_OPS,
    LayerOutput,
    Predictor,
    PredictorNetSpec,
    PredictorStorage,
    predicted_shape,
    predictor_layer_cost,
)
from accelsim.techniques.provenance import Origin, inputs
from accelsim.units import kib_to_bytes

PREDICTOR = "predictor"
Fraction = Annotated[float, Field(ge=0, le=1)]

_REIMPL = "TAMU CSCE-614 re-implementation report (k3shavkish0re/ADAGP), not the paper"
_OUR_ARRAY = "our choice: a quarter of the default main array's PEs, bf16, WS"
_OUR_SCHEDULE = "our choice: the paper's adaptive rule is not available to us"
DEFAULTS: dict[str, Origin] = {
    "placement": (Source.RECALLED, "a predictor unit beside the main array, recalled"),
    **{
        f"array.{key}": (Source.OURS, _OUR_ARRAY)
        for key in ("rows", "cols", "dataflow", "precision", "ifmap_kib", "filter_kib")
    },
    "array.ofmap_kib": (Source.OURS, _OUR_ARRAY),
    "array.weights_kib": (Source.OURS, "our choice: 2 MiB of predictor weight SRAM"),
    "network.pool": (Source.REIMPLEMENTATION, _REIMPL + ": pool to 4x4"),
    "network.conv_layers": (Source.REIMPLEMENTATION, _REIMPL + ": 2-4 conv layers"),
    "network.channels": (Source.REIMPLEMENTATION, _REIMPL + ": 64 channels"),
    "schedule.warmup_epochs": (Source.REIMPLEMENTATION, _REIMPL + ": 5 warm-up epochs"),
    "schedule.policy": (Source.PAPER, "the paper adapts when and how long prediction is used"),
    **{
        f"schedule.{key}": (Source.OURS, _OUR_SCHEDULE)
        for key in ("gp_fraction", "start", "step", "minimum", "maximum", "error_threshold")
    },
    "schedule.error_trace": (
        Source.OURS,
        "none: our synthetic predictor error floor + (1 - floor) exp(-epoch / decay_epochs)",
    ),
    "schedule.floor": (Source.OURS, "our synthetic error curve"),
    "schedule.decay_epochs": (Source.OURS, "our synthetic error curve"),
}
"""Where each setting's default comes from (``../shared/techniques.md`` section 2)."""


class Placement(str, Enum):
    DEDICATED = "dedicated"
    SHARED = "shared"


class Policy(str, Enum):
    FIXED = "fixed"
    ADAPTIVE = "adaptive"


class PredictorArraySpec(Spec):
    """The dedicated predictor array of each processor and its operand buffers [D].

    ``weights_kib`` is the predictor's own weight SRAM (either placement): its conv
    and FC weights and their Adam state stay there when they fit, smallest tensors
    first, and the rest stream from DRAM on every use [D].
    """

    rows: ArrayDim = Field(default=64, description="PE rows of the predictor array.")
    cols: ArrayDim = Field(default=64, description="PE columns of the predictor array.")
    dataflow: DataflowField = Field(
        default=Dataflow.WS, description="Dataflow of the predictor array."
    )
    precision: PrecisionField = Field(
        default=Precision.BF16, description="MAC precision of the predictor array."
    )
    ifmap_kib: Kib = Field(default=256.0, description="The predictor array's input SRAM.")
    filter_kib: Kib = Field(default=1024.0, description="The predictor array's weight SRAM.")
    ofmap_kib: Kib = Field(default=256.0, description="The predictor array's output SRAM.")
    weights_kib: NonNegativeKib = Field(
        default=2048.0,
        description="SRAM for the predictor's weights and their Adam state, kept smallest"
        " tensors first; the rest stream from DRAM on every use.",
    )


class ScheduleSpec(Spec):
    """When GP steps run instead of BP steps.

    ``fixed`` uses ``gp_fraction`` after warm-up.  ``adaptive`` starts at
    ``start`` and each epoch moves the GP share by ``step`` (within
    ``[minimum, maximum]``): up while the epoch's mean predictor error is below
    ``error_threshold``, down otherwise.  Errors come from ``error_trace`` (a CSV
    of ``epoch,batch,predictor_error``, relative to the run file) or, without one,
    from ``floor + (1 - floor) * exp(-epoch / decay_epochs)`` [D].
    """

    warmup_epochs: NonNegativeInt = Field(
        default=5, description="Epochs of backpropagation (BP steps only) before any GP step."
    )
    policy: Annotated[Policy, Field(strict=False)] = Field(
        default=Policy.ADAPTIVE,
        description="fixed (a gp_fraction share of GP steps after warm-up) or adaptive (the"
        " share moves by step each epoch with the predictor error).",
    )
    gp_fraction: Fraction = Field(
        default=0.5, description="Share of GP steps after warm-up, with policy fixed."
    )
    start: Fraction = Field(default=0.5, description="Adaptive: the GP share after warm-up.")
    step: Fraction = Field(default=0.1, description="Adaptive: the GP share's change per epoch.")
    minimum: Fraction = Field(default=0.0, description="Adaptive: the lowest GP share.")
    maximum: Fraction = Field(default=0.9, description="Adaptive: the highest GP share.")
    error_threshold: PositiveFloat = Field(
        default=0.2,
        description="Adaptive: the share rises while the epoch's mean predictor error is"
        " below this, and falls otherwise.",
    )
    error_trace: str | None = Field(
        default=None,
        description="CSV of epoch,batch,predictor_error (relative to the run file); null:"
        " the synthetic curve floor + (1 - floor) exp(-epoch / decay_epochs).",
    )
    floor: Fraction = Field(default=0.05, description="Synthetic error curve: its limit.")
    decay_epochs: PositiveFloat = Field(
        default=8.0, description="Synthetic error curve: its decay constant, in epochs."
    )

    @model_validator(mode="after")
    def _check_range(self) -> ScheduleSpec:
        if self.minimum > self.maximum:
            raise RuleViolation("minimum", f"larger than maximum ({self.maximum:g})", self.minimum)
        return self


class GradientPredictionConfig(Spec):
    """``techniques.gradient_prediction`` in a run file."""

    placement: Annotated[Placement, Field(strict=False)] = Field(
        default=Placement.DEDICATED,
        description="dedicated (a predictor array beside each main array) or shared (the"
        " predictor's work time-shares the main array).",
    )
    array: PredictorArraySpec = Field(
        default_factory=PredictorArraySpec, description="The dedicated predictor array."
    )
    network: PredictorNetSpec = Field(
        default_factory=PredictorNetSpec, description="The predictor network."
    )
    schedule: ScheduleSpec = Field(
        default_factory=ScheduleSpec, description="When GP steps run instead of BP steps."
    )


class _Rewrite:
    """Adds the predictor's ops to one step graph of kind ``bp`` or ``gp``."""

    def __init__(
        self, graph: OpGraph, predictor: Predictor, infos: Mapping[str, LayerInfo], gp: bool
    ) -> None:
        self.predictor = predictor
        self.gp = gp
        self.tensors = queries.tensors(graph.ops)
        self.infos = infos
        self.predicted_params: dict[str, list[Parameter]] = {}
        for p in graph.parameters:
            if predicted_shape(p) is not None:
                self.predicted_params.setdefault(p.layer, []).append(p)
        self.last_forward: dict[str, int] = {}
        self.last_backward: dict[str, int] = {}
        self.forward_writes: dict[str, list[Tensor]] = {}
        for op in graph.ops:
            if queries.forward_work(op):
                self.last_forward[op.layer] = op.op_id
                self.forward_writes.setdefault(op.layer, []).extend(
                    a.tensor for a in queries.writes_of(op)
                )
            elif op.phase in queries.GRADIENT_PHASES:
                self.last_backward[op.layer] = op.op_id
        self.pending: dict[str, tuple[Tensor, list[Tensor]]] = {}
        self.gradients: dict[str, tuple[Tensor, int]] = {}

    def view(self, layer: str) -> LayerOutput:
        made = tuple(self.forward_writes.get(layer, ()))
        return LayerOutput(self.infos[layer], self.tensors[f"{layer}.out"], made)

    def emit(self, builder: GraphBuilder, op: Op) -> None:
        """After a layer's forward ops: inference; after its backward ops (BP): training."""
        layer = op.layer
        if self.last_forward.get(layer) == op.op_id:
            for parameter in self.predicted_params.get(layer, []):
                shape = predicted_shape(parameter)
                assert shape is not None
                predicted, made_by, acts = self.predictor.infer(
                    builder, self.view(layer), parameter, *shape
                )
                if self.gp:
                    self.gradients[parameter.weight.name] = (predicted, made_by)
                else:
                    self.pending[parameter.weight.name] = (predicted, acts)
        if not self.gp and self.last_backward.get(layer) == op.op_id:
            for parameter in self.predicted_params.get(layer, []):
                saved = self.pending.pop(parameter.weight.name, None)
                shape = predicted_shape(parameter)
                if saved is not None and shape is not None:
                    predicted, acts = saved
                    self.predictor.train(
                        builder, self.view(layer), parameter, predicted, acts, *shape
                    )

    def apply(self, graph: OpGraph, words: WordBytesSpec, owner: str) -> OpGraph:
        """``graph`` with the predictor's ops (``owner``'s) added, and in a GP step
        without its backward pass."""
        drop = (lambda op: op.stage is Stage.BACKWARD) if self.gp else (lambda op: False)
        rewritten, _ = passes.rewrite(graph, words, drop, self.emit, owner=owner)
        if not self.gp:
            return rewritten
        parameters = []
        for p in rewritten.parameters:
            made = self.gradients.get(p.weight.name)
            parameters.append(
                dataclasses.replace(p, gradient=made[0], grad_op=made[1]) if made else p
            )
        return dataclasses.replace(rewritten, parameters=tuple(parameters))


class GradientPrediction(Technique):
    """ADA-GP as a plug-in: a predictor unit, BP and GP steps, a training schedule."""

    name = "gradient_prediction"
    Config = GradientPredictionConfig

    @property
    def settings(self) -> GradientPredictionConfig:
        assert isinstance(self.config, GradientPredictionConfig)
        return self.config

    def defaults(self) -> dict[str, Origin]:
        return DEFAULTS

    def validate(self, load: LoadContext) -> list[Problem]:
        cfg = self.settings
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
            self._errors(load.run_file, load.run.training.epochs)
        except ConfigError as exc:
            problems += exc.problems
        return problems

    def add_components(self, hw: HardwareSpec) -> Sequence[ArrayUnit]:
        cfg = self.settings
        if cfg.placement is Placement.SHARED:
            return ()
        a = cfg.array
        spec = ArraySpec(rows=a.rows, cols=a.cols, dataflow=a.dataflow, precision=a.precision)
        sizes = (kib_to_bytes(a.ifmap_kib), kib_to_bytes(a.filter_kib), kib_to_bytes(a.ofmap_kib))
        return (ArrayUnit(PREDICTOR, spec, *sizes),)

    def defines_kinds(self) -> bool:
        return True

    def step_kinds(self, ctx: TechniqueContext) -> Sequence[str]:
        return ("bp", "gp")

    def storage(self, graph: OpGraph, hw: HardwareSpec) -> PredictorStorage:
        """The predictor's weights and Adam state for the layers of ``graph``, and which
        of them its weight SRAM holds."""
        shapes = [predicted_shape(p) for p in graph.parameters]
        largest = max((s[1] for s in shapes if s is not None), default=1)
        return PredictorStorage.of(
            self.settings.network,
            largest,
            hw.word_bytes,
            kib_to_bytes(self.settings.array.weights_kib),
        )

    def rewrite_graph(self, graph: OpGraph, kind: str, ctx: TechniqueContext) -> OpGraph:
        cfg = self.settings
        unit = PREDICTOR if cfg.placement is Placement.DEDICATED else MAIN_ARRAY
        predictor = Predictor(cfg.network, unit, self.storage(graph, ctx.hardware))
        infos = {info.layer.name: info for info in ctx.infos}
        return _Rewrite(graph, predictor, infos, gp=kind == "gp").apply(
            graph, ctx.hardware.word_bytes, self.name
        )

    def kind_shares(self, ctx: TechniqueContext) -> list[dict[str, float]]:
        """Per epoch, the GP share the schedule gives (BP the rest)."""
        errors = self._errors(ctx.run_file, ctx.run.training.epochs)
        fractions = gp_fractions(self.settings.schedule, ctx.run.training.epochs, errors)
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
        placement = self.settings.placement
        notes: tuple[str, ...] = ()
        if not any(fractions):
            warmup = self.settings.schedule.warmup_epochs
            notes = (
                f"no GP step runs: the {plan.epochs} epoch(s) trained are all BP (warm-up of"
                f" {warmup} epochs, or the schedule never chose GP), so the speedup is the"
                " predictor's overhead on BP steps; set training.epochs (the paper trains 90)",
            )
        use = {
            "bp": _predictor_use(bp, self.name, placement, base.total_cycles),
            "gp": _predictor_use(gp, self.name, placement),
        }
        details = {
            "policy": self.settings.schedule.policy.value,
            "placement": placement.value,
            "gp_fraction": sum(fractions) / plan.epochs,
            "gp_fraction_by_epoch": fractions,
            "predictor": {
                "storage": self.storage(base.graph, ctx.hardware).report(),
                **use,
                "layers": [
                    predictor_layer_cost(
                        self.settings.network, layers[p.layer], p, ctx.run.batch_size
                    )
                    for p in base.graph.parameters
                    if predicted_shape(p) is not None
                ],
            },
        }
        lines = (
            ("GP share", f"{details['gp_fraction']:.3f} of the steps ({details['policy']})"),
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
            inputs=inputs(
                self.settings,
                self.defaults(),
                traces=("schedule.error_trace",),
                constants={
                    "predictor_loss_ops": (MSE_OPS, (Source.REIMPLEMENTATION, _REIMPL + ": MSE")),
                    "predictor_optimizer": ("adam", (Source.REIMPLEMENTATION, _REIMPL)),
                },
            ),
        )

    def _errors(self, run_file: Path, epochs: int) -> list[float]:
        schedule = self.settings.schedule
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
