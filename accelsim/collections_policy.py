"""How often Python's cyclic garbage collector runs while accelsim builds big structures.

A training step's graph has hundreds of thousands of small immutable ops and tensors,
and a sweep's plan a few objects per point; reference counting frees them all, but at
Python's default threshold (700 allocations) the cyclic collector rescans the live
ones thousands of times: about a quarter of a LayerPipe run's time, and of planning
100,000 points.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

GC_ALLOCATIONS = 100_000
"""Allocations between two young-generation collections inside :func:`fewer_collections`."""


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Collect young objects every :data:`GC_ALLOCATIONS` allocations inside the block
    (the thresholds are restored after it)."""
    threshold = gc.get_threshold()
    gc.set_threshold(GC_ALLOCATIONS, *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
