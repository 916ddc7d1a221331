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
``../shared/techniques.md`` section 2 and the README:

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

import csv
import math
from collections.abc import Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from accelsim.config.base import (
    Dataflow,
    DataflowField,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Precision,
    PrecisionField,
    Spec,
)
from accelsim.config.hardware import ArraySpec, HardwareSpec
from accelsim.config.run import OptimizerKind
from accelsim.errors import ConfigError
from accelsim.mapping.units import MAIN_ARRAY, ArrayUnit
from accelsim.report.result import RunResult
from accelsim.techniques.base import Technique, TechniqueContext
from accelsim.units import kib_to_bytes
from accelsim.workload import model as wm
from accelsim.workload.lowering import GraphBuilder, LayerView, StepHooks
from accelsim.graph.ops import GemmOp, Parameter, Phase, Tensor, TensorKind
from accelsim.workload.shapes import LayerInfo, Layout, Shape

PREDICTOR = "predictor"
MSE_OPS = 3  # difference, square, scale (the gradient of the squared error)
Fraction = Annotated[float, Field(ge=0, le=1)]


class Placement(str, Enum):
    DEDICATED = "dedicated"
    SHARED = "shared"


class Policy(str, Enum):
    FIXED = "fixed"
    ADAPTIVE = "adaptive"


class PredictorArraySpec(Spec):
    """The dedicated predictor array of each processor and its operand buffers [D]."""

    rows: PositiveInt = 64
    cols: PositiveInt = 64
    dataflow: DataflowField = Dataflow.WS
    precision: PrecisionField = Precision.BF16
    ifmap_kib: PositiveFloat = 256.0
    filter_kib: PositiveFloat = 1024.0
    ofmap_kib: PositiveFloat = 256.0


class PredictorNetSpec(Spec):
    """The predictor network [R]: pool to ``pool`` x ``pool``, ``conv_layers`` 3x3
    convs of ``channels`` channels, one FC layer per output-channel sample.

    Layers with fewer than ``pool**2`` values per output channel (a linear
    layer's output has one) feed the predictor what they have [D].
    """

    pool: PositiveInt = 4
    conv_layers: PositiveInt = 2
    channels: PositiveInt = 64


class ScheduleSpec(Spec):
    """When GP steps run instead of BP steps.

    ``fixed`` uses ``gp_fraction`` after warm-up.  ``adaptive`` starts at
    ``start`` and each epoch moves the GP share by ``step`` (within
    ``[minimum, maximum]``): up while the epoch's mean predictor error is below
    ``error_threshold``, down otherwise.  Errors come from ``error_trace`` (a CSV
    of ``epoch,batch,predictor_error``, relative to the run file) or, without one,
    from ``floor + (1 - floor) * exp(-epoch / decay_epochs)`` [D].
    """

    warmup_epochs: NonNegativeInt = 5
    policy: Annotated[Policy, Field(strict=False)] = Policy.ADAPTIVE
    gp_fraction: Fraction = 0.5
    start: Fraction = 0.5
    step: Fraction = 0.1
    minimum: Fraction = 0.0
    maximum: Fraction = 0.9
    error_threshold: PositiveFloat = 0.2
    error_trace: str | None = None
    floor: Fraction = 0.05
    decay_epochs: PositiveFloat = 8.0


class GradientPredictionConfig(Spec):
    """``techniques.gradient_prediction`` in a run file."""

    placement: Annotated[Placement, Field(strict=False)] = Placement.DEDICATED
    array: PredictorArraySpec = Field(default_factory=PredictorArraySpec)
    network: PredictorNetSpec = Field(default_factory=PredictorNetSpec)
    schedule: ScheduleSpec = Field(default_factory=ScheduleSpec)


def predicted_shape(layer: wm.Layer, parameter: Parameter) -> tuple[int, int] | None:
    """``(K, O)``: output channels and per-channel gradient size of a predicted weight.

    None for parameters that are not predicted (biases, norms, embeddings).
    """
    suffix = parameter.weight.name.rpartition(".")[2]
    if not isinstance(layer, (wm.Conv2d, wm.Linear, wm.Lstm, wm.Attention)):
        return None
    if not suffix.startswith("W"):
        return None
    if isinstance(layer, wm.Conv2d):
        k = layer.out_channels
    elif isinstance(layer, wm.Linear):
        k = layer.out_features
    elif isinstance(layer, wm.Lstm):
        k = 4 * layer.hidden_size
    else:
        k = parameter.weight.elements // _attention_width(parameter)
    return k, parameter.weight.elements // k


