"""Every vector op a lowering emits names its class (:class:`VectorClass`), decided by
what the op does to its data (the table in docs/model/lowering.md)."""

from __future__ import annotations

from collections import Counter

from accelsim.config.enums import VectorClass
from accelsim.graph.ops import OpGraph, Phase, VectorOp
from tests.conftest import model

E, T, R, M, N = (
    VectorClass.ELEMENTWISE,
    VectorClass.TRANSCENDENTAL,
    VectorClass.REDUCE,
    VectorClass.DATA_MOVEMENT,
    VectorClass.NORM,
)
FWD, DX, DW, UPDATE = Phase.FWD, Phase.BWD_INPUT, Phase.BWD_WEIGHT, Phase.UPDATE


def _classes(name: str) -> tuple[Counter[tuple[str, Phase, VectorClass]], OpGraph]:
    infos, graph = model(name)
    found: Counter[tuple[str, Phase, VectorClass]] = Counter()
    for op in graph.ops:
        if isinstance(op, VectorOp):
            found[infos[op.layer].layer.kind, op.phase, op.op_class] += 1
    return found, graph


def test_resnet18s_vector_ops_by_layer_kind_phase_and_class() -> None:
    # 20 batchnorms, 17 ReLUs (17 gradients and 7 sums of the gradients of a ReLU
    # output read by a block and its shortcut; the max pool's output has one too), one
    # max and one global average pool, the loss, the last linear layer's bias gradient;
    # SGD updates are element-wise
    found, _ = _classes("resnet18")
    assert found == {
        ("activation", DX, E): 24, ("activation", FWD, E): 17, ("add", FWD, E): 8,
        ("batchnorm", DX, N): 20, ("batchnorm", FWD, N): 20, ("batchnorm", UPDATE, E): 20,
        ("conv2d", UPDATE, E): 20, ("cross_entropy", DX, E): 1, ("cross_entropy", FWD, N): 1,
        ("global_avgpool", DX, E): 1, ("global_avgpool", FWD, R): 1, ("linear", DW, R): 1,
        ("linear", UPDATE, E): 2, ("maxpool", DX, E): 2, ("maxpool", FWD, R): 1,
    }  # fmt: skip


def test_a_llama_style_models_softmax_and_norms_are_norms_and_silu_transcendental() -> None:
    # SmolLM2-135M: 30 blocks, each two RMSNorms, a causal softmax (a norm) behind an
    # element-wise mask and rotary embedding, a SiLU; one final RMSNorm
    found, _ = _classes("smollm2_135m")
    assert found["rmsnorm", FWD, N] == 2 * 30 + 1
    assert found["attention", FWD, N] == 30
    assert found["attention", FWD, E] == 2 * 30  # mask, rotary
    assert (found["activation", FWD, T], found["activation", DX, T]) == (30, 30)
    assert (found["embedding", FWD, M], found["embedding", DW, M]) == (1, 1)
