"""What one processor must hold in DRAM for a training step, by class, against its capacity.

Counted from the step graph of one processor (one rank of a tensor-parallel group, of
the first data-parallel replica, which takes the most samples: the batch's remainder
goes to the first replicas), as lowered and rewritten, so the activations are those
the graph actually stashes (a recomputation policy's rewrite stashes less):

* ``weights``: every parameter tensor the processor keeps (its shard under tensor
  parallelism; a tied table once), at ``word_bytes.weights``;
* ``gradients``: each trained parameter's gradient, at ``word_bytes.gradients``;
* ``optimizer_state``: the optimizer kind's state tensors per trained element (SGD
  none, momentum one, Adam two), at ``word_bytes.optimizer_state``;
* ``master_weights``: with ``optimizer.master_weights: fp32``, a copy of each trained
  weight, 4 bytes an element (fp32, whatever ``word_bytes.optimizer_state``);
* ``activations``: the stash, every activation the backward stage reads and the
  forward stage made (or the step was given);
* ``communication``: the buffer of the largest all-reduce in flight: a gradient
  bucket (``data_parallel.bucket_bytes``) or the largest tensor a tensor-parallel
  all-reduce sums (or an expert-parallel all-to-all delivers), whichever is larger;
* ``workspace``: the most one op reads and writes of tensors that are none of the
  above (the transient inputs and outputs of the op running, such as an input
  gradient or a block's output before its next layer reads it).

Under a pipeline plan (``run.parallel.pipeline``) each stage is counted from its own
layers' ops and parameters of one micro-batch's step graph, its stash that of the
chunk passes its schedule holds at its peak (:mod:`accelsim.mapping.pipeline_memory`).
The pipeline techniques keep their own account
(:mod:`accelsim.techniques.pipelines.memory`): a schedule's weight versions and stash
per micro-batch in flight.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from accelsim.config.dram import DramSharing
from accelsim.config.hardware import HardwareSpec
from accelsim.graph.ops import CommOp, Op, OpGraph, Parameter, TensorKind
from accelsim.graph.queries import reads_of, stashed_tensors, writes_of

if TYPE_CHECKING:  # the run spec is not loaded by what reads a summary (accelsim layer)
    from accelsim.config.run import OptimizerSpec

CLASSES = (
    "weights",
    "gradients",
    "optimizer_state",
    "master_weights",
    "activations",
    "communication",
    "workspace",
)
"""The classes of a processor's memory, in the order reports list them."""


@dataclass(frozen=True)
class MemoryBreakdown:
    """One processor's bytes by class (:data:`CLASSES`), the capacity of the DRAM
    memory it uses and the processors sharing that memory (all of them with
    ``dram.sharing: shared``, else 1).  Under a pipeline, the processor is one of the
    most loaded stage's, ``stage``, and ``stages`` every stage's bytes by class.  Under
    ZeRO (:mod:`accelsim.mapping.zero_memory`), ``zero`` is the stage and ``data`` the
    processors of the data-parallel group the classes are sharded over."""

    bytes_by_class: dict[str, int]
    capacity_bytes: int
    sharing: int
    stage: int | None = None
    stages: tuple[dict[str, int], ...] = field(default=())
    zero: int = 0
    data: int = 1

    @property
    def stage_totals_bytes(self) -> tuple[int, ...]:
        """Every pipeline stage's total (empty without a pipeline)."""
        return tuple(sum(c.values()) for c in self.stages)

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes_by_class.values())

    @property
    def fits(self) -> bool:
        """Whether every processor sharing the memory fits in it at once."""
        return self.total_bytes * self.sharing <= self.capacity_bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            **{f"{name}_bytes": b for name, b in self.bytes_by_class.items()},
            "total_bytes": self.total_bytes,
            "capacity_bytes": self.capacity_bytes,
            "processors_sharing": self.sharing,
            "fits": self.fits,
            **(
                {}
                if self.stage is None
                else {"pipeline_stage": self.stage, "stage_totals_bytes": self.stage_totals_bytes}
            ),
            **({} if not self.zero else {"zero": self.zero, "sharded_over": self.data}),
        }