def pooled_size(shape: Shape, pool: int) -> int:
    """Values per output channel after pooling: ``pool**2``, or fewer when the layer has fewer.

    A feature map has ``P*Q`` values per channel and a sequence ``T``; a plain
    feature vector has one, which no pooling can turn into ``pool**2``.
    """
    if shape.layout is Layout.CHW:
        spatial = shape.dims[1] * shape.dims[2]
    elif shape.layout is Layout.SEQUENCE:
        spatial = shape.dims[0]
    else:
        spatial = 1
    return min(pool**2, spatial)


def predictor_layer_cost(
    net: PredictorNetSpec, info: LayerInfo, parameter: Parameter, batch: int
) -> dict[str, Any]:
    """The predictor's work for one predicted weight, in closed form (per replica step).

    Forward (inference) MACs are ``K p (9 h + (c - 1) 9 h^2) + K h p O`` with
    ``p`` the pooled values per channel; training adds every GEMM's backward
    (dW and dX) except the first conv's dX.  Weight bytes count the conv
    weights and the FC slice this layer uses; activation bytes the predictor's
    input and conv outputs.
    """
    shape = predicted_shape(info.layer, parameter)
    assert shape is not None
    k, o = shape
    p = pooled_size(info.out_shape, net.pool)
    h, c = net.channels, net.conv_layers
    conv0 = k * p * 9 * h
    convs = conv0 + (c - 1) * k * p * 9 * h * h
    fc = k * h * p * o
    word = parameter.weight.word_bytes
    return {
        "parameter": parameter.weight.name,
        "output_channels": k,
        "gradient_per_channel": o,
        "pooled_values": p,
        "forward_macs": convs + fc,
        "training_macs": 2 * (convs + fc) - conv0,
        "averaging_ops": batch * info.out_shape.numel,
        "weight_bytes": word * (9 * h + (c - 1) * 9 * h * h + h * p * o),
        "activation_bytes": word * k * p * (1 + c * h),
    }


def _attention_width(parameter: Parameter) -> int:
    # Wqkv holds 3 D x D matrices, Wo one: the fan-in is D either way.
    d_squared = parameter.weight.elements // (3 if parameter.weight.name.endswith("Wqkv") else 1)
    return math.isqrt(d_squared)


