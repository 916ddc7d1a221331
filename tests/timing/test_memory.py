"""The memory contract (timing/memory.py) and its two first models, fifo and interleaved,
as everything else sees them: reservations timed by hand, bounds, the machine's
memories, their arrays for the compiled engine, streams and arbitration.

Reservations are timed by hand: a transfer of ``b`` bytes booked at ``t`` on a
channel of ``w`` bytes per cycle starts at ``max(t, free_at)``, holds the channel
``ceil(b / w)`` cycles and arrives ``latency`` cycles after that.  What every model
must keep is checked, model by model, by ``tests/contracts/``.
"""

from __future__ import annotations

import ast
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from accelsim.config.dram import DramArbitration
from accelsim.config.hardware import HardwareSpec
from accelsim.errors import ConfigError
from accelsim.graph.ops import Access, CommOp, OpGraph, Phase, Stage, Tensor, TensorKind
from accelsim.timing import compiled, engine
from accelsim.timing.costs import UNIT_ARRAY, UNIT_COMM, UNIT_VECTOR, OpCosts
from accelsim.timing.flat import flatten, memory_table
from accelsim.timing.machine import Machine
from accelsim.timing.memories.fifo import Fifo
from accelsim.timing.memories.interleaved import Interleaved
from accelsim.timing.memory import (
    BACKGROUND,
    DEFAULT_STREAM,
    FOREGROUND,
    SLICE_CYCLES,
    MemoryState,
    StreamClass,
    slice_bytes,
)
from accelsim.timing.single_op import simulate_single_op
from accelsim.timing.streams import STREAMS, group_stream, op_streams
from tests.conftest import ROOT
from tests.timing.test_engine import W, Y, costs, fifo, gemm, hw, machine, vector

PACKAGE = ROOT / "accelsim"


def test_a_fifo_memory_books_in_request_order() -> None:
    # 10 B/cycle, latency 5: 100 B at 0 hold 0..10, arrive 15; 50 B at 0 queue
    # behind, 10..15, arrive 20; 10 B at 100 (idle again) 100..101, arrive 106.
    memory = fifo(10, 5)
    assert [memory.reserve(t, b, DEFAULT_STREAM) for t, b in ((0, 100), (0, 50), (100, 10))] == [
        15,
        20,
        106,
    ]
    assert memory.state == [101]


def test_an_interleaved_memory_deals_blocks_to_its_channels_in_turn() -> None:
    # Two channels of 1 B/cycle, latency 10, blocks of 256 B.  1000 B at 0 are four
    # blocks (the last 232 B), two each: channel 0 0..512, channel 1 0..488, arrive
    # 522.  100 B at 10, one block from channel 0: 512..612, arrive 622.  300 B at 20,
    # a block from channel 1, 488..744, and 44 B on channel 0, 612..656: arrive 754.
    memory = MemoryState(Interleaved(2, 1, 1, 10, 0))
    assert [memory.reserve(t, b, DEFAULT_STREAM) for t, b in ((0, 1000), (10, 100), (20, 300))] == [
        522,
        622,
        754,
    ]
    assert memory.state == [1, 656, 744]  # the cursor, then each channel's free cycle
    # Four channels: 1000 B at 0 are a block on each (232 B on channel 3), 0..256,
    # arrive 266; 100 B at 10 on channel 0, 256..356, arrive 366; 600 B at 20 are
    # blocks on channels 1 and 2, 256..512, and 88 B on channel 3, 232..320: arrive 522.
    memory = MemoryState(Interleaved(4, 1, 1, 10, 0))
    assert [memory.reserve(t, b, DEFAULT_STREAM) for t, b in ((0, 1000), (10, 100), (20, 600))] == [
        266,
        366,
        522,
    ]
    assert memory.model.channel_free(memory.state) == (356, 512, 512, 320)
    assert memory.state[0] == 0


def test_an_interleaved_memory_is_the_sum_of_its_channels() -> None:
    memory = machine("dram.channels=4", "dram.capacity_gib=2").dram[0]
    assert isinstance(memory, Interleaved)
    assert memory.bound(5120) == 10.0  # 4 x 128 B/cycle
    assert memory.capacity_bytes == 4 * 2 * 2**30
    assert machine("dram.channels=4").dram_capacity_bytes == 4 * 16 * 2**30
    assert memory.latency_cycles == 100
    # 1000 B from channel 0 of an idle memory at 1 B/cycle: 256, 256, 256 and 232 B.
    shares = MemoryState(Interleaved(4, 1, 1, 0, 0))
    shares.reserve(0, 1000, DEFAULT_STREAM)
    assert shares.model.channel_free(shares.state) == (256, 256, 256, 232)
    shares = MemoryState(Interleaved(4, 1, 1, 0, 0))
    shares.reserve(0, 300, DEFAULT_STREAM)
    assert shares.model.channel_free(shares.state) == (256, 44, 0, 0)
    priority = MemoryState(machine("dram.channels=4", "dram.arbitration=priority").dram[0])
    assert priority.portion(10**6, STREAMS[StreamClass.OPTIMIZER]) == 4 * 32768


