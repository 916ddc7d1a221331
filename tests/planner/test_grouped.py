"""The search's plans handed to the sweep's workers by rank graph
(:mod:`accelsim.planner.grouped`)."""

from __future__ import annotations

from accelsim.planner.grouped import ByRankGraph, regrouped
from accelsim.sweep.executors import Executor
from accelsim.sweep.plan import PointTask


def _tasks(indices: list[int]) -> list[PointTask]:
    return [PointTask("p", f"id{i}", i, f"point {i}", "base.yaml", (), False) for i in indices]


def _indices(chunks: list[list[PointTask]]) -> list[list[int]]:
    return [[task.index for task in chunk] for chunk in chunks]


GROUPS = ["a", "a", "a", "b", "b", "c", "a", "a"]
"""Eight points' rank graphs, in the sweep's order (the last two share the first
three's, not next to them)."""


def test_consecutive_plans_of_one_rank_graph_go_together() -> None:
    assert _indices(regrouped(_tasks(list(range(8))), GROUPS, 1)) == [
        [0, 1, 2],
        [3, 4],
        [5],
        [6, 7],
    ]


def test_no_chunk_over_an_even_share_of_the_tasks() -> None:
    # two workers share eight tasks: at most four a chunk; three: at most three
    groups = ["a"] * 8
    assert _indices(regrouped(_tasks(list(range(8))), groups, 2)) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert _indices(regrouped(_tasks(list(range(8))), groups, 3)) == [
        [0, 1, 2],
        [3, 4, 5],
        [6, 7],
    ]


def test_the_pending_tasks_only_by_their_index() -> None:
    # the stored points 1 and 4 left out: the rest grouped by their own index
    assert _indices(regrouped(_tasks([0, 2, 3, 5, 6, 7]), GROUPS, 1)) == [[0, 2], [3], [5], [6, 7]]


def test_the_inner_executor_runs_the_regrouped_chunks() -> None:
    seen: list[list[int]] = []

    class Recording(Executor):
        workers = 2
        description = "recording"

        def run(self, chunks, following=0, files=True):  # type: ignore[no-untyped-def]
            seen.extend(_indices([list(chunk) for chunk in chunks]))
            return iter([])

    executor = ByRankGraph(Recording(), GROUPS)
    assert (executor.workers, executor.description) == (2, "recording")
    tasks = _tasks(list(range(8)))
    assert list(executor.run([tasks[:3], tasks[3:6], tasks[6:]])) == []
    assert seen == [[0, 1, 2], [3, 4], [5], [6, 7]]
