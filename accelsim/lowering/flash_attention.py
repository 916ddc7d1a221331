"""Fused attention (``lowering.compile: fused``): ``QK^T``, scale, mask, softmax and
``AV`` as one kernel whose score tiles never leave the chip, flash-attention style.

The kernels follow the TPU flash-attention kernel of JAX's Pallas library
(``jax/experimental/pallas/ops/tpu/flash_attention.py``, Apache-2.0; the facts, not
the code), itself FlashAttention-2's algorithm (Dao, "FlashAttention-2: Faster
Attention with Better Parallelism and Work Partitioning", 2023, Algorithms 1 and 2):

* **Forward, one kernel per layer.**  For each block of queries, the key and value
  blocks stream past it: ``S = Q_i K_j^T`` on the array, an online softmax (running
  row maximum and sum, the output accumulator rescaled) on the vector unit, then
  ``O_i += P V_j`` on the array.  Q is read once, K and V once per query block, O
  written once, with each query row's two statistics (maximum and sum, fp32).
* **Backward, as Pallas does it.**  ``D = rowsum(dO * O)`` (a vector op), then two
  kernels that both recompute the scores from Q and K (never reading a stored
  ``heads x S x S`` tensor): the ``dK, dV`` kernel (a key block resident, the query
  blocks streaming past: ``S^T``, ``dP^T = V dO^T``, ``dV += P^T dO``, ``dK += dS^T
  Q``) and the ``dQ`` kernel (a query block resident: ``S``, ``dP = dO V^T``, ``dQ +=
  dS K``).  So the backward pass does ``QK^T`` twice and ``dO V^T`` twice: the
  recomputed ``QK^T`` GEMMs are forward work (``Phase.FWD``) in the backward stage.
* **Causal attention** runs a score block when its bottom-left corner is on or below
  the diagonal (Pallas's ``below_or_on_diag``); with square blocks that is block
  ``(i, j)`` for ``j <= i``: ``T(T + 1) / 2`` of the ``T^2`` blocks, the diagonal ones
  computed whole and masked element by element.
* **Cross-attention** (Q from one input, K and V from another): the keys' sequence is
  blocked apart from the queries' (:attr:`AttentionTiling.key_blocks`), every query
  block meeting every key block; the ``dK, dV`` kernel's block rows are one per key
  block.
* **Grouped-query attention** (:func:`kv_heads`): the query heads sharing a key/value
  head are packed into one query block (``group x block`` rows), so each key and value
  block is loaded once per group (our choice: Pallas's kernel takes as many key/value
  heads as query heads).

Each kernel is GEMMs and vector ops linked by tile streams (one tile group, timed as
one op by :mod:`accelsim.timing.tile_groups`); the scores, probabilities and their
gradients are tensors kept on chip.  A kernel's GEMM is ``count`` equal block-row
GEMMs, one per (sample, key/value head, block): under a causal mask the block rows
differ in length (query block ``i`` meets ``i + 1`` key blocks), and each GEMM takes
their mean, ``block x (blocks + 1) / 2`` keys, which keeps the MACs and the bytes of
the blocks exact (the sum over block rows is linear in their length) and the fold
count to within the rounding of one block row.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from accelsim.config.enums import VectorClass
from accelsim.config.hardware import HardwareSpec
from accelsim.graph.ops import Access, Phase, Stage, Tensor, TensorKind
from accelsim.units import kib_to_bytes
from accelsim.workload import model as wm

if TYPE_CHECKING:
    from accelsim.lowering.context import StepContext

MAX_BLOCK = 128
"""Query and key positions per block at most: the default of every block size of
Pallas's TPU kernel (``BlockSizes.get_default``), one 128x128 MXU tile."""
MIN_BLOCK = 8
"""The fewest positions per block (our choice: one sublane group of a TPU vector
register, 8 rows), whatever the buffers hold."""
STAT_BYTES = 4
"""Each query row's statistics (row maximum, row sum; ``D`` in backward) are fp32."""
FWD_SCORE_OPS = 5
"""Vector operations per score in the forward kernel: scale, row maximum, subtract,
exponential, row sum (a causal mask adds a select on every block that runs, as
Pallas's kernel applies it)."""
BWD_SCORE_OPS = 5
"""Per recomputed score in a backward kernel: scale, subtract the log-sum, exponential
(``P``), then ``dS = P * (dP - D)``: subtract, multiply."""
RESCALE_OPS = 2
"""Per output element and key block: the accumulator rescaled and the new block added."""
DSUM_OPS = 2
"""``D = rowsum(dO * O)``: a multiply and an add per output element."""


