"""DRAM as everything else sees it: the :class:`Memory` contract every memory model
keeps, the streams transfers belong to, and :class:`MemoryState`, a model with the
state of one simulation.

**What a memory model provides** (the models are :mod:`accelsim.timing.memories`,
one module each).  A model is a frozen description of one memory, built once per
run from the hardware spec (:class:`~accelsim.timing.machine.Machine`); it keeps no
state.  It gives

* ``name`` (the ``dram.model`` that selects it), ``code`` (a small integer, unique
  among the registered models, by which the compiled engine dispatches to it) and
  ``of(spec)``, which builds it from its :class:`~accelsim.config.dram.DramSpec`;
* ``latency_cycles`` (from a transfer leaving the memory to its data being usable,
  added by the caller to what ``reserve`` returns), ``capacity_bytes`` and
  ``slice_bytes`` (the most one reservation of a background stream books under
  ``dram.arbitration: priority``, :func:`slice_bytes`; 0: no limit);
* :meth:`Memory.bound`: the fewest cycles some bytes keep it busy, latency left out,
  whatever the order and the streams (the step's cycle bounds and the techniques'
  estimates use it; from an idle memory no reservation leaves sooner);
* its **parameters** (:meth:`Memory.params`, floats) and the **state** it has when
  idle (:meth:`Memory.initial_state`, integers): the parameters and the state's
  size are all that decide its timing besides its latency and slice (the memo of
  simulated steps keys on them, :mod:`accelsim.timing.flat`), and
  :meth:`Memory.channel_free` reads from a state the cycle each of its channels is
  free (what the contract tests hold its bookings to);
* its **kernel**, :meth:`Memory.reserve`: a static function over generic arrays,
  ``reserve(params, p, state, s, now, n_bytes, stream, write)``, that books
  ``n_bytes`` of stream class ``stream`` (a read, or a write when ``write``) at
  cycle ``now`` on the memory whose parameters start at ``params[p]`` and whose
  state starts at ``state[s]``, updates that state and returns the cycle the bytes
  have left the memory.  It is written once, in the subset of Python that Numba
  compiles: the SimPy engine and :mod:`accelsim.timing.single_op` run it on a
  :class:`MemoryState`'s lists, the compiled engine on the arrays of every memory
  (:mod:`accelsim.timing.memories.compiled`, one ``@njit`` kernel per model, chosen
  by ``code``).

A new model is one module in :mod:`accelsim.timing.memories` with such a class, its
spec in :mod:`accelsim.config.dram` (the keys it adds to :class:`~accelsim.config.dram.DramSpec`,
named by ``model``), its builder's line in :mod:`accelsim.timing.memories.registry`
and its kernel in the dispatch of :mod:`accelsim.timing.memories.compiled` (the
recipe of ``docs/architecture.md`` lists every edit); its samples in
``tests/contracts/``, which then holds it to this contract (bytes conserved,
``bound`` below ``reserve``, both engines equal, its parameters in the memo key).

A reservation books a transfer when it is requested and says at once when it
arrives, without an event: contention is decided by the order in which the
simulation books transfers.

**Arbitration** (``dram.arbitration``).  Every transfer carries a :class:`Stream`:
the class of what it moves and a priority (:mod:`accelsim.timing.streams`).
With ``fcfs`` (the default) the priority changes nothing.  With ``priority`` a
memory books a background stream's transfer a slice at a time
(:meth:`MemoryState.portion`): a slice is at most :data:`SLICE_CYCLES` cycles of the
memory's bandwidth, and the engine books the next one when the previous one has
left the memory, behind whatever was booked meanwhile.  Foreground transfers
are booked whole, as with ``fcfs``.  So a foreground transfer requested while a
background one streams waits for at most the slice in flight (and one more
already queued per background transfer), not for the whole background
transfer, and the background stream takes whatever bandwidth the others leave;
no reservation is ever moved once booked, so the memory never moves more than
its bandwidth, and every arrival is known when its part is booked.  The
approximation: a real controller arbitrates per request (a burst of tens of
bytes); here the grain is a slice, which bounds the priority inversion to a
slice per background transfer and costs one engine event per slice.
"""

from __future__ import annotations

import math
from collections.abc import MutableSequence, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar, Protocol, TypeVar

import numpy as np

from accelsim.config.dram import DramArbitration


class StreamClass(IntEnum):
    """What a DRAM transfer moves.  Integers: the compiled engine takes them as data."""

    ACTIVATION = 0
    WEIGHT = 1
    GRADIENT = 2
    OPTIMIZER = 3
    STASH = 4
    TECHNIQUE = 5


FOREGROUND, BACKGROUND = 0, 1
"""Stream priorities: background streams yield to the others where the memory's
arbitration says so."""

SLICE_CYCLES = 256
"""With ``priority`` arbitration, the most cycles of a memory's bandwidth one slice
of a background transfer holds it (256 cycles: 32 KiB at the default 128 B/cycle,
0.26 us at 1 GHz).  Finer slices wait less behind the background stream and cost
more events; see the README for how the results depend on it."""


