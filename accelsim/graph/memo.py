"""Facts worked out from a graph alone, once per graph object.

Graphs are immutable, and a sweep's points that differ only in hardware share one
lowered and placed graph (``driver/run.py`` keeps it per process).  What the later
stages derive from the graph alone (its GEMMs' shapes, its vector ops' byte counts,
its dependency arrays) is then the same at every such point; :func:`per_graph` keeps
it on the graph object itself, so it lives exactly as long as the graph and a new
graph (every pass returns one) starts with nothing.  What the stages derive from the
graph and a hardware choice (the fold schedule on each array design) is kept by
:func:`per_graph_recent`, for the designs used last: a sweep's points that repeat an
array (along a DRAM axis) reuse it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from accelsim.graph.ops import OpGraph

T = TypeVar("T")

RECENT_DESIGNS = 64
"""Hardware designs (array units with their buffers) per graph whose derived facts
:func:`per_graph_recent` keeps: more than a sweep's points between two that repeat
an array along one other axis."""

_MEMO = "_per_graph"
"""The instance attribute holding a graph's facts (not a dataclass field: it takes no
part in equality, hashing, ``repr`` or ``dataclasses.replace``)."""


def per_graph(graph: OpGraph, key: Hashable, make: Callable[[], T]) -> T:
    """``make()`` once per ``graph`` object and ``key``, which must name everything
    besides the graph that ``make`` reads.  Callers must not change what it returns."""
    facts: dict[Hashable, Any] = graph.__dict__.setdefault(_MEMO, {})
    if key in facts:
        found: T = facts[key]
        return found
    made = make()
    facts[key] = made
    return made


def per_graph_recent(
    graph: OpGraph, kind: Hashable, key: Hashable, make: Callable[[], T], keep: int
) -> T:
    """``make()`` once per ``graph`` object, ``kind`` and ``key`` among the ``keep``
    keys of that kind used last on the graph (the least recently used forgotten
    first); ``kind`` and ``key`` together must name everything besides the graph that
    ``make`` reads.  Callers must not change what it returns."""
    facts: dict[Hashable, Any] = graph.__dict__.setdefault(_MEMO, {})
    recent: OrderedDict[Hashable, T] = facts.setdefault(("recent", kind), OrderedDict())
    if key in recent:
        recent.move_to_end(key)
        return recent[key]
    made = make()
    recent[key] = made
    if len(recent) > keep:
        recent.popitem(last=False)
    return made
