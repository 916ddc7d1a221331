"""Symmetric tensor-parallel ranks simulated once per role: a tensor-parallel step
(``run.parallel.tensor``, data-parallel replicas of its groups or not) gives the
same cycle of every op, and so every number, simulated on one rank as on every
rank, on both engines, on a ring, a torus and a two-level hierarchy."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import _Run
from accelsim.report.result import RunResult
from accelsim.techniques.base import BASE
from tests.lowering.test_tensor_parallel import run_file
from tests.timing.test_symmetry import HIERARCHY, numbers

TORUS = ["interconnect.topology=torus", "interconnect.algorithm=multi_dim"]
LEVELS = [*HIERARCHY, "interconnect.algorithm=multi_dim"]
# name: tensor t, data d, the interconnect's settings
CASES: dict[str, tuple[int, int, list[str]]] = {
    "ring t2": (2, 1, []),
    "ring t4": (4, 1, []),
    "ring t2 d2": (2, 2, []),
    "ring t4 d2": (4, 2, []),
    # GEMMs' output tiles streamed to their epilogues: tile groups run as one op.
    "ring t2 d2, fused epilogues": (2, 2, ["run.lowering.fuse_epilogues=elementwise"]),
    "torus 2x2 t2 d2": (2, 2, [*TORUS, "interconnect.dims=[2, 2]"]),
    # A group of 4 is a whole ring of the first (innermost) dimension, all-reduced
    # by the ring algorithm (halving-doubling would route half-way round by parity).
    "torus 4x2 t4 d2": (
        4,
        2,
        ["interconnect.topology=torus", "interconnect.algorithm=ring", "interconnect.dims=[4, 2]"],
    ),
    "hierarchy t2 d2": (2, 2, LEVELS),
    "hierarchy t4 d2": (4, 2, LEVELS),
}


def simulated(tmp_path: Path, t: int, d: int, *sets: str) -> RunResult:
    run = _Run(
        load_inputs(
            run_file(tmp_path),
            parse_sets(
                [
                    f"processors={t * d}",
                    f"batch_size={2 * d}",
                    f"run.parallel={{tensor: {t}}}",
                    "assignment=data_parallel",
                    "dram.sharing=per_processor",
                    *sets,
                ]
            ),
        )
    )
    return run.simulate(run.placed(BASE, None), BASE)


@pytest.mark.parametrize("engine", ["simpy", "compiled"])
@pytest.mark.parametrize("case", list(CASES))
def test_one_rank_gives_every_number_of_the_full_step(
    tmp_path: Path, case: str, engine: str
) -> None:
    t, d, sets = CASES[case]
    every = [*sets, f"timing.engine={engine}"]
    symmetric = simulated(tmp_path, t, d, *every, "run.data_parallel.symmetry=auto")
    full = simulated(tmp_path, t, d, *every, "run.data_parallel.symmetry=full")
    # Every rank of every replica does rank 0's work, at the same cycles.
    assert symmetric.trace.copies == (0,) * (t * d)
    assert full.trace.copies == ()
    assert symmetric.trace.start_cycle.tolist() == full.trace.start_cycle.tolist()
    assert symmetric.trace.end_cycle.tolist() == full.trace.end_cycle.tolist()
    assert numbers(symmetric) == numbers(full)
    assert len(numbers(symmetric)["busy_cycles"]["array"]) == t * d
    assert symmetric.trace.events < full.trace.events


def test_groups_that_load_the_links_unevenly_are_simulated_in_full(tmp_path: Path) -> None:
    # On a 2x4 torus a group of 4 is a 2x2 block: along the second dimension each
    # group uses the links between coordinates 0 and 1 (2 and 3), never those from 1
    # to 2 and from 3 to 0, so a processor at coordinate 1 is not one at 0 translated.
    sets = [*TORUS, "interconnect.dims=[2, 4]"]
    assert simulated(tmp_path, 4, 2, *sets).trace.copies == ()
