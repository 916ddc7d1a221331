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

    def reserve(self, n_bytes: int) -> int:
        """Queue ``n_bytes`` now, without an event; returns the cycle the data arrives."""
        start = max(int(self.env.now), self.free_at)
        self.free_at = start + math.ceil(n_bytes / self.bytes_per_cycle)
        return self.free_at + self.latency

    def transfer(self, n_bytes: int) -> simpy.Timeout:
        """Queue a transfer; the returned event fires when its data has arrived."""
        arrival = self.reserve(n_bytes)
        return self.env.timeout(arrival - int(self.env.now))


def reserve_all(channels: Sequence[Channel], n_bytes: int) -> int:
    """Reserve ``n_bytes`` on each channel in turn; returns the last arrival cycle.

    The same as ``max(c.reserve(n_bytes) for c in channels)`` (a channel listed
    twice is reserved twice, one transfer after the other), inlined because a
    ring all-reduce step reserves every participant's channel.
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
