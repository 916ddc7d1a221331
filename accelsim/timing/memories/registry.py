"""The registered DRAM models, by the name ``dram.model`` gives, and the builders of a
processor's memory and link from the hardware spec.

:class:`~accelsim.timing.machine.Machine` builds every memory of a run through
:func:`dram_memory` and :func:`link_memory`, once; nothing else builds one.
"""

from __future__ import annotations

from collections.abc import Callable

from accelsim.config.dram import DramSpec
from accelsim.config.interconnect import InterconnectSpec
from accelsim.timing.memories.fifo import Fifo
from accelsim.timing.memories.interleaved import Interleaved
from accelsim.timing.memories.row_buffer import RowBuffer
from accelsim.timing.memory import Memory

MODELS: dict[str, Callable[[DramSpec], Memory]] = {
    Fifo.name: Fifo.of,
    Interleaved.name: Interleaved.of,
    RowBuffer.name: RowBuffer.of,
}
"""What builds each model from its spec, by name (the ``dram.model`` values); each
model's class carries its ``code``, by which the compiled engine dispatches to its
kernel (:mod:`.compiled`)."""


def dram_memory(spec: DramSpec) -> Memory:
    """The memory ``spec`` describes, of the model it names."""
    return MODELS[spec.model](spec)


def link_memory(spec: InterconnectSpec) -> Fifo:
    """A processor's outgoing interconnect link: a first-come-first-served channel."""
    return Fifo.link(spec)
