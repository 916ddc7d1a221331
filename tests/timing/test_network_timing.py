"""All-reduces and transfers on the network's links, in both engines: each lowered to
its algorithm's steps of sends (:mod:`accelsim.timing.sends`), every transfer booked
on each link of its route, so concurrent collectives and transfers contend.

Unless a test says otherwise the DRAM is ideal (no bandwidth limit, no latency), so
an all-reduce's read and write phases take no cycles and its time is its network's.
"""

from __future__ import annotations

from accelsim.config.interconnect import Algorithm
from accelsim.graph.ops import CommOp, OpGraph, Phase, Stage, Tensor, TensorKind, TransferOp
from accelsim.network.collectives import Collective
from accelsim.network.cost import bandwidth_bound, concurrent_cycles, plan, schedule_cycles
from accelsim.timing.costs import UNIT_ARRAY, UNIT_COMM, UNIT_VECTOR, OpCosts
from accelsim.timing.engine import simulate
from accelsim.timing.machine import Machine
from accelsim.timing.send_table import send_table
from accelsim.timing.sends import Send, lowered
from tests.timing.test_compiled import run_compiled
from tests.timing.test_engine import Y, allreduce, costs, gemm, hw, timings, vector

TORUS = ["processors=4", "interconnect.topology=torus", "interconnect.dims=[2, 2]"]
IDEAL_DRAM = ["dram.bandwidth_bytes_per_cycle=.inf", "dram.latency_cycles=0"]
NO_LATENCY = ["interconnect.latency_cycles=0"]