@dataclass(frozen=True, slots=True)
class Stream:
    """The stream a transfer belongs to: the class of what it moves and its priority."""

    kind: StreamClass
    priority: int = FOREGROUND
    write: bool = False  # a write: booked at the memory's write bandwidth


DEFAULT_STREAM = Stream(StreamClass.ACTIVATION)
"""The stream of a transfer that nobody classified (a channel alone, a link)."""
DEFAULT_WRITE_STREAM = Stream(StreamClass.ACTIVATION, write=True)
"""The stream of a write that nobody classified."""

Amount = TypeVar("Amount", float, np.ndarray)

Params = Sequence[float] | np.ndarray
"""A kernel's parameters: a model's own (a tuple) or every memory's (an array)."""
State = MutableSequence[int] | np.ndarray
"""A kernel's state: a model's own (a list) or every memory's (an array)."""


class Memory(Protocol):
    """A memory model (or a link): what it must provide (see the module docstring)."""

    name: ClassVar[str]
    code: ClassVar[int]

    @property
    def latency_cycles(self) -> int:
        """Cycles from the end of a transfer to its data being usable."""
        ...

    @property
    def capacity_bytes(self) -> int:
        """What it holds (0 for a link)."""
        ...

    @property
    def slice_bytes(self) -> int:
        """The most one reservation of a background stream books (0: no limit)."""
        ...

    def bound(self, n_bytes: Amount, write: bool = False) -> Amount:
        """The fewest cycles ``n_bytes`` (a number or an array of them) can keep this
        memory busy, latency left out (written, with ``write``)."""
        ...

    def params(self) -> tuple[float, ...]:
        """Its parameters, as its kernel reads them."""
        ...

    def initial_state(self) -> tuple[int, ...]:
        """Its state when idle, as its kernel keeps it."""
        ...

    def channel_free(self, state: Sequence[int]) -> tuple[int, ...]:
        """The cycle each of its channels is free, in its own ``state``."""
        ...

    @staticmethod
    def reserve(
        params: Params,
        p: int,
        state: State,
        s: int,
        now: int,
        n_bytes: int,
        stream: int,
        write: bool,
    ) -> int:
        """Its kernel: book ``n_bytes`` of stream class ``stream`` at ``now``; the cycle
        they have left the memory."""
        ...


class MemoryState:
    """A memory model with the state of one simulation: what the SimPy engine
    (:mod:`accelsim.timing.channel`) and :mod:`accelsim.timing.single_op` book
    transfers on, through the model's kernel.

    Args:
        model: The memory.
    """

    __slots__ = ("_kernel", "latency_cycles", "model", "params", "slice_bytes", "state")

    def __init__(self, model: Memory) -> None:
        self.model = model
        self.latency_cycles = model.latency_cycles
        self.slice_bytes = model.slice_bytes
        self.params = model.params()
        self.state: list[int] = list(model.initial_state())
        self._kernel = model.reserve

    def portion(self, n_bytes: int, stream: Stream) -> int:
        """How many of ``n_bytes`` one reservation of ``stream`` books: all of them, but
        at most a slice of a background stream (the engine books the rest when that
        part has left the memory)."""
        if self.slice_bytes and stream.priority == BACKGROUND:
            return min(n_bytes, self.slice_bytes)
        return n_bytes

    def reserve(self, now: int, n_bytes: int, stream: Stream) -> int:
        """Book ``n_bytes`` of ``stream`` (at most :meth:`portion` of them) at cycle
        ``now``; the cycle they arrive (they leave the memory :attr:`latency_cycles`
        earlier)."""
        kind, write = stream.kind, stream.write
        leaves = self._kernel(self.params, 0, self.state, 0, now, n_bytes, kind, write)
        return leaves + self.latency_cycles


def traffic_bound(memory: Memory, n_bytes: float, written_bytes: float) -> float:
    """The fewest cycles ``n_bytes`` of traffic, ``written_bytes`` of them written, keep
    ``memory`` busy: the reads at its read rate and the writes at its write rate (one
    bound of all of them when the two rates are equal)."""
    if memory.bound(1.0) == memory.bound(1.0, write=True):
        return float(memory.bound(n_bytes))
    return float(memory.bound(n_bytes - written_bytes) + memory.bound(written_bytes, write=True))


def slice_bytes(arbitration: DramArbitration, bytes_per_cycle: float) -> int:
    """The most one reservation of a background stream books on a memory of
    ``bytes_per_cycle`` (its total over all its channels): :data:`SLICE_CYCLES` of
    it with ``priority`` arbitration (at least a byte), no limit (0) with ``fcfs``
    or an infinite bandwidth (transfers then take no time)."""
    if arbitration is DramArbitration.FCFS or math.isinf(bytes_per_cycle):
        return 0
    return max(1, math.floor(SLICE_CYCLES * bytes_per_cycle))
