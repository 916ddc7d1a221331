"""A reduce-scatter, an all-gather or an all-reduce on a one-level ring in closed form
(:func:`accelsim.network.algorithms.ring_shifts`): the represented steps, each link's
load and the schedule's bytes the engines and the cost model read are those of the
group's lowered transfers, and a collective over every processor in order is
balanced as the check send by send finds it; the link classes worked out for every
link at once are each link's translation onto processor 0's."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from accelsim.config.interconnect import Topology
from accelsim.graph.ops import OpGraph
from accelsim.network.algorithms import lower, ring_shifts
from accelsim.network.collectives import Algorithm, Collective
from accelsim.network.symmetry import _home, link_classes
from accelsim.network.topology import Dimension, Network
from accelsim.timing import sends
from accelsim.timing.costs import UNIT_COMM
from accelsim.timing.machine import Machine, machine_of
from accelsim.timing.ready import own_cycles
from accelsim.timing.symmetry import _even
from tests.timing.test_collective_kinds import collective
from tests.timing.test_engine import costs, hw

AR, AG, RS = Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER
SIZES = (1, 6144, 10_007)  # a piece of 1 B, whole pieces, a rounded-up piece


def _how(n: int) -> sends._Lowering:
    return sends._Lowering.of(machine_of(hw(f"processors={n}")))


def _groups(n: int) -> list[tuple[tuple[int, ...], ...]]:
    """Every processor in order, reversed, a pair, and two halves."""
    out = [(tuple(range(n)),), (tuple(range(n))[::-1],), ((0, n - 1),)]
    if n % 2 == 0 and n > 2:
        out.append((tuple(range(0, n, 2)), tuple(range(1, n, 2))))
    return out


def test_the_ring_shifts_are_the_rings_steps() -> None:
    # Over n processors: n - 1 shifts of ceil(S / n) (reduce-scatter, all-gather),
    # 2(n - 1) for an all-reduce, the same step object each time; none for another kind.
    for n, size, kind in itertools.product(range(2, 10), SIZES, (AR, AG, RS)):
        schedule = lower(Network.of(hw(f"processors={n}").interconnect, n), kind,
                         tuple(range(n)), size, Algorithm.RING)  # fmt: skip
        assert schedule is not None
        count, piece = ring_shifts(kind, n, size) or (0, 0)
        assert count == (2 if kind is AR else 1) * (n - 1)
        assert piece == -(-size // n)
        assert len(schedule.steps) == count and len({id(s) for s in schedule.steps}) == 1
        assert [(t.source, t.bytes) for t in schedule.steps[0]] == [(p, piece) for p in range(n)]
    assert ring_shifts(Collective.ALL_TO_ALL, 4, 100) is None
    assert ring_shifts(Collective.BROADCAST, 4, 100) is None


@pytest.mark.parametrize("n", range(2, 10))
def test_the_closed_form_is_the_lowered_transfers(n: int) -> None:
    how = _how(n)
    for kind, size, groups in itertools.product((AR, AG, RS), SIZES, _groups(n)):
        for links in (frozenset({0}), frozenset(range(n)), frozenset({1, n - 1})):
            ran = [sends._steps(how, kind, g, size) for g in groups]
            each = [
                tuple(s for step in at for s in step if s.link in links)
                for at in zip(*ran, strict=True)
            ]
            assert list(sends._represented(how, groups, links, kind, size)) == each
        for g in groups:
            steps = sends._steps(how, kind, g, size)
            load: Counter[int] = Counter()
            for step in steps:
                for s in step:
                    load[s.link] += s.bytes
            links, loads = sends._link_loads(how, kind, g, size)
            assert list(zip(links.tolist(), loads.tolist(), strict=True)) == list(load.items())
            whole = sends._schedule(how, kind, g, size)
            assert sends._schedule_bytes(how, kind, g, size) == whole.bytes
            assert whole.chunks == 1  # a ring never pipelines: pipelined() says none


@pytest.mark.parametrize("n", range(2, 10))
def test_a_ring_over_everyone_is_balanced_as_checked_send_by_send(n: int) -> None:
    # What `balanced` takes by construction: every link carries one send of the
    # piece each step, and the ring's links are one class.
    on = machine_of(hw(f"processors={n}"))
    classes = link_classes(on.network)
    assert set(classes) == {0}
    for kind, size in itertools.product((AR, AG, RS), SIZES):
        op = collective(0, kind, tuple(range(n)), size)
        assert sends.on_ring(on, op)
        for step in {id(s): s for s in sends.lowered(on, op)}.values():
            assert _even((step,), classes, Counter(classes))
    if n > 2:  # not every processor: some link of the class is left idle
        (fewer, *_) = sends.lowered(on, collective(0, AR, tuple(range(n - 1)), 6144))
        assert not _even((fewer,), classes, Counter(classes))


def test_the_link_classes_are_each_links_translation_onto_processor_0() -> None:
    # Every network of one or two dimensions of every topology and size 1 to 4, and
    # of three of every topology and sizes 3, 2 and 4.
    sizes = [(d,) for d in range(1, 5)] + list(itertools.product(range(1, 5), repeat=2))
    for size in [*sizes, (3, 2, 4)]:
        for kinds in itertools.product(list(Topology), repeat=len(size)):
            dims = (Dimension(t, d, 64.0, 10) for t, d in zip(kinds, size, strict=True))
            network = Network(tuple(dims))
            links = network.links()
            ids = {link: i for i, link in enumerate(links)}
            assert link_classes(network) == tuple(ids[_home(network, x)] for x in links)


def test_the_ready_estimate_takes_each_participants_own_memory() -> None:
    # Processors 0-3 on a ring; processor 2's DRAM (one channel) is half as fast.
    # An all-reduce of 6144 B: each link carries 6 pieces of 1536 B, 144 cycles at
    # 64 B/cycle, and its slowest participant reads and writes 6144 B at 64 B/cycle:
    # 96 + 96.  On memories alike, 128 B/cycle: 48 + 48.
    fast = Machine.of(hw("processors=4", "dram.sharing=per_processor"))
    slow = Machine.of(hw("processors=4", "dram.sharing=per_processor",
                         "dram.bandwidth_bytes_per_cycle=64"))  # fmt: skip
    mixed = Machine(
        fast.hardware, fast.array, (*fast.dram[:2], slow.dram[2], fast.dram[3]),
        fast.network, fast.links, fast.link,
    )  # fmt: skip
    graph = OpGraph(ops=(collective(0, AR, (0, 1, 2, 3), 6144),), processor=(0,))
    c = costs([UNIT_COMM])
    assert fast.hardware.dram.channels == 1
    assert own_cycles(graph, c, fast).tolist() == [144 + 48 + 48]
    assert own_cycles(graph, c, mixed).tolist() == [144 + 96 + 96]
    assert np.array_equal(own_cycles(graph, c, slow), own_cycles(graph, c, mixed))