def memory_breakdown(
    step: OpGraph, optimizer: OptimizerSpec, hw: HardwareSpec, bucket_bytes: int | None = None
) -> MemoryBreakdown:
    """What the processor running ``step`` (one rank's step graph, before placement)
    holds, by class, against ``hw``'s DRAM capacity."""
    stash = sum(t.bytes for t in stashed_tensors(step.ops))
    classes = memory_classes(step.ops, step.parameters, stash, optimizer, hw, bucket_bytes)
    return MemoryBreakdown(classes, hw.dram.capacity_bytes, processors_sharing(hw))


def processors_sharing(hw: HardwareSpec) -> int:
    """The processors sharing one DRAM memory: all of them with ``dram.sharing:
    shared``, else 1."""
    return hw.processors if hw.dram.sharing is DramSharing.SHARED else 1


def memory_classes(
    ops: Sequence[Op],
    parameters: Sequence[Parameter],
    stash_bytes: int,
    optimizer: OptimizerSpec,
    hw: HardwareSpec,
    bucket_bytes: int | None,
) -> dict[str, int]:
    """The bytes by class of a processor running ``ops`` and keeping ``parameters``,
    its stash ``stash_bytes``."""
    trained = [p for p in parameters if p.grad_op >= 0]
    held = {p.weight.key for p in parameters} | {p.gradient.key for p in trained}
    held |= {t.key for t in stashed_tensors(ops)}
    largest_reduce = max((op.tensor.bytes for op in ops if isinstance(op, CommOp)), default=0)
    workspace = max(
        (
            sum(
                a.elements * a.tensor.word_bytes
                for a in (*reads_of(op), *writes_of(op))
                if a.tensor.key not in held and a.tensor.kind is not TensorKind.OPTIMIZER_STATE
            )
            for op in ops
            if not isinstance(op, CommOp)
        ),
        default=0,
    )
    communication = max(bucket_bytes or 0, largest_reduce)
    return classes_of(parameters, stash_bytes, optimizer, hw, communication, workspace)


def classes_of(
    parameters: Sequence[Parameter],
    stash_bytes: int,
    optimizer: OptimizerSpec,
    hw: HardwareSpec,
    communication_bytes: int,
    workspace_bytes: int,
) -> dict[str, int]:
    """The bytes by class of a processor keeping ``parameters``, its stash, buffer and
    workspace given (:func:`memory_classes` counts the last three from its ops)."""
    words = hw.word_bytes
    elements = sum(p.weight.elements for p in parameters if p.grad_op >= 0)
    return {
        "weights": sum(p.weight.bytes for p in parameters),
        "gradients": elements * words.gradients,
        "optimizer_state": elements * words.optimizer_state * optimizer.kind.state_tensors,
        "master_weights": elements * optimizer.master_weights.word_bytes,
        "activations": stash_bytes,
        "communication": communication_bytes,
        "workspace": workspace_bytes,
    }


UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10), ("bytes", 1))
"""The units a memory is written in: the largest its total holds once."""


def unit_of(n_bytes: int) -> tuple[str, int]:
    """The unit to write ``n_bytes`` (and the parts of it) in, and its bytes."""
    return next((u for u in UNITS if n_bytes >= u[1]), UNITS[-1])


def memory_problem(memory: MemoryBreakdown) -> str:
    """Why ``memory`` does not fit: the total beside the capacity, then every class."""
    unit, size = unit_of(memory.total_bytes)
    shared = f" x {memory.sharing} processors sharing it" if memory.sharing > 1 else ""
    parts = ", ".join(f"{name} {b / size:,.2f}" for name, b in memory.bytes_by_class.items() if b)
    return (
        f"a processor needs {memory.total_bytes / size:,.2f} {unit}{shared}, more than the"
        f" {_written(memory.capacity_bytes)} of its DRAM ({parts} {unit})"
    )


def _written(n_bytes: int) -> str:
    unit, size = unit_of(n_bytes)
    return f"{n_bytes / size:,.2f} {unit}"
