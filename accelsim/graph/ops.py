"""The op DAG of one training step: GEMM, vector and communication ops over tensors.

Lowering (:mod:`accelsim.lowering`) produces an :class:`OpGraph`.
Ops are listed in program order, which is also a topological order, and an
op's ``op_id`` is its index.  A tensor is known by its name and version
(:attr:`Tensor.key`); ``OpGraph.on_chip`` holds the keys of tensors that never
travel to DRAM.

Every op records why it waits:

* ``sources``: for each tensor it reads (in :func:`~accelsim.graph.queries.reads_of`
  order), the ops that produced it;
* ``after``: ordering dependencies that carry no data (a barrier, a schedule);
* ``deps``: what the engine waits for: ``after``, the producers on the op's own
  processor, and the transfers that bring the others' data
  (:func:`~accelsim.graph.passes.insert_transfers`).

``phase`` says what an op computes (forward work, an input or a weight gradient,
an update, a collective, a technique's auxiliary work), ``stage`` when in the
step it runs (forward, backward, update, communication), ``tag`` which replica,
mini-batch and micro-batch it belongs to, and ``owner`` which technique added it,
so no pass ever parses a name or infers who made an op, or when it runs, from
what it computes (a recomputed forward op computes forward work in the backward
stage).  Tensors carry the same ``tag``, the name they have in one copy of the
step (``local``), the parameter they belong to and their ``version``.

A GEMM or vector op may also take a tensor it reads *tile by tile* from another op
(``tile_sources``, one entry per read, :data:`NO_TILES` where it does not): from
the op that writes it, as each output tile leaves that op, or from an op that
loads it into an array's buffer, while the tile is still there.  Such a
:class:`TileStream` keeps the tile on chip, whatever the tensor's size, when one
tile fits (:mod:`accelsim.mapping.tile_reuse`), and the ops it links run as one
fused op (:mod:`accelsim.timing.tile_groups`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from accelsim.config.enums import CommGroup, VectorClass
from accelsim.graph.replace import copier as copier
from accelsim.graph.replace import replaced as replaced
from accelsim.network.collectives import Collective


class Phase(str, Enum):
    """What an op computes: the training step's forward work, an input gradient
    (``dX``), a weight gradient (``dW``), an optimizer update, a collective, or a
    technique's auxiliary work (a gradient predictor, a dropout pattern).

    The MAC and energy tables are by phase (``ops.csv``'s ``phase`` column); when
    the op runs is its :class:`Stage`.
    """

    FWD = "fwd"
    BWD_INPUT = "bwd_input"
    BWD_WEIGHT = "bwd_weight"
    UPDATE = "update"
    COMM = "comm"
    AUX = "aux"  # work a technique adds (e.g. gradient prediction)


class Stage(str, Enum):
    """When in the training step an op runs: the forward pass, the backward pass, the
    optimizer step, or the gradients' collectives.

    Most ops run in the stage of what they compute; a forward op recomputed for the
    backward pass runs in ``BACKWARD``, an update fused into the backward (or the
    next forward) pass in that stage, and a technique's auxiliary op where its
    technique puts it.  The stash is what the forward stage writes and the
    backward stage reads (:func:`~accelsim.graph.queries.stashed`).
    """

    FORWARD = "forward"
    BACKWARD = "backward"
    UPDATE = "update"
    COMMUNICATION = "communication"


STAGE_OF_PHASE: dict[Phase, Stage] = {
    Phase.FWD: Stage.FORWARD,
    Phase.BWD_INPUT: Stage.BACKWARD,
    Phase.BWD_WEIGHT: Stage.BACKWARD,
    Phase.UPDATE: Stage.UPDATE,
    Phase.COMM: Stage.COMMUNICATION,
}
"""The stage an op of each phase runs in unless its emitter says otherwise (an
auxiliary op has none: its technique names it)."""


class ParamKind(str, Enum):
    """What a trainable tensor is: the layer's weight matrix, a bias, a norm's scale
    and shift, or an embedding table."""

    WEIGHT = "weight"
    BIAS = "bias"
    NORM = "norm"
    EMBEDDING = "embedding"


@dataclass(frozen=True, slots=True)
class Tag:
    """Which copy of the step an op belongs to: data-parallel replica, pipeline
    mini-batch and micro-batch (all 0 in a plain single-processor step)."""

    replica: int = 0
    mini_batch: int = 0
    micro_batch: int = 0


ROOT = Tag()

CORE = ""
"""The ``owner`` of the step's own ops: lowering, placement, the optimizer and the
transfers they need.  An op a technique adds has the technique's registered name."""


WHOLE = -1
"""``GemmOp.part`` of a GEMM that is not split."""

NO_EXPERT = -1
"""``expert`` of an op or parameter that belongs to no expert of a ``moe`` layer."""

NO_TILES = -1
"""An entry of ``tile_sources`` for a read that takes no tile stream: the tensor
comes from wherever it is (DRAM, or on chip when the graph keeps it there)."""


class Epilogue(str, Enum):
    """Whether a vector op can consume an input tile by tile, as the op producing it
    emits the tiles (a fusion pass decides whether it does, see
    :mod:`accelsim.lowering.epilogues`).

    ``NONE``: it needs more than one tile at a time (pooling windows, softmax and
    layernorm rows, the loss), or fusing it is not modelled (optimizer updates, an
    LSTM cell, a technique's ops); ``ELEMENTWISE``: it works element by element
    (an activation and its derivative, a residual add, a gradient sum, dropout) or
    sums per channel (a bias gradient), so any tile order will do;
    ``BATCHNORM``: batchnorm, element-wise once its per-channel statistics are
    known before the tile arrives.
    """

    NONE = "none"
    ELEMENTWISE = "elementwise"
    BATCHNORM = "batchnorm"


class TensorKind(str, Enum):
    """Tensor class; sets the word size (see ``HardwareSpec.word_bytes``)."""

    ACTIVATION = "activation"
    WEIGHT = "weight"
    GRADIENT = "gradient"
    OPTIMIZER_STATE = "optimizer_state"


TensorKey = tuple[str, int]
"""A tensor's identity in a graph: its name and version (:attr:`Tensor.key`).  Every
set or table of tensors a pass or a report keeps (the stash, the tensors kept on
chip, producers, transfers, tile reuse) is by it."""


def described(key: TensorKey) -> str:
    """A tensor's key in words: its name, and its version after a first (``y (version 1)``)."""
    name, version = key
    return f"{name} (version {version})" if version else name


@dataclass(frozen=True, slots=True)
class Tensor:
    """A named tensor: its element count (whole batch) and word size.

    ``tag`` is the copy of the step it belongs to (a replica, a mini-batch and
    micro-batch), ``local`` its name in that copy ("" for a tensor that is not a
    copy: its ``name`` is its name in the step), and ``parameter`` the name in the
    step of the weight whose weight, gradient or optimizer state it
    is ("" for any other tensor).  ``version`` says which computation of the
    named value it is: 0 the step's, 1 and up a later one of the same value (an
    activation recomputed in the backward stage), a tensor of its own.
    """

    name: str
    kind: TensorKind
    elements: int
    word_bytes: int
    tag: Tag = ROOT
    local: str = ""
    parameter: str = ""
    version: int = 0

    @property
    def bytes(self) -> int:
        return self.elements * self.word_bytes

    @property
    def key(self) -> TensorKey:
        """Its identity: name and version."""
        return (self.name, self.version)

    @property
    def step_name(self) -> str:
        """Its name in the step it was copied from (its ``name`` when it is no copy)."""
        return self.local or self.name


@dataclass(frozen=True, slots=True)
class Access:
    """A read or write of ``elements`` elements of ``tensor`` (all of it by default)."""

    tensor: Tensor
    elements: int

    @property
    def bytes(self) -> int:
        return self.elements * self.tensor.word_bytes


def whole(tensor: Tensor) -> Access:
    """An access to every element of ``tensor``."""
    return Access(tensor, tensor.elements)


@dataclass(frozen=True, slots=True)
class GemmOp:
    """``count`` independent GEMMs ``C[m x n] = A[m x k] . B[k x n]`` on the array.

    ``a_elements`` and ``b_elements`` are the unique elements each GEMM reads
    from its operand tensors: less than ``m*k`` when A is an im2col view of a
    feature map, whose windows overlap.  ``unit`` names the array it runs on;
    ``part`` is which share of a GEMM whose rows are split between two processors
    it is (:func:`~accelsim.graph.passes.split_gemms`: 0 the moved rows, 1 the rest,
    :data:`WHOLE` for an unsplit GEMM); ``expert`` the expert of a ``moe`` layer whose
    work it is (:data:`NO_EXPERT`: none).  ``tile_sources`` is empty, or per operand
    (A, B) the op whose tiles it takes on chip (:data:`NO_TILES`: none).  ``groups``
    is the channel groups of the convolution it computes (1 for any other GEMM; a
    depthwise convolution's is its channels): each of its ``count`` GEMMs is one
    group's (or a share of one), which the mapper may run on the vector unit.
    """

    op_id: int
    name: str
    layer: str
    phase: Phase
    stage: Stage
    m: int
    n: int
    k: int
    count: int
    a: Tensor
    b: Tensor
    c: Tensor
    a_elements: int
    b_elements: int
    deps: tuple[int, ...]
    unit: str = "array"
    sources: tuple[tuple[int, ...], ...] = ()
    after: tuple[int, ...] = ()
    tag: Tag = ROOT
    owner: str = CORE
    part: int = WHOLE
    tile_sources: tuple[int, ...] = ()
    expert: int = NO_EXPERT
    groups: int = 1

    @property
    def macs(self) -> int:
        return self.m * self.n * self.k * self.count


@dataclass(frozen=True, slots=True)
class VectorOp:
    """An element-wise or reduction op on the vector unit.

    ``op_class`` says what it does to its data (the class whose fixed cost it pays,
    ``vector_unit.class_overhead_cycles``); ``epilogue`` whether it can consume an
    input tile by tile;
    ``tile_sources`` is empty, or per read the op whose tiles it takes on chip
    (:data:`NO_TILES`: none); ``expert`` the expert of a ``moe`` layer whose work it
    is (:data:`NO_EXPERT`: none).
    """

    op_id: int
    name: str
    layer: str
    phase: Phase
    stage: Stage
    elements: int
    ops_per_element: int
    reads: tuple[Access, ...]
    writes: tuple[Access, ...]
    deps: tuple[int, ...]
    sources: tuple[tuple[int, ...], ...] = ()
    after: tuple[int, ...] = ()
    tag: Tag = ROOT
    owner: str = CORE
    epilogue: Epilogue = Epilogue.NONE
    tile_sources: tuple[int, ...] = ()
    op_class: VectorClass = VectorClass.ELEMENTWISE
    expert: int = NO_EXPERT

    @property
    def vector_ops(self) -> int:
        return self.elements * self.ops_per_element


@dataclass(frozen=True, slots=True)
class CommOp:
    """A ``collective`` of ``tensor`` (the buffer :mod:`accelsim.network.collectives`
    sizes each kind by) across ``participants``, a broadcast's from ``root`` (None: the
    first participant); ``gradients`` are those ``tensor`` holds (the first replica's
    copies, the graph's parameters' own), more than one for a bucket of data parallelism.
    ``group`` is the parallelism whose group it spans (:class:`CommGroup`);
    ``group_size`` the processors of that group when ``participants`` are only the
    simulated ones of a symmetric step (:mod:`accelsim.timing.symmetry`; 0: all of
    them take part), which cut the pieces each gives and keeps.  ``shard`` is an
    all-gather's own share when it is a tensor of its own (a sequence-parallel rank's
    stashed share of a layer's input, gathered again in the backward stage: the stash
    holds the share, :func:`~accelsim.graph.queries.stashed_tensors`)."""

    op_id: int
    name: str
    layer: str
    phase: Phase
    stage: Stage
    tensor: Tensor
    participants: tuple[int, ...]
    deps: tuple[int, ...]
    sources: tuple[tuple[int, ...], ...] = ()
    after: tuple[int, ...] = ()
    tag: Tag = ROOT
    owner: str = CORE
    gradients: tuple[Tensor, ...] = ()
    collective: Collective = Collective.ALL_REDUCE
    root: int | None = None
    group: CommGroup = CommGroup.DATA
    shard: Tensor | None = None
    group_size: int = 0


@dataclass(frozen=True, slots=True)
class TransferOp:
    """A copy of ``elements`` of ``tensor`` from ``source`` to ``destination`` over a link."""

    op_id: int
    name: str
    layer: str
    phase: Phase
    stage: Stage
    tensor: Tensor
    elements: int
    source: int
    destination: int
    deps: tuple[int, ...]
    sources: tuple[tuple[int, ...], ...] = ()
    after: tuple[int, ...] = ()
    tag: Tag = ROOT
    owner: str = CORE

    @property
    def bytes(self) -> int:
        return self.elements * self.tensor.word_bytes


Op = GemmOp | VectorOp | CommOp | TransferOp


@dataclass(frozen=True, slots=True)
class TileStream:
    """Op ``consumer`` takes ``tensor``, its read number ``read`` (in
    :func:`~accelsim.graph.queries.reads_of` order), tile by tile from op ``source``:
    in the order ``source`` writes it (``source`` produces it) or loads it into an
    array's buffer (``source`` reads it too).  Made from ``consumer.tile_sources``
    by :func:`~accelsim.graph.queries.tile_streams`."""

    consumer: int
    read: int
    tensor: Tensor
    source: int


class UpdateTiming(str, Enum):
    """When a parameter's optimizer update runs (optimizer fusion).

    ``EAGER``: after the whole backward pass (``loss.backward(); optimizer.step()``);
    ``BACKWARD``: as soon as its gradient is final and the ops reading the old
    weight have read it; ``FORWARD``: in the step graph, just before the layer's
    next forward pass, with the previous step's gradient (placement adds no
    update for it).
    """

    EAGER = "eager"
    BACKWARD = "backward"
    FORWARD = "forward"


@dataclass(frozen=True)
class Parameter:
    """A trainable tensor with its gradient and the op that finishes the gradient.

    ``rows`` is the tensor's leading (output-channel) dimension; ``grad_op`` is -1
    while no op computes the gradient.  ``updated_elements`` is how many of its
    elements the optimizer updates (-1: all; fewer when a technique skips groups),
    ``monitor_groups`` the parameter groups whose convergence the update monitors
    (0: none) for the technique ``monitor_owner`` (which owns the monitor's op),
    ``update`` when the update runs, and ``shares_weight_tiles`` whether a
    backward-fused update takes the weight's tiles from the ``dX`` GEMM that loaded
    them (then ``dX``, ``dW`` and the update run as one op) or reads the weight from
    DRAM (``dX`` runs on its own).  ``expert`` is the expert of a ``moe`` layer it
    belongs to (:data:`NO_EXPERT`: none).
    """

    layer: str
    weight: Tensor
    gradient: Tensor
    grad_op: int
    kind: ParamKind
    rows: int
    updated_elements: int = -1
    monitor_groups: int = 0
    update: UpdateTiming = UpdateTiming.EAGER
    monitor_owner: str = CORE
    shares_weight_tiles: bool = True
    expert: int = NO_EXPERT

    @property
    def update_elements(self) -> int:
        """Elements the optimizer updates in a step."""
        return self.weight.elements if self.updated_elements < 0 else self.updated_elements


@dataclass(frozen=True)
class OpGraph:
    """A training step as an op DAG placed on processors.

    Attributes:
        ops: Ops in program (topological) order; ``ops[i].op_id == i``.
        processor: The processor of each op.
        on_chip: Tensors kept on chip for their whole life (no DRAM traffic), by key.
        stashed: Activations saved in the forward stage and read back in the backward
            stage, by key (:func:`~accelsim.graph.queries.stashed`).
        parameters: Trainable tensors (of processor 0's replica).
        priority: Order in which a unit picks among its ready ops (lower first),
            before the ready order of :mod:`accelsim.timing.ready`; empty: that order
            alone.
    """

    ops: tuple[Op, ...]
    processor: tuple[int, ...]
    on_chip: frozenset[TensorKey] = field(default_factory=frozenset)
    stashed: frozenset[TensorKey] = field(default_factory=frozenset)
    parameters: tuple[Parameter, ...] = ()
    priority: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if len(self.processor) != len(self.ops):
            raise ValueError("one processor per op is required")
        if self.priority and len(self.priority) != len(self.ops):
            raise ValueError("one priority per op is required")
        for i, op in enumerate(self.ops):
            deps = op.deps
            if op.op_id != i or (deps and (min(deps) < 0 or max(deps) >= i)):
                raise ValueError(f"op {op.name} is out of program order")
