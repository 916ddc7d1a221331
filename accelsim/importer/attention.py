"""Attention found in an ONNX graph, to become one ``attention`` layer.

The pattern, as PyTorch exports an eager attention (Hugging Face BERT, GPT-2, or
``nn.functional.scaled_dot_product_attention``): three linears of the same input
(Q, K and V: a ``MatMul`` by a constant, with or without a bias ``Add``, or one
fused linear whose output a ``Split`` cuts in three, as Hugging Face GPT-2's
``c_attn``, an ``addmm``: a ``Gemm``; or ``nn.MultiheadAttention``'s packed
in-projection, viewed as three and each part selected by a ``Gather``), views
(reshape to heads, transpose) and constant scales on the way; ``Q . K^T``;
constant scales and masks (an ``Add``, ``Mul``, ``Div`` or ``Where`` with operands
that are not activations, views between them; the products may be ``Einsum``s, as
MaxViT writes them); a ``Softmax`` (and the ``IsNaN`` and ``Where`` that
``scaled_dot_product_attention`` puts after it under a boolean mask); an optional
``Dropout``; the product with V; views back to the model width and a fourth linear,
the output projection.
It is causal when a mask on the scores comes from a ``Trilu`` (``torch.tril``/``triu``)
or from comparing the keys' positions with the queries' (each from a ``Range``, as Hugging
Face's mask functions build a causal mask).
It is cross-attention when Q's linear reads one tensor and K's and V's another
(``nn.MultiheadAttention(q, kv, kv)``, a ``nn.TransformerDecoderLayer``'s attention to
its memory: Q's weight and the packed K and V weight cut from the in-projection by a
``SplitToSequence``), then neither causal nor rotary; and so when K's linear and V's
read two different tensors (``nn.MultiheadAttention(q, k, v)``, its in-projection cut
in three), an attention of three inputs.

Grouped-query attention's K and V are narrower than Q: their heads are repeated to
Q's (``repeat_interleave`` or Hugging Face's ``repeat_kv``: an ``Unsqueeze``, an
``Expand`` or a ``Tile``, and a ``Reshape``, views here), so the key/value heads are
K's width over the head size.  Rotary position embeddings rotate Q and K before
their product: ``x * cos + rotate_half(x) * sin``, ``rotate_half`` a ``Concat`` of
the negated second half (``Slice``, ``Neg``) and the first (``Slice``), the cos and
sin tables constants.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from accelsim.importer.graph_view import GraphView, Node

VIEW_OPS = frozenset(
    {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Identity", "Cast", "Expand", "Tile"}
)
SCALE_OPS = frozenset({"Mul", "Div"})
MASK_OPS = frozenset({"Add", "Sub", "Mul", "Div", "Where", "Cast"})
ANCESTRY_LIMIT = 64
"""Nodes searched above a mask, nearest first, for a ``Trilu`` or a comparison of
positions."""
COMPARISONS = frozenset({"Less", "LessOrEqual", "Greater", "GreaterOrEqual"})
RANGE_LIMIT = 16
"""Nodes searched above a compared tensor for the ``Range`` of positions it comes from."""


@dataclass(frozen=True)
class AttentionMatch:
    """One attention: the nodes it covers and the layer it is.

    Attributes:
        inputs: The tensor its Q, K and V linears read (self-attention), the one its
            Q linear reads and the one its K and V linears read (cross-attention), or
            the one each of its Q, K and V linears reads (keys and values from two
            tensors).
        output_node: Index of its last node (the output projection, or its bias).
        absorbed: Indices of every other node it covers.
        name: The layer's name (the nodes' common module scope).
        heads: Attention heads (the scores' first dimension per sample).
        kv_heads: Key and value heads (fewer than ``heads``: grouped-query).
        bias: Whether the Q, K and V projections have biases.
        out_bias: Whether the output projection has one.
        causal: Whether a causal mask (:func:`_causal_mask`) hides later tokens.
        rotary: Whether Q and K are rotated (rotary position embeddings).
        note: What it is and covers, for the table's header (shared by alike ones).
        normalized: Whether Q and K are each L2-normalised (cosine attention, Swin V2's).
        on_scores: The nodes between ``Q . K^T`` and the softmax that take constant
            operands (scales, masks, position biases), the product's reader first: each
            one's index and its constant operands.
        score_dims: The dimensions of ``Q . K^T`` (the exported batch first).
    """

    inputs: tuple[str, ...]
    output_node: int
    absorbed: frozenset[int]
    name: str
    heads: int
    kv_heads: int
    bias: bool
    out_bias: bool
    causal: bool
    rotary: bool
    note: str
    normalized: bool = False
    on_scores: tuple[tuple[int, tuple[str, ...]], ...] = ()
    score_dims: tuple[int, ...] = ()


@dataclass(frozen=True)
class _Linear:
    """A projection: its ``MatMul`` or ``Gemm``, its bias ``Add`` if any, the width of
    its output that reaches the attention (a ``Split``'s part of a fused one), and
    whether a rotation or an L2 normalisation is on the way."""

    matmul: Node
    bias: Node | None
    width: int
    rotary: bool = False
    normalized: bool = False

    @property
    def nodes(self) -> list[Node]:
        return [self.matmul] + ([self.bias] if self.bias else [])

    @property
    def has_bias(self) -> bool:
        return self.bias is not None or (self.matmul.op == "Gemm" and len(self.matmul.inputs) > 2)


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
    on_scores: list[tuple[int, tuple[str, ...]]] = []
    tensor, causal = softmax.inputs[0], False
    while True:
        node = view.producer.get(tensor)
        if node is None:
            return None
        acts = [t for t in node.inputs if t in live]
        if _is_product(node) and len(acts) == 2:
            scores = node
            break
        if node.op in VIEW_OPS and len(acts) == 1:
            covered.append(node)
            tensor = acts[0]
            continue
        if node.op not in MASK_OPS or len(acts) != 1:
            return None
        causal = causal or any(_causal_mask(view, t) for t in node.inputs if t not in live)
        covered.append(node)
        on_scores.insert(0, (node.index, tuple(t for t in node.inputs if t not in live)))
        tensor = acts[0]
    covered.append(scores)
    guard = _nan_guard(view, softmax)
    covered.extend(guard)
    probs = view.single_reader((guard or [softmax])[-1].outputs[0])
    dropout = probs is not None and probs.op == "Dropout"
    if probs is not None and dropout:
        covered.append(probs)
        probs = view.single_reader(probs.outputs[0])
    if probs is None or not _is_product(probs) or view.producer.get(probs.inputs[0]) not in covered:
        return None
    covered.append(probs)
    q, k = (_linear_above(view, t, live, covered) for t in scores.inputs)
    v = _linear_above(view, probs.inputs[1], live, covered)
    out = _linear_below(view, probs.outputs[0], live, covered)
    if q is None or k is None or v is None or out is None:
        return None
    inputs = _inputs(q, k, v)
    heads = _heads(view, scores, q.width)
    kv_heads = _heads(view, scores, k.width)
    if heads is None or kv_heads is None or q.rotary != k.rotary or v.rotary:
        return None
    if q.normalized != k.normalized or v.normalized:
        return None
    if len(inputs) > 1 and (causal or q.rotary):
        return None  # cross-attention has neither (an attention layer refuses them)
    last = out.bias or out.matmul
    nodes = [*covered, *q.nodes, *k.nodes, *v.nodes, *out.nodes]
    name = _common_scope([q.matmul, k.matmul, v.matmul, out.matmul])
    extras = f", {kv_heads} key/value heads" if kv_heads != heads else ""
    extras += ", rotary" if q.rotary else ""
    extras += ", causal" if causal else ""
    extras += {1: "", 2: ", cross-attention", 3: ", keys and values from two tensors"}[len(inputs)]
    note = f"attention ({heads} heads{extras}, {len({n.index for n in nodes})} nodes each"
    note += "; the dropout on its probabilities not modelled)" if dropout else ")"
    return AttentionMatch(
        inputs=inputs,
        output_node=last.index,
        absorbed=frozenset(n.index for n in nodes if n.index != last.index),
        name=name,
        heads=heads,
        kv_heads=kv_heads,
        bias=all(lin.has_bias for lin in (q, k, v)),
        out_bias=out.has_bias,
        causal=causal,
        rotary=q.rotary,
        note=note,
        normalized=q.normalized,
        on_scores=tuple(on_scores),
        score_dims=view.dims(scores.outputs[0]),
    )


def _inputs(q: _Linear, k: _Linear, v: _Linear) -> tuple[str, ...]:
    """What the Q, K and V linears read: one tensor (self-attention), Q's and the one K
    and V read (cross-attention), or each its own (keys and values from two tensors)."""
    query, key, value = (lin.matmul.inputs[0] for lin in (q, k, v))
    if key != value:
        return (query, key, value)
    return (query,) if query == key else (query, key)


def _nan_guard(view: GraphView, softmax: Node) -> list[Node]:
    """The ``IsNaN`` and ``Where`` that zero a fully masked row's probabilities, as
    ``scaled_dot_product_attention`` with a boolean mask exports them (none: [])."""
    readers = view.consumers.get(softmax.outputs[0], [])
    if sorted(r.op for r in readers) != ["IsNaN", "Where"]:
        return []
    isnan, where = sorted(readers, key=lambda r: r.op)
    return [isnan, where] if where.inputs[0] == isnan.outputs[0] else []


def _heads(view: GraphView, scores: Node, width: int) -> int | None:
    """A projection's width over the width per head (Q's last dimension at the
    product), or the scores' head dimension when that is unknown."""
    per_head = view.dims(scores.inputs[0])[-1:]
    if width and per_head and per_head[0] and width % per_head[0] == 0:
        return width // per_head[0]
    dims = view.dims(scores.outputs[0])[1:]
    if len(dims) == 2:
        return 1
    return dims[0] if len(dims) == 3 and dims[0] else None


def _linear_above(
    view: GraphView, tensor: str, live: set[str], covered: list[Node]
) -> _Linear | None:
    """The linear whose output reaches ``tensor`` through views, constant scales, a
    ``Split`` of a fused projection, a rotation and an L2 normalisation."""
    part, rotary, normalized = 0, False, False
    while True:
        node = view.producer.get(tensor)
        if node is None:
            return None
        acts = [t for t in node.inputs if t in live]
        if node.op == "Add" and len(acts) == 2 and not rotary:
            source = _rotated(view, node, live, covered)
            if source is None:
                return None
            tensor, rotary = source, True
            continue
        if node.op == "Div" and len(acts) == 2 and not normalized:
            norm = _l2_norm(view, node)
            if norm is None:
                return None
            covered.extend(norm)
            tensor, normalized = node.inputs[0], True
            continue
        if len(acts) != 1:
            return None
        if node.op in VIEW_OPS or (node.op in SCALE_OPS and acts[0] == node.inputs[0]):
            covered.append(node)
            tensor = acts[0]
            continue
        if node.op == "SplitToSequence" and part:
            covered.append(node)
            tensor = acts[0]
            continue
        if not part and (node.op in ("Split", "SequenceAt") or _selects_part(view, node)):
            covered.append(node)
            part = (view.dims(tensor) or (0,))[-1]
            tensor = acts[0]
            continue
        linear = node
        if node.op == "Add":
            linear = view.producer.get(acts[0]) or node
        if not _is_linear(view, linear, live):
            return None
        width = part or _width(view, linear)
        return _Linear(linear, node if linear is not node else None, width, rotary, normalized)


NORM_OPS = frozenset({"Expand", "Clip", "Max"})
"""Ops between an L2 norm and the division by it (broadcast, kept from zero)."""


def _l2_norm(view: GraphView, div: Node) -> list[Node] | None:
    """The nodes of ``F.normalize(x)`` ending at ``div`` (``x`` over its ``ReduceL2``,
    kept from zero and broadcast), None when ``div`` is another division."""
    nodes, tensor = [div], div.inputs[1]
    for _ in range(len(NORM_OPS) + 1):
        node = view.producer.get(tensor)
        if node is None:
            return None
        nodes.append(node)
        if node.op == "ReduceL2":
            return nodes if node.inputs[0] == div.inputs[0] else None
        if node.op not in NORM_OPS:
            return None
        tensor = node.inputs[0]
    return None


def _is_product(node: Node) -> bool:
    """A ``MatMul``, or an ``Einsum`` that is one per batch (``bhid,bhjd->bhij`` or
    ``bhij,bhjd->bhid``: the same leading indices, one contracted)."""
    if node.op == "MatMul":
        return True
    equation = node.attr("equation", b"") if node.op == "Einsum" else b""
    text = (equation.decode() if isinstance(equation, bytes) else equation).replace(" ", "")
    if text.count("->") != 1 or text.count(",") != 1:
        return False
    inputs, out = text.split("->")
    a, b = inputs.split(",")
    if not len(a) == len(b) == len(out) >= 2 or not a[:-2] == b[:-2] == out[:-2]:
        return False
    row, inner = a[-2], a[-1]
    if len(set(a[-2:] + b[-2:] + out[-2:])) != 3:
        return False
    transposed = b[-1] == inner and out[-2:] == row + b[-2]
    return transposed or (b[-2] == inner and out[-2:] == row + b[-1])


def _selects_part(view: GraphView, node: Node) -> bool:
    """A ``Gather`` of one constant index of the first axis: ``nn.MultiheadAttention``'s
    packed in-projection, viewed as (3, ..., width), selecting Q, K or V."""
    index = view.scalar(node.inputs[1]) if node.op == "Gather" else None
    return index is not None and node.attr("axis", 0) == 0


def _rotated(view: GraphView, add: Node, live: set[str], covered: list[Node]) -> str | None:
    """The tensor a rotary embedding rotates, when ``add`` is ``x * cos +
    rotate_half(x) * sin`` (either order), else None."""
    muls = [view.producer.get(t) for t in add.inputs]
    if any(m is None or m.op != "Mul" for m in muls):
        return None
    operands = [[t for t in m.inputs if t in live] for m in muls if m is not None]
    if any(len(acts) != 1 for acts in operands):
        return None
    for x, turned in (operands[0] + operands[1], operands[1] + operands[0]):
        halves = _halves(view, turned, live)
        if halves is not None and halves[0] == x:
            covered.extend([add, *(m for m in muls if m is not None), *halves[1]])
            return x
    return None


def _halves(view: GraphView, tensor: str, live: set[str]) -> tuple[str, list[Node]] | None:
    """``(x, nodes)`` when ``tensor`` is ``rotate_half(x)``: a ``Concat`` of ``-x2``
    and ``x1``, the two ``Slice`` halves of one ``x``."""
    concat = view.producer.get(tensor)
    if concat is None or concat.op != "Concat" or len(concat.inputs) != 2:
        return None
    neg = view.producer.get(concat.inputs[0])
    if neg is None or neg.op != "Neg":
        return None
    slices = [view.producer.get(t) for t in (neg.inputs[0], concat.inputs[1])]
    sources = {s.inputs[0] for s in slices if s is not None and s.op == "Slice"}
    if len(sources) != 1 or len([s for s in slices if s is not None]) != 2:
        return None
    x = sources.pop()
    return (x, [concat, neg, *(s for s in slices if s is not None)]) if x in live else None


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
        width = _width(view, node)
        bias = None
        if node.op == "MatMul":
            bias = view.bias_after(node, width, lambda t: t in live)
        return _Linear(node, bias, width)


def _is_linear(view: GraphView, node: Node, live: set[str]) -> bool:
    """A ``MatMul`` by a constant matrix, or a ``Gemm`` (``addmm``) of one input."""
    if node.op == "Gemm":
        weight = view.const_dims(node.inputs[1])
        plain = not node.attr("transA", 0)
        return plain and node.inputs[0] in live and weight is not None and len(weight) == 2
    weight = view.const_dims(node.inputs[1]) if len(node.inputs) == 2 else None
    return (
        node.op == "MatMul" and node.inputs[0] in live and weight is not None and len(weight) == 2
    )


def _width(view: GraphView, node: Node) -> int:
    """Output features of a linear (:func:`_is_linear`)."""
    weight = view.const_dims(node.inputs[1]) or (0, 0)
    return weight[0] if node.op == "Gemm" and node.attr("transB", 0) else weight[1]


def _causal_mask(view: GraphView, tensor: str) -> bool:
    """Whether the mask ``tensor`` comes from a ``Trilu`` or from comparing two tensors
    of positions, each made by a ``Range`` (a key's position against a query's, as
    Hugging Face's mask functions write ``kv_idx <= q_idx``)."""
    todo, seen = deque([tensor]), set[int]()
    while todo and len(seen) < ANCESTRY_LIMIT:
        node = view.producer.get(todo.popleft())
        if node is None or node.index in seen:
            continue
        seen.add(node.index)
        if node.op == "Trilu":
            return True
        if node.op in COMPARISONS and all(_from_range(view, t) for t in node.inputs):
            return True
        todo.extend(node.inputs)
    return False


def _from_range(view: GraphView, tensor: str) -> bool:
    """Whether a ``Range`` is among the first :data:`RANGE_LIMIT` nodes above ``tensor``."""
    todo, seen = [tensor], 0
    while todo and seen < RANGE_LIMIT:
        node = view.producer.get(todo.pop())
        seen += 1
        if node is not None and node.op == "Range":
            return True
        todo.extend(node.inputs if node is not None else ())
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
