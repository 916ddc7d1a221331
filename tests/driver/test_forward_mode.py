"""``mode: forward``: a forward pass alone (no loss, no backward, no update, dropout off,
no stash), held to the training step's forward pass op by op."""

from __future__ import annotations

from typing import Any

import pytest

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs, resolved_data
from accelsim.driver.run import simulate_run
from accelsim.errors import ConfigError
from accelsim.graph.ops import CommOp, Phase, Stage
from accelsim.report.console import summary_table
from accelsim.report.result import RunResult
from accelsim.techniques.base import Technique
from accelsim.techniques.registry import REGISTRY, technique_class
from tests.conftest import ROOT

MLP_RUN = ROOT / "configs" / "runs" / "mlp.yaml"
DROPOUT = f"workload={ROOT}/workloads/mlp_dropout.yaml"
DRAM = ("dram_read_ifmap_bytes", "dram_read_filter_bytes", "dram_read_ofmap_bytes")


def run(*sets: str) -> RunResult:
    """configs/runs/mlp.yaml on workloads/mlp_dropout.yaml, with ``sets``."""
    return simulate_run(load_inputs(MLP_RUN, parse_sets([DROPOUT, *sets])))


def dram(row: dict[str, Any]) -> int:
    """An op's DRAM bytes, read and written."""
    return sum(int(row[key]) for key in (*DRAM, "dram_write_ofmap_bytes"))


def test_a_forward_pass_is_the_training_steps_forward_without_loss_or_dropout() -> None:
    train, forward = run("batch_size=64"), run("batch_size=64", "mode=forward")
    ops = forward.graph.ops
    assert {(op.phase, op.stage) for op in ops} == {(Phase.FWD, Stage.FORWARD)}
    # fc1, relu1, fc2, relu2, fc3: the two dropouts are off (no op, no mask) and
    # there is no loss.
    assert [op.name for op in ops] == ["fc1.fwd", "relu1.fwd", "fc2.fwd", "relu2.fwd", "fc3.fwd"]
    # The same MACs as the training step's forward: 64 x (784 x 2048 + 2048 x 2048 + 2048 x 10).
    macs = forward.summary()["macs"]
    assert macs["fwd"] == train.summary()["macs"]["fwd"] == 64 * (784 * 2048 + 2048**2 + 20480)
    assert macs["bwd_input"] == macs["bwd_weight"] == 0
    assert forward.summary()["mode"] == "forward" and "mode" not in train.summary()
    first = summary_table(forward.summary()).splitlines()[0]
    assert first.endswith("(1 x 128x128 ws), batch 64, a forward pass alone")
    assert summary_table(train.summary()).splitlines()[0].endswith("ws), batch 64")
    # Nothing is kept for a backward pass.
    assert forward.graph.stashed == frozenset() and train.graph.stashed
    assert forward.summary()["stash"]["bytes"] == 0


def test_its_dram_traffic_is_the_training_forwards_without_the_masks_and_the_loss() -> None:
    train, forward = run("batch_size=64"), run("batch_size=64", "mode=forward")
    trained = {row["name"]: row for row in train.op_rows() if row["stage"] == "forward"}
    alone = {row["name"]: row for row in forward.op_rows()}
    # Every op the forward pass runs moves the bytes it moves in training (fc2 reads
    # relu1's output where training's reads drop1's, of the same size) ...
    assert {name: dram(row) for name, row in alone.items()} == {
        name: dram(trained[name]) for name in alone
    }
    # ... and the training forward's other ops are the dropouts, which write their
    # bit-packed masks (64 x 2,048 / 8 = 16,384 bytes each) for the backward pass, and
    # the loss.
    assert set(trained) - set(alone) == {"drop1.fwd", "drop2.fwd", "loss.fwd"}
    masks = 2 * 64 * 2048 // 8
    drops = sum(dram(trained[name]) for name in ("drop1.fwd", "drop2.fwd"))
    assert drops == 2 * 2 * 64 * 2048 * 2 + masks  # bf16 read and write, and the masks
    extra = drops + dram(trained["loss.fwd"])
    assert forward.dram_bytes == sum(dram(row) for row in trained.values()) - extra


def test_data_parallel_forward_passes_exchange_nothing() -> None:
    forward = run("batch_size=64", "mode=forward", "processors=2", "assignment=data_parallel")
    assert not [op for op in forward.graph.ops if isinstance(op, CommOp)]
    assert forward.summary()["macs"]["fwd"] == 64 * (784 * 2048 + 2048**2 + 20480)


def test_training_techniques_are_refused_with_their_reason() -> None:
    sets = parse_sets(
        ["mode=forward", "run.techniques={optimizer_fusion: {}, recomputation: {policy: full}}"]
    )
    with pytest.raises(ConfigError) as caught:
        load_inputs(MLP_RUN, sets)
    # In the order techniques compose, blamed on the --set that named them.
    assert [str(p) for p in caught.value.problems] == [
        "--set: run.techniques.recomputation: not in mode forward, a forward pass alone: it"
        " recomputes the stash the backward pass reads (a forward pass keeps none)",
        "--set: run.techniques.optimizer_fusion: not in mode forward, a forward pass alone:"
        " it fuses the optimizer updates into the backward or the next forward pass",
    ]


def test_every_technique_says_what_of_training_it_needs() -> None:
    classes = {name: technique_class(name) for name in REGISTRY}
    reasons = {name: cls.trains for name, cls in classes.items() if cls is not None}
    assert len(reasons) == len(REGISTRY)
    assert Technique.trains not in reasons.values()
    assert len(set(reasons.values())) == len(reasons) - 2  # the three schedules share one


def test_a_llama_forward_pass_counts_its_macs_by_hand() -> None:
    """SmolLM2-135M at 64 tokens, batch 2: per layer QKV 64 x 576 x 960, QK^T and AV 9
    heads x 64 x 64 x 64 each, O 64 x 576 x 576, SwiGLU 3 x 64 x 576 x 1,536; x30; the
    LM head 64 x 576 x 49,152; twice."""
    smollm2 = f"workload={ROOT}/workloads/smollm2_135m.yaml"
    sets = parse_sets([smollm2, "workload.input.length=64", "batch_size=2", "mode=forward"])
    forward = simulate_run(load_inputs(MLP_RUN, sets))
    layer = 64 * 576 * 960 + 2 * 9 * 64 * 64 * 64 + 64 * 576 * 576 + 3 * 64 * 576 * 1536
    assert forward.summary()["macs"]["fwd"] == 2 * (30 * layer + 64 * 576 * 49152)
    assert forward.summary()["macs"]["total"] == forward.summary()["macs"]["fwd"]


def test_a_training_run_and_plain_attention_resolve_as_before() -> None:
    """``mode`` and ``rotary`` at their defaults are left out of the resolved inputs (a
    sweep point's identity hashes them), so a file without them identifies as before."""
    gpt2 = f"workload={ROOT}/workloads/gpt2_small.yaml"
    training = resolved_data(load_inputs(MLP_RUN, parse_sets([gpt2])))
    assert "mode" not in training["run"]
    attention = [x for x in training["workload"]["layers"] if x["kind"] == "attention"]
    keys = {"name": "h.0.attn", "kind": "attention", "heads": 12, "bias": True, "causal": True}
    assert attention[0] == keys
    forward = resolved_data(load_inputs(MLP_RUN, parse_sets([gpt2, "mode=forward"])))
    assert forward["run"]["mode"] == "forward"
