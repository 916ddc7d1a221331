"""The processor groups of a placed step and where they sit on the topology.

Four kinds exist, for the parallelisms placement builds:

* ``data``: the processors one all-reduce sums a gradient over (its
  :class:`~accelsim.graph.ops.CommOp`'s ``participants``): data parallelism's
  replicas, or a PipeDream stage's (an all-reduce over some of another group's
  members, a pipeline's last round over the replicas that had a mini-batch, is of
  that group);
* ``pipeline``: the processors one copy of the step's forward pass visits, in the
  order it visits them (one per stage of a pipeline; each distinct path once, so a
  pipeline with a replicated stage has one per replica it sends mini-batches through);
* ``tensor``: the processors one all-reduce of an activation or of an input gradient
  spans (a :class:`~accelsim.graph.ops.CommOp` of group ``tensor``): a
  tensor-parallel group (:mod:`accelsim.mapping.tensor_placement`);
* ``expert``: the processors one all-to-all of routed tokens spans (a
  :class:`~accelsim.graph.ops.CommOp` of group ``expert``): an expert-parallel group
  (:mod:`accelsim.mapping.expert_placement`).

A group's **span** is the network dimensions (:class:`~accelsim.network.topology.Network`,
innermost first) in which its members' coordinates differ, each with the level of the
``interconnect`` section it belongs to: a data-parallel group of 8 on a 2x4 torus
spans both dimensions; on a hierarchy, a group whose span is level 0's dimensions
alone stays inside a node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from accelsim.config.enums import CommGroup
from accelsim.config.interconnect import InterconnectSpec
from accelsim.graph.memo import per_graph
from accelsim.graph.ops import CommOp, OpGraph, Tag
from accelsim.graph.queries import forward_work
from accelsim.network.topology import Network


class GroupKind(str, Enum):
    """What a processor group does together."""

    DATA = "data"
    PIPELINE = "pipeline"
    TENSOR = "tensor"
    EXPERT = "expert"


@dataclass(frozen=True)
class SpannedDimension:
    """A network dimension a group spans: its index (innermost 0), the level of the
    ``interconnect`` section it belongs to (0: the first), its topology and size."""

    dimension: int
    level: int
    topology: str
    size: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "dimension": self.dimension,
            "level": self.level,
            "topology": self.topology,
            "size": self.size,
        }


@dataclass(frozen=True)
class ProcessorGroup:
    """Processors ``members`` working together as ``kind``, spanning ``span``."""

    kind: GroupKind
    members: tuple[int, ...]
    span: tuple[SpannedDimension, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "members": list(self.members),
            "span": [d.to_dict() for d in self.span],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProcessorGroup:
        """A ``summary.json`` group read back (``ValueError`` for a malformed one)."""
        try:
            return cls(
                GroupKind(data["kind"]),
                tuple(int(m) for m in data["members"]),
                tuple(SpannedDimension(**d) for d in data["span"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"summary: groups: malformed group (got {data!r})") from error


_KINDS = {
    CommGroup.DATA: GroupKind.DATA,
    CommGroup.TENSOR: GroupKind.TENSOR,
    CommGroup.EXPERT: GroupKind.EXPERT,
}


def processor_groups(
    graph: OpGraph, network: Network, interconnect: InterconnectSpec
) -> tuple[ProcessorGroup, ...]:
    """The data-parallel, tensor-parallel and expert-parallel groups of ``graph``'s
    collectives, then its pipelines, each
    once, in the order the graph first shows them, with their spans on ``network``
    (the topology ``interconnect`` describes)."""
    found = per_graph(graph, "processor groups", lambda: _found(graph))
    data = [set(members) for kind, members in found if kind is GroupKind.DATA]
    levels = _levels(interconnect)
    return tuple(
        ProcessorGroup(kind, members, _span(network, levels, members))
        for kind, members in found
        if kind is not GroupKind.DATA or not any(set(members) < other for other in data)
    )


def _found(graph: OpGraph) -> tuple[tuple[GroupKind, tuple[int, ...]], ...]:
    """Each group of ``graph`` once, data-parallel then pipelines, in the order the graph
    first shows them."""
    found: dict[tuple[GroupKind, tuple[int, ...]], None] = {}
    paths: dict[Tag, list[int]] = {}
    for op in graph.ops:
        if isinstance(op, CommOp) and len(op.participants) > 1:
            kind = _KINDS[op.group]
            found[kind, op.participants] = None
        elif forward_work(op):
            path = paths.setdefault(op.tag, [])
            p = graph.processor[op.op_id]
            if p not in path:
                path.append(p)
    for path in paths.values():
        if len(path) > 1:
            found[GroupKind.PIPELINE, tuple(path)] = None
    return tuple(found)


def _levels(interconnect: InterconnectSpec) -> list[int]:
    """The level of each network dimension, innermost first."""
    out = [0] * len(interconnect.dims or (0,))
    for level, spec in enumerate(interconnect.levels, start=1):
        out += [level] * len(spec.dims)
    return out


def _span(
    network: Network, levels: list[int], members: tuple[int, ...]
) -> tuple[SpannedDimension, ...]:
    """The dimensions in which ``members``' coordinates differ."""
    return tuple(
        SpannedDimension(d, levels[d], dim.topology.value, dim.size)
        for d, dim in enumerate(network.dimensions)
        if len({network.coordinate(p, d) for p in members}) > 1
    )


def described(group: ProcessorGroup) -> str:
    """``data p0-p7 across torus 2 x torus 4 (level 0)``: the console's words for it."""
    members = group.members
    if len(members) > 2 and members == tuple(range(members[0], members[-1] + 1)):
        who = f"p{members[0]}-p{members[-1]}"
    else:
        who = ",".join(f"p{m}" for m in members)
    dims = " x ".join(f"{d.topology} {d.size}" for d in group.span)
    levels = sorted({d.level for d in group.span})
    where = f"level{'s' if len(levels) > 1 else ''} {', '.join(map(str, levels))}"
    return f"{group.kind.value} {who} across {dims} ({where})"


def spanned(
    kind: GroupKind, members: tuple[int, ...], network: Network, interconnect: InterconnectSpec
) -> ProcessorGroup:
    """A group of ``members`` with its span on ``network`` (a plan's group that no
    graph shows whole: a pipeline plan's)."""
    return ProcessorGroup(kind, members, _span(network, _levels(interconnect), members))
