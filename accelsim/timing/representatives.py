"""The processors a symmetric step is simulated on, and the links it books
(:mod:`accelsim.timing.symmetry` decides them; :mod:`accelsim.timing.sends` books
them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from accelsim.graph.ops import CommOp, TensorKey


@dataclass(frozen=True, eq=False)
class Representatives:
    """A step simulated on ``simulated``, one processor of each role.

    Each collective of the step stands for its class: the collectives over
    ``groups[tensor key, participants]`` (:meth:`groups_of`; its own group first
    among them) that run as it does, its role's on every other processor.  It runs
    its DRAM phases on its simulated participants' memories and books, step by
    step, the sends of every collective of its class that lie on ``links`` (the
    links of processor 0, one of each class of links:
    :func:`accelsim.network.symmetry.link_classes`), each link carrying every send
    of the full step routed over it, in the full step's order.
    """

    simulated: tuple[int, ...]
    links: frozenset[int]
    groups: Mapping[tuple[TensorKey, tuple[int, ...]], tuple[tuple[int, ...], ...]]

    def groups_of(self, op: CommOp) -> tuple[tuple[int, ...], ...]:
        """The groups of the collectives ``op`` (one of the step's) stands for."""
        return self.groups[op.tensor.key, op.participants]
