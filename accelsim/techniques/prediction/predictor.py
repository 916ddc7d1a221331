"""ADA-GP's gradient predictor: its ops per predicted layer and its cost in closed form.

See :mod:`accelsim.techniques.prediction.technique` for the technique and the
provenance of the predictor's shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import Field

from accelsim.config.base import PositiveInt, Spec
from accelsim.config.enums import VectorClass
from accelsim.config.hardware import WordBytesSpec
from accelsim.config.run import OptimizerKind
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import Parameter, ParamKind, Phase, Tensor, TensorKind
from accelsim.lowering.optimizer import UPDATE_CLASS
from accelsim.lowering.shapes import LayerInfo, Layout, Shape

MSE_OPS = 3  # difference, square, scale (the gradient of the squared error)


class PredictorNetSpec(Spec):
    """The predictor network [R]: pool to ``pool`` x ``pool``, ``conv_layers`` 3x3
    convs of ``channels`` channels, one FC layer per output-channel sample.

    Layers with fewer than ``pool**2`` values per output channel (a linear
    layer's output has one) feed the predictor what they have [D].
    """

    pool: PositiveInt = Field(
        default=4, description="Each output channel's activations are pooled to pool x pool."
    )
    conv_layers: PositiveInt = Field(default=2, description="3x3 convolutions of the predictor.")
    channels: PositiveInt = Field(default=64, description="Channels of each predictor convolution.")


def predicted_shape(parameter: Parameter) -> tuple[int, int] | None:
    """``(K, O)``: output channels and per-channel gradient size of a predicted weight.

    Only layers' weight matrices are predicted (conv, linear, LSTM, attention);
    None for biases, norm parameters and embedding tables.
    """
    if parameter.kind is not ParamKind.WEIGHT:
        return None
    return parameter.rows, parameter.weight.elements // parameter.rows


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


def conv_taps(pooled: int) -> int:
    """Filter taps a 3x3 predictor conv multiplies: the centre one alone on a 1x1 map
    (a layer with no spatial extent, such as a linear layer), else all nine."""
    return 1 if pooled == 1 else 9


def predictor_layer_cost(
    net: PredictorNetSpec, info: LayerInfo, parameter: Parameter, batch: int
) -> dict[str, Any]:
    """The predictor's work for one predicted weight, in closed form (per replica step).

    Forward (inference) MACs are ``K p (t h + (c - 1) t h^2) + K h p O`` with
    ``p`` the pooled values per channel and ``t`` the taps of a 3x3 conv on them
    (:func:`conv_taps`); training adds every GEMM's backward
    (dW and dX) except the first conv's dX.  Weight bytes count the conv
    weights and the FC slice this layer uses; activation bytes the predictor's
    input and conv outputs.
    """
    shape = predicted_shape(parameter)
    assert shape is not None
    k, o = shape
    p = pooled_size(info.out_shape, net.pool)
    h, c, t = net.channels, net.conv_layers, conv_taps(p)
    conv0 = k * p * t * h
    convs = conv0 + (c - 1) * k * p * t * h * h
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
        "weight_bytes": word * (t * h + (c - 1) * t * h * h + h * p * o),
        "activation_bytes": word * k * p * (1 + c * h),
    }


@dataclass(frozen=True)
class PredictorStorage:
    """The predictor's weight tensors (elements by name), the bytes each takes with its
    Adam state, and which stay in the predictor's weight SRAM.

    Attributes:
        largest_output: The largest predicted layer's per-channel gradient, which
            sizes the FC layer.
    """

    largest_output: int
    elements: dict[str, int]
    footprint_bytes: dict[str, int]
    resident: frozenset[str]
    sram_bytes: int

    @classmethod
    def of(
        cls, net: PredictorNetSpec, largest_output: int, words: WordBytesSpec, sram_bytes: int
    ) -> PredictorStorage:
        """Fill ``sram_bytes`` with whole tensors (and their state), smallest first."""
        elements = {"predictor.fc.W": net.channels * net.pool**2 * largest_output}
        for j in range(net.conv_layers):
            elements[f"predictor.conv{j}.W"] = 9 * net.channels * (1 if j == 0 else net.channels)
        per_element = words.weights + OptimizerKind.ADAM.state_tensors * words.optimizer_state
        footprint = {name: n * per_element for name, n in elements.items()}
        resident: set[str] = set()
        free = sram_bytes
        for name in sorted(footprint, key=lambda n: (footprint[n], n)):
            if footprint[name] <= free:
                resident.add(name)
                free -= footprint[name]
        return cls(largest_output, elements, footprint, frozenset(resident), sram_bytes)

    def report(self) -> dict[str, Any]:
        """Footprint, SRAM size and what stays resident, for the training report."""
        return {
            "footprint_bytes": sum(self.footprint_bytes.values()),
            "sram_bytes": self.sram_bytes,
            "resident_bytes": sum(self.footprint_bytes[n] for n in self.resident),
            "resident": sorted(self.resident),
            "streamed": sorted(set(self.elements) - self.resident),
        }


@dataclass(frozen=True)
class LayerOutput:
    """A layer whose weights are predicted, as the predictor sees it: its shapes, the
    output tensor it reads, and the tensors the layer's forward ops write (its output,
    or the parts its output is a view of, such as an LSTM's hidden state at each
    step): the predictor starts when they are all made."""

    info: LayerInfo
    output: Tensor
    made: tuple[Tensor, ...]


class Predictor:
    """Emits the predictor's ops for one layer (shared by BP and GP steps)."""

    def __init__(self, net: PredictorNetSpec, unit: str, storage: PredictorStorage) -> None:
        self.net = net
        self.unit = unit
        self.storage = storage

    def _weight(self, builder: GraphBuilder, name: str) -> Tensor:
        tensor = builder.tensor(name, TensorKind.WEIGHT, self.storage.elements[name])
        return builder.keep_on_chip(tensor) if name in self.storage.resident else tensor

    def weights(self, builder: GraphBuilder) -> tuple[Tensor, list[Tensor]]:
        """The predictor's FC weights (sized for the largest layer) and conv weights;
        those its weight SRAM holds never travel to DRAM."""
        fc = self._weight(builder, "predictor.fc.W")
        convs = [self._weight(builder, f"predictor.conv{j}.W") for j in range(self.net.conv_layers)]
        return fc, convs

    def infer(
        self, builder: GraphBuilder, view: LayerOutput, parameter: Parameter, k: int, o: int
    ) -> tuple[Tensor, int, list[Tensor]]:
        """Predict ``parameter``'s gradient; return it, the op that made it, and activations."""
        net, layer = self.net, view.info.layer.name
        p2 = pooled_size(view.info.out_shape, net.pool)
        tag = f"{parameter.weight.name}.predictor"
        sample = builder.tensor(f"{tag}.input", TensorKind.ACTIVATION, k * p2)
        # Batch averaging and pooling read the layer's output as it leaves the
        # array (on chip), one op per element, once the layer has produced it.
        fresh = builder.keep_on_chip(
            builder.tensor(
                f"{view.output.name}.to_predictor", TensorKind.ACTIVATION, view.output.elements
            )
        )
        builder.alias(fresh, view.made)
        builder.vector(
            f"{tag}.average", layer, Phase.AUX, view.output.elements, 1, [fresh], [sample],
            op_class=VectorClass.REDUCE,
        )  # fmt: skip
        fc, convs = self.weights(builder)
        x = sample
        activations = [sample]
        taps = conv_taps(p2)
        for j, w in enumerate(convs):
            y = builder.tensor(f"{tag}.conv{j}", TensorKind.ACTIVATION, k * p2 * net.channels)
            fan_in = taps * (1 if j == 0 else net.channels)
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
        # the parameter's gradient, predicted (a GP step updates the weight with it)
        predicted = builder.tensor(
            f"{tag}.gradient", TensorKind.GRADIENT, k * o, parameter.weight.step_name
        )
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
        view: LayerOutput,
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
        fc, convs = self.weights(builder)
        d_out = builder.tensor(f"{tag}.d_gradient", TensorKind.GRADIENT, k * o)
        builder.vector(
            f"{tag}.loss",
            layer,
            Phase.AUX,
            k * o,
            MSE_OPS,
            [predicted, parameter.gradient],
            [d_out],
            op_class=VectorClass.ELEMENTWISE,
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
        updated += self._train_convs(
            builder, layer, tag, convs, activations, grad, (k * p2, conv_taps(p2))
        )
        self._adam_updates(
            builder, layer, tag, updated, [fc, *reversed(convs)], self.storage.resident
        )

    def _train_convs(
        self,
        builder: GraphBuilder,
        layer: str,
        tag: str,
        convs: list[Tensor],
        activations: list[Tensor],
        grad: Tensor,
        shape: tuple[int, int],
    ) -> list[Tensor]:
        """Back-propagate ``grad`` through the predictor's convs, last first; their dW.

        ``shape`` is the conv GEMMs' positions and taps; with one tap only the
        centre ninth of each filter gets a gradient.
        """
        channels = self.net.channels
        positions, taps = shape
        updated = []
        for j in reversed(range(len(convs))):
            fan_in = taps * (1 if j == 0 else channels)
            d_w = builder.tensor(
                f"{convs[j].name}.d", TensorKind.GRADIENT, convs[j].elements * taps // 9
            )
            builder.gemm(
                f"{tag}.conv{j}.dw",
                layer,
                Phase.AUX,
                m=channels,
                n=fan_in,
                k=positions,
                count=1,
                a=grad,
                b=activations[j],
                c=d_w,
                unit=self.unit,
            )
            updated.append(d_w)
            if j:
                below = builder.tensor(
                    f"{tag}.conv{j}.dx", TensorKind.GRADIENT, positions * channels
                )
                builder.gemm(
                    f"{tag}.conv{j}.dx",
                    layer,
                    Phase.AUX,
                    m=positions,
                    n=channels,
                    k=taps * channels,
                    count=1,
                    a=grad,
                    b=convs[j],
                    c=below,
                    unit=self.unit,
                )
                grad = below
        return updated

    @staticmethod
    def _adam_updates(
        builder: GraphBuilder,
        layer: str,
        tag: str,
        gradients: list[Tensor],
        weights: list[Tensor],
        resident: frozenset[str],
    ) -> None:
        """The predictor's own Adam updates, of the part of each weight this layer used
        (its state stays on chip with a resident weight)."""
        adam = OptimizerKind.ADAM
        for d_w, w in zip(gradients, weights, strict=True):
            states = [
                builder.tensor(f"{w.name}.state{i}", TensorKind.OPTIMIZER_STATE, d_w.elements)
                for i in range(adam.state_tensors)
            ]
            if w.name in resident:
                states = [builder.keep_on_chip(t) for t in states]
            part = Tensor(w.name, w.kind, d_w.elements, w.word_bytes)
            builder.vector(
                f"{tag}.{w.name.rpartition('.')[0].rpartition('.')[2]}.update",
                layer,
                Phase.AUX,
                d_w.elements,
                adam.ops_per_element,
                [part, d_w, *states],
                [part, *states],
                op_class=UPDATE_CLASS[adam],
            )
