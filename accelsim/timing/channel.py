"""A bandwidth-limited, first-come-first-served channel for the SimPy engine.

Used for DRAM (one channel shared by every processor and unit, or one per
processor) and for each processor's interconnect link.  A transfer reserves
the channel for ``ceil(bytes / bandwidth)`` cycles after every transfer
requested before it and completes after the access latency, so its arrival
cycle is known when it is requested: :meth:`Channel.transfer` is one SimPy
timeout to that cycle.  Contention is therefore decided by the order in which
the simulation issues requests, with one event per transfer (the compiled
engine, :mod:`accelsim.timing.compiled`, does the same arithmetic).  The
arithmetic itself (:class:`Fifo`) needs no SimPy: :mod:`accelsim.timing.single_op`
uses it to time a lone op without an engine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import simpy


class Fifo:
    """The reservations of a FIFO channel of ``bytes_per_cycle`` bandwidth (reads; writes
    at ``write_bytes_per_cycle``, the same by default) and ``latency`` cycles, in cycles,
    without an event.

    Args:
        bytes_per_cycle: Bandwidth; ``inf`` makes transfers take only the latency.
        latency: Cycles from the end of a transfer to the data being usable.
        write_bytes_per_cycle: The writes' bandwidth (``None``: ``bytes_per_cycle``).
    """

    def __init__(
        self, bytes_per_cycle: float, latency: int, write_bytes_per_cycle: float | None = None
    ) -> None:
        self.bytes_per_cycle = bytes_per_cycle
        self.write_bytes_per_cycle = (
            bytes_per_cycle if write_bytes_per_cycle is None else write_bytes_per_cycle
        )
        self.latency = latency
        self.free_at = 0

    def reserve(self, now: int, n_bytes: int, write: bool = False) -> int:
        """Queue ``n_bytes`` at cycle ``now``; the cycle its data arrives.

        The transfer starts when the channel is free (now, or when the transfers
        queued before it are done), holds it ``ceil(n_bytes / bandwidth)`` cycles
        (the writes' bandwidth for a ``write``) and arrives ``latency`` cycles later.
        """
        bandwidth = self.write_bytes_per_cycle if write else self.bytes_per_cycle
        free_at = self.free_at
        free_at = (free_at if free_at > now else now) + math.ceil(n_bytes / bandwidth)
        self.free_at = free_at
        return free_at + self.latency


class Channel(Fifo):
    """A :class:`Fifo` channel in a SimPy simulation.

    Args:
        env: The simulation environment.
        bytes_per_cycle: Bandwidth; ``inf`` makes transfers take only the latency.
        latency: Cycles from the end of a transfer to the data being usable.
    """

    def __init__(
        self,
        env: simpy.Environment,
        bytes_per_cycle: float,
        latency: int,
        write_bytes_per_cycle: float | None = None,
    ) -> None:
        super().__init__(bytes_per_cycle, latency, write_bytes_per_cycle)
        self.env = env

    def transfer(self, n_bytes: int, write: bool = False) -> simpy.Timeout:
        """Queue a transfer now (:meth:`Fifo.reserve`); the returned event fires
        when its data has arrived."""
        now = int(self.env.now)
        return self.env.timeout(self.reserve(now, n_bytes, write) - now)


def reserve_all(channels: Sequence[Channel], n_bytes: int, write: bool = False) -> int:
    """Reserve ``n_bytes`` on each channel in turn; returns the last arrival cycle.

    Each channel is queued as by :meth:`Fifo.reserve`, without an event (a
    channel listed twice is reserved twice, one transfer after the other); a
    ring all-reduce step reserves every participant's channel this way.
    """
    if not channels:
        raise ValueError("reserve_all needs at least one channel")
    now = int(channels[0].env.now)
    return max([channel.reserve(now, n_bytes, write) for channel in channels])
