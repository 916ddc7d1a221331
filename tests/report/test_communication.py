"""``summary.json``'s ``communication``: bytes, cycles and exposed cycles per kind of
collective, counted by hand on small engine runs."""

from __future__ import annotations

import dataclasses

import numpy as np

import accelsim
from accelsim.graph.ops import CommOp, OpGraph, Phase, Stage, Tensor, TensorKind
from accelsim.network.collectives import Collective
from accelsim.report.communication import _Union, by_collective
from accelsim.report.console import summary_table
from accelsim.report.summary import CommunicationSummary, StepSummary
from accelsim.timing.costs import UNIT_ARRAY, UNIT_COMM
from accelsim.timing.engine import simulate
from tests.conftest import ROOT
from tests.timing.test_engine import costs, gemm, machine

SMOKE = ROOT / "configs" / "runs" / "smoke.yaml"


def test_busy_spans_cover_what_they_overlap() -> None:
    union = _Union.of([(np.array([10, 30]), np.array([20, 40])), (np.array([35]), np.array([38]))])
    assert [union.covered(*span) for span in ((15, 35), (0, 10), (20, 30), (0, 100))] == [
        10,
        0,
        0,
        20,
    ]


def test_an_all_reduce_is_exposed_where_none_of_its_processors_computes() -> None:
    # The ring all-reduce of 2002 B on two processors spans 0..696 (tests/timing's
    # test_ring_allreduce); p0 computes 0..100 and p1 0..300: exposed 696 - 300.
    grad = Tensor("dw", TensorKind.GRADIENT, 1001, 2)
    comm = CommOp(0, "ar", "l", Phase.COMM, Stage.COMMUNICATION, grad, (0, 1), deps=())
    graph = OpGraph(ops=(comm, gemm(1), gemm(2)), processor=(0, 0, 1))
    c = costs(
        [UNIT_COMM, UNIT_ARRAY, UNIT_ARRAY], compute=[0, 100, 300], interconnect_bytes=[2002, 0, 0]
    )
    trace = simulate(graph, c, machine("processors=2"))
    assert trace.end_cycle.tolist() == [696, 100, 300]
    assert by_collective(graph, trace) == {
        "all_reduce": CommunicationSummary(bytes=2002, cycles=696, exposed_cycles=396),
        "point_to_point": CommunicationSummary(bytes=0, cycles=0, exposed_cycles=0),
    }
    reduced = by_collective(graph, trace)["all_reduce"]
    assert reduced.to_dict() == {
        "bytes": 2002,
        "cycles": 696,
        "exposed_cycles": 396,
        "overlapped_cycles": 300,
    }


def test_the_summary_records_it_and_reads_an_older_record_without_it() -> None:
    result = accelsim.simulate(SMOKE, ["processors=2", "assignment=data_parallel"])
    record = result.base.summary()
    communication = record["communication"]
    assert communication["all_reduce"]["bytes"] == record["interconnect_bytes"]
    assert (
        0 <= communication["all_reduce"]["exposed_cycles"] <= communication["all_reduce"]["cycles"]
    )
    assert StepSummary.from_dict(record).to_dict()["communication"] == communication
    reduced = communication["all_reduce"]
    assert reduced["overlapped_cycles"] == reduced["cycles"] - reduced["exposed_cycles"]
    line = next(row for row in summary_table(record).splitlines() if row.startswith("all_reduce"))
    assert line.endswith(
        f" {reduced['exposed_cycles']:,} exposed (no compute on its processors),"
        f" {reduced['overlapped_cycles']:,} overlapped"
    )
    older = {k: v for k, v in record.items() if k != "communication"}
    assert StepSummary.from_dict(older).communication == {}


def test_each_kind_present_gets_its_entry() -> None:
    # An all-gather and a broadcast of 6144 B on a ring of 2 with ideal DRAM, links
    # 64 B/cycle + 200: each one step of its piece (3072 B, 48 + 200) or its buffer
    # (96 + 200), one after the other (the broadcast waits for the all-gather); no
    # op computes, so all is exposed.  all_reduce and point_to_point are always named.
    tensor = Tensor("b", TensorKind.ACTIVATION, 3072, 2)
    gather = CommOp(0, "ag", "l", Phase.COMM, Stage.COMMUNICATION, tensor, (0, 1), ())
    gather = dataclasses.replace(gather, collective=Collective.ALL_GATHER)
    cast = CommOp(1, "bc", "l", Phase.COMM, Stage.COMMUNICATION, tensor, (0, 1), (0,))
    cast = dataclasses.replace(cast, collective=Collective.BROADCAST, root=1)
    graph = OpGraph(ops=(gather, cast), processor=(0, 1))
    c = costs([UNIT_COMM, UNIT_COMM], interconnect_bytes=[6144, 6144])
    on = machine("processors=2", "dram.bandwidth_bytes_per_cycle=.inf", "dram.latency_cycles=0")
    trace = simulate(graph, c, on)
    assert trace.end_cycle.tolist() == [248, 248 + 296]
    nothing = CommunicationSummary(bytes=0, cycles=0, exposed_cycles=0)
    assert by_collective(graph, trace) == {
        "all_reduce": nothing,
        "all_gather": CommunicationSummary(bytes=6144, cycles=248, exposed_cycles=248),
        "broadcast": CommunicationSummary(bytes=6144, cycles=296, exposed_cycles=296),
        "point_to_point": nothing,
    }
