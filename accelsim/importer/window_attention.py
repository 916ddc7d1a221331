"""Self-attention within windows of a map (Swin V1's and V2's shifted windows,
MaxViT's blocks and grids), as layers of existing kinds.

Exported, the map (H x W x C, channels last; or C x H x W, permuted so) is viewed as
``windows x tokens x C``, the windows a batch (Swin's) or a dimension of each sample
(MaxViT's), and every window attends to its own tokens. One
``attention`` layer would attend over the whole map; instead each of its parts is a
layer of the map the table has (C x H x W): the Q, K and V projections one 1x1
``conv2d`` (a linear per position), cut in three by ``split``, each viewed as
``windows . heads`` products (a ``bridge``; Q and K L2-normalised by a ``vector`` op
each in cosine attention), the scores a batched ``matmul``; added to them, learned
values (a relative position bias: a table gathered by constant indices, or computed
from constant coordinates by an MLP, whose MACs, once per step, are not counted) a
``position_bias`` carrying their parameters, another constant (the shifted windows'
mask) a named ``vector`` op; a learned scale per head (Swin V2's logit scale) a
``scale_parameter`` of the scores viewed heads first; the ``softmax``, the product
with V, the view back to the map and the output projection (a 1x1 ``conv2d``). A
constant scale of Q or of the scores is taken into the softmax, as the
``attention`` kind takes it.
"""

from __future__ import annotations

import math
from typing import Any

from accelsim.importer.attention import AttentionMatch
from accelsim.importer.graph_view import Node
from accelsim.importer.layer_rows import LayerRows
from accelsim.importer.onnx_layout import table_dims

SCALES = frozenset({"Mul", "Div"})
"""Ops on the scores by a constant that the softmax takes in (the scale)."""
LEARNED_DEPTH = 64
"""Constant nodes searched above a score's operand for the learned values it is made of."""


def windowed(rows: LayerRows, match: AttentionMatch) -> bool:
    """Whether the attention reads its tokens as a batch of windows of a map (one or
    more per sample of the exported batch of one)."""
    source = _map_above(rows, match.inputs[0])
    return source is not None and len(rows.view.dims(source)) == 4


