"""Self-attention found in an ONNX graph, to become one ``attention`` layer.

The pattern, as PyTorch exports an eager attention (Hugging Face BERT, GPT-2, or
``nn.functional.scaled_dot_product_attention``): three linears of the same input
(Q, K and V: a ``MatMul`` by a constant, with or without a bias ``Add``), views
(reshape to heads, transpose) and constant scales on the way; ``Q . K^T``; constant
scales and masks (an ``Add``, ``Mul``, ``Div`` or ``Where`` with operands that are
not activations); a ``Softmax``; an optional ``Dropout``; the product with V; views
back to the model width and a fourth linear, the output projection. It is causal
when a mask on the scores comes from a ``Trilu`` (``torch.tril``/``triu``).
"""

from __future__ import annotations

from dataclasses import dataclass

from accelsim.importer.graph_view import GraphView, Node

VIEW_OPS = frozenset({"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Identity", "Cast"})
SCALE_OPS = frozenset({"Mul", "Div"})
MASK_OPS = frozenset({"Add", "Sub", "Mul", "Div", "Where", "Cast"})
ANCESTRY_LIMIT = 64
"""Nodes searched above a mask for a ``Trilu``."""


@dataclass(frozen=True)
class AttentionMatch:
    """One self-attention: the nodes it covers and the layer it is.

    Attributes:
        input: The tensor its Q, K and V linears read.
        output_node: Index of its last node (the output projection, or its bias).
        absorbed: Indices of every other node it covers.
        name: The layer's name (the nodes' common module scope).
        heads: Attention heads (the scores' first dimension per sample).
        bias: Whether the projections have biases.
        causal: Whether a ``Trilu`` mask hides later tokens.
        note: What it is and covers, for the table's header (shared by alike ones).
    """

    input: str
    output_node: int
    absorbed: frozenset[int]
    name: str
    heads: int
    bias: bool
    causal: bool
    note: str


@dataclass(frozen=True)
class _Linear:
    matmul: Node
    bias: Node | None

    @property
    def nodes(self) -> list[Node]:
        return [self.matmul] + ([self.bias] if self.bias else [])


def match_attentions(view: GraphView) -> list[AttentionMatch]:
    """Every self-attention in ``view``."""
    activations = view.live()
    found = []
    for node in view.nodes:
        if node.op == "Softmax":
            match = _match(view, node, activations)
            if match is not None:
                found.append(match)
    return found


def _match(view: GraphView, softmax: Node, live: set[str]) -> AttentionMatch | None:
    covered: list[Node] = [softmax]
    tensor, causal = softmax.inputs[0], False
    while True:
        node = view.producer.get(tensor)
        if node is None:
            return None
        acts = [t for t in node.inputs if t in live]
        if node.op == "MatMul" and len(acts) == 2:
            scores = node
            break
        if node.op not in MASK_OPS or len(acts) != 1:
            return None
        causal = causal or any(_from_trilu(view, t) for t in node.inputs if t not in live)
        covered.append(node)
        tensor = acts[0]
    covered.append(scores)
    probs = view.single_reader(softmax.outputs[0])
    dropout = probs is not None and probs.op == "Dropout"
    if probs is not None and dropout:
        covered.append(probs)
        probs = view.single_reader(probs.outputs[0])
    if probs is None or probs.op != "MatMul" or view.producer.get(probs.inputs[0]) not in covered:
        return None
    covered.append(probs)
    q, k = (_linear_above(view, t, live, covered) for t in scores.inputs)
    v = _linear_above(view, probs.inputs[1], live, covered)
    out = _linear_below(view, probs.outputs[0], live, covered)
    if q is None or k is None or v is None or out is None:
        return None
    sources = {lin.matmul.inputs[0] for lin in (q, k, v)}
    if len(sources) != 1:
        return None
    heads = _heads(view, scores, q)
    if heads is None:
        return None
    last = out.bias or out.matmul
    nodes = [*covered, *q.nodes, *k.nodes, *v.nodes, *out.nodes]
    name = _common_scope([q.matmul, k.matmul, v.matmul, out.matmul])
    extras = ", causal" if causal else ""
    note = f"attention ({heads} heads{extras}, {len(nodes)} nodes each"
    note += "; the dropout on its probabilities not modelled)" if dropout else ")"
    return AttentionMatch(
        input=sources.pop(),
        output_node=last.index,
        absorbed=frozenset(n.index for n in nodes if n.index != last.index),
        name=name,
        heads=heads,
        bias=all(lin.bias is not None for lin in (q, k, v, out)),
        causal=causal,
        note=note,
    )


def _heads(view: GraphView, scores: Node, q: _Linear) -> int | None:
    """The model width over the width per head (Q's last dimension at the product),
    or the scores' head dimension when that is unknown."""
    weight = view.const_dims(q.matmul.inputs[1])
    per_head = view.dims(scores.inputs[0])[-1:]
    if weight and per_head and per_head[0] and weight[1] % per_head[0] == 0:
        return weight[1] // per_head[0]
    dims = view.dims(scores.outputs[0])[1:]
    if len(dims) == 2:
        return 1
    return dims[0] if len(dims) == 3 and dims[0] else None


def _linear_above(
    view: GraphView, tensor: str, live: set[str], covered: list[Node]
) -> _Linear | None:
    """The linear whose output reaches ``tensor`` through views and constant scales."""
    while True:
        node = view.producer.get(tensor)
        if node is None:
            return None
        acts = [t for t in node.inputs if t in live]
        if len(acts) != 1:
            return None
        if node.op in VIEW_OPS or (node.op in SCALE_OPS and acts[0] == node.inputs[0]):
            covered.append(node)
            tensor = acts[0]
            continue
        if node.op == "Add":
            matmul = view.producer.get(acts[0])
            if matmul is not None and _is_linear(view, matmul, live):
                return _Linear(matmul, node)
            return None
        return _Linear(node, None) if _is_linear(view, node, live) else None


def _linear_below(
    view: GraphView, tensor: str, live: set[str], covered: list[Node]
) -> _Linear | None:
    """The linear that reads ``tensor`` through views (each the only reader)."""
    while True:
        node = view.single_reader(tensor)
        if node is None:
            return None
        if node.op in VIEW_OPS:
            covered.append(node)
            tensor = node.outputs[0]
            continue
        if not _is_linear(view, node, live) or node.inputs[0] != tensor:
            return None
        width = view.const_dims(node.inputs[1])
        bias = view.bias_after(node, width[1] if width else 0, lambda t: t in live)
        return _Linear(node, bias)


def _is_linear(view: GraphView, node: Node, live: set[str]) -> bool:
    weight = view.const_dims(node.inputs[1]) if len(node.inputs) == 2 else None
    return (
        node.op == "MatMul" and node.inputs[0] in live and weight is not None and len(weight) == 2
    )


def _from_trilu(view: GraphView, tensor: str) -> bool:
    todo, seen = [tensor], 0
    while todo and seen < ANCESTRY_LIMIT:
        node = view.producer.get(todo.pop())
        seen += 1
        if node is None:
            continue
        if node.op == "Trilu":
            return True
        todo.extend(node.inputs)
    return False


def _common_scope(nodes: list[Node]) -> str:
    """The module path the nodes share: ``encoder.layer.0.attention``."""
    paths = [[p for p in n.name.split("/") if p][:-1] for n in nodes]
    common: list[str] = []
    for parts in zip(*paths, strict=False):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    merged: list[str] = []
    for part in common:
        if merged and part.startswith(merged[-1] + "."):
            merged[-1] = part
        else:
            merged.append(part)
    return ".".join(merged) or "attention"
