"""Timing of tile groups: the ops that tile streams link run as one fused op.

A consumer of a tile stream takes each tile right after its source has made (or
loaded) it, so it cannot wait for the whole source as for a data dependency.  The
engines are left as they are: they simulate a contracted graph in which each group
(:func:`~accelsim.graph.queries.tile_groups`) is one op, with its first op's
priority, waiting for everything its members wait for outside the group, and every
op that waits for a member waits for it.  The contracted ops keep their program
order, except that an op a group waits for which came after the group's first op (a
transfer that placement put right before the member reading it) moves before the
group; every op keeps its priority (a pipeline schedule's), and the engines rank the
contracted graph's ready ops by its own paths (:mod:`accelsim.timing.ready`).  The
group runs on its lead unit (the
array of its first GEMM; the first op's unit when it has none), and its costs
combine its members':

* compute: the members on the lead unit run one after another, those on another
  unit (the vector unit beside a GEMM) beside them, tile group by tile group.  With
  ``W`` cycles on the lead unit, ``V`` on the other and ``g`` tile groups it takes
  ``max(W + ceil(V / g), ceil(W / g) + V)``: the other unit starts after the first
  tile group and ends one after the lead unit, and the slower of the two sets the
  pace (a vector-bound epilogue stalls the array);
* DRAM reads and writes, prologue and epilogue: the members' sums, so the group's
  traffic overlaps its compute tile group by tile group as one op's does;
* tile groups: the most any member has;
* the fixed cost per op that passes before the group's first transfer: its lead's
  (the other members' stay inside its compute).
* streams (:mod:`accelsim.timing.streams`): the group's transfers carry its members'
  bytes at once, so they go through the processor's
  :class:`~accelsim.timing.memory.Memory` with the stream of the member reading (for
  its reads) or writing (for its writes) the most DRAM bytes, a foreground member's
  before a background one's (:func:`~accelsim.timing.streams.group_stream`).

The other unit's time inside a group is not booked in the engine, so another ready
op may run on that unit beside it.  The forward and backward chains of a step are
sequential, so this shows only where independent vector work overlaps a group (a
downsample branch's batchnorm, updates that optimizer fusion runs beside the
backward pass).

The trace is then expanded back to every op: the lead op spans the group's time
less the compute of its unit's other members, and every other member runs for its
own compute cycles at the group's end (one after another on each unit), so each
member's stall is zero, the lead's stall is the group's (waits for DRAM, or for a
slower epilogue), and busy time per unit adds up.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

from accelsim.config.run import EngineKind
from accelsim.errors import SimulationError
from accelsim.graph import queries
from accelsim.graph.ops import OpGraph, replaced
from accelsim.timing.costs import OpCosts
from accelsim.timing.engines import simulate
from accelsim.timing.machine import Machine
from accelsim.timing.streams import Streams, group_stream, op_streams
from accelsim.timing.trace import Trace, build_trace


def simulate_grouped(
    graph: OpGraph, costs: OpCosts, machine: Machine, kind: EngineKind = EngineKind.AUTO
) -> Trace:
    """:func:`~accelsim.timing.engines.simulate` with every tile group run as one op.

    Raises:
        SimulationError: if a group's ops are on several processors or wait for an op
            that waits for them, or some op can never run.
        LimitError: if the step takes more than :data:`~accelsim.errors.MAX_COUNT` cycles.
    """
    groups = queries.tile_groups(graph)
    if not groups:
        return simulate(graph, costs, machine, kind)
    leads = tuple(queries.group_lead(graph, g) for g in groups)
    contracted, new_id = _contract(graph, costs, groups, leads)
    fused_graph, fused_costs, streams = contracted
    inner = simulate(fused_graph, fused_costs, machine, kind, streams)
    index = np.asarray(new_id, np.int64)
    start, end = inner.start_cycle[index], inner.end_cycle[index]
    compute = costs.compute_cycles
    unit = costs.unit
    for group, lead in zip(groups, leads, strict=True):
        e = int(end[lead])
        for same in (True, False):
            at = e
            for i in reversed(group):
                if i != lead and (unit[i] == unit[lead]) == same:
                    end[i], start[i] = at, at - int(compute[i])
                    at -= int(compute[i])
            if same:
                end[lead] = at
    return build_trace(graph, costs, inner.processors, start, end, inner.events, inner.engine)


def _contract(
    graph: OpGraph,
    costs: OpCosts,
    groups: Sequence[tuple[int, ...]],
    leads: Sequence[int],
) -> tuple[tuple[OpGraph, OpCosts, Streams], list[int]]:
    """The graph with each group one op, its costs and streams, and each old op's new
    id."""
    n_ops = len(graph.ops)
    first = list(range(n_ops))
    for group in groups:
        where = {graph.processor[i] for i in group}
        if len(where) > 1:
            raise SimulationError(
                f"{graph.ops[group[0]].name} and the ops taking its tiles are on"
                f" processors {sorted(where)}"
            )
        for i in group[1:]:
            first[i] = group[0]
    waits: dict[int, set[int]] = {}  # kept op -> the kept ops it waits for
    for op in graph.ops:
        here = first[op.op_id]
        waits.setdefault(here, set()).update(first[d] for d in op.deps)
    for here, found in waits.items():
        found.discard(here)
    order = _program_order(graph, waits)
    new_id_of = {old: new for new, old in enumerate(order)}
    new_id = [new_id_of[first[i]] for i in range(n_ops)]
    ops = []
    for new, old in enumerate(order):
        deps = tuple(sorted(new_id_of[d] for d in waits[old]))
        ops.append(replaced(graph.ops[old], op_id=new, deps=deps, sources=(), after=()))
    contracted = OpGraph(
        ops=tuple(ops),
        processor=tuple(graph.processor[i] for i in order),
        on_chip=graph.on_chip,
        stashed=graph.stashed,
        priority=tuple(graph.priority[i] for i in order) if graph.priority else (),
    )
    fused = _fused_costs(costs, order, groups, leads, new_id)
    return (contracted, fused, _fused_streams(graph, costs, order, groups, new_id)), new_id


def _program_order(graph: OpGraph, waits: dict[int, set[int]]) -> list[int]:
    """The kept ops (``waits``' keys) in program order, except that an op moves after
    what it waits for (a topological order, earliest op first).

    Raises:
        SimulationError: if a group waits for an op that waits for it.
    """
    pending = {op: len(found) for op, found in waits.items()}
    after: dict[int, list[int]] = {}
    for op, found in waits.items():
        for d in found:
            after.setdefault(d, []).append(op)
    ready = [op for op, n in pending.items() if n == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        op = heapq.heappop(ready)
        order.append(op)
        for s in after.get(op, ()):
            pending[s] -= 1
            if pending[s] == 0:
                heapq.heappush(ready, s)
    if len(order) < len(pending):
        stuck = min(op for op, n in pending.items() if n > 0)
        raise SimulationError(
            f"{graph.ops[stuck].name} and the ops taking its tiles wait for an op that"
            " waits for them"
        )
    return order


def _fused_streams(
    graph: OpGraph,
    costs: OpCosts,
    kept: Sequence[int],
    groups: Sequence[tuple[int, ...]],
    new_id: Sequence[int],
) -> Streams:
    """Each kept op's streams: its own, a group's reads and writes those of the member
    moving the most of them (:func:`~accelsim.timing.streams.group_stream`)."""
    reads, writes = op_streams(graph, costs)
    rows = np.asarray(kept, np.int64)
    fused_reads, fused_writes = reads[rows], writes[rows]
    for group in groups:
        row = new_id[group[0]]
        fused_reads[row] = group_stream(reads, costs.dram_read_bytes, group)
        fused_writes[row] = group_stream(writes, costs.dram_ofmap_write_bytes, group)
    return fused_reads, fused_writes


def _fused_costs(
    costs: OpCosts,
    kept: Sequence[int],
    groups: Sequence[tuple[int, ...]],
    leads: Sequence[int],
    new_id: Sequence[int],
) -> OpCosts:
    """Each kept op's costs, a group's combined (see the module docstring)."""
    rows = np.asarray(kept, np.int64)
    fields = {
        name: getattr(costs, name)[rows].copy()
        for name, f in OpCosts.__dataclass_fields__.items()
        if f.type == "np.ndarray"
    }
    combined = ("unit", "compute_cycles", "overhead_cycles", "chunks", "mapping_efficiency")
    summed = [name for name in fields if name not in combined]
    for group, lead in zip(groups, leads, strict=True):
        members = np.asarray(group, np.int64)
        row = new_id[group[0]]
        for name in summed:
            fields[name][row] = getattr(costs, name)[members].sum()
        unit = costs.unit[lead]
        on_lead = costs.unit[members] == unit
        own = int(costs.compute_cycles[members][on_lead].sum())
        other = int(costs.compute_cycles[members][~on_lead].sum())
        tile_groups = max(1, int(costs.chunks[members].max()))
        fields["unit"][row] = unit
        fields["chunks"][row] = tile_groups
        fields["mapping_efficiency"][row] = costs.mapping_efficiency[lead]
        fields["overhead_cycles"][row] = costs.overhead_cycles[lead]
        fields["compute_cycles"][row] = (
            max(own + -(-other // tile_groups), -(-own // tile_groups) + other) if other else own
        )
    return OpCosts(**fields, unit_names=costs.unit_names, arrays=costs.arrays)
