"""The network's links as the SimPy engine books them, a step of sends at a time.

Each link is a first-come-first-served channel: a send of ``bytes`` booked at
``now`` holds its link from ``max(now, free)`` for ``ceil(bytes / bandwidth)``
cycles and arrives its route's latency after the link is done
(:mod:`accelsim.timing.sends`).  Booked send by send, a step of a collective over
``P`` processors is ``P`` bookings, and a step's collectives ``P`` times more work
per event than its units.

A step whose sends are all alike (:class:`~accelsim.timing.sends.Alike`: one on each
of its links, the same bytes and route latency, links of one bandwidth) is booked
once, as a **link class**, one per distinct set of links, when each of its links is
free by the same cycle, ``max(now, free)``: it then holds them all to the same
cycle.  Its class keeps that cycle once, not on each link, and each link's free
cycle is the largest of its own (what was booked on it send by send) and its
classes' (:meth:`Links.held`): a booking never ends a link before it was free, so a
link's free cycle is the last booked on it, the largest.  A class also keeps
``other``, the largest free cycle anything but its own class bookings has given one
of its links (a send on its own, a class sharing a link); every link of class ``c``
is then free between ``class_free[c]`` and ``max(class_free[c], other[c])``, so when
``other[c] <= max(now, class_free[c])`` each is free by ``max(now, class_free[c])``,
and the step is booked once, updating ``other`` of the classes that share a link
with it.  Otherwise (another collective or a transfer still holds some of its links
later) its sends are booked one by one, exactly as always, each raising ``other`` of
its link's classes.  Every step therefore ends at the cycle the send-by-send booking
gives, and the contention between collectives and with transfers is kept.

The compiled engine books the same way (:func:`accelsim.timing.loop.transfers.send`),
its classes numbered ahead in the :class:`~accelsim.timing.sends.SendTable`; here a
class is made the first time a step of its links is booked, its ``other`` the
largest free cycle of its links then.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from accelsim.timing.sends import NetStep, alike


class Links:
    """The links of bandwidth ``bandwidth`` (each link's), all free at cycle 0."""

    def __init__(self, bandwidth: Sequence[float]) -> None:
        self.bandwidth = list(bandwidth)
        self.free = [0] * len(self.bandwidth)  # booked send by send
        self.classes: list[list[int]] = [[] for _ in self.bandwidth]  # each link's
        self.class_free: list[int] = []
        self.other: list[int] = []
        self.overlaps: list[list[int]] = []  # the classes sharing a link with each
        self.numbered: dict[frozenset[int], int] = {}
        # Each step seen (by id, kept alive so the id stays its): its class (-1:
        # none), the cycles each send holds its link and the step's latency.
        self.seen: dict[int, tuple[NetStep, int, int, int]] = {}

    def book(self, step: NetStep, now: int) -> int:
        """Book the sends of ``step`` at cycle ``now``, each after what its link
        already carries; the last arrival (``now`` if it sends nothing)."""
        seen = self.seen.get(id(step))
        if seen is None:
            seen = self.seen[id(step)] = (step, *self._class_of(step))
        _, c, cycles, latency = seen
        if c >= 0:
            start = max(now, self.class_free[c])
            if self.other[c] <= start:
                done = self.class_free[c] = start + cycles
                other = self.other
                for near in self.overlaps[c]:
                    other[near] = max(other[near], done)
                return done + latency
        return self._each(step, now)

    def held(self, link: int) -> int:
        """The cycle ``link`` is free."""
        return max([self.free[link], *(self.class_free[c] for c in self.classes[link])])

    def _each(self, step: NetStep, now: int) -> int:
        """Book the sends of ``step`` one by one; the last arrival."""
        free, bandwidth, classes = self.free, self.bandwidth, self.classes
        class_free, other = self.class_free, self.other
        arrival = now
        for send in step:
            k = send.link
            was = free[k]
            for c in classes[k]:
                was = max(was, class_free[c])
            done = free[k] = max(now, was) + math.ceil(send.bytes / bandwidth[k])
            for c in classes[k]:
                other[c] = max(other[c], done)
            arrival = max(arrival, done + send.latency_cycles)
        return arrival

    def _class_of(self, step: NetStep) -> tuple[int, int, int]:
        """The class of ``step``, made if new (-1 where its sends are not all alike),
        the cycles each send holds its link and its latency."""
        same = alike(step, self.bandwidth)
        if same is None:
            return -1, 0, 0
        c = self.numbered.get(same.links)
        if c is None:
            c = self.numbered[same.links] = len(self.class_free)
            near = sorted({h for k in same.links for h in self.classes[k]})
            self.other.append(max(self.held(k) for k in same.links))
            self.class_free.append(0)
            self.overlaps.append(near)
            for h in near:
                self.overlaps[h].append(c)
            for k in same.links:
                self.classes[k].append(c)
        link = next(iter(same.links))
        return c, math.ceil(same.bytes / self.bandwidth[link]), same.latency_cycles
