"""Several arrays per processor (``array.count``), a GEMM's orientation
(``mapping.orientation``), a fixed cost per op (``timing.op_overhead_cycles``), the
stationary tile's load rate (``array.load_rows_per_cycle``) and the vector unit's time
taking GEMM outputs off the arrays (``vector_unit.gemm_output_ops``), counted by hand on the
default 128x128 weight-stationary array (a fold: ``2R + C + T - 2 = 382 + T`` cycles).
"""

from __future__ import annotations

import numpy as np
import pytest

from accelsim.config.base import Convention
from accelsim.config.energy import EnergyTable
from accelsim.config.hardware import (
    ChipTimingSpec,
    HardwareSpec,
    MappingSpec,
    Orientation,
    StreamBlocking,
)
from accelsim.config.run import PsumPolicy
from accelsim.driver.layer import gemm_for, layer_graph, simulate_layer
from accelsim.graph.ops import Phase
from accelsim.mapping.arrays import COLUMNS, REDUCTION, ROWS, split
from accelsim.mapping.schedule import schedule
from accelsim.mapping.units import main_array
from accelsim.timing.closed_form import ACCELSIM, op_cycles
from accelsim.timing.costs import OpCosts, op_costs
from accelsim.timing.machine import Machine
from tests.conftest import make_hw


def costs_of(
    hw: HardwareSpec,
    m: int,
    n: int,
    k: int,
    overlap: bool = False,
    convention: Convention = Convention.ACCELSIM,
) -> OpCosts:
    graph = layer_graph(hw, gemm_for(m, n, k, Phase.FWD), Phase.FWD)
    return op_costs(
        graph,
        schedule(graph, (main_array(hw),)),
        Machine.of(hw),
        convention,
        PsumPolicy.CHUNK,
        4096,
        fold_overlap=overlap,
    )


def cut_of(hw: HardwareSpec, m: int, n: int, k: int) -> int:
    graph = layer_graph(hw, gemm_for(m, n, k, Phase.FWD), Phase.FWD)
    unit = main_array(hw)
    table = schedule(graph, (unit,)).units[0]

    def cycles_of(t: np.ndarray, folds: np.ndarray) -> np.ndarray:
        return op_cycles(table.dataflow, t, folds, 128, 128, ACCELSIM, False, 1, 0)

    return int(split(table, hw.array.count, cycles_of).cut[0])


def test_two_arrays_share_three_column_folds() -> None:
    # m = T = 100, k = 128 (one row fold), n = 384 (three column folds): array 0 runs
    # folds 0 and 2, array 1 fold 1, so the op lasts two folds: 2 * (382 + 100).
    # Splitting the 100 streamed rows instead: 3 * (382 + 50) = 1,296; one array: 1,446.
    one, two = make_hw(), make_hw(**{"array.count": 2})
    assert int(costs_of(one, 100, 384, 128).compute_cycles[0]) == 3 * 482
    c = costs_of(two, 100, 384, 128)
    assert int(c.compute_cycles[0]) == 2 * 482
    assert cut_of(two, 100, 384, 128) == COLUMNS
    assert int(c.folds[0]) == 3
    assert int(c.macs[0]) == 100 * 384 * 128
    # every array reads its own folds' stream: SRAM reads as on one array
    assert int(c.sram_ifmap_read_bytes[0]) == 3 * 100 * 128 * 2
    assert int(c.sram_filter_read_bytes[0]) == 128 * 384 * 2


def test_utilization_counts_every_array(energy_table) -> None:
    hw = make_hw(**{"array.count": 2, "dram.bandwidth_bytes_per_cycle": float("inf")})
    record = simulate_layer(hw, energy_table, gemm_for(100, 384, 128, Phase.FWD), Phase.FWD,
                            Convention.ACCELSIM)  # fmt: skip
    assert record["array"]["count"] == 2
    assert record["compute_cycles"] == 964
    total = record["total_cycles"]
    assert record["utilization"] == pytest.approx(100 * 384 * 128 / (2 * 128 * 128 * total))


