"""Pipeline stages (:mod:`accelsim.mapping.pipeline_stages`) and their memory by schedule
(:mod:`accelsim.mapping.pipeline_memory`), counted by hand on the 4-block GPT of
``tests/fixtures/workloads/tiny_gpt_blocks.yaml`` (s = 8, h = 16, a = 4 heads, MLP 64,
vocabulary 64 tied to the LM head; batch 8, micro-batches of one sample), and the
plan's load-time checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelsim import cli
from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import RunInputs, load_inputs
from accelsim.driver.run import step_memory
from accelsim.errors import ConfigError
from accelsim.mapping.pipeline_stages import cut_stages
from accelsim.report.memory import memory_block

ROOT = Path(__file__).resolve().parents[2]
BLOCKS = ROOT / "tests" / "fixtures" / "workloads" / "tiny_gpt_blocks.yaml"
S, H, HEADS, FF, VOCAB = 8, 16, 4, 64, 64
# One sample's stash of a block: its input, ln_1's and ln_2's outputs, the residual
# sum, the context (s h each), Q K V (3 s h), the probabilities (a s^2), fc's and
# GELU's outputs (s 64 each), at 2 bytes a word: 256 x 5 + 768 + 512 + 2 x 1,024.
BLOCK = 2 * (5 * S * H + 3 * S * H + HEADS * S * S + 2 * S * FF)
TOKENS = 2 * S  # the embedding's backward reads the tokens
HEAD = 2 * (S * H + S * H + S * VOCAB)  # the last block's output, ln_f's, the probabilities
# Parameters: a block's 3,280 (two norms 64, attention 1,088, fc 1,088, proj 1,040);
# the table 64 x 16 = 1,024; ln_f 32.
BLOCK_PARAMETERS, TABLE = 3_280, 1_024


def loaded(tmp_path: Path, plan: str, processors: int, *sets: str) -> RunInputs:
    run = tmp_path / "run.yaml"
    run.write_text(
        "name: tiny\n"
        f"hardware: {ROOT / 'configs/hardware/default.yaml'}\n"
        f"workload: {BLOCKS}\n"
        f"energy: {ROOT / 'configs/energy/horowitz45.yaml'}\n"
        "batch_size: 8\n"
        "optimizer: {kind: adam}\n",
        "utf-8",
    )
    sets = (f"processors={processors}", f"run.parallel={plan}", *sets)
    return load_inputs(run, parse_sets(list(sets)))


def test_the_blocks_cut_evenly_the_embedding_first_and_the_head_last(tmp_path: Path) -> None:
    infos = loaded(tmp_path, "{tensor: 1}", 1).infos
    block = ("ln_1", "attn", "add", "ln_2", "fc", "act", "proj", "add_2")
    h = [tuple(f"h.{i}.{n}" for n in block) for i in range(4)]
    cut = cut_stages(infos, 2, 1)
    assert cut.chunks == (("wte", *h[0], *h[1]), (*h[2], *h[3], "ln_f", "lm_head", "loss"))
    interleaved = cut_stages(infos, 2, 2)
    assert interleaved.chunks == (("wte", *h[0]), h[1], h[2], (*h[3], "ln_f", "lm_head", "loss"))
    assert (interleaved.chunks_of_stage(0), interleaved.chunks_of_stage(1)) == ((0, 2), (1, 3))
    # 4 blocks over 3 stages: the first takes the one left over
    assert cut_stages(infos, 3, 1).blocks == (2, 1, 1)


def test_1f1b_stages_hold_p_minus_i_micro_batches_of_their_layers(tmp_path: Path) -> None:
    m = step_memory(loaded(tmp_path, "{pipeline: 2}", 2))
    first, last = m.stages
    assert first["activations"] == 2 * (2 * BLOCK + TOKENS)  # min(p, m) = 2 in flight
    assert last["activations"] == 2 * BLOCK + HEAD  # one
    # the last stage keeps its copy of the table the LM head is tied to, and ln_f
    assert first["weights"] == 2 * (TABLE + 2 * BLOCK_PARAMETERS)
    assert last["weights"] == 2 * (2 * BLOCK_PARAMETERS + 32 + TABLE)
    assert (m.stage, m.bytes_by_class) == (0, first)  # the most loaded
    assert m.to_dict()["stage_totals_bytes"] == (sum(first.values()), sum(last.values()))


def test_4_stages_hold_4_3_2_1_micro_batches(tmp_path: Path) -> None:
    m = step_memory(loaded(tmp_path, "{pipeline: 4}", 4))
    stash = [s["activations"] for s in m.stages]
    assert stash == [4 * (BLOCK + TOKENS), 3 * BLOCK, 2 * BLOCK, BLOCK + HEAD]


def test_the_interleaved_first_stage_peaks_after_its_warm_up(tmp_path: Path) -> None:
    """Stage 0 runs F0.0 F1.0 F0.2 F1.2 F2.0 B0.2 F3.0: at its peak the forwards of
    micro-batches 0-3 through chunk 0 and of 1 through chunk 2."""
    plan = "{pipeline: 2, schedule: interleaved, virtual_stages: 2}"
    m = step_memory(loaded(tmp_path, plan, 2))
    assert m.stages[0]["activations"] == 4 * (BLOCK + TOKENS) + BLOCK


def test_a_stage_of_a_tensor_parallel_group_holds_its_ranks_share(tmp_path: Path) -> None:
    whole = step_memory(loaded(tmp_path, "{pipeline: 2}", 2))
    split = step_memory(loaded(tmp_path, "{pipeline: 2, tensor: 2}", 4))
    # Q K V, the context, the probabilities and the MLP's two halved; the rest whole
    halved = 2 * (4 * S * H + HEADS * S * S + 2 * S * FF) // 2
    assert split.stages[1]["activations"] < whole.stages[1]["activations"]
    block = BLOCK - halved
    assert split.stages[0]["activations"] == 2 * (2 * block + TOKENS)


def test_a_pipeline_of_one_is_the_plan_without_one(tmp_path: Path) -> None:
    one = step_memory(loaded(tmp_path, "{tensor: 1, pipeline: 1, micro_batch: 2}", 1))
    plain = step_memory(loaded(tmp_path, "{tensor: 1}", 1))
    assert one == plain and one.stage is None and "pipeline_stage" not in one.to_dict()


@pytest.mark.parametrize(
    ("plan", "processors", "problem"),
    [
        (
            "{pipeline: 2, virtual_stages: 2}",
            2,
            "run.parallel.virtual_stages: only with schedule: interleaved (1f1b runs one"
            " chunk a stage) (got 2)",
        ),
        (
            "{pipeline: 2, micro_batch: 3}",
            2,
            "run.parallel.micro_batch: must divide each of the 1 data-parallel replicas'"
            " share of the batch of 8 samples (got 3)",
        ),
        (
            "{pipeline: 4, schedule: interleaved, micro_batch: 4}",
            4,
            "run.parallel.micro_batch: the interleaved schedule needs the pipeline's 4"
            " stages to divide the micro-batches a step (2) (got 4)",
        ),
        (
            "{pipeline: 4, schedule: interleaved, virtual_stages: 2}",
            4,
            "run.parallel.pipeline: needs a repeated block for each of its 8 model chunks"
            " (pipeline x virtual_stages); the workload has 4 (got 4)",
        ),
        (
            "{pipeline: 2, tensor: 2}",
            2,
            "run.parallel.pipeline: times parallel.tensor (2) must divide the 2 processors (got 2)",
        ),
        (
            "{pipeline: 2}",
            4,
            "run.parallel.pipeline: leaves 2 pipelines of 2 processors: assignment"
            " data_parallel runs them as replicas (got 2)",
        ),
    ],
)
def test_a_plan_it_cannot_run_is_refused(
    tmp_path: Path, plan: str, processors: int, problem: str
) -> None:
    with pytest.raises(ConfigError) as err:
        loaded(tmp_path, plan, processors)
    assert str(err.value) == f"--set: {problem}"


def test_the_console_names_the_most_loaded_stage(tmp_path: Path) -> None:
    lines = memory_block(step_memory(loaded(tmp_path, "{pipeline: 4}", 4))).splitlines()
    assert lines[1] == "  pipeline stage 0 of 4, the most loaded"


def test_the_command_line_counts_a_pipeline_without_simulating(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loaded(tmp_path, "{pipeline: 2}", 2)  # writes run.yaml
    args = ["run", str(tmp_path / "run.yaml"), "--set", "processors=2"]
    args += ["--set", "run.parallel={pipeline: 2}", "--out", str(tmp_path / "out")]
    assert cli.main([*args, "--memory-only"]) == cli.EXIT_OK
    assert "  pipeline stage 0 of 2, the most loaded" in capsys.readouterr().out
    assert not (tmp_path / "out").exists()
