"""A pipeline plan's step simulated at pass granularity (:mod:`accelsim.driver.pipeline_step`)
on the 4-block GPT of ``tests/fixtures/workloads/tiny_gpt_blocks.yaml`` (s = 8, h = 16;
batch 8, micro-batches of one sample): the transfers and their bytes, the distinct
chunks simulated once, the data-parallel all-reduce by the network's closed form, the
engines identical, and the summary and console."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelsim import cli
from accelsim.config.parallel import PipelineSchedule
from accelsim.driver.pipeline_step import rank_step
from accelsim.driver.run import _Run, simulate_graph, simulate_training
from accelsim.errors import ConfigError
from accelsim.graph import passes
from accelsim.graph.ops import CommOp, Stage
from accelsim.mapping.pipeline_stages import cut_stages
from accelsim.network.collectives import Collective
from accelsim.network.cost import cycles
from accelsim.report.pipeline import TABLES
from accelsim.techniques.base import BASE
from accelsim.timing.pipeline_step import compose
from tests.mapping.test_pipeline_memory import loaded

S, H = 8, 16
ACTIVATION = S * H * 2  # one sample's block output, 2-byte words


def test_one_f_one_b_on_two_stages(tmp_path: Path) -> None:
    result = simulate_training(loaded(tmp_path, "{pipeline: 2}", 2))
    step = result.pipeline
    assert step is not None
    times = step.times
    assert (times.stages, times.virtual_stages, times.micro_batches) == (2, 1, 8)
    # each micro-batch sends one activation forward and its gradient back
    assert step.activation_bytes == step.gradient_bytes == (ACTIVATION,)
    # one data-parallel replica: no all-reduce
    assert times.all_reduce_cycles == (0, 0)
    # the first chunk (embedding + 2 blocks) and the last (2 blocks + head) differ
    assert [c.chunks for c in step.distinct] == [(0,), (1,)]
    # the composed step is the composition of these passes and hops
    assert compose(times) == step.step
    summary = result.summary()
    assert summary["total_cycles"] == step.step.total_cycles
    assert summary["pipeline"]["step_cycles"] == step.step.total_cycles
    assert summary["pipeline"]["tables"] == TABLES
    # the tables: one micro-batch of every chunk on the one tensor group (processor 0)
    assert summary["batch_size"] == 8 and set(result.base.graph.processor) == {0}


def test_the_middle_chunks_are_simulated_once(tmp_path: Path) -> None:
    step = simulate_training(loaded(tmp_path, "{pipeline: 4}", 4)).pipeline
    assert step is not None
    assert [c.chunks for c in step.distinct] == [(0,), (1, 2), (3,)]
    assert step.times.passes[1] == step.times.passes[2]
    assert step.activation_bytes == (ACTIVATION,) * 3


def test_interleaved_chunks_and_hops(tmp_path: Path) -> None:
    plan = "{pipeline: 2, schedule: interleaved, virtual_stages: 2}"
    step = simulate_training(loaded(tmp_path, plan, 2)).pipeline
    assert step is not None
    assert step.times.schedule is PipelineSchedule.INTERLEAVED
    assert [c.chunks for c in step.distinct] == [(0,), (1, 2), (3,)]
    # chunks 0 -> 1 -> 2 -> 3 alternate between the two stages
    assert len(step.times.forward_hops) == 3
    hops = step.times.forward_hops
    assert hops[0].links == hops[2].links != hops[1].links


def test_data_parallel_all_reduce_per_stage(tmp_path: Path) -> None:
    inputs = loaded(tmp_path, "{pipeline: 2}", 4, "assignment=data_parallel")
    result = simulate_training(inputs)
    step = result.pipeline
    assert step is not None
    groups = [(g["kind"], g["members"]) for g in result.summary()["groups"]]
    assert groups == [("pipeline", [0, 1]), ("data", [0, 2])]
    assert step.data == 2 and step.times.micro_batches == 4
    network = inputs.machine.network
    algorithm = inputs.hardware.interconnect.algorithm
    # stage s of replica r is processor 2 r + s: stage 0's group is (0, 2), stage 1's (1, 3)
    expected = tuple(
        cycles(network, Collective.ALL_REDUCE, (s, 2 + s), n, algorithm)
        for s, n in enumerate(step.stage_gradient_bytes)
    )
    assert step.times.all_reduce_cycles == expected
    assert all(n > 0 for n in expected)
    # the gradients of a stage's layers: each stage's weights at 2 bytes (a block 3,280,
    # the table 1,024 on both ends, ln_f 32)
    assert step.stage_gradient_bytes == (2 * (1_024 + 2 * 3_280), 2 * (2 * 3_280 + 32 + 1_024))


def test_the_engines_agree(tmp_path: Path) -> None:
    steps = [
        simulate_training(loaded(tmp_path, "{pipeline: 2}", 2, f"timing.engine={engine}"))
        for engine in ("simpy", "compiled")
    ]
    simpy, compiled = (s.pipeline for s in steps)
    assert simpy is not None and compiled is not None
    assert simpy.times == compiled.times and simpy.step == compiled.step


def test_the_command_line_prints_the_breakdown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loaded(tmp_path, "{pipeline: 2}", 2)  # writes run.yaml
    args = ["run", str(tmp_path / "run.yaml"), "--set", "processors=2"]
    args += ["--set", "run.parallel={pipeline: 2}", "--out", str(tmp_path / "out")]
    assert cli.main(args) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert (
        "pipeline        1 x 2 x 1 processors (data, pipeline, tensor (tensor innermost)),"
        " 1f1b, 8 micro-batches"
    ) in out
    assert "  bubble        closed form 11.1 % of the pipeline's time" in out
    (summary_path,) = (tmp_path / "out").glob("*/summary.json")
    summary = json.loads(summary_path.read_text("utf-8"))
    section = summary["pipeline"]
    assert summary["total_cycles"] == section["step_cycles"] >= section["bound_cycles"]
    assert section["bubble_fraction_closed_form"] == 1 / 9
    assert [c["count_per_step"] for c in section["chunks"]] == [8, 8]
    assert f"cycles          {summary['total_cycles']:,}" in out


@pytest.mark.parametrize(
    ("technique", "why"),
    [
        ("gpipe", "the plan's schedule is the pipeline (two pipelines; use one)"),
        ("layerpipe", "the plan's schedule is the pipeline (two pipelines; use one)"),
        (
            "optimizer_fusion",
            "a pipeline plan's passes are cut from the step without a technique's rewrites",
        ),
    ],
)
def test_techniques_with_a_pipeline_plan_are_refused(
    tmp_path: Path, technique: str, why: str
) -> None:
    with pytest.raises(ConfigError) as err:
        loaded(tmp_path, "{pipeline: 2}", 2, f"run.techniques={{{technique}: {{}}}}")
    assert str(err.value) == (
        f"--set: run.techniques.{technique}: not with parallel.pipeline above 1: {why} (got 2)"
    )


def test_more_than_1024_processors_only_with_a_pipeline(tmp_path: Path) -> None:
    inputs = loaded(tmp_path, "{tensor: 1}", 2048, "assignment=data_parallel", "batch_size=2048")
    with pytest.raises(ConfigError) as err:
        simulate_training(inputs)
    assert str(err.value) == (
        "--set: processors: above 1,024 only with parallel.pipeline above 1 or for a"
        " data-parallel step simulated once, one replica standing for every processor, and"
        " this one cannot be: its processors share a DRAM (dram.sharing: per_processor gives"
        " each its own) (got 2048)"
    )


def test_gradient_clipping_is_refused_with_a_pipeline(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        loaded(tmp_path, "{pipeline: 2}", 2, "optimizer.clip_global_norm=1.0")
    assert str(err.value) == (
        "--set: optimizer.clip_global_norm: not with parallel.pipeline above 1: the norm's"
        " all-reduce over the pipeline-parallel group is not modelled (got 2)"
    )


def test_one_micro_batch_against_an_op_level_simulation(tmp_path: Path) -> None:
    """The reference: one micro-batch's ops (m = 1) with chunk g's on processor g, the
    transfers the graph needs inserted, simulated whole by the engine.  Its forward is
    the composed one exactly: chunk 1 starts when chunk 0's forward plus the hop has
    passed.  Its backward overlaps more: each gradient is sent as soon as its op has
    made it, while the composed step sends after the whole pass (as Megatron-LM sends
    after its backward step), so stage 0's backward ends earlier, by less than stage
    1's backward pass.  (Its updates wait for every stage's backward, one chain over
    both processors: the reference's step ends later for that alone.)"""
    inputs = loaded(tmp_path, "{pipeline: 2}", 2, "batch_size=1", "dram.sharing=per_processor")
    step = simulate_training(inputs).pipeline
    assert step is not None
    sim = _Run(inputs)
    graph = rank_step(inputs.run, inputs.hardware, sim.step_graph(BASE), 1)
    chunk_of = cut_stages(inputs.infos, 2, 1).chunk_of_layer()
    placed = passes.insert_transfers(passes.place(graph, lambda op: chunk_of[op.layer]))
    trace = simulate_graph(inputs, placed).trace
    on_one = [i for i, op in enumerate(placed.ops) if placed.processor[i] == 1]
    first_forward, backward = step.times.passes[0], step.times.passes[1]
    hop = step.times.forward_hops[0].cycles
    assert min(trace.start_cycle[on_one]) == first_forward.forward_cycles + hop
    stage_zero_backward = [
        i
        for i, op in enumerate(placed.ops)
        if placed.processor[i] == 0 and op.stage is Stage.BACKWARD
    ]
    ended = int(max(trace.end_cycle[stage_zero_backward]))
    flush = step.step.pipeline_cycles
    assert 0 < flush - ended < backward.backward_cycles


