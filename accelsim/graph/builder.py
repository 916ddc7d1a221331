"""Accumulate ops into an :class:`~accelsim.graph.ops.OpGraph`.

The builder knows tensors and their producers, nothing about processors: every
op it emits is on processor 0 until a placement pass
(:mod:`accelsim.mapping.placement`) moves it, and data that crosses processors
travels by transfers that :func:`~accelsim.graph.passes.insert_transfers` adds.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

from accelsim.config.enums import CommGroup, VectorClass
from accelsim.config.hardware import WordBytesSpec
from accelsim.graph import queries
from accelsim.graph.ops import (
    CORE,
    NO_EXPERT,
    NO_TILES,
    ROOT,
    STAGE_OF_PHASE,
    Access,
    CommOp,
    Epilogue,
    GemmOp,
    Op,
    OpGraph,
    Parameter,
    Phase,
    Stage,
    Tag,
    Tensor,
    TensorKey,
    TensorKind,
    VectorOp,
    replaced,
    whole,
)
from accelsim.network.collectives import Collective


class GraphBuilder:
    """Accumulates ops, in program order, tagged with ``tag``.

    Args:
        words: Word size of each tensor class.
        tag: The tag of the ops it emits (which replica, mini-batch, micro-batch).

    Attributes:
        owner: The owner of the ops it emits (:data:`~accelsim.graph.ops.CORE`, or the
            technique emitting them).
        stage: The stage of the ops it emits, or None for the stage of what each
            computes (:data:`~accelsim.graph.ops.STAGE_OF_PHASE`).
    """

    def __init__(
        self, words: WordBytesSpec, tag: Tag = ROOT, on_chip: Iterable[TensorKey] = ()
    ) -> None:
        self.words = words
        self.owner = CORE
        self.stage: Stage | None = None
        self._word_bytes = {
            TensorKind.ACTIVATION: words.activations,
            TensorKind.WEIGHT: words.weights,
            TensorKind.GRADIENT: words.gradients,
            TensorKind.OPTIMIZER_STATE: words.optimizer_state,
        }
        self.tag = tag
        self.ops: list[Op] = []
        self.processor: list[int] = []
        self._producers: dict[TensorKey, tuple[int, ...]] = {}
        self._on_chip: set[TensorKey] = set(on_chip)

    @classmethod
    def extending(cls, graph: OpGraph, words: WordBytesSpec) -> GraphBuilder:
        """A builder that appends to ``graph`` (see :meth:`append` for producers)."""
        builder = cls(words, on_chip=graph.on_chip)
        for op in graph.ops:
            builder.append(op, graph.processor[op.op_id])
        return builder

    @contextmanager
    def owned_by(self, owner: str) -> Iterator[None]:
        """Emit the ops of the ``with`` block as ``owner``'s (a technique's)."""
        before, self.owner = self.owner, owner
        try:
            yield
        finally:
            self.owner = before

    @contextmanager
    def in_stage(self, stage: Stage) -> Iterator[None]:
        """Emit the ops of the ``with`` block in ``stage``, whatever they compute."""
        before, self.stage = self.stage, stage
        try:
            yield
        finally:
            self.stage = before

    def stage_of(self, phase: Phase) -> Stage:
        """The stage of an op of ``phase`` emitted now.

        Raises:
            ValueError: for an auxiliary op emitted outside :meth:`in_stage`.
        """
        if self.stage is not None:
            return self.stage
        if phase not in STAGE_OF_PHASE:
            raise ValueError(f"an op of phase {phase.value} needs a stage (GraphBuilder.in_stage)")
        return STAGE_OF_PHASE[phase]

    def append(self, op: Op, processor: int) -> None:
        """Append an op made elsewhere, numbered ``len(ops)`` already.

        Its writes add to their tensors' producers: graphs never rewrite a tensor
        that a later op reads back, so every writer is a producer.
        """
        assert op.op_id == len(self.ops)
        self.ops.append(op)
        self.processor.append(processor)
        for access in queries.writes_of(op):
            key = access.tensor.key
            self._producers[key] = (*self._producers.get(key, ()), op.op_id)

    def append_ops(
        self, ops: Sequence[Op], processor: Sequence[int], on_chip: Iterable[TensorKey]
    ) -> None:
        """Append ops made elsewhere, numbered from ``len(ops)`` already, on the
        processors ``processor``, with the keys of the tensors they keep on chip."""
        for op, where in zip(ops, processor, strict=True):
            self.append(op, where)
        self._on_chip.update(on_chip)

    def append_graph(self, graph: OpGraph) -> int:
        """Append every op of ``graph`` (on its processors); returns the id offset."""
        offset = len(self.ops)
        for op in graph.ops:
            self.append(shifted(op, offset), graph.processor[op.op_id])
        self._on_chip.update(graph.on_chip)
        return offset

    # -- tensors -------------------------------------------------------------------------
    def tensor(self, name: str, kind: TensorKind, elements: int, parameter: str = "") -> Tensor:
        """Create a tensor whose word size follows its class (``parameter``: the
        weight it belongs to, see :class:`~accelsim.graph.ops.Tensor`)."""
        return Tensor(name, kind, elements, self._word_bytes[kind], parameter=parameter)

    def derived(self, of: Tensor, suffix: str, kind: TensorKind, elements: int) -> Tensor:
        """A tensor named after ``of`` (``of``'s name and ``suffix``), in the same copy
        of the step and of the same parameter: a weight's optimizer state, a
        gradient's sum over micro-batches or its all-reduced total."""
        local = of.local + suffix if of.local else ""
        return Tensor(
            of.name + suffix, kind, elements, self._word_bytes[kind], of.tag, local, of.parameter
        )

    def producers(self, tensor: Tensor) -> tuple[int, ...]:
        """The ops that have written ``tensor`` so far."""
        return self._producers.get(tensor.key, ())

    def keep_on_chip(self, tensor: Tensor) -> Tensor:
        """Declare that ``tensor`` never travels to DRAM (it is read as it is produced)."""
        self._on_chip.add(tensor.key)
        return tensor

    def is_on_chip(self, tensor: Tensor) -> bool:
        """Whether ``tensor`` never travels to DRAM."""
        return tensor.key in self._on_chip

    def alias(self, tensor: Tensor, parts: Iterable[Tensor]) -> Tensor:
        """Declare ``tensor`` a view over ``parts``: it is ready when they all are."""
        ids: set[int] = set()
        for part in parts:
            ids.update(self._producers.get(part.key, ()))
        self._producers[tensor.key] = tuple(sorted(ids))
        return tensor

    def take_tiles(self, consumer: int, tensor: Tensor, source: int) -> None:
        """Declare that op ``consumer`` takes ``tensor`` tile by tile from op ``source``
        (which writes it, or loads it into an array's buffer): a
        :class:`~accelsim.graph.ops.TileStream`.  ``consumer`` must read ``tensor``
        and already wait for ``source`` (:func:`~accelsim.graph.check.graph_problems`
        checks the rest).

        Raises:
            ValueError: if ``consumer`` is not a GEMM or vector op reading ``tensor``.
        """
        op = self.ops[consumer]
        reads = queries.reads_of(op)
        index = next((i for i, a in enumerate(reads) if a.tensor.key == tensor.key), None)
        if index is None or not isinstance(op, (GemmOp, VectorOp)):
            raise ValueError(f"{op.name} reads no {tensor.name} it could take tiles of")
        tiles = list(op.tile_sources or (NO_TILES,) * len(reads))
        tiles[index] = source
        self.ops[consumer] = replaced(op, tile_sources=tuple(tiles))

    def add_dependencies(self, op_id: int, deps: Iterable[int]) -> None:
        """Make an op also wait for earlier ops ``deps`` (e.g. a schedule's ordering)."""
        op = self.ops[op_id]
        extra = {d for d in deps if d < op_id}
        self.ops[op_id] = replaced(
            op,
            deps=tuple(sorted(set(op.deps) | extra)),
            after=tuple(sorted(set(op.after) | extra)),
        )

    def _emit(self, op: Op, writes: Iterable[Tensor], partial: bool) -> int:
        self.ops.append(op)
        self.processor.append(0)
        for t in writes:
            before = self._producers.get(t.key, ()) if partial else ()
            self._producers[t.key] = (*before, op.op_id)
        return op.op_id

    def _sources(self, reads: Iterable[Access]) -> tuple[tuple[int, ...], ...]:
        return tuple(self._producers.get(a.tensor.key, ()) for a in reads)

    # -- ops -----------------------------------------------------------------------------
    def gemm(
        self,
        name: str,
        layer: str,
        phase: Phase,
        m: int,
        n: int,
        k: int,
        count: int,
        a: Tensor,
        b: Tensor,
        c: Tensor,
        a_elements: int | None = None,
        b_elements: int | None = None,
        partial: bool = False,
        unit: str = "array",
        expert: int = NO_EXPERT,
        groups: int = 1,
    ) -> int:
        """Add ``count`` GEMMs ``c[m x n] = a[m x k] . b[k x n]`` on array ``unit``.

        ``a_elements`` and ``b_elements`` are the operands' unique footprints per
        GEMM (default: all of ``m*k`` and ``k*n``); ``partial`` marks ``c`` as
        written piecewise by several ops; ``groups`` is a grouped convolution's
        channel groups (:class:`~accelsim.graph.ops.GemmOp`).
        """
        a_fp = min(m * k, a_elements) if a_elements is not None else m * k
        b_fp = min(k * n, b_elements) if b_elements is not None else k * n
        sources = self._sources((Access(a, a_fp * count), Access(b, b_fp * count)))
        op = GemmOp(
            op_id=len(self.ops),
            name=name,
            layer=layer,
            phase=phase,
            stage=self.stage_of(phase),
            m=m,
            n=n,
            k=k,
            count=count,
            a=a,
            b=b,
            c=c,
            a_elements=a_fp,
            b_elements=b_fp,
            deps=_union(sources),
            unit=unit,
            sources=sources,
            tag=self.tag,
            owner=self.owner,
            expert=expert,
            groups=groups,
        )
        return self._emit(op, (c,), partial)

    def vector(
        self,
        name: str,
        layer: str,
        phase: Phase,
        elements: int,
        ops_per_element: int,
        reads: Sequence[Access | Tensor],
        writes: Sequence[Access | Tensor],
        after: Iterable[int] = (),
        tag: Tag | None = None,
        epilogue: Epilogue = Epilogue.NONE,
        partial: bool = False,
        op_class: VectorClass = VectorClass.ELEMENTWISE,
        expert: int = NO_EXPERT,
    ) -> int:
        """Add a vector-unit op; tensors given bare are accessed whole.  ``op_class``
        says what it does to its data (:class:`~accelsim.config.enums.VectorClass`,
        whose fixed cost it pays; element-wise unless given); ``epilogue`` whether it
        can consume an input tile by tile (:class:`Epilogue`);
        ``partial`` marks its writes as adding to what earlier ops wrote of them (a
        reader then waits for every writer), as a GEMM's ``partial`` does."""
        read_acc = tuple(r if isinstance(r, Access) else whole(r) for r in reads)
        write_acc = tuple(w if isinstance(w, Access) else whole(w) for w in writes)
        sources = self._sources(read_acc)
        order = tuple(sorted(set(after)))
        op = VectorOp(
            op_id=len(self.ops),
            name=name,
            layer=layer,
            phase=phase,
            stage=self.stage_of(phase),
            elements=elements,
            ops_per_element=ops_per_element,
            reads=read_acc,
            writes=write_acc,
            deps=_union((*sources, order)),
            sources=sources,
            after=order,
            tag=self.tag if tag is None else tag,
            owner=self.owner,
            epilogue=epilogue,
            op_class=op_class,
            expert=expert,
        )
        return self._emit(op, (w.tensor for w in write_acc), partial)

    def allreduce(
        self,
        name: str,
        layer: str,
        tensor: Tensor,
        participants: tuple[int, ...],
        after: Iterable[int],
        gradients: Sequence[Tensor] = (),
        group: CommGroup = CommGroup.DATA,
    ) -> int:
        """Add an all-reduce of ``tensor`` after the ops in ``after`` (``tensor``
        holds ``gradients``: :attr:`~accelsim.graph.ops.CommOp.gradients`) over a
        ``group`` of processors."""
        return self.collective(
            name,
            layer,
            tensor,
            participants,
            after,
            Collective.ALL_REDUCE,
            gradients=gradients,
            group=group,
        )

    def collective(
        self,
        name: str,
        layer: str,
        tensor: Tensor,
        participants: tuple[int, ...],
        after: Iterable[int],
        kind: Collective,
        root: int | None = None,
        gradients: Sequence[Tensor] = (),
        group: CommGroup = CommGroup.DATA,
        shard: Tensor | None = None,
    ) -> int:
        """Add a ``kind`` collective of ``tensor`` (sized as
        :mod:`accelsim.network.collectives` says) on ``participants`` after the ops in
        ``after``; a broadcast from ``root`` (None: the first participant); ``group``
        is the parallelism whose group it spans; ``shard``, an all-gather's own share
        (:attr:`~accelsim.graph.ops.CommOp.shard`).

        Raises:
            ValueError: for a point-to-point kind (a transfer, not a collective), a
                root of another kind, or a root that does not take part.
        """
        if kind is Collective.POINT_TO_POINT:
            raise ValueError("a point-to-point message is a transfer, not a collective")
        if root is not None and (kind is not Collective.BROADCAST or root not in participants):
            raise ValueError(f"{kind.value} on {participants} cannot have root {root}")
        order = tuple(sorted(set(after)))
        op = CommOp(
            op_id=len(self.ops),
            name=name,
            layer=layer,
            phase=Phase.COMM,
            stage=self.stage_of(Phase.COMM),
            tensor=tensor,
            participants=participants,
            deps=order,
            after=order,
            tag=self.tag,
            owner=self.owner,
            gradients=tuple(gradients),
            collective=kind,
            root=root,
            group=group,
            shard=shard,
        )
        return self._emit(op, (tensor,), False)

    def build(self, parameters: Sequence[Parameter] = (), priority: Sequence[int] = ()) -> OpGraph:
        """Freeze the ops into an :class:`OpGraph`, marking the activations backward reads."""
        return OpGraph(
            ops=tuple(self.ops),
            processor=tuple(self.processor),
            on_chip=frozenset(self._on_chip),
            stashed=queries.stashed(self.ops),
            parameters=tuple(parameters),
            priority=tuple(priority),
        )


def shifted(op: Op, offset: int) -> Op:
    """``op`` with its id and every reference moved by ``offset`` (``op`` itself for 0)."""
    if not offset:
        return op
    add = offset.__add__
    moved = replaced(
        op,
        op_id=op.op_id + offset,
        deps=tuple(map(add, op.deps)),
        sources=tuple(tuple(map(add, g)) for g in op.sources),
        after=tuple(map(add, op.after)),
    )
    tiles = queries.tile_sources(op)
    if not tiles:
        return moved
    return replaced(moved, tile_sources=tuple(s + offset if s != NO_TILES else s for s in tiles))


def _union(groups: Iterable[Iterable[int]]) -> tuple[int, ...]:
    return tuple(sorted({i for g in groups for i in g}))
