"""Symmetric sequence-parallel ranks simulated once per role: a step with
``run.parallel.sequence_parallel`` (reduce-scatters and all-gathers over each
tensor-parallel group) gives the same cycle of every op simulated on one rank as on
every rank, on both engines."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.timing.test_symmetry import numbers
from tests.timing.test_tensor_symmetry import CASES, simulated

SEQUENCE = "run.parallel.sequence_parallel=true"


@pytest.mark.parametrize("engine", ["simpy", "compiled"])
@pytest.mark.parametrize("case", ["ring t2", "ring t2 d2", "ring t4 d2", "hierarchy t2 d2"])
def test_one_rank_gives_every_number_of_the_full_step(
    tmp_path: Path, case: str, engine: str
) -> None:
    t, d, sets = CASES[case]
    every = [*sets, f"timing.engine={engine}", SEQUENCE]
    symmetric = simulated(tmp_path, t, d, *every, "run.data_parallel.symmetry=auto")
    full = simulated(tmp_path, t, d, *every, "run.data_parallel.symmetry=full")
    assert symmetric.trace.copies == (0,) * (t * d)
    assert full.trace.copies == ()
    assert symmetric.trace.start_cycle.tolist() == full.trace.start_cycle.tolist()
    assert symmetric.trace.end_cycle.tolist() == full.trace.end_cycle.tolist()
    assert numbers(symmetric) == numbers(full)
    assert symmetric.trace.events < full.trace.events
