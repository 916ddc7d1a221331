"""The hardware file's ``mapping`` section (:class:`MappingSpec`): how GEMMs are laid
onto the arrays, and the mapper's settings (``mapping.search``, ``mapping.objective``):
what :mod:`accelsim.timing.mapper` searches and what it minimises."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

from pydantic import Field

from accelsim.config.base import Convention, Spec


class MappingSearch(str, Enum):
    """Whether each GEMM's mapping is searched.

    ``none``: every GEMM as the mapping section fixes it (``array.dataflow``, the
    orientation ``mapping.orientation`` picks, the stream blocking); ``per_layer``:
    each GEMM of each layer takes the cheapest of the mappings the hardware offers
    (every dataflow of ``array.dataflows``, the orientations ``mapping.orientation``
    allows, both stream blockings unless ``mapping.stream_blocking`` names one, and
    for a grouped convolution's GEMMs the vector unit).
    """

    NONE = "none"
    PER_LAYER = "per_layer"


class MappingObjective(str, Enum):
    """What the mapper minimises per GEMM: its lone-op time, its dynamic energy, or
    their product (energy-delay)."""

    TIME = "time"
    ENERGY = "energy"
    EDP = "edp"


class Orientation(str, Enum):
    """Which of a GEMM and its transpose (``(AB)^T = B^T A^T``) the mapping runs."""

    AS_GIVEN = "as_given"
    BEST = "best"


class StreamBlocking(str, Enum):
    """How weight and input stationary GEMMs cut their streamed dimension into chunks."""

    PSUMS = "psums"
    FEWEST_READS = "fewest_reads"


class MappingSpec(Spec):
    """How GEMMs are laid onto the arrays, as the chip's compiler would."""

    orientation: Annotated[Orientation, Field(strict=False)] = Field(
        default=Orientation.AS_GIVEN,
        description="as_given: C[m x n] = A[m x k] . B[k x n] as the graph gives it; best:"
        " that or its transpose C^T = B^T . A^T (m and n, A and B swapped), whichever a"
        " lone op would finish first (compute against DRAM time); a GEMM with a fold mask"
        " keeps its given orientation.",
    )
    stream_blocking: Annotated[StreamBlocking | None, Field(strict=False)] = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="How ws and is cut the streamed dimension (m for ws, n for is) into"
        " chunks when the run's timing.psums is chunk. psums: only as their partial sums"
        " need to fit in half the ofmap buffer, so a streamed operand larger than half its"
        " own buffer is read from DRAM once per column fold; fewest_reads: also into"
        " chunks whose slice of the streamed operand fits half its buffer, whenever that"
        " reads fewer bytes (the streamed operand once, the stationary one once per chunk"
        " unless it fits whole), as a compiler blocks a matmul; null: by the run's"
        " timing.convention, fewest_reads for accelsim and psums for scalesim (SCALE-Sim"
        " 3.0.0 re-reads).",
    )

    search: Annotated[MappingSearch, Field(strict=False)] = Field(
        default=MappingSearch.NONE,
        exclude_if=lambda v: v is MappingSearch.NONE,
        description="none: every GEMM mapped as the fields above fix it; per_layer: each"
        " GEMM takes the cheapest (by objective) of every dataflow of array.dataflows, the"
        " orientations orientation allows, both stream blockings unless stream_blocking"
        " names one, and for a grouped or depthwise convolution's GEMMs the vector unit"
        " (its MACs as vector operations at the unit's lanes); each costed in closed form"
        " as a lone op.",
    )
    objective: Annotated[MappingObjective, Field(strict=False)] = Field(
        default=MappingObjective.TIME,
        exclude_if=lambda v: v is MappingObjective.TIME,
        description="What search: per_layer minimises per GEMM: time (a lone op's cycles:"
        " compute or DRAM transfer, whichever is longer, plus its fixed cost), energy (its"
        " dynamic energy: MACs or vector operations, SRAM and DRAM accesses at the energy"
        " table's prices) or edp (their product).",
    )

    def blocks_for_fewest_reads(self, convention: Convention) -> bool:
        """Whether GEMMs are blocked for the fewest reads under ``convention``
        (``stream_blocking``, or its default for the convention when null)."""
        if self.stream_blocking is None:
            return convention is Convention.ACCELSIM
        return self.stream_blocking is StreamBlocking.FEWEST_READS
