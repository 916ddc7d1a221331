"""A pipeline plan's step in ``summary.json`` (its ``pipeline`` section) and on the
console: the processors' order, each stage's compute, bubble (beside the closed form),
exposed transfers and data-parallel gradient sum (an all-reduce, or under ZeRO a
reduce-scatter, the update on the shard and a weight all-gather), and the step beside
its bound."""

from __future__ import annotations

from typing import Any

from accelsim.config.interconnect import InterconnectSpec
from accelsim.mapping.groups import GroupKind, ProcessorGroup, spanned
from accelsim.network.topology import Network
from accelsim.timing.pipeline_step import PipelineStep, bubble_fraction
from accelsim.units import cycles_to_seconds

ORDER = "data, pipeline, tensor (tensor innermost)"
"""How the processors are numbered: ``(replica x pipeline + stage) x tensor + rank``."""

TABLES = (
    "ops, macs, busy_cycles, utilization, dram_bytes and energy_pj (and ops.csv, layers.csv)"
    " are one micro-batch's ops of every model chunk, with their updates, on the first"
    " stage's tensor group, simulated alone; total_cycles and seconds are the pipeline"
    " step's"
)
"""What a pipeline step's tables hold (the section's ``tables``)."""

EXPERT_TABLES = TABLES.replace("the first stage's tensor group", "the first stage's expert group")
"""What they hold with expert parallelism (the group's replicas' tensor groups)."""


def step_bound_cycles(pipeline: PipelineStep) -> int:
    """The least a step can take: the busiest stage's passes (``v m`` of each of its
    chunks' forward and backward), gradient sum, update and weight all-gather, with no
    bubble."""
    return max(
        s.compute_cycles + s.all_reduce_cycles + s.update_cycles + s.all_gather_cycles
        for s in pipeline.step.stages
    )


def stage_recomputed_cycles(pipeline: PipelineStep) -> list[int]:
    """Each stage's backward passes' recomputed forward work over the step: ``m`` times
    each of its chunks' recomputed cycles (simulated alone)."""
    times = pipeline.times
    out = [0] * times.stages
    for c in pipeline.distinct:
        for g in c.chunks:
            out[g % times.stages] += c.recomputed_cycles * times.micro_batches
    return out


def pipeline_dict(pipeline: PipelineStep) -> dict[str, Any]:
    """The ``pipeline`` section of ``summary.json``."""
    times, step = pipeline.times, pipeline.step
    closed = bubble_fraction(
        times.schedule, times.stages, times.virtual_stages, times.micro_batches
    )
    redone = stage_recomputed_cycles(pipeline)
    return {
        "processor_order": ORDER,
        "data": pipeline.data,
        "pipeline": times.stages,
        "tensor": pipeline.tensor,
        **({"expert": pipeline.expert} if pipeline.expert > 1 else {}),
        "schedule": times.schedule.value,
        "virtual_stages": times.virtual_stages,
        "micro_batches": times.micro_batches,
        **({"zero": pipeline.zero} if pipeline.zero else {}),
        "step_cycles": step.total_cycles,
        "pipeline_cycles": step.pipeline_cycles,
        "bound_cycles": step_bound_cycles(pipeline),
        "bubble_fraction_closed_form": closed,
        "stages": [
            {
                "compute_cycles": s.compute_cycles,
                "bubble_cycles": s.bubble_cycles,
                "bubble_fraction": s.bubble_cycles / step.pipeline_cycles,
                "exposed_transfer_cycles": s.exposed_transfer_cycles,
                "last_backward_end_cycles": s.last_backward_end_cycles,
                "all_reduce_cycles": s.all_reduce_cycles,
                "exposed_all_reduce_cycles": s.exposed_all_reduce_cycles,
                "update_cycles": s.update_cycles,
                **({"all_gather_cycles": s.all_gather_cycles} if pipeline.zero else {}),
                "recomputed_cycles": redone[i],
                "gradient_bytes": pipeline.stage_gradient_bytes[i],
            }
            for i, s in enumerate(step.stages)
        ],
        "chunks": [
            {
                "chunks": list(c.chunks),
                "forward_cycles": c.passes.forward_cycles,
                "backward_cycles": c.passes.backward_cycles,
                "recomputed_cycles": c.recomputed_cycles,
                "forward_ops": c.forward_ops,
                "backward_ops": c.backward_ops,
                "count_per_step": len(c.chunks) * times.micro_batches,
            }
            for c in pipeline.distinct
        ],
        "activation_bytes": list(pipeline.activation_bytes),
        "gradient_bytes": list(pipeline.gradient_bytes),
        "tables": TABLES if pipeline.expert == 1 else EXPERT_TABLES,
    }


def pipeline_block(pipeline: PipelineStep) -> str:
    """The console's lines of a pipeline step."""
    section = pipeline_dict(pipeline)
    step = section["step_cycles"]
    lines = [
        f"pipeline        {section['data']} x {section['pipeline']} x {section['tensor']}"
        f" processors ({ORDER}), {section['schedule']}, {section['micro_batches']}"
        " micro-batches"
        + (f", expert groups of {section['expert']} replicas" if "expert" in section else ""),
        f"  step          {step:,} cycles, bound {section['bound_cycles']:,} (the busiest"
        " stage's passes, gradient sum, update and all-gather, no bubble)",
        f"  bubble        closed form {100 * section['bubble_fraction_closed_form']:.1f} %"
        " of the pipeline's time (uniform chunks, no transfer time)",
    ]
    zero = section.get("zero", 0)
    summed = "reduce-scatter" if zero else "all-reduce"
    for i, s in enumerate(section["stages"]):
        lines.append(
            f"  stage {i:<3}     compute {s['compute_cycles']:,}, bubble"
            f" {s['bubble_cycles']:,} ({100 * s['bubble_fraction']:.1f} %), exposed transfers"
            f" {s['exposed_transfer_cycles']:,}, {summed} {s['all_reduce_cycles']:,}"
            f" ({s['exposed_all_reduce_cycles']:,} past the flush), update"
            f" {s['update_cycles']:,}"
            + (f", all-gather {s['all_gather_cycles']:,}" if zero else "")
            + (
                f", recomputed {s['recomputed_cycles']:,} of its backward"
                if s["recomputed_cycles"]
                else ""
            )
        )
    lines.append(f"  tables        {TABLES}")
    return "\n".join(lines)


def with_pipeline(
    record: dict[str, Any], pipeline: PipelineStep, clock_mhz: float
) -> dict[str, Any]:
    """A record's ``total_cycles`` and ``seconds`` made the pipeline step's."""
    cycles = pipeline.step.total_cycles
    return {**record, "total_cycles": cycles, "seconds": cycles_to_seconds(cycles, clock_mhz)}


def pipeline_groups(
    pipeline: PipelineStep, network: Network, interconnect: InterconnectSpec
) -> tuple[ProcessorGroup, ...]:
    """The plan's groups of replica 0's first stage's rank 0: its tensor-parallel group,
    its pipeline (its peers of every stage, in order), its expert-parallel group (its
    peers of the first replicas) and its data-parallel group, each where it has more
    than one member."""
    d, p, t = pipeline.data, pipeline.times.stages, pipeline.tensor
    groups = [
        (GroupKind.TENSOR, tuple(range(t))),
        (GroupKind.PIPELINE, tuple(s * t for s in range(p))),
        (GroupKind.EXPERT, tuple(r * p * t for r in range(pipeline.expert))),
        (GroupKind.DATA, tuple(r * p * t for r in range(d))),
    ]
    return tuple(
        spanned(kind, members, network, interconnect)
        for kind, members in groups
        if len(members) > 1
    )
