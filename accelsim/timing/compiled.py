"""The compiled engine: the SimPy engine's events, run by a Numba loop over op arrays.

:func:`simulate` flattens the graph and its costs into arrays and runs
:func:`accelsim.timing.event_loop.run_events`, which processes the same events
in the same order as :mod:`accelsim.timing.engine` and so gives the same
:class:`~accelsim.timing.trace.Trace`, event count included
(``tests/test_compiled.py`` checks both on random graphs and hardware and on
the golden runs).  Importing this module loads Numba (about 0.45 s, once per
process); the loop is compiled once and cached on disk.
"""

from __future__ import annotations

import numpy as np

from accelsim.config.hardware import DramSharing, HardwareSpec
from accelsim.errors import LimitError, SimulationError
from accelsim.graph.ops import CommOp, OpGraph, TransferOp
from accelsim.timing import event_loop
from accelsim.timing.costs import UNIT_COMM, OpCosts
from accelsim.timing.trace import LIMIT_MESSAGE, Trace, build_trace


def simulate(graph: OpGraph, costs: OpCosts, hw: HardwareSpec) -> Trace:
    """Run ``graph`` with ``costs`` on ``hw``, as :func:`accelsim.timing.engine.simulate`.

    Raises:
        SimulationError: if some op can never run.
        LimitError: if the step takes more than :data:`~accelsim.errors.MAX_COUNT` cycles.
    """
    ops = graph.ops
    n_ops = len(ops)
    processors = hw.processors
    n_units = len(costs.unit_names) - 1  # every unit but the interconnect has a store
    unit = costs.unit.astype(np.int64)
    kind = np.zeros(n_ops, np.int64)
    where = np.asarray(graph.processor, np.int64).copy()
    link_bytes = np.zeros(n_ops, np.int64)
    part_ptr = np.zeros(n_ops + 1, np.int64)
    participants: list[int] = []
    deps_count = np.zeros(n_ops, np.int64)
    succ_lists: list[list[int]] = [[] for _ in range(n_ops)]
    for op in ops:
        i = op.op_id
        deps_count[i] = len(op.deps)
        for d in op.deps:
            succ_lists[d].append(i)
        if isinstance(op, TransferOp):
            kind[i] = event_loop.KIND_TRANSFER
            where[i] = op.source
            link_bytes[i] = op.bytes
        elif isinstance(op, CommOp):
            kind[i] = event_loop.KIND_COMM
            link_bytes[i] = op.tensor.bytes
            participants.extend(op.participants)
        part_ptr[i + 1] = len(participants)
    # Stores in the SimPy engine's order: processor-major, units without the interconnect.
    unit_slot = np.where(unit > UNIT_COMM, unit - 1, unit)
    store = np.where(kind == event_loop.KIND_UNIT, where * n_units + unit_slot, -1)
    n_stores = processors * n_units
    per_store = np.bincount(store[store >= 0], minlength=n_stores)
    store_base = np.concatenate(([0], np.cumsum(per_store)[:-1])).astype(np.int64)
    succ_ptr = np.zeros(n_ops + 1, np.int64)
    succ_ptr[1:] = np.cumsum([len(s) for s in succ_lists])
    succ_idx = np.array([s for lst in succ_lists for s in lst], np.int64)
    priority = np.asarray(graph.priority if graph.priority else range(n_ops), np.int64)
    shared = hw.dram.sharing is not DramSharing.PER_PROCESSOR
    dram_channel = np.zeros(processors, np.int64) if shared else np.arange(processors)
    max_chunks = int(costs.chunks.max(initial=1))
    start, end, events, status = event_loop.run_events(
        kind,
        store.astype(np.int64),
        where,
        priority,
        costs.chunks.astype(np.int64),
        costs.compute_cycles.astype(np.int64),
        costs.dram_read_bytes.astype(np.int64),
        costs.dram_ofmap_write_bytes.astype(np.int64),
        costs.prologue_bytes.astype(np.int64),
        costs.epilogue_bytes.astype(np.int64),
        link_bytes,
        part_ptr,
        np.asarray(participants, np.int64),
        succ_ptr,
        succ_idx,
        deps_count,
        store_base,
        n_stores,
        dram_channel.astype(np.int64),
        1 if shared else processors,
        processors,
        float(hw.dram.bandwidth_bytes_per_cycle),
        int(hw.dram.latency_cycles),
        float(hw.interconnect.bandwidth_bytes_per_cycle),
        int(hw.interconnect.latency_cycles),
        2 * n_ops + n_stores * (max_chunks + 4) + 16,
    )
    if status == event_loop.OVER_LIMIT:
        raise LimitError(LIMIT_MESSAGE)
    if (end < 0).any():
        stuck = [ops[i].name for i in np.flatnonzero(end < 0)[:3]]
        raise SimulationError(f"ops never ran (dependency cycle?): {', '.join(stuck)}")
    return build_trace(graph, costs, processors, start, end, int(events), "compiled")
