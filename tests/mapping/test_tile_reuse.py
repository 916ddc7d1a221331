"""Tile reuse, counted by hand: what resident tile streams save in DRAM, what they keep
in SRAM, when one tile does not fit, and how a tile group is timed."""

from __future__ import annotations

from typing import Any

import pytest

from accelsim.config.hardware import HardwareSpec
from accelsim.config.loader import load_energy
from accelsim.config.run import Convention, EngineKind, PsumPolicy
from accelsim.energy.model import estimate_energy
from accelsim.errors import SimulationError
from accelsim.graph import passes, queries
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.check import tile_problems
from accelsim.graph.ops import Access, OpGraph, Phase, TensorKind
from accelsim.mapping.schedule import schedule
from accelsim.mapping.tile_reuse import Buffer, tile_reuse
from accelsim.mapping.units import main_array
from accelsim.report.result import RunResult
from accelsim.timing import tile_groups
from accelsim.timing.costs import op_costs
from accelsim.timing.machine import Machine
from accelsim.timing.memory import StreamClass
from accelsim.timing.tile_groups import simulate_grouped
from tests.conftest import ROOT, make_hw

# An 8x8 ws array; default buffers (2 MiB ifmap and filter, 1 MiB ofmap), bf16 words.
SMALL = {"array.rows": 8, "array.cols": 8}
FREE = {"dram.bandwidth_bytes_per_cycle": float("inf"), "dram.latency_cycles": 0}


def run(graph: OpGraph, hw: HardwareSpec, engine: EngineKind = EngineKind.SIMPY) -> RunResult:
    """Schedule, cost and simulate ``graph`` on ``hw``, 8 tile groups per op at most."""
    folds = schedule(graph, (main_array(hw),))
    costs = op_costs(graph, folds, Machine.of(hw), Convention.ACCELSIM, PsumPolicy.CHUNK, 8)
    trace = simulate_grouped(graph, costs, Machine.of(hw), engine)
    energy = estimate_energy(trace, hw, load_energy(ROOT / "configs/energy/horowitz45.yaml"))
    return RunResult("t", "t", 1, {}, Machine.of(hw), graph, trace, energy)


def chain(
    stream: tuple[bool, bool], m: int = 64, relu_ops: int = 1, n2: int = 8, **hw: Any
) -> tuple[OpGraph, HardwareSpec]:
    """g0: y[m x 16] = x[m x 32] . w[32 x 16]; relu: z = f(y); g2: out[m x n2] = z . w2.

    ``stream``: relu takes y's tiles from g0, g2 takes z's from relu.
    """
    b = GraphBuilder(make_hw(**SMALL).word_bytes)
    x = b.tensor("x", TensorKind.ACTIVATION, m * 32)
    w = b.tensor("w", TensorKind.WEIGHT, 32 * 16)
    y = b.tensor("y", TensorKind.ACTIVATION, m * 16)
    z = b.tensor("z", TensorKind.ACTIVATION, m * 16)
    w2 = b.tensor("w2", TensorKind.WEIGHT, 16 * n2)
    out = b.tensor("out", TensorKind.ACTIVATION, m * n2)
    g0 = b.gemm("g0", "l0", Phase.FWD, m, 16, 32, 1, x, w, y)
    relu = b.vector("relu", "l1", Phase.FWD, m * 16, relu_ops, [y], [z])
    g2 = b.gemm("g2", "l2", Phase.FWD, m, n2, 16, 1, z, w2, out)
    if stream[0]:
        b.take_tiles(relu, y, g0)
    if stream[1]:
        b.take_tiles(g2, z, relu)
    return b.build(), make_hw(**SMALL, **hw)


def counts(result: RunResult) -> dict[str, list[int]]:
    c = result.trace.costs
    names = (
        "dram_ifmap_read_bytes",
        "dram_filter_read_bytes",
        "dram_ofmap_write_bytes",
        "sram_ifmap_read_bytes",
        "sram_ifmap_write_bytes",
        "sram_filter_read_bytes",
        "sram_ofmap_read_bytes",
        "sram_ofmap_write_bytes",
    )
    return {name: getattr(c, name).tolist() for name in names}