def test_a_bad_channel_count_is_refused_where_it_was_written() -> None:
    with pytest.raises(
        ConfigError, match=r"dram\.channels: input should be greater than 0 \(got 0\)"
    ):
        hw("dram.channels=0")
    assert hw().dram.channels == 1
    assert isinstance(machine().dram[0], Fifo)


def test_the_bound_is_bytes_over_bandwidth_for_numbers_and_arrays() -> None:
    memory = Fifo(128, 64, 100)
    assert memory.bound(1280) == 10.0
    assert memory.bound(1280, write=True) == 20.0
    assert memory.bound(1.0) == 1 / 128
    assert memory.bound(np.array([128, 64])).tolist() == [1.0, 0.5]
    assert Fifo(math.inf, math.inf, 7).bound(10**9) == 0.0


def test_processors_sharing_dram_share_one_memory() -> None:
    shared = machine("processors=3")
    assert shared.dram[0] is shared.dram[1] is shared.dram[2]
    fresh = shared.memories()
    assert fresh[0] is fresh[1] is fresh[2] and fresh[0] is not shared.memories()[0]
    own = machine("processors=3", "dram.sharing=per_processor")
    assert len({id(m) for m in own.dram}) == len({id(m) for m in own.memories()}) == 3
    links = machine("processors=2").links
    assert links[0] is not links[1]
    assert (links[0].bound(640), links[0].latency_cycles) == (10.0, 200)  # 64 B/cycle links


def test_the_compiled_engine_gets_the_memories_as_arrays() -> None:
    table = memory_table(machine("processors=3").dram)
    assert table.memory_of.tolist() == [0, 0, 0]
    assert table.model.tolist() == [Fifo.code]
    assert (table.param_ptr.tolist(), table.params.tolist()) == ([0, 2], [128.0, 128.0])
    assert (table.state_ptr.tolist(), table.state.tolist()) == ([0, 1], [0])
    assert (table.latency.tolist(), table.slice_bytes.tolist()) == ([100], [0])
    table = memory_table(machine("processors=2", "dram.sharing=per_processor").dram)
    assert table.memory_of.tolist() == [0, 1]
    assert table.state_ptr.tolist() == [0, 1, 2]
    split = ("processors=2", "dram.sharing=per_processor", "dram.channels=3")
    table = memory_table(machine(*split, "dram.arbitration=priority").dram)
    assert table.model.tolist() == [Interleaved.code] * 2
    assert table.params.tolist() == [128.0, 128.0, 3.0, 256.0] * 2
    assert table.param_ptr.tolist() == [0, 4, 8]
    assert table.state_ptr.tolist() == [0, 4, 8]  # a cursor and three channels each
    assert table.slice_bytes.tolist() == [3 * 32768] * 2


def test_capacity_is_one_memorys() -> None:
    assert machine().dram_capacity_bytes == 16 * 2**30
    assert machine("dram.capacity_gib=2").dram_capacity_bytes == 2 * 2**30


