"""``run.precision``: the GEMMs' precision and each tensor class's bytes, applied to the
hardware a run sees, refused where the array has no rate for it, and recorded."""

from __future__ import annotations

from typing import Any

import pytest

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import simulate_run
from accelsim.errors import ConfigError
from accelsim.report.console import summary_table
from tests.conftest import ROOT

MLP_RUN = ROOT / "configs" / "runs" / "mlp.yaml"
FP8_RATES = "hardware.array.rates={bf16: 1, fp8: 2}"
FP8 = "run.precision={gemm: fp8}"


def problems(*sets: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_inputs(MLP_RUN, parse_sets(list(sets)))
    return [str(p) for p in caught.value.problems]


def summary(*sets: str) -> dict[str, Any]:
    return simulate_run(load_inputs(MLP_RUN, parse_sets(["batch_size=8", *sets]))).summary()


def test_a_precision_the_array_has_no_rate_for_is_refused() -> None:
    assert problems(FP8) == [
        "--set: run.precision.gemm: the array of hardware 'default-128x128' does not run it"
        " (array.rates: bf16: 1) (got 'fp8')"
    ]


def test_rates_must_hold_the_arrays_precision() -> None:
    assert problems("hardware.array.rates={fp8: 2}") == [
        "--set: hardware.array.rates: must hold precision (bf16) (got {'fp8': 2})"
    ]


def test_a_word_size_that_is_no_word_is_refused() -> None:
    assert problems(FP8_RATES, "run.precision={gemm: fp8, gradients: 3}") == [
        "--set: run.precision.gradients: word size must be one of 1, 2, 4, 8 bytes (got 3)"
    ]


def test_approximate_dropout_is_refused_above_one_mac_per_pe() -> None:
    dropout = "run.techniques={approximate_dropout: {rate: 0.5, pattern: tile}}"
    workload = f"workload={ROOT}/workloads/mlp_dropout.yaml"
    assert problems(workload, FP8_RATES, FP8, dropout) == [
        "--set: run.techniques.approximate_dropout: not with 2 MACs per PE per cycle"
        " (array.rates at fp8): its sampled steps map and mask the folds of every GEMM"
        " one element of K per PE row"
    ]


def test_the_gemm_operands_take_the_precisions_bytes_the_rest_the_hardwares() -> None:
    inputs = load_inputs(MLP_RUN, parse_sets([FP8_RATES, FP8]))
    words = inputs.hardware.word_bytes
    assert (words.activations, words.weights, words.gradients, words.optimizer_state) == (
        1, 1, 2, 4,
    )  # fmt: skip
    assert inputs.hardware.array.precision.value == "fp8"
    assert inputs.hardware.array.k_per_pe == 2


def test_fp8_halves_the_mlps_gemm_cycles_and_operand_bytes() -> None:
    # MLP 784-2048-2048-10 at batch 8 on the 128 x 128 ws array: every GEMM's K
    # (784, 2048, 2048, 10 forward) packs two to a PE row.
    bf16, fp8 = summary(FP8_RATES), summary(FP8_RATES, FP8)
    assert fp8["macs"] == bf16["macs"]
    assert fp8["precision"] == "fp8" and fp8["macs_per_pe_per_cycle"] == "2"
    assert bf16["precision"] == "bf16" and bf16["macs_per_pe_per_cycle"] == "1"
    assert fp8["total_cycles"] < bf16["total_cycles"]
    # the speedup cannot beat the rate, its bound
    assert bf16["total_cycles"] / fp8["total_cycles"] <= 2
    assert "precision" not in summary()  # a run that sets neither records neither


def test_the_console_says_the_precision_and_the_rates_source() -> None:
    source = "hardware.array.rates_source=our choice"
    table = summary_table(summary(FP8_RATES, FP8, source))
    assert "GEMMs at fp8, 2 MACs per PE per cycle (our choice)" in table
    assert "activations 1, weights 1, gradients 2, optimizer_state 4" in table


@pytest.mark.parametrize("sets", [[FP8_RATES, FP8], [FP8_RATES, FP8, "array.dataflow=os"]])
def test_both_engines_give_the_same_fp8_step(sets: list[str]) -> None:
    simpy = summary(*sets, "timing.engine=simpy")
    compiled = summary(*sets, "timing.engine=compiled")
    assert (simpy.pop("engine"), compiled.pop("engine")) == ("simpy", "compiled")
    assert simpy == compiled
