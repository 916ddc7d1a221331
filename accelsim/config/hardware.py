"""Hardware spec: processors, systolic array, buffers, vector unit, DRAM, interconnect.

Loaded from ``configs/hardware/*.yaml``.  Every processor is identical; the
buffer sizes are per processor and each buffer is double-buffered, so half of
it holds the tile being computed and half the tile being fetched.  DRAM
(:mod:`accelsim.config.dram`) is one memory shared by all processors or, with
``dram.sharing: per_processor``, one memory per processor.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any

from pydantic import Field, model_validator

from accelsim.config.area import PowerSpec, TechnologyNm
from accelsim.config.base import (
    PRECISION_BYTES,
    Dataflow,
    DataflowField,
    Kib,
    Name,
    NonNegativeInt,
    NonNegativeKib,
    PositiveInt,
    Precision,
    PrecisionField,
    RuleViolation,
    Spec,
)
from accelsim.config.calibrated import CalibratedUnder, flat, record_problem
from accelsim.config.dram import DramModelSpec
from accelsim.config.enums import VectorClass
from accelsim.config.interconnect import InterconnectSpec
from accelsim.config.mapping_search import MappingSpec as MappingSpec
from accelsim.config.mapping_search import Orientation as Orientation
from accelsim.config.mapping_search import StreamBlocking as StreamBlocking
from accelsim.config.rates import Rates, rate_mapping
from accelsim.units import kib_to_bytes

MAX_PROCESSORS = 8192
"""Most processors (a pipeline plan's: it simulates one tensor-parallel group's)."""
MAX_COPIED_PROCESSORS = 1024
"""Most processors of a run that copies the step for each (all but a pipeline plan)."""
MAX_ARRAYS = 1024
"""Most systolic arrays of one processor."""
ArrayDim = Annotated[int, Field(gt=0, le=2**16)]
Dataflows = Annotated[tuple[DataflowField, ...], Field(strict=False, min_length=1, max_length=3)]


class ArraySpec(Spec):
    """The systolic arrays of one processor: ``count`` identical arrays that share
    the processor's operand buffers and DRAM, every GEMM's output tiles dealt out
    among them (:mod:`accelsim.mapping.arrays`)."""

    rows: ArrayDim = Field(description="PE rows of the systolic array.")
    cols: ArrayDim = Field(description="PE columns of the systolic array.")
    dataflow: DataflowField = Field(
        description="Which operand stays in the PEs: os (outputs), ws (weights) or is (inputs)."
    )
    dataflows: Dataflows | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="The dataflows the arrays can run, among which mapping.search: per_layer"
        " picks per GEMM; it must hold dataflow, which every GEMM keeps without a search (and"
        " a GEMM the search cannot move: one with a fold mask or a resident tile stream)."
        " null: dataflow alone.",
    )
    precision: PrecisionField = Field(
        default=Precision.BF16,
        description="MAC precision every GEMM runs at (the energy table's mac_pj key);"
        " a run's precision.gemm sets it to another of rates.",
    )
    rates: Rates | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="The precisions the PEs run and the MACs each PE does per cycle at"
        " each, along the reduction dimension K ({bf16: 1, fp8: 2}: a PE row holds two K"
        " elements at fp8); it must hold precision. null: precision alone, at 1.",
    )
    rates_source: str = Field(
        default="",
        exclude_if=lambda v: v == "",
        description="Where rates come from (a datasheet, a paper, our choice); shown"
        " beside the run's precision.",
    )
    count: Annotated[int, Field(gt=0, le=MAX_ARRAYS)] = Field(
        default=1,
        exclude_if=lambda v: v == 1,
        description="Identical arrays in each processor. A GEMM's output tiles are dealt"
        " out among them (column folds round-robin, or the rows the array streams, or"
        " for output stationary the row folds, whichever finishes first) and they run"
        " it together from the shared buffers.",
    )

    load_rows_per_cycle: Annotated[int, Field(gt=0, le=2**16)] = Field(
        default=1,
        exclude_if=lambda v: v == 1,
        description="Rows of the next stationary tile an array loads per cycle while a fold"
        " streams (output stationary: rows of outputs it drains); with timing.fold_overlap"
        " a later fold lasts max(T, ceil(rows / this)) cycles, plus tile_swap_cycles.",
    )

    tile_swap_cycles: Annotated[int, Field(ge=0, le=2**16)] = Field(
        default=0,
        exclude_if=lambda v: v == 0,
        description="Cycles an array takes, with timing.fold_overlap, to swap from one"
        " fold's stationary tile to the next once loaded (output stationary: to start"
        " the next tile's outputs), which neither the stream nor the load hides; added"
        " to every later fold.",
    )

    pe_scratchpad_bytes: Annotated[int, Field(ge=0, le=2**20)] = Field(
        default=0,
        exclude_if=lambda v: v == 0,
        description="Bytes of local storage each PE holds beyond its two operand registers"
        " and its accumulator (scratchpads or register files, as a row-stationary PE"
        " keeps); counted in the area model only, not in the timing or energy.",
    )

    @model_validator(mode="after")
    def _check_dataflows(self) -> ArraySpec:
        offered = self.dataflows
        if offered is not None:
            if self.dataflow not in offered:
                raise RuleViolation(
                    "dataflows", f"must hold dataflow ({self.dataflow.value})", _names(offered)
                )
            if len(set(offered)) < len(offered):
                raise RuleViolation("dataflows", "names a dataflow twice", _names(offered))
        return self

    @model_validator(mode="after")
    def _check_rates(self) -> ArraySpec:
        if self.rates is not None and self.precision not in self.precision_rates:
            shown = rate_mapping(self.rates)
            raise RuleViolation("rates", f"must hold precision ({self.precision.value})", shown)
        return self

    @property
    def precision_rates(self) -> dict[Precision, int]:
        """MACs per PE per cycle at each precision the PEs run (``precision`` at 1
        when ``rates`` is not given)."""
        return {self.precision: 1} if self.rates is None else dict(self.rates)

    @property
    def k_per_pe(self) -> int:
        """MACs each PE does per cycle at ``precision``: the elements of the reduction
        dimension K one PE row (weight and input stationary) or one stream step
        (output stationary) holds."""
        return self.precision_rates[self.precision]

    @property
    def widest_precision(self) -> Precision:
        """The widest precision the PEs run (the first such in ``rates``): what a PE's
        multiplier and registers are sized for."""
        rates = self.precision_rates
        return max(rates, key=lambda p: PRECISION_BYTES[p])

    @property
    def offered_dataflows(self) -> tuple[Dataflow, ...]:
        """The dataflows a search chooses among, ``dataflow`` first."""
        rest = [d for d in self.dataflows or () if d is not self.dataflow]
        return (self.dataflow, *rest)

    @property
    def pes(self) -> int:
        """Processing elements of all ``count`` arrays."""
        return self.rows * self.cols * self.count

    @property
    def peak_macs_per_cycle(self) -> int:
        """MACs all ``count`` arrays can do per cycle at ``precision``."""
        return self.pes * self.k_per_pe

    @property
    def label(self) -> str:
        """``<rows>x<cols> <dataflow>``, after ``<count> x`` for more than one array."""
        arrays = f"{self.count} x " if self.count > 1 else ""
        return f"{arrays}{self.rows}x{self.cols} {self.dataflow.value}"


def _names(dataflows: tuple[Dataflow, ...]) -> list[str]:
    return [d.value for d in dataflows]


class BufferSpec(Spec):
    """Per-operand on-chip SRAM of one processor, in KiB, each double-buffered.

    ``stash_kib`` is optional on-chip capacity that keeps activations saved for
    the backward pass out of DRAM (0 means every stashed tensor goes to DRAM).
    """

    ifmap_kib: Kib = Field(
        description="Input-operand SRAM per processor, double-buffered; holds at least one"
        " rows x cols tile of its widest word."
    )
    filter_kib: Kib = Field(
        description="Weight-operand (stationary under ws) SRAM per processor, double-buffered;"
        " holds at least one rows x cols tile of its widest word."
    )
    ofmap_kib: Kib = Field(
        description="Output and partial-sum SRAM per processor, double-buffered; vector ops"
        " read and write through it."
    )
    stash_kib: NonNegativeKib = Field(
        default=0.0,
        description="On-chip memory for activations saved for the backward pass (0: every"
        " stashed tensor goes to DRAM).",
    )

    @property
    def ifmap_bytes(self) -> int:
        return kib_to_bytes(self.ifmap_kib)

    @property
    def filter_bytes(self) -> int:
        return kib_to_bytes(self.filter_kib)

    @property
    def ofmap_bytes(self) -> int:
        return kib_to_bytes(self.ofmap_kib)

    @property
    def stash_bytes(self) -> int:
        return kib_to_bytes(self.stash_kib)


def _class_cost(ops: str) -> Any:
    """An optional fixed cost per op of one class: ``ops`` say which."""
    return Field(
        default=None,
        exclude_if=lambda v: v is None,
        description=f"Cycles each {ops} costs before its work starts.",
    )


class ClassOverheadSpec(Spec):
    """The vector unit's fixed cost per op for ops of one class
    (:class:`~accelsim.config.enums.VectorClass`, one key per class), each in place of
    ``vector_unit.op_overhead_cycles`` for its class; a class not given keeps that."""

    elementwise: NonNegativeInt | None = _class_cost("element-wise vector op")
    transcendental: NonNegativeInt | None = _class_cost(
        "transcendental vector op (an exponential, a root or a sine per element)"
    )
    reduce: NonNegativeInt | None = _class_cost("reduction (many elements to one)")
    data_movement: NonNegativeInt | None = _class_cost(
        "data-movement op (a copy, transpose, slice, gather)"
    )
    norm: NonNegativeInt | None = _class_cost(
        "normalisation (statistics of its input, then every element normalised: batch,"
        " layer, RMS norms, softmax)"
    )

    def cycles(self, op_class: VectorClass) -> int | None:
        """The fixed cost of ``op_class``'s ops, or None where the class has none."""
        value: int | None = getattr(self, op_class.value)
        return value


