"""Tile streams in the graph IR: declared by op ids, carried through every pass, checked."""

from __future__ import annotations

import dataclasses

import pytest

from accelsim.config.hardware import WordBytesSpec
from accelsim.graph import copies, passes, queries
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.check import graph_problems, tile_problems
from accelsim.graph.ops import (
    NO_TILES,
    GemmOp,
    Op,
    OpGraph,
    Phase,
    Tag,
    TensorKind,
    TileStream,
    VectorOp,
    replaced,
)

WORDS = WordBytesSpec()


def streamed() -> OpGraph:
    """x -> g0 -> y -> v1 (takes y's tiles from g0) -> z -> v2 (takes z's from v1);
    g3 reads x and z (a backward op, not streamed)."""
    b = GraphBuilder(WORDS)
    x = b.tensor("x", TensorKind.ACTIVATION, 64)
    w = b.tensor("w", TensorKind.WEIGHT, 64)
    y = b.tensor("y", TensorKind.ACTIVATION, 64)
    z = b.tensor("z", TensorKind.ACTIVATION, 64)
    u = b.tensor("u", TensorKind.ACTIVATION, 64)
    dw = b.tensor("dw", TensorKind.GRADIENT, 64)
    g0 = b.gemm("g0", "l0", Phase.FWD, 8, 8, 8, 1, x, w, y)
    v1 = b.vector("v1", "l1", Phase.FWD, 64, 1, [y], [z])
    v2 = b.vector("v2", "l2", Phase.FWD, 64, 1, [z], [u])
    b.gemm("g3", "l0", Phase.BWD_WEIGHT, 8, 8, 8, 1, u, x, dw)
    b.take_tiles(v1, y, g0)
    b.take_tiles(v2, z, v1)
    return b.build()


def test_streams_and_groups_come_from_the_ops_declarations() -> None:
    graph = streamed()
    y, z = graph.ops[1].reads[0].tensor, graph.ops[2].reads[0].tensor  # type: ignore[union-attr]
    assert queries.tile_streams(graph) == (TileStream(1, 0, y, 0), TileStream(2, 0, z, 1))
    assert queries.tile_groups(graph) == ((0, 1, 2),)
    assert graph_problems(graph, ("x",)) == []
    assert graph.ops[3].tile_sources == ()  # type: ignore[union-attr]


def test_rewrite_renumbers_tile_sources_and_ends_streams_from_dropped_ops() -> None:
    def emit(builder: GraphBuilder, op: Op) -> None:
        if op.name == "g0":
            t = builder.tensor("t", TensorKind.ACTIVATION, 1)
            builder.vector("aux", "l0", Phase.AUX, 1, 1, [t], [t])

    graph, _ = passes.rewrite(streamed(), WORDS, emit_after=emit)
    assert [op.name for op in graph.ops] == ["g0", "aux", "v1", "v2", "g3"]
    assert [queries.tile_sources(op) for op in graph.ops[2:4]] == [(0,), (2,)]
    assert queries.tile_groups(graph) == ((0, 2, 3),)
    dropped, _ = passes.rewrite(streamed(), WORDS, drop=lambda op: op.name == "g0")
    assert queries.tile_sources(dropped.ops[0]) == (NO_TILES,)
    assert queries.tile_sources(dropped.ops[1]) == (0,)


def test_copies_and_shifts_move_tile_sources_with_the_ops() -> None:
    step = streamed()
    ops, _ = copies.Relabel(step.ops)(
        Tag(replica=1), copies.copied_as("p1/", Tag(replica=1)), range(10, 14)
    )
    assert [queries.tile_sources(op) for op in ops] == [(), (10,), (11,), ()]
    builder = GraphBuilder(WORDS)
    builder.append_graph(step)
    builder.append_graph(step)
    assert [queries.tile_sources(op) for op in builder.ops[4:]] == [(), (4,), (5,), ()]