class _Predictor:
    """Emits the predictor's ops for one layer (shared by BP and GP steps)."""

    def __init__(self, config: GradientPredictionConfig, largest_output: int) -> None:
        self.net = config.network
        self.unit = PREDICTOR if config.placement is Placement.DEDICATED else MAIN_ARRAY
        self.largest_output = largest_output

    def weights(self, builder: GraphBuilder, prefix: str) -> tuple[Tensor, list[Tensor]]:
        """The predictor's FC weights (sized for the largest layer) and conv weights."""
        net = self.net
        fc = builder.tensor(
            f"{prefix}predictor.fc.W",
            TensorKind.WEIGHT,
            net.channels * net.pool**2 * self.largest_output,
        )
        convs = [
            builder.tensor(
                f"{prefix}predictor.conv{j}.W",
                TensorKind.WEIGHT,
                9 * net.channels * (1 if j == 0 else net.channels),
            )
            for j in range(net.conv_layers)
        ]
        return fc, convs

    def infer(
        self, builder: GraphBuilder, view: LayerView, parameter: Parameter, k: int, o: int
    ) -> tuple[Tensor, int, list[Tensor]]:
        """Predict ``parameter``'s gradient; return it, the op that made it, and activations."""
        net, layer = self.net, view.info.layer.name
        p2 = pooled_size(view.info.out_shape, net.pool)
        tag = f"{parameter.weight.name}.predictor"
        sample = builder.tensor(f"{tag}.input", TensorKind.ACTIVATION, k * p2)
        # Batch averaging and pooling read the layer's output as it leaves the
        # array (on chip), one op per element.
        fresh = builder.keep_on_chip(
            builder.tensor(
                f"{view.output.name}.to_predictor", TensorKind.ACTIVATION, view.output.elements
            )
        )
        builder.vector(
            f"{tag}.average", layer, Phase.AUX, view.output.elements, 1, [fresh], [sample]
        )
        fc, convs = self.weights(builder, view.prefix)
        x = sample
        activations = [sample]
        for j, w in enumerate(convs):
            y = builder.tensor(f"{tag}.conv{j}", TensorKind.ACTIVATION, k * p2 * net.channels)
            fan_in = 9 * (1 if j == 0 else net.channels)
            builder.gemm(
                f"{tag}.conv{j}.fwd",
                layer,
                Phase.AUX,
                m=k * p2,
                n=net.channels,
                k=fan_in,
                count=1,
                a=x,
                b=w,
                c=y,
                unit=self.unit,
            )
            x = y
            activations.append(y)
        predicted = builder.tensor(f"{tag}.gradient", TensorKind.GRADIENT, k * o)
        op = builder.gemm(
            f"{tag}.fc.fwd",
            layer,
            Phase.AUX,
            m=k,
            n=o,
            k=net.channels * p2,
            count=1,
            a=x,
            b=fc,
            c=predicted,
            b_elements=net.channels * p2 * o,
            unit=self.unit,
        )
        return predicted, op, activations

    def train(
        self,
        builder: GraphBuilder,
        view: LayerView,
        parameter: Parameter,
        predicted: Tensor,
        activations: list[Tensor],
        k: int,
        o: int,
    ) -> None:
        """One predictor training step against ``parameter``'s true gradient."""
        net, layer = self.net, view.info.layer.name
        p2 = pooled_size(view.info.out_shape, net.pool)
        tag = f"{parameter.weight.name}.predictor"
        fc, convs = self.weights(builder, view.prefix)
        d_out = builder.tensor(f"{tag}.d_gradient", TensorKind.GRADIENT, k * o)
        builder.vector(
            f"{tag}.loss",
            layer,
            Phase.AUX,
            k * o,
            MSE_OPS,
            [predicted, parameter.gradient],
            [d_out],
        )
        updated = [builder.tensor(f"{fc.name}.d", TensorKind.GRADIENT, net.channels * p2 * o)]
        builder.gemm(
            f"{tag}.fc.dw",
            layer,
            Phase.AUX,
            m=o,
            n=net.channels * p2,
            k=k,
            count=1,
            a=d_out,
            b=activations[-1],
            c=updated[0],
            unit=self.unit,
        )
        grad = builder.tensor(f"{tag}.fc.dx", TensorKind.GRADIENT, k * p2 * net.channels)
        builder.gemm(
            f"{tag}.fc.dx",
            layer,
            Phase.AUX,
            m=k,
            n=net.channels * p2,
            k=o,
            count=1,
            a=d_out,
            b=fc,
            c=grad,
            b_elements=net.channels * p2 * o,
            unit=self.unit,
        )
        for j in reversed(range(len(convs))):
            fan_in = 9 * (1 if j == 0 else net.channels)
            d_w = builder.tensor(f"{convs[j].name}.d", TensorKind.GRADIENT, convs[j].elements)
            builder.gemm(
                f"{tag}.conv{j}.dw",
                layer,
                Phase.AUX,
                m=net.channels,
                n=fan_in,
                k=k * p2,
                count=1,
                a=grad,
                b=activations[j],
                c=d_w,
                unit=self.unit,
            )
            updated.append(d_w)
            if j:
                below = builder.tensor(
                    f"{tag}.conv{j}.dx", TensorKind.GRADIENT, k * p2 * net.channels
                )
                builder.gemm(
                    f"{tag}.conv{j}.dx",
                    layer,
                    Phase.AUX,
                    m=k * p2,
                    n=net.channels,
                    k=9 * net.channels,
                    count=1,
                    a=grad,
                    b=convs[j],
                    c=below,
                    unit=self.unit,
                )
                grad = below
        adam = OptimizerKind.ADAM
        for d_w, w in zip(updated, [fc, *reversed(convs)], strict=True):
            states = [
                builder.tensor(f"{w.name}.state{i}", TensorKind.OPTIMIZER_STATE, d_w.elements)
                for i in range(adam.state_tensors)
            ]
            part = Tensor(w.name, w.kind, d_w.elements, w.word_bytes)
            builder.vector(
                f"{tag}.{w.name.rpartition('.')[0].rpartition('.')[2]}.update",
                layer,
                Phase.AUX,
                d_w.elements,
                adam.ops_per_element,
                [part, d_w, *states],
                [part, *states],
            )


