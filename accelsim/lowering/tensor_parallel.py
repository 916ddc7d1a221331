"""Tensor parallelism as Megatron-LM lowers it (Shoeybi et al., 2019): one rank's step.

A tensor-parallel group of ``t`` processors splits each transformer block:

* **attention** (self-attention): its query heads and key/value heads over the group,
  each rank projecting its heads' Q, K and V (column-parallel) and its heads' share of
  the output projection's input (row-parallel);
* **the MLP**: a *column set* of linear layers reading one input (``fc``, or a gated
  MLP's gate and up projections), the element-wise layers between them and one
  linear layer that reads their result (the *row-parallel* linear, ``proj``): the
  inner dimension over the group;
* **the vocabulary**: the LM head (a linear layer the loss alone reads) and the word
  embedding (tied to it, or else the one embedding whose table is as long as the LM
  head is wide) split by rows of the vocabulary, padded up to a multiple of ``t``;
  the vocabulary-parallel cross entropy then all-reduces three numbers per token (the
  logits' maximum, the target's logit and the sum of exponentials).

These are found in the layer table by kind and by who reads whom, never by name.
The block's output is all-reduced after each row-parallel forward (and after the
embedding's), and the gradient of each column set's input before its backward uses
it (Megatron's ``g`` and ``f``): :class:`TensorLowering` emits these all-reduces as
:class:`~accelsim.graph.ops.CommOp` stand-ins (no participants yet; placement gives
each group its own) and has every later reader of the reduced tensor wait for it.
Norms, residual additions and any layer not in such a set run whole on every rank;
a column set whose layers cannot split (a width ``t`` does not divide, an input
something else reads too) is replicated, and the plan says so.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from accelsim.config.enums import CommGroup
from accelsim.errors import Problem
from accelsim.graph import links
from accelsim.graph.ops import OpGraph, Tensor, TensorKey, TensorKind
from accelsim.graph.queries import reads_of
from accelsim.lowering.context import StepContext
from accelsim.lowering.rules import rule_for
from accelsim.lowering.shapes import LayerInfo, Shape
from accelsim.workload import model as wm

SPLIT_BY_WIDTH = ("activation", "dropout", "mul")
"""Layer kinds that run on a rank's share of the MLP's inner dimension between its
column-parallel and row-parallel linear layers (element-wise)."""

LOSS_ALLREDUCES = 3
"""All-reduces of the vocabulary-parallel cross entropy, one number per token each
(Megatron-LM's ``_VocabParallelCrossEntropy``: the logits' maximum, the target's
logit, the sum of exponentials)."""


class Role(str, Enum):
    """What a layer is in a tensor-parallel group's step."""

    ATTENTION = "attention"  # heads split: column-parallel in, row-parallel out
    COLUMN = "column"  # output features split
    SPLIT = "split"  # element-wise on the split inner dimension
    ROW = "row"  # input features split, output all-reduced
    VOCAB_EMBEDDING = "vocab_embedding"  # table rows split, output all-reduced
    VOCAB_HEAD = "vocab_head"  # output (vocabulary) split
    VOCAB_LOSS = "vocab_loss"  # cross entropy over the split vocabulary


