"""Checks that a step graph is well formed, run after every rewrite of it.

As torch.fx's pass manager lints the graph after each pass, the driver checks each
technique's rewrite of a step graph (:func:`graph_problems`), so a rewrite that
breaks the graph is caught where it happens, named by technique and step kind,
instead of surfacing later as an engine error or a wrong number.
"""

from __future__ import annotations

from collections.abc import Iterable

from accelsim.graph import queries
from accelsim.graph.ops import GemmOp, OpGraph, TensorKind, VectorOp

SOURCE_KINDS = (TensorKind.WEIGHT, TensorKind.OPTIMIZER_STATE)
"""Tensors a step may read without producing them: weights and optimizer state (the
model's, or a technique's own, such as a gradient predictor's)."""


def graph_problems(graph: OpGraph, inputs: Iterable[str] = ()) -> list[str]:
    """What is wrong with ``graph``, one sentence each (empty when nothing is).

    * every GEMM has ``m``, ``n``, ``k``, ``count`` and operand footprints of at
      least 1, and every vector op at least one element;
    * every tensor an op reads has a producer in the graph, or is one of
      ``inputs`` (the network's input), a weight or optimizer state
      (:data:`SOURCE_KINDS`), or a parameter's tensor (``Tensor.parameter``: a
      forward-fused update reads the previous step's gradient);
    * the stash is the activations the backward pass reads;
    * every parameter whose gradient an op makes names an op that writes it, and
      updates at least one element.
    """
    problems: list[str] = []
    given = frozenset(inputs)
    for op in graph.ops:
        if isinstance(op, GemmOp):
            sizes = {
                "m": op.m,
                "n": op.n,
                "k": op.k,
                "count": op.count,
                "a_elements": op.a_elements,
                "b_elements": op.b_elements,
            }
            problems += [f"GEMM {op.name} has {key} = {v}" for key, v in sizes.items() if v < 1]
        elif isinstance(op, VectorOp) and op.elements < 1:
            problems.append(f"vector op {op.name} has {op.elements} elements")
        for access, producers in zip(queries.reads_of(op), op.sources, strict=False):
            t = access.tensor
            if producers or t.kind in SOURCE_KINDS or t.parameter or t.name in given:
                continue
            problems.append(f"{op.name} reads {t.name}, which no op before it makes")
    stashed = queries.stashed(graph.ops)
    if stashed != graph.stashed:
        extra = sorted(graph.stashed - stashed)
        missing = sorted(stashed - graph.stashed)
        problems.append(
            f"the stash is not what the backward pass reads (stashed but unread: {extra},"
            f" read but not stashed: {missing})"
        )
    for p in graph.parameters:
        if p.grad_op < 0:
            continue
        if p.grad_op >= len(graph.ops):
            problems.append(f"{p.weight.name}'s gradient op {p.grad_op} is not in the graph")
            continue
        made = {a.tensor.name for a in queries.writes_of(graph.ops[p.grad_op])}
        if p.gradient.name not in made:
            problems.append(
                f"{p.weight.name}'s gradient op {graph.ops[p.grad_op].name} does not write"
                f" {p.gradient.name}"
            )
        if p.update_elements < 1:
            problems.append(f"{p.weight.name} is trained but updates {p.update_elements} elements")
    return problems