def test_a_resident_stream_saves_the_write_and_the_read_and_keeps_the_sram_traffic() -> None:
    plain = counts(run(*chain((False, False))))
    # x 64x32, w 32x16, y and z 64x16, w2 16x8, out 64x8, all bf16 and all fitting
    assert plain["dram_ifmap_read_bytes"] == [4096, 2048, 2048]  # x; relu reads y; z
    assert plain["dram_filter_read_bytes"] == [1024, 0, 256]  # w; w2
    assert plain["dram_ofmap_write_bytes"] == [2048, 2048, 1024]  # y; z; out
    fused = counts(run(*chain((True, False))))
    # y never leaves the chip: g0 does not write it, relu does not read it back
    assert fused["dram_ifmap_read_bytes"] == [4096, 0, 2048]
    assert fused["dram_ofmap_write_bytes"] == [0, 2048, 1024]
    sram = [k for k in plain if k.startswith("sram")]
    assert {k: fused[k] for k in sram} == {k: plain[k] for k in sram}
    assert plain["sram_ofmap_read_bytes"][1] == 2048  # relu reads y's tiles from the ofmap buffer
    both = counts(run(*chain((True, True))))
    # g2's first (and only) pass over A comes from relu's tiles, which relu writes
    # into g2's buffer as a DRAM fill would (the same ifmap SRAM writes); relu still
    # writes z, as for any GEMM reader (which may pass over its operand again)
    assert both["dram_ifmap_read_bytes"] == [4096, 0, 0]
    assert both["dram_ofmap_write_bytes"] == [0, 2048, 1024]
    assert {k: both[k] for k in sram} == {k: plain[k] for k in sram}


def test_the_energy_saved_is_the_dram_energy_of_the_bytes_saved() -> None:
    plain, fused = run(*chain((False, False))), run(*chain((True, True)))
    saved = plain.dram_bytes - fused.dram_bytes
    assert saved == 2 * 2048 + 2048  # y written and read; z read
    before, after = plain.energy.by_component_pj, fused.energy.by_component_pj
    # horowitz45: DRAM 20 pJ/bit both ways
    assert before["dram"] - after["dram"] == pytest.approx(saved * 8 * 20)
    for key in ("mac", "vector", "sram_ifmap", "sram_filter", "sram_ofmap"):
        assert after[key] == pytest.approx(before[key])


def test_a_vector_op_giving_tiles_to_another_writes_nothing() -> None:
    """A chain of vector ops: norm reads x from DRAM and its output, read only by relu,
    never leaves the chip."""
    hw = make_hw(**SMALL)
    b = GraphBuilder(hw.word_bytes)
    x, y, z = (b.tensor(n, TensorKind.ACTIVATION, 1024) for n in "xyz")
    norm = b.vector("norm", "l0", Phase.FWD, 1024, 6, [x], [y])
    relu = b.vector("relu", "l1", Phase.FWD, 1024, 1, [y], [z])
    b.take_tiles(relu, y, norm)
    c = counts(run(b.build(), hw))
    assert c["dram_ifmap_read_bytes"] == [2048, 0]
    assert c["dram_ofmap_write_bytes"] == [0, 2048]
    assert c["sram_ofmap_write_bytes"] == [2048, 2048]
    assert c["sram_ofmap_read_bytes"] == [2048, 2048]


def test_a_second_reader_from_dram_keeps_the_write() -> None:
    graph, hw = chain((True, False))
    b = GraphBuilder.extending(graph, hw.word_bytes)
    y = graph.ops[0].c  # type: ignore[union-attr]
    b.vector("peek", "l3", Phase.FWD, y.elements, 1, [y], [b.tensor("p", TensorKind.ACTIVATION, 1)])
    c = counts(run(b.build(), hw))
    assert c["dram_ofmap_write_bytes"][0] == 2048  # peek reads y from DRAM
    assert c["dram_ifmap_read_bytes"][1] == 0  # relu still takes y's tiles


def test_a_reread_operand_saves_only_its_first_pass() -> None:
    # g2: m = 2048, n = 64 (8 column folds); z is 64 KiB, above half the 32 KiB ifmap
    # buffer, so ws blocked as partial sums need streams it once per column fold:
    # 8 x 64 KiB; the stream serves one.
    re_read = {"buffers.ifmap_kib": 32, "mapping.stream_blocking": "psums"}
    graph, hw = chain((True, True), m=2048, n2=64, **re_read)
    plain_graph, _ = chain((True, False), m=2048, n2=64)
    plain = counts(run(plain_graph, hw))
    both = counts(run(graph, hw))
    z = 2048 * 16 * 2
    assert plain["dram_ifmap_read_bytes"][2] == 8 * z
    assert both["dram_ifmap_read_bytes"][2] == 7 * z
    assert both["dram_ofmap_write_bytes"][1] == z  # so relu still writes z for the re-reads
    assert both["sram_ifmap_write_bytes"][2] == plain["sram_ifmap_write_bytes"][2] == 8 * z


