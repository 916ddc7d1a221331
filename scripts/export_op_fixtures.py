"""Export graph-only ONNX fixtures of torch.nn blocks the importer reads as layers
of their own: attention written by ``nn.MultiheadAttention``,
``nn.TransformerEncoderLayer`` and ``scaled_dot_product_attention`` under a mask, a
bidirectional two-layer ``nn.LSTM`` and ``nn.GRU`` (the encoder layer and the LSTM also
sequence-first, as ``batch_first=False`` modules are exported),
``nn.TransformerDecoderLayer`` with and without a causal target mask (two inputs: the
target and the memory; also sequence-first), ``nn.MultiheadAttention`` as
cross-attention, an encoder layer given a key padding mask (a boolean input), the
element-wise chains (in-place dropout, stochastic depth, hard
sigmoid and swish) and a small vision transformer and a small ConvNeXt written as
torchvision's (class token, position embedding; channels-last layernorm and linears,
layer scale), an adaptive average pool to a size (5) that does not divide its
input's (14), and Hugging Face BERT, GPT-2 and DistilBERT (small, built from a config)
given ``input_ids`` and an ``attention_mask``, two integer inputs.

Run with a Python that has torch, torchvision (for the stripping of
``scripts/export_onnx_fixtures.py``), transformers (for the Hugging Face models only:
``--only`` the others without it) and accelsim:

    python scripts/export_op_fixtures.py [--out tests/fixtures/onnx] [--only NAME ...]

Every block has random weights and is exported in training mode at batch 1; the
files are stripped and gzipped as the suite's fixtures are.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx
import torch
from torch import nn

from accelsim import export_onnx

SEQUENCE = (16, 64)
"""Tokens and width of the sequence blocks' float input."""
MEMORY = (32, 64)
"""Positions and width of a decoder layer's memory (its second input)."""
Shapes = tuple[int, ...] | tuple[tuple[int, ...], ...]
"""A block's input shape, or one per input (as ``export_onnx`` takes them)."""


class SelfAttention(nn.Module):
    """``nn.MultiheadAttention`` as self-attention, batch first, weights not returned."""

    def __init__(self, causal: bool) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(64, 4, batch_first=True)
        self.causal = causal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = None
        if self.causal:
            mask = torch.triu(torch.full((x.shape[1], x.shape[1]), float("-inf")), 1)
        return self.attn(x, x, x, attn_mask=mask, need_weights=False)[0]


class SdpaAttention(nn.Module):
    """Q, K and V linears and ``F.scaled_dot_product_attention`` under a boolean
    lower-triangular mask (a causal mask written as a mask)."""

    def __init__(self) -> None:
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(64, 64) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q, k, v = (p(x).view(b, s, 4, 16).transpose(1, 2) for p in (self.q, self.k, self.v))
        mask = torch.ones(s, s, dtype=torch.bool).tril()
        y = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.o(y.transpose(1, 2).reshape(b, s, 64))