def test_a_stream_across_processors_ends_at_its_transfer() -> None:
    graph = passes.place(streamed(), lambda op: 1 if op.name == "v2" else 0)
    moved = passes.insert_transfers(graph)
    names = [op.name for op in moved.ops]
    assert names == ["g0", "v1", "z.to_p1", "v2", "u.to_p0", "g3"]
    assert queries.tile_sources(moved.ops[1]) == (0,)
    assert queries.tile_sources(moved.ops[3]) == (NO_TILES,)  # z comes by the transfer
    assert tile_problems(moved) == []
    # on one processor, with a transfer inserted before it, a stream is renumbered
    shifted = passes.insert_transfers(passes.place(streamed(), lambda op: int(op.name == "g0")))
    assert [op.name for op in shifted.ops] == ["g0", "y.to_p0", "v1", "v2", "g3"]
    assert [queries.tile_sources(op) for op in shifted.ops[2:4]] == [(NO_TILES,), (2,)]
    assert queries.tile_groups(shifted) == ((2, 3),)


def test_a_split_source_ends_its_stream() -> None:
    graph = passes.split_gemms(streamed(), lambda op: (0.5, 0) if op.name == "g0" else None)
    assert [op.name for op in graph.ops[:3]] == ["g0.part0", "g0.part1", "v1"]
    assert queries.tile_sources(graph.ops[2]) == (NO_TILES,)
    assert queries.tile_sources(graph.ops[3]) == (2,)


def test_the_check_names_every_ill_formed_stream() -> None:
    graph = streamed()
    ops = list(graph.ops)
    _, v1, v2, g3 = ops
    assert isinstance(v1, VectorOp) and isinstance(v2, VectorOp) and isinstance(g3, GemmOp)

    def problems(*changed: Op, processor: tuple[int, ...] = (0, 0, 0, 0)) -> list[str]:
        new = list(ops)
        for op in changed:
            new[op.op_id] = op
        return tile_problems(dataclasses.replace(graph, ops=tuple(new), processor=processor))

    assert problems(replaced(v1, tile_sources=(0, 0))) == ["v1 declares 2 tile sources for 1 reads"]
    assert problems(replaced(v1, tile_sources=(3,))) == [
        "v1 takes tiles of y from op 3, not before it"
    ]
    assert problems(replaced(v2, tile_sources=(0,))) == [
        "v2 takes tiles of z from g0, which has none"
    ]
    part = dataclasses.replace(v2.reads[0], elements=32)
    assert problems(replaced(v2, reads=(part,))) == ["v2 takes tiles of only part of z"]
    assert problems(processor=(0, 1, 1, 1)) == ["v1 takes tiles of y from another processor"]
    # g3 takes x's tiles as g0 loads them: one op with g0, v1 and v2, and it waits
    # for nothing after g0 but v2 (in the group)
    assert problems(replaced(g3, tile_sources=(NO_TILES, 0))) == []
    late = replaced(v1, deps=(0,), after=())
    extra = replaced(g3, tile_sources=(NO_TILES, 0), deps=(1, 2))
    assert problems(late, extra) == []
    lone = replaced(g3, tile_sources=(NO_TILES, 1))
    assert problems(lone) == ["g3 takes tiles of x from v1, which has none"]


def test_a_group_member_waiting_for_a_later_op_is_refused() -> None:
    b = GraphBuilder(WORDS)
    x, w = b.tensor("x", TensorKind.ACTIVATION, 64), b.tensor("w", TensorKind.WEIGHT, 64)
    y, s = b.tensor("y", TensorKind.ACTIVATION, 64), b.tensor("s", TensorKind.ACTIVATION, 64)
    z = b.tensor("z", TensorKind.ACTIVATION, 64)
    g0 = b.gemm("g0", "l0", Phase.FWD, 8, 8, 8, 1, x, w, y)
    b.vector("v1", "l1", Phase.FWD, 64, 1, [x], [s])
    add = b.vector("add", "l2", Phase.FWD, 64, 1, [y, s], [z])
    b.take_tiles(add, y, g0)
    assert tile_problems(b.build()) == [
        "add runs in one op with g0 but waits for v1, which comes after it"
    ]
    with pytest.raises(ValueError, match="add reads no w it could take tiles of"):
        b.take_tiles(add, w, g0)
