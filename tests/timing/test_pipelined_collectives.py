"""A multi_dim collective's chunks pipelined across the dimensions in both engines
(:func:`accelsim.timing.sends.pipelined`): without contention the engines take
:func:`accelsim.network.cost.pipeline_cycles`.

Links carry 64 B/cycle without latency and the DRAM is ideal, as in
``test_collective_kinds``: a collective's time is its links'.
"""

from __future__ import annotations

import pytest

from accelsim.config.interconnect import Algorithm
from accelsim.graph.ops import OpGraph, Phase, Stage, TransferOp
from accelsim.network.collectives import Collective
from accelsim.network.cost import phase_cycles, pipeline_cycles, plan
from accelsim.timing.costs import UNIT_COMM
from accelsim.timing.machine import Machine
from tests.timing.test_collective_kinds import AG, AR, HIERARCHY, RS, S, collective, run_alone
from tests.timing.test_engine import Y, costs, hw
from tests.timing.test_network_timing import IDEAL_DRAM, NO_LATENCY, both

TORUS = [
    "processors=8",
    "interconnect.topology=torus",
    "interconnect.dims=[2, 4]",
    "interconnect.algorithm=multi_dim",
]

CASES = [
    # 2x4 torus, 6144 B.  One chunk: the phases one after the other, 48 along
    # dimension 0 and 18 along dimension 1 (test_collective_kinds).
    ("torus", RS, 1, 48 + 18),
    ("torus", AR, 1, 2 * (48 + 18)),
    # Two chunks of 3072 B: a reduce-scatter's phases take 24 and 9; the second chunk
    # follows the first at the slower phase's rate: 24 + 9 + 24 = 57 (not 2 x 33).
    ("torus", RS, 2, 57),
    ("torus", AG, 2, 57),
    # An all-reduce's chunk: 24, 9, 9, 24, the all-gather along dimension 0 sharing its
    # links with the reduce-scatter.  Chunk 0 runs 0..24, 24..33, 33..42; chunk 1's
    # reduce-scatter takes dimension 0 at 24..48, so chunk 0's all-gather there runs
    # 48..72; chunk 1 runs 48..57 and 57..66 along dimension 1, then 72..96 along 0.
    ("torus", AR, 2, 96),
    # Four chunks of 1536 B: 12 and ceil(96 / 64) x 3 = 6: 12 + 6 + 3 x 12 = 54.
    ("torus", RS, 4, 54),
    ("torus", AR, 4, 96),
    # 4 chips on a switch, 2 nodes on a fabric of 8 B/cycle: one chunk 72 and 96
    # (test_collective_kinds); two chunks 36 and 48: 36 + 48 + 48 = 132.
    ("hierarchy", RS, 1, 72 + 96),
    ("hierarchy", RS, 2, 132),
    ("hierarchy", AG, 2, 132),
    ("hierarchy", AR, 1, 336),
    ("hierarchy", AR, 2, 264),
    # Four chunks: 18 and 24: 18 + 24 + 3 x 24 = 114.
    ("hierarchy", RS, 4, 114),
    ("hierarchy", AR, 4, 228),
]


def network(name: str, chunks: int) -> Machine:
    sets = TORUS if name == "torus" else HIERARCHY
    return Machine.of(
        hw(*sets, *IDEAL_DRAM, *NO_LATENCY, f"interconnect.multi_dim_chunks={chunks}")
    )


@pytest.mark.parametrize(("name", "kind", "chunks", "expected"), CASES)
def test_the_engines_pipeline_chunks_as_the_closed_form(
    name: str, kind: Collective, chunks: int, expected: int
) -> None:
    on = network(name, chunks)
    schedule = plan(on.network, kind, tuple(range(8)), S, Algorithm.MULTI_DIM)
    durations = phase_cycles(on.network, schedule)
    dimensions = [phase.dimension for phase in schedule.phases]
    assert pipeline_cycles(durations, dimensions, chunks) == expected
    assert run_alone(on, kind, 8, S) == expected
    if chunks > 1:  # faster than the chunks one after the other
        assert expected < chunks * sum(durations)


def test_a_pipelined_all_reduce_keeps_each_dimensions_order_under_contention() -> None:
    # Two chunks of an all-reduce on the 2x4 torus (phases 24, 9, 9, 24 alone) and a
    # transfer of 3072 B from 0 to 1 along dimension 0, started together.  The
    # transfer books its link at once, the all-reduce after its DRAM read's events at
    # the same cycle: the transfer holds 0 -> 1 0..48, chunk 0's step there 48..72.
    # Dimension 0 then runs chunk 1's reduce-scatter 72..96, chunk 0's all-gather
    # 96..120 (chunk 0 ready at 90, after 72..81..90 along dimension 1) and chunk 1's
    # 120..144 (its dimension 1 phases 96..105..114): 144, 48 more than alone.
    on = network("torus", 2)
    send = TransferOp(1, "y", "l", Phase.FWD, Stage.FORWARD, Y, 1536, 0, 1, ())
    graph = OpGraph(ops=(collective(0, AR, tuple(range(8)), S), send), processor=(0, 0))
    assert both(graph, costs([UNIT_COMM, UNIT_COMM]), on) == ([0, 0], [144, 48], [0, 0], 144)
