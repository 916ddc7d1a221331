"""Collectives as data: what a collective on a group of processors is, and its
schedule, the steps of transfers an algorithm lowers it to
(:mod:`accelsim.network.algorithms`).

A collective's ``size_bytes`` is, by kind: each processor's buffer (``all_reduce``,
``all_to_all``: ``size / n`` to each other processor), the gathered buffer
(``all_gather``: each processor gives ``size / n``), each processor's input
(``reduce_scatter``: each keeps ``size / n`` reduced), the root's buffer
(``broadcast``, from the group's first processor) or the message (``point_to_point``,
from the group's first processor to its second).  A piece of ``size / n`` is
``ceil(size / n)`` bytes, as the engines' ring all-reduce cuts its chunks.

Each processor also reads and writes its buffers in its DRAM
(:func:`dram_bytes`): what it gives before the first transfer, what it keeps after
the last.  A reduction's partial sums stay in the processor's on-chip buffers
between steps and are not charged.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from accelsim.config.interconnect import Algorithm as Algorithm


class Collective(str, Enum):
    """What a collective computes."""

    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_TO_ALL = "all_to_all"
    BROADCAST = "broadcast"
    POINT_TO_POINT = "point_to_point"


@dataclass(frozen=True)
class Transfer:
    """``bytes`` sent from processor ``source`` to processor ``destination``."""

    source: int
    destination: int
    bytes: int


Step = tuple[Transfer, ...]
"""Transfers that run together; the next step starts when the last has arrived."""


@dataclass(frozen=True)
class Phase:
    """Steps of one chunk that run on the links of one dimension of the network."""

    dimension: int
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class Schedule:
    """A collective lowered: ``collective`` of ``size_bytes`` on ``group`` by
    ``algorithm``, as its ``steps``.

    A pipelined schedule (``chunks`` above 1) cuts the buffer into ``chunks`` chunks,
    each going through the ``phases`` in order, a dimension working on one chunk's
    phase at a time (:func:`accelsim.network.cost.pipeline_cycles`); its ``steps`` are
    every chunk's, one chunk after the other (the bytes each link carries).
    """

    collective: Collective
    algorithm: Algorithm
    group: tuple[int, ...]
    size_bytes: int
    steps: tuple[Step, ...]
    phases: tuple[Phase, ...] = ()
    chunks: int = 1

    @property
    def bytes(self) -> int:
        """Every byte its transfers send (a step repeated as one object, a ring's,
        summed once)."""
        sums: dict[int, int] = {}
        for step in self.steps:
            if id(step) not in sums:
                sums[id(step)] = sum(t.bytes for t in step)
        return sum(sums[id(step)] for step in self.steps)


def piece(size_bytes: int, n: int) -> int:
    """A ``1 / n`` share of ``size_bytes``: ``ceil(size / n)``."""
    return -(-size_bytes // n)


def together(*phases: tuple[Step, ...]) -> tuple[Step, ...]:
    """Schedules run at once: their ``k``-th steps as one step."""
    longest = max((len(p) for p in phases), default=0)
    return tuple(
        tuple(t for phase in phases if k < len(phase) for t in phase[k]) for k in range(longest)
    )


def dram_bytes(collective: Collective, size_bytes: int, n: int, root: bool) -> tuple[int, int]:
    """The DRAM bytes a processor of a group of ``n`` reads before ``collective`` of
    ``size_bytes`` and writes after it (``root``: it is a broadcast's root).

    An all-reduce and an all-to-all read and write the processor's whole buffer; an
    all-gather reads its piece and writes the gathered buffer; a reduce-scatter reads
    its whole input and writes its reduced piece; a broadcast's root reads the buffer
    and each other processor writes it; a point-to-point message moves on the links
    alone (its sender's and receiver's ops read and write it).
    """
    c = piece(size_bytes, n)
    if collective is Collective.ALL_GATHER:
        return c, size_bytes
    if collective is Collective.REDUCE_SCATTER:
        return size_bytes, c
    if collective is Collective.BROADCAST:
        return (size_bytes, 0) if root else (0, size_bytes)
    if collective is Collective.POINT_TO_POINT:
        return 0, 0
    return size_bytes, size_bytes
