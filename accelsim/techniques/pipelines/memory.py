"""What a pipeline schedule keeps in DRAM, per processor and per channel, against its capacity.

A processor holds the weights, gradients and optimizer state of the layers it
updates, the weight versions it stashes for delayed backward passes, and the
activations it stashes for the mini-batches (or micro-batches) in flight.  Those
must fit in its DRAM channel's ``dram.capacity_gib``: one channel for all
processors with ``dram.sharing: shared``, one each with ``per_processor``.  The
footprint counts only what persists across the schedule, not the tensors an op
reads and writes on the way, nor what the stash buffer keeps on chip, so a
schedule that does not fit certainly needs more memory than there is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from accelsim.config.dram import GIB_BYTES, DramSharing
from accelsim.config.hardware import HardwareSpec
from accelsim.config.run import OptimizerSpec
from accelsim.graph.ops import GemmOp, OpGraph, Phase, Stage, Tag, TensorKey, VectorOp
from accelsim.graph.queries import forward_work, reads_of, writes_of
from accelsim.timing.machine import Machine


@dataclass(frozen=True)
class ProcessorMemory:
    """What one processor keeps in DRAM (bytes).

    Attributes:
        parameter_bytes: Weights, gradients and optimizer state of the layers whose
            updates it runs (each replica of a replicated stage its own copy).
        weight_versions: The most extra weight versions any of its layers keeps.
        weight_stash_bytes: Those versions' bytes (``sum |W_l|`` times versions over
            the layers whose forward runs here).
        activation_stash_bytes: The activations its forward ops stash (and the
            step's input samples, when a backward op reads them), times the
            mini-batches (or micro-batches) each layer keeps in flight.
    """

    parameter_bytes: int
    weight_versions: int
    weight_stash_bytes: int
    activation_stash_bytes: int

    @property
    def footprint_bytes(self) -> int:
        return self.parameter_bytes + self.weight_stash_bytes + self.activation_stash_bytes


@dataclass(frozen=True)
class Channel:
    """One DRAM channel: the processors it serves, their footprint and its capacity."""

    processors: tuple[int, ...]
    footprint_bytes: int
    capacity_bytes: int

    @property
    def fits(self) -> bool:
        return self.footprint_bytes <= self.capacity_bytes


def processor_memory(
    graph: OpGraph,
    delays: Mapping[str, tuple[int, int]],
    optimizer: OptimizerSpec,
    hw: HardwareSpec,
    held_by_readers: bool = False,
) -> list[ProcessorMemory]:
    """Per processor of a pipeline's graph, what it keeps in DRAM.

    Args:
        graph: The schedule's graph of several mini-batches.
        delays: Per layer, the (micro-)batches whose activations it keeps and its
            extra weight versions (``Schedule.layer_delays``).
        optimizer: Its state tensors per parameter count with the parameters.
        hw: Word sizes (optimizer state) and the processors.
        held_by_readers: Whether a layer's tasks may run on different processors
            (LayerPipe's free placement): then each stash is charged to the
            processors that read it in the backward stage, which hold it.

    A layer's stashed activations count on the processor of the op of the forward
    stage that writes them (or, for the step's input, first reads it; its first
    mini-batch's first micro-batch there), times the mini-batches the layer keeps in
    flight; its weight versions on every processor that runs its forward work; its
    parameters on every processor that updates it.  With ``held_by_readers`` a
    stashed activation counts instead on every processor whose backward-stage ops of
    the first mini-batch read it, times the mini-batches the reading layer keeps in
    flight, and a layer's weight versions also on the processors of its dX GEMMs
    (which read the version its forward used).
    """
    processors = 1 + max(graph.processor)
    work = [
        op for op in graph.ops if op.stage is Stage.FORWARD and isinstance(op, (GemmOp, VectorOp))
    ]
    # Every processor's first mini-batch (a replica of a stage starts later).
    first = [1 + max(op.tag.mini_batch for op in graph.ops)] * processors
    for op in work:
        p = graph.processor[op.op_id]
        first[p] = min(first[p], op.tag.mini_batch)
    homes: dict[str, set[int]] = {}
    for op in work:
        if forward_work(op) and op.tag == Tag(mini_batch=first[graph.processor[op.op_id]]):
            homes.setdefault(op.layer, set()).add(graph.processor[op.op_id])
    if held_by_readers:
        stash = _held_by_readers(graph, delays)
        for reader in graph.ops:
            dx = isinstance(reader, GemmOp) and reader.phase is Phase.BWD_INPUT
            if dx and reader.tag == Tag(mini_batch=0):
                homes.setdefault(reader.layer, set()).add(graph.processor[reader.op_id])
    else:
        stash = _held_by_writers(graph, delays, work, first)
    updaters: dict[str, set[int]] = {}
    for update in graph.ops:
        if update.phase is Phase.UPDATE and isinstance(update, VectorOp):
            updaters.setdefault(update.layer, set()).add(graph.processor[update.op_id])
    state_word = hw.word_bytes.optimizer_state * optimizer.kind.state_tensors
    state_word += optimizer.master_weights.word_bytes
    weight_bytes = [0] * processors
    versions = [0] * processors
    parameters = [0] * processors
    for parameter in graph.parameters:
        kept = delays[parameter.layer][1]
        for p in homes.get(parameter.layer, ()):
            weight_bytes[p] += parameter.weight.bytes * kept
            versions[p] = max(versions[p], kept)
        held = parameter.weight.bytes + parameter.gradient.bytes
        held += parameter.weight.elements * state_word
        for p in updaters.get(parameter.layer, ()):
            parameters[p] += held
    return [
        ProcessorMemory(parameters[p], versions[p], weight_bytes[p], stash[p])
        for p in range(processors)
    ]


def _held_by_writers(
    graph: OpGraph,
    delays: Mapping[str, tuple[int, int]],
    work: list[GemmOp | VectorOp],
    first: list[int],
) -> list[int]:
    """Each processor's stashed activation bytes, a stash on the processor of the
    forward op that writes it (or first reads a step input) times that layer's
    (micro-)batches in flight."""
    # The step's inputs (the samples) are stashed too when a backward op reads them.
    made = {access.tensor.key for op in graph.ops for access in writes_of(op)}
    stash = [0] * (1 + max(graph.processor))
    counted: set[TensorKey] = set()
    for op in work:
        p = graph.processor[op.op_id]
        if op.tag != Tag(mini_batch=first[p], micro_batch=0):
            continue
        inputs = [a for a in reads_of(op) if a.tensor.key not in made]
        for access in (*writes_of(op), *inputs):
            key = access.tensor.key
            if key in graph.stashed and key not in counted:
                counted.add(key)
                stash[p] += access.tensor.bytes * delays[op.layer][0]
    return stash


def _held_by_readers(graph: OpGraph, delays: Mapping[str, tuple[int, int]]) -> list[int]:
    """Each processor's stashed activation bytes, a stash on every processor whose
    backward-stage ops of the first mini-batch read it, times the reading layer's
    (micro-)batches in flight."""
    stash = [0] * (1 + max(graph.processor))
    counted: set[tuple[TensorKey, int]] = set()
    for op in graph.ops:
        if op.stage is not Stage.BACKWARD or op.tag != Tag(mini_batch=0):
            continue
        if not isinstance(op, (GemmOp, VectorOp)):
            continue
        p = graph.processor[op.op_id]
        for access in reads_of(op):
            key = access.tensor.key
            if key in graph.stashed and (key, p) not in counted:
                counted.add((key, p))
                stash[p] += access.tensor.bytes * delays[op.layer][0]
    return stash


def channels(memory: list[ProcessorMemory], machine: Machine) -> list[Channel]:
    """The DRAM channels of ``machine`` and what each must hold: one for every processor
    with shared DRAM, one per processor otherwise."""
    capacity = machine.dram_capacity_bytes
    if machine.hardware.dram.sharing is DramSharing.SHARED:
        total = sum(m.footprint_bytes for m in memory)
        return [Channel(tuple(range(len(memory))), total, capacity)]
    return [Channel((p,), m.footprint_bytes, capacity) for p, m in enumerate(memory)]


def overflow(memory: list[ProcessorMemory], machine: Machine) -> str | None:
    """What does not fit, in words (the fullest channel that overflows), or None."""
    over = [c for c in channels(memory, machine) if not c.fits]
    if not over:
        return None
    worst = max(over, key=lambda c: c.footprint_bytes)
    parts = [memory[p] for p in worst.processors]
    held = (
        f"weights, gradients and optimizer state {_size(sum(m.parameter_bytes for m in parts))},"
        f" weight versions {_size(sum(m.weight_stash_bytes for m in parts))},"
        f" stashed activations {_size(sum(m.activation_stash_bytes for m in parts))}"
    )
    if len(worst.processors) == 1:
        who = f"processor {worst.processors[0]} needs"
    else:
        who = f"processors 0-{worst.processors[-1]}, sharing one channel, need"
    return (
        f"{who} {_size(worst.footprint_bytes)} of DRAM ({held}), more than the"
        f" {_size(worst.capacity_bytes)} of its channel"
    )


def _size(n_bytes: int) -> str:
    """A size in GiB, or in MiB below one GiB."""
    if n_bytes >= GIB_BYTES:
        return f"{n_bytes / GIB_BYTES:,.2f} GiB"
    return f"{n_bytes / 2**20:,.1f} MiB"
