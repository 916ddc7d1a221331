"""Tile groups (``timing.group_cycles``): uniform over a step, and the step converges.

The groups of ops of known lengths are counted by hand; a step converges as its
groups shrink (first order: every halving moves it about half as much as the last);
the number of groups stays at most ``chunks_per_op`` per op; and, slow, every model
of the suite is within 0.5 % of its converged step at the default, 4,096-cycle
groups (``scripts/granularity.py`` prints the whole table).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs, suite_entries, suite_inputs
from accelsim.driver.run import simulate_run
from accelsim.timing.groups import MIN_GROUPS, busy_cycles, group_length, tile_groups
from accelsim.timing.memories.fifo import Fifo
from accelsim.timing.memories.interleaved import Interleaved
from tests.conftest import ROOT, load_script

ADAPTIVE = ["timing.group_cycles=4096", "timing.chunks_per_op=4096"]


def test_groups_counted_by_hand() -> None:
    busy = np.array([0, 100, 511, 1000, 1024, 4096, 4097, 20_000, 40_000, 1_000_000])
    # up to 4,096 cycles per group; an op shorter than that still gets up to 8 groups
    # of at least 512 cycles (1,000 cycles: one; 1,024: two)
    assert tile_groups(busy, 4096, 4096).tolist() == [1, 1, 1, 1, 2, 8, 8, 8, 10, 245]
    assert MIN_GROUPS == 8


def test_the_longest_op_lengthens_every_group_of_its_step() -> None:
    """An op that would need more than ``chunks_per_op`` groups lengthens the groups of
    every op of the step alike, so the resolution stays uniform."""
    busy = np.array([100_000_000, 1_000_000, 40_000])
    length = group_length(busy, 4096, 4096)
    assert length == math.ceil(100_000_000 / 4096) == 24_415
    assert tile_groups(busy, 4096, 4096).tolist() == [4096, 41, 8]
    assert tile_groups(busy, 4096, 8).tolist() == [8, 1, 1]


def test_busy_is_the_longer_of_compute_and_transfer() -> None:
    compute = np.array([1000, 10, 0])
    dram = np.array([1280, 1281, 0])
    assert busy_cycles(compute, dram, Fifo(128.0, 128.0, 100)).tolist() == [1000, 11, 0]
    assert busy_cycles(compute, dram, Fifo(0.5, 0.5, 0)).tolist() == [2560, 2562, 0]
    assert busy_cycles(compute, dram, Fifo(math.inf, math.inf, 0)).tolist() == [1000, 10, 0]
    # four interleaved channels of 32 B/cycle transfer as fast as one of 128
    assert busy_cycles(compute, dram, Interleaved(4, 32.0, 32.0, 100, 0)).tolist() == [1000, 11, 0]


def _step(run: str, *sets: str) -> tuple[int, int, int]:
    """(cycles, events, ops) of a run's baseline step, on the SimPy engine."""
    inputs = load_inputs(
        ROOT / "configs" / "runs" / run, parse_sets([*sets, "timing.engine=simpy"])
    )
    result = simulate_run(inputs)
    assert int(result.trace.costs.chunks.max()) <= inputs.run.timing.chunks_per_op
    return result.trace.total_cycles, result.trace.events, len(result.graph.ops)


def test_step_converges_as_groups_shrink() -> None:
    """With DRAM latency 0 (the smoke run's hardware), only the resolution moves the
    step: it falls as the groups halve from 16,384 to 256 cycles, from 8,192 on each
    time by at most 0.6 of the time before (about half: an error of first order)."""
    lengths = [16384, 8192, 4096, 2048, 1024, 512, 256]
    cycles = [
        _step("smoke.yaml", *ADAPTIVE[1:], f"timing.group_cycles={g}", "dram.latency_cycles=0")[0]
        for g in lengths
    ]
    moves = [a - b for a, b in itertools.pairwise(cycles)]
    assert all(m > 0 for m in moves), cycles
    assert all(b <= 0.6 * a for a, b in itertools.pairwise(moves[1:])), moves
    # With a 100-cycle latency, groups of a few latencies wait for it once each: the
    # step stops falling (docs/model/engine.md).
    lat = [
        _step("smoke.yaml", *ADAPTIVE[1:], f"timing.group_cycles={g}", "dram.latency_cycles=100")
        for g in (1024, 512, 256)
    ]
    assert lat[0][0] > lat[1][0] < lat[2][0], lat


def test_events_stay_linear_in_the_ops() -> None:
    """However short the groups asked for, the step's longest op has ``chunks_per_op``
    of them and every op at most that many: the engine's events (about three per
    group and five per op) stay linear in the ops, whatever the batch."""
    for batch in (4, 64):
        sets = ["timing.group_cycles=1", "timing.chunks_per_op=16", f"batch_size={batch}"]
        inputs = load_inputs(ROOT / "configs" / "runs" / "smoke.yaml", parse_sets(sets))
        result = simulate_run(inputs)
        ops = len(result.graph.ops)
        assert int(result.trace.costs.chunks.max()) == 16
        assert result.trace.events <= ops * (5 + 3 * 16)


SUITE = Path(ROOT / "configs" / "suites" / "default.yaml")


@pytest.mark.slow
@pytest.mark.parametrize("model", [e.name for e in suite_entries(SUITE)])
def test_suite_model_within_half_a_percent_of_its_converged_step(model: str) -> None:
    script = load_script("granularity")
    entry = suite_entries(SUITE, [model])[0]
    run = ROOT / "configs" / "runs" / "suite.yaml"
    inputs = suite_inputs(run, entry, parse_sets(["timing.engine=compiled"]))  # the default
    converged = script.measure_converged(inputs)  # type: ignore[attr-defined]
    cycles = simulate_run(inputs).trace.total_cycles
    assert abs(cycles / converged - 1) <= 0.005, (cycles, converged)
