"""Copies of a step: a tagged copy of a whole graph (:func:`instantiate`) and copies of
a step's ops at other ids (:class:`Relabel`) for replicas and mini-batches, each
tensor copied by a :data:`TensorMap` (:func:`copied_as`, :func:`recopied`) and its key
by :func:`prefixed`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence

from accelsim.graph import queries
from accelsim.graph.ops import (
    NO_TILES,
    Access,
    CommOp,
    GemmOp,
    Op,
    OpGraph,
    Parameter,
    Tag,
    Tensor,
    TensorKey,
    TransferOp,
    VectorOp,
    copier,
    replaced,
)

_LINKS = ("op_id", "deps", "sources", "after", "tag")
_COPY_GEMM = copier(GemmOp, (*_LINKS, "a", "b", "c", "tile_sources"))
_COPY_VECTOR = copier(VectorOp, (*_LINKS, "reads", "writes", "tile_sources"))
_COPY_TENSOR_OP: dict[type, Callable[..., Op]] = {
    cls: copier(cls, (*_LINKS, "tensor")) for cls in (CommOp, TransferOp)
}
_COPY_TENSOR = copier(Tensor, ("name", "tag", "local"))
_COPY_PARAMETER = copier(Parameter, ("weight", "gradient", "grad_op"))


TensorMap = Callable[[Tensor], Tensor]
"""What a copy of a step makes of each of its tensors."""


def copied_as(prefix: str, tag: Tag) -> TensorMap:
    """A step's tensors in its copy ``tag``: tagged ``tag`` and named ``prefix`` and their
    name, which stays their ``local`` name; without a prefix the copy uses the step's
    own tensors."""
    if not prefix:
        return lambda x: x
    return lambda x: _COPY_TENSOR(x, prefix + x.name, tag, x.local or x.name)


def recopied(tag: Callable[[Tag], Tag | None], prefix: Callable[[Tag], str]) -> TensorMap:
    """Tensors of one copy of a step (those whose ``tag`` maps to a tag) in another:
    retagged and named ``prefix(new tag)`` and their ``local`` name; every other
    tensor (one that is no copy, or of another copy) stays as it is."""
    # id of a copy's tag (one object per copy, alive in its tensors) -> new tag and prefix
    moves: dict[int, tuple[Tag, str] | None] = {}

    def move(x: Tensor) -> Tensor:
        local = x.local
        if not local:
            return x
        key = id(x.tag)
        if key not in moves:
            new = tag(x.tag)
            moves[key] = None if new is None else (new, prefix(new))
        found = moves[key]
        return x if found is None else _COPY_TENSOR(x, found[1] + local, found[0], local)

    return move


class Relabel:
    """Copies of one step's ops and parameters for other copies of the step (replicas,
    mini-batches), each op copied once: tagged, its tensors copied, its ids moved.

    Made once per step: it finds the step's distinct tensor objects (by identity: ops
    share them, and hashing a tensor hashes all its fields) and accesses (equal ones
    are one), so that each copy makes one of each, shared by its ops.
    """

    def __init__(self, ops: Sequence[Op], parameters: Sequence[Parameter] = ()) -> None:
        self.ops = ops
        self.parameters = parameters
        self._tensors: list[Tensor] = []
        self._accesses: list[tuple[int, int]] = []  # (tensor index, elements)
        tensor_index: dict[int, int] = {}
        access_index: dict[tuple[int, int], int] = {}

        def t(tensor: Tensor) -> int:
            i = tensor_index.get(id(tensor))
            if i is None:
                i = tensor_index[id(tensor)] = len(self._tensors)
                self._tensors.append(tensor)
            return i

        def a(access: Access) -> int:
            key = (t(access.tensor), access.elements)
            i = access_index.get(key)
            if i is None:
                i = access_index[key] = len(self._accesses)
                self._accesses.append(key)
            return i

        # per op: GEMM (a, b, c), vector ((reads...), (writes...)) or comm/transfer tensor
        self._refs: list[tuple[int, int, int] | tuple[tuple[int, ...], tuple[int, ...]] | int] = []
        for op in ops:
            if isinstance(op, GemmOp):
                self._refs.append((t(op.a), t(op.b), t(op.c)))
            elif isinstance(op, VectorOp):
                self._refs.append((tuple(map(a, op.reads)), tuple(map(a, op.writes))))
            else:
                self._refs.append(t(op.tensor))
        self._param_refs = [(t(p.weight), t(p.gradient)) for p in parameters]

    def __call__(
        self, tag: Tag | Callable[[Tag], Tag], copy_tensor: TensorMap, ids: Sequence[int]
    ) -> tuple[list[Op], list[Parameter]]:
        """The copies: ops tagged ``tag`` (or ``tag`` of their tag), every tensor
        replaced by ``copy_tensor`` of it (:func:`copied_as`, :func:`recopied`), and every op id
        (an op's own, those it waits for, a parameter's ``grad_op``) mapped from
        ``old`` to ``ids[old]``, which must keep their order (sorted ``deps`` stay
        sorted)."""
        tensors = [copy_tensor(x) for x in self._tensors]
        accesses = [Access(tensors[i], elements) for i, elements in self._accesses]
        old_tags = {op.tag for op in self.ops}
        tags = (
            dict.fromkeys(old_tags, tag) if isinstance(tag, Tag) else {t: tag(t) for t in old_tags}
        )
        out: list[Op] = []
        for op, refs in zip(self.ops, self._refs, strict=True):
            op_id = ids[op.op_id]
            new_tag = tags[op.tag]
            deps = tuple([ids[d] for d in op.deps])
            sources = tuple([tuple([ids[x] for x in g]) for g in op.sources])
            after = tuple([ids[d] for d in op.after]) if op.after else ()
            if isinstance(refs, int):
                copy = _COPY_TENSOR_OP[type(op)]
                out.append(copy(op, op_id, deps, sources, after, new_tag, tensors[refs]))
                continue
            assert isinstance(op, (GemmOp, VectorOp))
            tiles = op.tile_sources
            if tiles:
                tiles = tuple([ids[s] if s != NO_TILES else s for s in tiles])
            if len(refs) == 3:
                a, b, c = refs
                x, y, z = tensors[a], tensors[b], tensors[c]
                out.append(_COPY_GEMM(op, op_id, deps, sources, after, new_tag, x, y, z, tiles))
            else:
                reads = tuple([accesses[i] for i in refs[0]])
                writes = tuple([accesses[i] for i in refs[1]])
                out.append(
                    _COPY_VECTOR(op, op_id, deps, sources, after, new_tag, reads, writes, tiles)
                )
        parameters = [
            _COPY_PARAMETER(p, tensors[w], tensors[g], ids[p.grad_op] if p.grad_op >= 0 else -1)
            for p, (w, g) in zip(self.parameters, self._param_refs, strict=True)
        ]
        return out, parameters


def prefixed(keys: Iterable[TensorKey], prefix: str) -> frozenset[TensorKey]:
    """The keys of a step's tensors (``keys``) in its copy named with ``prefix``."""
    return frozenset((prefix + name, version) for name, version in keys)


def instantiate(graph: OpGraph, tag: Tag, prefix: str) -> OpGraph:
    """A copy of ``graph`` tagged ``tag`` whose tensor names start with ``prefix``."""
    if not prefix:
        return dataclasses.replace(graph, ops=tuple(replaced(o, tag=tag) for o in graph.ops))
    ops, parameters = Relabel(graph.ops, graph.parameters)(
        tag, copied_as(prefix, tag), range(len(graph.ops))
    )
    return OpGraph(
        ops=tuple(ops),
        processor=graph.processor,
        on_chip=prefixed(graph.on_chip, prefix),
        stashed=queries.stashed(ops),
        parameters=tuple(parameters),
        priority=graph.priority,
    )
