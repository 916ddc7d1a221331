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


def fc2(*sets: str) -> dict[str, Any]:
    """The row of the MLP's fc2.fwd at batch 8."""
    inputs = load_inputs(MLP_RUN, parse_sets(["batch_size=8", *sets]))
    return next(row for row in simulate_run(inputs).op_rows() if row["name"] == "fc2.fwd")


def test_fp8_halves_a_gemms_folds_cycles_and_operand_bytes() -> None:
    # fc2.fwd: M = 8, N = 2048, K = 2048 on the 128 x 128 ws array (Sr = K, Sc = N,
    # T = M; a fold costs 2 x 128 + 128 + 8 - 2 = 390 cycles).  bf16: 16 x 16 folds,
    # 99,840 cycles; fp8 packs K' = 1,024: 8 x 16 folds, 49,920 cycles.  Its input
    # (8 x 2,048), weight (2,048 x 2,048) and output (8 x 2,048) are read or written
    # once, at 2 bytes and at 1.
    bf16, fp8 = fc2(FP8_RATES), fc2(FP8_RATES, FP8)
    assert (bf16["folds"], bf16["compute_cycles"]) == (256, 99_840)
    assert (fp8["folds"], fp8["compute_cycles"]) == (128, 49_920)
    assert bf16["macs"] == fp8["macs"] == 8 * 2048 * 2048
    read = ("dram_read_ifmap_bytes", "dram_read_filter_bytes", "dram_write_ofmap_bytes")
    assert [bf16[key] for key in read] == [2 * 8 * 2048, 2 * 2048 * 2048, 2 * 8 * 2048]
    assert [fp8[key] for key in read] == [8 * 2048, 2048 * 2048, 8 * 2048]


def test_the_summary_records_the_precision_and_the_step_stays_within_its_bound() -> None:
    bf16, fp8 = summary(FP8_RATES), summary(FP8_RATES, FP8)
    assert fp8["macs"] == bf16["macs"]
    assert fp8["precision"] == "fp8" and fp8["macs_per_pe_per_cycle"] == "2"
    assert bf16["precision"] == "bf16" and bf16["macs_per_pe_per_cycle"] == "1"
    # the speedup cannot beat the rate, its bound
    assert 1 < bf16["total_cycles"] / fp8["total_cycles"] <= 2
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


def test_wider_words_the_buffers_cannot_hold_are_refused() -> None:
    rates = "hardware.array.rates={bf16: 1, fp32: 1}"
    assert problems(rates, "buffers.ifmap_kib=40", "run.precision={gemm: fp32}") == [
        "--set: run.precision: hardware 'default-128x128': buffers.ifmap_kib: too small for"
        " one 128x128 tile of 4-byte words (needs >= 64 KiB) (got 40.0)"
    ]


def test_the_fp8_preset_states_each_classs_bytes() -> None:
    inputs = load_inputs(ROOT / "configs" / "runs" / "gpt2_small_fp8.yaml")
    hw = inputs.hardware
    words = hw.word_bytes
    assert (hw.array.precision.value, hw.array.k_per_pe) == ("fp8", 2)
    assert (words.activations, words.weights, words.gradients, words.optimizer_state) == (
        1, 2, 2, 4,
    )  # fmt: skip
    assert inputs.run.optimizer.master_weights.value == "none"  # the bf16 weights are the master
    # the area model sizes the PE for its widest precision, whatever the run's
    assert hw.array.widest_precision.value == "bf16"


def test_the_presets_state_their_published_rates() -> None:
    h100 = f"hardware={ROOT}/configs/hardware/gpu_cluster.yaml"
    hw = load_inputs(MLP_RUN, parse_sets([h100, FP8])).hardware
    # 1,979 dense fp8 TFLOP/s = 2 x 989 bf16 (H100 datasheet)
    assert (hw.array.precision.value, hw.array.k_per_pe) == ("fp8", 2)
    a100 = f"hardware={ROOT}/configs/hardware/a100_cluster.yaml"
    assert problems(a100, FP8) == [
        "--set: run.precision.gemm: the array of hardware 'a100-cluster-2xdgx-a100' does not"
        " run it (array.rates: bf16: 1, int8: 2) (got 'fp8')"
    ]
