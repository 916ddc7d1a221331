"""What ran when and who caused it: a simulated step's work by stage and by owner
(``summary.json``'s ``stages`` and ``owners``).

Every op counts once in its stage (:class:`~accelsim.graph.ops.Stage`) and once for
its owner (``core`` for the step's own work: lowering, placement, the optimizer and
the transfers they need; a technique's registered name for the ops it added), so the
stages, and the owners, each add up to the step's ops, MACs, vector ops, DRAM bytes,
op energy and busy cycles.  A technique's work in another stage than the one its
phase suggests (a forward op recomputed in the backward stage) shows in both tables:
in its stage's, and under its owner.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from accelsim.graph.memo import per_graph
from accelsim.graph.ops import CORE, OpGraph, Stage
from accelsim.report.summary import WorkSummary
from accelsim.timing.costs import UNIT_COMM
from accelsim.timing.trace import Trace
from accelsim.timing.weights import processor_sum, weighted_group_totals

CORE_OWNER = "core"
"""The owner the tables name the step's own work by (its ops' ``owner`` is empty)."""

_STAGE_CODE = {stage: i for i, stage in enumerate(Stage)}


def by_stage(graph: OpGraph, trace: Trace, op_pj: np.ndarray) -> dict[str, WorkSummary]:
    """The step's work in each stage, every stage named (an empty one with zeros)."""
    ops = graph.ops
    codes = per_graph(
        graph,
        "stage codes",
        lambda: np.fromiter((_STAGE_CODE[op.stage] for op in ops), np.int64, len(ops)),
    )
    return _work(codes, [stage.value for stage in Stage], trace, op_pj)


def by_owner(graph: OpGraph, trace: Trace, op_pj: np.ndarray) -> dict[str, WorkSummary]:
    """The step's work by owner: ``core`` first, then each technique that added ops,
    in the order its first op comes."""
    codes, names = per_graph(graph, "owner codes", lambda: _owners(graph))
    return _work(codes, names, trace, op_pj)


def _owners(graph: OpGraph) -> tuple[np.ndarray, list[str]]:
    index = {CORE: 0}
    codes = np.fromiter(
        (index.setdefault(op.owner, len(index)) for op in graph.ops), np.int64, len(graph.ops)
    )
    return codes, [owner or CORE_OWNER for owner in index]


def _work(
    codes: np.ndarray, names: Sequence[str], trace: Trace, op_pj: np.ndarray
) -> dict[str, WorkSummary]:
    c = trace.costs
    groups = len(names)
    units = [(u, name) for u, name in enumerate(c.unit_names) if u != UNIT_COMM]
    # Every group's busy cycles on every unit of every processor, in one pass (the ops
    # standing for every processor's, on every processor).
    busy = np.zeros((groups, len(c.unit_names), trace.processors), np.int64)
    durations = trace.end_cycle - trace.start_cycle
    stand = trace.stand_ins()
    alone = ~stand
    np.add.at(busy, (codes[alone], c.unit[alone], trace.processor[alone]), durations[alone])
    if stand.any():
        each = np.zeros((groups, len(c.unit_names)), np.int64)
        np.add.at(each, (codes[stand], c.unit[stand]), durations[stand])
        busy += each[:, :, None]
    ops = weighted_group_totals(trace, codes, np.ones(len(codes), np.int64), groups)
    macs = weighted_group_totals(trace, codes, c.macs, groups)
    vector_ops = weighted_group_totals(trace, codes, c.vector_ops, groups)
    reads = weighted_group_totals(trace, codes, c.dram_read_bytes, groups)
    writes = weighted_group_totals(trace, codes, c.dram_ofmap_write_bytes, groups)
    return {
        name: WorkSummary(
            ops=ops[i],
            macs=macs[i],
            vector_ops=vector_ops[i],
            dram_read_bytes=reads[i],
            dram_write_bytes=writes[i],
            energy_pj=processor_sum(trace, op_pj, codes == i),
            busy_cycles={unit: tuple(busy[i, u].tolist()) for u, unit in units},
        )
        for i, name in enumerate(names)
    }
