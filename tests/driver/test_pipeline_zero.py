"""ZeRO stages 1 and 2 with a pipeline plan (:mod:`accelsim.driver.pipeline_step`) on
the 4-block GPT of ``tests/driver/test_pipeline_step.py`` (h = 16, a block's 3,280
weights, the 64 x 16 table tied to the head, ``ln_f``'s 32; Adam, 2-byte weights and
gradients, 4-byte optimizer state), p = 2 stages, d = 2 replicas: each stage's
reduce-scatter and all-gather by the network's closed forms, its update on its shard,
its memory sharded by class."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelsim.driver.inputs import RunInputs
from accelsim.driver.pipeline import simulated_pipeline
from accelsim.driver.run import _Run, simulate_training, step_memory
from accelsim.errors import ConfigError
from accelsim.graph.ops import OpGraph, Phase, VectorOp
from accelsim.network.collectives import Collective
from accelsim.network.cost import cycles
from accelsim.report.pipeline import pipeline_block, pipeline_dict
from accelsim.techniques.base import BASE
from accelsim.timing.pipeline_step import compose
from tests.mapping.test_pipeline_memory import loaded

BLOCK, TABLE, LN_F = 3_280, 1_024, 32
STAGE_SUMMED = (TABLE + 2 * BLOCK, 2 * BLOCK + LN_F + TABLE)
"""The elements each stage sums over its replicas: its layers' weights, the last stage
its copy of the tied table too."""
STAGE_UPDATED = (TABLE + 2 * BLOCK, 2 * BLOCK + LN_F)
"""The elements each stage's updates write (the tied table is updated by the first)."""


def _inputs(tmp_path: Path, zero: int, *sets: str) -> RunInputs:
    plan = f"{{pipeline: 2, zero: {zero}}}"
    return loaded(tmp_path, plan, 4, "assignment=data_parallel", *sets)


@pytest.mark.parametrize("zero", [1, 2])
def test_each_stage_reduce_scatters_and_all_gathers_by_the_closed_forms(
    tmp_path: Path, zero: int
) -> None:
    inputs = _inputs(tmp_path, zero)
    result = simulate_training(inputs)
    step = result.pipeline
    assert step is not None and (step.data, step.zero) == (2, zero)
    network = inputs.machine.network
    algorithm = inputs.hardware.interconnect.algorithm
    # 2-byte gradients and weights: the same bytes reduce-scattered and all-gathered
    assert step.stage_gradient_bytes == tuple(2 * n for n in STAGE_SUMMED)
    # stage s of replica r is processor 2 r + s: stage 0's group is (0, 2), stage 1's (1, 3)
    for kind, got in (
        (Collective.REDUCE_SCATTER, step.times.all_reduce_cycles),
        (Collective.ALL_GATHER, step.times.all_gather_cycles),
    ):
        assert got == tuple(
            cycles(network, kind, (s, 2 + s), 2 * n, algorithm) for s, n in enumerate(STAGE_SUMMED)
        )
        assert all(c > 0 for c in got)
    # the step is the composed schedule with them: each stage ends after its all-gather
    assert compose(step.times) == step.step
    assert step.step.total_cycles == max(
        s.last_backward_end_cycles + s.all_reduce_cycles + s.update_cycles + s.all_gather_cycles
        for s in step.step.stages
    )
    section = result.summary()["pipeline"]
    assert section["zero"] == zero
    assert [s["all_gather_cycles"] for s in section["stages"]] == list(step.times.all_gather_cycles)
    first = step.step.stages[0]
    assert (
        f"reduce-scatter {first.all_reduce_cycles:,} ({first.exposed_all_reduce_cycles:,} past"
        f" the flush), update {first.update_cycles:,}, all-gather {first.all_gather_cycles:,}"
    ) in pipeline_block(step)


def test_without_zero_the_section_is_as_it_was(tmp_path: Path) -> None:
    step = simulate_training(_inputs(tmp_path, 0)).pipeline
    assert step is not None and step.times.all_gather_cycles == (0, 0)
    stages = [line for line in pipeline_block(step).splitlines() if "  stage " in line]
    assert len(stages) == 2 and not any("all-gather" in line for line in stages)
    assert all(", all-reduce " in line for line in stages)
    section = pipeline_dict(step)
    assert "zero" not in section and "all_gather_cycles" not in section["stages"][0]