def test_a_group_whose_tiles_do_not_fit_goes_through_dram() -> None:
    # In the ofmap buffer's free half: 2 tiles of y (8x8 bf16: 128 B each) and relu's
    # tile of z (128 B) = 384 B.  With 1 KiB (512 B free) they fit, with 0.5 KiB not.
    fits, hw = chain((True, False), **{"buffers.ofmap_kib": 1.0})
    assert tile_reuse(fits, (main_array(hw),)).resident == {(1, 0): Buffer.OFMAP}
    tight, hw = chain((True, False), **{"buffers.ofmap_kib": 0.5})
    assert tile_reuse(tight, (main_array(hw),)).resident == {}
    assert counts(run(tight, hw))["dram_ofmap_write_bytes"][0] == 2048


def test_a_weight_tile_taken_from_the_filter_buffer_it_was_loaded_into() -> None:
    """Issue 25's shape: an update takes the weight's tiles as dX loads them (dX's filter
    buffer) and the gradient's as dW makes them (its ofmap buffer)."""
    hw = make_hw(**SMALL)
    b = GraphBuilder(hw.word_bytes)
    g = b.tensor("g", TensorKind.GRADIENT, 64 * 16)
    x = b.tensor("x", TensorKind.ACTIVATION, 64 * 32)
    w = b.tensor("w", TensorKind.WEIGHT, 16 * 32, parameter="w")
    dx = b.tensor("dx", TensorKind.GRADIENT, 64 * 32)
    dw = b.tensor("dw", TensorKind.GRADIENT, 16 * 32, parameter="w")
    m = b.tensor("w.state0", TensorKind.OPTIMIZER_STATE, 16 * 32, parameter="w")
    gx = b.gemm("dx", "l", Phase.BWD_INPUT, 64, 32, 16, 1, g, w, dx)
    gw = b.gemm("dw", "l", Phase.BWD_WEIGHT, 16, 32, 64, 1, g, x, dw)
    update = b.vector("update", "l", Phase.UPDATE, 512, 4, [w, dw, m], [w, m], after=[gx])
    b.take_tiles(update, w, gx)
    b.take_tiles(update, dw, gw)
    graph = b.build()
    assert tile_reuse(graph, (main_array(hw),)).resident == {
        (2, 0): Buffer.FILTER,
        (2, 1): Buffer.OFMAP,
    }
    c = counts(run(graph, hw))
    # the update reads only its state from DRAM (512 x 4 B) and writes w and the state
    assert c["dram_ifmap_read_bytes"][2] == 2048
    assert c["dram_ofmap_write_bytes"] == [4096, 0, 1024 + 2048]  # dx; no dW; w and state
    assert c["sram_filter_read_bytes"][2] == 1024  # w's tiles, from dX's filter buffer
    assert c["sram_ofmap_read_bytes"][2] == 1024 + 2048  # dW's tiles and the state


