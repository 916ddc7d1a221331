"""A pipeline plan's step (``run.parallel.pipeline`` above 1), simulated at pass
granularity and composed by :func:`accelsim.timing.pipeline_step.compose`.

The processors are ``data x pipeline x tensor``, tensor innermost: processor ``(r p +
s) t + k`` is rank ``k`` of stage ``s`` of data-parallel replica ``r``, so a stage's
tensor-parallel group is ``t`` consecutive processors (inside a node of a hierarchy
whose nodes hold a multiple of ``t``) and consecutive stages are ``t`` apart.

One micro-batch's step of one rank is placed on the first stage's tensor group
(:func:`~accelsim.mapping.tensor_placement.tensor_parallel`, its all-reduces over the
group, or on one processor) with its updates; with expert parallelism (``e`` above 1)
on the first stage's expert group instead: the tensor groups of replicas ``0 .. e -
1``, ``p t`` processors apart, each ``moe`` layer's all-to-alls over the ranks of one
tensor position (:func:`~accelsim.mapping.expert_placement.expert_group`), so a pass
holds its all-to-alls, timed on the links of the processors they join (the first
stage's; every stage's passes take these cycles); each model chunk's forward ops and its
backward ops (by layer, :mod:`accelsim.mapping.pipeline_stages`; what a technique
recomputes runs in the backward; a collective of the tensor group in the pass of the
ops it waits for) are simulated alone with the engine, once per
distinct chunk (chunks whose ops have the same shapes, in the same order, share one
simulation: typically the first, the middle ones and the last), and each stage's
updates likewise.  Every micro-batch's pass takes these cycles.

Between chunks, each rank sends its peer rank of the next chunk's stage the
activations the next chunk's forward reads of the chunk's forward output (``b s h``
words at the activation precision for a transformer), and back their gradient (as
many words at the gradient precision; the graph's partial sums of it are one tensor
on the wire): every rank of every replica at once, timed
by :func:`accelsim.network.cost.step_cycles` (their sharing of links included), each
transfer holding the links of replica 0's rank 0 route.  A stage's gradients (one
rank's) are all-reduced over its data-parallel group after its last backward (in
buckets of ``data_parallel.bucket_bytes`` one after the other, or as one buffer),
timed by :func:`accelsim.network.cost.cycles`: they overlap the other stages' passes,
not their own stage's.  With expert parallelism the stage's dense gradients are
all-reduced so, then its experts' over the ``data / e`` replicas holding the same
experts (none when ``e`` is ``data``), one after the other.  Under ZeRO stages 1 and
2 (``run.parallel.zero``, as Megatron-LM's distributed optimizer shards each stage's
optimizer over its data-parallel group) the all-reduce is a reduce-scatter of the same buckets, the
stage's updates are simulated on its shard (``ceil(elements / d)`` of every tensor
they read and write, :func:`~accelsim.mapping.zero_placement.on_shard`), and an
all-gather of its updated weights (each bucket's, at the weight precision, one after
the other) follows, all by the same closed form.  A stage sums every weight's
gradient its passes read (the last stage its copy of an embedding table tied to the
LM head, as Megatron-LM does); the all-reduce of a tied table's gradient between the
first and the last stage is not modelled.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from accelsim.config.hardware import HardwareSpec
from accelsim.config.run import RunSpec
from accelsim.graph.ops import (
    CORE,
    NO_EXPERT,
    CommOp,
    GemmOp,
    Op,
    OpGraph,
    Phase,
    Stage,
    TensorKind,
    TransferOp,
    VectorOp,
)
from accelsim.graph.passes import subgraph
from accelsim.graph.queries import reads_of, writes_of
from accelsim.mapping.expert_placement import expert_group
from accelsim.mapping.pipeline_stages import PipelineCut
from accelsim.mapping.placement import StepGraph, buckets, single
from accelsim.mapping.tensor_placement import tensor_parallel
from accelsim.mapping.zero_placement import on_shard
from accelsim.network.collectives import Collective, Transfer
from accelsim.network.cost import cycles, step_cycles
from accelsim.network.topology import Network
from accelsim.timing.pipeline_step import (
    ChunkPasses,
    Hop,
    PassCycles,
    PipelineStep,
    PipelineTimes,
    compose,
)

Simulated = Callable[[OpGraph], int]
"""The cycles of a placed graph simulated alone with the run's engine."""

