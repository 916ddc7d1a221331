"""The run settings that the simulator reads after loading, as plain enums.

Kept apart from the pydantic specs of :mod:`accelsim.config.run` (which re-exports
them) so that code that only reads a setting, and ``accelsim layer``, which
validates no run file, do not load those specs.
"""

from __future__ import annotations

from enum import Enum


class OptimizerKind(str, Enum):
    """Optimizer; each keeps ``state_tensors`` extra tensors per parameter."""

    SGD = "sgd"
    MOMENTUM = "momentum"
    ADAM = "adam"

    @property
    def state_tensors(self) -> int:
        return {"sgd": 0, "momentum": 1, "adam": 2}[self.value]

    @property
    def ops_per_element(self) -> int:
        # SGD: w -= lr*g (mul+sub).  Momentum: v = mu*v + g; w -= lr*v (4 ops).
        # Adam: two moment updates, bias correction, sqrt, divide, axpy (~13 ops).
        return {"sgd": 2, "momentum": 4, "adam": 13}[self.value]


class MasterWeights(str, Enum):
    """Whether the optimizer keeps an fp32 master copy of every weight: the update
    reads and writes the master (an optimizer-state tensor of 4-byte words, whatever
    the optimizer state's word size) and writes the array's weight from it."""

    NONE = "none"
    FP32 = "fp32"

    @property
    def word_bytes(self) -> int:
        """Bytes of the master copy a weight element: 4 for fp32, 0 for none."""
        return 4 if self is MasterWeights.FP32 else 0


class StridedDx(str, Enum):
    """How the input gradient of a strided conv is computed.

    ``skip_zeros`` decomposes the transposed conv into stride-phase sub-convs
    that never multiply the inserted zeros (MACs equal the forward MACs);
    ``zero_insert`` runs one dense conv over the zero-inserted output gradient.
    """

    SKIP_ZEROS = "skip_zeros"
    ZERO_INSERT = "zero_insert"


class EpilogueFusion(str, Enum):
    """Which vector ops take their input tile by tile, on chip, from the op producing it
    (:mod:`accelsim.lowering.epilogues`).

    ``none``: every vector op streams its tensors through DRAM; ``elementwise``:
    activations and their derivatives, residual adds and gradient sums, dropout and
    bias gradients; ``all``: batchnorm too, as if its per-channel statistics were
    known before its input arrives (running statistics).
    """

    NONE = "none"
    ELEMENTWISE = "elementwise"
    ALL = "all"


class VectorClass(str, Enum):
    """What a vector op does to its data, for the vector unit's fixed cost per class
    (``vector_unit.class_overhead_cycles``): every vector op a lowering rule, the
    optimizer or a technique emits names its class.

    ``elementwise``: each output element from the same element of each input (an
    add, an activation, dropout, an optimizer update); ``transcendental``: the same
    with an exponential, a reciprocal root or a sine per element (a softmax's
    exponentials, rotary embeddings' sines and cosines); ``reduce``: many elements
    to one (a sum per channel or row, a loss, a norm of the gradients, pooling);
    ``data_movement``: elements copied to other places, none computed (a transpose,
    a concatenation, a slice, padding, a gather); ``norm``: statistics of its input,
    then every element normalised by them (batch, layer, group and RMS norms and
    their gradients).
    """

    ELEMENTWISE = "elementwise"
    TRANSCENDENTAL = "transcendental"
    REDUCE = "reduce"
    DATA_MOVEMENT = "data_movement"
    NORM = "norm"


class RunMode(str, Enum):
    """What a run simulates: a training step, or a forward pass alone.

    ``training``: forward, loss, backward and optimizer updates; ``forward``: the
    forward pass of an inference or a profiled forward (no loss, no backward, no
    update, dropout off, no stash kept).
    """

    TRAINING = "training"
    FORWARD = "forward"


class AssignmentPolicy(str, Enum):
    """How ops are placed on processors."""

    SINGLE = "single"
    DATA_PARALLEL = "data_parallel"


class PsumPolicy(str, Enum):
    """What ws and is do with partial sums (os keeps them in the PEs).

    ``chunk`` streams the moving dimension in chunks whose partial sums fit in
    the ofmap buffer, so they never leave the chip; ``spill`` streams it whole,
    so partial sums that do not fit go to DRAM after every row fold and are
    read back.
    """

    CHUNK = "chunk"
    SPILL = "spill"


class EngineKind(str, Enum):
    """Which event engine runs a step; both give the same trace.

    ``simpy`` is the readable reference (:mod:`accelsim.timing.engine`);
    ``compiled`` runs the same events in a Numba loop
    (:mod:`accelsim.timing.compiled`); ``auto`` picks the compiled engine when
    its cached compilation is on disk and the step is large enough to pay for
    loading Numba (:mod:`accelsim.timing.engines`).
    """

    AUTO = "auto"
    SIMPY = "simpy"
    COMPILED = "compiled"


DEFAULT_CHUNKS_PER_OP = 4096
"""Tile groups per op at most unless a run file sets ``timing.chunks_per_op``."""

DEFAULT_GROUP_CYCLES = 4096
"""Longest tile group in cycles unless a run file sets ``timing.group_cycles``
(:mod:`accelsim.timing.groups`); ``None`` cuts each op into groups by the per-op
rule (:mod:`accelsim.timing.costs`).  4,096 with 4,096 groups per op at most keeps
every model of the suite within 0.5 % of its converged step (docs/model/engine.md)."""


class CompileMode(str, Enum):
    """How a step is compiled into kernels (:mod:`accelsim.lowering.program`).

    ``eager``: every op is a kernel of its own and pays ``timing.op_overhead_cycles``;
    ``fused``: as an XLA-like compiler runs it: chains of vector ops fuse into their
    producer, attention runs as one flash-attention kernel per pass, and the fixed
    costs are paid once per kernel and once per program.
    """

    EAGER = "eager"
    FUSED = "fused"


class AttentionKernels(str, Enum):
    """How a compiled program (``lowering.compile: fused``) runs attention's core.

    ``flash``: one flash-attention kernel per pass, its score tiles on chip
    (:mod:`accelsim.lowering.flash_attention`); ``separate``: ``QK^T``, the softmax
    chain and ``AV`` as kernels of their own with the scores through DRAM, as XLA
    compiles attention written as separate operations (eager PyTorch attention).
    """

    FLASH = "flash"
    SEPARATE = "separate"


class CommGroup(str, Enum):
    """The parallelism a collective's participants are a group of: data (replicas
    summing a gradient), tensor (the ranks of a tensor-parallel group summing an
    activation or an input gradient) or expert (the ranks of an expert-parallel group
    exchanging routed tokens by all-to-all)."""

    DATA = "data"
    TENSOR = "tensor"
    EXPERT = "expert"
