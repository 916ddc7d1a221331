"""What a step recomputes: the blocks read off the layer graph, the segments a policy
recomputes from one kept input, attention's score and softmax ops, and the forward ops
whose outputs the backward stage then reads again computed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from accelsim.graph import queries
from accelsim.graph.ops import GemmOp, Op, OpGraph, TensorKey, TensorKind, VectorOp
from accelsim.lowering.shapes import LayerInfo
from accelsim.techniques.recomputation.config import Policy
from accelsim.workload import model as wm


def cuts(infos: Sequence[LayerInfo]) -> list[str]:
    """The layers every later path passes through, in network order: a layer is one when
    no layer after it reads what a layer before it (or one of the step's inputs) made."""
    last_read: dict[str, int] = {}
    for i, info in enumerate(infos):
        for source in info.inputs:
            last_read[source] = max(last_read.get(source, -1), i)
    made = {info.layer.name for info in infos}
    # The last read of anything made so far: the model's inputs (no layer makes them).
    reach = max((at for name, at in last_read.items() if name not in made), default=-1)
    out = []
    for i, info in enumerate(infos):
        if reach <= i:
            out.append(info.layer.name)
        reach = max(reach, last_read.get(info.layer.name, -1))
    return out


def segments(infos: Sequence[LayerInfo], every: int) -> dict[str, int]:
    """Each layer's segment: the blocks between one kept cut and the next, ``every``
    blocks to a segment."""
    ends = set(cuts(infos))
    out: dict[str, int] = {}
    segment = blocks = 0
    for info in infos:
        out[info.layer.name] = segment
        if info.layer.name in ends:
            blocks += 1
            segment += blocks % every == 0
    return out


def score_ops(graph: OpGraph, infos: Sequence[LayerInfo]) -> dict[int, int]:
    """Every attention layer's score and softmax ops (by op id, with the layer's index):
    in its forward work, its first GEMM of two activations (``QK^T``) and the vector
    ops after it up to its next GEMM (the causal mask, the softmax); none of a fused
    attention kernel, whose scores never leave the chip (``lowering.compile: fused``:
    there is nothing of them to drop from the stash)."""
    attention = {info.layer.name: info.index for info in infos if attends(info)}
    work: dict[str, list[Op]] = {}
    for op in graph.ops:
        if op.layer in attention and queries.forward_work(op):
            work.setdefault(op.layer, []).append(op)
    out = {}
    for layer, ops in work.items():
        first = next((k for k, op in enumerate(ops) if _scores(op)), len(ops))
        if first < len(ops) and _on_chip(graph, ops[first]):
            continue
        for op in ops[first:]:
            if isinstance(op, GemmOp) and op is not ops[first]:
                break
            out[op.op_id] = attention[layer]
    return out


def _on_chip(graph: OpGraph, op: Op) -> bool:
    """Whether everything ``op`` writes stays on chip."""
    return all(a.tensor.key in graph.on_chip for a in queries.writes_of(op))


def _scores(op: Op) -> bool:
    """Whether ``op`` is a GEMM of two activations (attention's ``QK^T``)."""
    return isinstance(op, GemmOp) and op.a.kind is op.b.kind is TensorKind.ACTIVATION


def attends(info: LayerInfo) -> bool:
    """Whether the layer is an attention layer (``selective`` recomputes its scores)."""
    return isinstance(info.layer, wm.Attention)


@dataclass(frozen=True)
class Plan:
    """What one step graph recomputes: the forward ops of each segment (in forward order)
    and the tensors (their keys) whose backward reads move to the new version."""

    groups: tuple[tuple[int, ...], ...]
    tensors: frozenset[TensorKey]


def choose(graph: OpGraph, infos: Sequence[LayerInfo], policy: Policy, every: int) -> Plan:
    """The ops ``graph`` recomputes under ``policy`` (the policies and what they recompute:
    :mod:`accelsim.techniques.recomputation.technique`)."""
    ops = graph.ops
    if policy is Policy.SELECTIVE:
        segment_of = score_ops(graph, infos)
        layer_segment: dict[str, int] = {}
    else:
        layer_segment = segments(infos, 1 if policy is Policy.FULL else every)
        segment_of = {
            op.op_id: layer_segment[op.layer]
            for op in ops
            if queries.forward_work(op) and op.layer in layer_segment
        }
    writers: dict[TensorKey, int] = {}  # how many ops write each tensor
    for op in ops:
        for a in queries.writes_of(op):
            writers[a.tensor.key] = writers.get(a.tensor.key, 0) + 1
    candidates = {
        i: s
        for i, s in segment_of.items()
        if isinstance(ops[i], (GemmOp, VectorOp))
        and not _reads_view(ops[i], writers)
        and all(writers[a.tensor.key] == 1 for a in queries.writes_of(ops[i]))
    }
    maker = {a.tensor.key: i for i in candidates for a in queries.writes_of(ops[i])}
    kept = {
        a.tensor.key
        for op in ops
        if queries.forward_work(op) and op.layer in layer_segment
        for a in queries.reads_of(op)
        if a.tensor.key in maker and layer_segment[op.layer] > candidates[maker[a.tensor.key]]
    }
    need = [t.key for t in queries.stashed_tensors(ops) if t.key in maker and t.key not in kept]
    chosen: set[int] = set()
    while need:
        i = maker[need.pop()]
        if i not in chosen:
            chosen.add(i)
            need += [
                a.tensor.key
                for a in queries.reads_of(ops[i])
                if a.tensor.key in maker and a.tensor.key not in kept
            ]
    groups: dict[int, list[int]] = {}
    for i in sorted(chosen):
        groups.setdefault(candidates[i], []).append(i)
    tensors = frozenset(
        a.tensor.key for i in chosen for a in queries.writes_of(ops[i]) if a.tensor.key not in kept
    )
    return Plan(tuple(tuple(g) for _, g in sorted(groups.items())), tensors)


def _reads_view(op: Op, written: Mapping[TensorKey, int]) -> bool:
    """Whether ``op`` reads a view: a tensor no op writes whose readers wait for its
    parts' makers."""
    return any(
        sources and a.tensor.key not in written
        for a, sources in zip(queries.reads_of(op), op.sources, strict=False)
    )
