"""The compiled engine: the SimPy engine's events, run by a Numba loop over op arrays.

:func:`simulate` runs a step flattened into arrays
(:func:`accelsim.timing.flat.flatten`) through
:func:`accelsim.timing.event_loop.run_events`, which processes the same events
in the same order as :mod:`accelsim.timing.engine` and so gives the same
:class:`~accelsim.timing.trace.Trace`, event count included
(``tests/timing/test_compiled.py`` checks both on random graphs and hardware and on
the golden runs).  Importing this module and running the loop the first time
loads Numba and the cached machine code, one overload (the loop compiled for the
step's DRAM model, the helpers it calls compiled into it), about 0.4 s once per
process (measured in docs/performance.md); the loop is compiled once per model
(about 6 s, the first time a step of that model runs) and cached on disk.
"""

from __future__ import annotations

import numpy as np

from accelsim.errors import LimitError, SimulationError
from accelsim.graph.ops import OpGraph
from accelsim.timing import event_loop
from accelsim.timing.costs import OpCosts
from accelsim.timing.flat import FlatStep
from accelsim.timing.loop import records
from accelsim.timing.trace import LIMIT_MESSAGE, Trace, build_trace


def simulate(graph: OpGraph, costs: OpCosts, flat: FlatStep) -> Trace:
    """Run ``graph`` with ``costs``, flattened with its machine into ``flat``
    (:func:`accelsim.timing.flat.flatten`), as :func:`accelsim.timing.engine.simulate`.

    Raises:
        SimulationError: if some op can never run.
        LimitError: if the step takes more than :data:`~accelsim.errors.MAX_COUNT` cycles.
    """
    start, end, events, status = event_loop.run(flat)
    if status == records.OVER_LIMIT:
        raise LimitError(LIMIT_MESSAGE)
    if (end < 0).any():
        stuck = [graph.ops[i].name for i in np.flatnonzero(end < 0)[:3]]
        raise SimulationError(f"ops never ran (dependency cycle?): {', '.join(stuck)}")
    return build_trace(graph, costs, flat.processors, start, end, events, "compiled")