def test_stages_on_tensor_parallel_groups(tmp_path: Path) -> None:
    """t = 2, p = 2, d = 2: processor (2 r + s) 2 + k.  A stage's passes run on its
    group's two ranks with their all-reduces; each rank sends its own peer the whole
    activation."""
    inputs = loaded(tmp_path, "{tensor: 2, pipeline: 2}", 8, "assignment=data_parallel")
    result = simulate_training(inputs)
    step = result.pipeline
    assert step is not None
    assert (step.data, step.tensor, step.times.micro_batches) == (2, 2, 4)
    assert set(result.base.graph.processor) == {0, 1}
    assert any(isinstance(op, CommOp) and op.participants == (0, 1) for op in result.base.graph.ops)
    assert step.activation_bytes == (ACTIVATION,)
    groups = [(g["kind"], g["members"]) for g in result.summary()["groups"]]
    assert groups == [("tensor", [0, 1]), ("pipeline", [0, 2]), ("data", [0, 4])]
    # the pipeline section says what was simulated: no symmetry block claiming every
    # processor was, nor the console's line saying why
    assert "symmetry" not in result.summary()


def test_transfers_at_each_class_precision(tmp_path: Path) -> None:
    sets = ("word_bytes.activations=4", "word_bytes.gradients=1")
    step = simulate_training(loaded(tmp_path, "{pipeline: 4}", 4, *sets)).pipeline
    assert step is not None
    # b s h = 1 x 8 x 16 words: 4 bytes forward, 1 byte back, at each of 3 boundaries
    assert step.activation_bytes == (S * H * 4,) * 3
    assert step.gradient_bytes == (S * H,) * 3


def test_a_sample_per_data_parallel_replica_of_the_pipeline(tmp_path: Path) -> None:
    # 4 processors, 2 stages: 2 replicas, each needs a sample (not each processor)
    plan, sets = "{pipeline: 2}", ("assignment=data_parallel",)
    assert loaded(tmp_path, plan, 4, *sets, "batch_size=2").run.batch_size == 2
    with pytest.raises(ConfigError) as err:
        loaded(tmp_path, plan, 4, *sets, "batch_size=1")
    assert str(err.value).splitlines()[0] == (
        "--set: batch_size: data_parallel needs at least one sample per replica (2) (got 1)"
    )
