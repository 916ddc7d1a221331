"""Free placement of a training step's separate tasks on processors (LayerPipe).

A *task* is the work of one layer in one role: its forward (``fwd``), its input
gradient (``dx``, or the two parts ``dx.part0``/``dx.part1`` when the GEMM's rows
are split), its weight gradient (``dw``) and its update (``update``).  Tasks may
run on any processor.  :func:`assign` is a list scheduler for the pipelined
steady state: it takes groups of tasks longest first and puts each where the
processor's busiest unit (array or vector unit) plus the time to move the data
the group exchanges with tasks already placed elsewhere is least.  When the
tasks actually run is then decided by the event engine, op by op, subject to the
dependencies and the weight-delay rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from accelsim.graph.ops import WHOLE, GemmOp, Op, OpGraph, Phase, VectorOp
from accelsim.graph.queries import reads_of
from accelsim.report.result import RunResult
from accelsim.timing.costs import UNIT_ARRAY
from accelsim.timing.memory import Memory, traffic_bound

TaskKey = tuple[str, str]  # (layer, task)
MOVED_DX = "dx.part0"  # a split dX GEMM's moved rows (passes.split_gemms' first part)

_ROLE = {
    Phase.FWD: "fwd",
    Phase.BWD_INPUT: "dx",
    Phase.BWD_WEIGHT: "dw",
    Phase.UPDATE: "update",
    Phase.COMM: "update",
    Phase.AUX: "aux",
}


def task_of(op: Op) -> TaskKey:
    """The task an op belongs to: its layer and role (split dX GEMMs by part)."""
    role = _ROLE[op.phase]
    if role == "dx" and isinstance(op, GemmOp) and op.part != WHOLE:
        role += f".part{op.part}"
    return (op.layer, role)


@dataclass(frozen=True)
class TaskCosts:
    """What every task costs on one processor, measured in a single-processor run.

    Attributes:
        array_cycles, vector_cycles: Per task, the busy time of its ops on the
            array and on the other units (vector unit, links).
        traffic_bytes: Per pair of tasks (producer, consumer), the bytes the
            consumer reads of what the producer wrote.
        dram_bytes: Per task, the DRAM bytes its ops read and write.
        dram_write_bytes: Per task, the DRAM bytes of ``dram_bytes`` its ops write.
    """

    array_cycles: dict[TaskKey, int]
    vector_cycles: dict[TaskKey, int]
    traffic_bytes: dict[tuple[TaskKey, TaskKey], int]
    dram_bytes: dict[TaskKey, int]
    dram_write_bytes: dict[TaskKey, int]

    def total(self, task: TaskKey) -> int:
        return self.array_cycles.get(task, 0) + self.vector_cycles.get(task, 0)


def measure_tasks(single: RunResult) -> TaskCosts:
    """Task costs and traffic from a step simulated on one processor."""
    graph, trace = single.graph, single.trace
    array: dict[TaskKey, int] = {}
    vector: dict[TaskKey, int] = {}
    traffic: dict[tuple[TaskKey, TaskKey], int] = {}
    dram: dict[TaskKey, int] = {}
    written: dict[TaskKey, int] = {}
    writes = trace.costs.dram_ofmap_write_bytes
    moved = trace.costs.dram_read_bytes + writes
    for op in graph.ops:
        task = task_of(op)
        busy = int(trace.end_cycle[op.op_id] - trace.start_cycle[op.op_id])
        table = array if trace.costs.unit[op.op_id] == UNIT_ARRAY else vector
        table[task] = table.get(task, 0) + busy
        dram[task] = dram.get(task, 0) + int(moved[op.op_id])
        written[task] = written.get(task, 0) + int(writes[op.op_id])
        for access, producers in zip(reads_of(op), op.sources, strict=False):
            for producer in {task_of(graph.ops[p]) for p in producers} - {task}:
                pair = (producer, task)
                traffic[pair] = traffic.get(pair, 0) + access.bytes
    return TaskCosts(array, vector, traffic, dram, written)


def activation_groups(graph: OpGraph) -> list[set[TaskKey]]:
    """Tasks that run together when the dX split is read as ``Wᵀδ`` on layer ``l``'s
    processor and ``⊙ f'`` on layer ``l - 1``'s: the backward of every vector layer
    joins the task of the first GEMM (the layer below's dX, or its dW) that reads
    its result."""
    groups: list[set[TaskKey]] = []
    for op in graph.ops:
        if not isinstance(op, GemmOp) or op.phase not in (Phase.BWD_INPUT, Phase.BWD_WEIGHT):
            continue
        for producers in op.sources:
            for p in producers:
                made = graph.ops[p]
                if isinstance(made, VectorOp) and made.phase is Phase.BWD_INPUT:
                    groups.append({task_of(made), task_of(op)})
    return groups


def assign(
    costs: TaskCosts,
    processors: int,
    link: Memory,
    groups: Iterable[set[TaskKey]] = (),
    dram: Sequence[Memory] | None = None,
    allowed: Callable[[TaskKey], Sequence[int]] | None = None,
) -> dict[TaskKey, int]:
    """Every task's processor: longest group first, each where it finishes soonest.

    A group's cost on processor ``p`` is the largest of ``p``'s array and vector
    loads (and, given each processor's own DRAM memory ``dram``, that memory's
    time) with the group added, plus the cycles to move the bytes it exchanges
    with tasks already placed on other processors over one ``link``.  Ties go to the
    lowest processor.  Tasks in one group share a processor; every other task is
    a group of its own.  ``allowed`` gives the processors a task may run on (all
    by default); a group goes where all its tasks may, or where its first may.
    """
    tasks = set(costs.array_cycles) | set(costs.vector_cycles)
    member: dict[TaskKey, int] = {}
    units: list[set[TaskKey]] = []
    for group in groups:
        live = {t for t in group if t in tasks and t not in member}
        for t in live:
            member[t] = len(units)
        if live:
            units.append(live)
    for t in sorted(tasks - set(member)):
        member[t] = len(units)
        units.append({t})
    exchanged: dict[TaskKey, list[tuple[TaskKey, int]]] = {}
    for (made, read), size in costs.traffic_bytes.items():
        exchanged.setdefault(made, []).append((read, size))
        exchanged.setdefault(read, []).append((made, size))

    def weight(unit: set[TaskKey]) -> tuple[int, list[TaskKey]]:
        return sum(costs.total(t) for t in unit), sorted(unit)

    array = [0] * processors
    vector = [0] * processors
    busy = [0.0] * processors  # each processor's DRAM time
    where: dict[TaskKey, int] = {}
    for unit in sorted(units, key=weight, reverse=True):
        a = sum(costs.array_cycles.get(t, 0) for t in unit)
        v = sum(costs.vector_cycles.get(t, 0) for t in unit)
        b = sum(costs.dram_bytes.get(t, 0) for t in unit)
        w = sum(costs.dram_write_bytes.get(t, 0) for t in unit)

        def dram_time(p: int, b: int = b, w: int = w) -> float:
            return traffic_bound(dram[p], b, w) if dram else 0.0

        def finish(p: int, unit: set[TaskKey] = unit, a: int = a, v: int = v) -> float:
            moved = sum(
                size
                for t in unit
                for other, size in exchanged.get(t, ())
                if other in where and where[other] != p
            )
            return max(array[p] + a, vector[p] + v, busy[p] + dram_time(p)) + link.bound(moved)

        best = min(_places(unit, processors, allowed), key=lambda p: (finish(p), p))
        array[best] += a
        vector[best] += v
        busy[best] += dram_time(best)
        for t in unit:
            where[t] = best
    return where


def _places(
    unit: set[TaskKey], processors: int, allowed: Callable[[TaskKey], Sequence[int]] | None
) -> Sequence[int]:
    """The processors a group of tasks may run on."""
    if allowed is None:
        return range(processors)
    members = sorted(unit)
    common = set(allowed(members[0])).intersection(*(allowed(t) for t in members[1:]))
    return sorted(common) or allowed(members[0])


def dram_cycles(
    costs: TaskCosts, where: Mapping[TaskKey, int], memories: Sequence[Memory]
) -> float:
    """The DRAM time of one mini-batch under ``where``: the busiest memory's bound for
    the bytes of the tasks on the processors it serves (``memories[p]`` is
    processor ``p``'s, one object for every processor when they share one)."""
    moved: dict[int, int] = {id(memory): 0 for memory in memories}
    written: dict[int, int] = {id(memory): 0 for memory in memories}
    for task, p in where.items():
        moved[id(memories[p])] += costs.dram_bytes.get(task, 0)
        written[id(memories[p])] += costs.dram_write_bytes.get(task, 0)
    return max(traffic_bound(m, moved[id(m)], written[id(m)]) for m in memories)


def loads(costs: TaskCosts, where: Mapping[TaskKey, int], processors: int) -> list[int]:
    """Each processor's busiest unit's cycles per mini-batch under ``where``."""
    array = [0] * processors
    vector = [0] * processors
    for task, p in where.items():
        array[p] += costs.array_cycles.get(task, 0)
        vector[p] += costs.vector_cycles.get(task, 0)
    return [max(a, v) for a, v in zip(array, vector, strict=True)]
