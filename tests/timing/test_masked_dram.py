"""Fold masks: compute, MACs and SRAM scale with the running folds, and DRAM traffic
follows each operand's reuse under the dataflow, hand-counted on 2 x 2 folds."""

from __future__ import annotations

import numpy as np
import pytest

from accelsim.config.base import Convention
from accelsim.config.run import PsumPolicy
from accelsim.errors import SimulationError
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import Phase, TensorKind
from accelsim.mapping.schedule import FoldSchedule, fold_use, schedule
from accelsim.mapping.units import main_array
from accelsim.timing.costs import OpCosts, op_costs
from accelsim.timing.machine import Machine
from tests.conftest import make_hw

# 8 x 8 array, 1 KiB buffers: half of each (512 B, 256 bf16 words) is what reuse needs
SMALL = {"array.rows": 8, "array.cols": 8, "buffers.ifmap_kib": 1, "buffers.filter_kib": 1,
         "buffers.ofmap_kib": 1}  # fmt: skip
ONE_SKIPPED = np.array([[True, False], [True, True]])  # fold (row 0, column 1) skipped
ROW_SKIPPED = np.array([[False, False], [True, True]])  # row fold 0 skipped


PSUMS = {"mapping.stream_blocking": "psums"}


def costs(
    dataflow: str,
    mnk: tuple[int, int, int],
    mask: np.ndarray | None,
    psums: PsumPolicy = PsumPolicy.CHUNK,
    **changes: object,
) -> tuple[OpCosts, FoldSchedule]:
    hw = make_hw(**{**SMALL, "array.dataflow": dataflow, **changes})
    m, n, k = mnk
    b = GraphBuilder(hw.word_bytes)
    a = b.tensor("a", TensorKind.ACTIVATION, m * k)
    w = b.tensor("w", TensorKind.WEIGHT, k * n)
    c = b.tensor("c", TensorKind.ACTIVATION, m * n)
    b.gemm("g", "l", Phase.FWD, m, n, k, 1, a, w, c)
    graph = b.build()
    folds = schedule(graph, (main_array(hw),))
    if mask is not None:
        folds = folds.with_masks({0: mask})
    return op_costs(graph, folds, Machine.of(hw), Convention.ACCELSIM, psums, 8), folds


def words(c: OpCosts) -> tuple[int, int, int, int]:
    """DRAM words (bf16) read of A, B, partial sums, and written of C."""
    return (
        int(c.dram_ifmap_read_bytes[0]) // 2,
        int(c.dram_filter_read_bytes[0]) // 2,
        int(c.dram_ofmap_read_bytes[0]) // 2,
        int(c.dram_ofmap_write_bytes[0]) // 2,
    )


def test_fold_use_counts_by_hand() -> None:
    # Sr = 12 on 8 rows: row folds of 8 and 4; Sc = 16: column folds of 8 and 8; T = 5
    use = fold_use(ONE_SKIPPED, 12, 16, 5, 8, 8)
    # folds 3, stream 3 x 5, work 128 x 5, area 8*8 + 4*8 + 4*8, rows (8 + 4 + 4) x 5,
    # cols (8 + 8 + 8) x 5, any rows 12 x 5, any cols 16 x 5, spill: column 0 has 2
    # running row folds (1 round trip of 8 columns x 5)
    assert use.tolist() == [3, 15, 640, 128, 80, 120, 60, 80, 40]


def test_masked_folds_scale_compute_macs_and_sram() -> None:
    whole, _ = costs("ws", (64, 16, 16), None)
    masked, _ = costs("ws", (64, 16, 16), ONE_SKIPPED)
    per_fold = 2 * 8 + 8 + 64 - 2  # 2 rows + cols + T - 2, T = m = 64
    assert int(whole.compute_cycles[0]) == 4 * per_fold
    assert int(masked.compute_cycles[0]) == 3 * per_fold
    assert int(masked.macs[0]) * 4 == int(whole.macs[0]) * 3 == 3 * 64 * 16 * 16
    assert int(masked.sram_filter_read_bytes[0]) * 4 == int(whole.sram_filter_read_bytes[0]) * 3
    with pytest.raises(SimulationError, match=r"fold mask of op 0 is \(1, 1\), expected \(2, 2\)"):
        costs("ws", (64, 16, 16), np.ones((1, 1), bool))


