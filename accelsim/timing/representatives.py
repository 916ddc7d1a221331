"""The processors a symmetric data-parallel step is simulated on, and the links it
books (:mod:`accelsim.timing.symmetry` decides them; :mod:`accelsim.timing.sends`
books them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Representatives:
    """A step simulated on ``simulated``, one processor of each role, standing for its
    collectives' whole ``group``.

    An all-reduce over ``simulated`` is the all-reduce over ``group``: its DRAM
    phases on the simulated processors' memories, its steps' sends only those on
    ``links`` (the links of processor 0, one of each class:
    :func:`accelsim.network.symmetry.link_classes`), each link carrying every send
    of the full step routed over it, in the full step's order.
    """

    group: tuple[int, ...]
    simulated: tuple[int, ...]
    links: frozenset[int]
