"""DRAM and link transfers as SimPy events, for the SimPy engine.

Every transfer is booked on a :class:`~accelsim.timing.memory.Memory` (a
processor's DRAM, or its outgoing interconnect link) when it is requested: the
memory says at once when its data arrives, so a transfer is one SimPy timeout to
that cycle (:func:`transfer`).  Contention is therefore decided by the order in
which the simulation requests transfers, with one event per transfer; the
compiled engine (:mod:`accelsim.timing.compiled`) books the same transfers in the
same order on the same memories, described as arrays.
"""

from __future__ import annotations

from collections.abc import Sequence

import simpy

from accelsim.timing.memory import Memory, Stream


def transfer(env: simpy.Environment, memory: Memory, n_bytes: int, stream: Stream) -> simpy.Timeout:
    """Book ``n_bytes`` of ``stream`` on ``memory`` now; the returned event fires when
    they have arrived."""
    now = int(env.now)
    return env.timeout(memory.reserve(now, n_bytes, stream) - now)


def reserve_all(now: int, memories: Sequence[Memory], n_bytes: int, stream: Stream) -> int:
    """Book ``n_bytes`` on each memory in turn at cycle ``now``; the last arrival.

    Each is booked as by :meth:`Memory.reserve`, without an event (a memory listed
    twice is booked twice, one transfer after the other); a ring all-reduce's
    phase books every participant's memory this way.
    """
    if not memories:
        raise ValueError("reserve_all needs at least one memory")
    return max([memory.reserve(now, n_bytes, stream) for memory in memories])
