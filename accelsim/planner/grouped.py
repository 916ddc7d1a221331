"""The plans of a search handed to the sweep's workers by rank graph: the candidates
sharing one (:func:`~accelsim.planner.search.rank_graph_of`) go to one worker
together, so that a worker process makes a rank graph, and simulates its passes and
updates (:mod:`accelsim.driver.pipeline_memo`), once rather than each worker that
draws some of its plans."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass

from accelsim.sweep.executors import Executor
from accelsim.sweep.plan import PointTask
from accelsim.sweep.worker import PointOutcome


def regrouped(
    tasks: Sequence[PointTask], group_of: Sequence[Hashable], workers: int
) -> list[list[PointTask]]:
    """``tasks`` in their order, in chunks of consecutive tasks of one group
    (``group_of``: each point's, by its index in the sweep), none over an even share
    of the tasks among ``workers`` (so that every worker has work)."""
    most = max(1, math.ceil(len(tasks) / max(workers, 1)))
    chunks: list[list[PointTask]] = []
    for task in tasks:
        last = chunks[-1] if chunks else None
        if (
            last is not None
            and group_of[last[-1].index] == group_of[task.index]
            and len(last) < most
        ):
            last.append(task)
        else:
            chunks.append([task])
    return chunks


@dataclass
class ByRankGraph(Executor):
    """``inner`` given :func:`regrouped` chunks of the sweep's tasks, whatever chunks
    the sweep made."""

    inner: Executor
    group_of: Sequence[Hashable]

    def __post_init__(self) -> None:
        self.workers = self.inner.workers
        self.description = self.inner.description

    def run(
        self, chunks: Sequence[Sequence[PointTask]], following: int = 0, files: bool = True
    ) -> Iterator[list[PointOutcome]]:
        tasks = [task for chunk in chunks for task in chunk]
        return self.inner.run(regrouped(tasks, self.group_of, self.workers), following, files)

    def __exit__(self, *exc: object) -> None:
        return None
