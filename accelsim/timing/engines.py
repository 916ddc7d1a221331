"""Which event engine runs a step: the SimPy reference or the compiled twin.

Both give the same :class:`~accelsim.timing.trace.Trace`
(``tests/timing/test_compiled.py``).
The compiled engine is 30-75x faster per event, but a process pays about 0.4 s
to load Numba and the cached loop (importing Numba, its CPU target's set-up and
the one cached overload of the loop, that of the step's DRAM model;
:mod:`accelsim.timing.numba_setup` keeps SciPy out of it), and about 6 s once, to
compile the loop when no cache exists, while a ResNet-18 step is about 5,000
events, 8 ms of SimPy.
``auto`` therefore decides like :mod:`accelsim.timing.backend`, by cost
(:mod:`accelsim.timing.engine_costs`: each engine's cost per event, the load and the
compile, measured on the reference machine): SimPy until the events simulated in
this process, with those of the step at hand and those a caller says will follow
(:func:`followed_by`: a pipeline's second graph, a sweep's remaining points), would
cost more than loading Numba and the cached loop (or, with no cache on disk,
compiling it first, which writes the cache for every later process) and running
them compiled; the compiled engine once Numba is loaded anyway.  The disk is looked
at for the cache once per process.  Neither engine is imported before it runs.

A compile is never silent when a caller listens (:func:`notices`): before the first
compiled step of a process finds no cache, the listener is told, with the compile's
expected cost; the command line prints it on stderr.  ``accelsim compile`` pays it
ahead, for every DRAM model.

Simulated steps are memoised within a process, keyed by the step's
:func:`~accelsim.timing.flat.fingerprint` (all that decides its timing: the ops'
costs and streams, every memory's model, parameters and state, the links) and the
engine asked for: experiment scripts that simulate the same step under
settings that do not change it (a baseline for every technique setting, a
step kind whose graph a setting leaves alone) run the engine once, and a step
whose timing could differ is never served another's.
"""

from __future__ import annotations

import os
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

import numpy as np

from accelsim.config.run import EngineKind
from accelsim.graph.ops import OpGraph
from accelsim.timing.costs import OpCosts
from accelsim.timing.engine_costs import REFERENCE, EngineCosts
from accelsim.timing.flat import Keyed
from accelsim.timing.machine import Machine
from accelsim.timing.streams import Streams
from accelsim.timing.trace import Trace, build_trace

# The events an op costs besides its tile groups (get, put, prologue, join, drains).
EVENTS_PER_OP = 5
EVENTS_PER_CHUNK = 3

# Simulated steps kept for reuse (least recently used dropped first).
MEMO_STEPS = 128


class _Budget:
    """Events simulated with SimPy so far in this process (``auto``), the multiple of
    a step's events its caller said will follow it (:func:`followed_by`), whether
    the compiled loop is cached on disk or loaded (``None``: not looked yet), and what
    each engine costs."""

    spent_events = 0
    following = 0.0
    compiled: bool | None = None
    costs: EngineCosts = REFERENCE


class _Notices:
    """Who is told before the compiled loop is compiled (:func:`notices`)."""

    tell: Callable[[str], None] | None = None


class _Memo:
    """Timing of the steps simulated in this process, by fingerprint and engine asked."""

    steps: ClassVar[OrderedDict[tuple[bytes, str], tuple[np.ndarray, np.ndarray, int, str]]] = (
        OrderedDict()
    )
    hits = 0


Step = tuple[OpGraph, OpCosts, Machine, Streams | None]


class _Recorder:
    """Where :func:`recorded_steps` collects the steps simulated inside it."""

    steps: ClassVar[list[Step] | None] = None


@contextmanager
def recorded_steps() -> Iterator[list[Step]]:
    """Collect ``(graph, costs, machine, streams)`` of every step simulated inside the
    block, memoised ones included (for benchmarks of the engines)."""
    steps: list[Step] = []
    outer, _Recorder.steps = _Recorder.steps, steps
    try:
        yield steps
    finally:
        _Recorder.steps = outer


@contextmanager
def followed_by(factor: float) -> Iterator[None]:
    """Inside the block, ``auto`` knows that about ``factor`` times a step's events
    will be simulated right after it (a pipeline schedule's ``2M``-mini-batch graph
    after its ``M`` one): it counts them towards the break-even, so it loads Numba
    for the first step already when the two together would pay for it, instead
    of running the first in SimPy and loading Numba for the second anyway."""
    outer, _Budget.following = _Budget.following, factor
    try:
        yield
    finally:
        _Budget.following = outer


