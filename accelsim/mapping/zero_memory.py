"""What a processor holds under ZeRO (``run.parallel.zero``): the memory breakdown of
one replica's step (:func:`accelsim.mapping.memory.memory_breakdown`) with its classes
sharded over the data-parallel group of ``d`` processors, as Rajbhandari et al.
(SC 2020, section 5.1 and figure 1) count them:

* stage 1: the optimizer state and the fp32 master weights, each parameter's
  ``ceil(elements / d)`` of them;
* stage 2: the gradients too;
* stage 3: the weights too, plus the weights of the units gathered at once: the
  layer computing and the ``zero_prefetch`` gathered ahead of it, counted as the
  largest ``zero_prefetch + 1`` layers' weights (a bound on the units in flight).

With bf16 weights and gradients (2 bytes) and mixed-precision Adam (fp32 master
weights and two fp32 states, the paper's ``K = 12`` bytes per parameter), a model
of ``Ψ`` parameters needs ``(2 + 2 + 12) Ψ`` bytes unsharded, ``(2 + 2) Ψ + 12 Ψ /
d`` at stage 1, ``2 Ψ + 14 Ψ / d`` at stage 2 and ``16 Ψ / d`` at stage 3 (the paper's
``(2 + 2 + K) Ψ / N_d``), besides the gathered units.

Under a pipeline plan (stages 1 and 2) each stage's classes are sharded so over the
stage's data-parallel group, from the parameters the stage keeps
(:mod:`accelsim.mapping.pipeline_memory`).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from accelsim.config.hardware import WordBytesSpec
from accelsim.config.run import OptimizerSpec
from accelsim.graph.ops import Parameter
from accelsim.mapping.zero_placement import shard


def zero_classes(
    bytes_by_class: dict[str, int],
    parameters: Sequence[Parameter],
    optimizer: OptimizerSpec,
    words: WordBytesSpec,
    stage: int,
    data: int,
    prefetch: int,
) -> dict[str, int]:
    """One processor's bytes by class (it keeps ``parameters``) sharded at ZeRO
    ``stage`` over ``data`` processors, ``prefetch`` layers gathered ahead."""
    trained = [p for p in parameters if p.grad_op >= 0]
    elements = sum(shard(p.weight.elements, data) for p in trained)
    classes = dict(bytes_by_class)
    classes["optimizer_state"] = elements * words.optimizer_state * optimizer.kind.state_tensors
    classes["master_weights"] = elements * optimizer.master_weights.word_bytes
    if stage >= 2:
        classes["gradients"] = elements * words.gradients
    if stage == 3:
        units: dict[str, int] = {}
        for p in parameters:
            units[p.layer] = units.get(p.layer, 0) + p.weight.bytes
        gathered = sum(heapq.nlargest(prefetch + 1, units.values()))
        owned = sum(shard(p.weight.elements, data) * p.weight.word_bytes for p in parameters)
        classes["weights"] = owned + gathered
    return classes
