"""Passes that change what ops read and wait for, in place: every op keeps its id, and
each returns a graph with its stash recomputed.

* :func:`redirect`: reads of a tensor now read a tensor another op makes (or holds),
  tile by tile if asked (a recomputed activation, a weight an update writes);
* :func:`unread`: ops stop reading a tensor (a dropout mask a technique does away with);
* :func:`wait_for`: ops also wait for others, an ordering without data.

They run on a step graph (before placement, as the techniques' rewrites do) and keep
``sources``, ``deps`` and ``tile_sources`` in step: a read's producers are its
sources, an op stops waiting for a producer it no longer reads from (unless its
``after`` orders it so) and waits for a new one, and a tile stream of a read that
changes ends unless the new source gives its tiles.  No technique edits these links
by hand.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from accelsim.graph import queries
from accelsim.graph.ops import (
    NO_TILES,
    Access,
    GemmOp,
    Op,
    OpGraph,
    Tensor,
    TensorKey,
    VectorOp,
    described,
    replaced,
)


@dataclass(frozen=True)
class Redirect:
    """Op ``consumer``'s reads of the tensor ``read`` (its key) now read ``tensor``
    (``read`` itself when None), which op ``source`` makes, or, with ``tiles``, makes
    or holds in an array's buffer: the consumer then takes it from ``source`` tile by
    tile."""

    consumer: int
    read: TensorKey
    source: int
    tensor: Tensor | None = None
    tiles: bool = False


def redirect(graph: OpGraph, redirects: Iterable[Redirect]) -> OpGraph:
    """``graph`` with each of ``redirects`` applied (several may change one op).

    Raises:
        ValueError: for a consumer that does not read ``read``, a source that is not an
            earlier op, or one that neither makes the tensor nor, with ``tiles``, reads it.
    """
    ops = list(graph.ops)
    for r in redirects:
        ops[r.consumer] = _redirected(ops[r.consumer], r, ops)
    return _with(graph, ops)


def _redirected(op: Op, r: Redirect, ops: Sequence[Op]) -> Op:
    reads = queries.reads_of(op)
    hits = [i for i, a in enumerate(reads) if a.tensor.key == r.read]
    name = described(r.read)
    if not hits or not isinstance(op, (GemmOp, VectorOp)):
        raise ValueError(f"{op.name} reads no {name} that could be redirected")
    if not 0 <= r.source < op.op_id:
        raise ValueError(f"{op.name} cannot read {name} from op {r.source}, not before it")
    tensor = reads[hits[0]].tensor if r.tensor is None else r.tensor
    source = ops[r.source]
    has = queries.writes_of(source) + (queries.reads_of(source) if r.tiles else ())
    if all(a.tensor.key != tensor.key for a in has):
        raise ValueError(f"{op.name} cannot read {tensor.name} from {source.name}, which has none")
    sources = list(op.sources or ((),) * len(reads))
    tiles = list(op.tile_sources or (NO_TILES,) * len(reads))
    for i in hits:
        sources[i] = (r.source,)
        tiles[i] = r.source if r.tiles else NO_TILES
    if isinstance(op, GemmOp):
        a = tensor if op.a.key == r.read else op.a
        b = tensor if op.b.key == r.read else op.b
        op = replaced(op, a=a, b=b)
    else:
        accesses = tuple(Access(tensor, x.elements) if x.tensor.key == r.read else x for x in reads)
        op = replaced(op, reads=accesses)
    return _relinked(op, sources, tiles)


def unread(graph: OpGraph, reads: Mapping[int, TensorKey]) -> OpGraph:
    """``graph`` where each vector op ``i`` of ``reads`` no longer reads the tensor
    ``reads[i]`` (its key).

    Raises:
        ValueError: for an op that is no vector op reading it.
    """
    ops = list(graph.ops)
    for i, key in reads.items():
        op = ops[i]
        if not isinstance(op, VectorOp) or all(a.tensor.key != key for a in op.reads):
            raise ValueError(f"{op.name} has no read of {described(key)} to drop")
        kept = [j for j, a in enumerate(op.reads) if a.tensor.key != key]
        sources = [op.sources[j] for j in kept] if op.sources else []
        tiles = [op.tile_sources[j] for j in kept] if op.tile_sources else []
        ops[i] = _relinked(replaced(op, reads=tuple(op.reads[j] for j in kept)), sources, tiles)
    return _with(graph, ops)


def wait_for(graph: OpGraph, waits: Mapping[int, Iterable[int]]) -> OpGraph:
    """``graph`` where each op ``i`` of ``waits`` also waits for the earlier ops
    ``waits[i]`` (an ordering without data: ``after``).

    Raises:
        ValueError: for an op to wait for that is not before ``i``.
    """
    ops = list(graph.ops)
    for i, extra in waits.items():
        op, more = ops[i], set(extra)
        late = sorted(d for d in more if not 0 <= d < i)
        if late:
            raise ValueError(f"{op.name} cannot wait for op {late[0]}, not before it")
        ops[i] = replaced(
            op,
            deps=tuple(sorted(set(op.deps) | more)),
            after=tuple(sorted(set(op.after) | more)),
        )
    return _with(graph, ops)


def _relinked(op: GemmOp | VectorOp, sources: list[tuple[int, ...]], tiles: list[int]) -> Op:
    """``op`` reading from ``sources`` (one group per read) with those tile sources
    (none when every entry is :data:`NO_TILES`): it no longer waits for a producer it
    no longer reads from (unless ``after`` orders it so) and waits for each new one."""
    before = {x for group in op.sources for x in group}
    now = {x for group in sources for x in group}
    deps = (set(op.deps) - (before - now - set(op.after))) | (now - before)
    taken = tuple(tiles) if any(t != NO_TILES for t in tiles) else ()
    return replaced(op, sources=tuple(sources), deps=tuple(sorted(deps)), tile_sources=taken)


def _with(graph: OpGraph, ops: Sequence[Op]) -> OpGraph:
    return dataclasses.replace(graph, ops=tuple(ops), stashed=queries.stashed(ops))
