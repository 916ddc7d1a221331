"""The Memory protocol: the one place DRAM timing lives, and how the engines see it.

Reservations are timed by hand: a transfer of ``b`` bytes booked at ``t`` on a
channel of ``w`` bytes per cycle starts at ``max(t, free_at)``, holds the channel
``ceil(b / w)`` cycles and arrives ``latency`` cycles after that.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np

from accelsim.timing.memory import (
    DEFAULT_STREAM,
    FifoMemory,
    dram_capacity_bytes,
    dram_memories,
    link_memories,
    memory_layout,
)
from tests.test_engine import hw

PACKAGE = Path(__file__).resolve().parents[1] / "accelsim"


def test_a_fifo_memory_books_in_request_order() -> None:
    # 10 B/cycle, latency 5: 100 B at 0 hold 0..10, arrive 15; 50 B at 0 queue
    # behind, 10..15, arrive 20; 10 B at 100 (idle again) 100..101, arrive 106.
    memory = FifoMemory(10, 5)
    assert [memory.reserve(t, b, DEFAULT_STREAM) for t, b in ((0, 100), (0, 50), (100, 10))] == [
        15,
        20,
        106,
    ]
    assert memory.free_at == 101


def test_the_bound_is_bytes_over_bandwidth_for_numbers_and_arrays() -> None:
    memory = FifoMemory(128, 100)
    assert memory.bound(1280) == 10.0
    assert memory.bound(1.0) == 1 / 128
    assert memory.bound(np.array([128, 64])).tolist() == [1.0, 0.5]
    assert FifoMemory(math.inf, 7).bound(10**9) == 0.0


def test_processors_sharing_dram_share_one_memory() -> None:
    shared = dram_memories(hw("processors=3"))
    assert shared[0] is shared[1] is shared[2]
    own = dram_memories(hw("processors=3", "dram.sharing=per_processor"))
    assert len({id(m) for m in own}) == 3
    links = link_memories(hw("processors=2"))
    assert links[0] is not links[1]
    assert (links[0].bound(640), links[0].latency_cycles) == (10.0, 200)  # 64 B/cycle links


def test_the_compiled_engine_gets_the_memories_as_arrays() -> None:
    layout = memory_layout(dram_memories(hw("processors=3")))
    assert layout.memory_of.tolist() == [0, 0, 0]
    assert layout.channel_ptr.tolist() == [0, 1]
    assert layout.channel_bandwidth.tolist() == [128.0]
    assert layout.latency_cycles == 100
    layout = memory_layout(dram_memories(hw("processors=2", "dram.sharing=per_processor")))
    assert layout.memory_of.tolist() == [0, 1]
    assert layout.channel_ptr.tolist() == [0, 1, 2]


def test_capacity_is_one_memorys() -> None:
    assert dram_capacity_bytes(hw()) == 16 * 2**30
    assert dram_capacity_bytes(hw("dram.capacity_gib=2")) == 2 * 2**30


def _reads_bandwidth(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    return any(
        isinstance(node, ast.Attribute) and node.attr == "bandwidth_bytes_per_cycle"
        for node in ast.walk(tree)
    )


def test_only_the_memory_module_turns_a_bandwidth_into_time() -> None:
    # The hardware spec's bandwidths are read where memories are built, and copied
    # into the summary's design knobs; nothing else divides bytes by them.
    readers = {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if _reads_bandwidth(path)
    }
    assert readers == {"timing/memory.py", "report/result.py"}
