"""The event engine and the DRAM/link channel, timed by hand to the exact cycle.

Every expected number below is derived in a comment from the documented rules:

* a DRAM or link transfer (:class:`Fifo`) of ``b`` bytes requested at ``t`` starts at
  ``max(t, free_at)``, keeps the channel busy ``ceil(b / bandwidth)`` cycles and
  arrives ``latency`` cycles after that;
* an op of ``chunks`` tile groups first waits for its prologue, then for each
  group ``j`` requests the fetch of group ``j+1``, computes ``compute / chunks``
  cycles, queues group ``j``'s drain and waits for the fetch; the epilogue
  drains after the last group, and the op ends when every drain has arrived;
* ``stall = end - start - compute`` (0 for communication ops).

Costs are built by hand (:func:`costs`), so the timings depend neither on the GEMM
closed forms nor on how :mod:`accelsim.timing.costs` tiles the ops.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import simpy

from accelsim.config.dram import DramSharing
from accelsim.config.hardware import HardwareSpec
from accelsim.config.loader import load_hardware, parse_sets
from accelsim.graph.ops import (
    STAGE_OF_PHASE,
    Access,
    CommOp,
    GemmOp,
    OpGraph,
    Phase,
    Stage,
    Tensor,
    TensorKind,
    TransferOp,
    VectorOp,
)
from accelsim.timing.channel import transfer
from accelsim.timing.costs import UNIT_ARRAY, UNIT_COMM, UNIT_VECTOR, OpCosts
from accelsim.timing.engine import simulate
from accelsim.timing.machine import Machine
from accelsim.timing.memories.fifo import Fifo
from accelsim.timing.memory import DEFAULT_STREAM, MemoryState
from accelsim.timing.trace import Trace
from tests.conftest import ROOT

DEFAULT_HW = ROOT / "configs" / "hardware" / "default.yaml"


def hw(*sets: str) -> HardwareSpec:
    """The default hardware (DRAM 128 B/cycle + 100 cycles, links 64 B/cycle + 200
    cycles, 128 vector lanes, one processor) with ``--set`` style overrides."""
    return load_hardware(DEFAULT_HW, parse_sets(list(sets)))


def machine(*sets: str) -> Machine:
    """:func:`hw`'s machine."""
    return Machine.of(hw(*sets))


def fifo(bytes_per_cycle: float, latency_cycles: int) -> MemoryState:
    """A fresh first-come-first-served channel."""
    return MemoryState(Fifo(bytes_per_cycle, bytes_per_cycle, latency_cycles))


# -- tiny graphs and hand-made costs ------------------------------------------------------

X = Tensor("x", TensorKind.ACTIVATION, 1000, 2)
W = Tensor("w", TensorKind.WEIGHT, 1000, 2)
Y = Tensor("y", TensorKind.ACTIVATION, 1000, 2)


def gemm(op_id: int, *deps: int) -> GemmOp:
    """A placeholder array op: its timing comes from the hand-made costs only."""
    return GemmOp(
        op_id=op_id,
        name=f"g{op_id}",
        layer="l",
        phase=Phase.FWD,
        stage=Stage.FORWARD,
        m=1,
        n=1,
        k=1,
        count=1,
        a=X,
        b=W,
        c=Y,
        a_elements=1,
        b_elements=1,
        deps=deps,
    )


def vector(
    op_id: int, *deps: int, elements: int = 1, reads=(), writes=(), phase: Phase = Phase.FWD
) -> VectorOp:
    return VectorOp(
        op_id=op_id,
        name=f"v{op_id}",
        layer="l",
        phase=phase,
        stage=STAGE_OF_PHASE[phase],
        elements=elements,
        ops_per_element=1,
        reads=tuple(reads),
        writes=tuple(writes),
        deps=deps,
    )


def costs(units: list[int], **fields: list[int]) -> OpCosts:
    """OpCosts of ``len(units)`` ops: every count 0 and 1 chunk unless given.

    ``reads`` and ``writes`` set the DRAM ifmap read and ofmap write bytes.
    """
    n = len(units)
    rename = {"compute": "compute_cycles", "reads": "dram_ifmap_read_bytes"}
    rename["writes"] = "dram_ofmap_write_bytes"
    z: dict[str, Any] = {
        name: np.zeros(n, np.int64)
        for name, f in OpCosts.__dataclass_fields__.items()
        if f.type == "np.ndarray"
    }
    z["mapping_efficiency"] = np.ones(n, np.float64)
    z["unit"] = np.array(units, np.int64)
    z["chunks"] = np.ones(n, np.int64)
    for key, values in fields.items():
        z[rename.get(key, key)] = np.array(values, np.int64)
    return OpCosts(**z)


