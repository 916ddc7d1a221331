"""Tensor parallelism (``run.parallel.tensor``), counted by hand on a 2-block GPT
(``tests/fixtures/workloads/tiny_gpt.yaml``: s = 8 tokens, h = 16, 4 heads, an MLP of
64, a vocabulary of 64 tied to the LM head) at batch b = 2: each rank's GEMMs, the
group's all-reduces and their bytes, the groups, both engines, and the refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelsim.config.enums import CommGroup
from accelsim.config.loader import parse_sets
from accelsim.config.run import OptimizerSpec
from accelsim.driver.inputs import RunInputs, load_inputs
from accelsim.driver.run import _Run, simulate_training
from accelsim.errors import ConfigError
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import (
    CommOp,
    GemmOp,
    OpGraph,
    Phase,
    Stage,
    TensorKind,
    TransferOp,
    VectorOp,
)
from accelsim.lowering.infer import load_model
from accelsim.lowering.tensor_parallel import Role, plan_tensor
from accelsim.mapping.groups import GroupKind, processor_groups
from accelsim.mapping.tensor_placement import tensor_parallel
from accelsim.techniques.base import BASE
from accelsim.timing.costs import UNIT_ARRAY, UNIT_COMM, UNIT_VECTOR
from accelsim.timing.engine import simulate
from tests.conftest import ROOT
from tests.timing.test_compiled import run_compiled
from tests.timing.test_engine import costs, hw, machine

TINY = ROOT / "tests" / "fixtures" / "workloads" / "tiny_gpt.yaml"
S, B, H, HEADS, FF, VOCAB = 8, 2, 16, 4, 64, 64
WORD = 2  # bytes of an activation and a gradient (the default word sizes)


def run_file(tmp_path: Path) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(
        "name: tiny\n"
        f"hardware: {ROOT / 'configs/hardware/default.yaml'}\n"
        f"workload: {TINY}\n"
        f"energy: {ROOT / 'configs/energy/horowitz45.yaml'}\n"
        f"batch_size: {B}\n"
        "optimizer: {kind: adam}\n"
    )
    return path


def inputs(tmp_path: Path, t: int | None, *sets: str, processors: int | None = None) -> RunInputs:
    plan = [] if t is None else [f"run.parallel={{tensor: {t}}}"]
    count = processors or t or 1
    return load_inputs(run_file(tmp_path), parse_sets([f"processors={count}", *plan, *sets]))


def placed(tmp_path: Path, t: int | None, *sets: str, processors: int | None = None) -> OpGraph:
    return _Run(inputs(tmp_path, t, *sets, processors=processors)).placed(BASE, None)


def on(graph: OpGraph, p: int) -> list[GemmOp | VectorOp]:
    return [
        op
        for op in graph.ops
        if isinstance(op, (GemmOp, VectorOp)) and graph.processor[op.op_id] == p
    ]


@pytest.mark.parametrize("t", [2, 4])
def test_each_rank_runs_a_t_th_of_every_gemm_and_the_whole_of_every_norm(
    tmp_path: Path, t: int
) -> None:
    whole = {op.name: op for op in on(placed(tmp_path, None), 0)}
    graph = placed(tmp_path, t)
    for p in range(t):
        for op in on(graph, p):
            name = op.name.removeprefix(f"p{p}/")
            if isinstance(op, GemmOp):
                # every GEMM of this GPT is split: attention, MLP, LM head
                assert op.macs * t == whole[op.name].macs, op.name
            elif ".ln_" in op.layer or op.layer == "ln_f":
                assert op.elements == whole[op.name].elements, name
    rank = sum(op.macs for op in on(graph, 0) if isinstance(op, GemmOp))
    # per block, forward: QKV 16x48x16, QK^T and AV 2 x 2x4 x 8x8x4, out 16x16x16,
    # fc 16x64x16, proj 16x16x64; LM head 16x64x16; backward twice the forward
    block = B * S * (3 * H * H + H * H + 2 * H * FF) + 2 * B * HEADS * S * S * (H // HEADS)
    forward = 2 * block + B * S * H * VOCAB
    assert rank * t == 3 * forward == 368_640


def test_the_group_all_reduces_two_per_block_each_way_and_the_losss_three(
    tmp_path: Path,
) -> None:
    graph = placed(tmp_path, 2)
    comms = [op for op in graph.ops if isinstance(op, CommOp)]
    assert all(op.participants == (0, 1) and op.group is CommGroup.TENSOR for op in comms)
    names = [op.name for op in comms]
    assert names == [
        "wte.out.allreduce",
        "h0.attn.out.allreduce",
        "h0.proj.out.allreduce",
        "h1.attn.out.allreduce",
        "h1.proj.out.allreduce",
        "loss.stats0.allreduce",
        "loss.stats1.allreduce",
        "loss.stats2.allreduce",
        "ln_f.grad<-lm_head.allreduce",
        "h1.ln_2.grad<-h1.fc.allreduce",
        "h1.ln_1.grad<-h1.attn.allreduce",
        "h0.ln_2.grad<-h0.fc.allreduce",
        "h0.ln_1.grad<-h0.attn.allreduce",
    ]
    # a block's output or its input's gradient: b x s x h words; the loss's: one per token
    sizes = [op.tensor.bytes for op in comms]
    assert sizes == [B * S * H * WORD] * 5 + [B * S * WORD] * 3 + [B * S * H * WORD] * 5
    # every reader of a reduced tensor waits for its all-reduce: the residual add
    # after each attention, and each norm's backward after its input gradient's
    (ar,) = [op.op_id for op in comms if op.name == "h0.attn.out.allreduce"]
    add = next(op for op in graph.ops if op.name == "h0.add.fwd" and graph.processor[op.op_id])
    assert ar in add.after
    assert not any(isinstance(op, TransferOp) for op in graph.ops)


def test_tensor_1_is_the_step_without_a_plan(tmp_path: Path) -> None:
    plain, one = placed(tmp_path, None), placed(tmp_path, 1)
    assert plain.ops == one.ops and plain.processor == one.processor


def test_groups_of_data_2_x_tensor_2_and_both_engines_agree(tmp_path: Path) -> None:
    sets = ("assignment=data_parallel",)
    runs = [
        simulate_training(inputs(tmp_path, 2, *sets, f"timing.engine={e}", processors=4)).base
        for e in ("simpy", "compiled")
    ]
    simpy, compiled = runs
    assert simpy.total_cycles == compiled.total_cycles
    assert (simpy.trace.start_cycle == compiled.trace.start_cycle).all()
    assert (simpy.trace.end_cycle == compiled.trace.end_cycle).all()
    assert (simpy.trace.engine, compiled.trace.engine) == ("simpy", "compiled")
    machine = simpy.machine
    groups = processor_groups(simpy.graph, machine.network, machine.hardware.interconnect)
    assert [(g.kind, g.members) for g in groups] == [
        (GroupKind.TENSOR, (0, 1)),
        (GroupKind.TENSOR, (2, 3)),
        (GroupKind.DATA, (0, 2)),
        (GroupKind.DATA, (1, 3)),
    ]
    # each replica takes one sample: the group's all-reduces hold s x h words
    first = next(op for op in simpy.graph.ops if isinstance(op, CommOp))
    assert first.tensor.bytes == S * H * WORD
    assert first.stage is Stage.COMMUNICATION


def test_llamas_gated_mlp_is_one_column_set_and_a_lone_linear_is_replicated() -> None:
    _, infos = load_model(ROOT / "workloads" / "llama3_2_1b.yaml")
    plan = plan_tensor(infos, 8)
    roles = {name: role for name, role in plan.roles.items() if name.startswith("model.layers.0.")}
    mlp = "model.layers.0.mlp"
    assert roles == {
        "model.layers.0.self_attn": Role.ATTENTION,
        f"{mlp}.gate_proj": Role.COLUMN,
        f"{mlp}.up_proj": Role.COLUMN,
        f"{mlp}.act_fn": Role.SPLIT,
        f"{mlp}.mul": Role.SPLIT,
        f"{mlp}.down_proj": Role.ROW,
    }
    assert plan.roles["model.embed_tokens"] is Role.VOCAB_EMBEDDING
    assert "model.layers.0.post_attention_layernorm" in plan.reduced_gradients
    assert "model.layers.0.input_layernorm" in plan.replicated


def test_an_mlp_whose_width_t_does_not_divide_is_replicated_and_says_why(tmp_path: Path) -> None:
    fc = "h0.fc, kind: linear, out_features"
    path = tmp_path / "wide.yaml"
    path.write_text(TINY.read_text().replace(f"{fc}: 64", f"{fc}: 66"))
    _, infos = load_model(path)
    plan = plan_tensor(infos, 4)
    assert ("h0.fc", "4 does not divide h0.fc's 66") in plan.unsplit
    assert "h0.fc" in plan.replicated and "h0.proj" in plan.replicated
    assert plan.roles["h1.fc"] is Role.COLUMN


@pytest.mark.parametrize(
    ("sets", "processors", "message"),
    [
        (
            ("run.parallel={tensor: 8}",),
            8,
            "parallel.tensor: must divide layer h0.attn's 4 heads (a tensor-parallel group"
            " splits attention by heads) (got 8)",
        ),
        (("run.parallel={tensor: 2}",), 3, "parallel.tensor: must divide the 3 processors (got 2)"),
        (
            ("run.parallel={tensor: 2}",),
            4,
            "parallel.tensor: leaves 2 groups of 2 processors: assignment data_parallel runs"
            " them as replicas (or set parallel.tensor to the processors) (got 2)",
        ),
        (
            ("run.parallel={tensor: 2}", "run.techniques={gpipe: {}}"),
            2,
            "techniques.gpipe: not with parallel.tensor above 1: its rewrites and placements"
            " do not yet know the tensor-parallel group's all-reduces (got 2)",
        ),
    ],
)
def test_refusals(tmp_path: Path, sets: tuple[str, ...], processors: int, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_inputs(run_file(tmp_path), parse_sets([f"processors={processors}", *sets]))
    assert any(str(p).endswith(message) for p in caught.value.problems), caught.value.problems


def test_a_rank_pair_hand_timed_on_both_engines() -> None:
    """One rank's step of a row-parallel GEMM (100 cycles, hand costs), its output's
    all-reduce stand-in (1,001 words, 2,002 B) and a vector op (50 cycles) reading the
    output, placed for a group of 2 (default hardware: one DRAM channel of 128 B/cycle
    + 100, links of 64 B/cycle + 200).  The ranks' GEMMs end at 100; the one all-reduce
    of the group starts then: reads 2 x 16 (100..132, arrive 232), 2(P-1) = 2 link steps
    of 1,001 B, 16 + 200 each (-> 664), writes 2 x 16 (664..696, arrive 796); each
    rank's vector op waits for it: 796..846."""
    words = hw().word_bytes
    builder = GraphBuilder(words)
    x = builder.tensor("x", TensorKind.ACTIVATION, 1)
    w = builder.tensor("w", TensorKind.WEIGHT, 1)
    y = builder.tensor("y", TensorKind.ACTIVATION, 1001)
    z = builder.tensor("z", TensorKind.ACTIVATION, 1001)
    g = builder.gemm("proj.fwd", "proj", Phase.FWD, 1, 1001, 1, 1, x, w, y)
    stand_in = builder.derived(y, ".allreduce", y.kind, y.elements)
    ar = builder.allreduce("y.allreduce", "proj", stand_in, (), [g], group=CommGroup.TENSOR)
    builder.vector("act.fwd", "act", Phase.FWD, 1001, 1, [y], [z], after=[ar])
    step = builder.build()
    graph = tensor_parallel(lambda _: step, 2, 2, 2, OptimizerSpec(), words)
    assert [type(op).__name__ for op in graph.ops] == [
        "GemmOp", "GemmOp", "CommOp", "VectorOp", "VectorOp"
    ]  # fmt: skip
    assert graph.processor == (0, 1, 0, 0, 1)
    units = [UNIT_ARRAY, UNIT_ARRAY, UNIT_COMM, UNIT_VECTOR, UNIT_VECTOR]
    c = costs(units, compute=[100, 100, 0, 50, 50])
    on = machine("processors=2")
    trace = simulate(graph, c, on)
    assert trace.end_cycle.tolist() == [100, 100, 796, 846, 846]
    compiled = run_compiled(graph, c, on)
    assert compiled.start_cycle.tolist() == trace.start_cycle.tolist()
    assert compiled.end_cycle.tolist() == trace.end_cycle.tolist()
