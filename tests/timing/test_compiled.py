"""The compiled engine equals the SimPy engine; events grow linearly; engine choice.

Equality is checked op by op (start, end, stall), on the event count (the
compiled loop replays SimPy's events one for one) and on whole summaries, on
random graphs and hardware and on every golden run.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.config.interconnect import Algorithm
from accelsim.config.loader import parse_sets
from accelsim.config.run import EngineKind
from accelsim.driver import run as driver_run
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import simulate_run
from accelsim.errors import LimitError
from accelsim.graph.ops import CommOp, OpGraph, Phase, Stage, Tensor, TensorKind, TransferOp
from accelsim.network.collectives import Collective
from accelsim.timing import compiled, engine, engines
from accelsim.timing.costs import UNIT_ARRAY, UNIT_COMM, UNIT_VECTOR, OpCosts
from accelsim.timing.flat import fingerprint, flatten
from accelsim.timing.machine import Machine
from accelsim.timing.memory import StreamClass
from accelsim.timing.trace import Trace
from tests.conftest import ROOT
from tests.end_to_end.test_golden import CASES
from tests.timing.test_engine import costs, gemm, hw, machine, vector

P2P = Collective.POINT_TO_POINT


def run_compiled(graph: OpGraph, c: OpCosts, on: Machine) -> Trace:
    return compiled.simulate(graph, c, flatten(graph, c, on))


def assert_same(a: Trace, b: Trace) -> None:
    assert a.start_cycle.tolist() == b.start_cycle.tolist()
    assert a.end_cycle.tolist() == b.end_cycle.tolist()
    assert a.stall_cycles.tolist() == b.stall_cycles.tolist()
    assert (a.total_cycles, a.events, a.processors) == (b.total_cycles, b.events, b.processors)
    assert (a.engine, b.engine) == ("simpy", "compiled")


# -- random graphs on random hardware ------------------------------------------------------

GRAD = Tensor("dw", TensorKind.GRADIENT, 1000, 2)


@st.composite
def problems(
    draw: st.DrawFn, memories: st.SearchStrategy[list[str]] | None = None
) -> tuple[OpGraph, OpCosts, Any]:
    """A random DAG of array, extra-array, vector (some of them updates: the background
    stream), transfer and all-reduce ops with random costs (fixed costs per op among
    them), processors, priorities,
    DRAM sharing, arbitration and channels (or the settings ``memories`` draws:
    a model's), bandwidths and latencies."""
    procs = draw(st.integers(1, 4))
    n = draw(st.integers(1, 24))
    ops: list[Any] = []
    where: list[int] = []
    units: list[int] = []
    fields: dict[str, list[int]] = {
        k: []
        for k in (
            "compute", "overhead_cycles", "reads", "writes", "prologue_bytes", "epilogue_bytes",
            "chunks",
        )
    }  # fmt: skip
    for i in range(n):
        deps = tuple(sorted(draw(st.sets(st.integers(0, i - 1), max_size=3)) if i else ()))
        choice = draw(
            st.sampled_from(["array", "array", "extra", "vector", "update", "transfer", "comm"])
        )
        p = draw(st.integers(0, procs - 1))
        if choice == "transfer" and procs > 1:
            dest = (p + draw(st.integers(1, procs - 1))) % procs
            op: Any = TransferOp(
                i,
                f"t{i}",
                "l",
                Phase.FWD,
                Stage.FORWARD,
                GRAD,
                draw(st.integers(0, 5000)),
                p,
                dest,
                deps,
            )
            unit = UNIT_COMM
        elif choice == "comm":
            parts = tuple(sorted(draw(st.sets(st.integers(0, procs - 1), min_size=1))))
            tensor = Tensor(f"g{i}", TensorKind.GRADIENT, draw(st.integers(0, 5000)), 2)
            kind = draw(st.sampled_from([k for k in Collective if k is not P2P]))
            root = draw(st.sampled_from(parts)) if kind is Collective.BROADCAST else None
            op = CommOp(
                i, f"c{i}", "l", Phase.COMM, Stage.COMMUNICATION, tensor, parts, deps,
                collective=kind, root=root,
            )  # fmt: skip
            p = parts[0]
            unit = UNIT_COMM
        elif choice in ("vector", "update"):  # an update is the background stream
            phase = Phase.UPDATE if choice == "update" else Phase.FWD
            op, unit = vector(i, *deps, phase=phase), UNIT_VECTOR
        else:
            op, unit = gemm(i, *deps), (UNIT_ARRAY if choice == "array" else 3)
        ops.append(op)
        where.append(p)
        units.append(unit)
        fields["compute"].append(draw(st.integers(0, 3000)))
        overhead = draw(st.sampled_from([0, 0, 1, 400])) if unit != UNIT_COMM else 0
        fields["overhead_cycles"].append(min(overhead, fields["compute"][-1]))
        fields["reads"].append(draw(st.integers(0, 20000)))
        fields["writes"].append(draw(st.integers(0, 20000)))
        fields["prologue_bytes"].append(draw(st.integers(0, 5000)))
        fields["epilogue_bytes"].append(draw(st.integers(0, 5000)))
        fields["chunks"].append(draw(st.integers(1, 6)) if unit != UNIT_COMM else 1)
    priority: tuple[int, ...] = ()
    if draw(st.booleans()):
        priority = tuple(draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)))
    graph = OpGraph(ops=tuple(ops), processor=tuple(where), priority=priority)
    c = costs(units, **fields)
    c = dataclasses.replace(c, unit_names=(*c.unit_names, "extra"))
    bandwidth = draw(st.sampled_from(["0.5", "3", "64", "128", ".inf"]))
    sets = [
        f"processors={procs}",
        f"dram.sharing={draw(st.sampled_from(['shared', 'per_processor']))}",
        f"dram.arbitration={draw(st.sampled_from(['fcfs', 'priority']))}",
        *(
            draw(memories)
            if memories is not None
            else [f"dram.channels={draw(st.sampled_from([1, 1, 2, 3, 4]))}"]
        ),
        f"dram.bandwidth_bytes_per_cycle={bandwidth}",
        f"dram.latency_cycles={draw(st.integers(0, 300))}",
        f"dram.write_bandwidth_bytes_per_cycle={draw(st.sampled_from(['1', '16', '.inf']))}",
        f"interconnect.bandwidth_bytes_per_cycle={draw(st.sampled_from(['1.5', '16', '64']))}",
        f"interconnect.latency_cycles={draw(st.integers(0, 300))}",
        *draw(networks(procs)),
    ]
    return graph, c, hw(*sets)