def timings(trace: Trace) -> tuple[list[int], list[int], list[int], int]:
    return (
        trace.start_cycle.tolist(),
        trace.end_cycle.tolist(),
        trace.stall_cycles.tolist(),
        trace.total_cycles,
    )


# -- one processor ------------------------------------------------------------------------


def test_same_unit_runs_the_longest_path_first() -> None:
    # Two independent array ops on processor 0; DRAM 128 B/cycle, latency 100.
    # op1 (own estimate max(100, 1280 / 128) = 100 cycles) goes before op0 (50),
    # though listed second.
    # op1 reads 1280 B (1 chunk: all of it is prologue): DRAM 0..10, arrives 110;
    #   compute 100 -> end 210, stall 210 - 100 = 110.
    # op0 (no traffic) waits for the array: start 210, end 210 + 50 = 260, stall 0.
    graph = OpGraph(ops=(gemm(0), gemm(1)), processor=(0, 0))
    c = costs([UNIT_ARRAY, UNIT_ARRAY], compute=[50, 100], reads=[0, 1280])
    assert timings(simulate(graph, c, machine())) == ([210, 0], [260, 210], [0, 110], 260)


def test_priority_overrides_the_path() -> None:
    # op0 has the longer path (100 cycles against 50), but op1 the lower priority
    # value, so the array takes op1 first:
    # op1 0..50; op0 starts at 50, its 1280 B take DRAM 50..60, arrive 160, end 260.
    graph = OpGraph(ops=(gemm(0), gemm(1)), processor=(0, 0), priority=(1, 0))
    c = costs([UNIT_ARRAY, UNIT_ARRAY], compute=[100, 50], reads=[1280, 0])
    assert timings(simulate(graph, c, machine())) == ([50, 0], [260, 50], [110, 0], 260)


def test_array_and_vector_overlap() -> None:
    # No traffic: the array op (100 cycles) and the vector op (60) both start at 0.
    graph = OpGraph(ops=(gemm(0), vector(1)), processor=(0, 0))
    c = costs([UNIT_ARRAY, UNIT_VECTOR], compute=[100, 60])
    assert timings(simulate(graph, c, machine())) == ([0, 0], [100, 60], [0, 0], 100)


def test_array_and_vector_overlap_but_share_dram() -> None:
    # Both read 1280 B at cycle 0; the array asked first (its unit is started first).
    # op0: DRAM 0..10, arrives 110, compute 100 -> end 210, stall 110.
    # op1: DRAM 10..20 (behind op0), arrives 120, compute 60 -> end 180, stall 120.
    graph = OpGraph(ops=(gemm(0), vector(1)), processor=(0, 0))
    c = costs([UNIT_ARRAY, UNIT_VECTOR], compute=[100, 60], reads=[1280, 1280])
    assert timings(simulate(graph, c, machine())) == ([0, 0], [210, 180], [110, 120], 210)


def test_dependency_between_units() -> None:
    # op1 (vector, 60 cycles) needs op0 (array, 100): 0..100 then 100..160.
    graph = OpGraph(ops=(gemm(0), vector(1, 0)), processor=(0, 0))
    c = costs([UNIT_ARRAY, UNIT_VECTOR], compute=[100, 60])
    assert timings(simulate(graph, c, machine())) == ([0, 100], [100, 160], [0, 0], 160)


def test_dependency_waits_for_the_producers_writes() -> None:
    # op0 computes 0..100 then writes 1280 B (all epilogue): DRAM 100..110,
    # arrives 210, so op0 ends at 210 (stall 110) and op1 starts only then.
    graph = OpGraph(ops=(gemm(0), vector(1, 0)), processor=(0, 0))
    c = costs(
        [UNIT_ARRAY, UNIT_VECTOR], compute=[100, 60], writes=[1280, 0], epilogue_bytes=[1280, 0]
    )
    assert timings(simulate(graph, c, machine())) == ([0, 210], [210, 270], [110, 0], 270)


