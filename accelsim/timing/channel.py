"""DRAM transfers as SimPy events, for the SimPy engine.

Every transfer is booked on a :class:`~accelsim.timing.memory.MemoryState` (a
processor's DRAM) when it is requested: the
memory says at once when its data arrives, so a transfer is one SimPy timeout to
that cycle (:func:`transfer`).  Contention is therefore decided by the order in
which the simulation requests transfers, with one event per transfer; the
compiled engine (:mod:`accelsim.timing.compiled`) books the same transfers in the
same order on the same memories, described as arrays.

A memory that books a stream a slice at a time (``dram.arbitration: priority``
for background streams, :meth:`~accelsim.timing.memory.MemoryState.portion`) gets the
rest asked for slice by slice: one event when each slice has left the memory,
where the next one is booked, and the transfer's event fires when the last
slice arrives (:class:`SlicedTransfer`).
"""

from __future__ import annotations

from collections.abc import Sequence

import simpy
from simpy.events import NORMAL

from accelsim.timing.memory import MemoryState, Stream


class SlicedTransfer(simpy.Event):
    """A transfer booked a slice at a time; fires when its last slice has arrived.

    Args:
        env: The simulation environment.
        memory: Where it is booked.
        left: Bytes not booked yet.
        stream: Its stream.
        leaves: The cycle the slice booked last leaves the memory: the next is
            booked then.
    """

    def __init__(
        self, env: simpy.Environment, memory: MemoryState, left: int, stream: Stream, leaves: int
    ) -> None:
        super().__init__(env)
        self.memory, self.left, self.stream = memory, left, stream
        env.timeout(leaves - int(env.now)).callbacks.append(self._book_next)

    def _book_next(self, _: simpy.Event) -> None:
        env, memory = self.env, self.memory
        now = int(env.now)
        part = memory.portion(self.left, self.stream)
        arrival = memory.reserve(now, part, self.stream)
        self.left -= part
        if self.left:
            leaves = arrival - memory.latency_cycles
            env.timeout(leaves - now).callbacks.append(self._book_next)
        else:  # fire at the arrival, as a timeout booked now would
            self._ok, self._value = True, None
            env.schedule(self, NORMAL, arrival - now)


def transfer(
    env: simpy.Environment, memory: MemoryState, n_bytes: int, stream: Stream
) -> simpy.Event:
    """Book ``n_bytes`` of ``stream`` on ``memory`` now; the returned event fires when
    they have arrived."""
    now = int(env.now)
    # A memory that slices nothing books every transfer whole (and costs no call).
    part = memory.portion(n_bytes, stream) if memory.slice_bytes else n_bytes
    arrival = memory.reserve(now, part, stream)
    if part == n_bytes:
        return env.timeout(arrival - now)
    return SlicedTransfer(env, memory, n_bytes - part, stream, arrival - memory.latency_cycles)


def reserve_all(
    now: int, memories: Sequence[MemoryState], n_bytes: Sequence[int], stream: Stream
) -> int:
    """Book ``n_bytes[i]`` on ``memories[i]`` in turn at cycle ``now``; the last
    arrival (``now`` when every count is 0: nothing is booked).

    Each is booked whole, as by :meth:`~accelsim.timing.memory.MemoryState.reserve`,
    without an event (a memory listed twice is booked twice, one transfer after the
    other); a collective's read and write phases book its participants' memories
    this way.

    Raises:
        ValueError: if one would book ``stream`` a slice at a time.
    """
    booked = [(m, b) for m, b in zip(memories, n_bytes, strict=True) if b]
    if any(m.slice_bytes and m.portion(b, stream) < b for m, b in booked):
        raise ValueError(f"reserve_all books whole transfers, not {stream.kind.name} slices")
    return max([now, *(m.reserve(now, b, stream) for m, b in booked)])
