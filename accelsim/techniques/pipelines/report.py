"""What a simulated pipeline schedule achieved: steady state, warm-up, flush, per-processor use
and memory.

The steady period is the cost of one more mini-batch in a full pipeline, measured
from the makespans of ``M`` and ``2M`` mini-batches (``Schedule.measure``); beside
it stand the period's lower bounds (DRAM, interconnect, the busiest unit), the
binding one named, and the speedup they allow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from accelsim.config.dram import GIB_BYTES
from accelsim.graph.ops import GemmOp, Phase, VectorOp
from accelsim.graph.queries import forward_work
from accelsim.report.result import RunResult
from accelsim.report.training import Input
from accelsim.techniques.base import Section, SimulatedStep, TechniqueContext
from accelsim.techniques.pipelines.memory import ProcessorMemory, channels, overflow
from accelsim.techniques.pipelines.optimum import Optimum
from accelsim.techniques.pipelines.plan import Plan, task_bounds
from accelsim.timing.costs import UNIT_ARRAY
from accelsim.timing.machine import Machine
from accelsim.units import bytes_to_mb

INTERNAL_DETAILS = (
    "mini_batches_simulated",
    "steady_window_cycles",
    "balanced_on",
    "measured_cycles_per_minibatch",
    "binding_bound_cycles",
    "single_processor_cycles",
)
"""A pipeline report's details on how the period was measured (the mini-batches
simulated, the window measured, the bound's and the baseline's cycles that
``speedup_bound`` and ``base_step_cycles`` already give): in ``summary.json``, not
in CSV rows."""


def _entered(run: RunResult, j: int) -> int:
    """When mini-batch ``j``'s first forward GEMM started."""
    return min(
        int(run.trace.start_cycle[op.op_id])
        for op in run.graph.ops
        if isinstance(op, GemmOp) and forward_work(op) and op.tag.mini_batch == j
    )


@dataclass(frozen=True)
class SteadyState:
    """When each mini-batch of a simulated pipeline completed, and the full window.

    Attributes:
        done: When each mini-batch completed (the end of its last update).
        first, last: Completions of mini-batches ``first..last`` happen while the
            pipeline is full: after the ``S - 1`` that fill it and before the
            ``S - 1`` that drain it.
        stages: Stages of the schedule.
    """

    done: list[int]
    first: int
    last: int
    stages: int

    @property
    def mini_batches(self) -> int:
        return len(self.done)


@dataclass(frozen=True)
class Placed:
    """How a schedule placed a step kind.

    Attributes:
        plan: The partition into stages.
        single: The step simulated on one processor whose layer costs the partition
            was balanced on (and the task model read).
        own: Whether ``single`` is the kind's own step graph; if not, it is the
            baseline step, which that graph equals.
    """

    plan: Plan
    single: RunResult
    own: bool


@dataclass(frozen=True)
class Scheduled:
    """What a schedule knows of a simulated graph it placed.

    Attributes:
        placed: How it placed it.
        steady_cycles: Its steady period per mini-batch (``Schedule.measure``): the
            measured one, or the binding lower bound when that is larger.
        measured_cycles: The measured period, before the bounds.
        memory: What each of its processors keeps in DRAM.
    """

    placed: Placed
    steady_cycles: float
    measured_cycles: float
    memory: list[ProcessorMemory]


def steady_state(run: RunResult) -> SteadyState:
    """The completions of a simulated pipeline and the window in which it is full.

    (The period itself is measured by ``Schedule.measure``, from two makespans.)
    """
    mini_batches = count_all(run)
    stages = 1 + max(run.graph.processor)
    done = [0] * mini_batches
    for op in run.graph.ops:
        if op.phase is Phase.UPDATE and isinstance(op, VectorOp):
            j = op.tag.mini_batch
            done[j] = max(done[j], int(run.trace.end_cycle[op.op_id]))
    first, last = stages - 1, mini_batches - stages
    if last <= first:  # too few mini-batches to fill the pipeline: the whole run
        first, last = 0, mini_batches - 1
    return SteadyState(done, first, last, stages)


def count_all(run: RunResult) -> int:
    """Mini-batches in a simulated pipeline."""
    return 1 + max(op.tag.mini_batch for op in run.graph.ops)


def _tasks(single: RunResult) -> dict[str, dict[str, int]]:
    """Per layer, its forward, input-gradient, weight-gradient and update tasks' cycles."""
    names = {
        Phase.FWD.value: "fwd",
        Phase.BWD_INPUT.value: "dx",
        Phase.BWD_WEIGHT.value: "dw",
        Phase.UPDATE.value: "update",
    }
    return {
        layer: {names[phase]: cycles for phase, cycles in by.items()}
        for layer, by in single.layer_phase_cycles().items()
    }