class VectorUnitSpec(Spec):
    """SIMD unit beside the array: activations, norms, pooling, loss, updates."""

    lanes: PositiveInt = Field(description="Element operations per cycle.")
    precision: PrecisionField = Field(
        default=Precision.FP32,
        description="Vector precision (the energy table's vector_op_pj key).",
    )
    gemm_output_ops: Annotated[int, Field(ge=0, le=2**16)] = Field(
        default=0,
        exclude_if=lambda v: v == 0,
        description="Operations per output element of a GEMM the vector unit spends taking"
        " it off the arrays (reading the accumulator, converting to the output precision),"
        " while the arrays wait: a GEMM of M x N outputs computes"
        " ceil(gemm_output_ops x M x N / lanes) cycles longer, and those operations are"
        " the GEMM's vector_ops (priced at vector_op_pj).  0: outputs leave the arrays"
        " without the vector unit.",
    )
    op_overhead_cycles: NonNegativeInt | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="Cycles every vector op costs before its work starts (launch and a"
        " kernel's fixed span), in place of timing.op_overhead_cycles for vector ops; null:"
        " timing.op_overhead_cycles.",
    )
    stream_bytes_per_cycle: Annotated[float, Field(gt=0, le=1e12, allow_inf_nan=False)] | None = (
        Field(
            default=None,
            exclude_if=lambda v: v is None,
            description="Most bytes a vector op reads and writes per cycle (every operand"
            " streamed through the unit, on chip or from DRAM): an op of B bytes computes for"
            " at least ceil(B / stream_bytes_per_cycle) cycles, however few its operations."
            " null: no bound but the lanes and the DRAM.",
        )
    )
    class_overhead_cycles: ClassOverheadSpec = Field(
        default_factory=ClassOverheadSpec,
        exclude_if=lambda v: v == ClassOverheadSpec(),
        description="The fixed cost per op of each class of vector op (elementwise,"
        " transcendental, reduce, data_movement, norm), in place of op_overhead_cycles"
        " for that class; a class not given pays op_overhead_cycles.",
    )

    def overhead_cycles(self, op_class: VectorClass, chip_cycles: int) -> int:
        """The fixed cost of a vector op of ``op_class``: its class's, else the unit's,
        else the chip's ``chip_cycles``."""
        own = self.class_overhead_cycles.cycles(op_class)
        if own is not None:
            return own
        return chip_cycles if self.op_overhead_cycles is None else self.op_overhead_cycles