class _BpHooks(StepHooks):
    """BP step: predictor inference after each forward, training after each backward."""

    def __init__(self, predictor: _Predictor) -> None:
        self.predictor = predictor
        self.pending: dict[str, tuple[Tensor, list[Tensor], int, int]] = {}

    def after_forward(self, builder: GraphBuilder, view: LayerView) -> None:
        for parameter in view.parameters:
            shape = predicted_shape(view.info.layer, parameter)
            if shape is not None:
                predicted, _, acts = self.predictor.infer(builder, view, parameter, *shape)
                self.pending[parameter.weight.name] = (predicted, acts, *shape)

    def after_backward(self, builder: GraphBuilder, view: LayerView) -> None:
        for parameter in view.parameters:
            saved = self.pending.pop(parameter.weight.name, None)
            if saved is not None:
                predicted, acts, k, o = saved
                self.predictor.train(builder, view, parameter, predicted, acts, k, o)


class _GpHooks(StepHooks):
    """GP step: forward only; each predicted weight is updated with its prediction."""

    backward = False

    def __init__(self, predictor: _Predictor) -> None:
        self.predictor = predictor

    def after_forward(self, builder: GraphBuilder, view: LayerView) -> None:
        for parameter in view.parameters:
            shape = predicted_shape(view.info.layer, parameter)
            if shape is not None:
                predicted, op, _ = self.predictor.infer(builder, view, parameter, *shape)
                view.set_gradient(parameter, predicted, op)


class GradientPrediction(Technique):
    """ADA-GP as a plug-in: a predictor unit, BP and GP steps, a training schedule."""

    name = "gradient_prediction"
    Config = GradientPredictionConfig

    @property
    def settings(self) -> GradientPredictionConfig:
        assert isinstance(self.config, GradientPredictionConfig)
        return self.config

    def add_components(self, hw: HardwareSpec) -> Sequence[ArrayUnit]:
        cfg = self.settings
        if cfg.placement is Placement.SHARED:
            return ()
        a = cfg.array
        words = hw.word_bytes
        need = a.rows * a.cols * max(words.activations, words.weights, words.gradients)
        for key in ("ifmap_kib", "filter_kib", "ofmap_kib"):
            if kib_to_bytes(getattr(a, key)) < need:
                raise ConfigError.single(
                    self.source,
                    f"techniques.{self.name}.array.{key}",
                    f"too small for one {a.rows}x{a.cols} tile (needs >= {need / 1024:g} KiB)",
                    getattr(a, key),
                )
        spec = ArraySpec(rows=a.rows, cols=a.cols, dataflow=a.dataflow, precision=a.precision)
        sizes = (kib_to_bytes(a.ifmap_kib), kib_to_bytes(a.filter_kib), kib_to_bytes(a.ofmap_kib))
        return (ArrayUnit(PREDICTOR, spec, *sizes),)

    def step_kinds(self, ctx: TechniqueContext) -> Mapping[str, StepHooks]:
        predictor = _Predictor(self.settings, _largest_output(ctx))
        return {"bp": _BpHooks(predictor), "gp": _GpHooks(predictor)}

    def training(
        self, ctx: TechniqueContext, base: RunResult, steps: Mapping[str, RunResult]
    ) -> dict[str, Any]:
        epochs = ctx.run.training.epochs
        batches = ctx.run.training.batches_per_epoch
        fractions = gp_fractions(self.settings.schedule, epochs, self._errors(ctx, epochs))
        bp, gp = steps["bp"], steps["gp"]
        gp_share = sum(fractions) / epochs

        def whole(per_step: Mapping[str, float]) -> dict[str, float]:
            technique = batches * sum(
                (1 - g) * per_step["bp"] + g * per_step["gp"] for g in fractions
            )
            return {"baseline": epochs * batches * per_step["base"], "technique": technique}

        def of(result: RunResult) -> dict[str, float]:
            s = result.summary()
            return {
                "cycles": s["total_cycles"],
                "energy_pj": s["energy_pj"]["total"],
                "dram_bytes": s["dram_bytes"]["total"],
            }

        per_kind = {"base": of(base), "bp": of(bp), "gp": of(gp)}
        layers = {info.layer.name: info for info in ctx.infos}
        totals = {
            metric: whole({k: v[metric] for k, v in per_kind.items()})
            for metric in ("cycles", "energy_pj", "dram_bytes")
        }
        return {
            "technique": self.name,
            "epochs": epochs,
            "batches_per_epoch": batches,
            "policy": self.settings.schedule.policy.value,
            "placement": self.settings.placement.value,
            "steps": per_kind,
            "gp_fraction": gp_share,
            "gp_fraction_by_epoch": fractions,
            "cycles": totals["cycles"],
            "energy_pj": totals["energy_pj"],
            "dram_bytes": totals["dram_bytes"],
            "speedup": totals["cycles"]["baseline"] / totals["cycles"]["technique"],
            "energy_reduction": 1
            - totals["energy_pj"]["technique"] / totals["energy_pj"]["baseline"],
            "dram_reduction": 1
            - totals["dram_bytes"]["technique"] / totals["dram_bytes"]["baseline"],
            "predictor": {
                "bp": _predictor_use(base, bp, self.settings.placement),
                "gp": _predictor_use(None, gp, self.settings.placement),
                "layers": [
                    predictor_layer_cost(
                        self.settings.network, layers[p.layer], p, ctx.run.batch_size
                    )
                    for p in base.graph.parameters
                    if predicted_shape(layers[p.layer].layer, p) is not None
                ],
            },
        }

    def _errors(self, ctx: TechniqueContext, epochs: int) -> list[float]:
        schedule = self.settings.schedule
        if schedule.error_trace is None:
            return [
                schedule.floor + (1 - schedule.floor) * math.exp(-e / schedule.decay_epochs)
                for e in range(epochs)
            ]
        return read_error_trace(ctx.run_file.parent / schedule.error_trace, epochs, self.source)


