"""A data-parallel step placed once, one replica standing for every processor
(:mod:`accelsim.mapping.replication`), simulated as the step of every replica would be
simulated on its representative (:mod:`accelsim.timing.symmetry`).

The graph holds processor 0's replica, its updates, and the all-reduces over every
processor, each after processor 0's gradients.  Every processor runs the same
replica on its own DRAM, so processor 0 is the representative of one role: each
all-reduce runs its DRAM phases on processor 0's memory and books, step by step, its
sends on processor 0's links alone, each link carrying every send of the full step
routed over it (:func:`accelsim.timing.symmetry.on_representatives`).  The engines
then give processor 0's ops and the all-reduces the cycles the full step gives them,
without the other replicas' ops ever being made.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from accelsim.config.run import EngineKind
from accelsim.graph.ops import CommOp, OpGraph, TensorKey
from accelsim.timing.costs import OpCosts
from accelsim.timing.machine import Machine
from accelsim.timing.symmetry import (
    UNBALANCED,
    balanced,
    collectives,
    on_representatives,
)
from accelsim.timing.trace import Trace


def replica_problem(graph: OpGraph, machine: Machine) -> str:
    """Why simulating ``graph`` (one replica's step with the all-reduces over every
    processor, each its own tensor: :func:`~accelsim.mapping.replication.replicated`)
    on processor 0 would not give the full step's timing; empty where it would: every
    processor has its own DRAM, no op is ordered by priority, the only communication
    is all-reduces, reduce-scatters and all-gathers, none pipelined in chunks, each
    loading every link of a link class alike."""
    comms = collectives(graph, machine)
    if isinstance(comms, str):
        return comms
    if not balanced(graph, comms, np.arange(len(graph.ops), dtype=np.int64), machine):
        return UNBALANCED
    return ""


def simulate_replica(graph: OpGraph, costs: OpCosts, machine: Machine, kind: EngineKind) -> Trace:
    """``graph``'s step simulated on processor 0 standing for every processor
    (:func:`replica_problem` found nothing against it): every processor's timing is
    processor 0's (``copies``)."""
    groups: dict[tuple[TensorKey, tuple[int, ...]], tuple[tuple[int, ...], ...]] = {
        (op.tensor.key, (0,)): (op.participants,) for op in graph.ops if isinstance(op, CommOp)
    }
    inner = on_representatives(graph, costs, machine, kind, (0,), groups)
    return replace(inner, copies=(0,) * machine.processors)