def kv_heads(layer: wm.Attention) -> int:
    """Key/value heads of an attention layer: its ``kv_heads`` when it has them
    (grouped-query attention), else one per query head."""
    return layer.key_value_heads


@dataclass(frozen=True)
class AttentionBudget:
    """The on-chip bytes a fused attention kernel's blocks may take, per buffer: the
    query block in the ifmap buffer, the key and value blocks in the filter buffer, the
    fp32 scores, output accumulator and row statistics in the ofmap buffer."""

    ifmap_bytes: int
    filter_bytes: int
    ofmap_bytes: int

    @classmethod
    def of(cls, hw: HardwareSpec) -> AttentionBudget:
        b = hw.buffers
        return cls(kib_to_bytes(b.ifmap_kib), kib_to_bytes(b.filter_kib), kib_to_bytes(b.ofmap_kib))


@dataclass(frozen=True)
class AttentionTiling:
    """How one fused attention layer is blocked.

    Attributes:
        block: Query positions per query block, and keys per key block.
        blocks: Blocks along the sequence (``ceil(steps / block)``; the last one
            padded).
        group: Query heads per key/value head.
        head_dim: Width of a head.
        causal: Whether blocks above the diagonal are skipped.
        key_block: Keys per key block of cross-attention, whose keys are a sequence of
            their own (0: ``block``, self-attention).
        key_blocks: Blocks along that sequence (0: ``blocks``).
    """

    block: int
    blocks: int
    group: int
    head_dim: int
    causal: bool
    key_block: int = 0
    key_blocks: int = 0

    @property
    def k_block(self) -> int:
        """Keys per key block."""
        return self.key_block or self.block

    @property
    def k_blocks(self) -> int:
        """Key blocks along the keys' sequence."""
        return self.key_blocks or self.blocks

    @property
    def block_pairs(self) -> int:
        """Score blocks computed per (sample, key/value head) and query head of the group."""
        t = self.blocks
        return t * (t + 1) // 2 if self.causal else t * self.k_blocks

    @property
    def keys(self) -> int:
        """Keys each query block meets, on average."""
        return self.block_pairs * self.k_block // self.blocks

    @property
    def queries(self) -> int:
        """Queries each key block meets, on average (``keys`` under self-attention)."""
        return self.block_pairs * self.block // self.k_blocks


def tiling(
    budget: AttentionBudget,
    steps: int,
    heads: int,
    kv: int,
    head_dim: int,
    causal: bool,
    word: int,
    keys: int = 0,
) -> AttentionTiling:
    """The largest block of at most :data:`MAX_BLOCK` positions (a power of two, or the
    whole sequence when shorter) whose working set fits the buffers double-buffered:
    ``2 x group x block x head_dim`` words of queries, ``2 x 2 x block x head_dim`` of
    keys and values, and ``2 x group x block x (block + head_dim + 2)`` fp32 scores,
    accumulator and statistics; at least :data:`MIN_BLOCK`.  Cross-attention's
    ``keys`` (a sequence of their own; 0: self-attention) are blocked alike, each
    sequence's block the whole of it when shorter."""
    group = heads // kv

    def fits(b: int) -> bool:
        return (
            2 * group * b * head_dim * word <= budget.ifmap_bytes
            and 4 * b * head_dim * word <= budget.filter_bytes
            and 2 * group * b * (b + head_dim + 2) * STAT_BYTES <= budget.ofmap_bytes
        )

    block = MAX_BLOCK
    while block > MIN_BLOCK and not fits(block):
        block //= 2
    query_block = min(block, steps)
    tiles = AttentionTiling(query_block, math.ceil(steps / query_block), group, head_dim, causal)
    if not keys:
        return tiles
    key_block = min(block, keys)
    return dataclasses.replace(tiles, key_block=key_block, key_blocks=math.ceil(keys / key_block))