def _reads_bandwidth(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    return any(
        isinstance(node, ast.Attribute) and node.attr == "bandwidth_bytes_per_cycle"
        for node in ast.walk(tree)
    )


def test_only_the_memory_models_turn_a_bandwidth_into_time() -> None:
    # The hardware spec's bandwidths are read where memories are built (a link, the
    # machine's figure of each memory's bandwidth; the DRAM models read the spec's
    # read and write bandwidths), copied into the summary's design knobs, by the spec
    # itself (the read and write bandwidths default to it) and by calibration (a
    # fitted file keeps them in bytes per second at its fitted clock; the vector
    # unit's stream is searched up to the DRAM's bandwidth) and by the network model
    # (each level's links, whose bytes its collectives' closed forms time), and the area
    # model sizes the DRAM interface by it (mm2 per GB/s, no time); nothing else
    # divides bytes by them.
    readers = {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if _reads_bandwidth(path)
    }
    assert readers == {
        "timing/machine.py",
        "timing/memories/fifo.py",
        "report/result.py",
        "config/dram.py",
        "calibration/fit.py",
        "calibration/vector_fit.py",
        "network/topology.py",
        "energy/area.py",
    }


# -- streams ------------------------------------------------------------------------------


def test_every_op_has_the_stream_of_what_it_moves() -> None:
    # A forward GEMM reads its activation (the bigger operand from DRAM) and writes
    # a stashed activation; the dX GEMM reads the stash back; an update is the
    # optimizer stream; an all-reduce moves gradients.
    grad = Tensor("dw", TensorKind.GRADIENT, 1000, 2)
    y = Tensor("y", TensorKind.ACTIVATION, 1000, 2)
    ops = (
        replace(gemm(0), c=y),
        replace(gemm(1, 0), phase=Phase.BWD_INPUT, stage=Stage.BACKWARD, a=y),
        vector(2, 1, phase=Phase.UPDATE, reads=[Access(W, 1000)], writes=[Access(W, 1000)]),
        CommOp(3, "ar", "l", Phase.COMM, Stage.COMMUNICATION, grad, (0,), (2,)),
        replace(vector(4, reads=[Access(Y, 1000)]), phase=Phase.AUX, owner="some_technique"),
    )
    graph = OpGraph(ops=ops, processor=(0,) * 5, stashed=frozenset({("y", 0)}))
    c = costs(
        [UNIT_ARRAY, UNIT_ARRAY, UNIT_VECTOR, UNIT_COMM, UNIT_VECTOR], reads=[10, 10, 0, 0, 0]
    )
    c = replace(c, dram_filter_read_bytes=np.array([4, 4, 0, 0, 0]))
    reads, writes = op_streams(graph, c)
    assert [StreamClass(k).name for k in reads] == [
        "ACTIVATION", "STASH", "OPTIMIZER", "GRADIENT", "TECHNIQUE"
    ]  # fmt: skip
    assert [StreamClass(k).name for k in writes][:4] == [
        "STASH",
        "ACTIVATION",
        "OPTIMIZER",
        "GRADIENT",
    ]
    assert [STREAMS[k].priority for k in reads] == [
        FOREGROUND,
        FOREGROUND,
        BACKGROUND,
        FOREGROUND,
        FOREGROUND,
    ]


def test_a_techniques_auxiliary_work_is_the_technique_stream_on_any_unit() -> None:
    # a GEMM on the technique's own array in the forward stage, a vector op in the
    # backward stage: both the technique stream, read and written; the core's own
    # op beside them keeps the class of what it moves
    predictor = replace(gemm(0), phase=Phase.AUX, owner="ada", unit="predictor")
    helper = replace(vector(1), phase=Phase.AUX, stage=Stage.BACKWARD, owner="ada")
    graph = OpGraph(ops=(predictor, helper, gemm(2)), processor=(0, 0, 0))
    reads, writes = op_streams(graph, costs([UNIT_ARRAY, UNIT_VECTOR, UNIT_ARRAY], reads=[1] * 3))
    assert [StreamClass(k) for k in reads] == [
        StreamClass.TECHNIQUE,
        StreamClass.TECHNIQUE,
        StreamClass.ACTIVATION,
    ]
    assert [StreamClass(k) for k in writes][:2] == [StreamClass.TECHNIQUE] * 2
    assert [kind.name for kind in StreamClass] == [
        "ACTIVATION", "WEIGHT", "GRADIENT", "OPTIMIZER", "STASH", "TECHNIQUE"
    ]  # fmt: skip


def test_a_fused_ops_transfers_are_of_the_member_moving_most_foreground_first() -> None:
    classes = np.array([StreamClass.ACTIVATION, StreamClass.STASH, StreamClass.OPTIMIZER])
    moved = np.array([10, 30, 100])
    assert group_stream(classes, moved, (0, 1, 2)) == StreamClass.STASH  # the update yields
    assert group_stream(classes, moved, (0, 2)) == StreamClass.ACTIVATION
    assert group_stream(classes, moved, (2,)) == StreamClass.OPTIMIZER
    assert group_stream(classes, np.array([30, 30, 0]), (0, 1)) == StreamClass.ACTIVATION  # tie


# -- arbitration, one transfer at a time ------------------------------------------------------

BACK, FRONT = STREAMS[StreamClass.OPTIMIZER], STREAMS[StreamClass.ACTIVATION]


def test_fcfs_books_every_stream_whole() -> None:
    memory = fifo(10, 5)
    assert memory.portion(1000, BACK) == memory.portion(1000, FRONT) == 1000


def test_priority_books_a_background_stream_a_slice_at_a_time() -> None:
    # 10 B/cycle, latency 5, slices of 200 B.  A background transfer of 500 B at 0:
    # slice 1 holds 0..20; at 20 (it has left) slice 2, 20..40; at 40 the last 100 B,
    # 40..50, arrive 55.  A foreground 100 B requested at 25 goes behind slice 2 only,
    # 40..50, arrives 55, and pushes the last slice to 50..60, arriving 65.
    memory = MemoryState(Fifo(10, 10, 5, slice_bytes=200))
    assert memory.portion(500, BACK) == 200
    assert memory.portion(500, FRONT) == 500
    assert memory.reserve(0, 200, BACK) == 25
    assert memory.reserve(20, memory.portion(300, BACK), BACK) == 45
    assert memory.reserve(25, 100, FRONT) == 55
    assert memory.reserve(40, memory.portion(100, BACK), BACK) == 65


def test_the_slice_is_256_cycles_of_bandwidth_with_priority_only() -> None:
    assert SLICE_CYCLES == 256
    assert slice_bytes(DramArbitration.FCFS, 128) == 0
    assert slice_bytes(DramArbitration.PRIORITY, 128) == 32768
    assert slice_bytes(DramArbitration.PRIORITY, 0.5) == 128
    assert slice_bytes(DramArbitration.PRIORITY, 0.001) == 1
    assert slice_bytes(DramArbitration.PRIORITY, math.inf) == 0  # transfers take no time
    priority = MemoryState(machine("dram.arbitration=priority").dram[0])
    assert priority.portion(10**6, BACK) == 32768


# -- the same transfers through the engines -----------------------------------------------

# Three transfers: an optimizer update (background) reads U B at cycle 0; the array
# computes 10 cycles, then a forward GEMM reads 100 B and, once they are in, writes
# 300 B.  DRAM of C channels of 1 B/cycle each (priority slices of 256 C B, interleave
# blocks of 256 B), latency 10.


def scenario(update_bytes: int) -> tuple[OpGraph, OpCosts]:
    graph = OpGraph(
        ops=(vector(0, phase=Phase.UPDATE), gemm(1), gemm(2, 1)),
        processor=(0, 0, 0),
    )
    c = costs(
        [UNIT_VECTOR, UNIT_ARRAY, UNIT_ARRAY],
        compute=[0, 10, 0],
        reads=[update_bytes, 0, 100],
        writes=[0, 0, 300],
    )
    return graph, c


def both_engines(graph: OpGraph, c: OpCosts, spec: HardwareSpec) -> tuple[list[int], int]:
    """End cycles and event count, the same from both engines (asserted)."""
    on = Machine.of(spec)
    reference = engine.simulate(graph, c, on)
    fast = compiled.simulate(graph, c, flatten(graph, c, on))
    assert fast.end_cycle.tolist() == reference.end_cycle.tolist()
    assert (fast.events, fast.start_cycle.tolist()) == (
        reference.events,
        reference.start_cycle.tolist(),
    )
    return reference.end_cycle.tolist(), reference.events


FCFS_EVENTS = 15  # what an fcfs run takes; priority adds one per slice after the first


@pytest.mark.parametrize(
    ("channels", "update_bytes", "arbitration", "ends", "slices"),
    [
        # One channel, fcfs: the update's 1000 B hold 0..1000 and arrive 1010; the
        # GEMM's 100 B, requested at 10, queue behind them, 1000..1100, arrive 1110;
        # its 300 B written at 1110 hold 1110..1410 and arrive 1420.
        (1, 1000, "fcfs", [1010, 10, 1420], 1),
        # One channel, priority: the update books 256 B, 0..256.  The read at 10 goes
        # behind that slice only, 256..356, arrives 366.  At 256 the update's next
        # slice goes behind it, 356..612; the write at 366, 612..912, arrives 922; the
        # update's third slice at 612, 912..1168; its last 232 B at 1168, 1168..1400,
        # arrive 1410.
        (1, 1000, "priority", [1410, 10, 922], 4),
        # Two channels, fcfs: the update's four blocks (the last 232 B) go two to each
        # channel, 0..512 and 0..488, arrive 522.  The read's one block takes channel
        # 0 after them, 512..612, arrives 622; the write at 622 is a block on channel
        # 1, 622..878, and 44 B on channel 0, 622..666: arrives 888.
        (2, 1000, "fcfs", [522, 10, 888], 1),
        # Two channels, priority (slices of 512 B): the update's first slice, a block
        # each, 0..256.  The read at 10: channel 0, 256..356, arrives 366.  At 256 the
        # update's last 488 B: a block on channel 1, 256..512, 232 B on channel 0,
        # 356..588, arrive 598.  The write at 366: a block on channel 1, 512..768,
        # 44 B on channel 0, 588..632: arrives 778.
        (2, 1000, "priority", [598, 10, 778], 2),
        # Four channels, fcfs: the update's 3000 B are 12 blocks (the last 184 B), three
        # on each channel: 0..768 (channel 3: 0..696), arrive 778.  The read: channel
        # 0, 768..868, arrives 878; the write at 878: a block on channel 1, 878..1134,
        # 44 B on channel 2, 878..922: arrives 1144.
        (4, 3000, "fcfs", [778, 10, 1144], 1),
        # Four channels, priority (slices of 1024 B): the first slice, a block each,
        # 0..256.  The read: channel 0, 256..356, arrives 366.  At 256 the second
        # slice from channel 1: channels 1-3 256..512, channel 0 356..612.  The write
        # at 366: channel 1 512..768, 44 B on channel 2 512..556: arrives 778.  At 612
        # the last 952 B from channel 3: channel 3 612..868, channel 0 612..868,
        # channel 1 768..1024, 184 B on channel 2 612..796: arrive 1034.
        (4, 3000, "priority", [1034, 10, 778], 3),
    ],
)
def test_three_transfers_through_both_engines(
    channels: int, update_bytes: int, arbitration: str, ends: list[int], slices: int
) -> None:
    spec = hw(
        "dram.bandwidth_bytes_per_cycle=1",
        "dram.latency_cycles=10",
        f"dram.channels={channels}",
        f"dram.arbitration={arbitration}",
    )
    graph, c = scenario(update_bytes)
    assert both_engines(graph, c, spec) == (ends, FCFS_EVENTS + slices - 1)


@pytest.mark.parametrize("arbitration", ["fcfs", "priority"])
@pytest.mark.parametrize(
    ("channels", "end"),
    [
        (1, 610),  # 600 B at 0: 0..600, arrive 610
        (2, 354),  # blocks of 256, 256 and 88 B: channel 0 holds 344 B, channel 1 256 B
        (4, 266),  # a block on each of channels 0 and 1, 88 B on channel 2
    ],
)
def test_a_lone_op_times_the_same_without_an_engine(
    arbitration: str, channels: int, end: int
) -> None:
    # The GEMM alone (foreground) reads 600 B under either arbitration; single_op
    # books it as the engines do.
    spec = hw(
        "dram.bandwidth_bytes_per_cycle=1",
        "dram.latency_cycles=10",
        f"dram.channels={channels}",
        f"dram.arbitration={arbitration}",
    )
    graph = OpGraph(ops=(gemm(0),), processor=(0,))
    c = costs([UNIT_ARRAY], compute=[0], reads=[600])
    assert both_engines(graph, c, spec)[0] == [end]
    assert simulate_single_op(graph, c, Machine.of(spec)).end_cycle.tolist() == [end]


def test_a_lone_background_op_needs_an_engine_under_priority() -> None:
    # 1000 B at 1 B/cycle, latency 0: four slices back to back, 0..1000.
    spec = hw(
        "dram.bandwidth_bytes_per_cycle=1", "dram.latency_cycles=0", "dram.arbitration=priority"
    )
    graph = OpGraph(ops=(vector(0, phase=Phase.UPDATE),), processor=(0,))
    c = costs([UNIT_VECTOR], compute=[0], reads=[1000])
    assert both_engines(graph, c, spec)[0] == [1000]
    with pytest.raises(ValueError, match="optimizer transfers are booked a slice at a time"):
        simulate_single_op(graph, c, Machine.of(spec))
    fcfs = machine("dram.bandwidth_bytes_per_cycle=1", "dram.latency_cycles=0")
    assert simulate_single_op(graph, c, fcfs).end_cycle.tolist() == [1000]


def test_a_bad_arbitration_is_refused_where_it_was_written() -> None:
    with pytest.raises(
        ConfigError, match=r"dram\.arbitration: input should be 'fcfs' or 'priority' \(got 'lifo'\)"
    ):
        hw("dram.arbitration=lifo")
    assert hw().dram.arbitration is DramArbitration.FCFS
