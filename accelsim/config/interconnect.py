"""The ``interconnect`` section of a hardware file: how the processors are linked.

A network is one or more **levels**, each a topology over groups of processors: the
first level's keys are the section's own (``topology``, ``dims``, ``bandwidth_bytes_per_cycle``,
``latency_cycles``, ``links``), the outer levels are listed under ``levels``, innermost
first (8 chips on a switch, then the nodes on a switched fabric).  A processor's place
is its coordinate in every dimension of every level, the first dimension of the first
level counting fastest (processor ``p`` of a ``[4, 4]`` torus is ``(p % 4, p // 4)``).
:mod:`accelsim.network.topology` builds the links and routes from this spec.

The ring of one level and no ``levels`` is what every hardware file without a
``topology`` has always meant: one outgoing link per processor, to the next one.
"""

from __future__ import annotations

import math
from enum import Enum
from typing import Annotated

from pydantic import Field, model_validator

from accelsim.config.base import Bandwidth, NonNegativeInt, RuleViolation, Spec

MAX_DIMS = 3
"""Most dimensions of one torus level."""
MAX_LEVELS = 4
"""Most outer levels of a hierarchy."""
MAX_LINKS = 64
"""Most parallel links between a processor and one neighbour (or its switch)."""
MAX_CHUNKS = 256
"""Most chunks a multi_dim collective is pipelined in."""


class Topology(str, Enum):
    """How the processors of one level are linked."""

    RING = "ring"
    TORUS = "torus"
    FULLY_CONNECTED = "fully_connected"
    SWITCH = "switch"


class Algorithm(str, Enum):
    """How a collective is cut into steps of transfers.

    ``ring``: along the group in its order, one neighbour at a time; ``direct``: every
    piece straight to where it goes, in one step per phase; ``halving_doubling``:
    recursive halving (reduce-scatter) and doubling (all-gather), a binomial tree for a
    broadcast, on a group of a power of two; ``double_binary_tree``: an all-reduce up
    and down two binary trees, each carrying half the buffer (NCCL's); ``multi_dim``:
    one phase per dimension of the network (ASTRA-sim's multi-dimensional collectives),
    on the group of every processor; ``fastest``: whichever of these takes the fewest
    cycles without contention.
    """

    RING = "ring"
    DIRECT = "direct"
    HALVING_DOUBLING = "halving_doubling"
    DOUBLE_BINARY_TREE = "double_binary_tree"
    MULTI_DIM = "multi_dim"
    FASTEST = "fastest"


Dims = Annotated[
    tuple[Annotated[int, Field(gt=0, le=1024)], ...], Field(strict=False, min_length=1)
]
Links = Annotated[int, Field(gt=0, le=MAX_LINKS)]
TopologyField = Annotated[Topology, Field(strict=False)]

_TOPOLOGY = (
    "ring: one link from each processor to the next, in processor order; torus: a ring"
    " both ways in each dimension of dims (wrap-around); fully_connected: a link from"
    " every processor to every other; switch: a link from each processor to a switch"
    " and back (one hop through it)."
)
_DIMS = (
    "Processors per dimension of this level: up to 3 for a torus ([4, 4, 4]), one for"
    " the other topologies."
)
_BANDWIDTH = "Bandwidth of each link, per direction, in bytes per cycle; .inf for an ideal link."
_LATENCY = "Latency added to every transfer on a link (a switch's: once per hop through it)."
_LINKS = (
    "Parallel links between a processor and each neighbour (or its switch port): the"
    " bandwidth a processor has towards one neighbour is links x bandwidth."
)


def _check_dims(topology: Topology, dims: tuple[int, ...] | None) -> None:
    if dims is None:
        return
    most = MAX_DIMS if topology is Topology.TORUS else 1
    if len(dims) > most:
        kind = (
            "a torus has at most 3 dimensions"
            if most > 1
            else f"a {topology.value} has one dimension"
        )
        raise RuleViolation("dims", kind, list(dims))


