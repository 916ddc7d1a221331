"""The passes that change what ops read and wait for (graph/links.py), on graphs built by
hand: every op's sources, deps and tile sources afterwards, counted by hand."""

from __future__ import annotations

import dataclasses
import re

import pytest

from accelsim.config.hardware import WordBytesSpec
from accelsim.graph import links
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.check import graph_problems
from accelsim.graph.ops import NO_TILES, GemmOp, OpGraph, Phase, Stage, TensorKind, VectorOp

WORDS = WordBytesSpec()


def step() -> OpGraph:
    """0 f: x.w -> y (forward); 1 s: y -> s (forward); 2 r: x.w -> y v1 (forward work in
    the backward stage); 3 d: g.y -> dw (reads y, made by 0); 4 v: (s, y) -> t."""
    b = GraphBuilder(WORDS)
    x, w = b.tensor("x", TensorKind.ACTIVATION, 16), b.tensor("w", TensorKind.WEIGHT, 16)
    y, s = b.tensor("y", TensorKind.ACTIVATION, 16), b.tensor("s", TensorKind.ACTIVATION, 16)
    g, dw = b.tensor("g", TensorKind.GRADIENT, 16), b.tensor("dw", TensorKind.GRADIENT, 16)
    t = b.tensor("t", TensorKind.GRADIENT, 16)
    b.gemm("f", "l", Phase.FWD, 4, 4, 4, 1, x, w, y)
    b.vector("s", "l", Phase.FWD, 16, 1, [y], [s])
    with b.in_stage(Stage.BACKWARD):
        b.gemm("r", "l", Phase.FWD, 4, 4, 4, 1, x, w, dataclasses.replace(y, version=1))
    b.gemm("d", "l", Phase.BWD_WEIGHT, 4, 4, 4, 1, g, y, dw)
    b.vector("v", "l", Phase.BWD_INPUT, 16, 1, [s, y], [t])
    return b.build()


def test_a_redirected_read_comes_from_the_new_producer_only() -> None:
    graph = step()
    assert graph.stashed == frozenset({("x", 0), ("y", 0), ("s", 0)})
    y1 = graph.ops[2].c  # type: ignore[union-attr]
    moved = links.redirect(graph, [links.Redirect(3, ("y", 0), 2, y1)])
    d = moved.ops[3]
    assert isinstance(d, GemmOp) and d.b.key == ("y", 1) and d.a.name == "g"
    assert d.sources == ((), (2,))  # g is no op's; y v1 is r's
    assert d.deps == (2,)  # no longer f's
    assert d.tile_sources == ()
    # v still reads y from f, so y stays stashed; x is read by r in the backward stage
    assert moved.stashed == frozenset({("x", 0), ("y", 0), ("s", 0)})
    both = links.redirect(moved, [links.Redirect(4, ("y", 0), 2, y1)])
    assert both.ops[4].sources == ((1,), (2,)) and both.ops[4].deps == (1, 2)
    assert both.stashed == frozenset({("x", 0), ("s", 0)})  # y is read back in no version 0
    assert graph_problems(both, ("x", "g")) == []


def test_a_redirect_with_tiles_takes_them_from_its_source() -> None:
    # v reads y (from f) and s (from s); taking y's tiles from s, which reads y, keeps
    # y's producer as its source (the source holds the tile) and waits for s
    graph = step()
    moved = links.redirect(graph, [links.Redirect(4, ("y", 0), 1, tiles=True)])
    v = moved.ops[4]
    assert isinstance(v, VectorOp) and [a.tensor.key for a in v.reads] == [("s", 0), ("y", 0)]
    assert v.sources == ((1,), (1,)) and v.tile_sources == (NO_TILES, 1) and v.deps == (1,)


def test_a_gemm_reading_one_tensor_twice_is_redirected_on_both_operands() -> None:
    b = GraphBuilder(WORDS)
    q = b.tensor("q", TensorKind.ACTIVATION, 16)
    w = b.tensor("w", TensorKind.WEIGHT, 16)
    b.gemm("p", "l", Phase.FWD, 4, 4, 4, 1, w, w, q)
    with b.in_stage(Stage.BACKWARD):
        b.gemm("p2", "l", Phase.FWD, 4, 4, 4, 1, w, w, dataclasses.replace(q, version=1))
    b.gemm("qq", "l", Phase.BWD_INPUT, 4, 4, 4, 1, q, q, b.tensor("o", TensorKind.GRADIENT, 16))
    graph = b.build()
    q1 = graph.ops[1].c  # type: ignore[union-attr]
    moved = links.redirect(graph, [links.Redirect(2, ("q", 0), 1, q1)])
    qq = moved.ops[2]
    assert isinstance(qq, GemmOp) and (qq.a.key, qq.b.key) == (("q", 1), ("q", 1))
    assert qq.sources == ((1,), (1,)) and qq.deps == (1,)
    assert moved.stashed == frozenset()


def test_redirect_refuses_what_it_cannot_do() -> None:
    graph = step()
    y1 = graph.ops[2].c  # type: ignore[union-attr]
    cases = [
        (links.Redirect(3, ("s", 0), 1), "d reads no s that could be redirected"),
        (links.Redirect(3, ("y", 1), 2), "d reads no y (version 1) that could be redirected"),
        (links.Redirect(1, ("y", 0), 2, y1), "s cannot read y from op 2, not before it"),
        (links.Redirect(3, ("y", 0), 1, y1), "d cannot read y from s, which has none"),
        (links.Redirect(3, ("y", 0), 1), "d cannot read y from s, which has none"),
    ]
    for redirect, message in cases:
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            links.redirect(graph, [redirect])


def test_an_unread_tensor_takes_its_source_tile_and_wait_with_it() -> None:
    graph = links.redirect(step(), [links.Redirect(4, ("s", 0), 1, tiles=True)])
    assert graph.ops[4].tile_sources == (1, NO_TILES)  # type: ignore[union-attr]
    dropped = links.unread(graph, {4: ("s", 0)})
    v = dropped.ops[4]
    assert isinstance(v, VectorOp) and [a.tensor.name for a in v.reads] == ["y"]
    assert v.sources == ((0,),) and v.deps == (0,) and v.tile_sources == ()
    assert dropped.stashed == frozenset({("x", 0), ("y", 0)})
    # an op ordered after the producer keeps waiting for it
    ordered = links.unread(links.wait_for(graph, {4: [1]}), {4: ("s", 0)})
    assert ordered.ops[4].deps == (0, 1) and ordered.ops[4].after == (1,)
    with pytest.raises(ValueError, match=r"^d has no read of s to drop$"):
        links.unread(graph, {3: ("s", 0)})


def test_wait_for_orders_without_data() -> None:
    graph = links.wait_for(step(), {3: [1, 2], 1: [0]})
    assert graph.ops[3].deps == (0, 1, 2) and graph.ops[3].after == (1, 2)
    assert graph.ops[3].sources == ((), (0,))  # what it reads is unchanged
    assert graph.ops[1].after == (0,)
    with pytest.raises(ValueError, match=r"^s cannot wait for op 3, not before it$"):
        links.wait_for(graph, {1: [3]})
