"""The ``interconnect`` section's topologies: what a file may say, the errors it gets,
and the links and routes :class:`~accelsim.network.topology.Network` builds from it."""

from __future__ import annotations

from collections import Counter

import pytest

from accelsim.config.interconnect import InterconnectSpec, Topology
from accelsim.errors import ConfigError
from accelsim.network.topology import Link, Network, Switch
from tests.timing.test_engine import hw


def network(processors: int, **interconnect: object) -> Network:
    spec = InterconnectSpec.model_validate({"bandwidth_bytes_per_cycle": 4.0, **interconnect})
    return Network.of(spec, processors)


def test_a_file_without_a_topology_is_the_ring_it_always_was() -> None:
    spec = hw().interconnect
    assert (spec.topology, spec.dims, spec.links, spec.levels) == (Topology.RING, None, 1, ())
    assert spec.model_dump(exclude_defaults=False).keys() >= {"bandwidth_bytes_per_cycle"}
    # Nothing new is written for a ring: resolved configurations stay as they were.
    assert hw().model_dump()["interconnect"] == {
        "bandwidth_bytes_per_cycle": 64.0,
        "latency_cycles": 200,
    }
    ring = Network.of(hw("processors=4").interconnect, 4)
    assert ring.links() == tuple(Link(0, p, (p + 1) % 4) for p in range(4))
    assert ring.route(1, 0) == (Link(0, 1, 2), Link(0, 2, 3), Link(0, 3, 0))


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (
            ["processors=8", "interconnect.topology=torus", "interconnect.dims=[4, 4]"],
            "--set: interconnect.dims: the topology holds 4 x 4 = 16 processors, not the 8"
            " processors of the hardware (got [4, 4])",
        ),
        (
            ["processors=16", "interconnect.dims=[4, 4]"],
            "--set: interconnect.dims: a ring has one dimension (got [4, 4])",
        ),
        (
            ["processors=16", "interconnect.topology=torus", "interconnect.dims=[2, 2, 2, 2]"],
            "--set: interconnect.dims: a torus has at most 3 dimensions (got [2, 2, 2, 2])",
        ),
        (
            [
                "processors=12",
                "interconnect.levels=[{topology: switch, dims: [8], bandwidth_bytes_per_cycle: 8}]",
            ],
            "--set: interconnect.levels: the outer levels' 8 groups do not divide the 12"
            " processors (got [[8]])",
        ),
        (
            ["interconnect.topology=mesh"],
            "--set: interconnect.topology: input should be 'ring', 'torus', 'fully_connected'"
            " or 'switch' (got 'mesh')",
        ),
        (
            ["interconnect.links=0"],
            "--set: interconnect.links: input should be greater than 0 (got 0)",
        ),
        (
            ["interconnect.multi_dim_chunks=0"],
            "--set: interconnect.multi_dim_chunks: input should be greater than 0 (got 0)",
        ),
    ],
)
def test_a_network_that_does_not_fit_is_refused_where_it_was_written(
    sets: list[str], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        hw(*sets)
    assert str(caught.value) == message


def test_one_processor_takes_any_network_it_sends_nothing_on() -> None:
    spec = hw("interconnect.topology=torus", "interconnect.dims=[4, 4, 4]").interconnect
    assert spec.dims == (4, 4, 4)


def test_a_torus_links_each_processor_both_ways_in_each_dimension() -> None:
    torus = network(8, topology="torus", dims=[2, 4])
    assert [torus.coordinate(5, k) for k in (0, 1)] == [1, 2]
    # 8 processors: one link to the other of a pair (size 2), two in the ring of 4.
    assert len(torus.links()) == 8 * (1 + 2)
    assert Link(1, 0, 6) in torus.links() and Link(1, 0, 2) in torus.links()
    # Dimension order, the shorter way round: 0 -> (1, 3) goes 0 -> 1, then 1 -> 7.
    assert torus.route(0, 7) == (Link(0, 0, 1), Link(1, 1, 7))
    # A tie (two hops either way) goes the positive way from an even coordinate, the
    # negative way from an odd one: 0 -> 4 is (0, 0) -> (0, 2), 2 -> 6 is (0, 1) -> (0, 3).
    assert torus.route(0, 4) == (Link(1, 0, 2), Link(1, 2, 4))
    assert torus.route(2, 6) == (Link(1, 2, 0), Link(1, 0, 6))
    assert torus.route_latency(torus.route(0, 4)) == 0


def test_ties_half_way_round_load_both_directions_alike() -> None:
    # Each of 8 processors round a ring both ways sends to the one 4 away: the even
    # ones go the positive way, the odd ones the negative way, so each of the 16
    # links carries 2 of the 8 transfers of 4 hops.
    ring = network(8, topology="torus", dims=[8])
    load = Counter(link for p in range(8) for link in ring.route(p, (p + 4) % 8))
    assert len(load) == 16 and set(load.values()) == {2}


def test_a_switch_is_one_hop_in_and_out_its_latency_once() -> None:
    net = network(4, topology="switch", latency_cycles=30, links=2)
    route = net.route(1, 3)
    assert route == (Link(0, 1, Switch(0, 0)), Link(0, Switch(0, 0), 3))
    assert net.route_latency(route) == 30
    assert [net.bandwidth(link) for link in route] == [8.0, 8.0]  # two links of 4


def test_a_hierarchy_routes_inside_the_node_first_then_across_nodes() -> None:
    levels = [
        {"topology": "switch", "dims": [2], "bandwidth_bytes_per_cycle": 1.0, "latency_cycles": 100}
    ]
    net = network(8, topology="fully_connected", latency_cycles=10, levels=levels)
    assert [(d.topology, d.size) for d in net.dimensions] == [
        (Topology.FULLY_CONNECTED, 4),
        (Topology.SWITCH, 2),
    ]
    # 1 -> 6 is (1, 0) -> (2, 1): to 2 in the node, then to node 1 through its NIC.
    assert net.route(1, 6) == (Link(0, 1, 2), Link(1, 2, Switch(1, 2)), Link(1, Switch(1, 2), 6))
    assert net.route_latency(net.route(1, 6)) == 110


@pytest.mark.parametrize(
    ("interconnect", "processors", "links"),
    [
        ({"topology": "torus", "dims": [2, 4]}, 8, 3),
        ({"topology": "fully_connected"}, 5, 4),
        ({"topology": "switch", "links": 3}, 4, 3),
        ({"levels": [{"topology": "switch", "dims": [2], "bandwidth_bytes_per_cycle": 4.0}]}, 6, 2),
    ],
)
def test_a_processors_outgoing_bandwidth_is_that_of_its_links(
    interconnect: dict[str, object], processors: int, links: int
) -> None:
    net = network(processors, **interconnect)
    counted = sum(net.bandwidth(link) for link in net.links() if link.source == 0)
    assert net.outgoing_bandwidth() == counted == links * 4.0