class LevelSpec(Spec):
    """An outer level of a hierarchy: its groups of the inner levels linked by one
    topology (the nodes of a cluster on their fabric)."""

    topology: TopologyField = Field(description=_TOPOLOGY)
    dims: Dims = Field(description=_DIMS)
    bandwidth_bytes_per_cycle: Bandwidth = Field(description=_BANDWIDTH)
    latency_cycles: NonNegativeInt = Field(default=0, description=_LATENCY)
    links: Links = Field(default=1, description=_LINKS)

    @model_validator(mode="after")
    def _check(self) -> LevelSpec:
        _check_dims(self.topology, self.dims)
        return self


class InterconnectSpec(Spec):
    """Processor-to-processor links: a topology of one level (by default one outgoing
    link per processor, ring order) or a hierarchy of levels."""

    bandwidth_bytes_per_cycle: Bandwidth = Field(
        description="Bandwidth of each of the first level's links, per direction (a ring's:"
        " each processor's outgoing link); .inf for an ideal link."
    )
    latency_cycles: NonNegativeInt = Field(
        default=0, description="Latency added to every transfer on a link of the first level."
    )
    topology: TopologyField = Field(
        default=Topology.RING,
        exclude_if=lambda v: v is Topology.RING,
        description="The first level's topology. " + _TOPOLOGY,
    )
    dims: Dims | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description=_DIMS + " Null: every processor the outer levels leave, in one dimension.",
    )
    links: Links = Field(default=1, exclude_if=lambda v: v == 1, description=_LINKS)
    algorithm: Annotated[Algorithm, Field(strict=False)] = Field(
        default=Algorithm.FASTEST,
        exclude_if=lambda v: v is Algorithm.FASTEST,
        description="How the engines cut an all-reduce on a topology other than a ring"
        " (a ring's all-reduce is the ring algorithm on each participant's link, whatever"
        " this says): ring, direct, halving_doubling, double_binary_tree, multi_dim or"
        " fastest (the fewest cycles of those that apply, found by timing each; also where"
        " the group cannot run the one named).",
    )
    multi_dim_chunks: Annotated[int, Field(gt=0, le=MAX_CHUNKS)] = Field(
        default=1,
        exclude_if=lambda v: v == 1,
        description="Chunks a multi_dim collective cuts its buffer into, pipelined across"
        " the dimensions: a chunk moves to the next dimension's phase as soon as its phase"
        " ends, each dimension working on one chunk at a time. Every chunk pays every"
        " step's latency, so more chunks overlap more but add latency; 1 runs the phases"
        " one after the other on the whole buffer.",
    )
    levels: Annotated[tuple[LevelSpec, ...], Field(strict=False, max_length=MAX_LEVELS)] = Field(
        default=(),
        exclude_if=lambda v: not v,
        description="The outer levels of a hierarchy, innermost first, each linking the"
        " groups of the levels inside it (a node's chips on their switch, then the nodes"
        " on a fabric: each processor has its own links at every level).",
    )

    @model_validator(mode="after")
    def _check(self) -> InterconnectSpec:
        _check_dims(self.topology, self.dims)
        return self

    @property
    def is_ring(self) -> bool:
        """Whether this is the one-way ring of one level (every file without a topology)."""
        return self.topology is Topology.RING and not self.levels

    def outer_processors(self) -> int:
        """Groups of the first level the outer levels link: the product of their
        dimensions (1 without outer levels)."""
        return math.prod(d for level in self.levels for d in level.dims)

    def check_processors(self, processors: int) -> None:
        """Raise :class:`RuleViolation` unless the levels hold exactly ``processors``
        (any network passes for one processor, which sends nothing: a chip's file may
        describe the pod it sits in)."""
        if processors == 1:
            return
        outer = self.outer_processors()
        if self.dims is None:
            if processors % outer:
                raise RuleViolation(
                    "levels",
                    f"the outer levels' {outer} groups do not divide the {processors} processors",
                    [list(level.dims) for level in self.levels],
                )
            return
        every = (*self.dims, *(d for level in self.levels for d in level.dims))
        if math.prod(every) != processors:
            product = " x ".join(map(str, every))
            raise RuleViolation(
                "dims",
                f"the topology holds {product} = {math.prod(every)} processors, not the"
                f" {processors} processors of the hardware",
                list(self.dims),
            )
