"""The ``dram`` section of a hardware file: what every memory model has, and each
model's own spec.

``dram.model`` picks the model, one spec per model (a discriminated union,
:data:`DramModelSpec`); the keys every model shares are :class:`DramSpec`'s.  A file
without ``model`` is ``fifo`` with one channel and ``interleaved`` with several, and
neither writes ``model`` in a dump, so such a file's sweep identity and resolved
configuration do not depend on whether it names its model.  A model whose name
contradicts ``channels`` is refused at ``dram.model``.  How each model
times transfers is :mod:`accelsim.timing.memories`.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from accelsim.config.base import Bandwidth, NonNegativeInt, RuleViolation, Spec

MAX_DRAM_CHANNELS = 256
"""Most DRAM channels per memory (eight HBM3 stacks of 32 pseudo-channels): every
DRAM transfer is booked on each of them."""


class DramSharing(str, Enum):
    """Whether the processors share one DRAM channel or each has its own."""

    SHARED = "shared"
    PER_PROCESSOR = "per_processor"


class DramArbitration(str, Enum):
    """How a DRAM memory orders the transfers of different streams."""

    FCFS = "fcfs"
    PRIORITY = "priority"


GIB_BYTES = 2**30
DEFAULT_DRAM_CAPACITY_GIB = 16.0
"""16 GiB per channel: what a 128-bit LPDDR5 interface of the default's bandwidth
class carries (NVIDIA Jetson Orin NX 16GB: 128-bit LPDDR5, 102.4 GB/s, 16 GB)."""


class DramSpec(Spec):
    """Off-chip memory: what every model has (each model's spec adds its own keys). Use
    ``.inf`` for ideal bandwidth.

    ``sharing`` is ``shared`` (default: one memory for all processors, whose
    transfers queue on it) or ``per_processor`` (each processor has its own
    local memory, as in a multi-chip system).  ``bandwidth_bytes_per_cycle``,
    ``latency_cycles`` and ``capacity_gib`` describe one channel, so with
    ``per_processor`` the aggregate bandwidth and capacity are ``processors``
    times the configured ones.  ``arbitration`` orders the transfers of different
    streams (:mod:`accelsim.timing.memory`).  ``model`` names how a memory
    times its transfers (:mod:`accelsim.timing.memories`); ``channels`` makes each
    memory that many independent channels of the bandwidth, latency and capacity
    above, which the models that have several interleave transfers over.
    """

    model: str = Field(
        description="The memory model that times its transfers, each with a spec of its own"
        " (DramModelSpec). Left out, it is fifo with channels 1 and interleaved with"
        " channels above 1."
    )

    bandwidth_bytes_per_cycle: Bandwidth = Field(
        description="Bandwidth of one DRAM channel; .inf for an ideal memory."
    )
    latency_cycles: NonNegativeInt = Field(
        default=0, description="Latency added to every DRAM transfer."
    )
    sharing: Annotated[DramSharing, Field(strict=False)] = Field(
        default=DramSharing.SHARED,
        description="shared: one channel for all processors, whose transfers queue on it;"
        " per_processor: each processor has its own channel with this bandwidth and latency"
        " (local memory of a multi-chip system).  Bytes and dynamic energy are the same"
        " either way; contention, and so cycles and leakage, change.",
    )
    capacity_gib: Annotated[float, Field(gt=0, le=2**30, allow_inf_nan=False)] = Field(
        default=DEFAULT_DRAM_CAPACITY_GIB,
        description="Capacity of one channel in GiB: what the processors it serves may keep"
        " in DRAM (a pipeline schedule's weights, optimizer state and stashes must fit).",
    )
    burst_bytes: Annotated[int, Field(ge=1, le=4096, strict=True)] = Field(
        default=64,
        description="Bytes of one DRAM burst, the least a read or write moves: a gather"
        " of scattered elements of a tensor kept in DRAM (approximate dropout's row"
        " patterns on a weight's contiguous dimension) moves every burst it touches."
        " Our choice: 64 B, a common DDR4/DDR5/LPDDR and HBM access granularity.",
    )

    read_bandwidth_bytes_per_cycle: Bandwidth | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="Bandwidth of one channel's reads (null: bandwidth_bytes_per_cycle).",
    )
    write_bandwidth_bytes_per_cycle: Bandwidth | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="Bandwidth of one channel's writes (null: bandwidth_bytes_per_cycle).",
    )
    channels: Annotated[int, Field(gt=0, le=MAX_DRAM_CHANNELS)] = Field(
        default=1,
        description="Independent channels per memory (HBM pseudo-channels), each of the"
        " bandwidth, latency and capacity above: 1 for fifo, above 1 for interleaved (which"
        " deals transfers out over them in 256-byte blocks). Without model, 1 means fifo"
        " and above 1 interleaved.",
    )
    arbitration: Annotated[
        DramArbitration,
        Field(
            strict=False,
            description="fcfs: transfers are served in the order they are requested, whatever"
            " they move; priority: background streams (the optimizer update's) are booked a"
            " slice at a time, each when the previous one has left the memory, so the other"
            " streams' transfers requested meanwhile go first.",
        ),
    ] = DramArbitration.FCFS

    @property
    def capacity_bytes(self) -> int:
        return int(self.capacity_gib * GIB_BYTES)

    @property
    def read_bytes_per_cycle(self) -> float:
        """The reads' bandwidth."""
        read = self.read_bandwidth_bytes_per_cycle
        return self.bandwidth_bytes_per_cycle if read is None else read

    @property
    def write_bytes_per_cycle(self) -> float:
        """The writes' bandwidth."""
        write = self.write_bandwidth_bytes_per_cycle
        return self.bandwidth_bytes_per_cycle if write is None else write

    def parameters(self) -> dict[str, int | float]:
        """The keys its model adds to the common ones, by name (none for fifo and
        interleaved)."""
        common = DramSpec.model_fields
        return {k: getattr(self, k) for k in type(self).model_fields if k not in common}


class FifoDramSpec(DramSpec):
    """``model: fifo``: one first-come-first-served channel."""

    model: Literal["fifo"] = Field(
        default="fifo",
        exclude=True,  # implied by channels: 1, which it must have
        description="fifo: one first-come-first-served channel (channels must be 1); a dram"
        " without model and with channels 1 is fifo.",
    )

    @model_validator(mode="after")
    def _one_channel(self) -> FifoDramSpec:
        if self.channels != 1:
            raise RuleViolation(
                "model",
                f"fifo is one channel, but channels is {self.channels}: use interleaved"
                " (or leave model out)",
                self.model,
            )
        return self


class InterleavedDramSpec(DramSpec):
    """``model: interleaved``: ``channels`` first-come-first-served channels, each
    transfer dealt out over them in 256-byte blocks."""

    model: Literal["interleaved"] = Field(
        default="interleaved",
        exclude=True,  # implied by channels above 1, which it must have
        description="interleaved: channels (above 1) first-come-first-served channels, each"
        " transfer dealt out over them in 256-byte blocks; a dram without model and with"
        " channels above 1 is interleaved.",
    )

    @model_validator(mode="after")
    def _several_channels(self) -> InterleavedDramSpec:
        if self.channels < 2:
            raise RuleViolation(
                "model",
                "interleaved deals transfers out over several channels, but channels is 1:"
                " set channels above 1 (one channel is fifo)",
                self.model,
            )
        return self


class RowBufferDramSpec(DramSpec):
    """``model: row_buffer``: ``channels`` channels (one or more), transfers dealt out
    over them in 256-byte blocks, each channel with one open row
    (:mod:`accelsim.timing.memories.row_buffer`)."""

    model: Literal["row_buffer"] = Field(
        default="row_buffer",
        description="row_buffer: channels (one or more) interleaved in 256-byte blocks, each"
        " with one open row; a channel's share of a transfer of another stream class or"
        " direction than its last opens a new row, and so does each row boundary it"
        " crosses (a miss, holding the channel miss_cycles).",
    )
    row_bytes: Annotated[int, Field(gt=0, le=2**30, strict=True)] = Field(
        default=2048,
        description="Bytes of one channel's row (page): how far the bytes of one stream"
        " and direction run on a channel before they open the next row. Our choice:"
        " 2 KiB, the size of a DRAM page (1-2 KiB per device or HBM pseudo-channel).",
    )
    miss_cycles: Annotated[int, Field(ge=0, le=2**20, strict=True)] = Field(
        default=30,
        description="Cycles a channel is held to open a row (precharge and activate)"
        " before the bytes that missed. Our choice: 30, about tRP + tRCD of DDR4 and HBM"
        " (14-15 ns each) at the default 1 GHz clock.",
    )


def dram_model_of(value: Any) -> str:
    """The model a ``dram`` mapping names, or the one it implies without ``model``:
    interleaved when ``channels`` is above 1, fifo otherwise (and for anything that is
    no mapping, which fifo's validation then refuses)."""
    if isinstance(value, DramSpec):
        return value.model
    if not isinstance(value, dict):
        return "fifo"
    if "model" in value:
        return str(value["model"])
    channels = value.get("channels", 1)
    several = isinstance(channels, int) and not isinstance(channels, bool) and channels > 1
    return "interleaved" if several else "fifo"


DramModelSpec = Annotated[
    Annotated[FifoDramSpec, Tag("fifo")]
    | Annotated[InterleavedDramSpec, Tag("interleaved")]
    | Annotated[RowBufferDramSpec, Tag("row_buffer")],
    Discriminator(dram_model_of),
]
"""A ``dram`` section: the spec of the model it names (or implies, :func:`dram_model_of`)."""
