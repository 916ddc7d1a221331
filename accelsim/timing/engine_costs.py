"""What each event engine costs, and the break-even of the compiled one.

``timing.engine: auto`` (:func:`accelsim.timing.engines.choose`) runs the compiled
engine from the first step where it pays: when the SimPy events a process has
simulated, with those of the step at hand and those its caller says will follow,
would have cost more than running them compiled plus loading Numba and the cached
loop, or, with no cache on disk, plus compiling the loop first.  The costs are
measured on the 2-core x86_64 reference machine (Python 3.11, Numba 0.68;
docs/performance.md, "Event engines and scaling"), not tuned to any result:

* SimPy: 460,000 to 750,000 events per second over the benchmark steps, about
  1.5 us an event;
* the compiled loop: 18 to 67 million events per second, about 20 ns an event;
* loading Numba and the cached loop (one overload, the step's DRAM model's): 0.3 to
  0.45 s of a process, 0.4 s taken;
* compiling the loop for one DRAM model when no cache exists: about 6 s, once per
  machine and model (``accelsim compile`` pays it where it is shown).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class EngineCosts:
    """Seconds each engine costs.

    Args:
        simpy_s_per_event: One event run by the SimPy engine.
        compiled_s_per_event: One event run by the compiled loop.
        load_s: Loading Numba and the cached loop, once per process.
        compile_s: Compiling the loop, once per machine and DRAM model.
    """

    simpy_s_per_event: float
    compiled_s_per_event: float
    load_s: float
    compile_s: float

    def break_even_events(self, cached: bool) -> int:
        """The fewest events whose SimPy cost pays for loading the compiled loop (and,
        unless ``cached``, compiling it first) and running them compiled."""
        fixed_s = self.load_s + (0.0 if cached else self.compile_s)
        return math.ceil(fixed_s / (self.simpy_s_per_event - self.compiled_s_per_event))

    def compiled_pays(self, events: float, cached: bool) -> bool:
        """Whether ``events`` events cost less compiled, the load (and the compile,
        unless ``cached``) included, than with SimPy."""
        return events >= self.break_even_events(cached)


REFERENCE = EngineCosts(
    simpy_s_per_event=1.5e-6, compiled_s_per_event=2.0e-8, load_s=0.4, compile_s=6.0
)
"""The costs measured on the reference machine (see the module docstring)."""
