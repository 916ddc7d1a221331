"""``dram.sharing``: one DRAM channel for all processors (default) or one each.

The engine's cycle-exact behaviour is pinned in ``tests/timing/test_engine.py``; here a
whole run checks that ``shared`` is the default and changes nothing, that private
channels only remove contention (never add cycles, never change traffic), and
how a misspelt value is reported.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import accelsim
from accelsim.config.dram import DramSharing
from accelsim.config.loader import display_path, load_energy, load_hardware
from accelsim.energy.model import check_table
from accelsim.errors import ConfigError
from tests.conftest import ROOT as REPO

DEFAULT_RUN = REPO / "configs" / "runs" / "default.yaml"
DEFAULT_HW = REPO / "configs" / "hardware" / "default.yaml"
MULTICHIP_HW = REPO / "configs" / "hardware" / "multichip.yaml"
DATA_PARALLEL = ["processors=2", "assignment=data_parallel", "batch_size=4"]


def test_shared_is_the_default_and_changes_nothing() -> None:
    assert load_hardware(DEFAULT_HW).dram.sharing is DramSharing.SHARED
    default = accelsim.simulate(DEFAULT_RUN, DATA_PARALLEL).base
    shared = accelsim.simulate(DEFAULT_RUN, [*DATA_PARALLEL, "dram.sharing=shared"]).base
    assert shared.summary() == default.summary()
    assert shared.op_rows() == default.op_rows()


def test_per_processor_channels_remove_contention_only() -> None:
    shared = accelsim.simulate(DEFAULT_RUN, DATA_PARALLEL).base
    private = accelsim.simulate(DEFAULT_RUN, [*DATA_PARALLEL, "dram.sharing=per_processor"]).base
    assert private.hardware.dram.sharing is DramSharing.PER_PROCESSOR
    assert private.total_cycles <= shared.total_cycles
    summary, base = private.step_summary(), shared.step_summary()
    assert summary.dram_bytes == base.dram_bytes
    assert summary.macs == base.macs
    # Dynamic energy is counts x table, per op; only leakage follows the run time (the
    # private step is simulated once, one replica standing for both processors).
    assert private.trace.replicas == 2
    assert private.energy.op_total_pj == shared.energy.op_total_pj
    dynamic = [{k: v for k, v in s.energy_pj.by_component.items() if k != "static"}
               for s in (summary, base)]  # fmt: skip
    assert dynamic[0] == dynamic[1]
    assert private.energy.static_pj <= shared.energy.static_pj


def test_multichip_preset() -> None:
    hw = load_hardware(MULTICHIP_HW)
    default = load_hardware(DEFAULT_HW)
    assert hw.processors == 4
    assert hw.dram.sharing is DramSharing.PER_PROCESSOR
    # Everything else is the default chip's.
    same = ("clock_mhz", "array", "buffers", "vector_unit", "interconnect", "word_bytes")
    assert all(getattr(hw, key) == getattr(default, key) for key in same)
    assert hw.dram.bandwidth_bytes_per_cycle == default.dram.bandwidth_bytes_per_cycle
    assert hw.dram.latency_cycles == default.dram.latency_cycles
    for table in sorted((REPO / "configs" / "energy").glob("*.yaml")):
        check_table(load_energy(table), hw, table.name)


@pytest.mark.parametrize("value", ["privat", "Shared", "PER_PROCESSOR", 1])
def test_unknown_sharing_is_an_error(tmp_path: Path, value: object) -> None:
    data = yaml.safe_load(DEFAULT_HW.read_text(encoding="utf-8"))
    data["dram"]["sharing"] = value
    path = tmp_path / "hw.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with pytest.raises(ConfigError) as excinfo:
        load_hardware(path)
    assert [str(p) for p in excinfo.value.problems] == [
        f"{display_path(path)}: dram.sharing: input should be 'shared' or 'per_processor'"
        f" (got {value!r})"
    ]