def window_attention(rows: LayerRows, node: Node, match: AttentionMatch) -> tuple[str, str] | None:
    """Write a windowed attention's layers, ending at ``node`` (the output projection):
    the name they share and its note, or None when its shapes are not a map's windows
    (nothing written)."""
    dims = rows.view.dims(match.inputs[0])
    source = _map_above(rows, match.inputs[0])
    if len(dims) < 3:
        return None
    windows, tokens, width = math.prod(dims[:-2]), dims[-2], dims[-1]
    grid = table_dims(rows, source) if source is not None else ()
    heads = match.score_dims[-3] if len(match.score_dims) >= 4 else match.heads
    if len(grid) != 3 or grid[0] != width or math.prod(grid) != windows * tokens * width:
        return None
    if match.kv_heads != match.heads or width % heads:
        return None
    base = rows.unique(match.name)
    blocks = windows * heads
    per_head = [blocks, tokens, width // heads]
    bias = {"bias": True} if match.bias else {}
    qkv = _layer(
        rows,
        f"{base}.qkv",
        "conv2d",
        [rows.layer_of[match.inputs[0]]],
        out_channels=3 * width,
        kernel=1,
        **bias,
    )
    parts = []
    for index, part in enumerate("qkv"):
        cut = _layer(rows, f"{base}.{part}", "split", [qkv], sizes=[width] * 3, index=index)
        parts.append(_layer(rows, f"{base}.{part}.heads", "bridge", [cut], shape=per_head))
        if match.normalized and part != "v":
            parts[-1] = _layer(
                rows,
                f"{base}.{part}.normalize",
                "vector",
                parts[-1:],
                op="l2_normalize",
                layout="chw",
                shape=per_head,
            )
    last = _layer(rows, f"{base}.scores", "matmul", parts[:2], heads=blocks, transpose_b=True)
    scores = (heads, windows, tokens)
    for index, constants in match.on_scores:
        last = _on_scores(rows, rows.view.nodes[index], constants, scores, base) or last
    probs = _layer(rows, f"{base}.softmax", "softmax", [last])
    mixed = _layer(rows, f"{base}.mix", "matmul", [probs, parts[2]], heads=blocks)
    back = _layer(rows, f"{base}.merge", "bridge", [mixed], shape=list(grid))
    out_bias = {"bias": True} if match.out_bias else {}
    proj = _layer(rows, f"{base}.proj", "conv2d", [back], out_channels=width, kernel=1, **out_bias)
    for out in node.outputs:
        rows.layer_of[out] = proj
        rows.channels_last.add(out)
    return base, (
        f"window attention ({heads} heads, windows of {tokens} tokens): 1x1 convs, batched"
        " matmuls and a softmax on the map; learned values added to the scores a"
        " position_bias (computed by an MLP from constant coordinates: its parameters, not"
        " its MACs), another constant added a vector op, a learned scale per head a"
        " scale_parameter, a constant one taken into the softmax"
    )


def _on_scores(
    rows: LayerRows,
    node: Node,
    constants: tuple[str, ...],
    scores: tuple[int, int, int],
    base: str,
) -> str | None:
    """The layer of a node on the scores (``scores``: heads, windows, tokens) with
    ``constants`` its constant operands: a constant scale, taken into the softmax
    (None); an addition of learned values (a table gathered, or computed by an MLP from
    constant coordinates), a ``position_bias``; a product by a learned value per head
    (Swin V2's logit scale), a ``scale_parameter`` of the scores viewed heads first;
    any other constant, a named ``vector`` op."""
    if node.op in SCALES and all(rows.view.scalar(t) is not None for t in constants):
        return None
    last = str(rows.layers[-1]["name"])
    heads, windows, tokens = scores
    blocks = heads * windows
    learned = sum(_learned_above(rows, t) for t in constants)
    if learned and node.op == "Add":
        return _layer(rows, f"{base}.position_bias", "position_bias", [last], table=learned)
    if learned == heads and node.op == "Mul":
        turned = [heads, windows * tokens, tokens]
        last = _layer(rows, f"{base}.heads_first", "bridge", [last], shape=turned)
        last = _layer(rows, f"{base}.logit_scale", "scale_parameter", [last])
        windows_first = [blocks, tokens, tokens]
        return _layer(rows, f"{base}.windows_first", "bridge", [last], shape=windows_first)
    row: dict[str, Any] = {"name": rows.name(node), "kind": "vector", "op": node.op}
    row.update(layout="chw", shape=[blocks, tokens, tokens])
    return _append(rows, row, [last])


def _learned_above(rows: LayerRows, tensor: str) -> int:
    """The learned values (float initializers, not scalars) the constant ``tensor`` is
    computed from: a table gathered, an MLP's weights and biases (not the coordinates
    it reads, a product's left operand), a scale; 0 for none."""
    view = rows.view
    roots: set[str] = set()
    todo, seen = [tensor], set[int]()
    while todo and len(seen) < LEARNED_DEPTH:
        node = view.producer.get(todo.pop())
        if node is None or node.index in seen:
            continue
        seen.add(node.index)
        for position, source in enumerate(view.value_inputs(node)):
            if rows.is_activation(source):
                continue
            data = node.op in ("MatMul", "Gemm") and position == 0
            if view.learned(source) and not data:
                roots.add(view.const_root(source) or source)
            todo.append(source)
    return sum(math.prod(view.learned(root) or ()) for root in roots)


PARTITION_OPS = frozenset({"Reshape", "Transpose", "Identity", "LayerNormalization"})
"""Ops between a map and its windows' tokens: views, and a layernorm of the tokens."""


def _map_above(rows: LayerRows, tensor: str) -> str | None:
    """The map a window partition views: above ``tensor``, through views and a
    layernorm, the map a reshape cuts into blocks (a rank 4 tensor viewed with more
    dimensions), or the first tensor of another op's making (or the model's input)."""
    view = rows.view
    for _ in range(16):
        node = view.producer.get(tensor)
        if node is None or node.op not in PARTITION_OPS:
            return tensor
        source = node.inputs[0]
        if node.op == "Reshape" and len(view.dims(source)) == 4 < len(view.dims(tensor)):
            return source
        tensor = source
    return None


def _layer(rows: LayerRows, name: str, kind: str, sources: list[str], **fields: Any) -> str:
    """Append a layer of ``kind`` named ``name`` (made unique) reading the layers
    ``sources``; its name."""
    return _append(rows, {"name": rows.unique(name), "kind": kind, **fields}, sources)


def _append(rows: LayerRows, row: dict[str, Any], sources: list[str]) -> str:
    """Append ``row`` reading the layers ``sources`` (named only when they are not just
    the previous layer)."""
    previous = rows.layers[-1]["name"] if rows.layers else "input"
    if sources != [previous]:
        row["inputs"] = sources
    rows.layers.append(row)
    return str(row["name"])
