"""The single-op timing of ``accelsim layer`` is the SimPy engine's, without SimPy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.config.base import Convention
from accelsim.config.hardware import HardwareSpec
from accelsim.config.run import PsumPolicy
from accelsim.driver.layer import LayerGemm, conv_gemm, gemm_for, layer_graph
from accelsim.errors import MAX_COUNT, LimitError
from accelsim.graph.ops import Phase
from accelsim.mapping.schedule import schedule
from accelsim.mapping.units import main_array
from accelsim.timing import engine
from accelsim.timing.costs import OpCosts, op_costs
from accelsim.timing.machine import Machine
from accelsim.timing.single_op import ENGINE_NAME, simulate_single_op, single_op_cycles
from tests.conftest import make_hw

PHASES = [Phase.FWD, Phase.BWD_INPUT, Phase.BWD_WEIGHT]


def layer_costs(
    hw: HardwareSpec,
    gemm: LayerGemm,
    phase: Phase,
    convention: Convention,
    psums: PsumPolicy,
    chunks_per_op: int,
) -> tuple[object, OpCosts]:
    graph = layer_graph(hw, gemm, phase)
    costs = op_costs(
        graph, schedule(graph, (main_array(hw),)), Machine.of(hw), convention, psums, chunks_per_op
    )
    return graph, costs


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    mnk=st.tuples(*[st.integers(1, 3000)] * 3),
    phase=st.sampled_from(PHASES),
    convention=st.sampled_from(list(Convention)),
    psums=st.sampled_from(list(PsumPolicy)),
    chunks_per_op=st.sampled_from([1, 2, 3, 8, 64]),
    array=st.tuples(st.sampled_from([4, 16, 128]), st.sampled_from([4, 32, 128])),
    dataflow=st.sampled_from(["os", "ws", "is"]),
    kib=st.sampled_from([64, 256, 4096]),
    bandwidth=st.sampled_from([0.5, 3, 128, math.inf]),
    latency=st.sampled_from([0, 1, 100, 777]),
    sharing=st.sampled_from(["shared", "per_processor"]),
    overhead=st.sampled_from([0, 0, 1, 700]),
)
def test_a_lone_gemm_times_as_in_the_simpy_engine(
    mnk: tuple[int, int, int],
    phase: Phase,
    convention: Convention,
    psums: PsumPolicy,
    chunks_per_op: int,
    array: tuple[int, int],
    dataflow: str,
    kib: float,
    bandwidth: float,
    latency: int,
    sharing: str,
    overhead: int,
) -> None:
    hw = make_hw(
        **{
            "timing": {"op_overhead_cycles": overhead},
            "array.rows": array[0],
            "array.cols": array[1],
            "array.dataflow": dataflow,
            "buffers.ifmap_kib": kib,
            "buffers.filter_kib": kib,
            "buffers.ofmap_kib": kib,
            "dram.bandwidth_bytes_per_cycle": bandwidth,
            "dram.latency_cycles": latency,
            "dram.sharing": sharing,
        }
    )
    gemm = gemm_for(*mnk, phase)
    graph, costs = layer_costs(hw, gemm, phase, convention, psums, chunks_per_op)
    reference = engine.simulate(graph, costs, Machine.of(hw))
    trace = simulate_single_op(graph, costs, Machine.of(hw))
    assert trace.total_cycles == reference.total_cycles
    np.testing.assert_array_equal(trace.start_cycle, reference.start_cycle)
    np.testing.assert_array_equal(trace.end_cycle, reference.end_cycle)
    np.testing.assert_array_equal(trace.stall_cycles, reference.stall_cycles)
    assert (trace.engine, trace.events) == (ENGINE_NAME, 0)


@pytest.mark.parametrize(
    ("read", "write"), [(64, 2), (2, 64), (float("inf"), 4), (8, float("inf"))]
)
def test_reads_and_writes_at_their_own_bandwidths_match(read: float, write: float) -> None:
    hw = make_hw(**{"dram.read_bandwidth_bytes_per_cycle": read,
                    "dram.write_bandwidth_bytes_per_cycle": write})  # fmt: skip
    for shape in ((300, 500, 40), (64, 4096, 2048)):
        gemm = gemm_for(*shape, Phase.FWD)
        graph, costs = layer_costs(hw, gemm, Phase.FWD, Convention.ACCELSIM, PsumPolicy.CHUNK, 64)
        reference = engine.simulate(graph, costs, Machine.of(hw))
        assert (
            simulate_single_op(graph, costs, Machine.of(hw)).total_cycles == reference.total_cycles
        )  # type: ignore[arg-type]


def test_a_write_bound_gemm_takes_its_writes_over_the_write_bandwidth() -> None:
    # m = 4,096, n = 128, k = 1: 1 MiB of bf16 output against 8 KiB read and 4,478
    # compute cycles (2 * 128 + 128 + 4,096 - 2); one tile group (chunks_per_op 1): the
    # reads, the compute, then the whole output at 16 B/cycle (65,536 cycles), latency 0.
    hw = make_hw(**{"dram.latency_cycles": 0, "dram.read_bandwidth_bytes_per_cycle": 1024,
                    "dram.write_bandwidth_bytes_per_cycle": 16})  # fmt: skip
    gemm = gemm_for(4096, 128, 1, Phase.FWD)
    _, costs = layer_costs(hw, gemm, Phase.FWD, Convention.ACCELSIM, PsumPolicy.CHUNK, 1)
    reads, writes = int(costs.dram_read_bytes[0]), int(costs.dram_ofmap_write_bytes[0])
    assert (reads, writes, int(costs.compute_cycles[0])) == (
        4096 * 2 + 128 * 2,
        4096 * 128 * 2,
        4478,
    )
    assert single_op_cycles(costs, Machine.of(hw)) == -(-reads // 1024) + 4478 + writes // 16


def test_the_fixed_cost_per_op_passes_before_any_traffic() -> None:
    # A read-bound GEMM (64 x 4,096 x 2,048 at 8 B/cycle) in 64 tile groups: its
    # traffic would hide a fixed cost counted inside its compute; it comes first, so
    # the op ends exactly that much later.
    gemm = gemm_for(64, 4096, 2048, Phase.FWD)
    ends = []
    for overhead in (0, 5000):
        hw = make_hw(**{"dram.bandwidth_bytes_per_cycle": 8,
                        "timing": {"op_overhead_cycles": overhead}})  # fmt: skip
        _, costs = layer_costs(hw, gemm, Phase.FWD, Convention.ACCELSIM, PsumPolicy.CHUNK, 64)
        assert int(costs.overhead_cycles[0]) == overhead
        ends.append(single_op_cycles(costs, Machine.of(hw)))
        reads = int(costs.dram_read_bytes[0])
        assert ends[-1] > reads // 8 > int(costs.compute_cycles[0])  # read-bound
    assert ends[1] == ends[0] + 5000


def test_a_conv_with_many_tile_groups_and_stalls_matches() -> None:
    hw = make_hw(**{"dram.bandwidth_bytes_per_cycle": 2, "array.dataflow": "os"})
    gemm = conv_gemm(58, 58, 3, 3, 64, 64, 1, Phase.FWD, Convention.ACCELSIM)
    graph, costs = layer_costs(hw, gemm, Phase.FWD, Convention.ACCELSIM, PsumPolicy.CHUNK, 64)
    assert int(costs.chunks[0]) > 1
    reference = engine.simulate(graph, costs, Machine.of(hw))
    trace = simulate_single_op(graph, costs, Machine.of(hw))
    assert int(reference.stall_cycles[0]) > 0
    assert trace.total_cycles == reference.total_cycles


def test_too_many_cycles_is_the_engines_limit_error() -> None:
    hw = make_hw(**{"dram.bandwidth_bytes_per_cycle": 0.001})
    # each of its costs under 2^62 cycles, its prologue, folds and epilogue past it
    gemm = gemm_for(2**21, 2**20, 2**16, Phase.FWD)
    graph, costs = layer_costs(hw, gemm, Phase.FWD, Convention.ACCELSIM, PsumPolicy.SPILL, 8)
    with pytest.raises(LimitError) as simpy_error:
        engine.simulate(graph, costs, Machine.of(hw))
    with pytest.raises(LimitError) as error:
        single_op_cycles(costs, Machine.of(hw))
    assert str(error.value) == str(simpy_error.value)
    assert f"{MAX_COUNT:.3g}" in str(error.value)
