"""Tile groups: how finely the event engine resolves the ops of a step.

The engine (:mod:`accelsim.timing.engine`) runs an op as tile groups: group
``j + 1`` is fetched while group ``j`` computes, and group ``j``'s outputs drain
behind it.  How many groups an op has is a modelling resolution, not hardware, and
the result should not depend on it.  With one DRAM channel it does, in two ways:
an op that is one coarse group overlaps none of its own traffic with its compute,
and two ops that share the channel (an array GEMM and a vector op) each keep one
fetch in flight, so first-come-first-served gives each a share of the bandwidth in
proportion to the size of its groups.  Groups cut to a fixed count per op (the
``per_op`` rule below, ``timing.group_cycles: null``) give a long op long groups,
and so a larger share than its neighbour: the step moves with the count and, past
a point, away from where finer resolution goes (AlexNet 19.67 M cycles at 8 groups
per op, 20.28 M at 4,096; docs/model/engine.md has the suite).

:func:`tile_groups` instead cuts every op of a step into groups of one length in
time, ``G`` cycles at most of compute and of DRAM transfer at the memory's
bandwidth (its :meth:`~accelsim.timing.memory.Memory.bound`), whichever is longer:
all ops then ask for the channel at the same resolution, and as ``G`` shrinks the
step converges.  An op shorter than ``G`` still gets up to :data:`MIN_GROUPS`
groups, none shorter than ``G / MIN_GROUPS`` cycles, so its own fetch and compute
overlap.  ``G`` is ``group_cycles``, or longer for a step whose longest op would
otherwise need more than ``chunks_per_op`` groups: every op of that step then gets
the longer groups, so the resolution stays uniform and the events stay at most
``chunks_per_op`` groups per op, linear in the ops.
"""

from __future__ import annotations

import numpy as np

from accelsim.counts import INT64_MAX, whole_cycles
from accelsim.timing.memory import Memory

MIN_GROUPS = 8
"""Groups an op shorter than the group length still gets, if each keeps at least
``1 / MIN_GROUPS`` of that length."""


def busy_cycles(compute_cycles: np.ndarray, dram_bytes: np.ndarray, dram: Memory) -> np.ndarray:
    """Each op's longer side: its compute cycles or the fewest cycles its DRAM traffic
    keeps ``dram`` busy (rounded up; none at an infinite bandwidth; a
    :class:`~accelsim.errors.LimitError` past :data:`~accelsim.errors.MAX_COUNT`)."""
    transfer = whole_cycles(dram.bound(dram_bytes))
    busy: np.ndarray = np.maximum(compute_cycles, transfer)
    return busy


def group_length(busy: np.ndarray, group_cycles: int, chunks_per_op: int) -> int:
    """The step's group length in cycles: ``group_cycles``, or the least length that
    cuts its longest op into ``chunks_per_op`` groups if that is longer."""
    longest = int(busy.max(initial=0))
    return max(group_cycles, -(-longest // chunks_per_op))


def tile_groups(busy: np.ndarray, group_cycles: int, chunks_per_op: int) -> np.ndarray:
    """Tile groups of ops of ``busy`` cycles each (see the module docstring).

    Args:
        busy: Each op's longer side in cycles (:func:`busy_cycles`).
        group_cycles: The longest group asked for, in cycles.
        chunks_per_op: The most groups an op may have.

    Returns:
        Groups per op, from 1 to ``chunks_per_op``.
    """
    return _groups(busy, group_length(busy, group_cycles, chunks_per_op), chunks_per_op)


def lone_op_groups(busy: np.ndarray, group_cycles: int, chunks_per_op: int) -> np.ndarray:
    """Tile groups of each op of ``busy`` cycles when it is the only op of its step
    (so its group length depends on itself alone); as :func:`tile_groups`."""
    length = np.maximum(group_cycles, -(-busy // chunks_per_op))
    return _groups(busy, length, chunks_per_op)


def _groups(busy: np.ndarray, length: np.ndarray | int, chunks_per_op: int) -> np.ndarray:
    # MIN_GROUPS x busy leaves int64 past 2^60 cycles: such ops are counted in Python ints
    wide = busy.astype(object) if int(busy.max(initial=0)) > INT64_MAX // MIN_GROUPS else busy
    fewer = np.minimum(MIN_GROUPS, MIN_GROUPS * wide // length).astype(np.int64)
    groups = np.maximum(-(-busy // length), fewer)
    clipped: np.ndarray = np.clip(groups, 1, chunks_per_op)
    return clipped
