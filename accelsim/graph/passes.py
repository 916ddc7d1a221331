"""Graph-to-graph passes: every one returns a renumbered graph with its stash recomputed.

* :func:`instantiate` makes a tagged copy of a step with its own tensor names
  (:class:`Relabel`: copies of its ops at other ids, for replicas and mini-batches);
* :func:`rewrite` drops ops and emits new ones after chosen ops (what
  techniques use);
* :func:`place` puts ops on processors, :func:`split_gemms` shares a GEMM's
  rows between two processors, and :func:`insert_transfers` adds the transfers
  that bring data to ops on other processors than its producers.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from accelsim.config.hardware import WordBytesSpec
from accelsim.graph import queries
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import (
    CORE,
    NO_TILES,
    Access,
    CommOp,
    GemmOp,
    Op,
    OpGraph,
    Parameter,
    Tag,
    Tensor,
    TransferOp,
    VectorOp,
    copier,
    replaced,
)

# old op id -> the ids that replace it (none when it was dropped, two when split)
IdMap = Mapping[int, tuple[int, ...]]


AnyOp = TypeVar("AnyOp", bound=GemmOp | VectorOp | CommOp | TransferOp)


def _relink(op: AnyOp, op_id: int, ids: IdMap) -> AnyOp:
    """``op`` renumbered to ``op_id`` with every reference mapped through ``ids``.

    A tile source that is gone, or was split in two, is no longer one: the tensor is
    then read as it was before any stream (:data:`~accelsim.graph.ops.NO_TILES`)."""

    def mapped(group: Iterable[int]) -> tuple[int, ...]:
        return tuple(new for old in group for new in ids.get(old, ()))

    new = replaced(
        op,
        op_id=op_id,
        deps=tuple(sorted(set(mapped(op.deps)))),
        sources=tuple(mapped(g) for g in op.sources),
        after=tuple(sorted(set(mapped(op.after)))),
    )
    tiles = queries.tile_sources(op)
    if not tiles:
        return new
    return replaced(new, tile_sources=tuple(_one(ids.get(s, ())) for s in tiles))


def _one(ids: tuple[int, ...]) -> int:
    """The one op an old tile source became, or :data:`NO_TILES`."""
    return ids[0] if len(ids) == 1 else NO_TILES


def _parameters(parameters: Iterable[Parameter], ids: IdMap) -> tuple[Parameter, ...]:
    """Parameters with ``grad_op`` mapped (-1 when its op is gone)."""
    out = []
    for p in parameters:
        new = ids.get(p.grad_op, ()) if p.grad_op >= 0 else ()
        out.append(replaced(p, grad_op=new[-1] if new else -1))
    return tuple(out)


def _graph(
    ops: Sequence[Op],
    processor: Sequence[int],
    on_chip: Iterable[str],
    parameters: Iterable[Parameter],
    priority: Sequence[int] = (),
) -> OpGraph:
    return OpGraph(
        ops=tuple(ops),
        processor=tuple(processor),
        on_chip=frozenset(on_chip),
        stashed=queries.stashed(ops),
        parameters=tuple(parameters),
        priority=tuple(priority),
    )


_LINKS = ("op_id", "deps", "sources", "after", "tag")
_COPY_GEMM = copier(GemmOp, (*_LINKS, "a", "b", "c", "tile_sources"))
_COPY_VECTOR = copier(VectorOp, (*_LINKS, "reads", "writes", "tile_sources"))
_COPY_TENSOR_OP: dict[type, Callable[..., Op]] = {
    cls: copier(cls, (*_LINKS, "tensor")) for cls in (CommOp, TransferOp)
}
_COPY_TENSOR = copier(Tensor, ("name", "tag", "local"))
_COPY_LINKS: dict[type, Callable[..., Op]] = {
    cls: copier(cls, _LINKS[:4]) for cls in (GemmOp, VectorOp, CommOp, TransferOp)
}
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


def instantiate(graph: OpGraph, tag: Tag, prefix: str) -> OpGraph:
    """A copy of ``graph`` tagged ``tag`` whose tensor names start with ``prefix``."""
    if not prefix:
        return dataclasses.replace(graph, ops=tuple(replaced(o, tag=tag) for o in graph.ops))
    ops, parameters = Relabel(graph.ops, graph.parameters)(
        tag, copied_as(prefix, tag), range(len(graph.ops))
    )
    return _graph(
        ops, graph.processor, {prefix + n for n in graph.on_chip}, parameters, graph.priority
    )


EmitAfter = Callable[[GraphBuilder, Op], None]


def rewrite(
    graph: OpGraph,
    words: WordBytesSpec,
    drop: Callable[[Op], bool] = lambda op: False,
    emit_after: EmitAfter | None = None,
    emit_before: EmitAfter | None = None,
    owner: str = CORE,
) -> tuple[OpGraph, dict[int, tuple[int, ...]]]:
    """Drop the ops ``drop`` selects and let ``emit_after`` add ops after each kept op.

    ``emit_after(builder, op)`` receives ``op`` as it was in ``graph`` and a
    builder positioned right after its renumbered copy, whose producer table
    covers every op so far, and emits into it; ``emit_before`` likewise, right
    before the copy (which does not wait for what it emits).  Ops that waited
    for a dropped op no longer wait for it.  The ops emitted are ``owner``'s (the
    technique rewriting the graph); the kept ones keep their owners.

    Returns:
        The new graph (parameters' ``grad_op`` remapped, -1 where dropped) and
        the map from old op ids to new ones.
    """
    if graph.priority:
        raise ValueError("rewrite runs before a schedule sets priorities")
    builder = GraphBuilder(words, on_chip=graph.on_chip)
    ids: dict[int, tuple[int, ...]] = {}
    with builder.owned_by(owner):
        for op in graph.ops:
            if drop(op):
                ids[op.op_id] = ()
                continue
            if emit_before is not None:
                emit_before(builder, op)
            new = _relink(op, len(builder.ops), ids)
            builder.append(new, graph.processor[op.op_id])
            ids[op.op_id] = (new.op_id,)
            if emit_after is not None:
                emit_after(builder, op)
    return builder.build(_parameters(graph.parameters, ids)), ids


def place(graph: OpGraph, where: Callable[[Op], int]) -> OpGraph:
    """``graph`` with every op on the processor ``where`` gives it."""
    return dataclasses.replace(graph, processor=tuple(where(op) for op in graph.ops))


SplitRule = Callable[[GemmOp], tuple[float, int] | None]


def split_gemms(graph: OpGraph, rule: SplitRule) -> OpGraph:
    """Share GEMMs' rows between two processors.

    Where ``rule(op)`` gives ``(fraction, processor)``, the GEMM becomes two:
    part 0 (``GemmOp.part``, named ``.part0``) with that fraction of the rows (at
    least one, at most all but one) on ``processor``, then part 1 (``.part1``) with
    the rest where it was; both write the output piecewise, and ops reading it wait
    for both.
    """
    ops: list[Op] = []
    processor: list[int] = []
    ids: dict[int, tuple[int, ...]] = {}
    for op in graph.ops:
        share = rule(op) if isinstance(op, GemmOp) and op.m > 1 else None
        if share is None or not isinstance(op, GemmOp):
            ids[op.op_id] = (len(ops),)
            ops.append(_relink(op, len(ops), ids))
            processor.append(graph.processor[op.op_id])
            continue
        fraction, other = share
        moved = min(op.m - 1, max(1, round(fraction * op.m)))
        parts = ((moved, other), (op.m - moved, graph.processor[op.op_id]))
        base = _relink(op, len(ops), ids)
        ids[op.op_id] = (len(ops), len(ops) + 1)
        for part, (rows, where) in enumerate(parts):
            a_part = min(rows * op.k, max(1, op.a_elements * rows // op.m))
            ops.append(
                replaced(
                    base,
                    op_id=len(ops),
                    name=f"{op.name}.part{part}",
                    m=rows,
                    a_elements=a_part,
                    part=part,
                )
            )
            processor.append(where)
    return _graph(ops, processor, graph.on_chip, _parameters(graph.parameters, ids), ())


def insert_transfers(graph: OpGraph) -> OpGraph:
    """Send data made on one processor to the ops that read it on another.

    Each tensor travels once per (source, destination) pair, as a
    :class:`TransferOp` placed right before the first op that needs it; later
    readers reuse the copy.  The transfer leaves after its producers and after
    whatever that first reader is ordered ``after`` on the sending processor (a
    schedule that sends a stage's output when the stage is done says so that
    way).  An op then waits for its local producers, its transfers and its
    ``after`` dependencies.

    The stash is the graph's: a transfer has its reader's phase, tag, owner and
    tensor, and is named after the tensor's name in the step (``Tensor.step_name``)
    and its destination.  A tile stream between two processors ends here (the
    tensor comes by the transfer).
    """
    ops: list[Op] = []
    processor: list[int] = []
    priority: list[int] = []
    new_id: list[int] = []  # old op id -> new (this pass only inserts ops)
    sent: dict[tuple[str, int, int], int] = {}
    placed = graph.processor
    for op in graph.ops:
        here = placed[op.op_id]
        if len(ops) == op.op_id and all(placed[x] == here for g in op.sources for x in g):
            # No transfer before it and none for it: its ids stay.
            new_op = _relinked(op, op.op_id, op.sources, op.after, _kept_deps(op))
        else:
            new_op = _with_transfers(op, here, new_id, ops, processor, sent, graph, priority)
        if queries.tile_sources(op):
            new_op = _local_tiles(new_op, op, new_id, processor, here)
        new_id.append(len(ops))
        ops.append(new_op)
        processor.append(here)
        if graph.priority:
            priority.append(graph.priority[op.op_id])
    ids = {old: (new,) for old, new in enumerate(new_id)}
    return OpGraph(
        ops=tuple(ops),
        processor=tuple(processor),
        on_chip=graph.on_chip,
        stashed=graph.stashed,
        parameters=_parameters(graph.parameters, ids),
        priority=tuple(priority),
    )


def _local_tiles(
    new_op: Op, op: Op, new_id: Sequence[int], processor: Sequence[int], here: int
) -> Op:
    """``new_op`` (``op`` renumbered) taking tiles only from ops on its own processor: a
    tile cannot stay on chip across processors, so a tensor made elsewhere arrives by
    its transfer instead."""
    assert isinstance(op, (GemmOp, VectorOp))
    tiles = tuple(
        new_id[s] if s != NO_TILES and processor[new_id[s]] == here else NO_TILES
        for s in op.tile_sources
    )
    if tiles == queries.tile_sources(new_op):
        return new_op
    return replaced(new_op, tile_sources=tiles)


def settled(op: Op) -> bool:
    """Whether :func:`insert_transfers` leaves ``op`` as it is when every op it reads
    from is on its processor and no transfer comes before it."""
    return _relinked(op, op.op_id, op.sources, op.after, _kept_deps(op)) is op


def _relinked(
    op: Op,
    op_id: int,
    sources: Sequence[tuple[int, ...]],
    after: Iterable[int],
    deps: Iterable[int] | None = None,
) -> Op:
    """``op`` numbered ``op_id`` with those links, ``deps`` and ``after`` sorted without
    repeats (``deps`` by default: ``after`` and every producer in ``sources``); itself
    when they do not change, since ops are immutable."""
    ordered = tuple(sorted(set(after))) if after else ()
    if deps is None:
        waits = tuple(sorted({*ordered, *itertools.chain.from_iterable(sources)}))
    else:
        waits = tuple(sorted(set(deps)))
    if op_id == op.op_id and (waits, ordered) == (op.deps, op.after) and sources == op.sources:
        return op
    return _COPY_LINKS[type(op)](op, op_id, waits, tuple(sources), ordered)


def _kept_deps(op: Op) -> Iterable[int] | None:
    """What a comm or transfer op, or one reading nothing made in the graph, waits for
    (the ops it waited for); None for others, which wait for ``after`` and producers."""
    return op.deps if isinstance(op, (CommOp, TransferOp)) or not op.sources else None


def _with_transfers(
    op: Op,
    here: int,
    new_id: list[int],
    ops: list[Op],
    processor: list[int],
    sent: dict[tuple[str, int, int], int],
    graph: OpGraph,
    priority: list[int],
) -> Op:
    """``op`` renumbered after the ops so far, with the transfers it needs appended first.

    A comm or transfer op, or one that reads nothing made in the graph, keeps what it
    waited for; another waits for its ``after``, its local producers and its transfers.
    """
    sources = tuple([tuple([new_id[old] for old in g]) for g in op.sources])
    ordered = [new_id[old] for old in op.after]
    if _kept_deps(op) is not None:
        return _relinked(op, len(ops), sources, ordered, [new_id[old] for old in op.deps])
    if all(processor[x] == here for g in sources for x in g):
        return _relinked(op, len(ops), sources, ordered)
    deps = set(ordered)
    for access, producers in zip(queries.reads_of(op), sources, strict=False):
        remote: dict[int, list[int]] = {}
        for producer in producers:
            if processor[producer] == here:
                deps.add(producer)
            else:
                remote.setdefault(processor[producer], []).append(producer)
        for source, made_by in remote.items():
            key = (access.tensor.name, source, here)
            if key not in sent:
                sent[key] = len(ops)
                waits = [d for d in set(ordered) if processor[d] == source]
                ops.append(_transfer(len(ops), op, access, source, here, made_by, waits))
                processor.append(source)
                if graph.priority:
                    priority.append(graph.priority[op.op_id])
            deps.add(sent[key])
    return _relinked(op, len(ops), sources, ordered, deps)


def _transfer(
    op_id: int,
    reader: Op,
    access: Access,
    source: int,
    destination: int,
    producers: list[int],
    waits: list[int],
) -> TransferOp:
    return TransferOp(
        op_id=op_id,
        name=f"{access.tensor.step_name}.to_p{destination}",
        layer=reader.layer,
        phase=reader.phase,
        tensor=access.tensor,
        elements=access.elements,
        source=source,
        destination=destination,
        deps=tuple(sorted({*producers, *waits})),
        sources=(tuple(producers),),
        after=tuple(sorted(waits)),
        tag=reader.tag,
        owner=reader.owner,
    )