def test_vector_op_reads_computes_and_writes() -> None:
    # A vector op costed as costs.py documents: 1000 elements x 3 ops on 128 lanes
    # is ceil(3000 / 128) = 24 cycles in 1 chunk; it reads x (1000 x 2 B = 2000 B,
    # all prologue) and writes y (2000 B, all epilogue) unless y stays on chip.
    # Read: DRAM 0..16 (ceil(2000/128) = 16), arrives 116; compute 116..140;
    # write: DRAM 140..156, arrives 256.  Stall 256 - 24 = 232.
    # With y on chip there is no write: end 140, stall 116.
    op = VectorOp(
        op_id=0,
        name="v",
        layer="l",
        phase=Phase.FWD,
        stage=Stage.FORWARD,
        elements=1000,
        ops_per_element=3,
        reads=(Access(X, 1000),),
        writes=(Access(Y, 1000),),
        deps=(),
    )
    for written, end in ((2000, 256), (0, 140)):
        graph = OpGraph(ops=(op,), processor=(0,))
        c = costs(
            [UNIT_VECTOR],
            compute=[24],
            reads=[2000],
            prologue_bytes=[2000],
            writes=[written],
            epilogue_bytes=[written],
        )
        assert timings(simulate(graph, c, machine())) == ([0], [end], [end - 24], end)


# -- two processors on one DRAM -----------------------------------------------------------


def test_two_processors_queue_on_dram_in_request_order() -> None:
    # Each processor's array op reads 2560 B (20 cycles at 128 B/cycle), computes
    # 100 and writes 1280 B (10 cycles) after compute.  Processor 0 asks first.
    # p0: read 0..20, arrives 120; compute -> 220; write 220..230, arrives 330.
    # p1: read 20..40 (waits for p0's 20 cycles), arrives 140; compute -> 240;
    #     write 240..250, arrives 350.
    # Stalls: 330 - 100 = 230 and 350 - 100 = 250.
    graph = OpGraph(ops=(gemm(0), gemm(1)), processor=(0, 1))
    c = costs(
        [UNIT_ARRAY, UNIT_ARRAY],
        compute=[100, 100],
        reads=[2560, 2560],
        writes=[1280, 1280],
        epilogue_bytes=[1280, 1280],
    )
    trace = simulate(graph, c, machine("processors=2"))
    assert timings(trace) == ([0, 0], [330, 350], [230, 250], 350)
    assert trace.busy_cycles(UNIT_ARRAY).tolist() == [330, 350]


def test_dram_order_is_request_order_not_processor_order() -> None:
    # p0 first computes 5 cycles (op0, no traffic), then op1 (waiting for op0) reads
    # 2560 B; p1's op2 reads 2560 B at cycle 0, so it is served first.
    # op2: DRAM 0..20, arrives 120, compute 100 -> 220, stall 120.
    # op1: starts 5, DRAM max(5, 20) = 20..40, arrives 140, compute -> 240, stall 135.
    graph = OpGraph(ops=(gemm(0), gemm(1, 0), gemm(2)), processor=(0, 0, 1))
    c = costs([UNIT_ARRAY] * 3, compute=[5, 100, 100], reads=[0, 2560, 2560])
    trace = simulate(graph, c, machine("processors=2"))
    assert timings(trace) == ([0, 5, 0], [5, 240, 220], [0, 135, 120], 240)


# -- one DRAM channel per processor (dram.sharing: per_processor) -------------------------

PER_PROCESSOR = "dram.sharing=per_processor"


def test_shared_is_the_default() -> None:
    assert hw().dram.sharing is DramSharing.SHARED
    assert hw(PER_PROCESSOR).dram.sharing is DramSharing.PER_PROCESSOR


@pytest.mark.parametrize(
    ("sharing", "ends"),
    [
        # One channel: p0's 1280 B take DRAM 0..10 (ceil(1280/128) = 10), arrive 110;
        # p1's queue behind, 10..20, arrive 120: 10 cycles later than p0.
        ("shared", [110, 120]),
        # A channel each: both 0..10, both arrive 110.
        ("per_processor", [110, 110]),
    ],
)
def test_two_processors_reading_at_once(sharing: str, ends: list[int]) -> None:
    # Each processor's array op reads 1280 B at cycle 0 and computes nothing, so it
    # ends when its data arrives; stall = the whole duration.
    graph = OpGraph(ops=(gemm(0), gemm(1)), processor=(0, 1))
    c = costs([UNIT_ARRAY, UNIT_ARRAY], compute=[0, 0], reads=[1280, 1280])
    trace = simulate(graph, c, machine("processors=2", f"dram.sharing={sharing}"))
    assert timings(trace) == ([0, 0], ends, ends, max(ends))