def _partition_rows(plan: Plan) -> list[dict[str, Any]]:
    """Per stage: its first and last layer, how many, and their cost."""
    names = list(plan.stage_of)
    rows = []
    for s in range(plan.stages):
        layers = [n for n in names if plan.stage_of[n] == s]
        rows.append(
            {
                "stage": s,
                "first_layer": layers[0],
                "last_layer": layers[-1],
                "layers": len(layers),
                "replicas": plan.copies(s),
                "cost_cycles": sum(plan.costs[names.index(n)] for n in layers),
            }
        )
    return rows


def _processor_rows(
    run: RunResult, memory: list[ProcessorMemory], window: tuple[int, int]
) -> list[dict[str, Any]]:
    """Per processor: its array's busy, stall and idle time and utilization over the
    full-pipeline ``window``, and what it keeps in DRAM (``memory``)."""
    trace, c, hw = run.trace, run.trace.costs, run.hardware
    lo, hi = window
    span = max(hi - lo, 1)
    rows = []
    for p, kept in enumerate(memory):
        mine = (trace.processor == p) & (c.unit == UNIT_ARRAY)
        starts, ends = trace.start_cycle[mine], trace.end_cycle[mine]
        inside = (starts >= lo) & (ends <= hi)
        busy = int((ends.clip(lo, hi) - starts.clip(lo, hi)).sum())
        rows.append(
            {
                "processor": p,
                "busy_cycles": busy,
                "stall_cycles": int(trace.stall_cycles[mine][inside].sum()),
                "idle_cycles": max(span - busy, 0),
                "utilization": int(c.macs[mine][inside].sum())
                / (hw.array.peak_macs_per_cycle * span),
                "activation_stash_bytes": kept.activation_stash_bytes,
                "weight_versions": kept.weight_versions,
                "weight_stash_bytes": kept.weight_stash_bytes,
                "parameter_bytes": kept.parameter_bytes,
                "footprint_bytes": kept.footprint_bytes,
            }
        )
    return rows


def _memory_report(memory: list[ProcessorMemory], machine: Machine) -> dict[str, Any]:
    """The DRAM channels' capacity and what each holds."""
    return {
        "sharing": machine.hardware.dram.sharing.value,
        "capacity_bytes": machine.dram_capacity_bytes,
        "channels": [
            {
                "processors": list(c.processors),
                "footprint_bytes": c.footprint_bytes,
                "fits": c.fits,
            }
            for c in channels(memory, machine)
        ],
    }


def _clamp_warning(binding: str, steady: float, measured: float) -> str:
    """What the report says when the period was raised to a lower bound."""
    return (
        f"steady period clamped to the {binding} bound, {steady:,.0f} cycles per mini-batch:"
        f" the measured period, {measured:,.0f}, is {(1 - measured / steady) * 100:.2f} %"
        " below it (two finite runs drained differently); the speedup is taken at the bound"
    )


def pipeline_report(
    name: str,
    micro_batches: int,
    scheduled: Scheduled,
    ctx: TechniqueContext,
    base: RunResult,
    run: RunResult,
) -> dict[str, Any]:
    """Steady period, bounds, per-processor use and memory of a simulated pipeline.

    The steady period comes from ``Schedule.measure``: the measured period, or the
    binding lower bound when the measured one falls below it, in which case
    ``clamped`` is true and ``warnings`` says by how much; the warm-up is what the
    first mini-batch took beyond one period, the flush what the last one spent in
    the pipeline beyond it.  Busy, stall and idle time and utilization are per
    processor's array over the window in which the pipeline is full.
    """
    plan = scheduled.placed.plan
    state = steady_state(run)
    steady, done, count = scheduled.steady_cycles, state.done, state.mini_batches
    measured = scheduled.measured_cycles
    lo, hi = done[state.first], done[state.last]
    bounds = run.cycle_bounds(count)
    binding = max(bounds, key=lambda k: bounds[k])
    clamped = steady > measured
    warnings = [_clamp_warning(binding, steady, measured)] if clamped else []
    memory = scheduled.memory
    problem = overflow(memory, run.machine)
    if problem is not None:
        warnings.append(f"does not fit in DRAM: {problem}")
    return {
        "technique": name,
        "stages": plan.stages,
        "micro_batches": micro_batches,
        "mini_batches_simulated": count,
        "steady_window": [state.first, state.last],
        "steady_window_cycles": hi - lo,
        "partition": _partition_rows(plan),
        "balanced_on": "own_step" if scheduled.placed.own else "baseline_step",
        "steady_cycles_per_minibatch": steady,
        "measured_cycles_per_minibatch": measured,
        "clamped": clamped,
        "warnings": warnings,
        "period_bounds_cycles": bounds,
        "binding_bound": binding,
        "binding_bound_cycles": bounds[binding],
        "warmup_cycles": max(done[0] - steady, 0.0),
        "flush_cycles": max(done[-1] - _entered(run, count - 1) - steady, 0.0),
        "interconnect_bytes_per_minibatch": int(run.trace.costs.interconnect_bytes.sum()) / count,
        "single_processor_cycles": base.total_cycles,
        "speedup": base.total_cycles / steady,
        "speedup_bound": base.total_cycles / max(bounds[binding], 1e-9),
        "task_bounds": task_bounds(_tasks(scheduled.placed.single), ctx.hardware.processors),
        "steps": {
            "base": {"cycles": base.total_cycles},
            name: {"cycles": steady},
        },
        "processors": _processor_rows(run, memory, (lo, hi)),
        "fits": problem is None,
        "memory": _memory_report(memory, run.machine),
    }


