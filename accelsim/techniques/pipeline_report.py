"""What a simulated pipeline schedule achieved: steady state, warm-up, flush, per-processor use.

The steady state is the mean interval between mini-batch completions (the end
of their last update) over the second half of the simulated mini-batches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelsim.graph.ops import GemmOp, Phase, Tag, VectorOp
from accelsim.graph.queries import writes_of
from accelsim.report.result import RunResult
from accelsim.techniques.base import TechniqueContext
from accelsim.timing.costs import UNIT_ARRAY

if TYPE_CHECKING:
    from accelsim.techniques.pipelining import Plan, Schedule

FIRST = Tag(mini_batch=0, micro_batch=0)


def _entered(run: RunResult, j: int) -> int:
    """When mini-batch ``j``'s first forward GEMM started."""
    return min(
        int(run.trace.start_cycle[op.op_id])
        for op in run.graph.ops
        if isinstance(op, GemmOp) and op.phase is Phase.FWD and op.tag.mini_batch == j
    )


def steady_state(run: RunResult, mini_batches: int) -> tuple[float, list[int], tuple[int, int]]:
    """Mean interval between mini-batch completions over the second half of the run.

    A mini-batch completes when its last update ends.  Returns the steady-state
    cycles per mini-batch, every completion time, and the measured window.
    """
    done = [0] * mini_batches
    for op in run.graph.ops:
        if op.phase is Phase.UPDATE and isinstance(op, VectorOp):
            j = op.tag.mini_batch
            done[j] = max(done[j], int(run.trace.end_cycle[op.op_id]))
    if mini_batches == 1:
        return float(done[0]), done, (0, done[0])
    first = (mini_batches - 1) // 2
    return (done[-1] - done[first]) / (mini_batches - 1 - first), done, (done[first], done[-1])


def pipeline_report(
    schedule: Schedule, plan: Plan, ctx: TechniqueContext, base: RunResult, run: RunResult
) -> dict[str, Any]:
    """Steady state, per-processor use and memory of a simulated pipeline schedule.

    The steady state is the mean interval between mini-batch completions (end of
    their last update) over the second half of the simulated mini-batches; the
    warm-up is what the first mini-batch took beyond one steady interval, the
    flush what the last one spent in the pipeline beyond it.  Busy, stall and
    idle time and utilization are per processor's array over the steady window.
    """
    cfg = schedule.settings
    stages, stage_of, costs = plan.stages, plan.stage_of, plan.costs
    trace, c, graph = run.trace, run.trace.costs, run.graph
    steady, done, (lo, hi) = steady_state(run, cfg.mini_batches)
    span = max(hi - lo, 1)
    hw = ctx.hardware
    stash = [0] * stages
    weight_bytes = [0] * stages
    for op in graph.ops:
        if op.phase is Phase.FWD:
            for access in writes_of(op):
                name = access.tensor.name
                if name in graph.stashed and op.tag == FIRST:
                    stash[stage_of[op.layer]] += access.tensor.bytes
    for parameter in graph.parameters:
        weight_bytes[stage_of[parameter.layer]] += parameter.weight.bytes
    processors = []
    for p in range(stages):
        mine = (trace.processor == p) & (c.unit == UNIT_ARRAY)
        starts, ends = trace.start_cycle[mine], trace.end_cycle[mine]
        inside = (starts >= lo) & (ends <= hi)
        busy = int((ends.clip(lo, hi) - starts.clip(lo, hi)).sum())
        in_flight = cfg.micro_batches if schedule.synchronous else schedule.in_flight(p, stages)
        versions = schedule.weight_versions(p, stages)
        processors.append(
            {
                "processor": p,
                "busy_cycles": busy,
                "stall_cycles": int(trace.stall_cycles[mine][inside].sum()),
                "idle_cycles": max(span - busy, 0),
                "utilization": int(c.macs[mine][inside].sum())
                / (hw.array.rows * hw.array.cols * span),
                "activation_stash_bytes": stash[p] * in_flight,
                "weight_versions": versions,
                "weight_stash_bytes": weight_bytes[p] * versions,
            }
        )
    names = list(stage_of)
    partition_rows = []
    for s in range(stages):
        layers = [n for n in names if stage_of[n] == s]
        partition_rows.append(
            {
                "stage": s,
                "first_layer": layers[0],
                "last_layer": layers[-1],
                "layers": len(layers),
                "cost_cycles": sum(costs[names.index(n)] for n in layers),
            }
        )
    return {
        "technique": schedule.name,
        "stages": stages,
        "micro_batches": cfg.micro_batches,
        "mini_batches_simulated": cfg.mini_batches,
        "partition": partition_rows,
        "steady_cycles_per_minibatch": steady,
        "warmup_cycles": max(done[0] - steady, 0.0),
        "flush_cycles": max(done[-1] - _entered(run, cfg.mini_batches - 1) - steady, 0.0),
        "interconnect_bytes_per_minibatch": int(c.interconnect_bytes.sum()) / cfg.mini_batches,
        "single_processor_cycles": base.total_cycles,
        "speedup": base.total_cycles / steady,
        "steps": {
            "base": {"cycles": base.total_cycles},
            schedule.name: {"cycles": steady},
        },
        "processors": processors,
    }
