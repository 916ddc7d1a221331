"""Graph passes and the fold schedule, on small graphs checked by hand."""

from __future__ import annotations

import dataclasses

import pytest

from accelsim.config.hardware import WordBytesSpec
from accelsim.graph import copies, passes, queries
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import (
    GemmOp,
    Op,
    OpGraph,
    Phase,
    Stage,
    Tag,
    TensorKind,
    TransferOp,
    replaced,
)

WORDS = WordBytesSpec()


def chain() -> OpGraph:
    """x -> gemm0 -> y -> vector1 -> z; gemm2 reads x and z (a backward op)."""
    b = GraphBuilder(WORDS)
    x = b.tensor("x", TensorKind.ACTIVATION, 64)
    w = b.tensor("w", TensorKind.WEIGHT, 64)
    y = b.tensor("y", TensorKind.ACTIVATION, 64)
    z = b.tensor("z", TensorKind.GRADIENT, 64)
    out = b.tensor("dw", TensorKind.GRADIENT, 64)
    b.gemm("g0", "l0", Phase.FWD, 8, 8, 8, 1, x, w, y)
    b.vector("v1", "l1", Phase.FWD, 64, 1, [y], [z])
    b.gemm("g2", "l0", Phase.BWD_WEIGHT, 8, 8, 8, 1, z, x, out)
    return b.build()


def test_builder_records_sources_and_the_stash() -> None:
    graph = chain()
    assert [op.deps for op in graph.ops] == [(), (0,), (1,)]
    assert graph.ops[2].sources == ((1,), ())  # z from v1; x has no producer
    assert graph.stashed == frozenset({("x", 0)})  # the activation the backward op reads


def test_transfers_bring_remote_data_once_per_destination() -> None:
    graph = passes.place(chain(), lambda op: 1 if op.name == "v1" else 0)
    moved = passes.insert_transfers(graph)
    names = [op.name for op in moved.ops]
    assert names == ["g0", "y.to_p1", "v1", "z.to_p0", "g2"]
    assert moved.processor == (0, 0, 1, 1, 0)  # a transfer runs on its source's link
    to_p1, to_p0 = moved.ops[1], moved.ops[3]
    assert isinstance(to_p1, TransferOp) and (to_p1.source, to_p1.destination) == (0, 1)
    assert to_p1.deps == (0,) and moved.ops[2].deps == (1,)
    assert isinstance(to_p0, TransferOp) and moved.ops[4].deps == (3,)
    # the consumer's data sources still name the producer, not the copy
    assert moved.ops[4].sources == ((2,), ())


def test_split_gemm_shares_rows_and_readers_wait_for_both_parts() -> None:
    graph = passes.split_gemms(chain(), lambda op: (0.25, 1) if op.name == "g0" else None)
    parts = [op for op in graph.ops if isinstance(op, GemmOp) and op.name.startswith("g0")]
    assert [(p.name, p.m) for p in parts] == [("g0.part0", 2), ("g0.part1", 6)]
    assert graph.processor[:2] == (1, 0)
    assert graph.ops[2].deps == (0, 1)  # v1 reads y, written by both parts
    assert sum(p.macs for p in parts) == 8 * 8 * 8


def test_rewrite_drops_and_inserts_and_renumbers() -> None:
    def emit(builder: GraphBuilder, op: Op) -> None:
        if op.name == "g0":
            y = builder.tensor("y", TensorKind.ACTIVATION, 64)
            seen = builder.tensor("seen", TensorKind.ACTIVATION, 64)
            builder.vector("after_g0", "l0", Phase.AUX, 64, 1, [y], [seen])

    graph, ids = passes.rewrite(chain(), WORDS, lambda op: op.phase is Phase.BWD_WEIGHT, emit)
    assert [op.name for op in graph.ops] == ["g0", "after_g0", "v1"]
    assert ids == {0: (0,), 1: (2,), 2: ()}
    assert graph.ops[1].deps == (0,) and graph.ops[2].deps == (0,)
    assert graph.stashed == frozenset()  # the backward reader is gone


def test_an_op_runs_in_the_stage_of_what_it_computes_unless_told() -> None:
    graph = chain()
    assert [op.stage for op in graph.ops] == [Stage.FORWARD, Stage.FORWARD, Stage.BACKWARD]
    b = GraphBuilder(WORDS)
    x = b.tensor("x", TensorKind.ACTIVATION, 64)
    with pytest.raises(ValueError, match="an op of phase aux needs a stage"):
        b.vector("aux", "l", Phase.AUX, 64, 1, [x], [])
    with b.in_stage(Stage.BACKWARD):
        again = b.vector("again", "l", Phase.FWD, 64, 1, [x], [])
    assert (b.ops[again].phase, b.ops[again].stage) == (Phase.FWD, Stage.BACKWARD)
    assert b.stage is None  # the block's stage ends with it


def test_rewrite_emits_in_the_stage_of_the_op_it_emits_beside() -> None:
    def emit(builder: GraphBuilder, op: Op) -> None:
        z = builder.tensor(f"{op.name}.aux", TensorKind.ACTIVATION, 1)
        builder.vector(f"{op.name}.aux", op.layer, Phase.AUX, 1, 1, [], [z])

    graph, _ = passes.rewrite(chain(), WORDS, emit_after=emit, owner="t")
    assert [(op.name, op.stage) for op in graph.ops if op.phase is Phase.AUX] == [
        ("g0.aux", Stage.FORWARD),
        ("v1.aux", Stage.FORWARD),
        ("g2.aux", Stage.BACKWARD),
    ]