@dataclass(frozen=True)
class ModelOptimum:
    """The pinned-task model's optimum beside a LayerPipe placement: its period (and
    proven lower bound) and the cycles of the baseline step on one processor."""

    optimum: Optimum
    base_cycles: int


def optimum_report(model: ModelOptimum, period: float) -> dict[str, Any]:
    """The pinned-task model's optimum beside a placement's steady ``period``: its
    period and proven lower bound, whether it is exact, the speedups they give over
    the baseline step, and the share of the optimum's speedup the placement reaches
    (``share``; when the optimum is not exact, ``share_at_least`` against its bound)."""
    best = model.optimum
    return {
        "period_cycles": best.period_cycles,
        "lower_bound_cycles": best.lower_bound_cycles,
        "exact": best.exact,
        "speedup": model.base_cycles / max(best.period_cycles, 1),
        "speedup_bound": model.base_cycles / max(best.lower_bound_cycles, 1),
        "share": best.period_cycles / period,
        "share_at_least": best.lower_bound_cycles / period,
    }


def optimum_line(report: Mapping[str, Any], label: str) -> list[tuple[str, str]]:
    """The pinned-task model's optimum beside the speedup, when the report has it."""
    best = report.get("task_optimum")
    if best is None:
        return []
    if best["exact"]:
        text = (
            f"{best['speedup']:.3f}x (exact, {best['period_cycles']:,} cycles per"
            f" mini-batch); this placement reaches {best['share'] * 100:.0f} % of it"
        )
    else:
        low, high = f"{best['share_at_least'] * 100:.0f}", f"{best['share'] * 100:.0f}"
        text = (
            f"at most {best['speedup_bound']:.3f}x (a proven bound of its period,"
            f" {best['lower_bound_cycles']:,} cycles; best assignment found"
            f" {best['speedup']:.3f}x); this placement reaches"
            f" {low if low == high else f'{low}-{high}'} % of it"
        )
    return [(f"task-model optimum{label}", text)]


def schedule_section(
    name: str,
    reports: Mapping[str, Mapping[str, Any]],
    steps: Mapping[str, SimulatedStep],
    inputs: tuple[Input, ...],
) -> Section:
    """The schedule ``name``'s section of the training report, from each step kind's
    :func:`pipeline_report` (the details of its own kind when it names the one kind,
    else every kind's), with its ``inputs``."""
    lines = []
    for kind, report in reports.items():
        label = "" if len(reports) == 1 else f" ({kind})"
        stash = ", ".join(
            f"p{row['processor']} "
            f"{bytes_to_mb(row['activation_stash_bytes'] + row['weight_stash_bytes']):,.1f}"
            for row in report["processors"]
        )
        fullest = max(report["memory"]["channels"], key=lambda c: c["footprint_bytes"])
        lines += [
            (
                f"steady period{label}",
                f"{report['steady_cycles_per_minibatch']:,.0f} cycles per mini-batch on"
                f" {report['stages']} stages"
                + (" (clamped to its bound)" if report["clamped"] else ""),
            ),
            *optimum_line(report, label),
            (f"stash per processor{label}", f"{stash} MB (activations and weight versions)"),
            (
                f"DRAM footprint{label}",
                f"{fullest['footprint_bytes'] / GIB_BYTES:,.3f} GiB in the fullest channel"
                f" of {report['memory']['capacity_bytes'] / GIB_BYTES:,.3f} GiB"
                + ("" if report["fits"] else ": does NOT fit"),
            ),
        ]
    warnings = tuple(
        w if len(reports) == 1 else f"{kind}: {w}"
        for kind, report in reports.items()
        for w in report["warnings"]
    )
    if name in steps:
        shared = ("technique", "steps", "speedup", "speedup_bound", "binding_bound", "warnings")
        details = {k: v for k, v in reports[name].items() if k not in shared}
    else:
        details = {
            "step_kinds": {
                kind: {k: v for k, v in r.items() if k not in ("technique", "warnings")}
                for kind, r in reports.items()
            },
            "clamped": any(r["clamped"] for r in reports.values()),
            "fits": all(r["fits"] for r in reports.values()),
        }
    return Section(
        name,
        details,
        tuple(lines),
        warnings=warnings,
        inputs=inputs,
        internal=INTERNAL_DETAILS,
    )
