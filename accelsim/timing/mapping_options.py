"""What the mapper (:mod:`accelsim.timing.mapper`) searches and how it prices a
candidate: the hardware's ``mapping.search`` settings as the cost model reads them,
built once per run (:meth:`SearchOptions.of`)."""

from __future__ import annotations

from dataclasses import dataclass

from accelsim.config.base import Convention
from accelsim.config.energy import EnergyTable
from accelsim.config.enums import VectorClass
from accelsim.config.hardware import HardwareSpec, Orientation
from accelsim.config.mapping_search import MappingObjective, MappingSearch
from accelsim.mapping.dataflow import DATAFLOW_CODE
from accelsim.units import BITS_PER_BYTE


@dataclass(frozen=True)
class Prices:
    """Dynamic energy per event, pJ, from the energy table: what the ``energy`` and
    ``edp`` objectives weigh a candidate's counts by (the energy model's prices of the
    same counts, leakage aside)."""

    mac_pj: float
    vector_op_pj: float
    sram_read_pj_per_byte: tuple[float, float, float]  # ifmap, filter, ofmap buffer
    sram_write_pj_per_byte: tuple[float, float, float]
    dram_read_pj_per_byte: float
    dram_write_pj_per_byte: float

    @classmethod
    def of(cls, table: EnergyTable, hw: HardwareSpec) -> Prices:
        """The prices ``table`` gives the main array, its buffers, the vector unit and
        DRAM of ``hw``."""
        kib = (hw.buffers.ifmap_kib, hw.buffers.filter_kib, hw.buffers.ofmap_kib)
        sram = table.sram
        return cls(
            mac_pj=table.mac_pj[hw.array.precision],
            vector_op_pj=table.vector_op_pj[hw.vector_unit.precision],
            sram_read_pj_per_byte=tuple(sram.pj_per_byte(c, write=False) for c in kib),  # type: ignore[arg-type]
            sram_write_pj_per_byte=tuple(sram.pj_per_byte(c, write=True) for c in kib),  # type: ignore[arg-type]
            dram_read_pj_per_byte=table.dram_read_pj_per_bit * BITS_PER_BYTE,
            dram_write_pj_per_byte=table.dram_write_pj_per_bit * BITS_PER_BYTE,
        )


@dataclass(frozen=True)
class SearchOptions:
    """The mappings ``mapping.search: per_layer`` chooses among, per GEMM of the main
    array, and what it minimises.

    Attributes:
        dataflows: The dataflows' codes (:data:`~accelsim.mapping.dataflow.DATAFLOW_CODE`),
            ``array.dataflow`` first.
        transposes: Whether a GEMM's transpose is a candidate (``mapping.orientation:
            best``).
        blockings: The stream blockings (true: fewest reads), the run's default first.
        objective: What is minimised.
        prices: The energy table's prices (None only for the ``time`` objective).
        vector_overhead_cycles: A GEMM's fixed cost on the vector unit (that of an
            ``elementwise`` vector op: multiply-adds, one output element per lane).
        vector_stream_bytes_per_cycle: ``vector_unit.stream_bytes_per_cycle``.
    """

    dataflows: tuple[int, ...]
    transposes: bool
    blockings: tuple[bool, ...]
    objective: MappingObjective
    prices: Prices | None
    vector_overhead_cycles: int
    vector_stream_bytes_per_cycle: float | None

    @classmethod
    def of(
        cls, hw: HardwareSpec, convention: Convention, energy: EnergyTable | None
    ) -> SearchOptions | None:
        """The search ``hw``'s mapping section asks for (None without one), under the
        run's ``convention`` (the default stream blocking) with ``energy``'s prices.

        Raises:
            ValueError: if the objective weighs energy and ``energy`` is None.
        """
        mapping = hw.mapping
        if mapping.search is MappingSearch.NONE:
            return None
        default = mapping.blocks_for_fewest_reads(convention)
        blockings = (default,) if mapping.stream_blocking is not None else (default, not default)
        if mapping.objective is not MappingObjective.TIME and energy is None:
            raise ValueError(f"the {mapping.objective.value} objective needs an energy table")
        unit = hw.vector_unit
        return cls(
            dataflows=tuple(DATAFLOW_CODE[d] for d in hw.array.offered_dataflows),
            transposes=mapping.orientation is Orientation.BEST,
            blockings=blockings,
            objective=mapping.objective,
            prices=None if energy is None else Prices.of(energy, hw),
            vector_overhead_cycles=unit.overhead_cycles(
                VectorClass.ELEMENTWISE, hw.timing.op_overhead_cycles
            ),
            vector_stream_bytes_per_cycle=unit.stream_bytes_per_cycle,
        )
