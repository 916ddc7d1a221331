"""Compute cycles follow the closed forms; memory effects behave as documented."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.config.base import Convention, Dataflow
from accelsim.config.run import PsumPolicy
from accelsim.driver.layer import LayerGemm, conv_gemm, gemm_for, simulate_layer
from accelsim.graph.ops import Phase
from tests.conftest import make_hw

SHAPES = [(100, 37, 513), (1, 1000, 4096), (7, 5, 3), (128, 128, 128), (4096, 1, 1)]


def closed_form(
    dataflow: str, convention: str, rows: int, cols: int, m: int, n: int, k: int
) -> tuple[int, int]:
    """(folds, compute cycles) from the documented formulas."""
    sr, sc, t = {"os": (m, n, k), "ws": (k, n, m), "is": (k, m, n)}[dataflow]
    folds = math.ceil(sr / rows) * math.ceil(sc / cols)
    if convention == "scalesim":
        per_fold = (rows if dataflow == "os" else 2 * rows) + cols + t - 2
        return folds, folds * per_fold - 1
    return folds, folds * (2 * rows + cols + t - 2)


@pytest.mark.parametrize("dataflow", ["os", "ws", "is"])
@pytest.mark.parametrize("convention", ["scalesim", "accelsim"])
@pytest.mark.parametrize(("m", "n", "k"), SHAPES)
def test_compute_cycles_closed_form(
    dataflow: str, convention: str, m: int, n: int, k: int, energy_table
) -> None:
    hw = make_hw(**{"array.rows": 32, "array.cols": 16, "array.dataflow": dataflow})
    record = simulate_layer(
        hw, energy_table, gemm_for(m, n, k, Phase.FWD), Phase.FWD, Convention(convention)
    )
    folds, cycles = closed_form(dataflow, convention, 32, 16, m, n, k)
    assert record["folds"] == folds
    assert record["compute_cycles"] == cycles
    # Compute waits for the first tiles and the last output tile drains after it:
    # two DRAM latencies plus at least one cycle of transfer each.
    assert record["stall_cycles"] >= 2 * (hw.dram.latency_cycles + 1)


@settings(max_examples=60, deadline=None)
@given(
    m=st.integers(1, 5000),
    n=st.integers(1, 5000),
    k=st.integers(1, 5000),
    rows=st.integers(1, 256),
    cols=st.integers(1, 256),
    dataflow=st.sampled_from(["os", "ws", "is"]),
    convention=st.sampled_from(["scalesim", "accelsim"]),
)
def test_compute_cycles_property(
    m: int, n: int, k: int, rows: int, cols: int, dataflow: str, convention: str
) -> None:
    from accelsim.config.loader import load_energy
    from tests.conftest import ROOT

    table = load_energy(ROOT / "configs" / "energy" / "horowitz45.yaml")
    hw = make_hw(**{"array.rows": rows, "array.cols": cols, "array.dataflow": dataflow})
    record = simulate_layer(
        hw, table, gemm_for(m, n, k, Phase.FWD), Phase.FWD, Convention(convention)
    )
    assert (record["folds"], record["compute_cycles"]) == closed_form(
        dataflow, convention, rows, cols, m, n, k
    )
    assert 0 < record["mapping_efficiency"] <= 1
    assert 0 < record["utilization"] <= 1


def test_scalesim_conv_matches_measured_scalesim(energy_table) -> None:
    # SCALE-Sim 3.0.0, 8x4 ws, conv 8x8 ifmap, 3x3 filter, 4 channels, 8 filters, stride 1:
    # compute 539 cycles, mapping efficiency 90 %, ofmap writes 1440 (measured).
    hw = make_hw(
        **{
            "array.rows": 8,
            "array.cols": 4,
            "array.dataflow": "ws",
            "word_bytes.activations": 1,
            "word_bytes.weights": 1,
            "word_bytes.gradients": 1,
        }
    )
    gemm = conv_gemm(8, 8, 3, 3, 4, 8, 1, Phase.FWD, Convention.SCALESIM)
    record = simulate_layer(hw, energy_table, gemm, Phase.FWD, Convention.SCALESIM)
    assert record["compute_cycles"] == 539
    assert record["mapping_efficiency"] == pytest.approx(0.90)
    assert record["sram_writes"]["ofmap"] == 1440
    assert record["sram_reads"] == {"ifmap": 2 * 1296, "filter": 288}


def test_scalesim_os_sram_counts(energy_table) -> None:
    # SCALE-Sim 3.0.0, 8x8 os, GEMM 10,9,17: ifmap 340, filter 306, ofmap writes 154
    # (= 90 + 4 folds * (8 + 8), SCALE-Sim's extra count), compute 123 cycles.
    hw = make_hw(**{"array.rows": 8, "array.cols": 8, "array.dataflow": "os"})
    record = simulate_layer(
        hw, energy_table, gemm_for(10, 9, 17, Phase.FWD), Phase.FWD, Convention.SCALESIM
    )
    assert record["sram_reads"] == {"ifmap": 340, "filter": 306}
    assert record["sram_writes"] == {"ofmap": 154}
    assert record["compute_cycles"] == 4 * (8 + 8 + 17 - 2) - 1


@pytest.mark.parametrize("dataflow", ["os", "ws", "is"])
def test_unlimited_bandwidth_has_no_stalls(dataflow: str, energy_table) -> None:
    hw = make_hw(
        **{
            "array.dataflow": dataflow,
            "dram.bandwidth_bytes_per_cycle": math.inf,
            "dram.latency_cycles": 0,
        }
    )
    for m, n, k in SHAPES:
        record = simulate_layer(
            hw, energy_table, gemm_for(m, n, k, Phase.FWD), Phase.FWD, Convention.ACCELSIM
        )
        assert record["stall_cycles"] == 0


@pytest.mark.parametrize("dataflow", ["os", "ws", "is"])
def test_big_buffers_move_only_the_unique_footprint(dataflow: str, energy_table) -> None:
    hw = make_hw(
        **{
            "array.dataflow": dataflow,
            "buffers.ifmap_kib": 1 << 20,
            "buffers.filter_kib": 1 << 20,
            "buffers.ofmap_kib": 1 << 20,
        }
    )
    words = hw.word_bytes
    for m, n, k in SHAPES:
        record = simulate_layer(
            hw, energy_table, gemm_for(m, n, k, Phase.FWD), Phase.FWD, Convention.ACCELSIM
        )
        assert record["dram_bytes"] == {
            "ifmap": m * k * words.activations,
            "filter": k * n * words.weights,
            "ofmap": m * n * words.activations,
            "psum_read": 0,
        }


def test_conv_footprint_is_the_input_not_im2col(energy_table) -> None:
    hw = make_hw(**{"buffers.ifmap_kib": 1 << 20})
    gemm = conv_gemm(58, 58, 3, 3, 64, 64, 1, Phase.FWD, Convention.ACCELSIM)
    assert (gemm.m, gemm.n, gemm.k) == (56 * 56, 64, 576)
    record = simulate_layer(hw, energy_table, gemm, Phase.FWD, Convention.ACCELSIM)
    assert record["dram_bytes"]["ifmap"] == 58 * 58 * 64 * 2


@pytest.mark.parametrize("dataflow", ["ws", "is"])
def test_psums_that_do_not_fit_spill_and_are_read_back(dataflow: str, energy_table) -> None:
    hw = make_hw(**{"array.dataflow": dataflow, "buffers.ofmap_kib": 64})
    gemm = gemm_for(4096, 4096, 1024, Phase.FWD)  # 8 row folds of k
    chunked = simulate_layer(
        hw, energy_table, gemm, Phase.FWD, Convention.ACCELSIM, PsumPolicy.CHUNK
    )
    spilled = simulate_layer(
        hw, energy_table, gemm, Phase.FWD, Convention.ACCELSIM, PsumPolicy.SPILL
    )
    out_bytes = 4096 * 4096 * 2
    assert chunked["dram_bytes"]["ofmap"] == out_bytes and chunked["dram_bytes"]["psum_read"] == 0
    assert spilled["dram_bytes"]["ofmap"] == 8 * out_bytes
    assert spilled["dram_bytes"]["psum_read"] == 7 * out_bytes
    assert spilled["compute_cycles"] == chunked["compute_cycles"]
    assert spilled["total_cycles"] > chunked["total_cycles"]


def test_small_buffers_refetch(energy_table) -> None:
    big = make_hw(
        **{"array.dataflow": "os", "buffers.ifmap_kib": 16384, "buffers.filter_kib": 16384}
    )
    small = make_hw(**{"array.dataflow": "os", "buffers.ifmap_kib": 64, "buffers.filter_kib": 64})
    gemm = LayerGemm(2048, 1024, 1024, 2048 * 1024, 1024 * 1024)
    dram = [
        simulate_layer(h, energy_table, gemm, Phase.FWD, Convention.ACCELSIM)["dram_bytes"]
        for h in (big, small)
    ]
    assert dram[1]["ifmap"] == 8 * dram[0]["ifmap"]  # A re-read once per column fold
    assert dram[1]["filter"] == 16 * dram[0]["filter"]  # B once per row fold


@settings(max_examples=25, deadline=None)
@given(
    bandwidth=st.sampled_from([1.0, 3.0, 8.0, 32.0, 128.0, 1024.0]),
    dataflow=st.sampled_from(["os", "ws", "is"]),
)
def test_halving_bandwidth_never_reduces_cycles(bandwidth: float, dataflow: str) -> None:
    from accelsim.config.loader import load_energy
    from tests.conftest import ROOT

    table = load_energy(ROOT / "configs" / "energy" / "horowitz45.yaml")
    totals = []
    for bw in (bandwidth, bandwidth / 2):
        hw = make_hw(**{"array.dataflow": dataflow, "dram.bandwidth_bytes_per_cycle": bw})
        totals.append(
            simulate_layer(
                hw, table, gemm_for(300, 200, 700, Phase.FWD), Phase.FWD, Convention.ACCELSIM
            )["total_cycles"]
        )
    assert totals[1] >= totals[0]


def test_every_dataflow_has_its_own_mapping(energy_table) -> None:
    # GEMM 100x37x513 on 32x16: the stationary operand sets the (rows, cols) of the
    # array that the folds tile.  A dataflow added without a mapping fails here.
    m, n, k = 100, 37, 513
    folds = {
        "os": math.ceil(m / 32) * math.ceil(n / 16),  # 4 x 3 = 12
        "ws": math.ceil(k / 32) * math.ceil(n / 16),  # 17 x 3 = 51
        "is": math.ceil(k / 32) * math.ceil(m / 16),  # 17 x 7 = 119
    }
    for dataflow in Dataflow:
        hw = make_hw(**{"array.rows": 32, "array.cols": 16, "array.dataflow": dataflow.value})
        record = simulate_layer(
            hw, energy_table, gemm_for(m, n, k, Phase.FWD), Phase.FWD, Convention.ACCELSIM
        )
        assert record["folds"] == folds.pop(dataflow.value)
    assert not folds