def _largest_output(ctx: TechniqueContext) -> int:
    """Per-channel gradient size of the largest predicted layer (sizes the FC layer)."""
    builder = GraphBuilder(ctx.hardware.word_bytes)
    step = builder.lower_step(ctx.infos, ctx.workload, 1, ctx.run.lowering.strided_dx)
    layers = {info.layer.name: info.layer for info in ctx.infos}
    shapes = [predicted_shape(layers[p.layer], p) for p in step.parameters]
    return max((o for shape in shapes if shape is not None for _, o in [shape]), default=1)


def _predictor_use(base: RunResult | None, step: RunResult, placement: Placement) -> dict[str, Any]:
    """Predictor MACs, array busy time, energy and (for BP) how much of it is hidden."""
    c = step.trace.costs
    aux = [op.phase is Phase.AUX for op in step.graph.ops]
    durations = step.trace.end_cycle - step.trace.start_cycle
    busy = sum(
        int(durations[op.op_id])
        for op in step.graph.ops
        if op.phase is Phase.AUX and isinstance(op, GemmOp)
    )
    use: dict[str, Any] = {
        "macs": int(sum(int(m) for m, a in zip(c.macs, aux, strict=True) if a)),
        "busy_cycles": busy,
        "energy_pj": float(sum(float(e) for e, a in zip(step.energy.op_pj, aux, strict=True) if a)),
    }
    if base is not None:
        overhead = step.total_cycles - base.total_cycles
        use["overhead_cycles"] = overhead
        use["overhead_fraction"] = overhead / max(base.total_cycles, 1)
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


def read_error_trace(path: Path, epochs: int, source: str) -> list[float]:
    """Mean predictor error per epoch from a ``epoch,batch,predictor_error`` CSV.

    Raises:
        ConfigError: if the file is missing, malformed or lacks an epoch.
    """
    where = "techniques.gradient_prediction.schedule.error_trace"
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
    except OSError as exc:
        raise ConfigError.single(
            source, where, f"cannot read the error trace: {exc.strerror}", str(path)
        ) from None
    sums: dict[int, list[float]] = {}
    for line, row in enumerate(rows, start=2):
        try:
            epoch, error = int(row["epoch"]), float(row["predictor_error"])
        except (KeyError, TypeError, ValueError):
            raise ConfigError.single(
                source,
                where,
                f"line {line}: expected columns epoch, batch, predictor_error with numbers",
                str(path),
            ) from None
        sums.setdefault(epoch, []).append(error)
    missing = [e for e in range(epochs) if e not in sums]
    if missing:
        raise ConfigError.single(
            source,
            where,
            f"no errors for epoch {missing[0]} (epochs are"
            f" counted from 0; the run trains {epochs})",
            str(path),
        )
    return [sum(sums[e]) / len(sums[e]) for e in range(epochs)]