def test_per_processor_channel_is_shared_by_the_processors_units() -> None:
    # p0's array op and vector op and p1's array op each read 1280 B at cycle 0
    # (10 cycles of DRAM each) and compute 100.  Requests come in unit order:
    # p0 array, p0 vector, p1 array.
    # per_processor: p0 array 0..10 -> 110, end 210; p0 vector queues behind it on
    #   p0's channel, 10..20 -> 120, end 220; p1 array on its own channel 0..10 -> 110,
    #   end 210.
    # shared: the third request queues behind both, 20..30 -> 130, end 230.
    graph = OpGraph(ops=(gemm(0), vector(1), gemm(2)), processor=(0, 0, 1))
    c = costs([UNIT_ARRAY, UNIT_VECTOR, UNIT_ARRAY], compute=[100, 100, 100], reads=[1280] * 3)
    private = simulate(graph, c, machine("processors=2", PER_PROCESSOR))
    assert timings(private) == ([0, 0, 0], [210, 220, 210], [110, 120, 110], 220)
    shared = simulate(graph, c, machine("processors=2"))
    assert timings(shared) == ([0, 0, 0], [210, 220, 230], [110, 120, 130], 230)


# -- prologue, double-buffered fetches, drains and the epilogue ---------------------------

# One array op: 300 compute cycles in 3 tile groups (100 each); 1000 B read of
# which 100 B are the prologue, so 900 B are fetched as 450 B (for group 1,
# during group 0) and 450 B (for group 2, during group 1); 600 B written of
# which 60 B are the epilogue, so 540 B drain as 180 B behind each group.
CHUNKED = dict(compute=[300], reads=[1000], writes=[600], prologue_bytes=[100], epilogue_bytes=[60])


def test_chunks_overlap_fetch_compute_and_drain() -> None:
    # DRAM 10 B/cycle, latency 5.
    # prologue 100 B: DRAM 0..10, arrives 15 (compute cannot start before).
    # group 0 at 15: fetch 450 B 15..60 (arr. 65); compute 15..115;
    #   drain 180 B 115..133 (arr. 138); fetch already in -> go on at 115.
    # group 1 at 115: fetch 450 B 133..178 (behind the drain; arr. 183); compute -> 215;
    #   drain 180 B 215..233 (arr. 238); fetch in -> 215.
    # group 2 at 215: no fetch; compute -> 315; drain 180 B 315..333 (arr. 338);
    # epilogue 60 B 333..339, arrives 344 = end.  Stall 344 - 300 = 44
    # (15 for the prologue + 18 + 6 + 5 to drain the last group and the epilogue).
    graph = OpGraph(ops=(gemm(0),), processor=(0,))
    c = costs([UNIT_ARRAY], chunks=[3], **CHUNKED)
    spec = hw("dram.bandwidth_bytes_per_cycle=10", "dram.latency_cycles=5")
    assert timings(simulate(graph, c, Machine.of(spec))) == ([0], [344], [44], 344)


def test_slow_dram_stalls_the_array() -> None:
    # DRAM 1 B/cycle, latency 0: the op is DRAM-bound.
    # prologue 100 B: 0..100.
    # group 0 at 100: fetch 450 B 100..550; compute -> 200; drain 180 B queued behind
    #   the fetch, 550..730; the array waits for the fetch until 550 (stall).
    # group 1 at 550: fetch 450 B 730..1180; compute -> 650; drain 180 B 1180..1360;
    #   waits for the fetch until 1180.
    # group 2 at 1180: compute -> 1280; drain 180 B 1360..1540; epilogue 60 B 1540..1600.
    # End 1600 = all 1600 B at 1 B/cycle back to back; stall 1600 - 300 = 1300.
    graph = OpGraph(ops=(gemm(0),), processor=(0,))
    c = costs([UNIT_ARRAY], chunks=[3], **CHUNKED)
    spec = hw("dram.bandwidth_bytes_per_cycle=1", "dram.latency_cycles=0")
    assert timings(simulate(graph, c, Machine.of(spec))) == ([0], [1600], [1300], 1600)


def test_one_chunk_reads_everything_before_compute() -> None:
    # Same op in 1 chunk, DRAM 10 B/cycle, latency 5: the prologue is all 1000 B
    # (0..100, arrives 105), compute 105..405, then 540 B drain 405..459 and the
    # 60 B epilogue 459..465, arriving 470.  Stall 470 - 300 = 170.
    graph = OpGraph(ops=(gemm(0),), processor=(0,))
    c = costs([UNIT_ARRAY], chunks=[1], **CHUNKED)
    spec = hw("dram.bandwidth_bytes_per_cycle=10", "dram.latency_cycles=5")
    assert timings(simulate(graph, c, Machine.of(spec))) == ([0], [470], [170], 470)


