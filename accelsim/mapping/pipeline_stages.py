"""The cut of a layer table into pipeline stages and model chunks (``run.parallel.pipeline``).

A pipeline of ``p`` stages with ``v`` virtual stages (``v = 1`` but for the
interleaved schedule) cuts the layers into ``p v`` model chunks of consecutive
layers, balanced by the table's repeated blocks (each copy of a ``repeat`` entry,
:class:`~accelsim.workload.layer_base.Block`) as Megatron-LM cuts a transformer: the
blocks evenly, the layers before the first block (the embeddings) with the first
chunk and those after the last (the final norm, the LM head, the loss) with the
last.  A layer between blocks that belongs to none goes with the block before it.
When ``p v`` does not divide the blocks, the first ``blocks mod p v`` chunks take
one block more (our choice; Megatron-LM asks for a divisor).  Chunk ``g`` runs on
stage ``g mod p``: stage ``i`` holds chunks ``i, i + p, ..., i + (v - 1) p``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from accelsim.lowering.shapes import LayerInfo
from accelsim.workload.layer_base import Block


@dataclass(frozen=True)
class PipelineCut:
    """The layers of each model chunk, in order, on ``stages`` stages of
    ``virtual_stages`` chunks each, and the blocks each chunk has."""

    stages: int
    virtual_stages: int
    chunks: tuple[tuple[str, ...], ...]
    blocks: tuple[int, ...]

    def chunks_of_stage(self, stage: int) -> tuple[int, ...]:
        """The chunks stage ``stage`` holds, in order."""
        return tuple(range(stage, self.stages * self.virtual_stages, self.stages))

    def chunk_of_layer(self) -> dict[str, int]:
        """The chunk of every layer, by the layer's name."""
        return {name: g for g, names in enumerate(self.chunks) for name in names}


T = TypeVar("T")

KEPT_CUTS = 256
"""Cuts (and tables' block lists) a process keeps, by the identity of the layer
shapes: a plan search's candidates share them, and check and count each cut again."""

_kept: OrderedDict[tuple[int, int, int], tuple[Sequence[LayerInfo], object]] = OrderedDict()


def _once(infos: Sequence[LayerInfo], stages: int, virtual_stages: int, make: Callable[[], T]) -> T:
    """``make()`` once per layer shapes (a tuple, by identity, held so the identity
    stays unique) and numbers of stages and chunks a stage."""
    if not isinstance(infos, tuple):
        return make()
    key = (id(infos), stages, virtual_stages)
    known = _kept.get(key)
    if known is None or known[0] is not infos:
        known = _kept[key] = (infos, make())
        if len(_kept) > KEPT_CUTS:
            _kept.popitem(last=False)
    made: T = known[1]  # type: ignore[assignment]
    return made


def _units(infos: Sequence[LayerInfo]) -> list[Block]:
    """The table's block copies in the order their first layers come (callers must not
    change the list)."""
    return _once(infos, 0, 0, lambda: _blocks(infos))


def _blocks(infos: Sequence[LayerInfo]) -> list[Block]:
    seen: dict[tuple[str, int], Block] = {}
    for info in infos:
        block = info.layer.block
        if block is not None:
            seen.setdefault((block.repeat, block.index), block)
    return list(seen.values())


def cut_problem(infos: Sequence[LayerInfo], stages: int, virtual_stages: int) -> str | None:
    """Why the layers cannot be cut into ``stages x virtual_stages`` chunks (None: they
    can): each chunk needs a block of its own."""
    blocks = len(_units(infos))
    chunks = stages * virtual_stages
    if blocks >= chunks:
        return None
    return (
        f"needs a repeated block for each of its {chunks} model chunks (pipeline x"
        f" virtual_stages); the workload has {blocks}"
    )


def cut_stages(infos: Sequence[LayerInfo], stages: int, virtual_stages: int) -> PipelineCut:
    """The layers cut into ``stages x virtual_stages`` chunks (the module's rules);
    :func:`cut_problem` must have found nothing."""
    return _once(infos, stages, virtual_stages, lambda: _cut(infos, stages, virtual_stages))


def _cut(infos: Sequence[LayerInfo], stages: int, virtual_stages: int) -> PipelineCut:
    units = _units(infos)
    count = stages * virtual_stages
    base, extra = divmod(len(units), count)
    sizes = [base + (g < extra) for g in range(count)]
    first_unit = [sum(sizes[:g]) for g in range(count)]
    chunk_of_unit = {
        (u.repeat, u.index): g
        for g in range(count)
        for u in units[first_unit[g] : first_unit[g] + sizes[g]]
    }
    chunks: list[list[str]] = [[] for _ in range(count)]
    current = 0  # the layers before the first block: the first chunk's
    for info in infos:
        block = info.layer.block
        if block is not None:
            current = chunk_of_unit[(block.repeat, block.index)]
        chunks[current].append(info.layer.name)  # after the last block: the last chunk's
    return PipelineCut(stages, virtual_stages, tuple(tuple(c) for c in chunks), tuple(sizes))