KEPT_CUTS = 4
"""Cuts (and stages) of a rank graph whose op lists a :class:`PassMemo` keeps, the
least recently used dropped first: each holds lists of the graph's op ids (megabytes on
a graph of 32 tensor ranks), and a plan search runs the plans of one cut one after the
other (its ZeRO stages), so a dropped cut costs a plan that comes back to it one pass
over the graph's ops, not a simulation (:attr:`PassMemo.cycles` keeps every pass's
cycles)."""

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass
class PassMemo:
    """What the pipeline steps of one rank graph share whatever their pipeline degree,
    schedule, ZeRO stage or data-parallel degree (:mod:`accelsim.driver.pipeline_memo`
    keeps one per rank graph for a plan search's candidates): the graph, each cut's
    chunk ops and distinct passes, each stage's trained parameters by its layers, the
    cycles of every subgraph simulated, by its ops' signature (and the replicas its
    updates are sharded over, 0 for none), each stage's data-parallel
    work by its chunks, place and replicas, each transfer between stages and each op's
    kind and sizes (:func:`_signature`'s text).  The cuts' and stages' op lists are kept
    for the last :data:`KEPT_CUTS` only, and a subgraph's signature is a 20-byte digest,
    not a tuple as long as the subgraph: what the memo keeps beyond the graph, its ops'
    kinds and those op lists is numbers, a few per pass, stage and hop of a plan."""

    graph: OpGraph | None = None
    cuts: OrderedDict[tuple[tuple[str, ...], ...], tuple[_ChunkOps, tuple[ChunkPasses, ...]]] = (
        field(default_factory=OrderedDict)
    )
    stages: OrderedDict[tuple[tuple[str, ...], ...], _StageWork] = field(
        default_factory=OrderedDict
    )
    cycles: dict[tuple[bytes, int], int] = field(default_factory=dict)
    sums: dict[tuple[object, ...], _StageSums] = field(default_factory=dict)
    hops: dict[tuple[int, ...], Hop] = field(default_factory=dict)
    kinds: dict[int, bytes] = field(default_factory=dict)

    def rank_graph(self, make: Callable[[], OpGraph]) -> OpGraph:
        """The rank graph, made once."""
        if self.graph is None:
            self.graph = make()
        return self.graph

    def timed(self, simulated: Simulated, ids: Sequence[int], shard: int = 0) -> int:
        """The cycles of the graph's ops ``ids`` simulated alone (their updates on a
        ``1 / shard`` shard when ``shard`` is above 0), simulated once for every set of
        ops of the same :func:`_signature` (a middle stage's update and another's)."""
        assert self.graph is not None
        key = (_signature(self.graph, ids, self.kinds), shard)
        if key not in self.cycles:
            sub = subgraph(self.graph, ids)
            if shard:
                shards = tuple(
                    on_shard(op, shard)
                    if isinstance(op, VectorOp) and op.phase is Phase.UPDATE
                    else op
                    for op in sub.ops
                )
                sub = dataclasses.replace(sub, ops=shards)
            self.cycles[key] = simulated(sub)
        return self.cycles[key]


def processor_of(replica: int, stage: int, rank: int, stages: int, tensor: int) -> int:
    """The processor of ``rank`` of ``stage`` of data-parallel ``replica`` (the
    module's order: tensor innermost, then pipeline, then data)."""
    return (replica * stages + stage) * tensor + rank


def rank_step(run: RunSpec, hw: HardwareSpec, step: StepGraph, micro_batch: int) -> OpGraph:
    """One micro-batch's step on one tensor-parallel group (processors ``0 .. t - 1``),
    or with expert parallelism on the first stage's expert group (its ``e`` replicas'
    tensor groups), with its updates."""
    t = 1 if run.parallel is None else run.parallel.tensor
    if run.parallel is not None and run.parallel.expert > 1:
        return expert_group(step, micro_batch, run, hw, run.parallel.pipeline * t)
    if t == 1:
        return single(step(micro_batch), run.optimizer, hw.word_bytes)
    return tensor_parallel(step, micro_batch, t, t, run.optimizer, hw.word_bytes)