# -- interconnect -------------------------------------------------------------------------


def test_point_to_point_transfer_feeds_the_other_processor() -> None:
    # op0: array on p0, 100 cycles.  op1: copy 1000 x 2 B = 2000 B from p0 to p1
    # over p0's link (64 B/cycle, latency 200): ceil(2000 / 64) = 32 cycles,
    # 100..132, arrives 332.  op2: vector on p1, 10 cycles, 332..342.
    transfer = TransferOp(
        op_id=1,
        name="y.to_p1",
        layer="l",
        phase=Phase.FWD,
        stage=Stage.FORWARD,
        tensor=Y,
        elements=1000,
        source=0,
        destination=1,
        deps=(0,),
    )
    graph = OpGraph(ops=(gemm(0), transfer, vector(2, 1)), processor=(0, 0, 1))
    c = costs([UNIT_ARRAY, UNIT_COMM, UNIT_VECTOR], compute=[100, 0, 10])
    trace = simulate(graph, c, machine("processors=2"))
    assert timings(trace) == ([0, 100, 332], [100, 332, 342], [0, 0, 0], 342)


def allreduce(participants: tuple[int, ...]) -> OpGraph:
    grad = Tensor("dw", TensorKind.GRADIENT, 1001, 2)  # 2002 B
    op = CommOp(
        op_id=0,
        name="allreduce",
        layer="l",
        phase=Phase.COMM,
        stage=Stage.COMMUNICATION,
        tensor=grad,
        participants=participants,
        deps=(),
    )
    return OpGraph(ops=(op,), processor=(0,))


@pytest.mark.parametrize(
    ("processors", "end"),
    [
        # P = 2: DRAM reads 2 x ceil(2002/128) = 2 x 16 cycles, 0..32, arrive 132;
        # 2(P-1) = 2 link steps of ceil(2002/2) = 1001 B: ceil(1001/64) = 16 + 200 = 216
        # each, 132 -> 564; DRAM writes 564..596, arrive 696.
        (2, 696),
        # P = 3: reads 3 x 16 = 0..48, arrive 148; 4 steps of ceil(2002/3) = 668 B:
        # ceil(668/64) = 11 + 200 = 211 each, 148 -> 992; writes 992..1040, arrive 1140.
        (3, 1140),
    ],
)
def test_ring_allreduce(processors: int, end: int) -> None:
    graph = allreduce(tuple(range(processors)))
    trace = simulate(graph, costs([UNIT_COMM]), machine(f"processors={processors}"))
    # Communication ops have no compute: their whole duration is communication.
    assert timings(trace) == ([0], [end], [0], end)


@pytest.mark.parametrize(
    ("processors", "end"),
    [
        # P = 2, a DRAM channel each: both participants read their 2002 B at once,
        # ceil(2002/128) = 16 cycles, 0..16, arrive 116; 2 link steps of 216 as above,
        # 116 -> 548; writes 548..564 in parallel, arrive 664 (696 - 2 x 16 shared).
        (2, 664),
        # P = 3: reads 0..16, arrive 116; 4 steps of 211, 116 -> 960; writes
        # 960..976, arrive 1076 (1140 - 2 x 2 x 16 shared).
        (3, 1076),
    ],
)
def test_ring_allreduce_with_a_dram_channel_per_processor(processors: int, end: int) -> None:
    graph = allreduce(tuple(range(processors)))
    spec = hw(f"processors={processors}", PER_PROCESSOR)
    trace = simulate(graph, costs([UNIT_COMM]), Machine.of(spec))
    assert timings(trace) == ([0], [end], [0], end)


def test_allreduce_uses_each_participants_own_channel() -> None:
    # 3 processors, a DRAM channel each.  op0 on p1 reads 2560 B at 0 (DRAM 0..20 on
    # p1's channel, arrives 120, computes 10 -> ends 130).  The all-reduce over
    # (0, 2) has no dependency: its reads go to p0's and p2's channels, 0..16,
    # arrive 116, untouched by p1's traffic; then 2 link steps of 216 -> 548 and
    # writes 548..564 -> 664, as with 2 processors alone.
    comm = CommOp(
        op_id=1,
        name="allreduce",
        layer="l",
        phase=Phase.COMM,
        stage=Stage.COMMUNICATION,
        tensor=Tensor("dw", TensorKind.GRADIENT, 1001, 2),
        participants=(0, 2),
        deps=(),
    )
    graph = OpGraph(ops=(gemm(0), comm), processor=(1, 0))
    c = costs([UNIT_ARRAY, UNIT_COMM], compute=[10, 0], reads=[2560, 0])
    trace = simulate(graph, c, machine("processors=3", PER_PROCESSOR))
    assert timings(trace) == ([0, 0], [130, 664], [120, 0], 664)