def test_a_tall_gemm_splits_its_streamed_rows() -> None:
    # n = k = 128 (one fold), m = 1,000: columns leave array 1 idle (382 + 1,000);
    # 500 rows each: 382 + 500; each array holds its own copy of the weight tile.
    hw = make_hw(**{"array.count": 2})
    c = costs_of(hw, 1000, 128, 128)
    assert cut_of(hw, 1000, 128, 128) == ROWS
    assert int(c.compute_cycles[0]) == 882
    assert int(c.sram_filter_read_bytes[0]) == 2 * 128 * 128 * 2
    assert int(c.sram_ifmap_read_bytes[0]) == 1000 * 128 * 2


def test_a_matrix_vector_product_splits_its_reduction() -> None:
    # m = n = 1, k = 1,024: eight row folds of 383 cycles on one array; four arrays
    # take two each (766), and three extra partial sums are added into the output.
    hw = make_hw(**{"array.count": 4})
    c = costs_of(hw, 1, 1, 1024)
    assert cut_of(hw, 1, 1, 1024) == REDUCTION
    assert int(c.compute_cycles[0]) == 2 * 383
    one = costs_of(make_hw(), 1, 1, 1024)
    assert int(one.compute_cycles[0]) == 8 * 383
    assert int(c.sram_ofmap_write_bytes[0]) == int(one.sram_ofmap_write_bytes[0]) + 3 * 2
    assert int(c.sram_ofmap_read_bytes[0]) == int(one.sram_ofmap_read_bytes[0]) + 3 * 2


def test_column_folds_read_the_stream_once_per_pass() -> None:
    # A (m x k = 8,192 x 1,024 bf16, 16 MiB) does not fit half the 2 MiB ifmap buffer:
    # blocked as partial sums need, one array streams it once per column fold (4), two
    # arrays once per pair (2); blocked for the fewest reads (the default), both once.
    one, two = psums(make_hw()), psums(make_hw(**{"array.count": 2}))
    a_bytes = 8192 * 1024 * 2
    assert int(costs_of(one, 8192, 512, 1024).dram_ifmap_read_bytes[0]) == 4 * a_bytes
    assert int(costs_of(two, 8192, 512, 1024).dram_ifmap_read_bytes[0]) == 2 * a_bytes
    for hw in (make_hw(), make_hw(**{"array.count": 2})):
        assert int(costs_of(hw, 8192, 512, 1024).dram_ifmap_read_bytes[0]) == a_bytes


def test_one_array_is_the_default() -> None:
    hw = make_hw()
    assert hw.array.count == 1
    assert hw.array.pes == 128 * 128
    assert main_array(make_hw(**{"array.count": 3})).pes == 3 * 128 * 128


def psums(hw: HardwareSpec) -> HardwareSpec:
    """``hw`` with ``mapping.stream_blocking: psums``."""
    return hw.model_copy(update={"mapping": MappingSpec(stream_blocking=StreamBlocking.PSUMS)})


def with_chip(hw: HardwareSpec, orientation: str = "as_given", overhead: int = 0) -> HardwareSpec:
    return hw.model_copy(
        update={
            "mapping": MappingSpec(orientation=Orientation(orientation)),
            "timing": ChipTimingSpec(op_overhead_cycles=overhead),
        }
    )


def test_best_orientation_runs_the_transpose_when_it_is_faster() -> None:
    # m = 10, n = 1,000, k = 128: as given, 8 column folds streaming 10 rows each,
    # 8 * (382 + 10) = 3,136 cycles; transposed (m = 1,000, n = 10), one fold of
    # 382 + 1,000 = 1,382.  The DRAM columns still name the operands: A is 10 x 128.
    hw = make_hw(**{"dram.bandwidth_bytes_per_cycle": float("inf")})
    assert int(costs_of(hw, 10, 1000, 128).compute_cycles[0]) == 3136
    best = with_chip(hw, "best")
    c = costs_of(best, 10, 1000, 128)
    assert int(c.compute_cycles[0]) == 1382
    assert int(c.dram_ifmap_read_bytes[0]) == 10 * 128 * 2
    assert int(c.dram_filter_read_bytes[0]) == 128 * 1000 * 2
    # the given orientation, already the faster, stays
    assert int(costs_of(best, 1000, 10, 128).compute_cycles[0]) == 1382


def test_op_overhead_adds_to_every_op() -> None:
    hw = with_chip(make_hw(), overhead=250)
    assert int(costs_of(hw, 100, 384, 128).compute_cycles[0]) == 3 * 482 + 250