def test_ws_skipped_fold_skips_its_weight_tile_and_input_restream() -> None:
    # ws: B (k x n = 16 x 16) stationary, 256 words fit in 512 B: read once, tile by
    # tile; A (m x k = 64 x 16, 1024 words) streams m in 2 partial-sum chunks of 32,
    # a chunk's slice (512 words) does not fit: blocked as partial sums need, A is
    # re-read per column fold
    assert words(costs("ws", (64, 16, 16), None, **PSUMS)[0]) == (2 * 1024, 256, 0, 64 * 16)
    # fold (0, 1) skipped: its 8 x 8 weight tile (64 words) is not read, and column
    # fold 1's pass reads only row fold 1's half of A (512 of 1024 words)
    skipped = costs("ws", (64, 16, 16), ONE_SKIPPED, **PSUMS)[0]
    assert words(skipped) == (1024 + 512, 192, 0, 64 * 16)
    # Blocked for the fewest reads (the default), chunks whose slice of A fits read A
    # once (B fits whole, so it is still read once); the skipped fold's row fold 0 is
    # needed by column fold 0, so only its weight tile is saved
    assert words(costs("ws", (64, 16, 16), None)[0]) == (1024, 256, 0, 64 * 16)
    assert words(costs("ws", (64, 16, 16), ONE_SKIPPED)[0]) == (1024, 192, 0, 64 * 16)


def test_os_skipped_fold_skips_both_operand_slices() -> None:
    # os: A (m x k = 16 x 64) does not fit: re-read per column fold; a column slice of
    # B (k x n = 64 x 16, 512 words a slice) does not fit: re-read per row fold
    assert words(costs("os", (16, 16, 64), None)[0]) == (2 * 1024, 2 * 1024, 0, 256)
    # fold (0, 1) skipped: column fold 1's pass over A reads row fold 1's 512 words
    # only, and row fold 0's pass over B reads column fold 0's 512 words only
    assert words(costs("os", (16, 16, 64), ONE_SKIPPED)[0]) == (1536, 1536, 0, 256)


def test_is_skipped_fold_skips_its_input_tile_and_weight_restream() -> None:
    # is: A (m x k = 16 x 16) stationary, read once; B (k x n = 16 x 64) streams n in
    # 2 chunks and, blocked as partial sums need, is re-read per column fold
    assert words(costs("is", (16, 64, 16), None, **PSUMS)[0]) == (256, 2 * 1024, 0, 16 * 64)
    assert words(costs("is", (16, 64, 16), ONE_SKIPPED, **PSUMS)[0]) == (192, 1536, 0, 16 * 64)
    # blocked for the fewest reads (the default): B once, the skipped fold's A tile saved
    assert words(costs("is", (16, 64, 16), None)[0]) == (256, 1024, 0, 16 * 64)
    assert words(costs("is", (16, 64, 16), ONE_SKIPPED)[0]) == (192, 1024, 0, 16 * 64)


def test_operand_read_once_needs_the_row_folds_some_fold_runs() -> None:
    big = {"buffers.ifmap_kib": 64, "buffers.filter_kib": 64}
    # ws with A fitting: read once; one skipped fold leaves both of A's row folds needed
    assert words(costs("ws", (64, 16, 16), None, **big)[0])[:2] == (1024, 256)
    assert words(costs("ws", (64, 16, 16), ONE_SKIPPED, **big)[0])[:2] == (1024, 192)
    # row fold 0 skipped: A's rows 0-7 (512 words) and the two weight tiles stay off
    assert words(costs("ws", (64, 16, 16), ROW_SKIPPED, **big)[0])[:2] == (512, 128)
    # os with B's column slices fitting: read once; row fold 0 skipped still needs both
    assert words(costs("os", (16, 16, 64), ROW_SKIPPED, **big)[0])[:2] == (512, 1024)


def test_spilled_partial_sums_round_trip_per_running_row_fold() -> None:
    # ws, spill: m = 64 streams whole; 64 rows x 8 columns of psums (1 KiB) do not fit in
    # 512 B: after row fold 0 each column block's psums go to DRAM and come back
    whole = words(costs("ws", (64, 16, 16), None, PsumPolicy.SPILL)[0])
    assert whole[2:] == (64 * 16, 2 * 64 * 16)
    # fold (0, 1) skipped: column block 1 (half of C) runs one row fold, no round trip
    masked = words(costs("ws", (64, 16, 16), ONE_SKIPPED, PsumPolicy.SPILL)[0])
    assert masked[2:] == (64 * 8, 64 * 16 + 64 * 8)
