"""The predictor's ops in a step graph: inference after each layer's forward pass and,
in a BP step, training after its backward pass; a GP step without its backward pass."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from accelsim.config.hardware import WordBytesSpec
from accelsim.graph import passes, queries
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import Op, OpGraph, Parameter, Stage, Tensor
from accelsim.lowering.shapes import LayerInfo
from accelsim.techniques.prediction.predictor import LayerOutput, Predictor, predicted_shape


class PredictorRewrite:
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