def pipeline_step(
    run: RunSpec,
    hw: HardwareSpec,
    network: Network,
    cut: PipelineCut,
    graph: OpGraph,
    micro_batches: int,
    simulated: Simulated,
    memo: PassMemo | None = None,
) -> PipelineStep:
    """The step of ``run``'s pipeline plan, ``graph`` being :func:`rank_step`'s (and
    ``memo``'s, which keeps what other plans of the graph reuse)."""
    plan = run.parallel
    assert plan is not None
    memo = PassMemo(graph) if memo is None else memo
    assert memo.graph is graph
    p, t = cut.stages, plan.tensor
    data = hw.processors // (p * t)
    key = tuple(tuple(chunk) for chunk in cut.chunks)

    def chunked() -> tuple[_ChunkOps, tuple[ChunkPasses, ...]]:
        ops = _chunk_ops(graph, cut)
        return ops, _chunk_passes(graph, ops, simulated, memo)

    ops, distinct = _recent(memo.cuts, key, chunked)
    passes = [PassCycles(0, 0)] * len(cut.chunks)
    for chunk in distinct:
        for g in chunk.chunks:
            passes[g] = chunk.passes
    elements = _crossing(graph, ops.rank_zero)
    forward_bytes = [n * hw.word_bytes.activations for n in elements]
    backward_bytes = [n * hw.word_bytes.gradients for n in elements]
    hop = _hops(network, p, t, data, memo.hops)
    zero = plan.zero if data > 1 else 0
    stages = [
        _stage_data_parallel(run, hw, network, cut, graph, ops, s, data, simulated, memo)
        for s in range(p)
    ]
    times = PipelineTimes(
        plan.schedule,
        p,
        cut.virtual_stages,
        micro_batches,
        tuple(passes),
        tuple(hop(g % p, (g + 1) % p, n) for g, n in enumerate(forward_bytes)),
        tuple(hop((g + 1) % p, g % p, n) for g, n in enumerate(backward_bytes)),
        tuple(st.sum_cycles for st in stages),
        tuple(st.update_cycles for st in stages),
        tuple(st.gather_cycles for st in stages),
    )
    return PipelineStep(
        times,
        compose(times),
        distinct,
        tuple(forward_bytes),
        tuple(backward_bytes),
        tuple(st.gradient_bytes for st in stages),
        data,
        t,
        zero,
        plan.expert,
    )


@dataclass(frozen=True)
class _StageSums:
    """One stage's data-parallel work after its last backward: its summed gradient
    bytes (one rank's), the sum's cycles (all-reduce, or reduce-scatter under ZeRO),
    its update's and its weight all-gather's (0 without ZeRO)."""

    gradient_bytes: int
    sum_cycles: int
    update_cycles: int
    gather_cycles: int


@dataclass(frozen=True)
class _StageWork:
    """One stage's gradient buckets (their bytes and their weights' bytes), its
    experts' gradient buckets with expert parallelism (summed over the replicas holding
    the same experts; none without it, every expert's gradient then among the others)
    and its update ops."""

    gradient_bytes: tuple[int, ...]
    weight_bytes: tuple[int, ...]
    update_ops: tuple[int, ...]
    expert_bytes: tuple[int, ...]


def _stage_work(
    run: RunSpec, cut: PipelineCut, graph: OpGraph, ops: _ChunkOps, s: int
) -> _StageWork:
    """What stage ``s`` sums over its replicas and updates: every weight its passes
    read or its layers hold, in buckets."""
    chunks = cut.chunks_of_stage(s)
    layers = {name for g in chunks for name in cut.chunks[g]}
    read = {
        a.tensor.key
        for g in chunks
        for i in ops.rank_zero[g][Stage.FORWARD]
        for a in reads_of(graph.ops[i])
    }
    trained = [
        q
        for q in graph.parameters
        if q.grad_op >= 0 and (q.layer in layers or q.weight.key in read)
    ]
    bucket = run.data_parallel.bucket_bytes
    spread = run.parallel is not None and run.parallel.expert > 1
    experts = [q for q in trained if spread and q.expert != NO_EXPERT]
    dense = [q for q in trained if not (spread and q.expert != NO_EXPERT)]
    groups = [dense] if bucket is None else buckets(dense, bucket)
    expert_groups = [] if not experts else [experts] if bucket is None else buckets(experts, bucket)
    return _StageWork(
        tuple(sum(q.update_elements * q.gradient.word_bytes for q in b) for b in groups),
        tuple(sum(q.update_elements * q.weight.word_bytes for q in b) for b in groups),
        tuple(sorted(i for g in chunks for i in ops.group[g][Stage.UPDATE])),
        tuple(sum(q.update_elements * q.gradient.word_bytes for q in b) for b in expert_groups),
    )


