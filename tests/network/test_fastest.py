"""``fastest`` chooses without timing every candidate's full lowering: each
algorithm's cycles (``direct`` on every processor from the routes of the processors
standing for all, a step of one size from its pairs' routes kept per network) and
the choice equal those of every candidate lowered and timed link by link."""

from __future__ import annotations

import math
from typing import Any

import pytest

from accelsim.config.interconnect import InterconnectSpec
from accelsim.network.algorithms import lower
from accelsim.network.collectives import Algorithm, Collective, Schedule, Step
from accelsim.network.cost import (
    algorithm_cycles,
    fastest,
    link_bytes,
    pipeline_cycles,
    plan,
)
from accelsim.network.symmetry import route_classes
from accelsim.network.topology import Network

LEVEL = {"bandwidth_bytes_per_cycle": 3.0, "latency_cycles": 25}
NETWORKS: dict[str, tuple[int, dict[str, Any]]] = {
    "ring 5": (5, {}),
    "ring 8": (8, {}),
    "torus 6": (6, {"topology": "torus", "dims": [6]}),
    "torus 2x4": (8, {"topology": "torus", "dims": [2, 4]}),
    "torus 4x4": (16, {"topology": "torus", "dims": [4, 4]}),
    "torus 3x4x2, 2 chunks": (24, {"topology": "torus", "dims": [3, 4, 2], "multi_dim_chunks": 2}),
    "fully connected 4": (4, {"topology": "fully_connected", "dims": [4]}),
    "switch 8": (8, {"topology": "switch", "dims": [8]}),
    "switch 4 x ring 2": (
        8,
        {"topology": "switch", "levels": [{"topology": "ring", "dims": [2], **LEVEL}]},
    ),
    "torus 4 x switch 3": (
        12,
        {"topology": "torus", "levels": [{"topology": "switch", "dims": [3], **LEVEL}]},
    ),
}
SIZES = (1, 999, 4096, 123_457)


def network(name: str) -> Network:
    processors, spec = NETWORKS[name]
    interconnect = {"bandwidth_bytes_per_cycle": 4.0, "latency_cycles": 10, **spec}
    return Network.of(InterconnectSpec.model_validate(interconnect), processors)


def step_by_links(net: Network, step: Step) -> int:
    """A step's cycles from every transfer's route and every link's bytes."""
    load = link_bytes(net, (step,))
    return max(
        (
            net.route_latency(route)
            + max(math.ceil(load[link] / net.bandwidth(link)) for link in route)
            for t in step
            if (route := net.route(t.source, t.destination))
        ),
        default=0,
    )


def lowered_cycles(net: Network, schedule: Schedule) -> int:
    if schedule.chunks == 1:
        return sum(step_by_links(net, step) for step in schedule.steps)
    durations = [sum(step_by_links(net, s) for s in phase.steps) for phase in schedule.phases]
    return pipeline_cycles(durations, [p.dimension for p in schedule.phases], schedule.chunks)


def groups(net: Network) -> list[tuple[int, ...]]:
    everyone = tuple(range(net.processors))
    return [everyone, everyone[::2], everyone[1:4]]


@pytest.mark.parametrize("name", list(NETWORKS))
def test_each_algorithm_and_the_choice_are_those_of_the_full_lowering(name: str) -> None:
    net = network(name)
    kinds = [c for c in Collective if c is not Collective.POINT_TO_POINT]
    for group in groups(net):
        for kind in kinds:
            for size in SIZES:
                timed = {}
                for a in Algorithm:
                    if a is Algorithm.FASTEST:
                        continue
                    schedule = lower(net, kind, group, size, a)
                    expected = None if schedule is None else lowered_cycles(net, schedule)
                    assert algorithm_cycles(net, kind, group, size, a) == expected, (kind, a)
                    if expected is not None:
                        timed[a] = expected
                best = min(timed, key=timed.__getitem__)  # the first on a tie
                assert fastest(net, kind, group, size) is best, (kind, group, size)
                chosen = plan(net, kind, group, size, Algorithm.FASTEST)
                assert (chosen.algorithm, lowered_cycles(net, chosen)) == (best, timed[best])


def test_the_processors_standing_for_all_keep_their_parity_on_a_torus_of_even_size() -> None:
    # 4x4: routes half-way round go by their start's parity: four processors (0, 1,
    # 4, 5: coordinates 0 and 1 along each) stand for all.
    starts, home = route_classes(network("torus 4x4"))
    assert starts == (0, 1, 4, 5)
    # 2x4: the dimension of 2 has one link each way, parity-free; the dimension of 4
    # (stride 2) is not: processors 0 and 2.
    assert route_classes(network("torus 2x4"))[0] == (0, 2)
    # A ring, a switch, an odd torus: processor 0 alone.
    for name in ("ring 8", "switch 8", "torus 6"):
        expected = (0, 1) if name == "torus 6" else (0,)
        assert route_classes(network(name))[0] == expected, name
    net = network("torus 4x4")
    (a, b) = net.route(6, 7), net.route(4, 5)
    assert [home(link) for link in a] == [home(link) for link in b]


def test_direct_over_256_processors_is_timed_as_lowered_without_lowering_it() -> None:
    net = Network.of(
        InterconnectSpec.model_validate(
            {
                "topology": "torus",
                "dims": [16, 16],
                "bandwidth_bytes_per_cycle": 64,
                "latency_cycles": 200,
            }
        ),
        256,
    )
    everyone = tuple(range(256))
    # 1 MB: multi_dim, 2 x 2 phases of two rings of 16 each way, beats direct's 2 steps.
    assert fastest(net, Collective.ALL_REDUCE, everyone, 1_000_000) is Algorithm.MULTI_DIM
    # direct over all 256, timed from processors 0, 1, 16 and 17's routes, as lowered.
    assert (
        algorithm_cycles(net, Collective.ALL_REDUCE, everyone, 1_000_000, Algorithm.DIRECT)
        == 68_912
    )
