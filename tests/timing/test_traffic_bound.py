"""DRAM time of reads and writes apart (``timing.memory.traffic_bound``) where the
estimates use it: LayerPipe's task placement and the ring all-reduce."""

from __future__ import annotations

from accelsim.techniques.pipelines.task_placement import TaskCosts, dram_cycles
from accelsim.timing.machine import Machine
from accelsim.timing.memory import traffic_bound
from tests.conftest import make_hw

SPLIT = {"dram.bandwidth_bytes_per_cycle": 100, "dram.write_bandwidth_bytes_per_cycle": 50}


def test_reads_and_writes_at_their_own_rates() -> None:
    # 600 bytes read at 100 B/cycle and 400 written at 50: 6 + 8 cycles
    assert traffic_bound(Machine.of(make_hw(**SPLIT)).dram[0], 1000, 400) == 14.0
    # one rate for both: 1,000 bytes at 100 B/cycle
    equal = make_hw(**{"dram.bandwidth_bytes_per_cycle": 100})
    assert traffic_bound(Machine.of(equal).dram[0], 1000, 400) == 10.0


def test_task_placement_prices_writes_at_the_write_rate() -> None:
    # two tasks on one processor: 1,500 bytes, 400 of them written: 11 + 8 cycles
    a, b = ("l1", "fwd"), ("l2", "fwd")
    costs = TaskCosts({a: 1, b: 1}, {}, {}, {a: 1000, b: 500}, {a: 400, b: 0})
    memories = Machine.of(make_hw(**SPLIT)).dram
    assert dram_cycles(costs, {a: 0, b: 0}, memories) == 19.0
