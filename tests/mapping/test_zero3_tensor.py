"""ZeRO stage 3 with tensor parallelism on the tiny GPT of
``tests/fixtures/workloads/tiny_gpt.yaml`` (4 heads, 7,616 parameters) at t = 2, d = 2:
each tensor rank's weights gathered over its data-parallel group before each layer's
forward and backward, its gradients reduce-scattered there, the wire bytes and the
memory counted by hand, and every processor simulated (``symmetry: auto`` says why)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import _Run, step_memory
from accelsim.driver.zero import GATHERS_BESIDE_TENSOR
from accelsim.graph.ops import CommOp
from accelsim.network.collectives import Collective
from accelsim.report.result import RunResult
from accelsim.techniques.base import BASE
from tests.lowering.test_tensor_parallel import run_file

T, D = 2, 2
RANK_BYTES = 7_840
"""A rank's 3,920 parameters at t = 2 (half of every split layer's, all of the others',
``tests/planner/test_plan_command.py``) in 2-byte words: its weights and its
gradients."""


def simulated(tmp_path: Path, zero: int, symmetry: str = "auto") -> tuple[_Run, RunResult]:
    sets = [
        f"processors={T * D}",
        f"batch_size={2 * D}",
        f"run.parallel={{tensor: {T}, zero: {zero}}}",
        "assignment=data_parallel",
        "dram.sharing=per_processor",
        f"run.data_parallel.symmetry={symmetry}",
    ]
    r = _Run(load_inputs(run_file(tmp_path), parse_sets(sets)))
    return r, r.simulate(r.placed(BASE, None), BASE)


def wire_bytes(result: RunResult) -> dict[str, int]:
    table = result.summary()["communication"]
    return {kind: entry["bytes"] for kind, entry in table.items() if entry["bytes"]}


def test_wire_bytes_by_hand(tmp_path: Path) -> None:
    # ZeRO 0: the tensor groups' all-reduces, and each rank's gradients all-reduced
    # over its data-parallel group of d: 2 (d - 1) x 7,840 bytes on the ring, for each
    # of the t ranks. Stage 3: the same tensor all-reduces; each rank's weights
    # gathered twice (forward, backward) and its gradients reduce-scattered once over
    # its group: (d - 1) x 7,840 bytes each, t groups.
    _, plain = simulated(tmp_path, 0)
    _, zero3 = simulated(tmp_path, 3)
    before, after = wire_bytes(plain), wire_bytes(zero3)
    tensor_all_reduce = before["all_reduce"] - T * 2 * (D - 1) * RANK_BYTES
    assert after == {
        "all_reduce": tensor_all_reduce,
        "all_gather": T * 2 * (D - 1) * RANK_BYTES,
        "reduce_scatter": T * (D - 1) * RANK_BYTES,
    }


def test_each_rank_gathers_over_its_data_parallel_group(tmp_path: Path) -> None:
    _, result = simulated(tmp_path, 3)
    comms = [op for op in result.graph.ops if isinstance(op, CommOp)]
    data_groups = {tuple(range(k, T * D, T)) for k in range(T)}
    tensor_groups = {tuple(range(d * T, (d + 1) * T)) for d in range(D)}
    by_kind = {
        kind: {op.participants for op in comms if op.collective is kind}
        for kind in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_REDUCE)
    }
    assert by_kind[Collective.ALL_GATHER] == data_groups
    assert by_kind[Collective.REDUCE_SCATTER] == data_groups
    assert by_kind[Collective.ALL_REDUCE] == tensor_groups


def test_every_processor_simulated_as_symmetry_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, auto = simulated(tmp_path, 3)
    _, full = simulated(tmp_path, 3, "full")
    assert auto.trace.unsymmetric == GATHERS_BESIDE_TENSOR
    assert auto.trace.copies == ()
    assert auto.trace.total_cycles == full.trace.total_cycles == 51_535
    assert auto.summary()["symmetry"]["unsymmetric"] == GATHERS_BESIDE_TENSOR
    # Why: one replica simulated for all (its roles are found) books the collectives'
    # sends on one processor's links, and the step comes out 34 cycles short.
    monkeypatch.setattr("accelsim.driver.run.unsymmetric", lambda run: "")
    _, one = simulated(tmp_path, 3)
    assert one.trace.copies == (0,) * (T * D)
    assert one.trace.total_cycles == 51_535 - 34


def test_memory_is_the_zero_papers_formula_for_a_rank(tmp_path: Path) -> None:
    # Rajbhandari et al. 2020 at stage 3: (2 + 2 + K) Ψ / N_d for a rank's Ψ = 3,920
    # parameters over N_d = 2, Adam's K = 8 (two fp32 states, no master copy); on top
    # of the rank's weight shard, the two largest layers' weights gathered at once (the
    # one computing and the one prefetched): a rank's attention, 3 x 16 x 8 QKV weights
    # and 24 biases, 8 x 16 output weights and 16 biases, 552 elements, 1,104 bytes.
    r, _ = simulated(tmp_path, 3)
    memory = step_memory(r.inputs).to_dict()
    psi = RANK_BYTES // 2
    assert memory["zero"] == 3 and memory["sharded_over"] == D
    assert memory["gradients_bytes"] == 2 * psi // D
    assert memory["optimizer_state_bytes"] == 8 * psi // D
    assert memory["weights_bytes"] == 2 * psi // D + 2 * 1_104
