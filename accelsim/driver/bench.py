"""Timing the two event engines on the steps a run simulates (``scripts/bench.py``)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from accelsim.driver.inputs import RunInputs
from accelsim.driver.run import simulate_training
from accelsim.errors import SimulationError
from accelsim.graph.ops import OpGraph
from accelsim.timing.costs import OpCosts
from accelsim.timing.engines import recorded_steps
from accelsim.timing.flat import FlatStep, Keyed
from accelsim.timing.machine import Machine
from accelsim.timing.streams import Streams


@dataclass(frozen=True)
class EngineTiming:
    """Both engines on the distinct steps of a run (best of ``repeats`` each, warm).

    ``compiled_seconds`` is the event loop alone; ``flatten_seconds`` the
    one-off conversion of the steps to arrays (which the memo also needs).
    """

    steps: int
    ops: int
    events: int
    simpy_seconds: float
    compiled_seconds: float
    flatten_seconds: float


def benchmark_engines(inputs: RunInputs, repeats: int = 3) -> EngineTiming:
    """Simulate the run, then time both engines on every distinct step it simulated.

    Raises:
        SimulationError: if the engines disagree on a step (a bug).
    """
    from accelsim.timing import compiled, engine  # Numba and SimPy, only when benchmarking

    with recorded_steps() as steps:
        simulate_training(inputs)
    distinct: dict[bytes, tuple[OpGraph, OpCosts, Machine, Streams | None, FlatStep]] = {}
    flatten_seconds = 0.0
    for graph, costs, machine, streams in steps:
        began = time.perf_counter()
        step = Keyed(graph, costs, machine, streams)
        flat = step.flat()
        flatten_seconds += time.perf_counter() - began
        distinct.setdefault(step.key, (graph, costs, machine, streams, flat))
    simpy_seconds = compiled_seconds = 0.0
    ops = events = 0
    for graph, costs, machine, streams, flat in distinct.values():
        compiled.simulate(graph, costs, flat)  # loads the cached loop
        simpy_best = compiled_best = float("inf")
        for _ in range(repeats):
            began = time.perf_counter()
            reference = engine.simulate(graph, costs, machine, streams)
            simpy_best = min(simpy_best, time.perf_counter() - began)
            began = time.perf_counter()
            fast = compiled.simulate(graph, costs, flat)
            compiled_best = min(compiled_best, time.perf_counter() - began)
        if not (
            np.array_equal(reference.end_cycle, fast.end_cycle)
            and np.array_equal(reference.start_cycle, fast.start_cycle)
            and reference.events == fast.events
        ):
            raise SimulationError("the compiled engine disagrees with the SimPy engine")
        simpy_seconds += simpy_best
        compiled_seconds += compiled_best
        ops += len(graph.ops)
        events += reference.events
    return EngineTiming(
        len(distinct), ops, events, simpy_seconds, compiled_seconds, flatten_seconds
    )
