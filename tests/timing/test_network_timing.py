"""An all-reduce on a topology other than a ring, in both engines: its DRAM phases as
on the ring, its network phase the cycles of its algorithm's schedule
(:mod:`accelsim.network.cost`), booking no link."""

from __future__ import annotations

from accelsim.timing.costs import UNIT_COMM
from accelsim.timing.engine import simulate
from accelsim.timing.machine import Machine
from tests.timing.test_compiled import run_compiled
from tests.timing.test_engine import allreduce, costs, hw, timings

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