def test_allreduce_waits_for_every_participants_gradient() -> None:
    # op0 on p0 (100 cycles) and op1 on p1 (250 cycles) produce the gradient; the
    # 2-way all-reduce starts at 250 and takes 696 cycles as above: ends 946.
    grad = Tensor("dw", TensorKind.GRADIENT, 1001, 2)
    comm = CommOp(
        op_id=2,
        name="allreduce",
        layer="l",
        phase=Phase.COMM,
        stage=Stage.COMMUNICATION,
        tensor=grad,
        participants=(0, 1),
        deps=(0, 1),
    )
    graph = OpGraph(ops=(gemm(0), gemm(1), comm), processor=(0, 1, 0))
    c = costs(
        [UNIT_ARRAY, UNIT_ARRAY, UNIT_COMM],
        compute=[100, 250, 0],
        reads=[0, 0, 2 * 2002],
        writes=[0, 0, 2 * 2002],
    )
    trace = simulate(graph, c, machine("processors=2"))
    assert timings(trace) == ([0, 0, 250], [100, 250, 946], [0, 0, 0], 946)


# -- the channel alone --------------------------------------------------------------------


def arrivals(
    env: simpy.Environment, channel: MemoryState, requests: list[tuple[int, int]]
) -> list[int]:
    """Arrival cycle of each ``(request cycle, bytes)`` transfer on ``channel``."""
    times = [-1] * len(requests)

    def request(i: int, at: int, n_bytes: int):
        yield env.timeout(at)
        yield transfer(env, channel, n_bytes, DEFAULT_STREAM)
        times[i] = int(env.now)

    for i, (at, n_bytes) in enumerate(requests):
        env.process(request(i, at, n_bytes))
    env.run()
    return times


def test_channel_back_to_back() -> None:
    # 10 B/cycle, latency 5.  At 0: 100 B busy 0..10, arrives 15; 50 B queued
    # behind it, 10..15, arrives 20.  At 100 (idle again): 10 B 100..101, arrives 106.
    env = simpy.Environment()
    channel = fifo(10, 5)
    assert arrivals(env, channel, [(0, 100), (0, 50), (100, 10)]) == [15, 20, 106]
    assert channel.state[0] == 101


def test_channel_latency_is_pipelined() -> None:
    # The latency does not hold the channel: a 1 B transfer requested at 12 by a
    # channel busy until 10 starts at once, even though the earlier data is still
    # in flight until 30.  10 B/cycle, latency 20: 100 B 0..10 -> 30; 1 B 12..13 -> 33.
    env = simpy.Environment()
    channel = fifo(10, 20)
    assert arrivals(env, channel, [(0, 100), (12, 1)]) == [30, 33]


def test_channel_with_infinite_bandwidth_costs_only_latency() -> None:
    env = simpy.Environment()
    channel = fifo(math.inf, 7)
    assert arrivals(env, channel, [(0, 10**12), (0, 1), (3, 10**9)]) == [7, 7, 10]
    assert channel.state[0] == 3  # never busy: free from the last request on


def test_channel_rounds_busy_cycles_up() -> None:
    # 64 B/cycle, latency 0: 2000 B -> ceil(31.25) = 32; 1 B -> 1; 64 B -> 1;
    # 65 B -> 2; all back to back from 0: 32, 33, 34, 36.
    env = simpy.Environment()
    channel = fifo(64, 0)
    assert arrivals(env, channel, [(0, 2000), (0, 1), (0, 64), (0, 65)]) == [32, 33, 34, 36]
    # Fractional bandwidths: 3 B at 0.5 B/cycle take 6 cycles; 1 B at 1.5 takes
    # ceil(0.67) = 1 and 4 B ceil(2.67) = 3.
    for bandwidth, n_bytes, cycles in ((0.5, 3, 6), (1.5, 1, 1), (1.5, 4, 3)):
        env = simpy.Environment()
        assert arrivals(env, fifo(bandwidth, 0), [(0, n_bytes)]) == [cycles]
