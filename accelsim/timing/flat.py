"""A step as the engines see it: flat op arrays, and a fingerprint of them.

:func:`flatten` keeps exactly what decides the timing (op kinds, units,
processors, dependencies, priorities, the costed cycles and bytes, transfers'
sources and all-reduces' participants, and the channels' bandwidths and
latencies); the compiled engine runs on it, and :func:`fingerprint` keys the
memo of simulated steps (:mod:`accelsim.timing.engines`): two steps with the
same fingerprint have the same timing, whatever their names or energy costs.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass

import numpy as np

from accelsim.config.hardware import DramSharing, HardwareSpec
from accelsim.graph.ops import CommOp, OpGraph, TransferOp
from accelsim.timing.costs import UNIT_COMM, OpCosts

KIND_UNIT, KIND_TRANSFER, KIND_COMM = 0, 1, 2


@dataclass(frozen=True)
class FlatStep:
    """Per-op arrays (int64) and the hardware's channels.

    ``store`` is a unit op's ready queue (processor-major, then unit, the
    interconnect left out), -1 for the others; ``where`` is the op's processor
    (a transfer's source); ``link_bytes`` a transfer's bytes or an all-reduce's
    tensor bytes, whose participants are ``part_idx[part_ptr[i]:part_ptr[i + 1]]``;
    successors are ``succ_idx[succ_ptr[i]:succ_ptr[i + 1]]`` and ``deps`` counts
    each op's dependencies; ``store_base`` is where each store's heap starts in
    one array of ``len(ops)`` slots.
    """

    kind: np.ndarray
    store: np.ndarray
    where: np.ndarray
    priority: np.ndarray
    chunks: np.ndarray
    compute: np.ndarray
    reads: np.ndarray
    writes: np.ndarray
    prologue: np.ndarray
    epilogue: np.ndarray
    link_bytes: np.ndarray
    part_ptr: np.ndarray
    part_idx: np.ndarray
    succ_ptr: np.ndarray
    succ_idx: np.ndarray
    deps: np.ndarray
    store_base: np.ndarray
    dram_channel: np.ndarray
    n_stores: int
    n_dram: int
    processors: int
    dram_bandwidth: float
    dram_write_bandwidth: float
    dram_latency: int
    link_bandwidth: float
    link_latency: int


def flatten(graph: OpGraph, costs: OpCosts, hw: HardwareSpec) -> FlatStep:
    """The arrays of ``graph`` with ``costs`` on ``hw``."""
    ops = graph.ops
    n_ops = len(ops)
    processors = hw.processors
    n_units = len(costs.unit_names) - 1  # every unit but the interconnect has a store
    unit = costs.unit.astype(np.int64)
    kind = np.zeros(n_ops, np.int64)
    where = np.asarray(graph.processor, np.int64).copy()
    link_bytes = np.zeros(n_ops, np.int64)
    taking_part = np.zeros(n_ops, np.int64)
    participants: list[int] = []
    for i, op in enumerate(ops):
        if isinstance(op, TransferOp):
            kind[i] = KIND_TRANSFER
            where[i] = op.source
            link_bytes[i] = op.bytes
        elif isinstance(op, CommOp):
            kind[i] = KIND_COMM
            link_bytes[i] = op.tensor.bytes
            taking_part[i] = len(op.participants)
            participants.extend(op.participants)
    part_ptr = np.zeros(n_ops + 1, np.int64)
    np.cumsum(taking_part, out=part_ptr[1:])
    deps = np.fromiter(map(len, (op.deps for op in ops)), np.int64, n_ops)
    # Successors of each op in program order: the edges sorted stably by their source.
    sources = np.fromiter(
        itertools.chain.from_iterable(op.deps for op in ops), np.int64, int(deps.sum())
    )
    succ_idx = np.repeat(np.arange(n_ops, dtype=np.int64), deps)[np.argsort(sources, kind="stable")]
    succ_ptr = np.zeros(n_ops + 1, np.int64)
    np.cumsum(np.bincount(sources, minlength=n_ops), out=succ_ptr[1:])
    unit_slot = np.where(unit > UNIT_COMM, unit - 1, unit)
    store = np.where(kind == KIND_UNIT, where * n_units + unit_slot, -1).astype(np.int64)
    n_stores = processors * n_units
    per_store = np.bincount(store[store >= 0], minlength=n_stores)
    store_base = np.concatenate(([0], np.cumsum(per_store)[:-1])).astype(np.int64)
    shared = hw.dram.sharing is not DramSharing.PER_PROCESSOR
    return FlatStep(
        kind=kind,
        store=store,
        where=where,
        priority=np.asarray(graph.priority if graph.priority else range(n_ops), np.int64),
        chunks=costs.chunks.astype(np.int64),
        compute=costs.compute_cycles.astype(np.int64),
        reads=costs.dram_read_bytes.astype(np.int64),
        writes=costs.dram_ofmap_write_bytes.astype(np.int64),
        prologue=costs.prologue_bytes.astype(np.int64),
        epilogue=costs.epilogue_bytes.astype(np.int64),
        link_bytes=link_bytes,
        part_ptr=part_ptr,
        part_idx=np.asarray(participants, np.int64),
        succ_ptr=succ_ptr,
        succ_idx=succ_idx,
        deps=deps,
        store_base=store_base,
        dram_channel=np.zeros(processors, np.int64) if shared else np.arange(processors),
        n_stores=n_stores,
        n_dram=1 if shared else processors,
        processors=processors,
        dram_bandwidth=float(hw.dram.read_bytes_per_cycle),
        dram_write_bandwidth=float(hw.dram.write_bytes_per_cycle),
        dram_latency=int(hw.dram.latency_cycles),
        link_bandwidth=float(hw.interconnect.bandwidth_bytes_per_cycle),
        link_latency=int(hw.interconnect.latency_cycles),
    )


def fingerprint(flat: FlatStep) -> bytes:
    """A digest of everything in ``flat``: equal digests, equal timing."""
    digest = hashlib.blake2b(digest_size=32)
    for name in FlatStep.__dataclass_fields__:
        value = getattr(flat, name)
        if isinstance(value, np.ndarray):
            digest.update(np.int64(value.size).tobytes())
            digest.update(np.ascontiguousarray(value, np.int64).tobytes())
        else:
            digest.update(repr(value).encode())
        digest.update(b"|")
    return digest.digest()
