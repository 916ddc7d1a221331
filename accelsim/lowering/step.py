"""Lower a workload to the op graph of one replica's forward and backward pass.

Each layer's rule emits its forward ops, then, in reverse order, its backward
ops (input gradient ``dX`` and weight gradient ``dW``); see the GEMM shapes in
``docs/architecture.md``.  Dependencies come from tensors: an op depends on the
ops that produced what it reads.  An activation read by several layers gets its
gradient summed from the partial gradients by an explicit accumulation op.  The
optimizer updates are not part of the step graph: placement adds them
(:mod:`accelsim.lowering.optimizer`), once per replica or per stage.
"""

from __future__ import annotations

from collections.abc import Sequence

from accelsim.config.hardware import WordBytesSpec
from accelsim.config.run import RunMode, StridedDx
from accelsim.graph import queries
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import OpGraph, TensorKind
from accelsim.lowering.context import StepContext
from accelsim.lowering.flash_attention import AttentionBudget
from accelsim.lowering.rules import rule_for
from accelsim.lowering.sequence_parallel import SequenceLowering, sequence_sharded
from accelsim.lowering.shapes import LayerInfo, model_inputs
from accelsim.lowering.tensor_parallel import Role, TensorLowering, TensorPlan, sharded
from accelsim.workload import model as wm


def lower(
    infos: Sequence[LayerInfo],
    workload: wm.Workload,
    batch: int,
    words: WordBytesSpec,
    strided_dx: StridedDx,
    attention: AttentionBudget | None = None,
    mode: RunMode = RunMode.TRAINING,
    tensor: TensorPlan | None = None,
    expert: int = 1,
) -> OpGraph:
    """The forward and backward pass of ``batch`` samples on one processor; with
    ``mode`` forward, the forward pass alone, each layer's ops as evaluation runs it
    (:meth:`~accelsim.lowering.rules.base.LayerRule.inference`: no loss, dropout off).

    The graph's ``parameters`` are every trainable tensor with the op that
    finishes its gradient (-1 in a forward pass: no op computes one).  With an
    ``attention`` budget, attention layers run as fused kernels whose blocks fit it
    (:mod:`accelsim.lowering.flash_attention`).  With a ``tensor`` plan, the step of one
    rank of a tensor-parallel group, with its all-reduces
    (:mod:`accelsim.lowering.tensor_parallel`; with the plan's ``sequence``, its
    reduce-scatters and all-gathers: :mod:`accelsim.lowering.sequence_parallel`).  With
    ``expert`` above 1, one rank of an expert-parallel group of that many: its share of
    each ``moe`` layer's experts, between all-to-alls (:mod:`accelsim.lowering.rules.moe`).
    With a ``tensor`` plan, each expert's inner width is split over its group (under
    sequence parallelism, with ``expert`` above 1 only: each rank routes its share of the
    sequence, and its experts' tokens are all-gathered over the group after the
    all-to-all, :mod:`accelsim.lowering.rules.moe_exchange`).
    """
    ctx = StepContext(GraphBuilder(words), batch, strided_dx, attention)
    ctx.expert_ranks = expert
    if tensor is not None and (not tensor.sequence or expert > 1):
        ctx.expert_shards = tensor.degree
        ctx.expert_gathered = tensor.sequence and tensor.degree > 1
    group = None
    if tensor is not None and tensor.degree > 1:
        infos = sharded(infos, tensor)
        group = TensorLowering(tensor)
        if tensor.sequence:
            infos = sequence_sharded(infos, tensor)
            group = SequenceLowering(tensor)
        ctx.head_shards = {n: tensor.degree for n, r in tensor.roles.items() if r is Role.ATTENTION}
    for name, shape in model_inputs(workload).items():
        ctx.acts[name] = ctx.t(name, TensorKind.ACTIVATION, batch * shape.numel)
    training = mode is RunMode.TRAINING
    for info in infos:
        rule = rule_for(info.layer)
        y = ctx.t(f"{info.layer.name}.out", TensorKind.ACTIVATION, batch * info.out_shape.numel)
        ctx.acts[info.layer.name] = y
        emit = rule.forward if training else rule.inference
        if group is not None:
            group.before_forward(ctx, info)
        emit(ctx, info, [ctx.acts[i] for i in info.inputs], y)
        if group is not None:
            group.forward_done(ctx, info, [ctx.acts[i] for i in info.inputs])
        if rule.has_params or any(i in ctx.requires_grad for i in info.inputs):
            ctx.requires_grad.add(info.layer.name)
    if not training:
        return ctx.b.build(ctx.params) if group is None else group.finish(ctx.b.build(ctx.params))
    for info in reversed(infos):
        if info.layer.name not in ctx.requires_grad:
            continue
        rule = rule_for(info.layer)
        if rule.is_loss:
            rule.backward(ctx, info, None)
            continue
        g = ctx.out_grad(info)
        if g is not None:
            if group is not None:
                g = group.gradient_ready(ctx, info, g)
                group.before_backward(ctx, info, g)
            rule.backward(ctx, info, g)
    if group is not None:
        group.gradients_done(ctx)
    return ctx.b.build(ctx.params) if group is None else group.finish(ctx.b.build(ctx.params))


def backward_sinks(graph: OpGraph) -> tuple[int, ...]:
    """The ops from the first backward op on that no later op waits for: where the
    backward pass (with whatever a technique added to it) ends."""
    return queries.sinks(graph.ops, queries.first_backward(graph.ops))
