"""One processor's memory by class (:mod:`accelsim.mapping.memory`), counted by hand on
the 2-block GPT of ``tests/fixtures/workloads/tiny_gpt.yaml`` (s = 8, h = 16, a = 4
heads, MLP 64, vocabulary 64 tied to the LM head; batch b = 2), its activations set
beside Korthikanti et al. (2022)'s closed form, and the capacity check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import _Run, simulate_training, step_memory
from accelsim.errors import ConfigError
from accelsim.graph.queries import stashed_tensors
from accelsim.mapping.memory import CLASSES, MemoryBreakdown
from accelsim.report.memory import memory_block
from accelsim.techniques.base import BASE
from tests.lowering.test_tensor_parallel import FF, HEADS, VOCAB, B, H, S, inputs, run_file

# Parameters by hand: the table 64 x 16 = 1,024 (the LM head reads it: tied); a block's
# two norms 2 x 32, attention's Wqkv 48 x 16 + bqkv 48 + Wo 16 x 16 + bo 16 = 1,088,
# fc 16 x 64 + 64 = 1,088 and proj 64 x 16 + 16 = 1,040: 3,280; two blocks and ln_f's 32.
PARAMETERS = 1_024 + 2 * 3_280 + 32
# A rank of 2: the table's 32 rows (512), attention's 24 x 16 + 24 + 16 x 8 + 16 (552),
# fc 16 x 32 + 32 (544), proj 32 x 16 + 16 (528; its bias whole), the norms whole.
PARAMETERS_OF_RANK = 512 + 2 * (64 + 552 + 544 + 528) + 32


def memory(tmp_path: Path, t: int, *sets: str) -> MemoryBreakdown:
    return step_memory(inputs(tmp_path, t, *sets))


@pytest.mark.parametrize(
    ("sets", "per_parameter"),
    [
        # weight 2 + gradient 2, and the optimizer's states at 4 bytes each
        (("optimizer.kind=sgd",), 4),
        (("optimizer.kind=momentum",), 8),
        ((), 12),  # Adam: two moments
        # ZeRO's mixed-precision Adam (Rajbhandari et al. 2020): 2 + 2 + 4 (master) + 4 + 4
        (("optimizer.master_weights=fp32",), 16),
        # Megatron-LM's, its gradients accumulated in fp32 (Korthikanti et al. 2022): 18
        (("optimizer.master_weights=fp32", "word_bytes.gradients=4"), 18),
    ],
)
def test_bytes_per_parameter_by_optimizer_and_master_copy(
    tmp_path: Path, sets: tuple[str, ...], per_parameter: int
) -> None:
    m = memory(tmp_path, 1, *sets)
    kept = ("weights", "gradients", "optimizer_state", "master_weights")
    assert sum(m.bytes_by_class[c] for c in kept) == per_parameter * PARAMETERS


def test_each_class_on_a_rank_of_2(tmp_path: Path) -> None:
    m = memory(tmp_path, 2)
    n = PARAMETERS_OF_RANK
    # activations: each block's stash (below), ln_f's output (b s h), the table's output
    # (b s h), the loss's probabilities over the rank's 32 words, the 16 tokens
    block = 2 * S * B * H * (8 + 24 // 2) // 2 + 2 * HEADS * S * S * B // 2
    stash = 2 * block + 2 * (B * S * H * 2) + B * S * (VOCAB // 2) * 2 + B * S * 2
    assert m.bytes_by_class == {
        "weights": 2 * n,
        "gradients": 2 * n,
        "optimizer_state": 8 * n,
        "master_weights": 0,
        "activations": stash,
        "communication": B * S * H * 2,  # the largest all-reduce: a block's output
        # GELU's backward: reads dY, writes dX, b x s x 32 each (its input is stashed)
        "workspace": 2 * B * S * (FF // 2) * 2,
    }
    assert tuple(m.bytes_by_class) == CLASSES
    assert (m.sharing, m.fits) == (2, True)  # dram.sharing: shared by the 2 processors


@pytest.mark.parametrize("t", [1, 2, 4])
def test_a_blocks_activations_against_korthikanti_et_al(tmp_path: Path, t: int) -> None:
    """Korthikanti et al. (2022), eq. 2 with tensor parallelism and neither sequence
    parallelism nor recomputation: a layer stashes ``s b h (10 + 24 / t + 5 a s /
    (h t))`` bytes at 2 bytes a word.  accelsim stashes ``s b h (8 + 24 / t) + 2 a s^2
    b / t``: the same but for dropout, which this table has none of: the two dropout
    masks after attention and the MLP (``s b h``, replicated) and attention's dropout
    (its mask ``a s^2 b`` and output ``2 a s^2 b``, split)."""
    graph = _Run(inputs(tmp_path, t)).step_graph(BASE)(B)
    block = sum(x.bytes for x in stashed_tensors(graph.ops) if x.name.startswith("h0."))
    sbh, as2b = S * B * H, HEADS * S * S * B
    assert block == sbh * (8 + 24 // t) + 2 * as2b // t
    korthikanti = sbh * (10 + 24 / t + 5 * HEADS * S / (H * t))
    assert korthikanti - block == 2 * sbh + 3 * as2b / t


def test_a_bucket_is_the_communication_buffer(tmp_path: Path) -> None:
    sets = ("assignment=data_parallel", "data_parallel.bucket_bytes=4096")
    m = step_memory(inputs(tmp_path, 2, *sets, processors=4))
    assert m.bytes_by_class["communication"] == 4096
    # each replica's rank takes one sample of the two
    assert m.bytes_by_class["workspace"] == 2 * S * (FF // 2) * 2


def test_a_plan_that_does_not_fit_is_refused_with_its_breakdown(tmp_path: Path) -> None:
    small = "hardware.dram.capacity_gib=0.00005"  # 53,687 bytes, shared by 2
    with pytest.raises(ConfigError) as caught:
        simulate_training(inputs(tmp_path, 2, small))
    (problem,) = caught.value.problems
    assert str(problem).endswith(
        "hardware.dram.capacity_gib: a processor needs 61.47 KiB x 2 processors sharing it,"
        " more than the 52.43 KiB of its DRAM (weights 7.66, gradients 7.66, optimizer_state"
        " 30.62, activations 13.03, communication 0.50, workspace 2.00 KiB); set"
        " on_capacity: report to simulate it anyway (got 5e-05)"
    )
    reported = simulate_training(inputs(tmp_path, 2, small, "on_capacity=report"))
    summary = json.loads(json.dumps(reported.summary()))
    assert summary["memory"]["fits"] is False
    assert summary["memory"]["total_bytes"] == 62_944
    assert summary["memory"]["processors_sharing"] == 2
    assert "DOES NOT FIT" in memory_block(reported.memory or memory(tmp_path, 2))


def test_without_a_plan_nothing_is_counted(tmp_path: Path) -> None:
    load = load_inputs(run_file(tmp_path), parse_sets(["processors=1"]))
    result = simulate_training(load)
    assert result.memory is None and "memory" not in result.summary()


def test_selective_recomputation_stashes_no_attention_probabilities(tmp_path: Path) -> None:
    """Korthikanti et al.'s selective recomputation drops a layer's ``5 a s^2 b`` term;
    accelsim's, the ``2 a s^2 b`` of the probabilities it stashes (no dropout)."""
    recompute = "run.techniques={recomputation: {policy: selective}}"
    kept = memory(tmp_path, 1).bytes_by_class["activations"]
    selective = memory(tmp_path, 1, recompute).bytes_by_class["activations"]
    assert kept - selective == 2 * (2 * HEADS * S * S * B)  # two blocks