class Lstm(nn.Module):
    """A bidirectional two-layer LSTM's (or GRU's) output sequence."""

    def __init__(self, gru: bool = False, batch_first: bool = True) -> None:
        super().__init__()
        kind = nn.GRU if gru else nn.LSTM
        self.lstm = kind(64, 32, num_layers=2, batch_first=batch_first, bidirectional=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lstm(x)[0]


class StochasticDepth(nn.Module):
    """torchvision's ``stochastic_depth`` in ``row`` mode: a sample's branch dropped."""

    def __init__(self, rate: float) -> None:
        super().__init__()
        self.rate = rate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keep = 1 - self.rate
        noise = torch.empty([x.shape[0], 1, 1, 1]).bernoulli_(keep).div_(keep)
        return x * noise


class Chains(nn.Module):
    """A conv, in-place dropout, a hard-sigmoid gate (of a 1x1 conv), stochastic depth on a residual
    branch, a hard swish and a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.drop = nn.Dropout(0.2, inplace=True)
        self.squeeze = nn.Conv2d(8, 8, 1)
        self.gate = nn.Hardsigmoid()
        self.depth = StochasticDepth(0.1)
        self.act = nn.Hardswish()
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.drop(self.conv(x))
        return self.head(self.act(y + self.depth(y * self.gate(self.squeeze(y)))))


class EncoderBlock(nn.Module):
    """torchvision's ViT ``EncoderBlock``: pre-norm attention and MLP, residual adds."""

    def __init__(self) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(64)
        self.self_attention = nn.MultiheadAttention(64, 4, batch_first=True)
        self.dropout = nn.Dropout(0.1)
        self.ln_2 = nn.LayerNorm(64)
        self.mlp = nn.Sequential(
            nn.Linear(64, 128), nn.GELU(), nn.Dropout(0.1), nn.Linear(128, 64), nn.Dropout(0.1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.ln_1(x)
        y = self.self_attention(y, y, y, need_weights=False)[0]
        x = x + self.dropout(y)
        return x + self.mlp(self.ln_2(x))


class TinyVit(nn.Module):
    """torchvision's ``VisionTransformer`` in small: 8x8 patches of a 32x32 image, a
    class token, a learned position embedding, one block, the class token's head."""

    def __init__(self) -> None:
        super().__init__()
        self.conv_proj = nn.Conv2d(3, 64, 8, stride=8)
        self.class_token = nn.Parameter(torch.zeros(1, 1, 64))
        self.pos_embedding = nn.Parameter(torch.zeros(1, 17, 64))
        self.dropout = nn.Dropout(0.1)
        self.layer = EncoderBlock()
        self.ln = nn.LayerNorm(64)
        self.head = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        x = self.conv_proj(x).reshape(n, 64, 16).permute(0, 2, 1)
        x = torch.cat([self.class_token.expand(n, -1, -1), x], dim=1)
        x = self.ln(self.layer(self.dropout(x + self.pos_embedding)))
        return self.head(x[:, 0])


class LayerNorm2d(nn.LayerNorm):
    """torchvision's ConvNeXt ``LayerNorm2d``: a layernorm of each position's channels."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.permute(0, 2, 3, 1)
        x = nn.functional.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class CNBlock(nn.Module):
    """torchvision's ConvNeXt ``CNBlock``: a depthwise 7x7 conv, channels-last
    layernorm and MLP, a layer scale, stochastic depth and the residual add."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.layer_scale = nn.Parameter(torch.ones(dim, 1, 1) * 1e-6)
        self.stochastic_depth = StochasticDepth(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(self.dwconv(x).permute(0, 2, 3, 1))
        y = self.pwconv2(self.act(self.pwconv1(y))).permute(0, 3, 1, 2)
        return self.stochastic_depth(self.layer_scale * y) + x


class TinyConvNext(nn.Module):
    """torchvision's ``ConvNeXt`` in small: a 4x4 patch stem, one block, a
    downsampling layer and the classifier, on a 3x32x32 image."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 4, stride=4), LayerNorm2d(32))
        self.block = CNBlock(32)
        self.down = nn.Sequential(LayerNorm2d(32), nn.Conv2d(32, 64, 2, stride=2))
        self.classifier = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), LayerNorm2d(64), nn.Flatten(1), nn.Linear(64, 10)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.down(self.block(self.stem(x))))


class CrossAttention(nn.Module):
    """``nn.MultiheadAttention(64, 4, kdim=48, vdim=48, batch_first=True)`` as
    cross-attention, ``attn(q, kv, kv)``: keys and values of their own width (separate
    K and V projections)."""

    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(64, 4, kdim=48, vdim=48, batch_first=True)

    def forward(self, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        return self.attn(q, kv, kv, need_weights=False)[0]


class PaddedEncoder(nn.Module):
    """``nn.TransformerEncoderLayer(64, 4, 256, batch_first=True)`` given a key padding
    mask, a boolean input of its own: ``forward(x, mask)``."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(64, 4, 256, batch_first=True)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.layer(x, src_key_padding_mask=mask)


class CausalDecoder(nn.Module):
    """``nn.TransformerDecoderLayer(64, 4, 256, batch_first=True)`` with a causal
    ``tgt_mask`` on its self-attention (``generate_square_subsequent_mask``)."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerDecoderLayer(64, 4, 256, batch_first=True)

    def forward(self, tgt: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        return self.layer(tgt, memory, tgt_mask=mask)


class QkvAttention(nn.Module):
    """``nn.MultiheadAttention(32, 4, batch_first=True)`` called as ``attn(q, k, v)`` on
    three inputs: keys and values from two different tensors (with ``kdim`` and
    ``vdim``, of their own widths: separate Q, K and V projections)."""

    def __init__(self, kdim: int | None = None, vdim: int | None = None) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(32, 4, kdim=kdim, vdim=vdim, batch_first=True)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return self.attn(q, k, v, need_weights=False)[0]


DECODER = (SEQUENCE, MEMORY)
"""A decoder layer's inputs: the target sequence and the encoder's output (memory)."""

BLOCKS: dict[str, tuple[Callable[[], nn.Module], Shapes]] = {
    "torch_mha": (lambda: SelfAttention(causal=False), SEQUENCE),
    "torch_mha_causal": (lambda: SelfAttention(causal=True), SEQUENCE),
    "torch_encoder_layer": (
        lambda: nn.TransformerEncoderLayer(64, 4, 256, batch_first=True, activation="gelu"),
        SEQUENCE,
    ),
    "torch_lstm": (Lstm, SEQUENCE),
    "torch_chains": (Chains, (3, 8, 8)),
    "torch_tiny_vit": (TinyVit, (3, 32, 32)),
    "torch_tiny_convnext": (TinyConvNext, (3, 32, 32)),
    "torch_gru": (lambda: Lstm(gru=True), SEQUENCE),
    "torch_sdpa_masked": (SdpaAttention, SEQUENCE),
    "torch_encoder_layer_seq_first": (
        lambda: nn.TransformerEncoderLayer(64, 4, 256, activation="gelu"),
        SEQUENCE,
    ),
    "torch_lstm_seq_first": (lambda: Lstm(batch_first=False), SEQUENCE),
    "torch_adaptive_pool": (
        lambda: nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.AdaptiveAvgPool2d(5), nn.Flatten(), nn.Linear(200, 10)
        ),
        (3, 14, 14),
    ),
    "torch_decoder_layer": (
        lambda: nn.TransformerDecoderLayer(64, 4, 256, batch_first=True),
        DECODER,
    ),
    "torch_decoder_layer_causal": (CausalDecoder, DECODER),
    "torch_decoder_layer_seq_first": (lambda: nn.TransformerDecoderLayer(64, 4, 256), DECODER),
    "torch_mha_cross": (CrossAttention, (SEQUENCE, (32, 48))),
    "torch_mha_qkv": (QkvAttention, ((16, 32), (24, 32), (24, 32))),
    "torch_mha_qkv_widths": (lambda: QkvAttention(24, 48), ((16, 32), (24, 24), (24, 48))),
}
SEQUENCE_FIRST = frozenset(
    {"torch_encoder_layer_seq_first", "torch_lstm_seq_first", "torch_decoder_layer_seq_first"}
)
"""Blocks that read their input's first axis as the sequence (``batch_first=False``),
exported as such: ``(sequence, 1, features)``."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("tests/fixtures/onnx"))
    parser.add_argument("--only", nargs="*", default=None, help="block names (default: all)")
    args = parser.parse_args()
    path = Path(__file__).with_name("export_onnx_fixtures.py")
    spec = importlib.util.spec_from_file_location("export_onnx_fixtures", path)
    assert spec is not None and spec.loader is not None
    fixtures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixtures)
    torch.manual_seed(0)
    for name, (build, shape) in BLOCKS.items():
        if args.only is None or name in args.only:
            first = name in SEQUENCE_FIRST
            _write(fixtures, args.out, name, export_onnx(build(), shape, sequence_first=first))
    for name, masked in MASKED.items():
        if args.only is None or name in args.only:
            _write(fixtures, args.out, name, _masked_export(masked()))
    for name in HUGGING_FACE:
        if args.only is None or name in args.only:
            ids = ((HF_TOKENS,), (HF_TOKENS,))
            model = hugging_face(name)
            _write(fixtures, args.out, name, export_onnx(model, ids, input_types=("int", "int")))


MASKED: dict[str, Callable[[], nn.Module]] = {"torch_encoder_layer_padding_mask": PaddedEncoder}
"""Blocks whose second input is a boolean mask of one flag per token, exported by
``torch.onnx.export`` itself (``accelsim.export_onnx``'s examples are floats)."""


def _masked_export(module: nn.Module) -> bytes:
    """``module`` exported in training mode at batch 1, a sequence and a boolean mask."""
    examples = (torch.randn(1, *SEQUENCE), torch.zeros(1, SEQUENCE[0], dtype=torch.bool))
    program = torch.onnx.export(
        module.train(), examples, dynamo=True, optimize=False, opset_version=20
    )
    assert program is not None
    return bytes(program.model_proto.SerializeToString())


HF_TOKENS = 16
"""Tokens of the Hugging Face models' ``input_ids`` and ``attention_mask``."""


class Masked(nn.Module):
    """A Hugging Face model called with token ids and an attention mask (integers, ones
    and zeros per token), returning its last hidden states."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        out = self.model(input_ids=input_ids, attention_mask=attention_mask)
        hidden: torch.Tensor = out.last_hidden_state
        return hidden


HUGGING_FACE: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "hf_bert_masked": (
        "Bert",
        {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}
        | {"intermediate_size": 256, "max_position_embeddings": 64},
        {"add_pooling_layer": False},  # the last hidden states are the output
    ),
    # The exact GELU: the tanh approximation of GPT-2's ``gelu_new``, written op by op,
    # is not read as a GELU. Its feed-forward is 4 x 64 = 256 wide by default.
    "hf_gpt2_masked": (
        "GPT2",
        {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 64}
        | {"activation_function": "gelu", "bos_token_id": 0, "eos_token_id": 0},
        {},
    ),
    "hf_distilbert_masked": (
        "DistilBert",
        {"dim": 64, "n_layers": 2, "n_heads": 4, "hidden_dim": 256}
        | {"max_position_embeddings": 64},
        {},
    ),
}
"""Hugging Face models built from a config (random weights, nothing downloaded; needs
transformers), exported with ``input_ids`` and ``attention_mask`` of
:data:`HF_TOKENS` integers each: the family's name in transformers, its config (2
layers, width 64, 4 heads, feed-forward 256, 64 positions; a 1,000-token vocabulary
for all) and the model's arguments."""


def hugging_face(name: str, attention: str = "eager") -> nn.Module:
    """The Hugging Face model ``name`` of :data:`HUGGING_FACE`, built from its config,
    its attention written by ``attention`` (transformers' ``attn_implementation``:
    ``eager``, the fixtures', or ``sdpa``, transformers' default)."""
    import transformers

    family, sizes, arguments = HUGGING_FACE[name]
    config_class = getattr(transformers, f"{family}Config")
    config = config_class(vocab_size=1000, attn_implementation=attention, **sizes)
    return Masked(getattr(transformers, f"{family}Model")(config, **arguments))


def _write(fixtures: Any, folder: Path, name: str, data: bytes) -> None:
    """The exported ``data`` stripped and gzipped to ``folder/name.onnx.gz``."""
    model = onnx.load_from_string(fixtures.stripped(data))
    model.doc_string = f"{name}: random weights, constant data stripped"
    out = folder / f"{name}.onnx.gz"
    with gzip.GzipFile(out, "wb", mtime=0) as stream:
        stream.write(model.SerializeToString())
    print(f"{out}: {out.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
