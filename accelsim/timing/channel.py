"""A bandwidth-limited, first-come-first-served channel as a SimPy resource.

Used for DRAM (one channel shared by every processor and unit, or one per
processor) and for each processor's interconnect link.  It follows SimPy's
documented extension contract for
:class:`simpy.resources.base.BaseResource`: a :class:`Transfer` is a ``Put``
whose ``_do_put`` reserves the channel for ``ceil(bytes / bandwidth)`` cycles
after every transfer requested before it, then completes after the access
latency.  Contention is therefore decided by the order in which the
simulation issues requests, with one event per transfer.
"""

from __future__ import annotations

import math

import simpy
from simpy.resources.base import BaseResource, Get, Put


class Transfer(Put["Channel"]):
    """Request to move ``n_bytes`` over a :class:`Channel`; yield it to wait for the data."""

    def __init__(self, channel: Channel, n_bytes: int) -> None:
        self.n_bytes = n_bytes
        super().__init__(channel)


class Channel(BaseResource[Transfer, Get["Channel"]]):
    """A FIFO channel of ``bytes_per_cycle`` bandwidth and ``latency`` cycles.

    Args:
        env: The simulation environment.
        bytes_per_cycle: Bandwidth; ``inf`` makes transfers take only the latency.
        latency: Cycles from the end of a transfer to the data being usable.
    """

    def __init__(self, env: simpy.Environment, bytes_per_cycle: float, latency: int) -> None:
        super().__init__(env, capacity=1)
        self.bytes_per_cycle = bytes_per_cycle
        self.latency = latency
        self.free_at = 0

    def transfer(self, n_bytes: int) -> Transfer:
        """Queue a transfer; the returned event fires when its data has arrived."""
        return Transfer(self, n_bytes)

    def _do_put(self, event: Transfer) -> bool:
        now = int(self._env.now)
        start = max(now, self.free_at)
        busy = math.ceil(event.n_bytes / self.bytes_per_cycle)
        self.free_at = start + busy
        event._ok = True
        event._value = None
        self._env.schedule(event, delay=self.free_at + self.latency - now)
        return True

    def _do_get(self, event: Get[Channel]) -> bool:
        return True
