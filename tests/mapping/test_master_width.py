"""The fp32 master copy is 4 bytes an element whatever the optimizer state's word size
(``word_bytes.optimizer_state``, ``precision.optimizer_state``): in the memory
breakdown, sharded by ZeRO, in the update's DRAM traffic and in optimizer fusion's
derived accesses, on the tiny GPT of ``tests/mapping/test_memory.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelsim.config.enums import OptimizerKind
from accelsim.driver.run import step_memory
from accelsim.graph.ops import Phase, TensorKind, VectorOp
from accelsim.techniques.fusion.config import FusionMode
from accelsim.techniques.fusion.traffic import derived_accesses
from tests.lowering.test_tensor_parallel import inputs, placed
from tests.mapping.test_memory import PARAMETERS, memory

MASTER = "optimizer.master_weights=fp32"
FP8 = ("hardware.array.rates={bf16: 1, fp8: 2}", "run.precision={gemm: fp8, optimizer_state: 2}")


@pytest.mark.parametrize(
    ("sets", "bytes_by_class"),
    [
        # weight 2, gradient 2, Adam's two moments at 2, the master at 4
        (("word_bytes.optimizer_state=2",), (2, 2, 4, 4)),
        # fp8 GEMMs: 1-byte weights (the GEMMs' operand), bf16 moments, fp32 master
        (FP8, (1, 2, 4, 4)),
        ((), (2, 2, 8, 4)),  # the default words: ZeRO's 16 bytes
    ],
)
def test_the_master_copy_is_four_bytes_an_element(
    tmp_path: Path, sets: tuple[str, ...], bytes_by_class: tuple[int, ...]
) -> None:
    m = memory(tmp_path, 1, MASTER, *sets).bytes_by_class
    kept = ("weights", "gradients", "optimizer_state", "master_weights")
    assert tuple(m[c] for c in kept) == tuple(b * PARAMETERS for b in bytes_by_class)


def test_zero_shards_the_master_at_four_bytes(tmp_path: Path) -> None:
    """Stage 1 over 2 replicas: each keeps half of every trained tensor's elements
    (rounded up per tensor) of master and moments."""
    sets = ("assignment=data_parallel", "run.parallel={zero: 1}", "word_bytes.optimizer_state=2")
    m = step_memory(inputs(tmp_path, None, MASTER, *sets, processors=2)).bytes_by_class
    assert m["master_weights"] == 4 * (PARAMETERS // 2)
    assert m["optimizer_state"] == 2 * 2 * (PARAMETERS // 2)


def test_the_update_reads_and_writes_the_master_at_four_bytes(tmp_path: Path) -> None:
    graph = placed(tmp_path, None, MASTER, "word_bytes.optimizer_state=2")
    updates = [op for op in graph.ops if isinstance(op, VectorOp) and op.phase is Phase.UPDATE]
    assert updates
    for op in updates:
        states = [a.tensor for a in op.reads if a.tensor.kind is TensorKind.OPTIMIZER_STATE]
        master, *moments = states
        assert master.name.endswith(".master") and master.word_bytes == 4
        assert {t.word_bytes for t in moments} == {2}


def test_fusions_derived_bytes_count_the_master_at_four(tmp_path: Path) -> None:
    """Adam unfused, with a master: W read by the forward and dX GEMMs and written by
    the update (3 x 2 B), g written and read (2 x 2 B), two moments read and written
    (4 x 2 B) and the master read and written (2 x 4 B): 26 B an element."""
    accesses = derived_accesses(FusionMode.UNFUSED, OptimizerKind.ADAM, master=True)
    assert (accesses.weight, accesses.gradient, accesses.state, accesses.master) == (3, 2, 4, 2)
    hw = inputs(tmp_path, None, "word_bytes.optimizer_state=2").hardware
    assert accesses.bytes_per_element(hw) == 3 * 2 + 2 * 2 + 4 * 2 + 2 * 4 == 26
