"""A block repeated N times (``repeat`` entries of ``layers``): the expanded table, its
wiring, the copies' typed block, and every refusal with its exact message."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from accelsim.config.loader import parse_sets
from accelsim.errors import WorkloadError
from accelsim.lowering.infer import load_model
from accelsim.workload.loader import load_workload
from accelsim.workload.model import Block
from tests.conftest import ROOT

# Llama-3.2-1B's decoder layer as a block: the table workloads/llama3_2_1b.yaml spells
# out 16 times.
LLAMA_BLOCK = [
    {"name": "input_layernorm", "kind": "rmsnorm", "inputs": ["block_input"]},
    {"name": "self_attn", "kind": "attention", "heads": 32, "kv_heads": 8, "bias": False,
     "causal": True, "rotary": True},
    {"name": "add", "kind": "add", "inputs": ["block_input", "self_attn"]},
    {"name": "post_attention_layernorm", "kind": "rmsnorm"},
    {"name": "mlp.gate_proj", "kind": "linear", "out_features": 8192, "bias": False},
    {"name": "mlp.act_fn", "kind": "activation", "function": "silu"},
    {"name": "mlp.up_proj", "kind": "linear", "out_features": 8192, "bias": False,
     "inputs": ["post_attention_layernorm"]},
    {"name": "mlp.mul", "kind": "mul", "inputs": ["mlp.act_fn", "mlp.up_proj"]},
    {"name": "mlp.down_proj", "kind": "linear", "out_features": 2048, "bias": False},
    {"name": "add_1", "kind": "add", "inputs": ["add", "mlp.down_proj"]},
]  # fmt: skip


def _written(tmp_path: Path, layers: list[object], name: str = "w.yaml") -> Path:
    path = tmp_path / name
    data = {"name": "w", "input": {"kind": "tokens", "length": 8}, "layers": layers}
    path.write_text(yaml.safe_dump(data, sort_keys=False), "utf-8")
    return path


def _llama(count: int = 16) -> list[object]:
    return [
        {"name": "model.embed_tokens", "kind": "embedding", "num_embeddings": 128256,
         "embedding_dim": 2048, "inputs": ["input"]},
        {"repeat": {"name": "model.layers", "count": count, "layers": LLAMA_BLOCK}},
        {"name": "model.norm", "kind": "rmsnorm", "inputs": [f"model.layers.{count - 1}.add_1"]},
        {"name": "lm_head", "kind": "linear", "out_features": 128256, "bias": False,
         "tied_to": "model.embed_tokens"},
        {"name": "loss", "kind": "cross_entropy"},
    ]  # fmt: skip


def test_a_repeated_block_is_the_table_written_out_layer_by_layer(tmp_path: Path) -> None:
    written = load_workload(ROOT / "workloads" / "llama3_2_1b.yaml")
    repeated = load_workload(_written(tmp_path, _llama()))
    assert len(repeated.layers) == len(written.layers) == 1 + 16 * 10 + 3
    for mine, theirs in zip(repeated.layers, written.layers, strict=True):
        assert mine.model_dump(exclude={"block"}) == theirs.model_dump()


def test_each_copy_reads_its_own_layers_and_the_previous_copys_output(tmp_path: Path) -> None:
    layers = {x.name: x for x in load_workload(_written(tmp_path, _llama(3))).layers}
    assert layers["model.layers.0.add"].inputs == ["model.embed_tokens", "model.layers.0.self_attn"]
    assert layers["model.layers.2.add"].inputs == [
        "model.layers.1.add_1",
        "model.layers.2.self_attn",
    ]
    assert layers["model.layers.1.mlp.mul"].inputs == [
        "model.layers.1.mlp.act_fn",
        "model.layers.1.mlp.up_proj",
    ]
    assert layers["model.layers.2.input_layernorm"].inputs == ["model.layers.1.add_1"]
    assert layers["model.layers.2.post_attention_layernorm"].inputs is None  # the previous layer
    assert layers["model.layers.2.mlp.down_proj"].block == Block(repeat="model.layers", index=2)
    assert layers["model.norm"].block is None


def test_a_block_first_in_the_table_reads_the_model_input(tmp_path: Path) -> None:
    path = tmp_path / "v.yaml"
    path.write_text(
        "name: v\ninput: {kind: vector, features: 4}\nlayers:\n"
        "  - repeat: {name: fc, count: 2, layers: [{name: l, kind: linear, out_features: 4},"
        " {name: add, kind: add, inputs: [block_input, l]}]}\n"
        "  - {name: loss, kind: cross_entropy}\n",
        "utf-8",
    )
    layers = load_workload(path).layers
    assert [x.inputs for x in layers if x.kind == "add"] == [
        ["input", "fc.0.l"],
        ["fc.0.add", "fc.1.l"],
    ]


def test_an_override_addresses_one_copy_by_its_full_name(tmp_path: Path) -> None:
    path = _written(tmp_path, _llama(2))
    sets = parse_sets(["layers[model.layers.1.self_attn].heads=16"])
    heads = [x.heads for x in load_workload(path, sets).layers if x.kind == "attention"]
    assert heads == [32, 16]


@pytest.mark.parametrize(
    ("repeat", "message"),
    [
        ({"name": "h", "count": 0, "layers": [{"name": "a", "kind": "rmsnorm"}]},
         "layers[0].repeat.count: must be a whole number of copies, 1 or more (got 0)"),
        ({"name": "h", "count": True, "layers": [{"name": "a", "kind": "rmsnorm"}]},
         "layers[0].repeat.count: must be a whole number of copies, 1 or more (got True)"),
        ({"name": "", "count": 2, "layers": [{"name": "a", "kind": "rmsnorm"}]},
         "layers[0].repeat.name: must be a non-empty name (got '')"),
        ({"name": "h", "count": 2, "layers": []},
         "layers[0].repeat.layers: must be a non-empty list of layers (got [])"),
        ({"name": "h", "layers": [{"name": "a", "kind": "rmsnorm"}]},
         "layers[0].repeat.count: field required"),
        ({"name": "h", "count": 2, "times": 3, "layers": [{"name": "a", "kind": "rmsnorm"}]},
         "layers[0].repeat.times: unknown key; expected name, count or layers"),
        ({"name": "h", "count": 100_001, "layers": [{"name": "a", "kind": "rmsnorm"}]},
         "layers[0].repeat.count: count x the block's layers is more than 100,000 layers"
         " (got 100001)"),
        ({"name": "h", "count": 2, "layers": [{"kind": "rmsnorm"}]},
         "layers[0].repeat.layers[0].name: a layer of a repeated block needs a name"),
        ({"name": "h", "count": 2, "layers": [{"name": "block_input", "kind": "rmsnorm"}]},
         "layers[0].repeat.layers[0].name: block_input names the block's input: a layer needs"
         " its own (got 'block_input')"),
        ({"name": "h", "count": 2, "layers": [{"repeat": {}}]},
         "layers[0].repeat.layers[0]: a repeat inside a repeated block is not supported"),
        ("twice", "layers[0].repeat: must be a mapping of name, count and layers (got 'twice')"),
    ],
)  # fmt: skip
def test_a_malformed_repeat_is_refused_at_its_key(
    tmp_path: Path, repeat: object, message: str
) -> None:
    path = _written(tmp_path, [{"repeat": repeat}, {"name": "loss", "kind": "cross_entropy"}])
    with pytest.raises(WorkloadError) as raised:
        load_workload(path)
    assert str(raised.value) == f"{path}: {message}"


@pytest.mark.parametrize(
    ("keys", "load", "message"),
    [
        ({"heads": 0}, load_workload, "heads: input should be greater than 0 (got 0)"),
        ({"heads": 5, "kv_heads": 5}, load_model, "heads: must divide the model width 2048 (got 5)"),
    ],
)  # fmt: skip
def test_a_problem_in_a_copy_is_reported_once_at_the_layer_as_written(
    tmp_path: Path, keys: dict[str, int], load: Callable[[Path], object], message: str
) -> None:
    """A schema problem (found validating) and a shape problem (found inferring shapes)."""
    block = [*LLAMA_BLOCK[:1], {**LLAMA_BLOCK[1], **keys}, *LLAMA_BLOCK[2:]]
    layers = _llama(4)
    layers[1] = {"repeat": {"name": "model.layers", "count": 4, "layers": block}}
    path = _written(tmp_path, layers)
    with pytest.raises(WorkloadError) as raised:
        load(path)
    assert str(raised.value) == f"{path}: layers[1].repeat.layers[1].{message}"


def test_a_repeat_entry_holds_nothing_else(tmp_path: Path) -> None:
    entry = {"repeat": {"name": "h", "count": 1, "layers": [{"name": "a", "kind": "rmsnorm"}]}}
    path = _written(tmp_path, [{**entry, "name": "x"}, {"name": "loss", "kind": "cross_entropy"}])
    with pytest.raises(WorkloadError) as raised:
        load_workload(path)
    assert str(raised.value) == (
        f"{path}: layers[0].repeat: a repeat entry holds the repeat key alone (got ['name'])"
    )
