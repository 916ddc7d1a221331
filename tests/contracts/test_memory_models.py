"""What every registered DRAM model must keep (the contract of timing/memory.py), model
by model: bytes booked exactly once over its channels, no reservation faster than its
bound, the SimPy and compiled engines (and a lone op's arithmetic) equal on it, and
its parameters in the memo key.

Each model is exercised through hardware files' settings (:data:`SAMPLES`); a model
registered without samples fails
:func:`test_every_registered_model_has_samples_a_spec_and_a_code_of_its_own`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, get_args

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.config.dram import DramModelSpec
from accelsim.graph.ops import OpGraph, Phase
from accelsim.timing import compiled, engine, event_loop
from accelsim.timing.costs import UNIT_ARRAY, UNIT_VECTOR, OpCosts
from accelsim.timing.flat import fingerprint, flatten
from accelsim.timing.machine import Machine
from accelsim.timing.memories import compiled as kernels
from accelsim.timing.memories import registry
from accelsim.timing.memory import MemoryState, Stream, StreamClass
from accelsim.timing.numba_setup import literal
from accelsim.timing.single_op import simulate_single_op
from tests.timing.test_compiled import assert_same, problems
from tests.timing.test_engine import costs, gemm, hw, vector

SAMPLES: dict[str, list[list[str]]] = {
    "fifo": [["dram.model=fifo"]],
    "interleaved": [["dram.channels=2"], ["dram.channels=3"], ["dram.channels=4"]],
    "row_buffer": [
        ["dram.model=row_buffer"],
        ["dram.model=row_buffer", "dram.row_bytes=512", "dram.miss_cycles=7"],
        ["dram.model=row_buffer", "dram.channels=3", "dram.row_bytes=300"],
        ["dram.model=row_buffer", "dram.channels=2", "dram.miss_cycles=0"],
    ],
}
"""Each model's memories as ``--set`` overrides of the default hardware."""

EXACT: dict[str, list[str]] = {"row_buffer": ["dram.miss_cycles=0"]}
"""Settings that take a model's own cycles besides its bytes away (a row buffer's
misses), so that a channel is busy exactly its share of the bytes."""

MODELS = sorted(registry.MODELS)


def memory(sets: list[str]) -> MemoryState:
    """Processor 0's memory of the default hardware with ``sets``, fresh."""
    return Machine.of(hw(*sets)).memories()[0]


def test_every_registered_model_has_samples_a_spec_and_a_code_of_its_own() -> None:
    assert set(SAMPLES) == set(MODELS)
    specs = {
        get_args(m)[0].model_fields["model"].annotation
        for m in get_args(get_args(DramModelSpec)[0])
    }
    assert {get_args(literal)[0] for literal in specs} == set(MODELS)
    codes: dict[str, set[int]] = {name: set() for name in MODELS}
    for name in MODELS:
        for sets in SAMPLES[name]:
            model = Machine.of(hw(*sets)).dram[0]
            assert model.name == name
            codes[name].add(model.code)
    assert all(len(found) == 1 for found in codes.values())  # one code a model
    assert len(set.union(*codes.values())) == len(MODELS)  # none shared


requests = st.lists(
    st.tuples(
        st.integers(0, 3000),  # cycles after the previous request
        st.integers(1, 5000),  # bytes
        st.sampled_from(list(StreamClass)),
        st.booleans(),  # a write
    ),
    min_size=1,
    max_size=40,
)