def _stage_data_parallel(
    run: RunSpec,
    hw: HardwareSpec,
    network: Network,
    cut: PipelineCut,
    graph: OpGraph,
    ops: _ChunkOps,
    s: int,
    data: int,
    simulated: Simulated,
    memo: PassMemo,
) -> _StageSums:
    """Stage ``s``'s gradient sum over its ``data`` replicas (in buckets; with expert
    parallelism its experts' then over the ``data / e`` replicas holding the same
    experts), its update and, under ZeRO stages 1 and 2, its weight all-gather (bucket
    by bucket, one after the other) and its update run on its shard of every tensor
    (made once for every plan of the graph with the same chunks on the stage, stages,
    replicas and ZeRO stage)."""
    assert run.parallel is not None
    p, t = cut.stages, run.parallel.tensor
    zero = run.parallel.zero if data > 1 else 0
    key = tuple(tuple(cut.chunks[g]) for g in cut.chunks_of_stage(s))
    place = (key, s, p, data, zero)
    if place in memo.sums:
        return memo.sums[place]
    work = _recent(memo.stages, key, lambda: _stage_work(run, cut, graph, ops, s))
    sizes, kept = work.gradient_bytes, work.update_ops
    members = tuple(processor_of(r, s, 0, p, t) for r in range(data))
    algorithm = hw.interconnect.algorithm

    def timed(kind: Collective, byte_counts: Sequence[int]) -> int:
        return sum(cycles(network, kind, members, n, algorithm) for n in byte_counts)

    if zero == 0:
        summed = timed(Collective.ALL_REDUCE, sizes) if data > 1 else 0
        e = run.parallel.expert
        if work.expert_bytes and data > e:  # over the replicas holding the same experts
            holders = members[::e]
            summed += sum(
                cycles(network, Collective.ALL_REDUCE, holders, n, algorithm)
                for n in work.expert_bytes
            )
        spent = memo.timed(simulated, kept) if kept else 0
        sums = _StageSums(sum(sizes) + sum(work.expert_bytes), summed, spent, 0)
    else:
        sums = _StageSums(
            sum(sizes),
            timed(Collective.REDUCE_SCATTER, sizes),
            memo.timed(simulated, kept, data) if kept else 0,
            timed(Collective.ALL_GATHER, work.weight_bytes),
        )
    memo.sums[place] = sums
    return sums


@dataclass(frozen=True)
class _ChunkOps:
    """Each chunk's ops by stage (forward, backward, update): every rank's
    (``group``) and rank 0's."""

    group: tuple[dict[Stage, list[int]], ...]
    rank_zero: tuple[dict[Stage, list[int]], ...]


def _chunk_ops(graph: OpGraph, cut: PipelineCut) -> _ChunkOps:
    """Each op of the rank graph (the tensor group, or the expert group) by chunk and
    pass; a collective of the group (stage communication) runs in the latest pass of the
    ops it waits for (a forward all-reduce, all-gather or all-to-all in the forward, a
    backward one or a replicated weight's gradient all-reduce in the backward)."""
    chunk_of = cut.chunk_of_layer()
    kinds = (Stage.FORWARD, Stage.BACKWARD, Stage.UPDATE)
    group: tuple[dict[Stage, list[int]], ...] = tuple({k: [] for k in kinds} for _ in cut.chunks)
    zero: tuple[dict[Stage, list[int]], ...] = tuple({k: [] for k in kinds} for _ in cut.chunks)
    pass_of: dict[int, Stage] = {}
    for op in graph.ops:
        i = op.op_id
        stage = op.stage
        if stage is Stage.COMMUNICATION:
            waited = [kinds.index(pass_of[d]) for d in op.deps if d in pass_of]
            stage = kinds[max(waited, default=0)]
        pass_of[i] = stage
        g = chunk_of[op.layer]
        group[g][stage].append(i)
        if graph.processor[i] == 0:
            zero[g][stage].append(i)
    return _ChunkOps(group, zero)


