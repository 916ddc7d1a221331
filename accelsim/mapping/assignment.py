"""Place a training step on processors: the ``single`` and ``data_parallel`` policies.

``single`` lowers the whole step on processor 0.  ``data_parallel`` splits the
batch across the processors (earlier processors take the remainder), gives each
a full replica of the model, all-reduces every gradient over the interconnect
and then lets every processor update its own copy of the weights.
"""

from __future__ import annotations

from collections.abc import Sequence

from typing_extensions import assert_never

from accelsim.config.hardware import HardwareSpec
from accelsim.config.run import AssignmentPolicy, OptimizerKind, StridedDx
from accelsim.errors import ConfigError
from accelsim.workload import model as wm
from accelsim.workload.lowering import GraphBuilder, StepHooks
from accelsim.graph.ops import OpGraph
from accelsim.workload.shapes import LayerInfo


def split_batch(batch: int, processors: int) -> list[int]:
    """Split ``batch`` samples over ``processors`` as evenly as possible."""
    base, extra = divmod(batch, processors)
    return [base + (1 if p < extra else 0) for p in range(processors)]


def assign(
    policy: AssignmentPolicy,
    infos: Sequence[LayerInfo],
    workload: wm.Workload,
    hw: HardwareSpec,
    batch: int,
    strided_dx: StridedDx,
    optimizer: OptimizerKind,
    run_file: str = "run",
    hooks: StepHooks | None = None,
) -> OpGraph:
    """Lower the training step and place its ops according to ``policy``.

    ``hooks`` (a technique's) apply to every replica's lowering.

    Raises:
        ConfigError: if data parallelism has fewer samples than processors.
    """
    builder = GraphBuilder(hw.word_bytes)
    match policy:
        case AssignmentPolicy.SINGLE:
            step = builder.lower_step(infos, workload, batch, strided_dx, hooks=hooks)
            builder.add_updates(step.parameters, optimizer, after=step.backward_sinks)
            return builder.build(step.parameters)
        case AssignmentPolicy.DATA_PARALLEL:
            procs = hw.processors
            if batch < procs:
                raise ConfigError.single(
                    run_file,
                    "batch_size",
                    f"data_parallel needs at least one sample per processor ({procs})",
                    batch,
                )
            steps = []
            for p, local in enumerate(split_batch(batch, procs)):
                builder.current_processor = p
                prefix = f"p{p}/" if procs > 1 else ""
                steps.append(builder.lower_step(infos, workload, local, strided_dx, prefix, hooks))
            ready: dict[str, int] = {}
            if procs > 1:
                builder.current_processor = 0
                for j, param in enumerate(steps[0].parameters):
                    name = param.weight.name.removeprefix("p0/")
                    tensor = builder.tensor(
                        f"{name}.allreduce", param.gradient.kind, param.gradient.elements
                    )
                    op = builder.allreduce(
                        f"{name}.allreduce",
                        param.layer,
                        tensor,
                        tuple(range(procs)),
                        after=[s.parameters[j].grad_op for s in steps],
                    )
                    for s in steps:
                        ready[s.parameters[j].weight.name] = op
            for p, step in enumerate(steps):
                builder.current_processor = p
                builder.add_updates(
                    step.parameters, optimizer, after=step.backward_sinks, gradient_ready=ready
                )
            return builder.build(steps[0].parameters)
        case _:
            assert_never(policy)
