"""Each algorithm's lowering of a collective to steps of transfers
(:class:`~accelsim.network.collectives.Schedule`), or none where the algorithm does
not apply.

With ``n`` processors in the group, ``c = ceil(S / n)`` and ``S`` the collective's
size (:mod:`accelsim.network.collectives`):

- ``ring``: reduce-scatter and all-gather ``n - 1`` steps of ``c`` from each processor
  to the next in the group; all-reduce the two, ``2(n - 1)`` steps; all-to-all
  ``n - 1`` steps, step ``k`` passing on the ``(n - k) c`` still to go further; a
  broadcast ``n - 1`` steps of ``S`` along the group (not pipelined);
- ``direct``: reduce-scatter, all-gather and all-to-all one step of ``c`` from each
  processor to each other; all-reduce two such steps; a broadcast one step of ``S``
  from the root to each other;
- ``halving_doubling`` (``n`` a power of two): reduce-scatter by recursive halving
  with distance doubling, ``log2 n`` steps, step ``k`` exchanging ``(n / 2^(k+1)) c``
  with the processor whose place in the group differs from its own in bit ``2^k`` (the
  largest piece to the nearest partner); all-gather the reverse (recursive doubling
  with distance halving: ``2^k c`` with the partner ``n / 2^(k+1)`` away); all-reduce
  the two; a broadcast a binomial tree, the root first sending ``S`` to the place
  ``n / 2`` away, ``log2 n`` steps; no all-to-all;
- ``double_binary_tree`` (all-reduce only): two binary trees over the group, the
  second on the group reversed (so a processor inner in one is mostly a leaf in the
  other), each reducing ``ceil(S / 2)`` (or ``floor``) level by level to its root and
  broadcasting it back: ``2 floor(log2 n)`` steps, not pipelined;
- ``multi_dim`` (all-reduce, reduce-scatter, all-gather, on every processor of the
  network in order): the buffer cut into the network's ``multi_dim_chunks`` chunks
  of ``ceil(S / chunks)``, each chunk a phase per dimension: a reduce-scatter along
  each dimension of the network in turn, the first first, each on what the one
  before left (``S / d_1``, then ``S / (d_1 d_2)``, ...), then the all-gathers in
  the reverse order; along a ring dimension a ring, along a torus dimension of 3 or
  more two rings, one each way, each on half the buffer, along a fully connected or
  switched one ``direct``; the chunks pipelined across the dimensions
  (:func:`accelsim.network.cost.pipeline_cycles`);
- a point-to-point transfer is one step of ``S``, whatever the algorithm.
"""

from __future__ import annotations

from accelsim.config.interconnect import Topology
from accelsim.network.collectives import (
    Algorithm,
    Collective,
    Phase,
    Schedule,
    Step,
    Transfer,
    piece,
    together,
)
from accelsim.network.topology import Network

Steps = tuple[Step, ...]


def lower(
    network: Network,
    collective: Collective,
    group: tuple[int, ...],
    size_bytes: int,
    algorithm: Algorithm,
) -> Schedule | None:
    """``collective`` of ``size_bytes`` on ``group`` by ``algorithm`` (not ``fastest``:
    :func:`accelsim.network.cost.plan` chooses), or None where it does not apply."""
    if collective is Collective.POINT_TO_POINT:
        if len(group) != 2:
            return None
        steps: Steps | None = ((Transfer(group[0], group[1], size_bytes),),)
    elif len(group) < 2:
        steps = ()
    elif algorithm is Algorithm.RING:
        steps = _ring(collective, group, size_bytes)
    elif algorithm is Algorithm.DIRECT:
        steps = _direct(collective, group, size_bytes)
    elif algorithm is Algorithm.HALVING_DOUBLING:
        steps = _halving_doubling(collective, group, size_bytes)
    elif algorithm is Algorithm.DOUBLE_BINARY_TREE:
        steps = _double_tree(collective, group, size_bytes)
    elif algorithm is Algorithm.MULTI_DIM:
        return _multi_dim(network, collective, group, size_bytes)
    else:
        raise ValueError(f"no lowering of {algorithm.value}: choose it with cost.plan")
    if steps is None:
        return None
    return Schedule(collective, algorithm, group, size_bytes, steps)


def _shift(group: tuple[int, ...], n_bytes: int) -> Step:
    """Each processor of ``group`` sends ``n_bytes`` to the next (the last to the first)."""
    n = len(group)
    return tuple(Transfer(group[i], group[(i + 1) % n], n_bytes) for i in range(n))


def _ring_phase(group: tuple[int, ...], n_bytes: int) -> Steps:
    """A ring reduce-scatter or all-gather of pieces of ``n_bytes``: ``n - 1`` shifts."""
    return (_shift(group, n_bytes),) * (len(group) - 1)


def ring_shifts(collective: Collective, n: int, size: int) -> tuple[int, int] | None:
    """The steps of ``collective`` (a reduce-scatter, an all-gather or an all-reduce)
    of ``size`` bytes by the ring over a group of ``n``, in closed form: their count,
    each the same shift of one piece, and the piece (``ceil(size / n)``); None for
    another kind."""
    if collective in (Collective.REDUCE_SCATTER, Collective.ALL_GATHER):
        return n - 1, piece(size, n)
    if collective is Collective.ALL_REDUCE:
        return 2 * (n - 1), piece(size, n)
    return None


