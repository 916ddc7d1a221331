"""Small decoder graphs for the importer's tests, written with the ``onnx`` helper API
as ``torch.onnx.export`` emits them from plain ``torch.nn`` code (torch is not needed
to build them; nor was it used: the node sequences mirror the exporter's rules, the
constants' values are zeros). Nodes are named by module scope as the TorchScript-based
exporter names them (``/model/layers.0/self_attn/q_proj/MatMul_3``); shape
computations the exporter would write (``Shape``, ``Gather``, ``Concat`` of sizes)
are constant shapes here.

``llama_decoder``: one Llama-style layer (Hugging Face ``LlamaDecoderLayer``'s
modules): token embedding, ``RMSNormalization`` (``torch.nn.RMSNorm`` at opset 23,
which has the op), Q, K and V projections without biases, K and V of fewer heads,
rotary position embeddings on Q and K (``q * cos + rotate_half(q) * sin``, the cos and
sin tables buffers sliced to the sequence), K and V repeated to Q's heads by
``repeat_interleave`` (``Unsqueeze``, ``Tile``, then the flatten as a ``Reshape``:
the TorchScript exporter's rule for an int repeat,
``_repeat_interleave_single_value_repeat_helper``) or by Hugging Face's ``repeat_kv``
(``Unsqueeze``, ``Expand``, ``Reshape``), a causal ``Trilu`` mask, softmax, the output
projection, a residual add; RMSNorm and a SwiGLU MLP (``down(silu(gate(x)) * up(x))``,
``F.silu`` exported as ``x * sigmoid(x)``), a residual add; a final RMSNorm and an LM
head tied to the embedding (the same initializer).

``gpt2_fused_block``: one Hugging Face GPT-2 block's attention as ``GPT2Attention``
writes it: ``c_attn``, a ``Conv1D`` (``addmm``: a ``Gemm`` between two reshapes) whose
output ``split`` cuts into Q, K and V; the causal mask; ``c_proj`` another ``Gemm``.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEQ, WIDTH, HEADS, KV_HEADS, MLP, VOCAB = 8, 16, 4, 2, 32, 50
HEAD = WIDTH // HEADS


class _Graph:
    """Nodes and initializers, named as the TorchScript exporter names them."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def op(self, op: str, inputs: list[str], scope: str, **attrs: object) -> str:
        self.count += 1
        out = f"t{self.count}"
        name = f"{scope}/{op}_{self.count}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out

    def const(self, name: str, values: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(values, name))
        return name

    def ints(self, values: list[int]) -> str:
        self.count += 1
        return self.const(f"c{self.count}", np.array(values, dtype=np.int64))

    def linear(self, x: str, scope: str, out: int, inp: int, weight: str = "") -> str:
        """``nn.Linear`` without a bias: its weight transposed, then a ``MatMul``."""
        w = weight or self.const(f"{scope.strip('/').replace('/', '.')}.weight", zeros(out, inp))
        return self.op("MatMul", [x, self.op("Transpose", [w], scope, perm=[1, 0])], scope)

    def heads(self, x: str, heads: int, scope: str) -> str:
        """``view(1, S, heads, head).transpose(1, 2)``."""
        shaped = self.op("Reshape", [x, self.ints([1, SEQ, heads, HEAD])], scope)
        return self.op("Transpose", [shaped], scope, perm=[0, 2, 1, 3])

    def causal_softmax(self, scores: str, scope: str) -> str:
        """A ``Trilu`` mask of later tokens, ``Where`` -inf, then the softmax."""
        ones = self.const(f"{scope.strip('/').replace('/', '.')}.ones", zeros(SEQ, SEQ) + 1)
        keep = self.op("Cast", [self.op("Trilu", [ones], scope, upper=0)], scope, to=9)
        low = self.const(f"{scope.strip('/').replace('/', '.')}.min", np.array(-1e9, np.float32))
        masked = self.op("Where", [keep, scores, low], scope)
        return self.op("Softmax", [masked], scope, axis=-1)

    def model(self, out: str, opset: int) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes,
            "decoder",
            [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, SEQ])],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
            self.inits,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        return onnx.shape_inference.infer_shapes(model)


