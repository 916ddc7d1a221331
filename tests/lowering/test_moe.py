"""The ``moe`` layer kind: a router, experts as SwiGLU MLPs of their capacity, the
combine; every count worked out by hand beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import simulate_run
from accelsim.graph.ops import NO_EXPERT, GemmOp, Phase, VectorOp
from accelsim.lowering.expert_load import capacity
from accelsim.workload.model import Moe
from tests.conftest import ROOT, params
from tests.lowering.test_layer_kinds import EMBED, TOKENS, problems, shapes, vector_ops
from tests.lowering.test_lowering import lower, macs, net


def moe(**keys: Any) -> dict[str, Any]:
    """Tokens 8 -> embedding 50 x 16 -> moe of 4 experts, top-2, inner width 24."""
    return {"name": "moe", "kind": "moe", "experts": 4, "top_k": 2, "intermediate": 24, **keys}


def test_capacity_is_the_even_share_times_the_factor_rounded_up() -> None:
    layer = Moe(name="m", kind="moe", experts=8, top_k=2, intermediate=1)
    assert capacity(2048, layer) == 2048 * 2 // 8 == 512
    assert capacity(7, layer) == 2  # 14 / 8 = 1.75
    wide = layer.model_copy(update={"capacity_factor": 1.25})
    assert capacity(2048, wide) == 640  # 1.25 x 512
    assert capacity(10**15, wide) == 312_500_000_000_000  # exact past 2^53


def test_parameters_macs_and_ops_of_a_moe_layer_by_hand() -> None:
    graph = lower(net(TOKENS, EMBED, moe()), 2)
    # Parameters: embedding 50 x 16 = 800; router 16 x 4 = 64; each expert w1, w3
    # 16 x 24 and w2 24 x 16: 3 x 384 = 1,152, x 4 experts = 4,608.
    assert params(graph) == 800 + 64 + 4 * 1152
    # 2 samples x 8 tokens = 16 tokens; capacity ceil(16 x 2 / 4) = 8 tokens an expert.
    got = shapes(graph, "moe")
    assert got["moe.router.fwd"] == (16, 4, 16, 1)
    assert got["moe.experts.3.w1.fwd"] == got["moe.experts.3.w3.fwd"] == (8, 24, 16, 1)
    assert got["moe.experts.3.w2.fwd"] == (8, 16, 24, 1)
    assert got["moe.experts.0.w2.dx"] == (8, 24, 16, 1)
    assert got["moe.experts.0.w2.dw"] == (16, 24, 8, 1)
    assert got["moe.experts.0.w1.dx"] == (8, 16, 24, 1)
    assert got["moe.experts.0.w1.dw"] == (24, 16, 8, 1)
    assert got["moe.router.dx"] == (16, 16, 4, 1)
    assert got["moe.router.dw"] == (4, 16, 16, 1)
    # Forward: router 16 x 4 x 16 = 1,024; experts 4 x 3 x 8 x 24 x 16 = 36,864.
    assert macs(graph, "moe", Phase.FWD) == 1024 + 36864
    # dX and dW each repeat every GEMM's MACs.
    assert macs(graph, "moe", Phase.BWD_INPUT) == macs(graph, "moe", Phase.BWD_WEIGHT) == 37888
    ops = vector_ops(graph, "moe")
    assert ops["moe.softmax.fwd"] == (64, 5)  # 16 tokens x 4 logits
    assert ops["moe.topk"] == (64, 2)  # one compare-and-select pass per kept expert
    assert ops["moe.experts.1.dispatch"] == (8 * 16, 1)
    assert ops["moe.experts.1.act.fwd"] == (8 * 24, 5)  # SiLU
    assert ops["moe.experts.1.act.bwd"] == (8 * 24, 6)
    assert ops["moe.experts.1.mul.fwd"] == (8 * 24, 1)
    assert ops["moe.experts.1.combine"] == (8 * 16, 2)
    assert ops["moe.experts.1.combine.bwd"] == (8 * 16, 2)
    assert ops["moe.experts.1.dispatch.bwd"] == (8 * 16, 1)
    assert ops["moe.softmax.bwd"] == (64, 3)


def test_every_experts_op_and_parameter_names_its_expert_as_data() -> None:
    graph = lower(net(TOKENS, EMBED, moe()), 2)
    mine = [op for op in graph.ops if isinstance(op, (GemmOp, VectorOp)) and op.layer == "moe"]
    by_expert: dict[int, int] = {}
    for op in mine:
        by_expert[op.expert] = by_expert.get(op.expert, 0) + 1
        assert (op.expert == NO_EXPERT) == (".experts." not in op.name)
    # Per expert: 3 GEMMs forward, 6 backward; dispatch, SiLU, mul, combine forward;
    # combine, mul, SiLU and dispatch backward; 3 updates.  Shared: the router's GEMM,
    # softmax and top-k, their backward (top-k, softmax, dX, dW) and its update.
    assert by_expert == {NO_EXPERT: 8, 0: 20, 1: 20, 2: 20, 3: 20}
    experts = {p.weight.name: p.expert for p in graph.parameters if p.layer == "moe"}
    assert experts["moe.router.W"] == NO_EXPERT
    assert experts["moe.experts.2.w3"] == 2


def test_top_k_above_the_experts_is_refused() -> None:
    assert problems(net(TOKENS, EMBED, moe(top_k=5))) == [
        "w.yaml: layers[1].top_k: at most experts (4) (got 5)"
    ]


@pytest.mark.parametrize("compile_mode", ["eager", "fused"])
def test_a_moe_step_runs_the_same_in_both_engines(tmp_path: Path, compile_mode: str) -> None:
    path = tmp_path / "moe.yaml"
    head = {"name": "head", "kind": "linear", "out_features": 50, "bias": False}
    data = net(TOKENS, EMBED, moe(), head)
    path.write_text(yaml.safe_dump(data), "utf-8")
    sets = [f"workload={path}", "batch_size=2", f"lowering.compile={compile_mode}"]
    runs = [
        simulate_run(load_inputs(ROOT / "configs/runs/default.yaml", parse_sets([*sets, e])))
        for e in ("timing.engine=simpy", "timing.engine=compiled")
    ]
    simpy, compiled = (r.summary() for r in runs)
    assert simpy["total_cycles"] == compiled["total_cycles"] > 0
    # MACs: moe as above; head 16 x 16 x 50 = 12,800 forward, x 3 with dX and dW.
    assert compiled["macs"]["total"] == 3 * (1024 + 36864) + 3 * 12800
