"""The network's translations: which links are the same link seen from another
processor.

Translating every coordinate of a network (:class:`~accelsim.network.topology.Network`)
by the same amount, each dimension modulo its size, maps its links onto its links: a
ring's link from ``p`` to ``p + 1`` onto the one from ``p + t`` to ``p + t + 1``, a
switch's way in from ``p`` onto the way in from ``p + t``.  A link's **owner** is the
processor it leaves (a switch's way out: the processor it reaches), and its **class**
is the link of processor 0 it is translated onto when its owner is moved to 0.  Where
a schedule puts the same sends, in the same order, on every link of a class
(:mod:`accelsim.timing.symmetry` checks it), booking the links of processor 0 alone
times the schedule as booking every link would.
"""

from __future__ import annotations

import functools

from accelsim.network.topology import Link, Network, Node, Switch


@functools.lru_cache(maxsize=32)
def link_classes(network: Network) -> tuple[int, ...]:
    """Each link's class (numbered as :meth:`Network.links` lists the links): the
    number of the link of processor 0 it is a translation of."""
    links = network.links()
    ids = {link: i for i, link in enumerate(links)}
    return tuple(ids[_home(network, link)] for link in links)


def _home(network: Network, link: Link) -> Link:
    """``link`` translated so that its owner is processor 0."""
    owner = link.source if isinstance(link.source, int) else link.destination
    assert isinstance(owner, int)
    return Link(
        link.dimension,
        _moved(network, link.source, owner),
        _moved(network, link.destination, owner),
    )


def _moved(network: Network, node: Node, owner: int) -> Node:
    """``node`` translated by minus ``owner``'s coordinates."""
    if isinstance(node, Switch):
        base = _translated(network, node.base, owner)
        return Switch(node.dimension, network.moved(base, node.dimension, 0))
    return _translated(network, node, owner)


def _translated(network: Network, p: int, owner: int) -> int:
    out = 0
    for k, dim in enumerate(network.dimensions):
        c = (network.coordinate(p, k) - network.coordinate(owner, k)) % dim.size
        out += c * network.strides[k]
    return out
