"""The codes of a step's units in its cost arrays (``OpCosts.unit``) and the names of
the units every step has: a module of their own, so that the reports and the energy
model read them without loading the cost model (:mod:`accelsim.timing.costs`)."""

from __future__ import annotations

UNIT_ARRAY, UNIT_VECTOR, UNIT_COMM = 0, 1, 2
BASE_UNITS = ("array", "vector", "interconnect")
"""The names of units ``0 .. 2``; a technique's array units follow them."""