WORD_SIZES = (1, 2, 4, 8)
"""Bytes a tensor class's element may take."""


class ChipTimingSpec(Spec):
    """Fixed timing costs of the chip and its runtime."""

    op_overhead_cycles: NonNegativeInt = Field(
        default=0,
        description="Cycles every GEMM and vector op costs before its work starts (launch,"
        " synchronisation, a kernel's fixed span): they pass before its first transfer, so"
        " no DRAM traffic hides them; counted as the op's unit busy.",
    )
    kernel_overhead_cycles: NonNegativeInt | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="Under lowering.compile: fused, the part of op_overhead_cycles each"
        " fused kernel pays; the rest (op_overhead_cycles less this) is paid once per"
        " program (a step), so a one-kernel program costs op_overhead_cycles, as a lone"
        " op does eagerly. Null: all of op_overhead_cycles per kernel, none per program."
        " At most op_overhead_cycles.",
    )

    @model_validator(mode="after")
    def _check_kernel_overhead(self) -> ChipTimingSpec:
        kernel = self.kernel_overhead_cycles
        if kernel is not None and kernel > self.op_overhead_cycles:
            raise RuleViolation(
                "kernel_overhead_cycles",
                f"must be at most op_overhead_cycles ({self.op_overhead_cycles})",
                kernel,
            )
        return self

    def kernel_cycles(self) -> int:
        """What each kernel of a fused program pays."""
        kernel = self.kernel_overhead_cycles
        return self.op_overhead_cycles if kernel is None else kernel

    def program_cycles(self) -> int:
        """What a fused program (a step) pays once, beside its kernels'."""
        return self.op_overhead_cycles - self.kernel_cycles()


