"""The order a run's techniques compose in, from the orders they declare.

Each technique declares the techniques it must come ``after`` and ``before`` when a
run has them, each with its reason (approximate dropout before gradient skipping:
skipping counts the groups dropout kept).  The run's techniques are sorted
topologically under those constraints, as a pass manager orders its passes (one
technique before another when either declares it), and where the declarations
leave a choice the name decides, so the order a run file lists its techniques in
never changes a number, a step kind or the report.  The order is the rewrites'
(each reads the graph the earlier ones left), the report's sections' and the lines
``accelsim run`` prints.  Declarations naming a technique the run does not have are
ignored; a cycle is a config error naming the techniques in it.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from itertools import pairwise
from typing import Any, TypeVar

from accelsim.errors import ConfigError
from accelsim.techniques.base import Technique

T = TypeVar("T", bound=Technique[Any])


def constraints(techniques: Sequence[Technique[Any]]) -> dict[tuple[str, str], str]:
    """Every ``(earlier, later)`` pair of the run's techniques a declaration orders,
    with its reason (the first one declared, when both declare it)."""
    names = {t.name for t in techniques}
    pairs: dict[tuple[str, str], str] = {}
    for t in techniques:
        for other, why in t.after.items():
            if other in names:
                pairs.setdefault((other, t.name), why)
        for other, why in t.before.items():
            if other in names:
                pairs.setdefault((t.name, other), why)
    return pairs


def composition_order(techniques: Sequence[T], file: str) -> list[T]:
    """``techniques`` in the order they compose: every declared constraint kept, and
    among the techniques free to come next, the first by name.

    Raises:
        ConfigError: at ``techniques`` when the declarations form a cycle, naming the
            techniques in it and why each must come before the next.
    """
    by_name = {t.name: t for t in techniques}
    pairs = constraints(techniques)
    later: dict[str, list[str]] = {name: [] for name in by_name}
    waiting = dict.fromkeys(by_name, 0)
    for earlier, then in pairs:
        later[earlier].append(then)
        waiting[then] += 1
    ready = [name for name, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order: list[T] = []
    while ready:
        name = heapq.heappop(ready)
        order.append(by_name[name])
        for then in later[name]:
            waiting[then] -= 1
            if waiting[then] == 0:
                heapq.heappush(ready, then)
    if len(order) < len(by_name):
        cycle = _cycle({n for n, count in waiting.items() if count}, later)
        steps = ", ".join(f"{a} before {b} ({pairs[a, b]})" for a, b in pairwise(cycle))
        raise ConfigError.single(
            file,
            "techniques",
            f"their declared order is a cycle: {steps}",
            sorted(cycle[:-1]),
        )
    return order


def _cycle(stuck: set[str], later: dict[str, list[str]]) -> list[str]:
    """A cycle among the techniques the sort could not place, each before the next, from
    the first of them by name and back to it.  Each of them waits for an earlier one
    among them, so walking back from any reaches a cycle."""
    earlier = {n: sorted(e for e in stuck if n in later[e]) for n in stuck}
    walk = [min(stuck)]
    while walk[-1] not in walk[:-1]:
        walk.append(earlier[walk[-1]][0])
    ring = walk[walk.index(walk[-1]) : -1][::-1]
    first = ring.index(min(ring))
    ring = ring[first:] + ring[:first]
    return [*ring, ring[0]]
