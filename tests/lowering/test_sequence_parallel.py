"""Sequence parallelism (``run.parallel.sequence_parallel``), counted by hand on the
2-block GPT of ``tests/lowering/test_tensor_parallel.py`` (s = 8, h = 16, b = 2): the
collectives that replace the all-reduces and their bytes, the region's vector work and
stash a ``t``-th, both engines, symmetric ranks, and the refusals."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from accelsim.config.enums import CommGroup
from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import _Run, simulate_training, step_memory
from accelsim.errors import ConfigError
from accelsim.graph.ops import CommOp, GemmOp, Stage, TransferOp, VectorOp
from accelsim.graph.queries import stashed_tensors
from accelsim.techniques.base import BASE
from tests.lowering.test_tensor_parallel import WORD, B, H, S, inputs, on, placed, run_file
from tests.timing.test_symmetry import numbers
from tests.timing.test_tensor_symmetry import simulated

SP = "run.parallel.sequence_parallel=true"
WHOLE = B * S * H * WORD  # bytes of a block's activation, b x s x h words


def test_each_all_reduce_becomes_a_reduce_scatter_and_an_all_gather(tmp_path: Path) -> None:
    graph = placed(tmp_path, 2, SP)
    comms = [op for op in graph.ops if isinstance(op, CommOp)]
    assert all(op.participants == (0, 1) and op.group is CommGroup.TENSOR for op in comms)
    kinds = [(op.name, op.collective.value) for op in comms]
    rs, ag, ar = "reduce_scatter", "all_gather", "all_reduce"
    block = [
        ("{0}.ln_1.out.allgather", ag),
        ("{0}.attn.out.reduce_scatter", rs),
        ("{0}.ln_2.out.allgather", ag),
        ("{0}.proj.out.reduce_scatter", rs),
    ]
    back = [
        ("{0}.ln_2.out.allgather.bwd", ag),  # the fc weight gradient's input, again
        ("{0}.ln_2.grad<-{0}.fc.reduce_scatter", rs),
        ("{0}.add.grad.allgather", ag),  # the attention output's gradient
        ("{0}.ln_1.out.allgather.bwd", ag),
        ("{0}.ln_1.grad<-{0}.attn.reduce_scatter", rs),
    ]
    assert kinds == [
        ("wte.out.reduce_scatter", rs),
        *[(n.format("h0"), k) for n, k in block],
        *[(n.format("h1"), k) for n, k in block],
        ("ln_f.out.allgather", ag),
        *[(f"loss.stats{j}.allreduce", ar) for j in range(3)],
        ("ln_f.out.allgather.bwd", ag),
        ("ln_f.grad<-lm_head.reduce_scatter", rs),
        ("h1.add_2.grad<-ln_f.allgather", ag),  # h1.proj's output gradient
        *[(n.format("h1"), k) for n, k in back],
        ("h0.add_2.grad.allgather", ag),
        *[(n.format("h0"), k) for n, k in back],
        ("wte.grad.allgather", ag),
        *[(f"{n}.daffine.allreduce", ar) for n in ("h0.ln_1", "h0.ln_2", "h1.ln_1", "h1.ln_2")],
        ("ln_f.daffine.allreduce", ar),
    ]
    sizes = [op.tensor.bytes for op in comms]
    # the region's norms' gradients: 5 layernorms' scale and shift, 2 x h words each
    assert sizes == [WHOLE] * 10 + [B * S * WORD] * 3 + [WHOLE] * 15 + [2 * H * WORD] * 5
    # the weight gradients' all-gathers run in the backward stage, from the stashed shard
    again = [op for op in comms if op.name.endswith(".bwd")]
    assert all(op.stage is Stage.BACKWARD and op.shard is not None for op in again)
    assert [op.shard.bytes for op in again if op.shard is not None] == [WHOLE // 2] * 5
    # each rank reads what a collective delivers to it: no transfer between ranks
    assert not any(isinstance(op, TransferOp) for op in graph.ops)


@pytest.mark.parametrize("t", [2, 4])
def test_the_same_bytes_on_the_wire_as_the_all_reduces_and_one_all_gather_more(
    tmp_path: Path, t: int
) -> None:
    """A ring all-reduce of N bytes over t ranks puts 2 (t - 1) N on the links, a
    reduce-scatter and an all-gather (t - 1) N each."""

    def wire(*sets: str) -> Counter[str]:
        result = simulate_training(inputs(tmp_path, t, *sets)).base
        out: Counter[str] = Counter()
        for op in result.graph.ops:
            if isinstance(op, CommOp):
                kind = "regather" if op.name.endswith(".bwd") else op.collective.value
                kind = "norms" if op.name.endswith(".daffine.allreduce") else kind
                kind = "loss" if op.name.startswith("loss.stats") else kind
                out[kind] += int(result.trace.costs.interconnect_bytes[op.op_id])
        return out

    tensor, sequence = wire(), wire(SP)
    whole = WHOLE * (t - 1)
    # 4 all-reduces a block, the embedding's and the LM head's input gradient's
    assert tensor == {"all_reduce": 10 * 2 * whole, "loss": 3 * 2 * (t - 1) * B * S * WORD}
    assert sequence["reduce_scatter"] + sequence["all_gather"] == tensor["all_reduce"]
    assert sequence["reduce_scatter"] == sequence["all_gather"] == 10 * whole
    # Megatron-LM's one more all-gather per column-parallel input (2 a block, the LM
    # head's), and the norms' gradients all-reduced (5 norms x 2 x h words)
    assert sequence["regather"] == 5 * whole
    assert sequence["norms"] == 2 * (t - 1) * 5 * 2 * H * WORD
    assert sequence["loss"] == tensor["loss"]


@pytest.mark.parametrize("t", [2, 4])
def test_the_regions_vector_work_and_stash_are_a_t_th(tmp_path: Path, t: int) -> None:
    tensor = {op.name: op for op in on(placed(tmp_path, t), 0)}
    sequence = {op.name: op for op in on(placed(tmp_path, t, SP), 0)}
    assert tensor.keys() == sequence.keys()
    region = 0
    for name, op in sequence.items():
        whole = tensor[name]
        if isinstance(op, GemmOp):
            assert op.macs == whole.macs, name  # the blocks' GEMMs are unchanged
        elif isinstance(op, VectorOp) and op.stage in (Stage.FORWARD, Stage.BACKWARD):
            if ".ln_" not in op.layer and ".add" not in op.layer:
                continue
            assert op.elements * t == whole.elements, name
            region += 1
    # a block's 2 norms forward and backward and 2 adds, and the sums of the gradients of
    # the residual stream read twice (h0.add, h0.add_2, h1.add)
    assert region == 2 * (2 * 2 + 2) + 3
    stash = {}
    for sets in ((), (SP,)):
        run = _Run(inputs(tmp_path, t, *sets))
        stash[sets] = sum(x.bytes for x in stashed_tensors(run.step_graph(BASE)(B).ops))
    # the region's stash: the embedding's output, each block's 2 norms' inputs and
    # outputs, the final norm's output: 10 tensors of b x s x h words, each a t-th
    assert stash[()] - stash[(SP,)] == 10 * WHOLE * (t - 1) // t
    memory = step_memory(inputs(tmp_path, t, SP)).bytes_by_class
    assert memory["activations"] == stash[(SP,)]


def test_both_engines_agree_and_symmetric_ranks_fall_back_to_every_rank(tmp_path: Path) -> None:
    cycles = {
        e: simulate_training(inputs(tmp_path, 2, SP, f"timing.engine={e}")).base
        for e in ("simpy", "compiled")
    }
    simpy, compiled = cycles["simpy"], cycles["compiled"]
    assert simpy.total_cycles == compiled.total_cycles
    assert (simpy.trace.start_cycle == compiled.trace.start_cycle).all()
    assert (simpy.trace.end_cycle == compiled.trace.end_cycle).all()
    sets = ("timing.engine=compiled", SP)
    auto = simulated(tmp_path, 2, 2, *sets, "run.data_parallel.symmetry=auto")
    full = simulated(tmp_path, 2, 2, *sets, "run.data_parallel.symmetry=full")
    # reduce-scatters and all-gathers are simulated on every rank, with the same numbers
    assert auto.trace.copies == full.trace.copies == ()
    assert numbers(auto) == numbers(full)


@pytest.mark.parametrize(
    ("sets", "processors", "message"),
    [
        (
            ("run.parallel={sequence_parallel: true}",),
            1,
            "parallel.sequence_parallel: needs parallel.tensor above 1 (it splits the layers"
            " between the tensor-parallel blocks) (got True)",
        ),
        (
            ("run.parallel={tensor: 4, sequence_parallel: true}", "workload.input.length=6"),
            4,
            "parallel.sequence_parallel: parallel.tensor 4 must divide layer h0.ln_1's sequence"
            " of 6 (each rank runs its share) (got True)",
        ),
    ],
)
def test_refusals(tmp_path: Path, sets: tuple[str, ...], processors: int, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_inputs(run_file(tmp_path), parse_sets([f"processors={processors}", *sets]))
    assert any(str(p).endswith(message) for p in caught.value.problems), caught.value.problems


def test_selective_recomputation_with_dropout_on_both_engines(tmp_path: Path) -> None:
    """The attention core, its score dropout with it, recomputed before each attention
    layer's backward under sequence parallelism, the same on both engines."""
    dropout = "workload=tests/fixtures/workloads/tiny_gpt_dropout.yaml"
    selective = "run.techniques={recomputation: {policy: selective}}"
    steps = {
        e: simulate_training(inputs(tmp_path, 2, SP, selective, dropout, f"timing.engine={e}"))
        for e in ("simpy", "compiled")
    }
    simpy, compiled = (
        steps["simpy"].steps["recomputation"],
        steps["compiled"].steps["recomputation"],
    )
    assert simpy.total_cycles == compiled.total_cycles
    assert (simpy.trace.end_cycle == compiled.trace.end_cycle).all()
    graph = simpy.graph
    again = [op.name for op in graph.ops if graph.processor[op.op_id] == 0]
    assert [n for n in again if n.startswith("h0.attn") and n.endswith(".recompute")] == [
        "h0.attn.qk.fwd.recompute",
        "h0.attn.mask.fwd.recompute",
        "h0.attn.softmax.fwd.recompute",
        "h0.attn.dropout.fwd.recompute",
    ]
