"""A data-parallel step placed once: one replica standing for ``count`` processors.

Where every processor of a data-parallel step runs the same replica (an even split of
the batch) on its own DRAM, with the gradients' all-reduces over every processor and
nothing else between the processors, the replicas are one role
(:mod:`accelsim.timing.symmetry`), and placing all of them only to find that out
costs ``processors x ops``.  :func:`replication_problem` decides it from the run's
specs alone, before anything is placed; :func:`replicated` then places processor 0's
replica, its updates and the all-reduces over every processor (each after processor
0's gradients), with the count of processors it stands for beside it
(:class:`Replicated`).  What the network does with the all-reduces (whether they load
every link of a class alike) is checked on that graph
(:func:`accelsim.timing.replica.replica_problem`).
"""

from __future__ import annotations

from dataclasses import dataclass

from accelsim.config.dram import DramSharing
from accelsim.config.hardware import HardwareSpec
from accelsim.config.run import AssignmentPolicy, RunSpec
from accelsim.config.symmetry import Symmetry
from accelsim.graph.ops import OpGraph
from accelsim.mapping.placement import StepGraph, data_parallel


@dataclass(frozen=True)
class Replicated:
    """A data-parallel step placed once: ``graph`` holds processor 0's replica, its
    updates and the all-reduces over all ``count`` processors, every one of which runs
    the same replica (processor ``p``'s ops are ``graph``'s tagged ``replica=p``, on
    its tensors named with the prefix ``p{p}/``)."""

    graph: OpGraph
    count: int


def replication_problem(run: RunSpec, hw: HardwareSpec) -> str:
    """Why the run's data-parallel replicas cannot be placed once from its specs
    alone; empty where they can (every processor its own DRAM, an even split, no
    technique, no parallel plan, ``symmetry: auto``)."""
    processors = hw.processors
    if run.assignment is not AssignmentPolicy.DATA_PARALLEL or processors < 2:
        return "it is not data-parallel over several processors"
    if run.data_parallel.symmetry is not Symmetry.AUTO:
        return "run.data_parallel.symmetry: full simulates every processor"
    if run.batch_size % processors:
        return f"its batch of {run.batch_size} does not split evenly over {processors} processors"
    if hw.dram.sharing is not DramSharing.PER_PROCESSOR:
        return "its processors share a DRAM (dram.sharing: per_processor gives each its own)"
    if run.parallel is not None:
        return "it has a parallel plan (run.parallel)"
    if run.techniques:
        return "a technique rewrites or places its step"
    return ""


def replicated(step: StepGraph, run: RunSpec, hw: HardwareSpec) -> Replicated:
    """The run's data-parallel step (``step`` makes one replica's step graph for a
    batch size) placed once, its batch split evenly
    (:func:`replication_problem` found nothing against it):
    :func:`~accelsim.mapping.placement.data_parallel` ``alone``."""
    graph = data_parallel(
        step,
        run.batch_size,
        hw.processors,
        run.optimizer,
        hw.word_bytes,
        run.data_parallel.bucket_bytes,
        alone=True,
    )
    return Replicated(graph, hw.processors)