def test_the_stash_is_what_the_backward_stage_reads_and_does_not_make() -> None:
    # g2 reads x (never made: the step's input) and y (made in the forward stage),
    # r reads y again in the backward stage and makes y2, which g3 reads: y2 is made
    # in the backward stage, so not stashed, whatever it computes.
    b = GraphBuilder(WORDS)
    x, w = b.tensor("x", TensorKind.ACTIVATION, 64), b.tensor("w", TensorKind.WEIGHT, 64)
    y, y2 = b.tensor("y", TensorKind.ACTIVATION, 64), b.tensor("y2", TensorKind.ACTIVATION, 64)
    dw = b.tensor("dw", TensorKind.GRADIENT, 64)
    b.gemm("g0", "l", Phase.FWD, 8, 8, 8, 1, x, w, y)
    b.gemm("g2", "l", Phase.BWD_WEIGHT, 8, 8, 8, 1, y, x, dw)
    with b.in_stage(Stage.BACKWARD):
        b.vector("r", "l", Phase.FWD, 64, 1, [y], [y2])
    b.gemm("g3", "l", Phase.BWD_WEIGHT, 8, 8, 8, 1, y2, x, dw)
    graph = b.build()
    assert graph.stashed == frozenset({("x", 0), ("y", 0)})
    assert queries.first_backward(graph.ops) == 1
    assert [queries.forward_work(op) for op in graph.ops] == [True, False, False, False]


def test_a_tensors_versions_are_tensors_of_their_own() -> None:
    # g0 makes y; r makes y again as version 1 in the backward stage; g2 reads y,
    # g3 the recomputed y: each reader's producer is its version's maker, only
    # version 0 is stashed, and each version travels to another processor once.
    b = GraphBuilder(WORDS)
    x, w = b.tensor("x", TensorKind.ACTIVATION, 64), b.tensor("w", TensorKind.WEIGHT, 64)
    y = b.keep_on_chip(b.tensor("y", TensorKind.ACTIVATION, 64))
    y1 = dataclasses.replace(y, version=1)
    dw = b.tensor("dw", TensorKind.GRADIENT, 64)
    b.gemm("g0", "l", Phase.FWD, 8, 8, 8, 1, x, w, y)
    with b.in_stage(Stage.BACKWARD):
        b.gemm("r", "l", Phase.FWD, 8, 8, 8, 1, x, w, y1)
    b.gemm("g2", "l", Phase.BWD_WEIGHT, 8, 8, 8, 1, y, x, dw)
    b.gemm("g3", "l", Phase.BWD_WEIGHT, 8, 8, 8, 1, y1, x, dw, partial=True)
    assert (y.key, y1.key) == (("y", 0), ("y", 1))
    assert b.is_on_chip(y) and not b.is_on_chip(y1)
    graph = b.build()
    assert [op.sources for op in graph.ops[2:]] == [((0,), ()), ((1,), ())]
    assert graph.stashed == frozenset({("x", 0), ("y", 0)})
    placed = passes.place(graph, lambda op: int(op.name in ("g2", "g3")))
    moved = passes.insert_transfers(placed)
    sent = [(op.tensor.key, op.source) for op in moved.ops if isinstance(op, TransferOp)]
    assert sent == [(("y", 0), 0), (("y", 1), 0)]  # x is the input: no op makes it


def test_instantiate_renames_tensors_and_tags_ops() -> None:
    copy = copies.instantiate(chain(), Tag(mini_batch=2, micro_batch=1), "b2m1/")
    assert {op.tag for op in copy.ops} == {Tag(0, 2, 1)}
    assert copy.stashed == frozenset({("b2m1/x", 0)})


def test_relabel_copies_each_op_once_at_its_new_ids_sharing_tensors() -> None:
    step = chain()
    copy = copies.copied_as("p1/", Tag(replica=1))
    ops, params = copies.Relabel(step.ops)(Tag(replica=1), copy, range(3, 6))
    assert [op.op_id for op in ops] == [3, 4, 5]
    assert [op.deps for op in ops] == [(), (3,), (4,)]
    g0, v1, g2 = ops
    assert isinstance(g0, GemmOp) and isinstance(g2, GemmOp) and params == []
    assert g2.sources == ((4,), ()) and {op.tag for op in ops} == {Tag(replica=1)}
    assert (g0.a.name, g0.c.name, g2.a.name) == ("p1/x", "p1/y", "p1/z")
    # a copy's tensors know their copy and their name in the step
    assert (g0.a.tag, g0.a.local, g0.a.step_name) == (Tag(replica=1), "x", "x")
    # the copies share tensors as the step's ops do
    assert g2.b is g0.a and v1.reads[0].tensor is g0.c
    # moved back, they are the step's instantiated copy
    back, _ = copies.Relabel(ops)(Tag(replica=1), lambda x: x, [-1, -1, -1, 0, 1, 2])
    assert tuple(back) == copies.instantiate(step, Tag(replica=1), "p1/").ops


def test_replaced_copies_like_dataclasses_replace() -> None:
    graph = chain()
    gemm, vector = graph.ops[0], graph.ops[1]
    for op, changes in (
        (gemm, {"op_id": 7, "deps": (3,), "tag": Tag(replica=2)}),
        (vector, {"name": "v9"}),
        (gemm.a, {"name": "p1/x"}),
        (gemm, {}),
    ):
        copy = replaced(op, **changes)
        assert copy == dataclasses.replace(op, **changes)
        assert type(copy) is type(op) and copy is not op
    assert gemm.op_id == 0  # the original is left alone
    with pytest.raises(TypeError, match="GemmOp has no field mm"):
        replaced(gemm, mm=3)
    with pytest.raises(TypeError, match=r"would skip OpGraph\.__post_init__"):
        replaced(graph, ops=())
