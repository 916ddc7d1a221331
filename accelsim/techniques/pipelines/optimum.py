"""The best period of the pinned-task model, exact for small task sets.

In the pinned-task model every task (a layer's forward, input gradient or one of
its row halves, weight gradient, update) runs whole on one processor, and in a
full pipeline a processor's period is its busiest resource's load: its tasks'
cycles summed on the array, on the other units, and (with a DRAM channel per
processor) on its channel; a memory all processors share puts a floor under
every assignment's period.  The model's optimum is the assignment whose busiest
processor is least loaded (scheduling on identical machines with several
resources, NP-hard), found by a depth-first branch and bound over at most
:data:`MAX_TASKS` tasks that stops after :data:`NODE_LIMIT` nodes: within them
the optimum is exact, beyond them the best assignment found stands beside a
proven lower bound.  Links, the overlap a
processor's resources cannot reach and the weight delays are not in the model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

NODE_LIMIT = 200_000
"""Search nodes before the branch and bound gives up on proving its best assignment
optimal (our choice: about two seconds of Python; the toys of seven layers and
fewer need under 10,000)."""

MAX_TASKS = 64
"""The most tasks of one resource the branch and bound searches (our choice); beyond,
the greedy assignment stands beside the lower bound."""

Cost = tuple[int, ...]  # a task's cycles on each of a processor's resources


@dataclass(frozen=True)
class Optimum:
    """The pinned-task model's best period on some processors.

    Attributes:
        period_cycles: The busiest processor's load under the best assignment found
            (or the floor, when that is higher).
        lower_bound_cycles: A proven lower bound of every assignment's period
            (equal to ``period_cycles`` when ``exact``).
        exact: Whether the search proved ``period_cycles`` optimal.
        where: The processor of every task (in the order the costs were given).
    """

    period_cycles: int
    lower_bound_cycles: int
    exact: bool
    where: tuple[int, ...]


def lower_bound(costs: Sequence[Cost], processors: int) -> int:
    """A period no assignment beats: each resource's total work over the processors,
    the largest task, and, per resource, the ``P``-th and ``P + 1``-th largest tasks
    together (two of the ``P + 1`` largest share a processor)."""
    bound = max((max(c) for c in costs), default=0)
    for unit in range(len(costs[0]) if costs else 0):
        sizes = sorted((c[unit] for c in costs), reverse=True)
        bound = max(bound, -(-sum(sizes) // processors))
        if len(sizes) > processors:
            bound = max(bound, sizes[processors - 1] + sizes[processors])
    return bound


def _greedy(costs: Sequence[Cost], order: Sequence[int], processors: int) -> list[int]:
    """Longest first, each task where its busiest resource ends least loaded."""
    loads = [[0] * processors for _ in costs[0]]
    where = [0] * len(costs)
    for i in order:
        p = min(
            range(processors),
            key=lambda q: (max(row[q] + c for row, c in zip(loads, costs[i], strict=True)), q),
        )
        for row, c in zip(loads, costs[i], strict=True):
            row[p] += c
        where[i] = p
    return where


def _period(costs: Sequence[Cost], where: Sequence[int], processors: int) -> int:
    loads = [[0] * processors for _ in costs[0]]
    for cost, p in zip(costs, where, strict=True):
        for row, c in zip(loads, cost, strict=True):
            row[p] += c
    return max(max(row) for row in loads)


def task_optimum(
    costs: Sequence[Cost],
    processors: int,
    floor: int = 0,
    exchanged: Mapping[tuple[int, int], int] | None = None,
    node_limit: int = NODE_LIMIT,
) -> Optimum:
    """The least period over every assignment of the tasks ``costs`` to ``processors``,
    and never below ``floor`` (a period no assignment beats, such as a shared
    memory's time for all the tasks' bytes).

    ``exchanged`` (bytes per pair of task indices) does not change the period: of
    equally good assignments, the search finds first those that keep the tasks that
    exchange most data together.  When every task needs one resource at most, the
    resources are independent (any assignment of one resource's tasks goes with any
    of another's, the processors renumbered), and each resource's tasks are
    searched alone.
    """
    single = all(sum(1 for c in cost if c) <= 1 for cost in costs)
    if not single or not costs or len(costs[0]) == 1:
        return _search(
            costs, processors, floor, _partners(range(len(costs)), exchanged), node_limit
        )
    where = [0] * len(costs)
    parts = []
    for u in range(len(costs[0])):
        mine = [i for i, cost in enumerate(costs) if cost[u]]
        partners = _partners(mine, exchanged)
        part = _search([(costs[i][u],) for i in mine], processors, floor, partners, node_limit)
        for i, p in zip(mine, part.where, strict=True):
            where[i] = p
        parts.append(part)
    return Optimum(
        max(p.period_cycles for p in parts),
        max(p.lower_bound_cycles for p in parts),
        all(p.exact for p in parts),
        tuple(where),
    )


def _partners(
    tasks: Sequence[int], exchanged: Mapping[tuple[int, int], int] | None
) -> list[list[tuple[int, int]]]:
    """Per task of ``tasks`` (by its place in it), the others it exchanges bytes with
    (by their places) and how many."""
    place = {t: i for i, t in enumerate(tasks)}
    partners: list[list[tuple[int, int]]] = [[] for _ in tasks]
    for (a, b), size in (exchanged or {}).items():
        if a in place and b in place and a != b:
            partners[place[a]].append((place[b], size))
            partners[place[b]].append((place[a], size))
    return partners


def _search(
    costs: Sequence[Cost],
    processors: int,
    floor: int,
    partners: Sequence[Sequence[tuple[int, int]]],
    node_limit: int,
) -> Optimum:
    """:func:`task_optimum` by branch and bound.

    Tasks are placed largest first; a task goes to each processor in turn (a task
    like the one before it to that one's processor or a later one), skipping a
    processor in the same state as an earlier one (identical processors) and any
    where the period would reach the best found; a branch stops when the work left
    on a resource cannot fit under the best found in the room of the processors
    that can still take its least task.  A task tries first the processors
    holding most of the bytes it exchanges with tasks already placed.  Starts from
    the longest-first greedy assignment.
    """
    if not costs:
        return Optimum(floor, floor, True, ())
    if len(costs) > MAX_TASKS:
        node_limit = 0
    order = sorted(range(len(costs)), key=lambda i: (max(costs[i]), sum(costs[i])), reverse=True)
    bound = max(lower_bound(costs, processors), floor)
    where = _greedy(costs, order, processors)
    best_period, best_where = max(_period(costs, where, processors), floor), where
    units = range(len(costs[0]))
    # Per resource, the work of the tasks from order[k] on, and the least of it
    # that any of them needs (0: none needs the resource).
    left = [[0] * (len(order) + 1) for _ in units]
    least = [[0] * (len(order) + 1) for _ in units]
    for k in range(len(order) - 1, -1, -1):
        for u in units:
            c = costs[order[k]][u]
            left[u][k] = left[u][k + 1] + c
            least[u][k] = min(c, least[u][k + 1]) if c and least[u][k + 1] else c or least[u][k + 1]
    loads = [[0] * processors for _ in units]
    chosen = [0] * len(costs)
    at = [-1] * len(costs)  # the processor of every task placed so far
    nodes = 0

    def shared_bytes(i: int, p: int) -> int:
        return sum(size for j, size in partners[i] if at[j] == p)

    def search(k: int) -> bool:
        """Place the tasks from ``order[k]`` on; False once the node budget is spent."""
        nonlocal nodes, best_period, best_where
        nodes += 1
        if nodes > node_limit:
            return False
        if k == len(order):
            best_period, best_where = max(max(max(row) for row in loads), floor), list(chosen)
            return True
        # The work left on each resource must fit under the best found, in the room
        # of processors that can still take its least task.
        room = best_period - 1
        if any(
            left[u][k] > sum(room - x for x in loads[u] if room - x >= least[u][k]) for u in units
        ):
            return True
        cost = costs[order[k]]
        # A task like the one before it goes no lower: identical tasks in any order
        # are one assignment.
        same = k > 0 and costs[order[k - 1]] == cost
        seen: set[tuple[int, ...]] = set()
        start = chosen[order[k - 1]] if same else 0
        near = sorted(range(start, processors), key=lambda q: (-shared_bytes(order[k], q), q))
        for p in near:
            state = tuple(row[p] for row in loads)
            if state in seen or max(x + c for x, c in zip(state, cost, strict=True)) > room:
                continue
            seen.add(state)
            for row, c in zip(loads, cost, strict=True):
                row[p] += c
            chosen[order[k]] = at[order[k]] = p
            finished = search(k + 1)
            at[order[k]] = -1
            for row, c in zip(loads, cost, strict=True):
                row[p] -= c
            if not finished:
                return False
            if best_period <= bound:
                return True
        return True

    exact = best_period <= bound or search(0)
    return Optimum(best_period, best_period if exact else bound, exact, tuple(best_where))