def zeros(*dims: int) -> np.ndarray:
    return np.zeros(dims, dtype=np.float32)


def _rotary(g: _Graph, x: str, cos: str, sin: str, scope: str) -> str:
    """``x * cos + rotate_half(x) * sin``, ``rotate_half(x) = cat(-x2, x1)``."""
    half = HEAD // 2
    axis = g.ints([-1])
    x1 = g.op("Slice", [x, g.ints([0]), g.ints([half]), axis], scope)
    x2 = g.op("Slice", [x, g.ints([half]), g.ints([HEAD]), axis], scope)
    turned = g.op("Concat", [g.op("Neg", [x2], scope), x1], scope, axis=-1)
    return g.op("Add", [g.op("Mul", [x, cos], scope), g.op("Mul", [turned, sin], scope)], scope)


def _repeat(g: _Graph, x: str, form: str, scope: str) -> str:
    """K or V's heads repeated to Q's: ``repeat_interleave`` (``Tile``) or
    ``repeat_kv`` (``Expand``)."""
    group = HEADS // KV_HEADS
    wide = g.op("Unsqueeze", [x, g.ints([2])], scope)
    if form == "tile":
        wide = g.op("Tile", [wide, g.ints([1, 1, group, 1, 1])], scope)
    else:
        wide = g.op("Expand", [wide, g.ints([1, KV_HEADS, group, SEQ, HEAD])], scope)
    return g.op("Reshape", [wide, g.ints([1, HEADS, SEQ, HEAD])], scope)


def _attention(g: _Graph, x: str, form: str) -> str:
    scope = "/model/layers.0/self_attn"
    q = g.heads(g.linear(x, f"{scope}/q_proj", WIDTH, WIDTH), HEADS, f"{scope}/q_proj")
    k = g.heads(g.linear(x, f"{scope}/k_proj", KV_HEADS * HEAD, WIDTH), KV_HEADS, scope)
    v = g.heads(g.linear(x, f"{scope}/v_proj", KV_HEADS * HEAD, WIDTH), KV_HEADS, scope)
    tables = "/model/rotary_emb"
    cos, sin = (
        g.op(
            "Slice",
            [
                g.const(f"model.rotary_emb.{n}_cached", zeros(64, HEAD)),
                g.ints([0]),
                g.ints([SEQ]),
                g.ints([0]),
            ],
            tables,
        )
        for n in ("cos", "sin")
    )
    q, k = (_rotary(g, t, cos, sin, scope) for t in (q, k))
    k, v = (_repeat(g, t, form, scope) for t in (k, v))
    keys = g.op("Transpose", [k], scope, perm=[0, 1, 3, 2])
    scale = g.const("model.layers.0.self_attn.scale", np.array(0.5, np.float32))
    scores = g.op("Mul", [g.op("MatMul", [q, keys], scope), scale], scope)
    mixed = g.op("MatMul", [g.causal_softmax(scores, scope), v], scope)
    merged = g.op("Transpose", [mixed], scope, perm=[0, 2, 1, 3])
    flat = g.op("Reshape", [merged, g.ints([1, SEQ, WIDTH])], scope)
    return g.linear(flat, f"{scope}/o_proj", WIDTH, WIDTH)