@pytest.mark.parametrize("name", MODELS)
@settings(max_examples=40, deadline=None, derandomize=True)
@given(requests=requests, choice=st.integers(0, 10))
def test_bytes_are_booked_exactly_once_over_the_channels(
    name: str, requests: list[tuple[int, int, StreamClass, bool]], choice: int
) -> None:
    # At one byte per cycle and nothing but bytes to pay, each channel a transfer
    # touches is busy from when it is free (or the request) for exactly its share of
    # the bytes, the shares add up to the transfer, no channel is booked back in time,
    # and the transfer arrives when its last share has.
    sets = SAMPLES[name][choice % len(SAMPLES[name])]
    state = memory([*sets, *EXACT.get(name, []), "dram.bandwidth_bytes_per_cycle=1",
                    "dram.latency_cycles=0"])  # fmt: skip
    now = 0
    for gap, n_bytes, kind, write in requests:
        now += gap
        before = state.model.channel_free(state.state)
        arrival = state.reserve(now, n_bytes, Stream(kind, write=write))
        after = state.model.channel_free(state.state)
        booked = [(max(now, b), a) for b, a in zip(before, after, strict=True) if a != b]
        assert all(end > start >= now for start, end in booked)
        assert sum(end - start for start, end in booked) == n_bytes
        assert arrival == max(end for _, end in booked)


@pytest.mark.parametrize("name", MODELS)
@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    choice=st.integers(0, 10),
    bandwidth=st.sampled_from(["0.5", "3", "128", ".inf"]),
    latency=st.integers(0, 300),
    now=st.integers(0, 10**6),
    n_bytes=st.integers(1, 10**6),
    kind=st.sampled_from(list(StreamClass)),
    write=st.booleans(),
)
def test_no_transfer_leaves_an_idle_memory_sooner_than_its_bound(
    name: str,
    choice: int,
    bandwidth: str,
    latency: int,
    now: int,
    n_bytes: int,
    kind: StreamClass,
    write: bool,
) -> None:
    sets = SAMPLES[name][choice % len(SAMPLES[name])]
    state = memory([*sets, f"dram.bandwidth_bytes_per_cycle={bandwidth}",
                    f"dram.latency_cycles={latency}"])  # fmt: skip
    arrival = state.reserve(now, n_bytes, Stream(kind, write=write))
    bound = float(state.model.bound(float(n_bytes), write=write))
    assert arrival - now - latency >= bound * (1 - 1e-12)


def _pick(name: str) -> st.SearchStrategy[list[str]]:
    return st.sampled_from(SAMPLES[name])


@pytest.mark.parametrize("name", MODELS)
def test_the_simpy_and_compiled_engines_agree(name: str) -> None:
    @settings(max_examples=60, deadline=None, derandomize=True)
    @given(problem=problems(memories=_pick(name)))
    def check(problem: tuple[OpGraph, OpCosts, Any]) -> None:
        graph, c, spec = problem
        on = Machine.of(spec)
        assert_same(
            engine.simulate(graph, c, on), compiled.simulate(graph, c, flatten(graph, c, on))
        )

    check()


def test_the_engines_agree_on_memories_of_several_models() -> None:
    # Processor p's memory of model p + shift: the loop compiled for MIXED books each
    # memory with its own model's kernel, event for event as SimPy does.
    @settings(max_examples=60, deadline=None, derandomize=True)
    @given(problem=problems(), shift=st.integers(0, 2), choice=st.integers(0, 10))
    def check(problem: tuple[OpGraph, OpCosts, Any], shift: int, choice: int) -> None:
        graph, c, spec = problem
        own = [f"dram.arbitration={spec.dram.arbitration.value}",
               f"dram.latency_cycles={spec.dram.latency_cycles}"]  # fmt: skip
        dram = []
        for p in range(spec.processors):
            samples = SAMPLES[MODELS[(p + shift) % len(MODELS)]]
            dram.append(Machine.of(hw(*samples[choice % len(samples)], *own)).dram[0])
        on = dataclasses.replace(Machine.of(spec), dram=tuple(dram))
        flat = flatten(graph, c, on)
        assert (kernels.model_of(flat.dram).code == kernels.MIXED) == (spec.processors > 1)
        assert_same(engine.simulate(graph, c, on), compiled.simulate(graph, c, flat))

    check()


