"""Load imbalance of a ``moe`` layer (``hot_load``, ``overflow``): the tokens routed to
each expert, those it computes and those dropped, counted by hand; the GEMMs and the
all-to-alls that follow them; more skew never faster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import simulate_run, simulate_training
from accelsim.errors import ConfigError
from accelsim.graph.ops import NO_EXPERT, GemmOp, Phase
from accelsim.lowering.expert_load import expert_load, routed_tokens
from accelsim.network.collectives import Collective
from accelsim.workload.model import Moe
from tests.conftest import ROOT
from tests.lowering.test_layer_kinds import EMBED, TOKENS, problems, shapes
from tests.lowering.test_lowering import lower, macs, net
from tests.lowering.test_moe import moe
from tests.mapping.test_expert_parallel import comms, inputs, placed

H, F = 16, 24  # the width and inner width of tests.lowering.test_moe's layer


def layer(**keys: Any) -> Moe:
    """4 experts, top-2: 8 tokens make 16 assignments, an even share of 4."""
    return Moe(name="m", kind="moe", experts=4, top_k=2, intermediate=1, **keys)


@pytest.mark.parametrize(
    ("hot", "routed"),
    [
        (1.0, (4, 4, 4, 4)),
        # ceil(1.5 x 4) = 6 to expert 0; 10 over 3: 3 each and one more to the first
        (1.5, (6, 4, 3, 3)),
        (2.0, (8, 3, 3, 2)),  # 8 is every token: expert 0 is in every token's top 2
    ],
)
def test_the_hot_expert_takes_its_multiple_and_the_others_share_the_rest(
    hot: float, routed: tuple[int, ...]
) -> None:
    assert routed_tokens(8, layer(hot_load=hot)) == routed
    assert sum(routed) == 8 * 2


def test_an_uneven_share_rounds_the_hot_expert_up() -> None:
    # 7 tokens x 2 = 14 assignments over 8 experts: 1.75 each; hot ceil(1.75) = 2, the
    # other 12 over 7: 1 each and 5 of them one more
    eight = Moe(name="m", kind="moe", experts=8, top_k=2, intermediate=1)
    assert routed_tokens(7, eight) == (2, 2, 2, 2, 2, 2, 1, 1)


@pytest.mark.parametrize(
    ("keys", "computed", "dropped"),
    [
        ({}, (4, 4, 4, 4), 0),
        ({"hot_load": 1.5}, (4, 4, 4, 4), 2),  # capacity 4: expert 0 drops 6 - 4
        ({"hot_load": 2.0}, (4, 4, 4, 4), 4),
        ({"hot_load": 2.0, "capacity_factor": 1.25}, (5, 5, 5, 5), 3),
        ({"hot_load": 1.5, "overflow": "pad"}, (6, 6, 6, 6), 0),  # every expert padded to 6
        ({"hot_load": 1.5, "overflow": "dropless"}, (6, 4, 3, 3), 0),
        ({"hot_load": 1.5, "overflow": "dropless", "capacity_factor": 0.5}, (6, 4, 3, 3), 0),
    ],
)
def test_what_each_expert_computes_and_drops(
    keys: dict[str, Any], computed: tuple[int, ...], dropped: int
) -> None:
    load = expert_load(8, layer(**keys))
    assert load.computed == computed
    assert load.dropped == dropped


def expert_rows(graph_layer: dict[str, Any]) -> dict[int, int]:
    """Each expert's forward w1 GEMM rows (the tokens it computes) of the layer ``moe``
    lowered at 2 samples (16 tokens, 32 assignments, an even share of 8)."""
    graph = lower(net(TOKENS, EMBED, graph_layer), 2)
    return {e: shapes(graph, "moe")[f"moe.experts.{e}.w1.fwd"][0] for e in range(4)}


def test_each_experts_gemms_follow_its_tokens() -> None:
    assert expert_rows(moe()) == {0: 8, 1: 8, 2: 8, 3: 8}
    # hot 1.5 x 8 = 12; 20 over 3: 7, 7, 6
    assert expert_rows(moe(hot_load=1.5)) == {0: 8, 1: 8, 2: 8, 3: 8}  # drop: capacity 8
    assert expert_rows(moe(hot_load=1.5, overflow="pad")) == {0: 12, 1: 12, 2: 12, 3: 12}
    assert expert_rows(moe(hot_load=1.5, overflow="dropless")) == {0: 12, 1: 7, 2: 7, 3: 6}


def test_dropless_conserves_the_expert_macs_of_a_balanced_router() -> None:
    """Every assignment computed once: 32 tokens x 3 GEMMs of 16 x 24, whatever the
    skew; padding adds 4 experts x 12 - 32 = 16 tokens' worth."""
    per_token = 3 * H * F

    def expert_macs(keys: dict[str, Any]) -> int:
        graph = lower(net(TOKENS, EMBED, moe(**keys)), 2)
        router = 16 * 4 * 16
        return macs(graph, "moe", Phase.FWD) - router

    assert expert_macs({}) == 32 * per_token
    assert expert_macs({"hot_load": 2.0, "overflow": "dropless"}) == 32 * per_token
    assert expert_macs({"hot_load": 1.5, "overflow": "pad"}) == 48 * per_token
    graph = lower(net(TOKENS, EMBED, moe(hot_load=2.0, overflow="dropless")), 2)
    experts = [op for op in graph.ops if isinstance(op, GemmOp) and op.expert != NO_EXPERT]
    assert {op.expert for op in experts} == {0, 1, 2, 3}


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (
            {"hot_load": 2.5},
            "w.yaml: layers[1].hot_load: at most experts / top_k (4 / 2): a token picks an"
            " expert once (got 2.5)",
        ),
        (
            # 8 tokens, top-1 of 4: hot ceil(3.75 x 2) = 8 leaves the others nothing
            {"hot_load": 3.75, "top_k": 1, "overflow": "dropless"},
            "w.yaml: layers[1].hot_load: leaves an expert no token of a sample under"
            " overflow dropless (got 3.75)",
        ),
    ],
)
def test_refusals(keys: dict[str, Any], message: str) -> None:
    assert problems(net(TOKENS, EMBED, moe(**keys))) == [message]