def comm(op_id: int, participants: tuple[int, ...], size_bytes: int) -> CommOp:
    grad = Tensor(f"dw{op_id}", TensorKind.GRADIENT, size_bytes // 2, 2)
    return CommOp(op_id, f"ar{op_id}", "l", Phase.COMM, Stage.COMMUNICATION, grad, participants, ())


def both(graph: OpGraph, c: OpCosts, on: Machine) -> tuple[list[int], list[int], list[int], int]:
    """The timings of ``graph``, the same in both engines (events included)."""
    a, b = simulate(graph, c, on), run_compiled(graph, c, on)
    assert a.events == b.events
    assert timings(a) == timings(b)
    return timings(a)


def closed_form(on: Machine, group: tuple[int, ...], size_bytes: int, algorithm: Algorithm) -> int:
    schedule = plan(on.network, Collective.ALL_REDUCE, group, size_bytes, algorithm)
    return schedule_cycles(on.network, schedule)


def test_a_torus_all_reduce_takes_its_schedules_cycles_in_both_engines() -> None:
    # 2002 B on each of 4 processors sharing one DRAM channel of 128 B/cycle + 100:
    # reads 4 x 16 cycles, 0..64, arrive 164.  multi_dim on the 2x2 torus of 64 B/cycle
    # + 200 links: 1001 B along dimension 0 (16 + 200), then 501 along dimension 1
    # (8 + 200), and back: 848, 164 -> 1012.  Writes 1012..1076, arrive 1176.
    on = Machine.of(hw(*TORUS, "interconnect.algorithm=multi_dim"))
    assert closed_form(on, (0, 1, 2, 3), 2002, Algorithm.MULTI_DIM) == 2 * (216 + 208)
    assert both(allreduce((0, 1, 2, 3)), costs([UNIT_COMM]), on) == ([0], [1176], [0], 1176)


def test_all_reduces_on_groups_sharing_no_link_run_side_by_side() -> None:
    # A ring all-reduce of 2048 B on (0, 1) and one on (2, 3) of the 2x2 torus: two
    # steps of 1024 B each way along dimension 0, 16 + 200 cycles, on links of their
    # own: each takes its closed form, 432, at once.
    on = Machine.of(hw(*TORUS, *IDEAL_DRAM, "interconnect.algorithm=ring"))
    assert closed_form(on, (0, 1), 2048, Algorithm.RING) == 2 * (16 + 200) == 432
    graph = OpGraph(ops=(comm(0, (0, 1), 2048), comm(1, (2, 3), 2048)), processor=(0, 2))
    assert both(graph, costs([UNIT_COMM, UNIT_COMM]), on) == ([0, 0], [432, 432], [0, 0], 432)


def test_all_reduces_sharing_links_take_the_time_of_the_links_bytes() -> None:
    # Two ring all-reduces of 2048 B on the same pair, links without latency: each step
    # puts 1024 B of each on the link each way, 16 cycles each.  The first's sends go
    # first: its step 1 ends at 16, the second's at 32; its step 2 waits for the link
    # (32..48), the second's follows (48..64).  64 cycles: the links' 4 x 1024 B at 64
    # B/cycle, their bound, as the two schedules' steps taken together.
    on = Machine.of(hw(*TORUS, *IDEAL_DRAM, *NO_LATENCY, "interconnect.algorithm=ring"))
    graph = OpGraph(ops=(comm(0, (0, 1), 2048), comm(1, (0, 1), 2048)), processor=(0, 0))
    assert both(graph, costs([UNIT_COMM, UNIT_COMM]), on) == ([0, 0], [48, 64], [0, 0], 64)
    pair = plan(on.network, Collective.ALL_REDUCE, (0, 1), 2048, Algorithm.RING)
    assert concurrent_cycles(on.network, (pair, pair)) == 64
    assert bandwidth_bound(on.network, (pair, pair)) == 64


def test_a_transfer_on_a_shared_link_delays_an_all_reduce_by_its_bytes() -> None:
    # A transfer of 6400 B from 0 to 1 (its estimate, 100 cycles, ranks it first) holds
    # the link 0 -> 1 of the 2x2 torus 0..100; the ring all-reduce of 2048 B on (0, 1)
    # started with it sends its first 1024 B on that link after it (100..116; the way
    # back 0..16), its second step 116..132: 100 cycles later than alone (32).
    on = Machine.of(hw(*TORUS, *IDEAL_DRAM, *NO_LATENCY, "interconnect.algorithm=ring"))
    send = TransferOp(1, "y.to_p1", "l", Phase.FWD, Stage.FORWARD, Y, 3200, 0, 1, ())
    alone = OpGraph(ops=(comm(0, (0, 1), 2048),), processor=(0,))
    assert both(alone, costs([UNIT_COMM]), on) == ([0], [32], [0], 32)
    graph = OpGraph(ops=(comm(0, (0, 1), 2048), send), processor=(0, 0))
    assert both(graph, costs([UNIT_COMM, UNIT_COMM]), on) == ([0, 0], [132, 100], [0, 0], 132)


def test_a_switch_all_reduce_queues_each_port_and_equals_its_closed_form() -> None:
    # 4 processors on a switch, direct: each step every processor sends 1024 B to each
    # other, so its port in and every port out carry 3 x 1024 B, 48 cycles, behind one
    # latency of 200: 248 a step, 496 in all, the closed form.
    sets = ["processors=4", "interconnect.topology=switch", "interconnect.algorithm=direct"]
    on = Machine.of(hw(*sets, *IDEAL_DRAM))
    assert closed_form(on, (0, 1, 2, 3), 4096, Algorithm.DIRECT) == 2 * (48 + 200)
    graph = OpGraph(ops=(comm(0, (0, 1, 2, 3), 4096),), processor=(0,))
    assert both(graph, costs([UNIT_COMM]), on) == ([0], [496], [0], 496)


HIERARCHY = [
    "processors=4",
    "interconnect.topology=switch",
    "interconnect.levels=[{topology: switch, dims: [2], bandwidth_bytes_per_cycle: 8,"
    " latency_cycles: 500}]",
]


def test_a_hierarchy_all_reduce_takes_its_levels_phases() -> None:
    # 2 chips on a switch (64 B/cycle, 200 cycles), 2 nodes on a fabric (8 B/cycle, 500):
    # multi_dim sends 1024 B each way in the node (16 + 200), then 512 B each way across
    # (64 + 500), and back: 2 x (216 + 564) = 1560, the closed form.
    on = Machine.of(hw(*HIERARCHY, *IDEAL_DRAM, "interconnect.algorithm=multi_dim"))
    assert closed_form(on, (0, 1, 2, 3), 2048, Algorithm.MULTI_DIM) == 1560
    graph = OpGraph(ops=(comm(0, (0, 1, 2, 3), 2048),), processor=(0,))
    assert both(graph, costs([UNIT_COMM]), on) == ([0], [1560], [0], 1560)


def test_a_transfer_across_a_hierarchy_streams_along_its_route_in_both_engines() -> None:
    # 2000 B from processor 0 to 3 go 0 -> 1 through the node's switch, then 1 -> 3
    # through the fabric's: four links booked at once (32 cycles on the node's, 250 on
    # the fabric's), arriving 200 + 500 latency after the last is done: 950 (cut-through:
    # the bytes' time once, at the slowest link).
    # op0 on p0 computes 0..100; the transfer 100..1050; op2 on p3 1050..1060.
    on = Machine.of(hw(*HIERARCHY))
    (step,) = lowered(on, TransferOp(0, "t", "l", Phase.FWD, Stage.FORWARD, Y, 1000, 0, 3, ()))
    assert [(s.bytes, s.latency_cycles) for s in step] == [(2000, 700)] * 4
    assert [on.links[s.link].read_bytes_per_cycle for s in step] == [64, 64, 8, 8]
    transfer = TransferOp(1, "y.to_p3", "l", Phase.FWD, Stage.FORWARD, Y, 1000, 0, 3, deps=(0,))
    graph = OpGraph(ops=(gemm(0), transfer, vector(2, 1)), processor=(0, 0, 3))
    c = costs([UNIT_ARRAY, UNIT_COMM, UNIT_VECTOR], compute=[100, 0, 10])
    assert both(graph, c, on) == ([0, 100, 1050], [100, 1050, 1060], [0, 0, 0], 1060)


def test_the_ring_books_each_participants_own_link() -> None:
    # On a ring an all-reduce is the ring algorithm on its participants' own outgoing
    # links (link p is processor p's), whatever the algorithm named: 2 x (2 - 1) steps
    # of ceil(2002 / 2) B on links 0 and 2, even though 0 -> 2 is two hops.
    on = Machine.of(hw("processors=4", "interconnect.algorithm=direct"))
    assert [(k.source, k.destination) for k in on.network.links()] == [
        (0, 1),
        (1, 2),
        (2, 3),
        (3, 0),
    ]
    step = (Send(0, 1001, 200), Send(2, 1001, 200))
    assert lowered(on, comm(0, (0, 2), 2002)) == (step, step)
    send = TransferOp(0, "t", "l", Phase.FWD, Stage.FORWARD, Y, 250, 3, 1, ())
    assert lowered(on, send) == ((Send(3, 500, 200),),)


def test_a_group_that_cannot_run_the_named_algorithm_takes_the_fastest() -> None:
    sets = ["processors=3", "interconnect.topology=torus", "interconnect.dims=[3]", *IDEAL_DRAM]
    named = Machine.of(hw(*sets, "interconnect.algorithm=halving_doubling"))
    fastest = Machine.of(hw(*sets))
    op = comm(0, (0, 1, 2), 2002)
    assert lowered(named, op) == lowered(fastest, op)
    # Three processors both ways round a ring of 64 B/cycle: direct sends 668 B to each
    # neighbour on its own link, twice: 2 x (ceil(668 / 64) + 200) = 422.
    graph = OpGraph(ops=(op,), processor=(0,))
    assert both(graph, costs([UNIT_COMM]), named) == ([0], [422], [0], 422)


def test_the_send_table_stores_a_repeated_step_once_and_is_made_once_per_network() -> None:
    # A ring all-reduce on 4 processors: 6 steps, one step object, 4 sends.
    on = Machine.of(hw("processors=4"))
    graph = OpGraph(ops=(gemm(0), comm(1, (0, 1, 2, 3), 4000)), processor=(0, 0))
    table = send_table(graph, on)
    assert (table.op_ptr.tolist(), table.steps.tolist()) == ([0, 0, 6], [0] * 6)
    assert (table.link.tolist(), table.bytes.tolist()) == ([0, 1, 2, 3], [1000] * 4)
    assert table.step_ptr.tolist() == [0, 4]
    # Another DRAM, the same network: the same table object.
    assert send_table(graph, Machine.of(hw("processors=4", "dram.latency_cycles=7"))) is table
    assert send_table(graph, Machine.of(hw("processors=4", *NO_LATENCY))) is not table


def test_a_processor_sends_over_all_its_links_at_once_at_best() -> None:
    # A ring: one link of 64 B/cycle.  A 2x2 torus: one link each way per dimension,
    # two of 64 out.  A 4x4 torus: four.
    assert Machine.of(hw("processors=4")).link_bound(1280) == 20
    assert Machine.of(hw(*TORUS)).link_bound(1280) == 10
    sets = ["processors=16", "interconnect.topology=torus", "interconnect.dims=[4, 4]"]
    assert Machine.of(hw(*sets)).link_bound(1280) == 5


def test_one_processor_on_a_torus_sends_nothing_and_is_bound_by_nothing() -> None:
    on = Machine.of(hw("interconnect.topology=torus"))
    assert on.network.processors == 1
    assert on.links == ()
    assert on.link_bound(0) == 0.0