def _updated_elements(graph: OpGraph) -> int:
    """A stand-in engine: a graph's "cycles" are the elements its updates write."""
    return sum(
        op.elements for op in graph.ops if isinstance(op, VectorOp) and op.phase is Phase.UPDATE
    )


@pytest.mark.parametrize("zero", [0, 1, 2])
def test_each_stage_updates_its_shard(tmp_path: Path, zero: int) -> None:
    inputs = _inputs(tmp_path, zero)
    _, step = simulated_pipeline(
        inputs.run,
        inputs.hardware,
        inputs.machine.network,
        inputs.infos,
        _Run(inputs).step_graph(BASE),
        _updated_elements,
    )
    # every tensor has an even number of elements: a shard of 2 is half of it
    assert step.times.update_cycles == tuple(n // (2 if zero else 1) for n in STAGE_UPDATED)


def test_the_shard_update_is_simulated_shorter(tmp_path: Path) -> None:
    whole, shard = (simulate_training(_inputs(tmp_path, z)).pipeline for z in (0, 1))
    assert whole is not None and shard is not None
    pairs = zip(shard.times.update_cycles, whole.times.update_cycles, strict=True)
    assert all(0 < s < w for s, w in pairs)
    # the passes are the same: only the data-parallel tail of each stage differs
    assert shard.times.passes == whole.times.passes
    assert shard.step.pipeline_cycles == whole.step.pipeline_cycles


@pytest.mark.parametrize("zero", [1, 2])
def test_each_stage_memory_is_sharded_by_class(tmp_path: Path, zero: int) -> None:
    fp32 = "optimizer.master_weights=fp32"
    whole, sharded = (step_memory(_inputs(tmp_path, z, fp32)) for z in (0, zero))
    assert (sharded.zero, sharded.data) == (zero, 2)
    for s, kept in enumerate(STAGE_SUMMED):
        before, after = whole.stages[s], sharded.stages[s]
        # Adam's two fp32 states and an fp32 master copy of each kept weight, halved
        assert before["optimizer_state"] == 2 * 4 * kept
        assert after["optimizer_state"] == 4 * kept
        assert (before["master_weights"], after["master_weights"]) == (4 * kept, 2 * kept)
        assert after["gradients"] == (kept if zero == 2 else 2 * kept)
        unchanged = ("weights", "activations", "communication", "workspace")
        assert {k: after[k] for k in unchanged} == {k: before[k] for k in unchanged}
    totals = sharded.stage_totals_bytes
    assert sharded.stage == totals.index(max(totals))


def test_both_engines_give_the_same_step(tmp_path: Path) -> None:
    steps = [
        simulate_training(_inputs(tmp_path, 2, f"timing.engine={engine}")).pipeline
        for engine in ("simpy", "compiled")
    ]
    simpy, compiled = steps
    assert simpy is not None and compiled is not None
    assert simpy.times == compiled.times and simpy.step == compiled.step


def test_one_replica_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        loaded(tmp_path, "{pipeline: 2, zero: 1}", 2, "assignment=data_parallel")
    assert str(err.value).splitlines()[0] == (
        "--set: run.parallel.zero: shards over the data-parallel group: needs assignment"
        " data_parallel and at least 2 replicas (the plan leaves 1) (got 1)"
    )


def test_stage_3_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        _inputs(tmp_path, 3)
    assert str(err.value) == (
        "--set: run.parallel.zero: 3 not with parallel.pipeline above 1: it gathers each"
        " layer's weights before each micro-batch's forward and backward pass, inside the"
        " passes a pipeline's step simulates once for all micro-batches (the gathers, and"
        " their prefetch across passes, are not modelled there) (got 3)"
    )


def test_the_guide_numbers(tmp_path: Path) -> None:
    """docs/guides/llm_training.md's figures of the 4-block GPT at p = 2, d = 2: on a
    ring of 2 a reduce-scatter and an all-gather each take half the all-reduce."""
    whole, shard = (simulate_training(_inputs(tmp_path, z)).pipeline for z in (0, 1))
    assert whole is not None and shard is not None
    assert (whole.times.all_reduce_cycles[0], whole.times.update_cycles[0]) == (1_038, 6_288)
    assert (shard.times.all_reduce_cycles[0], shard.times.all_gather_cycles[0]) == (519, 519)
    assert shard.times.update_cycles[0] == 5_252
    assert (whole.step.total_cycles, shard.step.total_cycles) == (215_241, 214_205)
    assert step_memory(_inputs(tmp_path, 1)).stages[0]["optimizer_state"] == 30_336