@dataclass(frozen=True)
class FusedAttention:
    """One attention layer's fused kernels: where they read and write."""

    name: str
    tiling: AttentionTiling
    samples: int
    kv: int
    qkv: Tensor
    out: Tensor
    qk: Tensor | None = None
    """Where the kernels read K (and Q, unless ``q`` says), when not from ``qkv``: Q
    and K rotated by a rotary embedding, or the keys' own projection when keys and
    values come from two inputs; V is read from ``qkv``."""
    q: Tensor | None = None
    """Where the kernels read Q under cross-attention, K and V then read from ``qkv``
    (the projection of the keys' sequence) unless ``qk`` says where K is."""

    @property
    def queries(self) -> Tensor:
        """The tensor the kernels read Q from."""
        return self.q if self.q is not None else self.keys

    @property
    def keys(self) -> Tensor:
        """The tensor the kernels read K from."""
        return self.qkv if self.qk is None else self.qk

    @property
    def instances(self) -> int:
        """Block-row GEMMs per kernel GEMM: one per (sample, key/value head, block)."""
        return self.samples * self.kv * self.tiling.blocks

    @property
    def key_instances(self) -> int:
        """Block-row GEMMs of a kernel whose key block stays resident: one per (sample,
        key/value head, key block)."""
        return self.samples * self.kv * self.tiling.k_blocks

    @property
    def scores(self) -> int:
        """Score elements a kernel computes."""
        t = self.tiling
        return self.samples * self.kv * t.group * t.block_pairs * t.block * t.k_block

    @property
    def rows(self) -> int:
        """Query rows, every head's, padded to whole blocks."""
        t = self.tiling
        return self.samples * self.kv * t.group * t.blocks * t.block

    def score_ops(self, base: int) -> int:
        """Vector operations per score: ``base``, and a select under a causal mask."""
        return base + self.tiling.causal

    def on_chip(self, ctx: StepContext, suffix: str, kind: TensorKind) -> Tensor:
        """A score-sized tensor that never leaves the chip."""
        return ctx.b.keep_on_chip(ctx.t(f"{self.name}.{suffix}", kind, self.scores))