@st.composite
def networks(draw: Any, procs: int) -> list[str]:
    """The ``--set`` of a topology for ``procs`` processors and an algorithm: the ring
    (half the time), a torus (2x2 on four), fully connected, a switch, or on four a
    switch in each of two nodes on a fabric; a multi_dim collective's chunks."""
    kinds = ["ring", "ring", "ring", "torus", "fully_connected", "switch"]
    kind = draw(st.sampled_from([*kinds, "hierarchy"] if procs == 4 else kinds))
    algorithm = f"interconnect.algorithm={draw(st.sampled_from([a.value for a in Algorithm]))}"
    chunks = f"interconnect.multi_dim_chunks={draw(st.sampled_from([1, 2, 3]))}"
    if kind == "hierarchy":
        level = "{topology: switch, dims: [2], bandwidth_bytes_per_cycle: 8, latency_cycles: 50}"
        return ["interconnect.topology=switch", f"interconnect.levels=[{level}]", algorithm, chunks]
    dims = "[2, 2]" if kind == "torus" and procs == 4 else f"[{procs}]"
    return [f"interconnect.topology={kind}", f"interconnect.dims={dims}", algorithm, chunks]


@settings(max_examples=150, deadline=None, derandomize=True)
@given(problems())
def test_compiled_equals_simpy_on_random_graphs(problem: tuple[OpGraph, OpCosts, Any]) -> None:
    graph, c, spec = problem
    on = Machine.of(spec)
    assert_same(engine.simulate(graph, c, on), run_compiled(graph, c, on))


def test_both_engines_stop_at_the_cycle_limit() -> None:
    # The first op ends one cycle after 2^62: both engines stop with the same error.
    graph = OpGraph(ops=(gemm(0), gemm(1, 0)), processor=(0, 0))
    c = costs([UNIT_ARRAY, UNIT_ARRAY], compute=[2**62 + 1, 10])
    for run in (run_compiled, engine.simulate):
        with pytest.raises(LimitError, match="2\\^62"):
            run(graph, c, machine())
    c = costs([UNIT_ARRAY, UNIT_ARRAY], compute=[2**62 - 10, 10])
    assert run_compiled(graph, c, machine()).total_cycles == 2**62


# -- golden runs: whole summaries --------------------------------------------------------


def _summary(name: str, kind: str) -> dict[str, Any]:
    run_file, sets = CASES[name]
    inputs = load_inputs(ROOT / run_file, parse_sets([*sets, f"timing.engine={kind}"]))
    return simulate_run(inputs).summary()


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_equals_simpy_on_golden_runs(name: str) -> None:
    simpy_summary = _summary(name, "simpy")
    compiled_summary = _summary(name, "compiled")
    assert (simpy_summary.pop("engine"), compiled_summary.pop("engine")) == ("simpy", "compiled")
    assert simpy_summary == compiled_summary


# -- linear growth of events -------------------------------------------------------------


