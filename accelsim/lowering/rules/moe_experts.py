"""A ``moe`` layer's experts as one processor computes them: each expert's parameters
and SwiGLU MLP forward and backward, and, with the experts split over a
tensor-parallel group, the all-reduce of their partial results (the rule:
:mod:`accelsim.lowering.rules.moe`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from accelsim.config.enums import CommGroup, VectorClass
from accelsim.graph.ops import Epilogue, ParamKind, Phase, Tensor, TensorKind
from accelsim.lowering.context import StepContext
from accelsim.workload import model as wm

SILU = wm.ActivationFunction.SILU
COMBINE_OPS = 2  # forward: times the gate, add; backward: dY x gate, and dY . y for the gate


@dataclass(frozen=True)
class Expert:
    """What expert ``e``'s forward ops left for its backward ops."""

    x: Tensor
    h1: Tensor
    h3: Tensor
    act: Tensor
    hidden: Tensor
    y: Tensor


@dataclass(frozen=True)
class Saved:
    """What a ``moe`` layer's forward ops left for its backward ops: the router's
    probabilities, the kept gates and each of the processor's experts' tensors."""

    probs: Tensor
    gates: Tensor
    experts: tuple[Expert, ...]


def expert_params(ctx: StepContext, name: str, e: int, d: int, f: int) -> None:
    """Expert ``e``'s weights ``w1``, ``w3`` and ``w2``."""
    for w, rows in (("w1", f), ("w3", f), ("w2", d)):
        ctx.param(name, f"experts.{e}.{w}", d * f, ParamKind.WEIGHT, rows, expert=e)


def mlp_forward(
    ctx: StepContext, name: str, e: int, xe: Tensor, sizes: tuple[int, int, int]
) -> Expert:
    """Expert ``e``'s SwiGLU MLP on its ``cap`` tokens of ``xe`` (``sizes``: the tokens,
    the width and the inner width)."""
    cap, d, f = sizes
    b, at = ctx.b, f"{name}.experts.{e}"
    w1, w3, w2 = (ctx.parameter(name, f"experts.{e}.{w}").weight for w in ("w1", "w3", "w2"))
    h1, h3, act, hidden = (
        ctx.t(f"{at}.{part}", TensorKind.ACTIVATION, cap * f)
        for part in ("h1", "h3", "act", "hidden")
    )
    b.gemm(f"{at}.w1.fwd", name, Phase.FWD, cap, f, d, 1, xe, w1, h1, expert=e)
    b.gemm(f"{at}.w3.fwd", name, Phase.FWD, cap, f, d, 1, xe, w3, h3, expert=e)
    b.vector(
        f"{at}.act.fwd", name, Phase.FWD, act.elements, SILU.forward_ops, [h1], [act],
        epilogue=Epilogue.ELEMENTWISE, op_class=VectorClass.TRANSCENDENTAL, expert=e,
    )  # fmt: skip
    b.vector(
        f"{at}.mul.fwd", name, Phase.FWD, hidden.elements, 1, [act, h3], [hidden],
        epilogue=Epilogue.ELEMENTWISE, op_class=VectorClass.ELEMENTWISE, expert=e,
    )  # fmt: skip
    ye = ctx.t(f"{at}.y", TensorKind.ACTIVATION, cap * d)
    b.gemm(f"{at}.w2.fwd", name, Phase.FWD, cap, d, f, 1, hidden, w2, ye, expert=e)
    return Expert(xe, h1, h3, act, hidden, ye)


def mlp_backward(
    ctx: StepContext,
    name: str,
    e: int,
    kept: Expert,
    dye: Tensor,
    sizes: tuple[int, int, int],
) -> Tensor:
    """Expert ``e``'s MLP backward from its output gradient ``dye``, each weight's
    gradient on the way; its input gradient."""
    cap, d, f = sizes
    b, at = ctx.b, f"{name}.experts.{e}"
    w2 = ctx.parameter(name, f"experts.{e}.w2")
    dhidden, dact, dh1, dh3 = (
        ctx.t(f"{at}.d{part}", TensorKind.GRADIENT, cap * f)
        for part in ("hidden", "act", "h1", "h3")
    )
    b.gemm(f"{at}.w2.dx", name, Phase.BWD_INPUT, cap, f, d, 1, dye, w2.weight, dhidden, expert=e)
    op = b.gemm(
        f"{at}.w2.dw", name, Phase.BWD_WEIGHT, d, f, cap, 1, dye, kept.hidden, w2.gradient,
        expert=e,
    )  # fmt: skip
    ctx.grad_done(name, f"experts.{e}.w2", op)
    b.vector(
        f"{at}.mul.bwd", name, Phase.BWD_INPUT, dact.elements, 2, [dhidden, kept.act, kept.h3],
        [dact, dh3], epilogue=Epilogue.ELEMENTWISE, op_class=VectorClass.ELEMENTWISE, expert=e,
    )  # fmt: skip
    b.vector(
        f"{at}.act.bwd", name, Phase.BWD_INPUT, dh1.elements, SILU.backward_ops,
        [dact, kept.h1], [dh1], epilogue=Epilogue.ELEMENTWISE,
        op_class=VectorClass.TRANSCENDENTAL, expert=e,
    )  # fmt: skip
    dxe = ctx.t(f"{at}.dx", TensorKind.GRADIENT, cap * d)
    for w, dh in (("w1", dh1), ("w3", dh3)):
        weight = ctx.parameter(name, f"experts.{e}.{w}")
        b.gemm(
            f"{at}.{w}.dx", name, Phase.BWD_INPUT, cap, d, f, 1, dh, weight.weight, dxe,
            partial=True, expert=e,
        )  # fmt: skip
        op = b.gemm(
            f"{at}.{w}.dw", name, Phase.BWD_WEIGHT, f, d, cap, 1, dh, kept.x, weight.gradient,
            expert=e,
        )  # fmt: skip
        ctx.grad_done(name, f"experts.{e}.{w}", op)
    return dxe


def reduced_over_tensor(
    ctx: StepContext, layer: str, name: str, parts: Sequence[Tensor], kind: TensorKind
) -> list[int]:
    """The ops an all-to-all of the experts' ``parts`` waits for: the ops that made them
    or, with each expert split over ``ctx.expert_shards`` tensor-parallel ranks (partial
    sums), the all-reduce of the buffer they fill over the tensor group (a stand-in)
    after them."""
    b = ctx.b
    after = [o for t in parts for o in b.producers(t)]
    if ctx.expert_shards == 1:
        return after
    buffer = ctx.t(f"{layer}.{name}", kind, sum(t.elements for t in parts))
    return [
        b.allreduce(f"{buffer.name}.allreduce", layer, buffer, (), after, group=CommGroup.TENSOR)
    ]
