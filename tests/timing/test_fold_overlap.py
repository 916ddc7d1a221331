"""``timing.fold_overlap``: a GEMM's folds pipeline, so fill and drain are paid once.

The closed form, ``(F - 1) * max(T, R) + 2R + C + T - 2`` for ``F`` folds on an
``R x C`` array streaming ``T``, is counted by hand on small cases, run on a
register-level reference array (``tests/systolic_reference.py``: data checked, every
hazard asserted) at the schedule behind it and one cycle tighter, and checked where it
meets fold masks, the scalesim convention and the CLI.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from accelsim.config.base import Convention
from accelsim.config.loader import parse_sets
from accelsim.config.run import PsumPolicy
from accelsim.driver.inputs import load_inputs
from accelsim.driver.layer import gemm_for, simulate_layer
from accelsim.errors import ConfigError
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import Phase, TensorKind
from accelsim.mapping.schedule import schedule
from accelsim.mapping.units import main_array
from accelsim.timing import closed_form
from accelsim.timing.costs import op_costs
from accelsim.timing.machine import Machine
from tests import systolic_reference as rtl
from tests.conftest import ROOT, make_hw

# (m, n, k) giving Sr = 8 (two row folds of 4), Sc = 4 (one column fold) and T
# streamed, for each dataflow (os: Sr m, Sc n, T k; ws: k, n, m; is: k, m, n).
TWO_FOLDS = {
    "os": lambda t: (8, 4, t),
    "ws": lambda t: (t, 4, 8),
    "is": lambda t: (4, t, 8),
}


@pytest.mark.parametrize("dataflow", ["os", "ws", "is"])
@pytest.mark.parametrize(
    ("t", "separate", "overlapped"),
    [
        # 4x4 array, two folds, T = 6: each fold alone is 2*4 + 4 + 6 - 2 = 16 cycles;
        # overlapped, the second starts streaming 6 cycles after the first: 6 + 16.
        (6, 32, 22),
        # T = 2 < R = 4: the second fold's 4-row load (or drain) cannot hide behind a
        # 2-cycle stream, so it starts 4 cycles after the first: 4 + 12.
        (2, 24, 16),
    ],
)
def test_two_folds_counted_by_hand(
    dataflow: str, t: int, separate: int, overlapped: int, energy_table
) -> None:
    hw = make_hw(**{"array.rows": 4, "array.cols": 4, "array.dataflow": dataflow})
    m, n, k = TWO_FOLDS[dataflow](t)
    gemm = gemm_for(m, n, k, Phase.FWD)

    def cycles(overlap: bool) -> int:
        record = simulate_layer(
            hw, energy_table, gemm, Phase.FWD, Convention.ACCELSIM, fold_overlap=overlap
        )
        assert record["folds"] == 2 and record["fold_overlap"] is overlap
        return int(record["compute_cycles"])

    assert (cycles(False), cycles(True)) == (separate, overlapped)


def test_six_folds_counted_by_hand(energy_table) -> None:
    # ws on 4x4: k = 8 -> 2 row folds, n = 12 -> 3 column folds, T = m = 6:
    # 6 folds of 16 cycles, or 16 + 5 * 6 overlapped.
    hw = make_hw(**{"array.rows": 4, "array.cols": 4})
    gemm = gemm_for(6, 12, 8, Phase.FWD)
    off, on = (
        simulate_layer(hw, energy_table, gemm, Phase.FWD, Convention.ACCELSIM, fold_overlap=o)
        for o in (False, True)
    )
    assert (off["compute_cycles"], on["compute_cycles"]) == (96, 46)
    # the same data moves: only time changes
    assert off["sram_reads"] == on["sram_reads"] and off["dram_bytes"] == on["dram_bytes"]


def _schedules(rows: int, cols: int, t: int, folds: int, overlap: bool, tighter: int = 0):
    """Start cycles of each fold (and ws loads, os drains) behind the closed form."""
    per_fold = 2 * rows + cols + t - 2
    period = max(t, rows) - tighter if overlap else per_fold - tighter
    if overlap:  # ws: load the next fold while this one streams; os: drain per column
        starts = [rows + f * period for f in range(folds)]
        loads = [0, *starts[:-1]]
        os_starts = [f * period for f in range(folds)]
        drains = [[s + t + rows + c - 1 for c in range(cols)] for s in os_starts]
    else:  # every fold alone: load, stream, skew; os drains all columns after the last
        loads = [f * period for f in range(folds)]
        starts = [s + rows for s in loads]
        os_starts = loads
        drains = [[s + t + rows + cols - 2] * cols for s in os_starts]
    return starts, loads, os_starts, drains


CASES = [(4, 4, 6, 2), (4, 4, 2, 3), (3, 5, 3, 3), (5, 2, 7, 4), (2, 3, 1, 3), (1, 1, 1, 2)]


@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize(("rows", "cols", "t", "folds"), CASES)
def test_register_level_array_meets_the_closed_form(
    rows: int, cols: int, t: int, folds: int, overlap: bool
) -> None:
    rng = np.random.default_rng(rows * 100 + cols * 10 + t)
    starts, loads, os_starts, drains = _schedules(rows, cols, t, folds, overlap)
    expected = {
        code: int(
            closed_form.op_cycles(
                np.array([code]), np.array([t]), np.array([folds]), rows, cols,
                closed_form.ACCELSIM, overlap, 1, 0,
            )[0]
        )
        for code in (closed_form.OS, closed_form.WS, closed_form.IS)
    }  # fmt: skip
    assert len(set(expected.values())) == 1  # one closed form for all three dataflows
    weights = [rng.integers(-3, 4, (rows, cols)).astype(float) for _ in range(folds)]
    streamed = [rng.integers(-3, 4, (t, rows)).astype(float) for _ in range(folds)]
    # ws: B's tile stationary, A's rows streamed; is is the same array on C^T = B^T A^T
    ws = rtl.weight_stationary(weights, streamed, starts, loads)
    lefts = [rng.integers(-3, 4, (rows, t)).astype(float) for _ in range(folds)]
    tops = [rng.integers(-3, 4, (t, cols)).astype(float) for _ in range(folds)]
    os = rtl.output_stationary(lefts, tops, os_starts, drains)
    assert ws == os == expected[closed_form.WS]


@pytest.mark.parametrize(("rows", "cols", "t", "folds"), CASES)
def test_one_cycle_tighter_breaks_a_hazard(rows: int, cols: int, t: int, folds: int) -> None:
    """The period max(T, R) is the least: an input port, or a column's load or drain
    chain, would be used twice."""
    starts, loads, os_starts, drains = _schedules(rows, cols, t, folds, True, tighter=1)
    ones = [np.ones((rows, cols))] * folds
    with pytest.raises(AssertionError):
        rtl.weight_stationary(ones, [np.ones((t, rows))] * folds, starts, loads)
    with pytest.raises(AssertionError):
        rtl.output_stationary([np.ones((rows, t))] * folds, [np.ones((t, cols))] * folds,
                              os_starts, drains)  # fmt: skip


def test_masked_folds_pipeline_back_to_back() -> None:
    """A fold mask keeps the running folds, which then overlap with each other."""
    hw = make_hw(**{"array.rows": 8, "array.cols": 8})
    b = GraphBuilder(hw.word_bytes)
    a = b.tensor("a", TensorKind.ACTIVATION, 64 * 32)
    w = b.tensor("w", TensorKind.WEIGHT, 32 * 32)
    c = b.tensor("c", TensorKind.ACTIVATION, 64 * 32)
    b.gemm("g", "l", Phase.FWD, 64, 32, 32, 1, a, w, c)
    graph = b.build()
    full = schedule(graph, (main_array(hw),))  # ws: 4 x 4 folds, T = m = 64
    mask = np.ones((4, 4), bool)
    mask[:, :2] = False

    def cycles(folds, overlap: bool) -> int:
        costs = op_costs(
            graph,
            folds,
            Machine.of(hw),
            Convention.ACCELSIM,
            PsumPolicy.CHUNK,
            8,
            fold_overlap=overlap,
        )
        return int(costs.compute_cycles[0])

    first = 2 * 8 + 8 + 64 - 2
    assert cycles(full, True) == first + 15 * 64
    assert cycles(full.with_masks({0: mask}), True) == first + 7 * 64
    assert cycles(full.with_masks({0: np.zeros((4, 4), bool)}), True) == 0
    assert cycles(full.with_masks({0: mask}), False) == 8 * first


def test_scalesim_convention_refuses_fold_overlap() -> None:
    sets = parse_sets(["timing.convention=scalesim", "timing.fold_overlap=true"])
    with pytest.raises(ConfigError) as err:
        load_inputs(ROOT / "configs" / "runs" / "smoke.yaml", sets)
    assert str(err.value) == (
        "--set: timing.fold_overlap: needs convention: accelsim (the scalesim convention"
        " reproduces SCALE-Sim 3.0.0, which runs every fold's fill and drain) (got True)"
    )
    hw = make_hw()
    graph = GraphBuilder(hw.word_bytes)
    x = graph.tensor("x", TensorKind.ACTIVATION, 4)
    graph.gemm("g", "l", Phase.FWD, 2, 2, 2, 1, x, x, x)
    built = graph.build()
    with pytest.raises(ValueError, match="fold overlap needs the accelsim convention"):
        op_costs(
            built,
            schedule(built, (main_array(hw),)),
            Machine.of(hw),
            Convention.SCALESIM,
            PsumPolicy.CHUNK,
            8,
            fold_overlap=True,
        )


def test_layer_command_takes_fold_overlap() -> None:
    def layer(*extra: str) -> subprocess.CompletedProcess[str]:
        args = ["layer", "--hardware", "configs/hardware/default.yaml", "--gemm", "32", "4096"]
        return subprocess.run(
            [sys.executable, "-m", "accelsim", *args, "4096", "--json", *extra],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=False,
        )

    import json

    off, on = (json.loads(layer(*f).stdout) for f in ((), ("--fold-overlap",)))
    # FC-like: T = m = 32 < R = 128, so each later fold costs R = 128 cycles, not 414
    assert off["folds"] == on["folds"] == 32 * 32
    assert off["compute_cycles"] == 1024 * (2 * 128 + 128 + 32 - 2)
    assert on["compute_cycles"] == 1023 * 128 + (2 * 128 + 128 + 32 - 2)
    refused = layer("--fold-overlap", "--convention", "scalesim")
    assert refused.returncode == 2
    assert "--fold-overlap: needs --convention accelsim" in refused.stderr
