"""Run precision: the operand precision every GEMM runs at and each tensor class's bytes.

``run.precision`` (null: the hardware file's ``array.precision`` and ``word_bytes``)
names the precision of every GEMM on the main array, which must be one of the
array's ``rates``: the PEs then do that many MACs per cycle along the reduction
dimension (:func:`~accelsim.mapping.dataflow.packed_k`) and each MAC is priced at
that precision's ``mac_pj``.  The GEMM operands, activations and weights, take that
precision's bytes unless set; gradients and optimizer state keep the hardware
file's bytes unless set; the fp32 master copy of ``optimizer.master_weights: fp32``
is 4 bytes an element whatever they are.  :func:`with_precision` makes the hardware a run sees.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator

from accelsim.config.base import PRECISION_BYTES, PrecisionField, RuleViolation, Spec
from accelsim.config.hardware import WORD_SIZES, HardwareSpec, WordBytesSpec
from accelsim.config.validate import validate_data
from accelsim.errors import ConfigError, Problem

WordSize = Annotated[int, Field(gt=0, le=max(WORD_SIZES))]


def _bytes(tensors: str, default: str) -> Any:
    return Field(
        default=None,
        exclude_if=lambda v: v is None,
        description=f"Bytes per element of {tensors} (1, 2, 4 or 8); null: {default}.",
    )


class PrecisionSpec(Spec):
    """The precision every GEMM runs at and the bytes of each tensor class under it."""

    gemm: PrecisionField = Field(
        description="Operand precision of every GEMM on the main array: one of the"
        " hardware's array.rates (MACs per PE per cycle, and mac_pj, at that precision)."
    )
    activations: WordSize | None = _bytes("activations", "the gemm precision's bytes")
    weights: WordSize | None = _bytes(
        "the weights the GEMMs read (and the update writes)", "the gemm precision's bytes"
    )
    gradients: WordSize | None = _bytes("gradients", "the hardware file's word_bytes.gradients")
    optimizer_state: WordSize | None = _bytes(
        "optimizer state (an fp32 master copy is 4 bytes whatever this says)",
        "the hardware file's word_bytes.optimizer_state",
    )

    @model_validator(mode="after")
    def _check_sizes(self) -> PrecisionSpec:
        for name in ("activations", "weights", "gradients", "optimizer_state"):
            value = getattr(self, name)
            if value is not None and value not in WORD_SIZES:
                sizes = ", ".join(map(str, WORD_SIZES))
                raise RuleViolation(name, f"word size must be one of {sizes} bytes", value)
        return self

    def word_bytes(self, given: WordBytesSpec) -> WordBytesSpec:
        """The bytes of each tensor class under this precision, ``given`` (the hardware
        file's) where it leaves gradients or optimizer state unset."""
        operand = PRECISION_BYTES[self.gemm]
        return WordBytesSpec(
            activations=operand if self.activations is None else self.activations,
            weights=operand if self.weights is None else self.weights,
            gradients=given.gradients if self.gradients is None else self.gradients,
            optimizer_state=(
                given.optimizer_state if self.optimizer_state is None else self.optimizer_state
            ),
        )


def with_precision(hw: HardwareSpec, spec: PrecisionSpec | None, source: str) -> HardwareSpec:
    """``hw`` with its array running every GEMM at ``spec.gemm`` and its tensor classes
    at ``spec``'s bytes (``hw`` itself for no spec).

    Raises:
        ConfigError: against ``source`` (the run file) at ``precision.gemm`` when the
            array has no rate at that precision, or at ``precision`` when the hardware
            cannot run it (a buffer too small for one tile of the wider words).
    """
    if spec is None:
        return hw
    rates = hw.array.precision_rates
    if spec.gemm not in rates:
        offered = ", ".join(f"{p.value}: {r}" for p, r in rates.items())
        raise ConfigError.single(
            source,
            "precision.gemm",
            f"the array of hardware '{hw.name}' does not run it (array.rates: {offered})",
            spec.gemm.value,
        )
    data = hw.model_dump()
    data["array"]["precision"] = spec.gemm
    data["word_bytes"] = spec.word_bytes(hw.word_bytes).model_dump()
    try:
        return validate_data(HardwareSpec, data, f"hardware '{hw.name}'")
    except ConfigError as exc:
        problems = [Problem(source, "precision", f"{p.file}: {p.path}: {p.message}", p.value)
                    for p in exc.problems]  # fmt: skip
        raise ConfigError(problems) from None
