"""Every kind of collective as an op, in both engines: each lowered by its kind's
schedule on the links (:mod:`accelsim.timing.sends`), its DRAM reads and writes its
kind's (:func:`accelsim.network.collectives.dram_bytes`), timed by hand and against
the closed forms.

Links carry 64 B/cycle.  Unless a test says otherwise the DRAM is ideal (its phases
take no cycles) and the links have no latency, so a collective's time is its
bandwidth term: a ring reduce-scatter or all-gather of ``S`` bytes on ``n``
processors ``(n - 1)/n * S / B``, an all-reduce twice that.
"""

from __future__ import annotations

import math

import pytest

from accelsim.config.base import Convention
from accelsim.config.enums import PsumPolicy
from accelsim.config.hardware import WordBytesSpec
from accelsim.config.interconnect import Algorithm
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import CommOp, OpGraph, Phase, Stage, Tensor, TensorKind
from accelsim.mapping.schedule import schedule
from accelsim.network.collectives import Collective
from accelsim.network.cost import plan, schedule_cycles
from accelsim.timing.costs import UNIT_COMM, op_costs
from accelsim.timing.machine import Machine, machine_of
from accelsim.timing.sends import dram_of, link_loads
from tests.timing.test_engine import costs, hw
from tests.timing.test_network_timing import IDEAL_DRAM, NO_LATENCY, both

AR, AG, RS = Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER
A2A, BC = Collective.ALL_TO_ALL, Collective.BROADCAST
RING, DIRECT, HD = Algorithm.RING, Algorithm.DIRECT, Algorithm.HALVING_DOUBLING
S = 6144  # divides by 2, 3, 4 and 8 into whole cycles of 64 B
B = 64


