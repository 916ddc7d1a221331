"""The area model: a tiny design counted by hand from the table's coefficients, the SRAM
fit between and beyond its macros, the node scaling, and the published chips' figures
as regressions on the computed numbers."""

from __future__ import annotations

from typing import get_args

import pytest

from accelsim.config.area import TechnologyNm
from accelsim.config.base import Precision
from accelsim.config.loader import bundled_area_table, load_hardware
from accelsim.driver.silicon import chip_area
from accelsim.energy.area import area, sram_mm2
from tests.conftest import ROOT, make_hw

TABLE = bundled_area_table()
TINY = {
    "array": {"rows": 2, "cols": 2, "dataflow": "ws", "precision": "int8"},
    "buffers": {"ifmap_kib": 8, "filter_kib": 8, "ofmap_kib": 8},
    "vector_unit": {"lanes": 2, "precision": "int8"},
    "dram": {"bandwidth_bytes_per_cycle": 1, "latency_cycles": 10},
    "word_bytes": {"activations": 1, "weights": 1, "gradients": 1, "optimizer_state": 1},
}


def tiny(**changes: object) -> dict[str, float]:
    return dict(area(make_hw(**{**TINY, **changes}), TABLE).components_mm2)


def test_tiny_design_by_hand() -> None:
    # 4 int8 PEs: a MAC of 674.9 um^2 and 8 + 8 + 32 register bits of 5.98 um^2 each;
    # three 8 KiB buffers, each the table's 8 KiB macro (0.058195 mm^2); 2 vector lanes
    # as PEs; wiring 10 % of those; 1 B/cycle at 1 GHz = 1 GB/s of DRAM at 0.04 mm^2.
    parts = tiny()
    logic_and_sram = 4 * 674.9e-6 + 4 * 48 * 5.98e-6 + 3 * 0.058195 + 2 * (674.9 + 48 * 5.98) * 1e-6
    assert parts["array_macs"] == pytest.approx(4 * 674.9e-6, rel=1e-12)
    assert parts["array_registers"] == pytest.approx(4 * 48 * 5.98e-6, rel=1e-12)
    assert parts["sram_ifmap"] == parts["sram_filter"] == parts["sram_ofmap"] == 0.058195
    assert parts["vector_unit"] == pytest.approx(2 * 961.94e-6, rel=1e-12)
    assert parts["wiring"] == pytest.approx(0.1 * logic_and_sram, rel=1e-12)
    assert parts["dram_phy"] == pytest.approx(0.04, rel=1e-12)
    assert parts["link_phy"] == 0
    total = area(make_hw(**TINY), TABLE).total_mm2
    assert total == pytest.approx(1.1 * logic_and_sram + 0.04, rel=1e-12)
    assert total == pytest.approx(0.238392304, rel=1e-9)


def test_a_pe_is_sized_for_the_widest_precision_it_runs() -> None:
    # An fp8 MAC: an 8-bit FP multiplier, 4,360 (8/32)^2, and an fp32 adder, 4,360.
    fp8 = tiny(array={**TINY["array"], "precision": "fp8"})
    assert fp8["array_macs"] == pytest.approx(4 * 4632.5e-6, rel=1e-12)
    # int8 at 2 MACs per cycle in a PE that also runs int16: an int16 MAC and registers.
    parts = tiny(array={**TINY["array"], "rates": {"int16": 1, "int8": 2}})
    assert parts["array_macs"] == pytest.approx(4 * 1865.5e-6, rel=1e-12)
    assert parts["array_registers"] == pytest.approx(4 * (16 + 16 + 32) * 5.98e-6, rel=1e-12)


