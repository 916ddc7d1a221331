"""Export graph-only ONNX fixtures of the suite's models, and GPT-2 small's workload.

Run with a Python that has torch, torchvision and transformers (and accelsim):

    python scripts/export_onnx_fixtures.py [--out tests/fixtures/onnx] [--only resnet18 ...]

Every model is built from its code with random weights (nothing is downloaded) and
exported in training mode (:func:`accelsim.export_onnx`), then
every constant of more than :data:`KEEP_ELEMENTS` elements loses its data (its
dimensions stay: the importer reads only shapes), node metadata other than the module
path is dropped, and the file is gzipped.
"""

from __future__ import annotations

import argparse
import gzip
import math
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx
import torch
import torchvision
from torch import nn

from accelsim import export_onnx

KEEP_ELEMENTS = 64
"""Constants up to this size keep their values (scalars, shapes, dropout rates)."""
KEPT_METADATA = ("pkg.torch.onnx.name_scopes", "pkg.torch.onnx.class_hierarchy")
"""The node metadata kept (the module path that names a layer, and its modules'
classes); the exporter's stack traces and FX node texts are dropped."""


def _bert() -> tuple[nn.Module, tuple[int, ...], bool, str]:
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(attn_implementation="eager")
    model = BertForSequenceClassification(config)
    return _IdsOnly(model), (128,), True, "transformers.BertForSequenceClassification(BertConfig())"


class _IdsOnly(nn.Module):
    """A Hugging Face model called with token ids only, returning its logits."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=ids).logits


class CausalSelfAttention(nn.Module):
    """GPT-2's attention with separate Q, K, V projections (the same parameters as its
    fused ``c_attn``), a causal mask from ``torch.tril`` and dropout on the
    probabilities and the output."""

    def __init__(self, width: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v = (nn.Linear(width, width) for _ in range(3))
        self.c_proj = nn.Linear(width, width)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, steps, width = x.shape
        per_head = width // self.heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(batch, steps, self.heads, per_head).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(per_head))
        mask = torch.ones(steps, steps, dtype=torch.bool).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
        probs = self.attn_dropout(torch.softmax(scores, dim=-1))
        out = (probs @ v).transpose(1, 2).reshape(batch, steps, width)
        return self.resid_dropout(self.c_proj(out))


class Gpt2Block(nn.Module):
    """Pre-LayerNorm transformer block: attention and a 4x MLP with tanh-GELU."""

    def __init__(self, width: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads, dropout)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(
            OrderedDict(
                c_fc=nn.Linear(width, 4 * width),
                act=nn.GELU(approximate="tanh"),
                c_proj=nn.Linear(4 * width, width),
                dropout=nn.Dropout(dropout),
            )
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt2(nn.Module):
    """GPT-2 (Radford et al., 2019) as Hugging Face's GPT2LMHeadModel defines it: token
    and position embeddings, pre-LN blocks, a final LayerNorm and an output layer tied
    to the token embedding. Small: 12 layers, width 768, 12 heads, 124,439,808
    parameters."""

    def __init__(
        self, vocab: int = 50257, positions: int = 1024, width: int = 768, layers: int = 12
    ) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(positions, width)
        self.drop = nn.Dropout(0.1)
        self.h = nn.ModuleList(Gpt2Block(width, width // 64, 0.1) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.lm_head = TiedHead(self.wte)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1])
        x = self.drop(self.wte(ids) + self.wpe(positions))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class TiedHead(nn.Module):
    """The output layer: logits from the token embedding's own table (no bias)."""

    def __init__(self, embedding: nn.Embedding) -> None:
        super().__init__()
        self.embedding = embedding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.embedding.weight.t()


def _gpt2() -> tuple[nn.Module, tuple[int, ...], bool, str]:
    return Gpt2(), (GPT2_TOKENS,), True, "scripts/export_onnx_fixtures.py Gpt2() (GPT-2 small)"


def _vision(name: str, size: int = 224, **kwargs: Any) -> Callable[[], Any]:
    def build() -> tuple[nn.Module, tuple[int, ...], bool, str]:
        model = getattr(torchvision.models, name)(weights=None, **kwargs)
        args = ", ".join(f"{k}={v}" for k, v in kwargs.items())
        return model, (3, size, size), False, f"torchvision.models.{name}({args})"

    return build


MODELS: dict[str, Callable[[], tuple[nn.Module, tuple[int, ...], bool, str]]] = {
    "alexnet": _vision("alexnet"),
    "vgg13": _vision("vgg13"),
    "vgg16": _vision("vgg16"),
    "resnet18": _vision("resnet18"),
    "resnet34": _vision("resnet34"),
    "resnet50": _vision("resnet50"),
    "resnet101": _vision("resnet101"),
    "resnet152": _vision("resnet152"),
    "mobilenet_v2": _vision("mobilenet_v2"),
    "densenet121": _vision("densenet121"),
    "inception_v3": _vision("inception_v3", 299, aux_logits=False, init_weights=False),
    "bert_base": _bert,
    "gpt2_small": _gpt2,
}
GPT2_TOKENS = 1024
"""GPT-2's context: the sequence length of its fixture and workload."""


def stripped(data: bytes) -> bytes:
    """The model with every large constant's data removed (dimensions kept)."""
    model = onnx.load_from_string(data)
    tensors = list(model.graph.initializer) + [
        a.t for n in model.graph.node for a in n.attribute if a.type == onnx.AttributeProto.TENSOR
    ]
    for node in model.graph.node:
        kept = [p for p in node.metadata_props if p.key in KEPT_METADATA]
        del node.metadata_props[:]
        node.metadata_props.extend(kept)
    for tensor in tensors:
        if math.prod(tensor.dims) > KEEP_ELEMENTS:
            tensor.ClearField("raw_data")
            for field in ("float_data", "int32_data", "int64_data", "double_data"):
                tensor.ClearField(field)
    return model.SerializeToString()


def write_fixture(path: Path, data: bytes, built: str) -> None:
    """The exported model ``data`` stripped, its doc string saying how it was
    ``built``, gzipped to ``path``."""
    model_proto = onnx.load_from_string(stripped(data))
    model_proto.doc_string = f"{built}; random weights, constant data stripped"
    with gzip.GzipFile(path, "wb", mtime=0) as stream:
        stream.write(model_proto.SerializeToString())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("tests/fixtures/onnx"))
    parser.add_argument("--only", nargs="*", default=None, help="model names (default: all)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    for name in args.only or list(MODELS):
        model, shape, tokens, built = MODELS[name]()
        path = args.out / f"{name}.onnx.gz"
        write_fixture(path, export_onnx(model, shape, tokens), built)
        print(f"{path}: {path.stat().st_size:,} bytes ({built})")


if __name__ == "__main__":
    main()