def collective(
    op_id: int,
    kind: Collective,
    participants: tuple[int, ...],
    size_bytes: int,
    root: int | None = None,
    deps: tuple[int, ...] = (),
) -> CommOp:
    tensor = Tensor(f"b{op_id}", TensorKind.GRADIENT, size_bytes // 2, 2)
    return CommOp(
        op_id, f"c{op_id}", "l", Phase.COMM, Stage.COMMUNICATION, tensor, participants, deps,
        collective=kind, root=root,
    )  # fmt: skip


def run_alone(on: Machine, kind: Collective, n: int, size: int, root: int | None = None) -> int:
    """The cycles of one ``kind`` collective of ``size`` bytes on processors
    ``0..n-1``, the same in both engines."""
    graph = OpGraph(ops=(collective(0, kind, tuple(range(n)), size, root),), processor=(0,))
    _, end, _, total = both(graph, costs([UNIT_COMM]), on)
    assert end == [total]
    return total


def bandwidth_term(kind: Collective, algorithm: Algorithm, n: int) -> int:
    """The cycles of ``kind`` of ``S`` bytes on ``n`` processors by ``algorithm``, each
    processor sending on its own link or switch port (no latency), by hand."""
    c = S // n
    if kind in (RS, AG):
        return (n - 1) * c // B  # ring n - 1 pieces; direct n - 1 at once; halving n/2 + ... + 1
    if kind is AR:
        return 2 * (n - 1) * c // B
    if kind is A2A:
        # ring: step k passes (n - k) pieces on; direct: n - 1 pieces out of each port
        return (n * (n - 1) // 2 if algorithm is RING else n - 1) * c // B
    # A broadcast: a ring passes the buffer n - 1 hops; direct sends it n - 1 times
    # from the root's port; a binomial tree log2 n rounds.
    return (int(math.log2(n)) if algorithm is HD else n - 1) * S // B


RING_CASES = [(kind, n) for kind in (AR, AG, RS, A2A, BC) for n in (2, 3, 4, 8)]


@pytest.mark.parametrize(("kind", "n"), RING_CASES)
def test_each_kind_on_a_ring_takes_its_ring_closed_form(kind: Collective, n: int) -> None:
    # On a ring of one level every kind runs the ring algorithm, one link a processor.
    on = Machine.of(hw(f"processors={n}", *IDEAL_DRAM, *NO_LATENCY))
    expected = bandwidth_term(kind, RING, n)
    assert run_alone(on, kind, n, S) == expected
    assert schedule_cycles(on.network, plan(on.network, kind, tuple(range(n)), S, RING)) == (
        expected
    )


SWITCH_CASES = [
    (kind, algorithm, n)
    for algorithm in (RING, DIRECT, HD)
    for kind in (AR, AG, RS, A2A, BC)
    for n in (2, 3, 4, 8)
    if not (algorithm is HD and (n == 3 or kind is A2A))
]


@pytest.mark.parametrize(("kind", "algorithm", "n"), SWITCH_CASES)
def test_each_kind_and_algorithm_on_a_switch_takes_its_closed_form(
    kind: Collective, algorithm: Algorithm, n: int
) -> None:
    # A switch: each processor's port in and out at 64 B/cycle, no latency.
    sets = [f"processors={n}", "interconnect.topology=switch", *IDEAL_DRAM, *NO_LATENCY]
    on = Machine.of(hw(*sets, f"interconnect.algorithm={algorithm.value}"))
    expected = bandwidth_term(kind, algorithm, n)
    assert run_alone(on, kind, n, S) == expected
    schedule = plan(on.network, kind, tuple(range(n)), S, algorithm)
    assert schedule_cycles(on.network, schedule) == expected


def test_a_double_binary_tree_all_reduce_on_four_by_hand() -> None:
    # Trees over (0, 1, 2, 3) and (3, 2, 1, 0), 3072 B each, on a switch: up, 3 -> 1
    # and 0 -> 2 (48 cycles); 1 -> 0, 2 -> 0 and 2 -> 3, 1 -> 3 (ports of 1 and 2 out,
    # 0 and 3 in, carry 6144 B: 96); down the same: 96 + 48.  3 S / B = 288.
    sets = ["processors=4", "interconnect.topology=switch", *IDEAL_DRAM, *NO_LATENCY]
    on = Machine.of(hw(*sets, "interconnect.algorithm=double_binary_tree"))
    assert run_alone(on, AR, 4, S) == 48 + 96 + 96 + 48 == 3 * S // B


def test_latency_is_paid_once_per_step_on_the_route() -> None:
    # A ring all-gather of 6144 B on 4 processors of a ring with links of 200 cycles:
    # 3 steps of 1536 B, 24 + 200 each.
    on = Machine.of(hw("processors=4", *IDEAL_DRAM))
    assert run_alone(on, AG, 4, S) == 3 * (24 + 200) == 672


TORUS_CASES = [
    # 2x2: along dimension 0 (a ring of two) 1/2 S, then 1/2 of the 3072 left along
    # dimension 1: 48 + 24 cycles each way.
    ("[2, 2]", RS, 48 + 24),
    ("[2, 2]", AG, 24 + 48),
    ("[2, 2]", AR, 2 * (48 + 24)),
    # 2x4: 48 along dimension 0; along dimension 1 (a torus of 4: two rings, one each
    # way, each on half of the 3072 B) 3 steps of 384 B, (4 - 1)/4 x 3072 / (2 x 64) = 18.
    ("[2, 4]", RS, 48 + 18),
    ("[2, 4]", AG, 18 + 48),
    ("[2, 4]", AR, 2 * (48 + 18)),
]


@pytest.mark.parametrize(("dims", "kind", "expected"), TORUS_CASES)
def test_a_multi_dim_collective_on_a_torus_takes_its_per_dimension_terms(
    dims: str, kind: Collective, expected: int
) -> None:
    n = math.prod(int(d) for d in dims.strip("[]").split(","))
    sets = [f"processors={n}", "interconnect.topology=torus", f"interconnect.dims={dims}"]
    on = Machine.of(hw(*sets, *IDEAL_DRAM, *NO_LATENCY, "interconnect.algorithm=multi_dim"))
    assert run_alone(on, kind, n, S) == expected
    schedule = plan(on.network, kind, tuple(range(n)), S, Algorithm.MULTI_DIM)
    assert schedule_cycles(on.network, schedule) == expected


HIERARCHY = [
    "processors=8",
    "interconnect.topology=switch",
    "interconnect.dims=[4]",
    "interconnect.levels=[{topology: switch, dims: [2], bandwidth_bytes_per_cycle: 8,"
    " latency_cycles: 0}]",
    "interconnect.algorithm=multi_dim",
]


@pytest.mark.parametrize(("kind", "expected"), [(RS, 72 + 96), (AG, 96 + 72), (AR, 336)])
def test_a_multi_dim_collective_on_a_hierarchy_takes_each_levels_term(
    kind: Collective, expected: int
) -> None:
    # 4 chips on a switch (64 B/cycle), 2 nodes on a fabric (8 B/cycle): in the node
    # each sends 3 pieces of 1536 B (72 cycles), across 1536 / 2 = 768 B (96).
    on = Machine.of(hw(*HIERARCHY, *IDEAL_DRAM, *NO_LATENCY))
    assert run_alone(on, kind, 8, S) == expected


DRAM_CASES = [
    # (kind, root, each participant's (read, write) bytes)
    (AR, None, [(S, S)] * 4),
    (AG, None, [(1536, S)] * 4),
    (RS, None, [(S, 1536)] * 4),
    (A2A, None, [(S, S)] * 4),
    (BC, 2, [(0, S), (0, S), (S, 0), (0, S)]),
]


@pytest.mark.parametrize(("kind", "root", "moved"), DRAM_CASES)
def test_each_kind_reads_and_writes_its_buffers_in_each_participants_dram(
    kind: Collective, root: int | None, moved: list[tuple[int, int]]
) -> None:
    op = collective(0, kind, (0, 1, 2, 3), S, root)
    assert list(dram_of(op)) == moved
    # Each processor's own DRAM, 128 B/cycle + 100, links without latency: the reads
    # in parallel, the collective, then the writes.
    on = Machine.of(hw("processors=4", "dram.sharing=per_processor", *NO_LATENCY))
    reads = max(math.ceil(r / 128) + 100 for r, _ in moved)
    writes = max(math.ceil(w / 128) + 100 for _, w in moved)
    expected = reads + bandwidth_term(kind, RING, 4) + writes
    assert run_alone(on, kind, 4, S, root) == expected


def test_an_all_gather_by_hand_with_its_dram() -> None:
    # 4 processors, each its own DRAM (128 B/cycle + 100): each reads its 1536 B piece
    # (12 cycles, arrives 112); 3 ring steps of 1536 B (24 each): 184; each writes the
    # gathered 6144 B (48 cycles, arrives 100 later): 332.
    on = Machine.of(hw("processors=4", "dram.sharing=per_processor", *NO_LATENCY))
    assert run_alone(on, AG, 4, S) == 112 + 72 + 148 == 332


def test_a_broadcast_is_sent_from_its_root() -> None:
    # A ring broadcast from 2 on (0, 1, 2, 3) starts at 2: 2 -> 3 -> 0 -> 1, each hop
    # on its sender's link, 96 cycles each.  From 0 the same time on other links.
    on = Machine.of(hw("processors=4", *IDEAL_DRAM, *NO_LATENCY))
    assert run_alone(on, BC, 4, S, root=2) == 3 * 96
    graph = OpGraph(
        ops=(collective(0, BC, (0, 1, 2, 3), S, root=2), collective(1, BC, (0, 1, 2, 3), S)),
        processor=(2, 0),
    )
    # Both broadcasts use every link once a step, offset: 2 -> 3 and 0 -> 1 in step 1
    # share none; in step 2 the first sends 3 -> 0 and the second 1 -> 2; in step 3,
    # 0 -> 1 and 2 -> 3: no link carries both at once, so each takes its 288.
    assert both(graph, costs([UNIT_COMM, UNIT_COMM]), on)[1] == [288, 288]


def test_two_kinds_sharing_a_link_take_the_time_of_its_bytes() -> None:
    # An all-gather and a reduce-scatter of 6144 B on (0, 1) of a 2x2 torus, links
    # without latency: each sends one piece of 3072 B each way (48 cycles).  The
    # all-gather's goes first on each link (0..48), the reduce-scatter's after it
    # (48..96): 96 cycles, the links' 2 x 3072 B at 64 B/cycle.
    sets = ["processors=4", "interconnect.topology=torus", "interconnect.dims=[2, 2]"]
    on = Machine.of(hw(*sets, *IDEAL_DRAM, *NO_LATENCY, "interconnect.algorithm=ring"))
    graph = OpGraph(
        ops=(collective(0, AG, (0, 1), S), collective(1, RS, (0, 1), S)), processor=(0, 0)
    )
    assert both(graph, costs([UNIT_COMM, UNIT_COMM]), on) == ([0, 0], [48, 96], [0, 0], 96)


def test_the_builder_adds_each_kind_and_checks_a_root() -> None:
    b = GraphBuilder(WordBytesSpec())
    t = Tensor("x", TensorKind.ACTIVATION, 8, 2)
    i = b.collective("g", "l", t, (0, 1, 2), (), AG)
    j = b.collective("b", "l", t, (0, 1, 2), (i,), BC, root=1)
    graph = b.build()
    ops = graph.ops
    assert [(o.collective, o.root, o.deps) for o in ops if isinstance(o, CommOp)] == [
        (AG, None, ()),
        (BC, 1, (i,)),
    ]
    assert j == 1
    with pytest.raises(ValueError, match=r"all_gather on \(0, 1\) cannot have root 0"):
        b.collective("x", "l", t, (0, 1), (), AG, root=0)
    with pytest.raises(ValueError, match=r"broadcast on \(0, 1\) cannot have root 5"):
        b.collective("x", "l", t, (0, 1), (), BC, root=5)
    with pytest.raises(ValueError, match="a point-to-point message is a transfer"):
        b.collective("x", "l", t, (0, 1), (), Collective.POINT_TO_POINT)


def test_costs_take_each_kinds_schedule_bytes_and_dram_traffic() -> None:
    # One of each kind of 6144 B on a ring of 4 (pieces of 1536 B).  Link bytes: an
    # all-reduce 2 x 3 steps x 4 pieces, an all-gather and a reduce-scatter 3 x 4,
    # an all-to-all (3 + 2 + 1) x 4 pieces, a broadcast 3 hops of the buffer.  DRAM
    # over the 4 participants: reads 4 S, 4 pieces, 4 S, 4 S, the root's S; writes
    # 4 S, 4 S, 4 pieces, 4 S, the 3 others' S.
    kinds = (AR, AG, RS, A2A, BC)
    graph = OpGraph(
        ops=tuple(collective(i, k, (0, 1, 2, 3), S) for i, k in enumerate(kinds)),
        processor=(0,) * 5,
    )
    on = machine_of(hw("processors=4"))
    c = op_costs(graph, schedule(graph, (on.array,)), on, Convention.ACCELSIM, PsumPolicy.CHUNK, 8)
    piece = S // 4
    assert c.interconnect_bytes.tolist() == [24 * piece, 12 * piece, 12 * piece, 24 * piece, 3 * S]
    assert c.dram_ifmap_read_bytes.tolist() == [4 * S, 4 * piece, 4 * S, 4 * S, S]
    assert c.dram_ofmap_write_bytes.tolist() == [4 * S, 4 * S, 4 * piece, 4 * S, 3 * S]
    assert c.unit.tolist() == [UNIT_COMM] * 5


def link_load(on: Machine, op: CommOp) -> list[tuple[int, int]]:
    links, loads = link_loads(on, op)
    return list(zip(links.tolist(), loads.tolist(), strict=True))


def test_link_load_counts_every_step_of_each_link() -> None:
    # On a ring of 4 (link p is processor p's), pieces of 1536 B: an all-reduce is
    # 6 steps of one piece on every link, the same step object repeated; an
    # all-to-all is 3 different steps of 3, 2 and 1 pieces on every link.
    on = machine_of(hw("processors=4"))
    piece = S // 4
    reduce = link_load(on, collective(0, AR, (0, 1, 2, 3), S))
    assert reduce == [(p, 6 * piece) for p in range(4)]
    spread = link_load(on, collective(0, A2A, (0, 1, 2, 3), S))
    assert spread == [(p, 6 * piece) for p in range(4)]
    # A group of 2 on a ring of 4: only its members' links, 2 steps of S / 2.
    assert link_load(on, collective(0, AR, (1, 3), S)) == [(1, S), (3, S)]