def test_pe_scratchpads_are_register_bits() -> None:
    # 4 PEs of 3 bytes of scratchpad each: 4 x 24 bits of 5.98 um^2, the rest unchanged
    # and counted in the wiring's 10 %
    base = tiny()
    array = {**TINY["array"], "pe_scratchpad_bytes": 3}
    parts = dict(area(make_hw(**{**TINY, "array": array}), TABLE).components_mm2)
    assert "array_scratchpads" not in base
    assert parts["array_scratchpads"] == pytest.approx(4 * 24 * 5.98e-6, rel=1e-12)
    assert parts["array_macs"] == base["array_macs"]
    assert parts["wiring"] == pytest.approx(base["wiring"] + 0.1 * 4 * 24 * 5.98e-6, rel=1e-12)


def test_node_scaling_applies_to_logic_and_sram_not_to_phys() -> None:
    at_45, at_7 = tiny(), tiny(technology_nm=7)
    for name in ("array_macs", "array_registers", "sram_ifmap", "vector_unit", "wiring"):
        assert at_7[name] == pytest.approx(0.059 * at_45[name], rel=1e-12)
    assert at_7["dram_phy"] == at_45["dram_phy"]


def test_processors_repeat_everything_but_the_shared_dram() -> None:
    one, four = tiny(), tiny(processors=4)
    assert four["array_macs"] == pytest.approx(4 * one["array_macs"])
    assert four["dram_phy"] == one["dram_phy"]
    per_processor = tiny(processors=4, **{"dram.sharing": "per_processor"})
    assert per_processor["dram_phy"] == pytest.approx(4 * one["dram_phy"])
    # a ring of 4 (one way round): each processor's one link of 64 B/cycle (the
    # default's) at 1 GHz, 64 GB/s at 0.04 mm^2 per GB/s
    assert four["link_phy"] == pytest.approx(4 * 64 * 0.04, rel=1e-12)


def test_sram_between_and_beyond_the_macros() -> None:
    assert sram_mm2(TABLE, 32) == 0.132126
    # half-way between 8 and 32 KiB on log-log axes: the geometric mean of their areas
    assert sram_mm2(TABLE, 16) == pytest.approx((0.058195 * 0.132126) ** 0.5, rel=1e-12)
    # beyond 8 MiB: macros of equal size, each at most 8 MiB
    assert sram_mm2(TABLE, 16384) == pytest.approx(2 * 30.4343, rel=1e-12)
    assert sram_mm2(TABLE, 0) == 0


def test_table_covers_every_node_and_precision() -> None:
    assert set(get_args(TechnologyNm)) == set(TABLE.node_scaling)
    assert set(TABLE.mac_um2) == set(Precision)


def chip(name: str) -> float:
    hw = load_hardware(ROOT / "configs" / "hardware" / f"{name}.yaml")
    return chip_area(hw).total_mm2


def test_eyeriss_against_its_published_core() -> None:
    # Chen et al., JSSC 2017: a 12.25 mm^2 core in 65 nm.  The preset's PEs hold their
    # 520-byte scratchpads, 168 x 4,160 register bits of 5.98 um^2 at 45 nm, x 1.5 to
    # 65 nm; the model has no PE control or network on chip: docs/model/area_power.md.
    scratchpads_mm2 = 168 * 520 * 8 * 5.98e-6 * 1.5
    parts = chip_area(load_hardware(ROOT / "configs" / "hardware" / "eyeriss.yaml"))
    assert parts.components_mm2["array_scratchpads"] == pytest.approx(scratchpads_mm2, rel=1e-12)
    computed = parts.total_mm2
    assert computed == pytest.approx(1.5356 + 1.1 * scratchpads_mm2, abs=5e-5)
    assert computed == pytest.approx(8.4315, abs=5e-5)
    assert computed / 12.25 - 1 == pytest.approx(-0.3117, abs=1e-4)


def test_tpu_v4_against_its_published_die() -> None:
    # Jouppi et al., ISCA 2023: a 7 nm die under 600 mm^2; the preset is the MXUs,
    # SCALE-Sim's buffers, a vector unit, the HBM interface and six ICI links.
    computed = chip("tpu_v4")
    assert computed == pytest.approx(123.935, abs=5e-4)
    assert computed < 600