@dataclass(frozen=True)
class TensorPlan:
    """The layers a tensor-parallel group of ``degree`` splits, by :class:`Role`.

    ``replicated`` are the layers with parameters that run whole on every rank
    (norms, and whatever could not be split), ``unsplit`` those among them that a
    column set would have split and could not, each with the reason.
    ``reduced_outputs`` are the layers whose output is all-reduced in forward,
    ``reduced_gradients`` those whose output's gradient is all-reduced in backward.
    With ``sequence``, the layers it does not split run on a ``t``-th of the sequence
    (:mod:`accelsim.lowering.sequence_parallel`).
    """

    degree: int
    roles: dict[str, Role]
    replicated: tuple[str, ...]
    unsplit: tuple[tuple[str, str], ...]
    reduced_outputs: frozenset[str]
    reduced_gradients: frozenset[str]
    sequence: bool = False

    def shard(self, width: int) -> int:
        """A rank's share of ``width`` split over the group (padded up to a multiple)."""
        return -(-width // self.degree)


@dataclass(frozen=True)
class _Set:
    """Layers split together: the columns reading ``source``, the layers between and the
    one that reduces (``ends``: the row-parallel linear, or the loss)."""

    source: str
    columns: tuple[str, ...]
    between: tuple[str, ...]
    ends: tuple[str, ...]
    roles: tuple[Role, Role, Role]


def tensor_problems(infos: Sequence[LayerInfo], degree: int, source: str) -> list[Problem]:
    """Attention layers whose heads (or key/value heads) ``degree`` does not divide: the
    heads are what Megatron-LM splits, so such a plan is refused."""
    problems = []
    for info in infos:
        layer = info.layer
        if isinstance(layer, wm.Attention) and len(info.inputs) == 1:
            for key, heads in (("heads", layer.heads), ("kv_heads", layer.key_value_heads)):
                if heads % degree:
                    problems.append(
                        Problem(
                            source,
                            "parallel.tensor",
                            f"must divide layer {layer.name}'s {heads} {key.replace('_', ' ')}"
                            " (a tensor-parallel group splits attention by heads)",
                            degree,
                        )
                    )
    return problems


def plan_tensor(infos: Sequence[LayerInfo], degree: int, sequence: bool = False) -> TensorPlan:
    """The layers of ``infos`` a tensor-parallel group of ``degree`` splits (heads
    already checked by :func:`tensor_problems`), with ``sequence`` parallelism or not."""
    readers: dict[str, list[LayerInfo]] = defaultdict(list)
    for info in infos:
        for name in dict.fromkeys(info.inputs):
            readers[name].append(info)
    sets, unsplit = _column_sets(infos, readers, degree)
    kept = _kept(sets, readers, unsplit)
    roles: dict[str, Role] = {}
    for found in kept:
        column, between, end = found.roles
        roles |= dict.fromkeys(found.columns, column)
        roles |= dict.fromkeys(found.between, between)
        roles |= dict.fromkeys(found.ends, end)
    embedding = _vocab_embedding(infos, roles)
    if embedding is not None:
        roles[embedding] = Role.VOCAB_EMBEDDING
    outputs = {n for n, r in roles.items() if r in (Role.ROW, Role.ATTENTION)}
    if embedding is not None:
        outputs.add(embedding)
    return TensorPlan(
        degree=degree,
        roles=roles,
        replicated=tuple(
            i.layer.name
            for i in infos
            if rule_for(i.layer).has_params and i.layer.name not in roles
        ),
        unsplit=tuple(unsplit),
        reduced_outputs=frozenset(outputs),
        reduced_gradients=frozenset(s.source for s in kept if s.source in readers),
        sequence=sequence,
    )


def _column_sets(
    infos: Sequence[LayerInfo], readers: dict[str, list[LayerInfo]], degree: int
) -> tuple[list[_Set], list[tuple[str, str]]]:
    """Every attention layer, LM head and MLP the group could split, and the MLPs it
    cannot (with why)."""
    sets: list[_Set] = []
    unsplit: list[tuple[str, str]] = []
    by_name = {i.layer.name: i for i in infos}
    for info in infos:
        layer, name = info.layer, info.layer.name
        if isinstance(layer, wm.Attention) and len(info.inputs) == 1:
            attention = (Role.ATTENTION, Role.ATTENTION, Role.ATTENTION)
            sets.append(_Set(info.inputs[0], (name,), (), (), attention))
        elif isinstance(layer, wm.Linear):
            after = readers.get(name, [])
            if len(after) == 1 and isinstance(after[0].layer, wm.CrossEntropy):
                vocab = (Role.VOCAB_HEAD, Role.SPLIT, Role.VOCAB_LOSS)
                sets.append(_Set(info.inputs[0], (name,), (), (after[0].layer.name,), vocab))
                continue
            found = _mlp(info, by_name, readers)
            if found is None:
                continue
            wide = [c for c in found.columns if _out_features(by_name[c]) % degree]
            if wide:
                why = f"{degree} does not divide {wide[0]}'s {_out_features(by_name[wide[0]])}"
                unsplit += [(n, why) for n in (*found.columns, name)]
            else:
                sets.append(found)
    return sets, unsplit


def _out_features(info: LayerInfo) -> int:
    assert isinstance(info.layer, wm.Linear)
    return info.layer.out_features


def _mlp(
    row: LayerInfo, by_name: dict[str, LayerInfo], readers: dict[str, list[LayerInfo]]
) -> _Set | None:
    """The MLP whose row-parallel linear layer is ``row``: walking back from its input
    through element-wise layers to linear layers that all read one input, every layer
    on the way read only inside the MLP; None when ``row`` ends no such MLP."""
    between: list[str] = []
    columns: list[str] = []
    todo = [row.inputs[0]]
    while todo:
        name = todo.pop()
        info = by_name.get(name)
        if info is None or name in between or name in columns:
            return None
        if isinstance(info.layer, wm.Linear) and info.layer.tied_to is None:
            columns.append(name)
        elif info.layer.kind in SPLIT_BY_WIDTH:
            between.append(name)
            todo += info.inputs
        else:
            return None
    inside = {*between, *columns, row.layer.name}
    sources = {by_name[c].inputs[0] for c in columns}
    if len(sources) != 1 or not between:
        return None
    if any(r.layer.name not in inside for n in (*between, *columns) for r in readers[n]):
        return None
    ordered = tuple(sorted(columns, key=lambda c: by_name[c].index))
    ordered_between = tuple(sorted(between, key=lambda c: by_name[c].index))
    mlp = (Role.COLUMN, Role.SPLIT, Role.ROW)
    return _Set(sources.pop(), ordered, ordered_between, (row.layer.name,), mlp)


def _kept(
    sets: list[_Set], readers: dict[str, list[LayerInfo]], unsplit: list[tuple[str, str]]
) -> list[_Set]:
    """The sets whose input only split sets read (its gradient is then a sum over the
    group, which one all-reduce completes); the others replicated, in ``unsplit``."""
    kept = list(sets)
    while True:
        columns = {c for s in kept for c in s.columns}
        bad = [s for s in kept if any(r.layer.name not in columns for r in readers[s.source])]
        if not bad:
            return kept
        for s in bad:
            why = f"its input {s.source} is read by a layer that does not split"
            unsplit += [(n, why) for n in (*s.columns, *s.between, *s.ends)]
            kept.remove(s)


def _vocab_embedding(infos: Sequence[LayerInfo], roles: dict[str, Role]) -> str | None:
    """The word embedding of a split LM head: the table it is tied to, or else the one
    embedding as long as the head is wide."""
    heads = [i.layer for i in infos if roles.get(i.layer.name) is Role.VOCAB_HEAD]
    if len(heads) != 1:
        return None
    (head,) = heads
    assert isinstance(head, wm.Linear)
    if head.tied_to is not None:
        return head.tied_to
    tables = [
        i.layer.name
        for i in infos
        if isinstance(i.layer, wm.Embedding) and i.layer.num_embeddings == head.out_features
    ]
    return tables[0] if len(tables) == 1 else None


def sharded(infos: Sequence[LayerInfo], plan: TensorPlan) -> list[LayerInfo]:
    """One rank's layer table: each split layer's widths its share (attention keeps its
    shapes: its rule splits its heads, :attr:`StepContext.head_shards`)."""
    return [_sharded(info, plan) for info in infos]


def _narrow(shape: Shape, plan: TensorPlan) -> Shape:
    return Shape(shape.layout, (*shape.dims[:-1], plan.shard(shape.dims[-1])))


def _sharded(info: LayerInfo, plan: TensorPlan) -> LayerInfo:
    role = plan.roles.get(info.layer.name)
    layer = info.layer
    if role in (Role.COLUMN, Role.VOCAB_HEAD):
        assert isinstance(layer, wm.Linear)
        width = plan.shard(layer.out_features)
        return dataclasses.replace(
            info,
            layer=layer.model_copy(update={"out_features": width}),
            out_shape=_narrow(info.out_shape, plan),
        )
    if role is Role.SPLIT:
        shapes = tuple(_narrow(s, plan) for s in info.in_shapes)
        return dataclasses.replace(info, in_shapes=shapes, out_shape=_narrow(info.out_shape, plan))
    if role in (Role.ROW, Role.VOCAB_LOSS):
        first, *rest = info.in_shapes
        return dataclasses.replace(info, in_shapes=(_narrow(first, plan), *rest))
    if role is Role.VOCAB_EMBEDDING:
        assert isinstance(layer, wm.Embedding)
        rows = plan.shard(layer.num_embeddings)
        return dataclasses.replace(info, layer=layer.model_copy(update={"num_embeddings": rows}))
    return info


class TensorLowering:
    """The all-reduces of one rank's step, emitted while it is lowered: call
    :meth:`before_forward` and :meth:`forward_done` before and after each layer's forward
    ops, :meth:`gradient_ready` with each layer's output gradient (it returns the gradient
    the layer's backward reads) and :meth:`before_backward` before its backward ops,
    :meth:`gradients_done` after the backward pass, then :meth:`finish` on the graph."""

    def __init__(self, plan: TensorPlan) -> None:
        self.plan = plan
        self._reduced: list[tuple[int, TensorKey]] = []

    def forward_done(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor]) -> None:
        name = info.layer.name
        if name in self.plan.reduced_outputs:
            self._allreduce(ctx, name, ctx.acts[name])
        elif self.plan.roles.get(name) is Role.VOCAB_LOSS:
            tokens = ctx.n * math.prod(info.in_shapes[0].dims[:-1])
            made = [
                ctx.b.allreduce(
                    f"{name}.stats{j}.allreduce",
                    name,
                    ctx.t(f"{name}.stats{j}", TensorKind.ACTIVATION, tokens),
                    (),
                    ctx.b.producers(ctx.acts[name]),
                    group=CommGroup.TENSOR,
                )
                for j in range(LOSS_ALLREDUCES)
            ]
            self._reduced += [(op, xs[0].key) for op in made]

    def before_forward(self, ctx: StepContext, info: LayerInfo) -> None:
        """Nothing: a tensor-parallel layer reads its input as it is."""

    def gradient_ready(self, ctx: StepContext, info: LayerInfo, g: Tensor) -> Tensor:
        if info.layer.name in self.plan.reduced_gradients:
            self._allreduce(ctx, info.layer.name, g)
        return g

    def before_backward(self, ctx: StepContext, info: LayerInfo, g: Tensor) -> None:
        """Nothing: a tensor-parallel layer's backward reads its stashed input."""

    def gradients_done(self, ctx: StepContext) -> None:
        """Nothing: every parameter's gradient is whole on its rank."""

    def _allreduce(self, ctx: StepContext, layer: str, tensor: Tensor) -> None:
        stand_in = ctx.b.derived(tensor, ".allreduce", tensor.kind, tensor.elements)
        op = ctx.b.allreduce(
            stand_in.name, layer, stand_in, (), ctx.b.producers(tensor), group=CommGroup.TENSOR
        )
        self._reduced.append((op, tensor.key))

    def finish(self, graph: OpGraph) -> OpGraph:
        """``graph`` where every op after an all-reduce that reads the tensor it reduces
        waits for it."""
        by_key: dict[TensorKey, list[int]] = defaultdict(list)
        for comm, key in self._reduced:
            by_key[key].append(comm)
        waits: dict[int, set[int]] = defaultdict(set)
        for op in graph.ops:
            for access in reads_of(op):
                waits[op.op_id].update(c for c in by_key.get(access.tensor.key, ()) if c < op.op_id)
        return links.wait_for(graph, {i: w for i, w in waits.items() if w})