def test_expert_parallel_pads_every_experts_buffer_to_the_hot_one(tmp_path: Path) -> None:
    """tests/mapping/test_expert_parallel.py's model at e = 2, each rank routing 8
    tokens (16 assignments) with expert 0 hot at 1.5: 6 tokens, padded to 6 for every
    expert.  Each rank's all-to-all buffer: 4 experts x 6 tokens x 16 words x 2 B =
    768 B (512 balanced); rank 0's experts compute e x 6 = 12 tokens."""
    sets = [f"workload.layers[{m}].{k}={v}" for m in ("moe0", "moe1") for k, v in
            (("hot_load", 1.5), ("overflow", "pad"))]  # fmt: skip
    graph = placed(tmp_path, 2, *sets)
    a2a = comms(graph, Collective.ALL_TO_ALL)
    assert {op.tensor.bytes for op in a2a} == {4 * 6 * H * 2} == {768}
    rows = {op.m for op in graph.ops if isinstance(op, GemmOp) and op.name.endswith("w1.fwd")}
    assert rows == {2 * 6}
    dropless = [f"workload.layers[{m}].overflow=dropless" for m in ("moe0", "moe1")]
    with pytest.raises(ConfigError) as caught:
        placed(tmp_path, 2, *dropless)
    assert [str(p) for p in caught.value.problems] == [
        f"--set: run.parallel.expert: not with layer {m}'s overflow dropless: its ranks' experts would"
        " compute unequal tokens and exchange unequal pieces, an all-to-all the network"
        " does not model (overflow pad or drop keeps every expert's buffer equal) (got 2)"
        for m in ("moe0", "moe1")
    ]


def cycles(tmp_path: Path, keys: dict[str, Any]) -> int:
    path = tmp_path / "moe.yaml"
    head = {"name": "head", "kind": "linear", "out_features": 50, "bias": False}
    path.write_text(yaml.safe_dump(net(TOKENS, EMBED, moe(**keys), head)), "utf-8")
    sets = [f"workload={path}", "batch_size=2", "timing.engine=compiled"]
    run = simulate_run(load_inputs(ROOT / "configs/runs/default.yaml", parse_sets(sets)))
    return run.total_cycles


@pytest.mark.parametrize("overflow", ["drop", "pad", "dropless"])
def test_more_skew_is_never_faster(tmp_path: Path, overflow: str) -> None:
    steps = [cycles(tmp_path, {"hot_load": h, "overflow": overflow}) for h in (1, 1.5, 2)]
    assert steps == sorted(steps)
    if overflow == "drop":  # the shapes are the capacity's whatever the skew
        assert len(set(steps)) == 1
    if overflow == "pad":  # every expert's GEMMs grow with the hot one
        assert steps[0] < steps[1] < steps[2]


def test_more_skew_is_never_faster_with_expert_parallelism(tmp_path: Path) -> None:
    """The model at e = 2 on 4 processors, every expert padded to the hot one."""

    def step(hot: float) -> int:
        sets = [f"workload.layers[{m}].{k}={v}" for m in ("moe0", "moe1") for k, v in
                (("hot_load", hot), ("overflow", "pad"))]  # fmt: skip
        run = simulate_training(inputs(tmp_path, 2, "timing.engine=compiled", *sets)).base
        return run.total_cycles

    steps = [step(h) for h in (1, 1.5, 2)]
    assert steps[0] < steps[1] < steps[2]
