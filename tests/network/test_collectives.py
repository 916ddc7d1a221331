"""Collectives lowered to steps of transfers and timed on the links without
contention: exact cycles counted by hand for each algorithm, the bandwidth terms
against their closed forms, links shared between collectives, the bandwidth bound.

Links of 4 bytes per cycle and 10 cycles' latency unless a test says otherwise, so a
transfer of ``b`` bytes over one hop takes ``10 + ceil(b / 4)`` cycles."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest

from accelsim.config.interconnect import InterconnectSpec
from accelsim.network.collectives import Algorithm, Collective, Schedule, Transfer
from accelsim.network.cost import (
    bandwidth_bound,
    concurrent_cycles,
    link_bytes,
    pipeline_cycles,
    plan,
    schedule_cycles,
)
from accelsim.network.topology import Network

AR, AG, RS = Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER
A2A, BC, P2P = Collective.ALL_TO_ALL, Collective.BROADCAST, Collective.POINT_TO_POINT
S = 1200


def network(processors: int, latency: int = 10, **interconnect: object) -> Network:
    spec = InterconnectSpec.model_validate(
        {"bandwidth_bytes_per_cycle": 4.0, "latency_cycles": latency, **interconnect}
    )
    return Network.of(spec, processors)


def cycles(net: Network, kind: Collective, algorithm: Algorithm, size: int = S) -> int:
    group = tuple(range(net.processors))
    return schedule_cycles(net, plan(net, kind, group, size, algorithm))


def hop(n_bytes: int) -> int:
    """One hop of ``n_bytes``: latency, then the bytes at 4 per cycle."""
    return 10 + -(-n_bytes // 4)


@pytest.mark.parametrize(
    ("n", "expected"),
    # 2(n - 1) steps of ceil(1200 / n): 600, 400, 300, 150 bytes.
    [(2, 2 * hop(600)), (3, 4 * hop(400)), (4, 6 * hop(300)), (8, 14 * hop(150))],
)
def test_ring_all_reduce_on_a_ring(n: int, expected: int) -> None:
    assert expected == {2: 320, 3: 440, 4: 510, 8: 672}[n]
    assert cycles(network(n), AR, Algorithm.RING) == expected


@pytest.mark.parametrize(
    ("n", "expected"),
    # Two steps, each processor sending ceil(1200 / n) to each other on its own link.
    [(2, 2 * hop(600)), (3, 2 * hop(400)), (4, 2 * hop(300)), (8, 2 * hop(150))],
)
def test_direct_all_reduce_on_a_fully_connected_network(n: int, expected: int) -> None:
    net = network(n, topology="fully_connected")
    assert cycles(net, AR, Algorithm.DIRECT) == expected


@pytest.mark.parametrize(
    ("n", "expected"),
    # Halving: n/2 c, n/4 c, ..., c with the partner that far; doubling the reverse.
    [(2, 2 * hop(600)), (4, 2 * (hop(600) + hop(300))), (8, 2 * (hop(600) + hop(300) + hop(150)))],
)
def test_halving_doubling_all_reduce(n: int, expected: int) -> None:
    assert expected == {2: 320, 4: 490, 8: 586}[n]
    net = network(n, topology="fully_connected")
    assert cycles(net, AR, Algorithm.HALVING_DOUBLING) == expected


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        # Round a ring both ways, pieces c = 1200 / n.  Four: 600 to the neighbour
        # (one hop, no link shared); 300 two away, the even places the positive way
        # and the odd the negative way, each link once (two hops: 20 + 75).
        (4, hop(600) + (20 + 75)),
        # Eight: 600 to the neighbour; 300 two away, 0 -> 2 and 1 -> 3 both crossing
        # 1 -> 2 (600 bytes, two hops: 20 + 150); 150 four away, each link carrying
        # two of the eight transfers (300 bytes, four hops: 40 + 75).
        (8, hop(600) + (20 + 150) + (40 + 75)),
    ],
)
def test_halving_doubling_round_a_ring_sends_the_largest_piece_to_the_nearest(
    n: int, expected: int
) -> None:
    assert expected == {4: 255, 8: 445}[n]
    net = network(n, topology="torus", dims=[n])
    assert cycles(net, RS, Algorithm.HALVING_DOUBLING) == expected
    assert cycles(net, AG, Algorithm.HALVING_DOUBLING) == expected
    assert cycles(net, AR, Algorithm.HALVING_DOUBLING) == 2 * expected
    steps = plan(net, RS, tuple(range(n)), S, Algorithm.HALVING_DOUBLING).steps
    assert steps[0][:2] == (Transfer(0, 1, 600), Transfer(1, 0, 600))
    assert steps[-1][0] == Transfer(0, n // 2, 1200 // n)


def test_halving_doublings_reduce_scatter_of_a_ring_of_eight_in_closed_form() -> None:
    # Without latency: S / 2 a hop, then two S / 4 on a link, then two S / 8 on each
    # link: (1/2 + 1/2 + 1/4) S / B.
    net = network(8, latency=0, topology="torus", dims=[8])
    assert cycles(net, RS, Algorithm.HALVING_DOUBLING, SIZE) == Fraction(5, 4) * SIZE / 4


def test_halving_doubling_needs_a_power_of_two() -> None:
    net = network(3, topology="fully_connected")
    with pytest.raises(ValueError) as caught:
        cycles(net, AR, Algorithm.HALVING_DOUBLING)
    assert str(caught.value) == "halving_doubling cannot run a all_reduce on 3 processors"


@pytest.mark.parametrize(
    ("n", "levels"),
    # Each tree carries 600; floor(log2 n) levels up, then down, no link shared.
    [(2, 1), (3, 1), (4, 2), (8, 3)],
)
def test_double_binary_tree_all_reduce(n: int, levels: int) -> None:
    net = network(n, topology="fully_connected")
    assert cycles(net, AR, Algorithm.DOUBLE_BINARY_TREE) == 2 * levels * hop(600)


def test_the_second_tree_of_four_has_the_first_trees_leaves_inside() -> None:
    net = network(4, topology="fully_connected")
    schedule = plan(net, AR, (0, 1, 2, 3), S, Algorithm.DOUBLE_BINARY_TREE)
    assert schedule.steps[0] == (Transfer(3, 1, 600), Transfer(0, 2, 600))
    assert set(schedule.steps[1]) == {
        Transfer(1, 0, 600),
        Transfer(2, 0, 600),
        Transfer(2, 3, 600),
        Transfer(1, 3, 600),
    }


def test_ring_on_a_2x2_torus_crosses_dimensions() -> None:
    # 1 -> 2 is (1, 0) -> (0, 1): two hops, 20 cycles' latency, each link 300 bytes.
    net = network(4, topology="torus", dims=[2, 2])
    assert cycles(net, AR, Algorithm.RING) == 6 * (20 + 75)


def test_multi_dim_on_a_2x2_torus() -> None:
    # Reduce-scatter 600 along dimension 0, then 300 along dimension 1; all-gathers back.
    net = network(4, topology="torus", dims=[2, 2])
    assert cycles(net, AR, Algorithm.MULTI_DIM) == 2 * (hop(600) + hop(300)) == 490


def test_multi_dim_on_a_2x4_torus_runs_both_ways_round_the_four() -> None:
    # 600 to the pair's other along dimension 0; then 600 over the ring of four both
    # ways, ceil(600 / 8) = 75 bytes a direction, three steps; all-gathers back.
    net = network(8, topology="torus", dims=[2, 4])
    assert cycles(net, AR, Algorithm.MULTI_DIM, 1200) == 2 * (hop(600) + 3 * hop(75)) == 494


def test_multi_dim_on_a_two_level_hierarchy() -> None:
    # 4 chips on a switch (4 B/cycle, 10 cycles), 2 nodes on a fabric (1 B/cycle, 100).
    levels = [
        {"topology": "switch", "dims": [2], "bandwidth_bytes_per_cycle": 1.0, "latency_cycles": 100}
    ]
    net = network(8, topology="switch", levels=levels)
    # In the node: each chip sends 300 to each of 3 others: 900 on its port, 225 cycles.
    # Across: 300 left, 150 to the other node's chip: 150 cycles at 1 B/cycle.
    assert cycles(net, AR, Algorithm.MULTI_DIM) == 2 * ((10 + 225) + (100 + 150)) == 970


def test_pipeline_cycles_of_one_dimension_per_phase_is_the_flow_shops() -> None:
    # The first chunk through 5 + 3 + 2, then 3 more at the slowest phase's 5.
    assert pipeline_cycles([5, 3, 2], [0, 1, 2], 4) == 10 + 3 * 5
    # Reduce-scatter and all-gather of one dimension share it: back to back.
    assert pipeline_cycles([5, 5], [0, 0], 3) == 30


def chunked(processors: int, chunks: int, **interconnect: object) -> Network:
    return network(processors, topology="torus", multi_dim_chunks=chunks, **interconnect)


@pytest.mark.parametrize(
    ("chunks", "dim0", "dim1"),
    # A chunk of 1200 / k: 600 / k to the pair's other (one hop), then 600 / k both
    # ways round the four, ceil(600 / 8k) a direction, three steps.
    [(1, hop(600), 3 * hop(75)), (2, hop(300), 3 * hop(38)), (4, hop(150), 3 * hop(19))],
)
def test_multi_dim_in_chunks_on_a_2x4_torus(chunks: int, dim0: int, dim1: int) -> None:
    net = chunked(8, chunks, dims=[2, 4])
    assert (dim0, dim1) == {1: (160, 87), 2: (85, 60), 4: (48, 45)}[chunks]
    # Reduce-scatter, all-gather: the first chunk through both, the rest at the slower.
    one_way = dim0 + dim1 + (chunks - 1) * max(dim0, dim1)
    assert cycles(net, RS, Algorithm.MULTI_DIM) == cycles(net, AG, Algorithm.MULTI_DIM) == one_way
    assert one_way == {1: 247, 2: 230, 4: 237}[chunks]
    # All-reduce, the phases dimension 0, 1, 1, 0, a dimension one chunk at a time:
    # 1 chunk: the four phases, 2 x (160 + 87) = 494.  2 chunks: dimension 0 takes
    # both reduce-scatters, 0..85..170; chunk 1 then 85..145..205 on dimension 1 and
    # its all-gather on dimension 0 205..290; chunk 2 on dimension 1 205..265..325,
    # on dimension 0 325..410.  4 chunks: dimension 0 takes the 4 reduce-scatters
    # (0..192); dimension 1 runs its 8 phases of 45 from 48 to 408 without a pause
    # (chunk 1's two, then the reduce-scatters of chunks 2, 3, 4, a new chunk's first
    # on a tie, then their all-gathers); dimension 0 gathers chunk 1 at 192..240,
    # chunk 2 at 318..366, chunk 3 at 366..414 and chunk 4, ready at 408, at 414..462.
    expected = {1: 494, 2: 410, 4: 462}[chunks]
    assert cycles(net, AR, Algorithm.MULTI_DIM) == expected


@pytest.mark.parametrize(
    ("chunks", "phases"),
    # A chunk of 4096 / k: per dimension three steps both ways of 1/8 of what is left.
    [(1, (414, 126, 54)), (2, (222, 78, 42)), (4, (126, 54, 36))],
)
def test_multi_dim_in_chunks_on_a_4x4x4_torus(chunks: int, phases: tuple[int, ...]) -> None:
    net = chunked(64, chunks, dims=[4, 4, 4])
    size = 4096 // chunks
    assert phases == tuple(3 * hop(size // 4**k // 8) for k in range(3))
    one_way = sum(phases) + (chunks - 1) * max(phases)
    assert one_way == {1: 594, 2: 564, 4: 594}[chunks]
    assert cycles(net, RS, Algorithm.MULTI_DIM, 4096) == one_way
    assert cycles(net, AG, Algorithm.MULTI_DIM, 4096) == one_way
    # All-reduce.  2 chunks: dimension 0 takes both reduce-scatters (0..444); chunk 1
    # goes on 222..300..342..384..462 and gathers on dimension 0 462..684; chunk 2
    # waits for dimension 1 until 462, 462..540..582..624..702, then 702..924.
    # 4 chunks: dimension 0 never idles, 4 reduce-scatters then 4 all-gathers of
    # 126, the last chunk's inner phases (54 + 36 + 36 + 54) ending at 684, before
    # dimension 0 is free for it at 882: 8 x 126.
    expected = {1: 2 * 594, 2: 924, 4: 8 * 126}[chunks]
    assert cycles(net, AR, Algorithm.MULTI_DIM, 4096) == expected


def test_a_pipelined_schedule_carries_every_chunks_bytes() -> None:
    net = chunked(8, 4, dims=[2, 4])
    schedule = plan(net, AR, tuple(range(8)), S, Algorithm.MULTI_DIM)
    assert schedule.chunks == 4 and [p.dimension for p in schedule.phases] == [0, 1, 1, 0]
    # Each processor sends 150 on dimension 0 and 2 x 3 x 19 round the four, twice
    # (reduce-scatter and all-gather), for each of 4 chunks.
    assert schedule.bytes == 8 * 4 * 2 * (150 + 6 * 19)


def test_other_collectives_by_hand() -> None:
    ring4 = network(4)
    assert cycles(ring4, AG, Algorithm.RING) == cycles(ring4, RS, Algorithm.RING) == 3 * hop(300)
    # All-to-all on a ring: 3, 2, then 1 piece of 300 passed on.
    assert cycles(ring4, A2A, Algorithm.RING) == hop(900) + hop(600) + hop(300)
    # A broadcast along the ring: the whole buffer a hop at a time.
    assert cycles(ring4, BC, Algorithm.RING) == 3 * hop(1200)
    full4 = network(4, topology="fully_connected")
    assert cycles(full4, A2A, Algorithm.DIRECT) == hop(300)
    assert cycles(full4, BC, Algorithm.DIRECT) == hop(1200)
    # A binomial tree: 0 -> 2, then 0 -> 1 and 2 -> 3.
    assert cycles(full4, BC, Algorithm.HALVING_DOUBLING) == 2 * hop(1200)
    p2p = plan(ring4, P2P, (3, 1), 400, Algorithm.FASTEST)
    assert p2p.steps == ((Transfer(3, 1, 400),),)
    assert schedule_cycles(ring4, p2p) == 20 + 100  # two hops, 3 -> 0 -> 1


def test_fastest_takes_the_fewest_cycles() -> None:
    net = network(8, topology="torus", dims=[2, 4])
    each = {a: cycles(net, AR, a) for a in Algorithm if a is not Algorithm.FASTEST}
    best = plan(net, AR, tuple(range(8)), S, Algorithm.FASTEST)
    # direct: 150 from each to each other, twice. A link of dimension 0 carries the 4
    # pieces that change pair; a link of the ring of four the 2 that go one place on
    # and the 2 that go two (a tie, the even places one way, the odd the other) past
    # it: 600 bytes, three hops at most: 2 x (30 + 150).
    assert each[Algorithm.DIRECT] == 2 * (30 + 150)
    assert best.algorithm is Algorithm.DIRECT
    assert schedule_cycles(net, best) == min(each.values()) == 360
    # On a one-way ring of 3, multi_dim is the ring algorithm itself: the tie goes to
    # the first in order.
    ring = network(3)
    assert plan(ring, AR, (0, 1, 2), S, Algorithm.FASTEST).algorithm is Algorithm.RING


SIZE = 4 * 840  # 840 = lcm(1..8): every piece a whole number of bytes and of cycles


@pytest.mark.parametrize("n", range(2, 9))
def test_bandwidth_terms_match_their_closed_forms(n: int) -> None:
    net = network(n, latency=0)
    per_byte = Fraction(SIZE, 4)  # S / B
    assert cycles(net, AR, Algorithm.RING, SIZE) == Fraction(2 * (n - 1), n) * per_byte
    assert cycles(net, AG, Algorithm.RING, SIZE) == Fraction(n - 1, n) * per_byte
    assert cycles(net, RS, Algorithm.RING, SIZE) == Fraction(n - 1, n) * per_byte


def test_the_torus_form_per_dimension() -> None:
    # 4x4x4, both ways round each ring: each dimension's reduce-scatter takes
    # (d - 1) / d x S_k / (2B), S_k what the dimensions before it left.
    net = network(64, latency=0, topology="torus", dims=[4, 4, 4])
    size = 4096
    per_dim = [Fraction(3, 4) * Fraction(size, 4**k) / 8 for k in range(3)]
    assert per_dim == [384, 96, 24]
    assert cycles(net, RS, Algorithm.MULTI_DIM, size) == sum(per_dim)
    assert cycles(net, AR, Algorithm.MULTI_DIM, size) == 2 * sum(per_dim)


def test_two_collectives_sharing_a_link_take_the_time_its_bytes_need() -> None:
    # On a one-way ring of 4, 0 -> 2 and 1 -> 3 both cross the link 1 -> 2.
    net = network(4)
    first = plan(net, AR, (0, 2), S, Algorithm.RING)
    second = plan(net, AR, (1, 3), S, Algorithm.RING)
    alone = 2 * (20 + 150)  # two steps of 600 over two hops
    assert schedule_cycles(net, first) == schedule_cycles(net, second) == alone
    assert concurrent_cycles(net, (first, second)) == 2 * (20 + 300)
    busiest = max(link_bytes(net, first.steps + second.steps).values())
    assert busiest == 4 * 600
    assert bandwidth_bound(net, (first, second)) == busiest // 4 == 600


def all_schedules() -> list[tuple[str, Network, Schedule]]:
    nets = {
        "ring 5": network(5),
        "full 4": network(4, topology="fully_connected"),
        "torus 2x4": network(8, topology="torus", dims=[2, 4]),
        "torus 2x4 in 4 chunks": chunked(8, 4, dims=[2, 4]),
        "hierarchy": network(
            8,
            topology="switch",
            levels=[{"topology": "torus", "dims": [2], "bandwidth_bytes_per_cycle": 1.5}],
        ),
    }
    found = []
    for (name, net), kind, algorithm in itertools.product(nets.items(), Collective, Algorithm):
        group = (0, net.processors - 1) if kind is P2P else tuple(range(net.processors))
        try:
            found.append((name, net, plan(net, kind, group, 1000, algorithm)))
        except ValueError:
            continue
    return found


def test_no_collective_beats_its_bandwidth_bound() -> None:
    schedules = all_schedules()
    assert len(schedules) > 60
    for name, net, schedule in schedules:
        bound = bandwidth_bound(net, (schedule,))
        assert schedule_cycles(net, schedule) >= bound > 0, (name, schedule.algorithm)