def test_a_group_runs_as_one_op_and_each_member_ends_with_it() -> None:
    # g0: 4 row x 2 column folds of 2 x 8 + 8 + 2048 - 2 = 2070 cycles: 16560, in 8
    # tile groups; relu: 32768 elements x 100 ops / 128 lanes = 25600, vector-bound.
    graph, hw = chain((True, False), m=2048, relu_ops=100, **FREE)
    result = run(graph, hw)
    trace = result.trace
    assert trace.costs.compute_cycles.tolist()[:2] == [16560, 25600]
    group = max(16560 + 25600 // 8, 16560 // 8 + 25600)  # 27670: relu sets the pace
    assert trace.start_cycle.tolist()[:2] == [0, group - 25600]
    assert trace.end_cycle.tolist()[:2] == [group, group]
    assert trace.stall_cycles.tolist()[:2] == [group - 16560, 0]  # g0 waits for relu
    assert trace.start_cycle[2] == group
    assert result.total_cycles == group + int(trace.costs.compute_cycles[2])
    # array-bound: the epilogue adds one tile group of its work after the array's
    light, _ = chain((True, False), m=2048, relu_ops=1, **FREE)
    assert run(light, hw).trace.end_cycle[1] == 16560 + 256 // 8
    # unfused, relu runs after g0 is done
    apart, _ = chain((False, False), m=2048, relu_ops=100, **FREE)
    assert run(apart, hw).trace.end_cycle[1] == 16560 + 25600


def test_both_engines_time_tile_groups_alike() -> None:
    graph, hw = chain((True, True), m=2048, relu_ops=3)
    simpy, compiled = run(graph, hw), run(graph, hw, EngineKind.COMPILED)
    assert simpy.trace.engine == "simpy" and compiled.trace.engine == "compiled"
    assert simpy.trace.start_cycle.tolist() == compiled.trace.start_cycle.tolist()
    assert simpy.trace.end_cycle.tolist() == compiled.trace.end_cycle.tolist()
    assert simpy.trace.busy_cycles(1).tolist() == [int(simpy.trace.costs.compute_cycles[1])]


def test_a_transfer_placed_inside_a_group_runs_before_it() -> None:
    """On two processors: v1 (p1) makes s, g0 (p0) makes y, add (p0) takes y's tiles
    from g0 and reads s.  The transfer of s lands between g0 and add; the group waits
    for it, so it runs first."""
    hw = make_hw(**SMALL, processors=2, **FREE)
    b = GraphBuilder(hw.word_bytes)
    x, w = b.tensor("x", TensorKind.ACTIVATION, 64 * 32), b.tensor("w", TensorKind.WEIGHT, 512)
    y, s, z = (b.tensor(n, TensorKind.ACTIVATION, 64 * 16) for n in "ysz")
    b.vector("v1", "l1", Phase.FWD, 1024, 1, [Access(x, 1024)], [s])
    g0 = b.gemm("g0", "l0", Phase.FWD, 64, 16, 32, 1, x, w, y)
    add = b.vector("add", "l2", Phase.FWD, 1024, 1, [y, s], [z])
    b.take_tiles(add, y, g0)
    placed = passes.insert_transfers(passes.place(b.build(), lambda op: int(op.name == "v1")))
    assert [op.name for op in placed.ops] == ["v1", "g0", "s.to_p0", "add"]
    assert queries.tile_groups(placed) == ((1, 3),)
    trace = run(placed, hw).trace
    transfer_end = int(trace.end_cycle[2])
    assert int(trace.start_cycle[1]) == transfer_end  # the group starts when s has arrived
    assert int(trace.end_cycle[3]) == int(trace.end_cycle[1])


def test_a_group_waiting_for_an_op_that_waits_for_it_is_refused() -> None:
    hw = make_hw(**SMALL)
    b = GraphBuilder(hw.word_bytes)
    x, w = b.tensor("x", TensorKind.ACTIVATION, 64 * 32), b.tensor("w", TensorKind.WEIGHT, 512)
    y, q, z = (b.tensor(n, TensorKind.ACTIVATION, 64 * 16) for n in "yqz")
    g0 = b.gemm("g0", "l0", Phase.FWD, 64, 16, 32, 1, x, w, y)
    b.vector("x1", "l1", Phase.FWD, 1024, 1, [y], [q])  # reads all of y: after g0
    add = b.vector("add", "l2", Phase.FWD, 1024, 1, [y, q], [z])
    b.take_tiles(add, y, g0)
    graph = b.build()
    assert tile_problems(graph) == [
        "add runs in one op with g0 but waits for x1, which comes after it"
    ]
    with pytest.raises(SimulationError, match="g0 and the ops taking its tiles wait for an op"):
        run(graph, hw)


def test_a_groups_transfers_carry_the_streams_of_the_members_moving_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """g0 makes y, relu takes its tiles and writes z, which the backward g1 reads back
    (a stash).  The group reads x, an activation, for g0, and writes z for relu (g0's
    y never reaches DRAM): its reads are the activation stream, its writes the stash
    stream, though its first op, g0, writes an activation."""
    hw = make_hw(**SMALL, **{"dram.arbitration": "priority"})
    b = GraphBuilder(hw.word_bytes)
    x, w = b.tensor("x", TensorKind.ACTIVATION, 64 * 32), b.tensor("w", TensorKind.WEIGHT, 512)
    y, z, dx = (b.tensor(n, TensorKind.ACTIVATION, 64 * 16) for n in ("y", "z", "dx"))
    w1 = b.tensor("w1", TensorKind.WEIGHT, 16 * 16)
    g0 = b.gemm("g0", "l0", Phase.FWD, 64, 16, 32, 1, x, w, y)
    relu = b.vector("relu", "l1", Phase.FWD, 1024, 1, [y], [z])
    b.gemm("g1", "l2", Phase.BWD_INPUT, 64, 16, 16, 1, z, w1, dx)
    b.take_tiles(relu, y, g0)
    graph = b.build()
    seen: list[Any] = []
    real = tile_groups.simulate

    def spy(*args: Any) -> Any:
        seen.append(args[4])
        return real(*args)

    monkeypatch.setattr(tile_groups, "simulate", spy)
    simpy = run(graph, hw)
    ((reads, writes),) = seen
    assert [StreamClass(k).name for k in reads] == ["ACTIVATION", "STASH"]
    assert [StreamClass(k).name for k in writes] == ["STASH", "ACTIVATION"]
    compiled = run(graph, hw, EngineKind.COMPILED)
    assert simpy.trace.end_cycle.tolist() == compiled.trace.end_cycle.tolist()
