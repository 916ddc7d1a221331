"""A bandwidth-limited, first-come-first-served channel for the SimPy engine.

Used for DRAM (one channel shared by every processor and unit, or one per
processor) and for each processor's interconnect link.  A transfer reserves
the channel for ``ceil(bytes / bandwidth)`` cycles after every transfer
requested before it and completes after the access latency, so its arrival
cycle is known when it is requested: :meth:`Channel.transfer` is one SimPy
timeout to that cycle.  Contention is therefore decided by the order in which
the simulation issues requests, with one event per transfer (the compiled
engine, :mod:`accelsim.timing.compiled`, does the same arithmetic).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import simpy


class Channel:
    """A FIFO channel of ``bytes_per_cycle`` bandwidth and ``latency`` cycles.

    Args:
        env: The simulation environment.
        bytes_per_cycle: Bandwidth; ``inf`` makes transfers take only the latency.
        latency: Cycles from the end of a transfer to the data being usable.
    """

    def __init__(self, env: simpy.Environment, bytes_per_cycle: float, latency: int) -> None:
        self.env = env
        self.bytes_per_cycle = bytes_per_cycle
        self.latency = latency
        self.free_at = 0

    def transfer(self, n_bytes: int) -> simpy.Timeout:
        """Queue a transfer; the returned event fires when its data has arrived.

        The transfer starts when the channel is free (now, or when the transfers
        queued before it are done), holds it ``ceil(n_bytes / bytes_per_cycle)``
        cycles and arrives ``latency`` cycles later.
        """
        now = int(self.env.now)
        free_at = self.free_at
        free_at = (free_at if free_at > now else now) + math.ceil(n_bytes / self.bytes_per_cycle)
        self.free_at = free_at
        return self.env.timeout(free_at + self.latency - now)


def reserve_all(channels: Sequence[Channel], n_bytes: int) -> int:
    """Reserve ``n_bytes`` on each channel in turn; returns the last arrival cycle.

    Each channel is queued as by :meth:`Channel.transfer`, without an event (a
    channel listed twice is reserved twice, one transfer after the other); a
    ring all-reduce step reserves every participant's channel this way.
    """
    if not channels:
        raise ValueError("reserve_all needs at least one channel")
    now = int(channels[0].env.now)
    arrival = 0
    bandwidth = math.nan
    busy = 0
    for channel in channels:
        if channel.bytes_per_cycle != bandwidth:
            bandwidth = channel.bytes_per_cycle
            busy = math.ceil(n_bytes / bandwidth)
        free_at = channel.free_at
        free_at = (free_at if free_at > now else now) + busy
        channel.free_at = free_at
        if free_at + channel.latency > arrival:
            arrival = free_at + channel.latency
    return arrival
