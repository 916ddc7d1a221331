"""The run's precision applied to its hardware, and the techniques it cannot run with.

:func:`~accelsim.config.precision.with_precision` makes the hardware a run sees;
approximate dropout is refused with a GEMM rate above 1: it re-maps every shrunk
GEMM of its sampled steps, and masks their folds, one element of the reduction
dimension per PE row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelsim.config.hardware import HardwareSpec
from accelsim.config.precision import with_precision
from accelsim.config.run_file import RunFile
from accelsim.errors import ConfigError, Problem
from accelsim.techniques.base import Technique


def run_hardware(run_file: RunFile, hardware: HardwareSpec, source: str) -> HardwareSpec:
    """``hardware`` under the run's ``precision``.

    Raises:
        ConfigError: blamed on the place that wrote the precision, when the array has
            no rate at it or the hardware cannot hold its words.
    """
    try:
        return with_precision(hardware, run_file.run.precision, source)
    except ConfigError as exc:
        raise ConfigError(run_file.origins.blame(exc.problems)) from None


def precision_problems(
    hardware: HardwareSpec, techniques: Sequence[Technique[Any]], source: str
) -> list[Problem]:
    """Techniques that cannot run at the array's GEMM rate."""
    rate = hardware.array.k_per_pe
    if rate == 1:
        return []
    # imported here: a run without the technique never loads it
    from accelsim.techniques.dropout.technique import ApproximateDropout

    return [
        Problem(
            source,
            f"techniques.{t.name}",
            f"not with {rate} MACs per PE per cycle (array.rates at"
            f" {hardware.array.precision.value}): its sampled steps map and mask the"
            " folds of every GEMM one element of K per PE row",
        )
        for t in techniques
        if isinstance(t, ApproximateDropout)
    ]


def precision_settings(hardware: HardwareSpec, given: bool) -> dict[str, str]:
    """The summary's record of the GEMMs' precision, rate and the rate's source, when
    the run sets a precision (``given``) or the array states rates; none otherwise, so
    that a summary without either stays as it was."""
    array = hardware.array
    if not given and array.rates is None:
        return {}
    words = hardware.word_bytes
    return {
        "precision": array.precision.value,
        "macs_per_pe_per_cycle": str(array.k_per_pe),
        "rates_source": array.rates_source or "not given",
        "word_bytes": f"activations {words.activations}, weights {words.weights},"
        f" gradients {words.gradients}, optimizer_state {words.optimizer_state}",
    }