@contextmanager
def notices(tell: Callable[[str], None]) -> Iterator[None]:
    """Inside the block, ``tell`` is called with a line saying so (and its expected
    cost) before a step compiles the event loop, when no cache of it is on disk."""
    outer, _Notices.tell = _Notices.tell, tell
    try:
        yield
    finally:
        _Notices.tell = outer


def compile_notice(costs: EngineCosts) -> str:
    """The line :func:`notices` passes on before the loop compiles."""
    return f"compiling the event loop once (about {costs.compile_s:.0f} s)"


def estimated_events(costs: OpCosts) -> int:
    """About how many events a step of these costs takes (tile groups dominate)."""
    return EVENTS_PER_OP * len(costs.unit) + EVENTS_PER_CHUNK * int(costs.chunks.sum())


def compiled_cached() -> bool:
    """Whether the compiled loop's cache index is on disk where Numba keeps it: next to
    its module, in ``NUMBA_CACHE_DIR``, or in the user's cache directory when the
    package directory is read-only.  (After the module's source changes, Numba
    compiles once more despite the index; and the index holds the loop of each DRAM
    model that has run, so a model's first step compiles its loop once more.)"""
    here = Path(__file__).resolve().parent
    places = [here / "__pycache__"]
    if os.environ.get("NUMBA_CACHE_DIR"):
        places.append(Path(os.environ["NUMBA_CACHE_DIR"]))
    user_cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "numba"
    places.append(user_cache)
    pattern = "event_loop.run_events-*.nbi"
    return any(place.is_dir() and any(place.rglob(pattern)) for place in places)


def choose(kind: EngineKind, costs: OpCosts) -> EngineKind:
    """The engine that runs a step of ``costs`` when ``kind`` is asked for."""
    if kind is not EngineKind.AUTO:
        return kind
    if _Budget.compiled is None:
        _Budget.compiled = compiled_cached()
    if "numba" in sys.modules and _Budget.compiled:
        return EngineKind.COMPILED
    events = estimated_events(costs)
    ahead = int(events * _Budget.following)
    if _Budget.costs.compiled_pays(_Budget.spent_events + events + ahead, _Budget.compiled):
        _Budget.compiled = True  # loaded, or compiled and cached, by this step
        return EngineKind.COMPILED
    _Budget.spent_events += events
    return EngineKind.SIMPY


def _announce_compile() -> None:
    """Tell the listener (:func:`notices`) when this process's first compiled step
    will compile the loop: no cache of it is on disk."""
    if _Notices.tell is None or "accelsim.timing.compiled" in sys.modules:
        return
    if not compiled_cached():
        _Notices.tell(compile_notice(_Budget.costs))


def simulate(
    graph: OpGraph,
    costs: OpCosts,
    machine: Machine,
    kind: EngineKind = EngineKind.AUTO,
    streams: Streams | None = None,
) -> Trace:
    """Run ``graph`` with ``costs`` on ``machine`` with the engine :func:`choose` picks
    (or reuse the timing of the same step simulated before); the trace names the
    engine that ran it.  The ops' DRAM transfers are of ``streams`` (by default
    :func:`~accelsim.timing.streams.op_streams`').

    Raises:
        SimulationError: if some op can never run.
        LimitError: if the step takes more than :data:`~accelsim.errors.MAX_COUNT` cycles.
    """
    if _Recorder.steps is not None:
        _Recorder.steps.append((graph, costs, machine, streams))
    step = Keyed(graph, costs, machine, streams)
    key = (step.key, kind.value)
    known = _Memo.steps.get(key)
    if known is not None:
        _Memo.steps.move_to_end(key)
        _Memo.hits += 1
        start, end, events, engine_name = known
        return build_trace(
            graph, costs, machine.processors, start.copy(), end.copy(), events, engine_name
        )
    if choose(kind, costs) is EngineKind.COMPILED:
        _announce_compile()
        from accelsim.timing import compiled  # loads Numba

        _Budget.compiled = True

        trace = compiled.simulate(graph, costs, step.flat())
    else:
        from accelsim.timing import engine  # loads SimPy

        flat = step.flat()
        streams_of = (flat.read_stream, flat.write_stream)
        trace = engine.simulate(graph, costs, machine, streams_of, flat.priority)
    _Memo.steps[key] = (
        trace.start_cycle.copy(),
        trace.end_cycle.copy(),
        trace.events,
        trace.engine,
    )
    if len(_Memo.steps) > MEMO_STEPS:
        _Memo.steps.popitem(last=False)
    return trace
