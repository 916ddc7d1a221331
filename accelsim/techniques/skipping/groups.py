"""Which parameter groups a step skips, and the step graph without their weight
gradients (nor the backward ops nothing trained needs any more)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from accelsim.config.hardware import WordBytesSpec
from accelsim.graph import passes
from accelsim.graph.ops import GemmOp, OpGraph, Parameter, ParamKind, Phase, Stage, replaced
from accelsim.lowering.rules import rule_for
from accelsim.lowering.shapes import LayerInfo
from accelsim.techniques.skipping.config import NAME, Grouping


@dataclasses.dataclass(frozen=True)
class _Kept:
    """What remains of one parameter's gradient: the dimensions of its ``dW`` GEMM that
    shrink (none to keep it whole), its groups and how many are kept (0: skipped; -1:
    not grouped, kept unmonitored) and the updated elements."""

    shrink: Mapping[str, int]
    groups: int
    kept: int
    updated_elements: int


def skip_groups(
    graph: OpGraph,
    fraction: float | Mapping[str, float],
    grouping: Grouping,
    infos: Mapping[str, LayerInfo],
    words: WordBytesSpec,
    keep_dx: bool = False,
) -> OpGraph:
    """``graph`` with ``fraction`` of its parameter groups' weight gradients skipped
    (one share for every layer, or a share per layer; a layer missing from the
    mapping skips nothing).

    Kept groups are monitored; the backward ops nothing trained needs any more
    are removed (but every ``dX`` op stays if ``keep_dx``).
    """
    kept = plan_groups(graph, fraction, grouping, infos)
    grad_ops = {p.grad_op for p in graph.parameters if kept[p.weight.name].kept}
    live = _live(graph, grad_ops, keep_dx)
    rewritten, ids = passes.rewrite(graph, words, drop=lambda op: op.op_id not in live)
    ops = list(rewritten.ops)
    parameters = []
    for old, new in zip(graph.parameters, rewritten.parameters, strict=True):
        k = kept[old.weight.name]
        if k.kept < 0:
            parameters.append(new)
            continue
        if not k.kept or new.grad_op < 0:
            parameters.append(dataclasses.replace(new, grad_op=-1))
            continue
        if k.shrink:
            (i,) = ids[old.grad_op]
            ops[i] = replaced(ops[i], **k.shrink)
        parameters.append(
            dataclasses.replace(
                new,
                updated_elements=k.updated_elements,
                monitor_groups=k.kept,
                monitor_owner=NAME,
            )
        )
    return dataclasses.replace(rewritten, ops=tuple(ops), parameters=tuple(parameters))


def plan_groups(
    graph: OpGraph,
    fraction: float | Mapping[str, float],
    grouping: Grouping,
    infos: Mapping[str, LayerInfo],
) -> dict[str, _Kept]:
    trained = [p for p in graph.parameters if p.grad_op >= 0]
    plan = {p.weight.name: _Kept({}, 0, 0, 0) for p in graph.parameters}

    def share(layer: str) -> float:
        return fraction.get(layer, 0.0) if isinstance(fraction, Mapping) else fraction

    if grouping is Grouping.LAYER:
        layers = list(dict.fromkeys(p.layer for p in trained))
        if isinstance(fraction, Mapping):
            skipped = {layer for layer in layers if share(layer) >= 0.5}
        else:
            skipped = set(layers[: skipped_count(fraction, len(layers))])
        for p in trained:
            keep = 0 if p.layer in skipped else 1
            plan[p.weight.name] = _Kept({}, 1, keep, p.update_elements * keep)
        return plan
    for p in trained:
        op = graph.ops[p.grad_op]
        width = _column_width(p, op, infos[p.layer]) if isinstance(op, GemmOp) else None
        if not isinstance(op, GemmOp) or width is None:
            plan[p.weight.name] = _Kept({}, 0, -1, p.update_elements)
            continue
        groups = op.m if grouping is Grouping.FILTER else op.n // width
        keep = groups - skipped_count(share(p.layer), groups)
        shrink: dict[str, int] = {}
        if 0 < keep < groups and grouping is Grouping.FILTER:
            shrink = {"m": keep, "a_elements": op.a_elements * keep // groups}
        elif 0 < keep < groups:
            shrink = {"n": keep * width, "b_elements": op.b_elements * keep // groups}
        updated = p.update_elements * keep // groups
        plan[p.weight.name] = _Kept(shrink, groups * op.count, keep * op.count, updated)
    return plan


def grouped_layers(infos: Sequence[LayerInfo], grouping: Grouping) -> list[str]:
    """The layers whose parameters ``grouping`` groups, in network order: those whose
    weight gradient groups by input (a conv's, a linear layer's) for ``filter`` and
    ``row``, every layer with parameters for ``layer``."""
    out = []
    for info in infos:
        rule = rule_for(info.layer)
        if rule.has_params and (
            grouping is Grouping.LAYER or rule.dw_columns_per_input(info) is not None
        ):
            out.append(info.layer.name)
    return out


def skipped_count(fraction: float, groups: int) -> int:
    """How many of ``groups`` a step skips: the expected count, rounded half up."""
    return math.floor(fraction * groups + 0.5)


def _column_width(p: Parameter, op: GemmOp, info: LayerInfo) -> int | None:
    """Columns of the ``dW`` GEMM per input channel, from the layer's rule (None: not a
    grouped weight).  The groups are counted on the GEMM as it is now, which another
    technique may already have compacted (approximate dropout's kept inputs)."""
    if p.kind is not ParamKind.WEIGHT or op.c.key != p.gradient.key:
        return None
    width = rule_for(info.layer).dw_columns_per_input(info)
    return width if width is not None and op.n % width == 0 else None


def _live(graph: OpGraph, grad_ops: set[int], keep_dx: bool) -> set[int]:
    """Ops still needed: everything outside the backward stage, a technique's auxiliary
    ops, the kept gradients' ops (and the ``dX`` ops if ``keep_dx``) and every op of
    the backward stage whose output a needed op reads."""
    live: set[int] = set()
    for op in reversed(graph.ops):
        root = op.stage is not Stage.BACKWARD or op.phase is Phase.AUX
        root = root or (keep_dx and op.phase is Phase.BWD_INPUT)
        if root or op.op_id in grad_ops or op.op_id in live:
            live.add(op.op_id)
            live.update(d for group in op.sources for d in group)
            live.update(op.after)
    return live
