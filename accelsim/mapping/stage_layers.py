"""A micro-batch's step graph summed by layer, once per graph, so that the stages of
every cut of it into a pipeline (:func:`~accelsim.mapping.pipeline_memory.stage_parts`)
are counted from its layers instead of from its ops again.

A cut's chunks and stages are sets of whole layers, and what
:func:`~accelsim.mapping.memory.memory_classes` and
:func:`~accelsim.graph.queries.stashed_tensors` count of a set of ops depends on the
ops only through their layers: a stash holds each activation some backward op of the
set reads and none writes (:class:`LayerFacts` keeps, by tensor, the layers whose
backward ops read it and write it); a stage keeps the parameters of its layers and
those its layers read; its largest reduce is its layers' largest; and an op's
workspace depends on the stage only through which of the tensors it reads or writes
the stage holds (a parameter's weight or gradient, or its stash), so each layer's
largest workspace is counted once per set of its tensors held.  The counts are those
of the ops themselves (``tests/planner/test_filter_reference.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from accelsim.graph.memo import per_graph
from accelsim.graph.ops import CommOp, OpGraph, Parameter, Stage, TensorKey, TensorKind
from accelsim.graph.queries import reads_of, writes_of

Parts = tuple[tuple[str, ...], ...]
"""The layers of each of some sets of layers."""


@dataclass(frozen=True)
class Stashable:
    """An activation some backward op reads: the first read of it in each layer that
    reads it (the layer and the bytes of the tensor read), in the order of the ops,
    and the layers whose backward ops write it."""

    key: TensorKey
    reads: tuple[tuple[str, int], ...]
    writers: frozenset[str]


@dataclass(frozen=True)
class LayerFacts:
    """What the memory of a set of layers' ops reads of them (the module's rules)."""

    stashable: tuple[Stashable, ...]
    weight_readers: dict[TensorKey, frozenset[str]]
    """The layers whose ops read each parameter's weight."""
    reduce_bytes: dict[str, int]
    """Each layer's largest tensor a collective of it sums or delivers."""
    work: dict[str, tuple[tuple[int, tuple[tuple[TensorKey, int], ...]], ...]]
    """Each layer's ops but collectives: the bytes an op reads and writes of tensors
    no set of layers holds, and those of the tensors one may hold, by key."""
    holdable: dict[str, frozenset[TensorKey]]
    """The keys of each layer's tensors that a set of layers may hold."""
    largest_work: dict[tuple[str, frozenset[TensorKey]], int] = field(default_factory=dict)
    """Each layer's largest workspace by the set of its tensors held (filled as used)."""
    stashed: dict[Parts, tuple[list[int], list[set[TensorKey]]]] = field(default_factory=dict)
    """Each division of the layers into sets' stashes (filled as used: the cuts of a
    search into as many chunks share their chunks, and a cut of one chunk a stage its
    stages)."""


def layer_facts(step: OpGraph) -> LayerFacts:
    """``step``'s :class:`LayerFacts`, once per graph object."""
    return per_graph(step, "pipeline layer facts", lambda: _facts(step))


