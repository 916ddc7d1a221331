"""A PE's MAC rate at the GEMM's precision packs the reduction dimension K.

Hand counts for one GEMM, M = 64, N = 48, K = 100, on a 32 x 16 array (accelsim
convention: a fold costs 2R + C + T - 2 = 78 + T cycles).  At fp8 with
``array.rates: {bf16: 1, fp8: 2}`` a PE does 2 MACs per cycle along K, so the array
maps K' = ceil(100 / 2) = 50:

====  ==================  ===================  ===========================
flow  Sr, Sc, T            bf16 folds, cycles   fp8 folds, cycles
====  ==================  ===================  ===========================
ws    K, N, M              4 x 3, 12 x 142      2 x 3, 6 x 142 = 852
os    M, N, K              2 x 3, 6 x 178       2 x 3, 6 x (78 + 50) = 768
is    K, M, N              4 x 4, 16 x 126      2 x 4, 8 x 126 = 1,008
====  ==================  ===================  ===========================

MACs stay M x N x K = 307,200, and every operand fits its buffer, so DRAM reads A
and B once and writes C once: M x K, K x N and M x N words, at 1 byte under fp8
words and 2 under bf16.
"""

from __future__ import annotations

from typing import Any

import pytest

from accelsim.config.base import Convention
from accelsim.config.energy import EnergyTable
from accelsim.driver.layer import gemm_for, simulate_layer
from accelsim.graph.ops import Phase
from tests.conftest import make_hw

M, N, K = 64, 48, 100
FP8_WORDS = {"activations": 1, "weights": 1, "gradients": 1, "optimizer_state": 4}
HAND = {  # dataflow: (bf16 folds, bf16 cycles, fp8 folds, fp8 cycles)
    "ws": (12, 12 * 142, 6, 852),
    "os": (6, 6 * 178, 6, 768),
    "is": (16, 16 * 126, 8, 1008),
}


def layer(dataflow: str, precision: str, table: EnergyTable) -> dict[str, Any]:
    words = FP8_WORDS if precision == "fp8" else {}
    hw = make_hw(
        **{
            "array.rows": 32,
            "array.cols": 16,
            "array.dataflow": dataflow,
            "array.precision": precision,
            "array.rates": {"bf16": 1, "fp8": 2},
            **{f"word_bytes.{name}": size for name, size in words.items()},
        }
    )
    gemm = gemm_for(M, N, K, Phase.FWD)
    return simulate_layer(hw, table, gemm, Phase.FWD, Convention.ACCELSIM)


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
def test_fp8_packs_k_two_to_a_pe_on_every_dataflow(dataflow: str, energy_table) -> None:
    bf16, fp8 = layer(dataflow, "bf16", energy_table), layer(dataflow, "fp8", energy_table)
    folds16, cycles16, folds8, cycles8 = HAND[dataflow]
    assert (bf16["folds"], bf16["compute_cycles"]) == (folds16, cycles16)
    assert (fp8["folds"], fp8["compute_cycles"]) == (folds8, cycles8)
    assert bf16["macs"] == fp8["macs"] == M * N * K
    # the elements each operand holds are the true ones: the same SRAM words
    assert fp8["sram_reads"] == bf16["sram_reads"]
    assert fp8["dram_bytes"]["ifmap"] == M * K and bf16["dram_bytes"]["ifmap"] == 2 * M * K
    assert fp8["dram_bytes"]["filter"] == K * N and bf16["dram_bytes"]["filter"] == 2 * K * N
    assert fp8["dram_bytes"]["ofmap"] == M * N and bf16["dram_bytes"]["ofmap"] == 2 * M * N
    # utilization is against the peak at the GEMM's rate, so it cannot pass 1
    assert 0 < fp8["utilization"] <= 1


def test_a_mac_is_priced_at_the_gemms_precision(energy_table) -> None:
    bf16, fp8 = layer("ws", "bf16", energy_table), layer("ws", "fp8", energy_table)
    # horowitz45: bf16 1.5 pJ, fp8 0.675 pJ per MAC
    assert bf16["energy_by_component_pj"]["mac"] == pytest.approx(M * N * K * 1.5)
    assert fp8["energy_by_component_pj"]["mac"] == pytest.approx(M * N * K * 0.675)


def test_an_odd_k_rounds_up_to_whole_pe_rows(energy_table) -> None:
    # K = 101 at 2 per PE: K' = 51 rows of a 32-row array, 2 row folds (the last PE
    # row holds one element of K), the same folds and cycles as K = 100.
    hw = make_hw(
        **{"array.rows": 32, "array.cols": 16, "array.precision": "fp8",
           "array.rates": {"bf16": 1, "fp8": 2}}
    )  # fmt: skip
    gemm = gemm_for(M, N, 101, Phase.FWD)
    record = simulate_layer(hw, energy_table, gemm, Phase.FWD, Convention.ACCELSIM)
    assert (record["folds"], record["compute_cycles"]) == (6, 6 * 142)
    assert record["macs"] == M * N * 101