def _events(run_file: str, sets: list[str], monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Events of every step the run simulates, in order."""
    seen: list[int] = []
    real = driver_run.simulate

    def spy(graph: OpGraph, c: OpCosts, spec: Any, kind: EngineKind) -> Trace:
        trace = real(graph, c, spec, kind)
        seen.append(trace.events)
        return trace

    monkeypatch.setattr(driver_run, "simulate", spy)
    driver_run.simulate_training(load_inputs(ROOT / run_file, parse_sets(sets)))
    return seen


def test_data_parallel_events_grow_linearly_in_processors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Same batch per replica: each processor adds the same ops, and each of the
    # MLP's all-reduces two events per ring step, 2(P - 1) steps: linear, so
    # events(P) is exactly a + b * P from P = 2 on (P = 1 has no all-reduce;
    # the old engine had P link events per step, so P^2 growth).
    events = {
        p: _events(
            "configs/runs/mlp.yaml",
            [f"processors={p}", "assignment=data_parallel", f"batch_size={8 * p}"],
            monkeypatch,
        )[0]
        for p in (2, 4, 8, 16)
    }
    per_processor = (events[4] - events[2]) // 2
    assert per_processor > 0
    assert events[4] - events[2] == 2 * per_processor
    assert events[8] - events[4] == 4 * per_processor
    assert events[16] - events[8] == 8 * per_processor


def test_pipedream_events_grow_linearly_in_mini_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    # PipeDream simulates M and 2M mini-batches; every mini-batch adds the same ops.
    counts = [
        _events(
            "configs/runs/mlp.yaml",
            ["processors=2", f"run.techniques={{pipedream: {{mini_batches: {m}}}}}"],
            monkeypatch,
        )[1:]
        for m in (6, 12)
    ]
    (e6, e12), (e12_again, e24) = counts
    assert e12 == e12_again
    assert e24 - e12 == 2 * (e12 - e6) > 0


# -- which engine runs -------------------------------------------------------------------


def test_auto_picks_simpy_for_small_steps_until_loading_numba_pays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    c = costs([UNIT_ARRAY], chunks=[4])
    assert engines.estimated_events(c) == engines.EVENTS_PER_OP + 4 * engines.EVENTS_PER_CHUNK
    monkeypatch.setattr(engines._Budget, "compiled", True)  # cached on disk
    monkeypatch.delitem(sys.modules, "numba", raising=False)
    monkeypatch.setattr(engines._Budget, "spent_events", 0)
    assert engines.choose(EngineKind.AUTO, c) is EngineKind.SIMPY
    monkeypatch.setattr(engines._Budget, "spent_events", engines.REFERENCE.break_even_events(True))
    assert engines.choose(EngineKind.AUTO, c) is EngineKind.COMPILED
    # Without a cache, only work that pays for compiling the loop compiles it.
    monkeypatch.setattr(engines._Budget, "compiled", False)
    assert engines.choose(EngineKind.AUTO, c) is EngineKind.SIMPY
    monkeypatch.setattr(engines._Budget, "spent_events", engines.REFERENCE.break_even_events(False))
    assert engines.choose(EngineKind.AUTO, c) is EngineKind.COMPILED
    assert engines._Budget.compiled is True  # compiled (and cached) by that step
    assert engines.choose(EngineKind.COMPILED, c) is EngineKind.COMPILED
    assert engines.choose(EngineKind.SIMPY, c) is EngineKind.SIMPY


def test_auto_counts_the_events_a_caller_says_follow(monkeypatch: pytest.MonkeyPatch) -> None:
    c = costs([UNIT_ARRAY], chunks=[4])
    events = engines.estimated_events(c)  # 17
    monkeypatch.setattr(engines._Budget, "compiled", True)
    monkeypatch.delitem(sys.modules, "numba", raising=False)
    # One step short of the break-even alone; with twice as many to follow, over it.
    monkeypatch.setattr(
        engines._Budget, "spent_events", engines.REFERENCE.break_even_events(True) - events - 1
    )
    with engines.followed_by(2.0):
        assert engines.choose(EngineKind.AUTO, c) is EngineKind.COMPILED
    assert engines._Budget.following == 0.0
    assert engines.choose(EngineKind.AUTO, c) is EngineKind.SIMPY
    monkeypatch.setattr(
        engines._Budget, "spent_events", engines.REFERENCE.break_even_events(True) - 3 * events - 1
    )
    with engines.followed_by(2.0):
        assert engines.choose(EngineKind.AUTO, c) is EngineKind.SIMPY
    # A sweep worker's remaining points: the first point already pays for a compile.
    monkeypatch.setattr(engines._Budget, "compiled", False)
    monkeypatch.setattr(engines._Budget, "spent_events", 0)
    with engines.followed_by(engines.REFERENCE.break_even_events(False) // events):
        assert engines.choose(EngineKind.AUTO, c) is EngineKind.COMPILED


def test_auto_looks_for_the_cache_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    looks: list[int] = []

    def cached() -> bool:
        looks.append(1)
        return False

    monkeypatch.setattr(engines, "compiled_cached", cached)
    monkeypatch.setattr(engines._Budget, "compiled", None)
    monkeypatch.setattr(engines._Budget, "spent_events", 0)
    c = costs([UNIT_ARRAY], chunks=[4])
    for _ in range(3):
        assert engines.choose(EngineKind.AUTO, c) is EngineKind.SIMPY
    assert looks == [1]


def test_trace_names_its_engine() -> None:
    graph = OpGraph(ops=(gemm(0),), processor=(0,))
    c = costs([UNIT_ARRAY], compute=[10])
    assert engines.simulate(graph, c, machine(), EngineKind.SIMPY).engine == "simpy"
    assert engines.simulate(graph, c, machine(), EngineKind.COMPILED).engine == "compiled"
    assert np.array_equal(
        engines.simulate(graph, c, machine(), EngineKind.SIMPY).end_cycle,
        engines.simulate(graph, c, machine(), EngineKind.COMPILED).end_cycle,
    )


# -- memoised steps ----------------------------------------------------------------------


def test_the_fingerprint_sees_everything_that_decides_timing() -> None:
    graph = OpGraph(ops=(gemm(0), vector(1, 0)), processor=(0, 0))
    c = costs([UNIT_ARRAY, UNIT_VECTOR], compute=[10, 5], reads=[100, 0])
    key = fingerprint(graph, c, machine())
    renamed = OpGraph(ops=(gemm(0), vector(1, 0)), processor=(0, 0), on_chip=frozenset({"x"}))
    assert fingerprint(renamed, c, machine()) == key  # timing reads costs, not names
    assert fingerprint(graph, c, machine("dram.latency_cycles=7")) != key
    # A link's latency decides the timing of what is sent on it, and of nothing else.
    assert fingerprint(graph, c, machine("interconnect.latency_cycles=7")) == key
    sent = OpGraph(
        ops=(gemm(0), TransferOp(1, "t", "l", Phase.FWD, Stage.FORWARD, GRAD, 8, 0, 1, (0,))),
        processor=(0, 0),
    )
    two = costs([UNIT_ARRAY, UNIT_COMM], compute=[10, 0])
    sent_key = fingerprint(sent, two, machine("processors=2"))
    latency = machine("processors=2", "interconnect.latency_cycles=7")
    assert fingerprint(sent, two, latency) != sent_key
    other = costs([UNIT_ARRAY, UNIT_VECTOR], compute=[10, 5], reads=[100, 1])
    assert fingerprint(graph, other, machine()) != key
    launched = costs([UNIT_ARRAY, UNIT_VECTOR], compute=[10, 5], reads=[100, 0])
    launched = dataclasses.replace(launched, overhead_cycles=np.array([3, 0]))
    assert fingerprint(graph, launched, machine()) != key
    unordered = OpGraph(ops=(gemm(0), vector(1)), processor=(0, 0))
    assert fingerprint(unordered, c, machine()) != key
    prioritised = OpGraph(ops=(gemm(0), vector(1, 0)), processor=(0, 0), priority=(1, 0))
    assert fingerprint(prioritised, c, machine()) != key
    # The streams always count, whether or not the memory looks at them now.
    reads, writes = np.array([0, 0]), np.array([0, 0])
    assert fingerprint(graph, c, machine(), (reads, writes)) == key
    weights = (np.array([0, StreamClass.WEIGHT]), writes)
    assert fingerprint(graph, c, machine(), weights) != key


def test_a_step_is_simulated_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engines._Memo, "steps", type(engines._Memo.steps)())
    monkeypatch.setattr(engines._Memo, "hits", 0)
    inputs = load_inputs(ROOT / "configs/runs/mlp.yaml", parse_sets(["timing.engine=simpy"]))
    first = simulate_run(inputs).summary()
    assert engines._Memo.hits == 0
    again = load_inputs(ROOT / "configs/runs/mlp.yaml", parse_sets(["timing.engine=simpy"]))
    assert simulate_run(again).summary() == first
    assert engines._Memo.hits == 1
    # ADA-GP's baseline is the same step: reused; its BP and GP steps are new.
    gp = ["timing.engine=simpy", "run.techniques={gradient_prediction: {}}"]
    driver_run.simulate_training(load_inputs(ROOT / "configs/runs/mlp.yaml", parse_sets(gp)))
    assert engines._Memo.hits == 2
    assert len(engines._Memo.steps) == 3
