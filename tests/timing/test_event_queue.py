"""The compiled loop's event queue (timing/loop/queues.py): its binary heap and its
radix heap pop events in SimPy's order, ``(cycle, priority, sequence)``, ties and
urgent events included, and either gives the SimPy engine's trace.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.replica import simulate_replica_step
from accelsim.driver.run import simulate_training
from accelsim.graph.ops import OpGraph
from accelsim.timing import engine, event_loop
from accelsim.timing.costs import OpCosts
from accelsim.timing.engines import recorded_steps
from accelsim.timing.flat import flatten
from accelsim.timing.loop import records
from accelsim.timing.loop.queues import pop, push
from accelsim.timing.machine import Machine
from accelsim.timing.memories import compiled as kernels
from accelsim.timing.numba_setup import njit
from tests.conftest import ROOT
from tests.timing.test_compiled import problems

NORMAL = records.NORMAL << records.PRIORITY_SHIFT


@njit
def _replay(heap: bool, first: int, delays: Any, urgent: Any, after: Any) -> Any:
    """Queue ``first`` events at cycles ``delays[:first]``, then pop every event;
    after the ``j``-th pop, queue ``after[j]`` more, each at the popped cycle plus
    its delay (at that cycle when ``urgent``); returns the popped events' indices."""
    n = delays.shape[0]
    state = np.zeros(records.Q_STATE, np.int64)
    state[records.Q_HEAP] = heap
    queue = records.Queue(
        np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64),
        np.empty(n, np.int64), np.empty(n, np.int64),
        np.full(records.STAGED_LIST + 1, -1, np.int64),
        np.full(records.STAGED_LIST + 1, -1, np.int64), state, np.arange(n),
    )  # fmt: skip
    size = 0
    for k in range(first):
        size = push(queue, size, delays[k], NORMAL + k, 0, k)
    popped = np.empty(n, np.int64)
    k, j = first, 0
    while size > 0:
        size, now, _kind, arg = pop(queue, size)
        popped[j] = arg
        for _ in range(after[j]):
            if urgent[k]:
                size = push(queue, size, now, k, 0, k)
            else:
                size = push(queue, size, now + delays[k], NORMAL + k, 0, k)
            k += 1
        j += 1
    return popped[:j]


def _reference(first: int, delays: Any, urgent: Any, after: Any) -> list[int]:
    """The same replay on Python's heap by ``(cycle, key)``, as SimPy orders events."""
    pending = [(int(delays[k]), NORMAL + k, k) for k in range(first)]
    heapq.heapify(pending)
    popped: list[int] = []
    k = first
    while pending:
        now, _key, arg = heapq.heappop(pending)
        for _ in range(after[len(popped)]):
            if urgent[k]:
                heapq.heappush(pending, (now, k, k))
            else:
                heapq.heappush(pending, (now + int(delays[k]), NORMAL + k, k))
            k += 1
        popped.append(arg)
    return popped


@pytest.mark.parametrize("scale", [1, 40, 5000, 2**40])
def test_both_queues_pop_in_simpys_order(scale: int) -> None:
    # Delays of 0 (ties at the current cycle) up to 2^40 (every level of the radix
    # heap), a tenth of them urgent events, up to three pushes a pop; the heap's
    # order is SimPy's, and so must the radix heap's be, event for event.
    rng = np.random.default_rng(scale)
    n, first = 6000, 300
    delays = rng.integers(0, scale + 1, n) * rng.integers(0, 2, n)
    urgent = rng.random(n) < 0.1
    after = np.zeros(n, np.int64)
    after[: n // 2] = rng.integers(0, 4, n // 2)
    after[n // 2 - 1] += n - first - int(after[: n // 2].sum())  # push every event
    assert after.sum() == n - first and (after >= 0).all()
    expected = _reference(first, delays, urgent, after)
    assert len(expected) == n
    for heap in (True, False):
        assert _replay(heap, first, delays, urgent, after).tolist() == expected


def _loop(graph: OpGraph, c: OpCosts, on: Machine, heap: bool) -> tuple[list[int], list[int], int]:
    step = flatten(graph, c, on)
    start, end, events, status = event_loop.run_events(
        step, *records.capacities(step), heap, kernels.model_of(step.dram)
    )
    assert status == records.OK
    return start.tolist(), end.tolist(), int(events)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(problems())
def test_either_queue_gives_simpys_trace_on_random_graphs(
    problem: tuple[OpGraph, OpCosts, Any],
) -> None:
    graph, c, spec = problem
    on = Machine.of(spec)
    ref = engine.simulate(graph, c, on)
    expected = (ref.start_cycle.tolist(), ref.end_cycle.tolist(), ref.events)
    assert _loop(graph, c, on, heap=True) == expected
    assert _loop(graph, c, on, heap=False) == expected


@pytest.mark.parametrize("sharing", ["shared", "per_processor"])
def test_many_units_run_on_the_radix_heap_and_give_simpys_trace(sharing: str) -> None:
    # 16 data-parallel processors simulated each (an array and a vector unit each: 32
    # units, the radix heap's threshold): 17,852 events with one DRAM.
    sets = [
        "processors=16", "assignment=data_parallel", "batch_size=64",
        "run.data_parallel.symmetry=full", f"dram.sharing={sharing}",
    ]  # fmt: skip
    with recorded_steps() as steps:
        simulate_training(load_inputs(ROOT / "configs/runs/mlp.yaml", parse_sets(sets)))
    graph, c, on, streams = steps[0]
    step = flatten(graph, c, on, streams)
    assert step.n_stores == records.HEAP_UNITS
    ref = engine.simulate(graph, c, on, streams)
    if sharing == "shared":
        assert ref.events == 17_852
    start, end, events, status = event_loop.run(step)
    assert (start.tolist(), end.tolist(), events, status) == (
        ref.start_cycle.tolist(), ref.end_cycle.tolist(), ref.events, records.OK,
    )  # fmt: skip
    heap_start, heap_end, heap_events, _ = event_loop.run_events(
        step, *records.capacities(step), True, kernels.model_of(step.dram)
    )
    assert (heap_start.tolist(), heap_end.tolist(), heap_events) == (
        start.tolist(), end.tolist(), events,
    )  # fmt: skip


def test_a_step_on_representatives_queues_one_event_per_idle_unit() -> None:
    # One replica standing for 8 and for 64 processors: the same ops on processor
    # 0's two units (an array and a vector unit), the others idle.  The queue holds
    # 1 event more per idle unit, not the chunks of the largest op more.
    def capacity(processors: int) -> tuple[int, int, int]:
        sets = [
            f"processors={processors}", f"batch_size={2 * processors}",
            "assignment=data_parallel", "dram.sharing=per_processor", "timing.engine=compiled",
        ]  # fmt: skip
        with recorded_steps() as steps:
            simulate_replica_step(load_inputs(ROOT / "configs/runs/mlp.yaml", parse_sets(sets)))
        graph, c, on, streams = steps[0]
        step = flatten(graph, c, on, streams)
        events, _ = records.capacities(step)
        return events, step.n_stores, int(step.chunks.max())

    (few, stores_8, chunks), (many, stores_64, _) = capacity(8), capacity(64)
    assert (stores_8, stores_64) == (16, 128)
    assert chunks > 1
    assert many - few == stores_64 - stores_8