def test_memory_only_prints_the_block_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from accelsim import cli

    path = run_file(tmp_path)
    monkeypatch.chdir(tmp_path)
    sets = ["--set", "processors=2", "--set", "run.parallel={tensor: 2}"]
    assert cli.main(["run", str(path), "--memory-only", *sets]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "memory          61.469 KiB per processor, of 16.000 GiB shared by 2: fits"
    assert lines[1] == "  weights          7.656 KiB  (12.5 %)"  # 7,840 B of 62,944
    assert len(lines) == 1 + len(CLASSES)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.yaml"]


def test_selective_recomputation_composes_with_tensor_parallelism(tmp_path: Path) -> None:
    """A rank recomputes its own heads' scores and softmax: each block stashes
    ``2 a s^2 b / t`` bytes fewer; under sequence parallelism the other policies are
    refused."""
    recompute = "run.techniques={recomputation: {policy: selective}}"
    kept = memory(tmp_path, 2).bytes_by_class["activations"]
    selective = memory(tmp_path, 2, recompute).bytes_by_class["activations"]
    assert kept - selective == 2 * (2 * HEADS * S * S * B // 2)
    engines = [
        simulate_training(inputs(tmp_path, 2, recompute, f"timing.engine={e}")).steps
        for e in ("simpy", "compiled")
    ]
    assert engines[0]["recomputation"].total_cycles == engines[1]["recomputation"].total_cycles
    with pytest.raises(ConfigError) as caught:
        sequence = "run.parallel.sequence_parallel=true"
        inputs(tmp_path, 2, sequence, "run.techniques={recomputation: {policy: full}}")
    assert str(caught.value.problems[0]).endswith(
        "techniques.recomputation: policy full not with parallel.sequence_parallel: it would"
        " recompute blocks without their all-gathers and reduce-scatters; use selective (got 2)"
    )
