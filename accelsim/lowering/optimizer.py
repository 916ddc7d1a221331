"""The optimizer: the single owner of update ops.

One vector op per parameter tensor reads the weight, its gradient and the
optimizer's state tensors and writes the weight and the states (0 state tensors
for SGD, 1 for momentum, 2 for Adam).  Updates run after the backward pass, as in
eager ``loss.backward(); optimizer.step()``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from accelsim.config.run import OptimizerKind
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import Parameter, Phase, Tag, TensorKind


def add_updates(
    builder: GraphBuilder,
    parameters: Sequence[Parameter],
    optimizer: OptimizerKind,
    after: Iterable[int],
    gradient_ready: Mapping[str, int] | None = None,
    tag: Tag | None = None,
) -> list[int]:
    """Add one update per trained parameter tensor (those with a gradient op).

    Args:
        builder: Builder of the graph that computes the gradients.
        parameters: The trainable tensors.
        optimizer: Decides the state tensors and ops per element.
        after: Ops every update waits for (the end of the backward pass).
        gradient_ready: Op that makes each gradient final, by weight name
            (an all-reduce or a sum over micro-batches), instead of the op that
            computed it.
        tag: The updates' tag (default: the builder's).

    Returns:
        The update ops, in the order of ``parameters``.
    """
    barrier = tuple(after)
    ids = []
    for p in parameters:
        if p.grad_op < 0:
            continue
        states = [
            builder.tensor(
                f"{p.weight.name}.state{j}", TensorKind.OPTIMIZER_STATE, p.weight.elements
            )
            for j in range(optimizer.state_tensors)
        ]
        ready = (gradient_ready or {}).get(p.weight.name, p.grad_op)
        ids.append(
            builder.vector(
                f"{p.weight.name.rpartition('/')[2]}.update",
                p.layer,
                Phase.UPDATE,
                p.weight.elements,
                optimizer.ops_per_element,
                reads=[p.weight, p.gradient, *states],
                writes=[p.weight, *states],
                after=(*barrier, ready),
                tag=tag,
            )
        )
    return ids