def test_each_model_runs_a_loop_compiled_for_it() -> None:
    # The loop takes the model of the step's memories as a literal: one compiled loop
    # per model, in which booking is that model's kernel alone.
    graph = OpGraph(ops=(gemm(0),), processor=(0,))
    c = costs([UNIT_ARRAY], compute=[100], reads=[3000], writes=[900])
    codes = set()
    for name in MODELS:
        on = Machine.of(hw(*SAMPLES[name][0]))
        codes.add(on.dram[0].code)
        flat = flatten(graph, c, on)
        assert kernels.model_of(flat.dram).code == on.dram[0].code
        assert_same(engine.simulate(graph, c, on), compiled.simulate(graph, c, flat))
    assert len(codes) == len(MODELS)
    compiled_for = {signature[-1] for signature in event_loop.run_events.signatures}
    assert {literal(code) for code in codes} <= compiled_for


@pytest.mark.parametrize("name", MODELS)
@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    choice=st.integers(0, 10),
    chunks=st.integers(1, 8),
    compute=st.integers(0, 5000),
    reads=st.integers(0, 40000),
    writes=st.integers(0, 40000),
    bandwidth=st.sampled_from(["0.5", "3", "128"]),
)
def test_a_lone_op_times_as_in_the_engine(
    name: str, choice: int, chunks: int, compute: int, reads: int, writes: int, bandwidth: str
) -> None:
    sets = [
        *SAMPLES[name][choice % len(SAMPLES[name])],
        f"dram.bandwidth_bytes_per_cycle={bandwidth}",
    ]
    on = Machine.of(hw(*sets))
    graph = OpGraph(ops=(gemm(0),), processor=(0,))
    c = costs([UNIT_ARRAY], compute=[compute], reads=[reads], writes=[writes], chunks=[chunks],
              prologue_bytes=[reads // 3], epilogue_bytes=[writes // 5])  # fmt: skip
    reference = engine.simulate(graph, c, on)
    assert simulate_single_op(graph, c, on).end_cycle.tolist() == reference.end_cycle.tolist()


def _key(sets: list[str]) -> bytes:
    graph = OpGraph(
        ops=(gemm(0), vector(1, 0, phase=Phase.UPDATE), gemm(2, 1)), processor=(0, 0, 0)
    )
    c = costs([UNIT_ARRAY, UNIT_VECTOR, UNIT_ARRAY], compute=[100, 10, 50],
              reads=[3000, 500, 700], writes=[900, 500, 0])  # fmt: skip
    return fingerprint(graph, c, Machine.of(hw(*sets)))


@pytest.mark.parametrize("name", MODELS)
def test_the_memo_key_holds_the_model_and_every_parameter(name: str) -> None:
    for sets in SAMPLES[name]:
        key = _key(sets)
        assert _key(list(sets)) == key  # built again: the same key
        changes = [
            "dram.bandwidth_bytes_per_cycle=64",
            "dram.write_bandwidth_bytes_per_cycle=32",
            "dram.latency_cycles=7",
            "dram.arbitration=priority",
        ]
        dram = hw(*sets).dram
        for key_name, value in dram.parameters().items():
            changes.append(f"dram.{key_name}={2 * value + 1}")
        for change in changes:
            assert _key([*sets, change]) != key, change
        others = [s for other in MODELS if other != name for s in SAMPLES[other]]
        same_channels = [s for s in others if hw(*s).dram.channels == dram.channels]
        for other in same_channels:
            assert _key(other) != key, other


def test_the_memo_key_holds_the_memories_state_size_and_sharing() -> None:
    assert _key(["dram.channels=2"]) != _key(["dram.channels=3"])
    shared, own = _key(["processors=2"]), _key(["processors=2", "dram.sharing=per_processor"])
    assert shared != own
    assert np.array_equal(
        flatten(
            OpGraph(ops=(gemm(0),), processor=(0,)), costs([UNIT_ARRAY]), Machine.of(hw())
        ).dram.state,
        [0],
    )
