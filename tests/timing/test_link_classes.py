"""A step whose sends are all alike booked once for all its links (link classes,
:mod:`accelsim.timing.links`), in both engines, with every cycle of the booking send
by send: hand-timed steps of collectives that share links with each other and with
transfers, the classes of a send table, and random bookings against the send-by-send
rule.

Unless a test says otherwise the DRAM is ideal and the links have no latency: an
all-reduce's time is its steps', 1000 B a step on a ring link of 64 B/cycle, 16
cycles.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.config.interconnect import Algorithm
from accelsim.graph.ops import OpGraph, Phase, Stage, TransferOp
from accelsim.network.collectives import Collective
from accelsim.timing import links as links_module
from accelsim.timing.costs import UNIT_COMM
from accelsim.timing.engine import simulate
from accelsim.timing.links import Links
from accelsim.timing.machine import Machine
from accelsim.timing.send_table import send_table
from accelsim.timing.sends import ALIKE_SENDS, Alike, Send, alike
from tests.timing.test_compiled import P2P
from tests.timing.test_engine import Y, costs, hw, timings
from tests.timing.test_network_timing import IDEAL_DRAM, NO_LATENCY, both, comm


def ring(processors: int, *sets: str) -> Machine:
    return Machine.of(hw(f"processors={processors}", *IDEAL_DRAM, *NO_LATENCY, *sets))


def test_a_step_is_alike_with_enough_sends_of_the_same_bytes_on_links_of_one_bandwidth() -> None:
    same = tuple(Send(k, 1000, 200) for k in range(4))
    assert alike(same, [64.0] * 4) == Alike(frozenset(range(4)), 1000, 200)
    assert ALIKE_SENDS == 4
    assert alike(same[:3], [64.0] * 4) is None  # too few to pay
    assert alike((*same[:3], Send(3, 999, 200)), [64.0] * 4) is None  # other bytes
    assert alike((*same[:3], Send(3, 1000, 0)), [64.0] * 4) is None  # another route latency
    assert alike((*same[:3], Send(2, 1000, 200)), [64.0] * 4) is None  # a link twice
    assert alike(same, [64.0, 64.0, 64.0, 8.0]) is None  # a slower link


def test_two_all_reduces_on_one_group_take_turns_on_its_class() -> None:
    # Ring all-reduces of 4000 B on the same 4 processors: 6 steps of 1000 B, 16
    # cycles, on links 0-3, one class.  The first's step k ends at 16 + 32 (k - 1),
    # the second's at 32 k: the links busy from 0 to 192, 12 steps of 16 cycles.
    on = ring(4)
    graph = OpGraph(
        ops=(comm(0, (0, 1, 2, 3), 4000), comm(1, (0, 1, 2, 3), 4000)), processor=(0, 0)
    )
    table = send_table(graph, on)
    assert (table.step_class.tolist(), table.classes.tolist()) == ([0], [0, 0, 0, 0])
    assert table.class_ptr.tolist() == [0, 1, 2, 3, 4, 4]  # links 0-3, then class 0
    assert both(graph, costs([UNIT_COMM, UNIT_COMM]), on) == ([0, 0], [176, 192], [0, 0], 192)


def test_all_reduces_on_overlapping_classes_fall_back_to_each_send_and_back() -> None:
    # On a ring of 8, an all-reduce of 8000 B on all 8 (14 steps of 1000 B, links 0-7)
    # and one of 4000 B on 0-3 (6 steps, links 0-3), started together, two classes
    # sharing links 0-3.  The first's step 1 holds 0-7 until 16, the second's 0-3
    # 16..32; from then links 0-3 take the two in turn (the first's steps booked send
    # by send: 4-7 are free earlier), the first's step k ending at 16 + 32 (k - 1)
    # and the second's at 32 k, 192 for its sixth; the first's seventh holds 0-3
    # 192..208, and from 208, all 8 free together again, its last 7 steps are booked
    # on its class, 16 cycles each: 320, links 0-3 busy from 0 to 320.
    on = ring(8)
    graph = OpGraph(
        ops=(comm(0, tuple(range(8)), 8000), comm(1, (0, 1, 2, 3), 4000)), processor=(0, 0)
    )
    table = send_table(graph, on)
    assert table.step_class.tolist() == [0, 1]
    # Each link's classes, then the classes sharing a link with each class.
    assert (table.class_ptr.tolist(), table.classes.tolist()) == (
        [0, 2, 4, 6, 8, 9, 10, 11, 12, 13, 14],
        [0, 1, 0, 1, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0],
    )
    assert both(graph, costs([UNIT_COMM, UNIT_COMM]), on) == ([0, 0], [320, 192], [0, 0], 320)


def test_a_transfer_on_one_link_of_a_class_delays_its_step_by_the_transfers_bytes() -> None:
    # A transfer of 6400 B from 3 to 0 holds ring link 3 from 0 to 100 (its estimate
    # ranks it first); an all-reduce of 4000 B on 0-3 started with it books its first
    # step send by send (links 0-2 0..16, link 3 100..116), then, every link free by
    # 116, its other five on its class: 116 + 5 x 16 = 196 (96 alone).
    on = ring(4)
    send = TransferOp(1, "y.to_p0", "l", Phase.FWD, Stage.FORWARD, Y, 3200, 3, 0, ())
    alone = OpGraph(ops=(comm(0, (0, 1, 2, 3), 4000),), processor=(0,))
    assert both(alone, costs([UNIT_COMM]), on) == ([0], [96], [0], 96)
    graph = OpGraph(ops=(comm(0, (0, 1, 2, 3), 4000), send), processor=(0, 3))
    assert both(graph, costs([UNIT_COMM, UNIT_COMM]), on) == ([0, 0], [196, 100], [0, 0], 196)


def test_a_class_step_arrives_its_route_latency_after_its_links_are_done() -> None:
    # Latency 200 on every link: each step 16 + 200; 6 steps 1296.
    on = Machine.of(hw("processors=4", *IDEAL_DRAM, "interconnect.latency_cycles=200"))
    graph = OpGraph(ops=(comm(0, (0, 1, 2, 3), 4000),), processor=(0,))
    assert both(graph, costs([UNIT_COMM]), on) == ([0], [1296], [0], 1296)


def each(free: list[int], bandwidth: list[float], step: tuple[Send, ...], now: int) -> int:
    """The send-by-send booking of ``step`` (the rule every booking must equal)."""
    arrival = now
    for s in step:
        free[s.link] = max(now, free[s.link]) + math.ceil(s.bytes / bandwidth[s.link])
        arrival = max(arrival, free[s.link] + s.latency_cycles)
    return arrival


@st.composite
def bookings(draw: Any) -> tuple[list[float], list[tuple[int, tuple[Send, ...]]]]:
    """Links (one of them slower, at times) and steps booked on them at
    non-decreasing cycles: alike steps on a few overlapping sets of links, of a few
    sizes, and steps of sends on some of those links that are not alike."""
    n = draw(st.integers(ALIKE_SENDS, 12))
    bandwidth = [64.0] * n
    if draw(st.booleans()):
        bandwidth[draw(st.integers(0, n - 1))] = 16.0
    link_sets = st.sets(st.integers(0, n - 1), min_size=ALIKE_SENDS)
    sets = draw(st.lists(link_sets, min_size=1, max_size=4))
    booked, now = [], 0
    for _ in range(draw(st.integers(1, 40))):
        now += draw(st.sampled_from([0, 0, 1, 10, 100]))
        links = sorted(draw(st.sampled_from(sets)))
        size = draw(st.sampled_from([1000, 1000, 64, 3000]))
        if draw(st.integers(0, 3)):
            latency = draw(st.sampled_from([0, 5]))
            step = tuple(Send(k, size, latency) for k in links)
        else:
            step = tuple(Send(draw(st.sampled_from(links)), size, 0) for _ in links[:2])
        booked.append((now, step))
    return bandwidth, booked


@settings(max_examples=300, deadline=None, derandomize=True)
@given(bookings())
def test_booking_by_class_equals_booking_send_by_send(
    problem: tuple[list[float], list[tuple[int, tuple[Send, ...]]]],
) -> None:
    bandwidth, booked = problem
    by_class, free = Links(bandwidth), [0] * len(bandwidth)
    steps: dict[tuple[Send, ...], tuple[Send, ...]] = {}  # a repeated step as one object
    for now, step in booked:
        step = steps.setdefault(step, step)
        assert by_class.book(step, now) == each(free, bandwidth, step, now)
        assert [by_class.held(k) for k in range(len(bandwidth))] == free


@st.composite
def contended(draw: Any) -> tuple[OpGraph, Any, Machine]:
    """Collectives of every kind over groups of 4 to 8 processors and transfers,
    some waiting for others, contending for the links of a ring, a torus, a switch
    or a fully connected network, by any algorithm."""
    procs = draw(st.integers(4, 8))
    kind = draw(st.sampled_from(["ring", "ring", "switch", "fully_connected", "torus"]))
    dims = "[2, 4]" if kind == "torus" and procs == 8 else f"[{procs}]"
    sets = [
        f"processors={procs}", f"interconnect.topology={kind}", f"interconnect.dims={dims}",
        f"interconnect.algorithm={draw(st.sampled_from([a.value for a in Algorithm]))}",
        f"interconnect.bandwidth_bytes_per_cycle={draw(st.sampled_from(['16', '64']))}",
        f"interconnect.latency_cycles={draw(st.sampled_from([0, 50]))}", *IDEAL_DRAM,
    ]  # fmt: skip
    ops: list[Any] = []
    where: list[int] = []
    for i in range(draw(st.integers(2, 10))):
        deps = tuple(sorted(draw(st.sets(st.integers(0, i - 1), max_size=2)) if i else ()))
        if draw(st.integers(0, 2)):
            parts = tuple(sorted(draw(st.sets(st.integers(0, procs - 1), min_size=4))))
            collective = draw(st.sampled_from([k for k in Collective if k is not P2P]))
            root = parts[0] if collective is Collective.BROADCAST else None
            size = draw(st.sampled_from([64, 4000, 4000, 12000]))
            op: Any = dataclasses.replace(
                comm(i, parts, size), deps=deps, collective=collective, root=root
            )
            where.append(parts[0])
        else:
            source, to = draw(
                st.lists(st.integers(0, procs - 1), min_size=2, max_size=2, unique=True)
            )
            size = draw(st.sampled_from([500, 3200]))
            op = TransferOp(i, f"t{i}", "l", Phase.FWD, Stage.FORWARD, Y, size, source, to, deps)
            where.append(source)
        ops.append(op)
    graph = OpGraph(ops=tuple(ops), processor=tuple(where))
    return graph, costs([UNIT_COMM] * len(ops)), Machine.of(hw(*sets))


@settings(max_examples=100, deadline=None, derandomize=True)
@given(contended())
def test_both_engines_book_classes_as_the_simpy_engine_books_each_send(
    problem: tuple[OpGraph, Any, Machine],
) -> None:
    graph, c, on = problem
    reference = both(graph, c, on)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(links_module.Links, "book", links_module.Links._each)
        assert timings(simulate(graph, c, on)) == reference