def forward(ctx: StepContext, attn: FusedAttention) -> Tensor:
    """Emit the forward kernel (``out`` from ``qkv``); returns the row statistics."""
    b, t, name = ctx.b, attn.tiling, attn.name
    rows, dh, keys, count = t.group * t.block, t.head_dim, t.keys, attn.instances
    stats = Tensor(f"{name}.stats", TensorKind.ACTIVATION, 2 * attn.rows, STAT_BYTES)
    scores = attn.on_chip(ctx, "scores", TensorKind.ACTIVATION)
    probs = attn.on_chip(ctx, "probs", TensorKind.ACTIVATION)
    q, k = attn.queries, attn.keys
    qk = b.gemm(f"{name}.qk.fwd", name, Phase.FWD, rows, keys, dh, count, q, k, scores)
    # The accumulator's rescaling, 2 ops per output element and key block, spread over
    # the block's scores (block x key block of them for block x head_dim outputs).
    rescale = -(-RESCALE_OPS * dh // t.k_block)
    ops = attn.score_ops(FWD_SCORE_OPS) + rescale
    softmax = b.vector(
        f"{name}.softmax.fwd", name, Phase.FWD, attn.scores, ops, [scores], [probs, stats],
        op_class=VectorClass.NORM,
    )  # fmt: skip
    b.take_tiles(softmax, scores, qk)
    av = b.gemm(f"{name}.av.fwd", name, Phase.FWD, rows, dh, keys, count, probs, attn.qkv, attn.out)
    b.take_tiles(av, probs, softmax)
    return stats


def backward(
    ctx: StepContext,
    attn: FusedAttention,
    stats: Tensor,
    d_out: Tensor,
    grads: tuple[Tensor, Tensor, Tensor],
) -> None:
    """Emit the backward kernels: ``D``, then the ``dK, dV`` and the ``dQ`` kernels,
    each adding its part of the gradient it makes to where ``grads`` say ``dQ``, ``dK``
    and ``dV`` go (parts of one tensor, or of two: ``dQ`` and ``dK`` of rotated
    queries and keys, or cross-attention's ``dQ`` and ``dKV``)."""
    name = attn.name
    dsum = Tensor(f"{name}.dsum", TensorKind.GRADIENT, attn.rows, STAT_BYTES)
    ctx.b.vector(
        f"{name}.dsum",
        name,
        Phase.BWD_INPUT,
        attn.out.elements,
        DSUM_OPS,
        [d_out, attn.out],
        [dsum],
        op_class=VectorClass.REDUCE,
    )
    _dkv_kernel(ctx, attn, stats, dsum, d_out, grads[1:])
    _dq_kernel(ctx, attn, stats, dsum, d_out, grads[0])


def _dkv_kernel(
    ctx: StepContext,
    attn: FusedAttention,
    stats: Tensor,
    dsum: Tensor,
    d_out: Tensor,
    grads: tuple[Tensor, Tensor],
) -> None:
    """A key block resident, every query block it meets streaming past: ``S^T`` and
    ``dP^T`` recomputed, ``dV`` and ``dK`` accumulated and written once (``grads``:
    where ``dK`` and ``dV`` go)."""
    b, t, name = ctx.b, attn.tiling, attn.name
    q, k, (dk_out, dv_out) = attn.queries, attn.keys, grads
    queries, dh, count, block = t.group * t.queries, t.head_dim, attn.key_instances, t.k_block
    bi = Phase.BWD_INPUT
    scores = attn.on_chip(ctx, "scores_t", TensorKind.ACTIVATION)
    dprobs = attn.on_chip(ctx, "dprobs_t", TensorKind.GRADIENT)
    probs = attn.on_chip(ctx, "probs_t", TensorKind.ACTIVATION)
    dscores = attn.on_chip(ctx, "dscores_t", TensorKind.GRADIENT)
    with b.in_stage(Stage.BACKWARD):
        s = b.gemm(f"{name}.qk.dkv", name, Phase.FWD, block, queries, dh, count, k, q, scores)
    dp = b.gemm(f"{name}.dp.dkv", name, bi, block, queries, dh, count, attn.qkv, d_out, dprobs)
    # Each key block reads the statistics and D of every query row it meets.
    met = attn.scores // block
    v = b.vector(
        f"{name}.softmax.dkv",
        name,
        bi,
        attn.scores,
        attn.score_ops(BWD_SCORE_OPS),
        [scores, dprobs, Access(stats, 2 * met), Access(dsum, met)],
        [probs, dscores],
        op_class=VectorClass.TRANSCENDENTAL,  # P = exp(S - L) from the kept statistics
    )
    b.take_tiles(v, scores, s)
    b.take_tiles(v, dprobs, dp)
    dv = b.gemm(
        f"{name}.av.dv", name, bi, block, dh, queries, count, probs, d_out, dv_out, partial=True
    )
    b.take_tiles(dv, probs, v)
    b.take_tiles(dv, d_out, dp)
    dk = b.gemm(
        f"{name}.qk.dk", name, bi, block, dh, queries, count, dscores, q, dk_out, partial=True
    )
    b.take_tiles(dk, dscores, v)
    b.take_tiles(dk, q, s)


def _dq_kernel(
    ctx: StepContext,
    attn: FusedAttention,
    stats: Tensor,
    dsum: Tensor,
    d_out: Tensor,
    dq_out: Tensor,
) -> None:
    """A query block resident, its key blocks streaming past: ``S`` and ``dP``
    recomputed, ``dQ`` accumulated and written once (to ``dq_out``)."""
    b, t, name = ctx.b, attn.tiling, attn.name
    q, k = attn.queries, attn.keys
    rows, dh, keys, count = t.group * t.block, t.head_dim, t.keys, attn.instances
    bi = Phase.BWD_INPUT
    scores = attn.on_chip(ctx, "scores_q", TensorKind.ACTIVATION)
    dprobs = attn.on_chip(ctx, "dprobs_q", TensorKind.GRADIENT)
    dscores = attn.on_chip(ctx, "dscores_q", TensorKind.GRADIENT)
    with b.in_stage(Stage.BACKWARD):
        s = b.gemm(f"{name}.qk.dq", name, Phase.FWD, rows, keys, dh, count, q, k, scores)
    dp = b.gemm(f"{name}.dp.dq", name, bi, rows, keys, dh, count, d_out, attn.qkv, dprobs)
    v = b.vector(
        f"{name}.softmax.dq",
        name,
        bi,
        attn.scores,
        attn.score_ops(BWD_SCORE_OPS),
        [scores, dprobs, stats, dsum],
        [dscores],
        op_class=VectorClass.TRANSCENDENTAL,
    )
    b.take_tiles(v, scores, s)
    b.take_tiles(v, dprobs, dp)
    dq = b.gemm(
        f"{name}.qk.dq_grad", name, bi, rows, dh, keys, count, dscores, k, dq_out, partial=True
    )
    b.take_tiles(dq, dscores, v)
    b.take_tiles(dq, k, s)