class WordBytesSpec(Spec):
    """Bytes per element of each tensor class."""

    activations: PositiveInt = Field(
        default=2, description="Bytes per activation element (1, 2, 4 or 8)."
    )
    weights: PositiveInt = Field(default=2, description="Bytes per weight element (1, 2, 4 or 8).")
    gradients: PositiveInt = Field(
        default=2, description="Bytes per gradient element (1, 2, 4 or 8)."
    )
    optimizer_state: PositiveInt = Field(
        default=4,
        description="Bytes per element of optimizer state (1, 2, 4 or 8; fp32 masters: 4).",
    )

    @model_validator(mode="after")
    def _check_sizes(self) -> WordBytesSpec:
        for field in type(self).model_fields:
            value = getattr(self, field)
            if value not in WORD_SIZES:
                raise RuleViolation(
                    field,
                    f"word size must be one of {', '.join(map(str, WORD_SIZES))} bytes",
                    value,
                )
        return self


@functools.cache
def _default(spec: type[Spec]) -> Spec:
    """``spec()``, made once (on first use: specs build their validators lazily)."""
    return spec()


class HardwareSpec(Spec):
    """A whole accelerator: ``processors`` identical processors and their DRAM.

    The processors share one DRAM channel or each has its own (``dram.sharing``).
    """

    name: Name = Field(description="The accelerator's name, shown in summaries.")
    description: str = Field(default="", description="Free text.")
    processors: Annotated[int, Field(gt=0, le=MAX_PROCESSORS)] = Field(
        default=1,
        description="Identical processors, with one DRAM channel between them or one each"
        " (dram.sharing).",
    )
    # 1 kHz to 1 THz: beyond either, times leave the range of a float.
    clock_mhz: Annotated[float, Field(ge=1e-3, le=1e6, allow_inf_nan=False)] = Field(
        description="Clock of every unit."
    )
    array: ArraySpec = Field(description="The systolic array of each processor.")
    buffers: BufferSpec = Field(description="The operand SRAM of each processor.")
    vector_unit: VectorUnitSpec = Field(description="The vector unit of each processor.")
    dram: DramModelSpec = Field(
        description="Off-chip memory: one memory for all processors, or one each; its model"
        " (dram.model) and the keys of that model."
    )
    interconnect: InterconnectSpec = Field(description="The links between processors.")
    word_bytes: WordBytesSpec = Field(
        default_factory=WordBytesSpec, description="Bytes per element of each tensor class."
    )
    # Settings added after the first release leave dumps (resolved_config.yaml, sweep
    # point identities) unchanged while at their defaults.
    mapping: MappingSpec = Field(
        default_factory=MappingSpec,
        exclude_if=lambda v: v == _default(MappingSpec),
        description="How GEMMs are laid onto the arrays, as the chip's compiler would.",
    )
    timing: ChipTimingSpec = Field(
        default_factory=ChipTimingSpec,
        exclude_if=lambda v: v == _default(ChipTimingSpec),
        description="Fixed timing costs of the chip and its runtime.",
    )

    technology_nm: TechnologyNm = Field(
        default=45,
        exclude_if=lambda v: v == 45,
        description="Technology node of the chip's logic and SRAM, nm: the area model"
        " scales its coefficients to it (docs/model/area_power.md).",
    )
    power: PowerSpec = Field(
        default_factory=PowerSpec,
        exclude_if=lambda v: v == _default(PowerSpec),
        description="The power budget (tdp_w), what a run over it does, and the window"
        " peak power is measured over.",
    )

    calibrated_under: CalibratedUnder = Field(
        default=(),
        exclude_if=lambda v: not v,
        description="The run settings this file was calibrated under, as a run file's"
        " timing and lowering sections hold them (timing: {fold_overlap: true}): every"
        " command takes them as its own, and refuses a run file, override, --set or"
        " flag that asks for another value.",
    )

    @property
    def calibrated_settings(self) -> dict[str, Any]:
        """:attr:`calibrated_under` by dotted key (``timing.fold_overlap``)."""
        return flat(self.calibrated_under)

    @model_validator(mode="after")
    def _check_calibrated_under(self) -> HardwareSpec:
        for key, value in self.calibrated_settings.items():
            problem = record_problem(key, value)
            if problem is not None:
                raise RuleViolation(f"calibrated_under.{key}", problem, value)
        return self

    @model_validator(mode="after")
    def _check_interconnect(self) -> HardwareSpec:
        try:
            self.interconnect.check_processors(self.processors)
        except RuleViolation as problem:
            raise RuleViolation(
                f"interconnect.{problem.path}", problem.message, problem.value
            ) from None
        return self

    @model_validator(mode="after")
    def _check_tile_fits(self) -> HardwareSpec:
        # Every operand buffer must hold at least one array-sized tile of its
        # widest word: anything smaller cannot feed (or drain) the array at all.
        words = self.word_bytes
        widest = {
            "ifmap_kib": max(words.activations, words.gradients),
            "filter_kib": max(words.weights, words.gradients, words.activations),
            "ofmap_kib": max(words.activations, words.gradients),
        }
        tile_words = self.array.rows * self.array.cols
        for field, word in widest.items():
            need_bytes = tile_words * word
            have_bytes = kib_to_bytes(getattr(self.buffers, field))
            if have_bytes < need_bytes:
                raise RuleViolation(
                    f"buffers.{field}",
                    f"too small for one {self.array.rows}x{self.array.cols} tile of {word}-byte"
                    f" words (needs >= {need_bytes / 1024:g} KiB)",
                    getattr(self.buffers, field),
                )
        return self
