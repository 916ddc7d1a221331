"""A step's totals over its processors when one replica's ops stand for every
processor's (:mod:`accelsim.timing.weights`): exact counts, per-processor tables with
the replica on every processor, and float totals that are the correctly rounded sum
of each processor's sum, the same whether every processor's ops are in the trace or
one replica stands for them all."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from accelsim.energy.windows import breakpoints, peak_rate
from accelsim.timing.costs import UNIT_ARRAY, UNIT_COMM
from accelsim.timing.trace import Trace
from accelsim.timing.weights import (
    op_weights,
    processor_group_sums,
    processor_sum,
    weighted_count,
    weighted_group_totals,
    weighted_total,
)

BIG = 2.0**53  # floats 2 apart: BIG + 1 rounds back to BIG


def trace(processor: list[int], units: list[int], processors: int, replicas: int = 1) -> Trace:
    n = len(processor)
    zeros = np.zeros(n, np.int64)
    return Trace(
        costs=SimpleNamespace(unit=np.asarray(units, np.int64)),  # type: ignore[arg-type]
        processor=np.asarray(processor, np.int64),
        start_cycle=zeros,
        end_cycle=zeros,
        stall_cycles=zeros,
        total_cycles=0,
        processors=processors,
        events=0,
        engine="simpy",
        replicas=replicas,
    )


A, C = UNIT_ARRAY, UNIT_COMM
# Three processors each running ops x and y, and an all-reduce on processor 0 ...
WHOLE = trace([0, 0, 0, 1, 1, 2, 2], [A, A, C, A, A, A, A], 3)
# ... and processor 0's x and y standing for all three, with the all-reduce.
ONCE = trace([0, 0, 0], [A, A, C], 3, replicas=3)


def test_counts_count_each_op_as_often_as_it_stands_for() -> None:
    assert op_weights(ONCE).tolist() == [3, 3, 1]
    assert op_weights(WHOLE).tolist() == [1] * 7
    macs_once, macs_whole = np.array([5, 7, 0]), np.array([5, 7, 0, 5, 7, 5, 7])
    assert weighted_total(ONCE, macs_once) == weighted_total(WHOLE, macs_whole) == 36
    assert weighted_count(ONCE) == weighted_count(WHOLE) == 7
    assert weighted_total(ONCE, macs_once, np.array([False, True, True])) == 21
    group_once, group_whole = np.array([0, 1, 1]), np.array([0, 1, 1, 0, 1, 0, 1])
    bytes_once, bytes_whole = np.array([1, 2, 100]), np.array([1, 2, 100, 1, 2, 1, 2])
    assert weighted_group_totals(ONCE, group_once, bytes_once, 2) == [3, 106]
    assert weighted_group_totals(WHOLE, group_whole, bytes_whole, 2) == [3, 106]


def test_per_processor_tables_put_the_replica_on_every_processor() -> None:
    cycles_once, cycles_whole = np.array([10, 20, 7]), np.array([10, 20, 7, 10, 20, 10, 20])
    assert ONCE.per_processor(cycles_once).tolist() == [37, 30, 30]
    assert WHOLE.per_processor(cycles_whole).tolist() == [37, 30, 30]


def test_float_totals_are_the_correctly_rounded_sum_of_each_processors_sum() -> None:
    # x = y = the all-reduce = 0.1 pJ: processor 0's sum 0.1 + 0.1 + 0.1 is
    # 0.30000000000000004, the others' 0.2; their exact sum rounds to
    # 0.7000000000000001, where adding the seven ops in op order gives 0.7.
    pj_once, pj_whole = np.full(3, 0.1), np.full(7, 0.1)
    assert processor_sum(WHOLE, pj_whole) == processor_sum(ONCE, pj_once) == 0.7000000000000001
    assert float(pj_whole.sum()) == 0.7
    mask_once, mask_whole = np.array([False, True, True]), np.array([0, 1, 1, 0, 1, 0, 1]) == 1
    assert processor_sum(WHOLE, pj_whole, mask_whole) == processor_sum(ONCE, pj_once, mask_once)
    assert processor_sum(ONCE, pj_once, mask_once) == 0.1 + 0.1 + 0.1 + 0.1
    # by group: x's on every processor; y's and the all-reduce
    group_once, group_whole = np.array([0, 1, 1]), np.array([0, 1, 1, 0, 1, 0, 1])
    expected = [0.30000000000000004, 0.4]
    assert processor_group_sums(ONCE, group_once, pj_once, 2) == expected
    assert processor_group_sums(WHOLE, group_whole, pj_whole, 2) == expected


def test_one_processors_sum_is_numpys() -> None:
    alone = trace([0, 0, 0], [A, A, A], 1)
    values = np.array([BIG, 1.0, 1.0])
    assert processor_sum(alone, values) == float(values.sum()) == BIG


def test_the_energy_line_is_the_same_whether_one_replica_stands_for_all() -> None:
    # op x runs 0-10 and y 5-15 on each of three processors; the all-reduce 15-25.
    def timed(t: Trace, starts: list[int], ends: list[int]) -> Trace:
        return Trace(
            t.costs,
            t.processor,
            np.asarray(starts, np.int64),
            np.asarray(ends, np.int64),
            t.stall_cycles,
            25,
            3,
            0,
            "simpy",
            replicas=t.replicas,
        )

    once = timed(ONCE, [0, 5, 15], [10, 15, 25])
    whole = timed(WHOLE, [0, 5, 15, 0, 5, 0, 5], [10, 15, 25, 10, 15, 10, 15])
    pj_once = np.array([0.1, 0.7, 3.0])
    pj_whole = np.array([0.1, 0.7, 3.0, 0.1, 0.7, 0.1, 0.7])
    line_once, line_whole = breakpoints(once, pj_once), breakpoints(whole, pj_whole)
    assert line_once.cycles.tolist() == line_whole.cycles.tolist() == [0, 5, 10, 15, 25]
    assert line_once.energy_pj.tolist() == line_whole.energy_pj.tolist()
    assert line_once.total_pj == line_whole.total_pj
    # 3 x (0.01 + 0.07) pJ a cycle from 5 to 10
    assert line_once.energy_pj[2] - line_once.energy_pj[1] == pytest.approx(5 * 3 * (0.01 + 0.07))
    assert peak_rate(once, pj_once, 5) == peak_rate(whole, pj_whole, 5)
