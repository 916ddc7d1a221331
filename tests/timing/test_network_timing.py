"""An all-reduce on a topology other than a ring, in both engines: its DRAM phases as
on the ring, its network phase the cycles of its algorithm's schedule
(:mod:`accelsim.network.cost`), booking no link."""

from __future__ import annotations

from accelsim.graph.ops import OpGraph, Phase, Stage, TransferOp
from accelsim.timing.costs import UNIT_ARRAY, UNIT_COMM, UNIT_VECTOR
from accelsim.timing.engine import simulate
from accelsim.timing.machine import Machine
from tests.timing.test_compiled import run_compiled
from tests.timing.test_engine import Y, allreduce, costs, gemm, hw, timings, vector

TORUS = ["processors=4", "interconnect.topology=torus", "interconnect.dims=[2, 2]"]


def test_a_torus_all_reduce_takes_its_schedules_cycles_in_both_engines() -> None:
    # 2002 B on each of 4 processors sharing one DRAM channel of 128 B/cycle + 100:
    # reads 4 x 16 cycles, 0..64, arrive 164.  multi_dim on the 2x2 torus of 64 B/cycle
    # + 200 links: 1001 B along dimension 0 (16 + 200), then 501 along dimension 1
    # (8 + 200), and back: 848, 164 -> 1012.  Writes 1012..1076, arrive 1176.
    on = Machine.of(hw(*TORUS, "interconnect.algorithm=multi_dim"))
    assert on.all_reduce_cycles((0, 1, 2, 3), 2002) == 2 * (216 + 208)
    graph, c = allreduce((0, 1, 2, 3)), costs([UNIT_COMM])
    assert timings(simulate(graph, c, on)) == ([0], [1176], [0], 1176)
    assert timings(run_compiled(graph, c, on)) == ([0], [1176], [0], 1176)


def test_the_ring_keeps_its_own_all_reduce() -> None:
    assert Machine.of(hw("processors=4")).all_reduce_cycles((0, 1, 2, 3), 2002) == -1


def test_a_group_that_cannot_run_the_named_algorithm_takes_the_fastest() -> None:
    sets = ["processors=3", "interconnect.topology=torus", "interconnect.dims=[3]"]
    named = Machine.of(hw(*sets, "interconnect.algorithm=halving_doubling"))
    fastest = Machine.of(hw(*sets))
    assert named.all_reduce_cycles((0, 1, 2), 2002) == fastest.all_reduce_cycles((0, 1, 2), 2002)
    # Three processors both ways round a ring of 64 B/cycle: direct sends 668 B to each
    # neighbour on its own link, twice: 2 x (ceil(668 / 64) + 200) = 422.
    assert fastest.all_reduce_cycles((0, 1, 2), 2002) == 422


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
    assert on.link_bound(0) == 0.0


def test_a_transfer_across_a_hierarchy_takes_its_routes_cycles_in_both_engines() -> None:
    # 2 chips on a switch (64 B/cycle, 200 cycles), 2 nodes on a fabric (8 B/cycle,
    # 500): 2000 B from processor 0 to 3 go 0 -> 1 in the node, then 1 -> 3 across,
    # 200 + 500 latency and ceil(2000 / 8) = 250 at the fabric's bandwidth: 950.
    # op0 on p0 computes 0..100; the transfer 100..1050; op2 on p3 1050..1060.
    sets = [
        "processors=4",
        "interconnect.topology=switch",
        "interconnect.levels=[{topology: switch, dims: [2], bandwidth_bytes_per_cycle: 8,"
        " latency_cycles: 500}]",
    ]
    on = Machine.of(hw(*sets))
    assert on.transfer_cycles(0, 3, 2000) == 950
    transfer = TransferOp(1, "y.to_p3", "l", Phase.FWD, Stage.FORWARD, Y, 1000, 0, 3, deps=(0,))
    graph = OpGraph(ops=(gemm(0), transfer, vector(2, 1)), processor=(0, 0, 3))
    c = costs([UNIT_ARRAY, UNIT_COMM, UNIT_VECTOR], compute=[100, 0, 10])
    expected = ([0, 100, 1050], [100, 1050, 1060], [0, 0, 0], 1060)
    assert timings(simulate(graph, c, on)) == expected
    assert timings(run_compiled(graph, c, on)) == expected