def test_gemm_outputs_through_the_vector_unit_add_to_its_compute() -> None:
    # 100 x 384 outputs, one operation each on 1,000 lanes: ceil(38.4) = 39 cycles more
    # than the three folds of 482.
    hw = make_hw(**{"vector_unit.lanes": 1000, "vector_unit.gemm_output_ops": 1})
    assert int(costs_of(hw, 100, 384, 128).compute_cycles[0]) == 3 * 482 + 39
    assert int(costs_of(hw, 100, 384, 128).vector_ops[0]) == 100 * 384  # priced as energy
    # The transpose has as many outputs: the best orientation above (1,382 cycles as
    # 1,000 x 10) pays ceil(2 x 10,000 / 64) = 313 more, as the given one would.
    hw = make_hw(**{"dram.bandwidth_bytes_per_cycle": float("inf"), "vector_unit.lanes": 64,
                    "vector_unit.gemm_output_ops": 2})  # fmt: skip
    assert int(costs_of(with_chip(hw, "best"), 10, 1000, 128).compute_cycles[0]) == 1382 + 313
    assert int(costs_of(hw, 10, 1000, 128).compute_cycles[0]) == 3136 + 313


def test_gemm_output_operations_cost_vector_energy(energy_table: EnergyTable) -> None:
    # 2 operations on each of 100 x 384 outputs, at the fp32 vector unit's price; the
    # rest of the GEMM's energy as without them.
    plain = make_hw()
    hw = make_hw(**{"vector_unit.gemm_output_ops": 2})
    gemm = gemm_for(100, 384, 128, Phase.FWD)
    with_ops = simulate_layer(hw, energy_table, gemm, Phase.FWD, Convention.ACCELSIM)
    without = simulate_layer(plain, energy_table, gemm, Phase.FWD, Convention.ACCELSIM)
    price = energy_table.vector_op_pj[hw.vector_unit.precision]
    vector = with_ops["energy_by_component_pj"]["vector"]
    assert vector == pytest.approx(2 * 100 * 384 * price)
    assert without["energy_by_component_pj"]["vector"] == 0
    for name, pj in without["energy_by_component_pj"].items():
        if name not in ("vector", "static"):  # static grows with the longer GEMM
            assert with_ops["energy_by_component_pj"][name] == pytest.approx(pj)


@pytest.mark.parametrize(("load", "cycles"), [(1, 128 + 392), (4, 32 + 392), (256, 10 + 392)])
def test_load_rows_per_cycle_shortens_the_fold_switch(load: int, cycles: int) -> None:
    # Two row folds streaming T = 10 rows, overlapped: the second fold waits
    # max(T, ceil(128 / load)) after the first (382 + 10 cycles).
    hw = make_hw(**{"array.load_rows_per_cycle": load})
    assert int(costs_of(hw, 10, 128, 256, overlap=True).compute_cycles[0]) == cycles


@pytest.mark.parametrize(
    ("swap", "overlap", "cycles"), [(32, True, 42 + 392), (32, False, 2 * 392)]
)
def test_a_tile_swap_adds_to_every_later_overlapped_fold(
    swap: int, overlap: bool, cycles: int
) -> None:
    # The two row folds above with the tile loaded whole behind the stream (256 rows a
    # cycle): the second waits T = 10 plus the swap; without fold overlap each fold is
    # 2R + C + T - 2 = 392 and the swap is not charged.
    hw = make_hw(**{"array.load_rows_per_cycle": 256, "array.tile_swap_cycles": swap})
    assert int(costs_of(hw, 10, 128, 256, overlap=overlap).compute_cycles[0]) == cycles


def test_new_settings_stay_out_of_dumps_at_their_defaults() -> None:
    # resolved_config.yaml and sweep point identities of existing runs are unchanged
    dumped = make_hw().model_dump(mode="json")
    assert "count" not in dumped["array"] and "load_rows_per_cycle" not in dumped["array"]
    assert "tile_swap_cycles" not in dumped["array"]
    assert "read_bandwidth_bytes_per_cycle" not in dumped["dram"]
    assert "gemm_output_ops" not in dumped["vector_unit"]
    assert "mapping" not in dumped and "timing" not in dumped
    changed = with_chip(make_hw(**{"array.count": 2}), "best", 5).model_dump(mode="json")
    assert changed["array"]["count"] == 2
    assert changed["mapping"] == {"orientation": "best"}
    assert changed["timing"] == {"op_overhead_cycles": 5}