def llama_decoder(form: str = "tile") -> onnx.ModelProto:
    """One Llama-style decoder layer (module docstring); ``form`` of the key/value
    repeat: ``tile`` (``repeat_interleave``) or ``expand`` (``repeat_kv``)."""
    g = _Graph()
    table = g.const("model.embed_tokens.weight", zeros(VOCAB, WIDTH))
    h = g.op("Gather", [table, "input_ids"], "/model/embed_tokens")

    def norm(x: str, scope: str) -> str:
        w = g.const(f"{scope.strip('/').replace('/', '.')}.weight", zeros(WIDTH) + 1)
        return g.op("RMSNormalization", [x, w], scope, axis=-1, epsilon=1e-5)

    layer = "/model/layers.0"
    a = _attention(g, norm(h, f"{layer}/input_layernorm"), form)
    h = g.op("Add", [h, a], layer)
    x = norm(h, f"{layer}/post_attention_layernorm")
    gate = g.linear(x, f"{layer}/mlp/gate_proj", MLP, WIDTH)
    act = g.op("Mul", [gate, g.op("Sigmoid", [gate], f"{layer}/mlp/act_fn")], f"{layer}/mlp/act_fn")
    up = g.linear(x, f"{layer}/mlp/up_proj", MLP, WIDTH)
    down = g.linear(g.op("Mul", [act, up], f"{layer}/mlp"), f"{layer}/mlp/down_proj", WIDTH, MLP)
    h = g.op("Add", [h, down], layer)
    logits = g.linear(norm(h, "/model/norm"), "/lm_head", VOCAB, WIDTH, weight=table)
    return g.model(logits, 23)


def gpt2_fused_block() -> onnx.ModelProto:
    """Token and position embeddings, ``ln_1``, and the attention of one GPT-2 block
    with its fused ``c_attn`` and ``split`` (module docstring), then ``lm_head``."""
    g = _Graph()
    table = g.const("transformer.wte.weight", zeros(VOCAB, WIDTH))
    tokens = g.op("Gather", [table, "input_ids"], "/transformer/wte")
    positions = g.const("transformer.position_ids", np.arange(SEQ, dtype=np.int64)[None])
    wpe = g.const("transformer.wpe.weight", zeros(SEQ, WIDTH))
    h = g.op("Add", [tokens, g.op("Gather", [wpe, positions], "/transformer/wpe")], "/transformer")
    scale, bias = (
        g.const(f"transformer.h.0.ln_1.{n}", zeros(WIDTH) + 1) for n in ("weight", "bias")
    )
    x = g.op("LayerNormalization", [h, scale, bias], "/transformer/h.0/ln_1", axis=-1)
    scope = "/transformer/h.0/attn"

    def conv1d(x: str, name: str, inp: int, out: int) -> str:
        """HF ``Conv1D``: ``addmm(bias, x.view(-1, inp), weight).view(1, S, out)``."""
        at = f"{scope}/{name}"
        rows = g.op("Reshape", [x, g.ints([-1, inp])], at)
        w = g.const(f"transformer.h.0.attn.{name}.weight", zeros(inp, out))
        b = g.const(f"transformer.h.0.attn.{name}.bias", zeros(out))
        return g.op("Reshape", [g.op("Gemm", [rows, w, b], at), g.ints([1, SEQ, out])], at)

    qkv = conv1d(x, "c_attn", WIDTH, 3 * WIDTH)
    g.count += 1
    q, k, v = (f"split{g.count}_{i}" for i in range(3))
    g.nodes.append(
        helper.make_node(
            "Split", [qkv, g.ints([WIDTH] * 3)], [q, k, v], name=f"{scope}/Split_{g.count}", axis=2
        )
    )
    q, k, v = (g.heads(t, HEADS, scope) for t in (q, k, v))
    keys = g.op("Transpose", [k], scope, perm=[0, 1, 3, 2])
    divisor = g.const("transformer.h.0.attn.divisor", np.array(2.0, np.float32))
    scores = g.op("Div", [g.op("MatMul", [q, keys], scope), divisor], scope)
    mixed = g.op("MatMul", [g.causal_softmax(scores, scope), v], scope)
    merged = g.op("Transpose", [mixed], scope, perm=[0, 2, 1, 3])
    out = conv1d(g.op("Reshape", [merged, g.ints([1, SEQ, WIDTH])], scope), "c_proj", WIDTH, WIDTH)
    h = g.op("Add", [h, out], "/transformer/h.0")
    logits = g.linear(h, "/lm_head", VOCAB, WIDTH, weight=table)
    return g.model(logits, 20)