def _ring(collective: Collective, group: tuple[int, ...], size: int) -> Steps | None:
    n, c = len(group), piece(size, len(group))
    shifts = ring_shifts(collective, n, size)
    if shifts is not None:
        count, c = shifts
        return (_shift(group, c),) * count
    if collective is Collective.ALL_TO_ALL:
        return tuple(_shift(group, (n - k) * c) for k in range(1, n))
    # A broadcast: the root's buffer along the group, a hop a step.
    return tuple((Transfer(group[k - 1], group[k], size),) for k in range(1, n))


def _everyone(group: tuple[int, ...], n_bytes: int) -> Step:
    return tuple(Transfer(a, b, n_bytes) for a in group for b in group if a != b)


def _direct(collective: Collective, group: tuple[int, ...], size: int) -> Steps | None:
    c = piece(size, len(group))
    if collective is Collective.ALL_REDUCE:
        return (_everyone(group, c),) * 2
    if collective is Collective.BROADCAST:
        return (tuple(Transfer(group[0], b, size) for b in group[1:]),)
    return (_everyone(group, c),)


def _exchange(group: tuple[int, ...], distance: int, n_bytes: int) -> Step:
    """Each processor sends ``n_bytes`` to the one whose place differs in bit ``distance``."""
    return tuple(Transfer(g, group[i ^ distance], n_bytes) for i, g in enumerate(group))


def _halving_doubling(collective: Collective, group: tuple[int, ...], size: int) -> Steps | None:
    n = len(group)
    if n & (n - 1) or collective is Collective.ALL_TO_ALL:
        return None
    c = piece(size, n)
    near = [1 << k for k in range(n.bit_length() - 1)]  # 1, 2, ..., n/2
    # Halving with distance doubling: the largest piece to the nearest partner.
    halving = tuple(_exchange(group, d, (n // (2 * d)) * c) for d in near)
    doubling = halving[::-1]
    if collective is Collective.REDUCE_SCATTER:
        return halving
    if collective is Collective.ALL_GATHER:
        return doubling
    if collective is Collective.ALL_REDUCE:
        return halving + doubling
    # A broadcast down a binomial tree: the holders (every 2d-th place) send to d on.
    return tuple(
        tuple(Transfer(group[i], group[i + d], size) for i in range(0, n, 2 * d))
        for d in reversed(near)
    )


def _tree(order: tuple[int, ...], n_bytes: int) -> tuple[Steps, Steps]:
    """A binary tree laid over ``order`` as a heap (place ``k``'s children at
    ``2k + 1`` and ``2k + 2``): its reduction, deepest level first, and its broadcast."""
    depth = len(order).bit_length() - 1
    levels = [
        tuple(range(2**t - 1, min(2 ** (t + 1) - 1, len(order)))) for t in range(1, depth + 1)
    ]
    up = tuple(
        tuple(Transfer(order[k], order[(k - 1) // 2], n_bytes) for k in level)
        for level in reversed(levels)
    )
    down = tuple(
        tuple(Transfer(order[(k - 1) // 2], order[k], n_bytes) for k in level) for level in levels
    )
    return up, down


def _double_tree(collective: Collective, group: tuple[int, ...], size: int) -> Steps | None:
    if collective is not Collective.ALL_REDUCE:
        return None
    up_a, down_a = _tree(group, piece(size, 2))
    up_b, down_b = _tree(group[::-1], size // 2)
    return together(up_a, up_b) + together(down_a, down_b)


def _dimension_groups(network: Network, k: int) -> list[tuple[int, ...]]:
    """The groups of dimension ``k``: processors differing in coordinate ``k`` alone."""
    size = network.dimensions[k].size
    bases = [p for p in range(network.processors) if network.coordinate(p, k) == 0]
    return [tuple(network.moved(p, k, c) for c in range(size)) for p in bases]


def _dimension_phase(network: Network, k: int, buffer: int) -> Steps:
    """A reduce-scatter (or all-gather) of ``buffer`` bytes along dimension ``k``."""
    dim = network.dimensions[k]
    phases: list[Steps] = []
    for g in _dimension_groups(network, k):
        if dim.topology in (Topology.SWITCH, Topology.FULLY_CONNECTED):
            phases.append((_everyone(g, piece(buffer, dim.size)),))
        elif dim.topology is Topology.TORUS and dim.size > 2:
            half = piece(buffer, 2 * dim.size)
            phases.append(together(_ring_phase(g, half), _ring_phase(g[::-1], half)))
        else:
            phases.append(_ring_phase(g, piece(buffer, dim.size)))
    return together(*phases)


def _multi_dim(
    network: Network, collective: Collective, group: tuple[int, ...], size: int
) -> Schedule | None:
    """Each chunk of ``ceil(size / chunks)`` bytes through the dimensions' phases."""
    wanted = (Collective.ALL_REDUCE, Collective.REDUCE_SCATTER, Collective.ALL_GATHER)
    if collective not in wanted or group != tuple(range(network.processors)):
        return None
    chunks = network.multi_dim_chunks
    scatter: list[Phase] = []
    buffer = piece(size, chunks)
    for k, dim in enumerate(network.dimensions):
        if dim.size > 1:
            scatter.append(Phase(k, _dimension_phase(network, k, buffer)))
            buffer = piece(buffer, dim.size)
    gather = scatter[::-1]
    if collective is Collective.REDUCE_SCATTER:
        phases = tuple(scatter)
    elif collective is Collective.ALL_GATHER:
        phases = tuple(gather)
    else:
        phases = (*scatter, *gather)
    steps = tuple(step for phase in phases for step in phase.steps) * chunks
    return Schedule(collective, Algorithm.MULTI_DIM, group, size, steps, phases, chunks)