def _facts(step: OpGraph) -> LayerFacts:
    reads: dict[TensorKey, dict[str, int]] = {}
    writers: dict[TensorKey, set[str]] = {}
    weight_readers: dict[TensorKey, set[str]] = {p.weight.key: set() for p in step.parameters}
    reduce_bytes: dict[str, int] = {}
    for op in step.ops:
        for a in reads_of(op):
            if a.tensor.key in weight_readers:
                weight_readers[a.tensor.key].add(op.layer)
        if isinstance(op, CommOp):
            reduce_bytes[op.layer] = max(reduce_bytes.get(op.layer, 0), op.tensor.bytes)
        if op.stage is not Stage.BACKWARD:
            continue
        for a in writes_of(op):
            writers.setdefault(a.tensor.key, set()).add(op.layer)
        shard = (op.shard,) if isinstance(op, CommOp) and op.shard is not None else ()
        for t in (*(a.tensor for a in reads_of(op)), *shard):
            if t.kind is TensorKind.ACTIVATION:
                reads.setdefault(t.key, {}).setdefault(op.layer, t.bytes)
    trained = {p.gradient.key for p in step.parameters if p.grad_op >= 0}
    holdable_keys = weight_readers.keys() | trained | reads.keys()
    work: dict[str, list[tuple[int, tuple[tuple[TensorKey, int], ...]]]] = {}
    for op in step.ops:
        if isinstance(op, CommOp):
            continue
        fixed, held = 0, []
        for a in (*reads_of(op), *writes_of(op)):
            if a.tensor.kind is TensorKind.OPTIMIZER_STATE:
                continue
            size = a.elements * a.tensor.word_bytes
            if a.tensor.key in holdable_keys:
                held.append((a.tensor.key, size))
            else:
                fixed += size
        work.setdefault(op.layer, []).append((fixed, tuple(held)))
    return LayerFacts(
        tuple(
            Stashable(key, tuple(by_layer.items()), frozenset(writers.get(key, ())))
            for key, by_layer in reads.items()
        ),
        {key: frozenset(layers) for key, layers in weight_readers.items()},
        reduce_bytes,
        {layer: tuple(ops) for layer, ops in work.items()},
        {layer: frozenset(k for _, held in ops for k, _ in held) for layer, ops in work.items()},
    )


def stashes(facts: LayerFacts, parts: Parts) -> tuple[list[int], list[set[TensorKey]]]:
    """The stash of each set of layers of ``parts``, as
    :func:`~accelsim.graph.queries.stashed_tensors` of its ops counts it: its bytes
    and its tensors' keys (callers must not change them)."""
    found = facts.stashed.get(parts)
    if found is None:
        part_of = {name: part for part, layers in enumerate(parts) for name in layers}
        found = facts.stashed[parts] = _stashes(facts, part_of, len(parts))
    return found


def _stashes(
    facts: LayerFacts, part_of: Mapping[str, int], parts: int
) -> tuple[list[int], list[set[TensorKey]]]:
    total = [0] * parts
    keys: list[set[TensorKey]] = [set() for _ in range(parts)]
    for t in facts.stashable:
        made = {part_of[layer] for layer in t.writers}
        for layer, size in t.reads:
            part = part_of[layer]
            if part not in made and t.key not in keys[part]:
                keys[part].add(t.key)
                total[part] += size
    return total, keys


def kept_parameters(
    parameters: Sequence[Parameter], facts: LayerFacts, part_of: Mapping[str, int], parts: int
) -> list[list[Parameter]]:
    """The parameters each of ``parts`` sets of layers keeps, in order: those of its
    layers and those its layers' ops read."""
    kept: list[list[Parameter]] = [[] for _ in range(parts)]
    for p in parameters:
        owners = {part_of[layer] for layer in facts.weight_readers[p.weight.key]}
        if p.layer in part_of:
            owners.add(part_of[p.layer])
        for part in sorted(owners):
            kept[part].append(p)
    return kept


def reduce_bytes(facts: LayerFacts, layers: Sequence[str]) -> int:
    """The largest tensor a collective of ``layers`` sums or delivers (0: none)."""
    return max((facts.reduce_bytes.get(layer, 0) for layer in layers), default=0)


def workspace_bytes(facts: LayerFacts, layers: Sequence[str], held: set[TensorKey]) -> int:
    """The most one op of ``layers`` (but a collective) reads and writes of tensors
    not in ``held`` and not optimizer state (0: no such op)."""
    most = 0
    for layer in layers:
        ops = facts.work.get(layer)
        if ops is None:
            continue
        mine = facts.holdable[layer] & held
        key = (layer, mine)
        found = facts.largest_work.get(key)
        if found is None:
            found = facts.largest_work[key] = max(
                fixed + sum(size for k, size in rest if k not in mine) for fixed, rest in ops
            )
        most = max(most, found)
    return most
