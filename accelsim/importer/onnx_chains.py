"""Element-wise chains the exporters write for one layer: a dropout written as the
product by a random mask, the ``Erf`` form of GELU, a hard sigmoid (and the hard
swish it makes with its input).

A dropout exported in place (``Dropout(inplace=True)``, torchvision's
``stochastic_depth``) is no ``Dropout`` op: its input times a mask that a
``RandomUniformLike`` (or ``Bernoulli``) draws, compared (``Less``) with the keep
probability and divided by it. The mask's values do not depend on the input's
(only its shape), so the ``Mul`` reads one activation. A mask with one element per
sample is stochastic depth, any other a dropout.
"""

from __future__ import annotations

import math

from accelsim.importer.graph_view import GraphView, Node
from accelsim.importer.layer_rows import LayerRows, scope_of

MASK_OPS = frozenset({"Div", "Mul", "Cast", "CastLike", "Less", "Expand", "Identity"})
"""Ops between a random draw and the mask a dropout multiplies by."""
MASK_DEPTH = 8
"""Nodes searched above a ``Mul``'s operand for its random draw."""
DRAWS = frozenset({"RandomUniformLike", "RandomUniform", "Bernoulli"})


def keep_probability(view: GraphView, tensor: str) -> float | None:
    """The keep probability of a random dropout mask, None for any other tensor."""
    for _ in range(MASK_DEPTH):
        node = view.producer.get(tensor)
        if node is None or node.op not in MASK_OPS:
            return None
        if node.op == "Less":
            draw = view.producer.get(node.inputs[0])
            keep = view.scalar(node.inputs[1])
            return keep if draw is not None and draw.op in DRAWS else None
        tensor = node.inputs[0]
    return None


def random_mask(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    """A ``Mul`` of one activation by a random mask: ``dropout`` or ``stochastic_depth``."""
    others = [t for t in node.inputs if t != acts[0]]
    keep = keep_probability(rows.view, others[0]) if len(others) == 1 else None
    if keep is None or not 0 < keep <= 1:
        return False
    rate = round(1 - keep, 6)
    per_sample = all(d == 1 for d in rows.dims(others[0]))
    kind = "stochastic_depth" if per_sample else "dropout"
    return rows.layer(node, kind, acts, rate=rate)


def hard_sigmoid(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    """PyTorch's hard sigmoid (``alpha`` 1/6, ``beta`` 0.5), or with the ``Mul`` of its
    input that alone reads it, hard swish (as older opsets write it)."""
    alpha, beta = node.attr("alpha", 0.2), node.attr("beta", 0.5)
    if not math.isclose(alpha, 1 / 6, rel_tol=1e-6) or beta != 0.5:
        return False
    gate = rows.view.single_reader(node.outputs[0])
    if gate is None or gate.op != "Mul" or sorted(gate.inputs) != sorted([acts[0], *node.outputs]):
        return rows.layer(node, "activation", acts[:1], function="hardsigmoid")
    rows.skip.add(gate.index)
    row = {"name": rows.name(node), "kind": "activation", "function": "hardswish"}
    rows.emit(row, acts[:1], gate.outputs)
    return True


def erf_gelu(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    """``x / sqrt(2)``, ``Erf``, ``+ 1``, times ``x`` and times 0.5 (the last two in
    either order): GELU as exporters wrote it before ONNX had ``Gelu``."""
    view, x = rows.view, acts[0]
    if node.inputs[0] != x or not _is_const(view, node.inputs[1], math.sqrt(2)):
        return False
    chain = _follow(view, node.outputs[0], ["Erf", "Add", "Mul", "Mul"])
    if chain is None or not any(_is_const(view, t, 1.0) for t in chain[1].inputs):
        return False
    by_x, by_half = chain[2], chain[3]
    if x not in by_x.inputs:
        by_x, by_half = by_half, by_x
    if x not in by_x.inputs or not any(_is_const(view, t, 0.5) for t in by_half.inputs):
        return False
    rows.skip.update(n.index for n in chain)
    row = {"name": rows.unique(scope_of(node)[0] or "gelu"), "kind": "activation"}
    row["function"] = "gelu"
    rows.emit(row, acts[:1], chain[-1].outputs)
    return True


def _follow(view: GraphView, tensor: str, ops: list[str]) -> list[Node] | None:
    """The nodes of ``ops``, each the only reader of the one before."""
    chain = []
    for op in ops:
        node = view.single_reader(tensor)
        if node is None or node.op != op:
            return None
        chain.append(node)
        tensor = node.outputs[0]
    return chain


def _is_const(view: GraphView, tensor: str, value: float) -> bool:
    found = view.scalar(tensor)
    return found is not None and math.isclose(found, value, rel_tol=1e-4)
