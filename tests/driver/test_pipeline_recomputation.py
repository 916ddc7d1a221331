"""Activation recomputation under a pipeline plan on the 4-block GPT of
``tests/fixtures/workloads/tiny_gpt_blocks.yaml`` (s = 8, h = 16; p = 2, batch 4,
micro-batches of one sample: m = 4): each chunk's backward pass holds its recomputed
forward ops, the step is the composition of those passes, the stash per stage follows
the policy by hand, the engines agree, and a segment across a chunk's end is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelsim.driver.inputs import RunInputs
from accelsim.driver.pipeline_step import rank_step
from accelsim.driver.run import _Run, simulate_training, step_memory
from accelsim.errors import ConfigError
from accelsim.graph.ops import Stage
from accelsim.graph.passes import subgraph
from accelsim.mapping.pipeline_stages import cut_stages
from accelsim.report.pipeline import pipeline_block
from accelsim.timing.pipeline_step import compose
from tests.mapping.test_pipeline_memory import BLOCK, HEAD, HEADS, TOKENS, H, S, loaded

CUT = 2 * S * H  # a sub-layer's output (a block's input, its residual sum), 2-byte words


def _recomputing(tmp_path: Path, policy: str, *sets: str) -> RunInputs:
    techniques = f"run.techniques={{recomputation: {{policy: {policy}}}}}"
    return loaded(tmp_path, "{pipeline: 2}", 2, "batch_size=4", techniques, *sets)


def test_full_recomputation_passes_and_step(tmp_path: Path) -> None:
    inputs = _recomputing(tmp_path, "full")
    step = simulate_training(inputs).pipeline
    plain = simulate_training(loaded(tmp_path, "{pipeline: 2}", 2, "batch_size=4")).pipeline
    assert step is not None and plain is not None
    assert step.times.micro_batches == 4
    # each chunk's backward pass: its own ops and its recomputed forward ops, simulated
    # together; the recomputed ones simulated alone are what the pass adds at most
    # (the engine overlaps a segment's recomputed vector ops with backward GEMMs)
    sim = _Run(inputs)
    graph = rank_step(inputs.run, inputs.hardware, sim.step_graph("recomputation"), 1)
    chunk_of = cut_stages(inputs.infos, 2, 1).chunk_of_layer()
    for g, chunk in enumerate(step.distinct):
        ids = [
            op.op_id for op in graph.ops if op.stage is Stage.BACKWARD and chunk_of[op.layer] == g
        ]
        again = [i for i in ids if graph.ops[i].owner == "recomputation"]
        alone = sim.simulate(subgraph(graph, again), "pass").trace.total_cycles
        assert chunk.recomputed_cycles == alone > 0
        assert (
            chunk.passes.backward_cycles
            == sim.simulate(subgraph(graph, ids), "pass").trace.total_cycles
        )
        before = plain.distinct[g].passes
        assert chunk.passes.forward_cycles == before.forward_cycles
        assert before.backward_cycles < chunk.passes.backward_cycles
        assert chunk.passes.backward_cycles <= before.backward_cycles + alone
        # every recomputed op is a copy of one of the chunk's forward ops
        assert chunk.backward_ops == plain.distinct[g].backward_ops + len(again)
    assert [c.recomputed_cycles for c in step.distinct] == [9_986, 9_986]
    assert [c.passes.backward_cycles for c in step.distinct] == [33_862, 35_620]
    assert [c.passes.backward_cycles for c in plain.distinct] == [24_337, 25_852]
    # the step is the schedule composed with these passes
    assert compose(step.times) == step.step
    assert step.step.total_cycles > plain.step.total_cycles


def test_the_report_says_each_stages_recomputation(tmp_path: Path) -> None:
    result = simulate_training(_recomputing(tmp_path, "full"))
    step = result.pipeline
    assert step is not None
    section = result.summary()["pipeline"]
    # each stage: m = 4 backward passes of its one chunk, 9,986 recomputed cycles each
    assert [s["recomputed_cycles"] for s in section["stages"]] == [4 * 9_986] * 2
    assert [c["recomputed_cycles"] for c in section["chunks"]] == [9_986, 9_986]
    assert ", recomputed 39,944 of its backward" in pipeline_block(step)


def test_the_engines_agree(tmp_path: Path) -> None:
    steps = [
        simulate_training(_recomputing(tmp_path, "full", f"timing.engine={engine}")).pipeline
        for engine in ("simpy", "compiled")
    ]
    simpy, compiled = steps
    assert simpy is not None and compiled is not None
    assert simpy.times == compiled.times and simpy.step == compiled.step
    assert simpy.distinct == compiled.distinct


def test_full_stash_per_stage(tmp_path: Path) -> None:
    """Full recomputation keeps each block's input: stage 0 (the embedding, blocks 0
    and 1: four sub-layers) the tokens and the four sub-layers' inputs (the table's
    output, the residual sums but the chunk's last); stage 1 the input it received and
    the next three sub-layers' inputs, and the head's stash (the last block's output,
    ln_f's, the probabilities).  1F1B keeps min(p - i, m) micro-batches in flight."""
    m = step_memory(_recomputing(tmp_path, "full"))
    first, last = (s["activations"] for s in m.stages)
    assert first == 2 * (4 * CUT + TOKENS)
    assert last == 1 * (4 * CUT + HEAD)


def test_selective_stash_per_stage(tmp_path: Path) -> None:
    """Selective recomputation drops each attention layer's probabilities
    (a s^2 words) from the stash of a block."""
    m = step_memory(_recomputing(tmp_path, "selective"))
    first, last = (s["activations"] for s in m.stages)
    probabilities = 2 * HEADS * S * S
    assert first == 2 * (2 * (BLOCK - probabilities) + TOKENS)
    assert last == 2 * (BLOCK - probabilities) + HEAD


def test_a_segment_across_a_chunks_end_is_refused(tmp_path: Path) -> None:
    techniques = "run.techniques={recomputation: {policy: every, keep_every: 2}}"
    with pytest.raises(ConfigError) as err:
        loaded(tmp_path, "{pipeline: 2}", 2, "batch_size=4", techniques)
    assert str(err.value) == (
        "--set: run.techniques.recomputation: policy every with keep_every 2 recomputes 1"
        " segment(s) across the end of a pipeline model chunk (the first: segment 2), and"
        " each stage recomputes only its own chunks' work: use a keep_every whose segments"
        " end where the chunks do, or full (got 2)"
    )