def _chunk_passes(
    graph: OpGraph, ops: _ChunkOps, simulated: Simulated, memo: PassMemo
) -> tuple[ChunkPasses, ...]:
    """Each distinct chunk's forward and backward pass simulated once, and the ops a
    technique added to the backward pass (the forward work recomputation repeats: the
    one rewriting technique a pipeline plan admits) simulated alone."""
    seen: dict[tuple[bytes, bytes], list[int]] = {}
    for g, own in enumerate(ops.group):
        forward, backward = own[Stage.FORWARD], own[Stage.BACKWARD]
        key = (_signature(graph, forward, memo.kinds), _signature(graph, backward, memo.kinds))
        seen.setdefault(key, []).append(g)
    out = []
    for chunks in seen.values():
        forward = ops.group[chunks[0]][Stage.FORWARD]
        backward = ops.group[chunks[0]][Stage.BACKWARD]
        again = [i for i in backward if graph.ops[i].owner != CORE]
        cycles_of = PassCycles(memo.timed(simulated, forward), memo.timed(simulated, backward))
        redone = memo.timed(simulated, again) if again else 0
        out.append(ChunkPasses(tuple(chunks), len(forward), len(backward), cycles_of, redone))
    return tuple(out)


def _signature(graph: OpGraph, ids: Sequence[int], kinds: dict[int, bytes]) -> bytes:
    """A 20-byte digest of what a pass's timing depends on, names aside: each op's kind
    and sizes (their text kept in ``kinds`` by op), and its dependencies within the
    pass, relative to its first op, each written out in turn (equal digests, equal
    passes but for a collision of 160-bit digests)."""
    first = ids[0] if ids else 0
    own = set(ids)
    digest = hashlib.blake2b(digest_size=20)
    for i in ids:
        op = graph.ops[i]
        kind = kinds.get(i)
        if kind is None:
            shape = (type(op).__name__, op.phase, int(graph.processor[i]), _sizes(op))
            kind = kinds[i] = repr(shape).encode()
        digest.update(kind)
        digest.update(repr(tuple(d - first for d in op.deps if d in own)).encode())
    return digest.digest()


def _recent(kept: OrderedDict[K, V], key: K, make: Callable[[], V]) -> V:
    """``kept[key]``, made by ``make`` when missing, among the :data:`KEPT_CUTS` keys
    used last."""
    if key in kept:
        kept.move_to_end(key)
        return kept[key]
    made = kept[key] = make()
    if len(kept) > KEPT_CUTS:
        kept.popitem(last=False)
    return made


def _sizes(op: Op) -> tuple[object, ...]:
    if isinstance(op, GemmOp):
        return (op.m, op.n, op.k, op.count, op.a_elements, op.b_elements, op.unit, op.groups)
    if isinstance(op, VectorOp):
        reads = tuple(a.bytes for a in op.reads)
        writes = tuple(a.bytes for a in op.writes)
        return (op.elements, op.ops_per_element, op.op_class, op.epilogue, reads, writes)
    if isinstance(op, CommOp):
        return (op.collective, op.tensor.bytes, len(op.participants))
    assert isinstance(op, TransferOp)
    return (op.bytes,)


def _crossing(graph: OpGraph, rank_zero: Sequence[dict[Stage, list[int]]]) -> list[int]:
    """The elements of the activations each chunk's forward writes and the next
    chunk's forward reads, by boundary (one rank's)."""
    out = []
    for g in range(len(rank_zero) - 1):
        written = {
            a.tensor.key: a.tensor.elements
            for i in rank_zero[g][Stage.FORWARD]
            for a in writes_of(graph.ops[i])
            if a.tensor.kind is TensorKind.ACTIVATION
        }
        read = {
            a.tensor.key for i in rank_zero[g + 1][Stage.FORWARD] for a in reads_of(graph.ops[i])
        }
        out.append(sum(n for key, n in written.items() if key in read))
    return out


def _hops(
    network: Network, p: int, t: int, data: int, kept: dict[tuple[int, ...], Hop]
) -> Callable[[int, int, int], Hop]:
    """A transfer of ``n`` bytes from every rank of stage ``a`` to its peer of stage
    ``b`` in every replica: its cycles and replica 0's rank 0 route (each made once
    into ``kept``)."""

    def hop(a: int, b: int, n: int) -> Hop:
        key = (p, t, data, a, b, n)
        if key not in kept:
            kept[key] = made(a, b, n)
        return kept[key]

    def made(a: int, b: int, n: int) -> Hop:
        pairs = [
            (processor_of(r, a, k, p, t), processor_of(r, b, k, p, t))
            for r in range(data)
            for k in range(t)
        ]
        step = tuple(Transfer(x, y, n) for x, y in pairs)
        links = network.route(pairs[0][0], pairs[0][1])
        return Hop(step_cycles(network, step) if n else 0, links)

    return hop
