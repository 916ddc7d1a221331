"""The network's translations: which links are the same link seen from another
processor, and which processors stand for all under the translations that keep
every route.

Translating every coordinate of a network (:class:`~accelsim.network.topology.Network`)
by the same amount, each dimension modulo its size, maps its links onto its links: a
ring's link from ``p`` to ``p + 1`` onto the one from ``p + t`` to ``p + t + 1``, a
switch's way in from ``p`` onto the way in from ``p + t``.  A link's **owner** is the
processor it leaves (a switch's way out: the processor it reaches), and its **class**
is the link of processor 0 it is translated onto when its owner is moved to 0.  Where
a schedule puts the same sends, in the same order, on every link of a class
(:mod:`accelsim.timing.symmetry` checks it), booking the links of processor 0 alone
times the schedule as booking every link would.

Routes are kept by the translations by an even amount along every torus dimension
of an even size above 2 (where a transfer half-way round goes the way its start's
parity says) and by any amount along the others: :func:`route_classes`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from accelsim.config.interconnect import Topology
from accelsim.network.topology import Dimension, Link, Network, Node, Switch, ring_ends


@functools.lru_cache(maxsize=32)
def link_classes(network: Network) -> tuple[int, ...]:
    """Each link's class (numbered as :meth:`Network.links` lists the links): the
    number of the link of processor 0 it is a translation of.

    :meth:`Network.links` lists a dimension's links processor by processor, each
    processor the same count of them: along a ring or a torus ahead (then back),
    through a switch in (then out), fully connected to each other coordinate in
    order.  Processor ``p``'s ``j``-th link of a dimension is then a translation of
    processor 0's ``j``-th, but fully connected, where the link to coordinate ``e``
    from ``c`` is the one to ``e - c`` from 0: worked out for every link at once."""
    processors = network.processors
    out = [np.zeros(0, np.int64)]
    base = 0  # the dimension's first link: processor 0's first
    for k, dim in enumerate(network.dimensions):
        per = _per_processor(dim)
        if dim.topology is Topology.FULLY_CONNECTED:
            at = np.arange(processors, dtype=np.int64)[:, None]
            c = (at // network.strides[k]) % dim.size
            j = np.arange(per, dtype=np.int64)[None, :]
            e = j + (j >= c)  # the other end's coordinate: every one but c, in order
            place = (e - c) % dim.size - 1
        else:
            place = np.broadcast_to(np.arange(per, dtype=np.int64), (processors, per))
        out.append((base + place).ravel())
        base += processors * per
    return tuple(np.concatenate(out).tolist())


def _per_processor(dim: Dimension) -> int:
    """The links each processor has along ``dim`` (:meth:`Network.links`)."""
    if dim.topology is Topology.SWITCH:
        return 2
    if dim.topology is Topology.FULLY_CONNECTED:
        return dim.size - 1
    return len(ring_ends(dim, 0))


def route_classes(network: Network) -> tuple[tuple[int, ...], Callable[[Link], Link]]:
    """The processors that stand for all under the translations keeping every route
    (coordinate 0 or 1 along a parity-bound torus dimension, 0 along the others),
    and each link's class under those translations: the link it is translated onto
    when its owner is moved to the one of these processors a translation reaches."""
    parity = _parity_bound(network)
    starts = [
        p
        for p in range(network.processors)
        if all(network.coordinate(p, k) < (2 if parity[k] else 1) for k in range(len(parity)))
    ]
    return tuple(starts), functools.partial(_home, network, parity=parity)


def _parity_bound(network: Network) -> tuple[bool, ...]:
    """Per dimension, whether a route along it depends on its start's parity."""
    return tuple(
        d.topology is Topology.TORUS and d.size > 2 and d.size % 2 == 0 for d in network.dimensions
    )


def _home(network: Network, link: Link, parity: tuple[bool, ...] | None = None) -> Link:
    """``link`` translated so that its owner is processor 0 (with ``parity``, so that
    its owner keeps its parity along the dimensions it marks)."""
    owner = link.source if isinstance(link.source, int) else link.destination
    assert isinstance(owner, int)
    shift = [network.coordinate(owner, k) for k in range(len(network.dimensions))]
    if parity is not None:
        shift = [c - c % 2 if bound else c for c, bound in zip(shift, parity, strict=True)]
    return Link(
        link.dimension,
        _moved(network, link.source, shift),
        _moved(network, link.destination, shift),
    )


def _moved(network: Network, node: Node, shift: list[int]) -> Node:
    """``node`` translated by minus ``shift`` (coordinates)."""
    if isinstance(node, Switch):
        base = _translated(network, node.base, shift)
        return Switch(node.dimension, network.moved(base, node.dimension, 0))
    return _translated(network, node, shift)


def _translated(network: Network, p: int, shift: list[int]) -> int:
    out = 0
    for k, dim in enumerate(network.dimensions):
        c = (network.coordinate(p, k) - shift[k]) % dim.size
        out += c * network.strides[k]
    return out
