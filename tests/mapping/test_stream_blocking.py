"""``mapping.stream_blocking``: chunks of the streamed dimension cut so a streamed
operand's slice fits its buffer, whenever that reads fewer DRAM bytes (unset: under
the accelsim convention, not under scalesim's).

The default hardware has a 128x128 weight-stationary array, 2 MiB ifmap and filter
buffers (1 MiB usable: half, double-buffered) and a 1 MiB ofmap buffer (512 KiB of
partial sums, 2,048 rows of 128 bf16 columns)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from accelsim.config.base import Convention
from accelsim.config.hardware import HardwareSpec, MappingSpec, Orientation, StreamBlocking
from accelsim.config.loader import load_hardware
from accelsim.errors import ConfigError
from tests.conftest import ROOT, make_hw
from tests.mapping.test_arrays import costs_of, psums

MIB = 1 << 20


def blocked(hw: HardwareSpec) -> HardwareSpec:
    return hw.model_copy(
        update={"mapping": MappingSpec(stream_blocking=StreamBlocking.FEWEST_READS)}
    )


def test_the_streamed_operand_is_read_once_in_chunks_that_fit() -> None:
    # A = 8,192 x 1,024 bf16 = 16 MiB, four column folds of 128 (n = 512).  Partial
    # sums alone cut m into 4 chunks of 2,048 rows, whose 4 MiB slices of A do not fit:
    # A is read once per column fold, 64 MiB.  Chunks of 512 rows (16) hold a 1 MiB
    # slice, read once: 16 MiB.  B (1,024 x 512, 1 MiB) fits and is read once either way.
    plain, fewest = (
        costs_of(psums(make_hw()), 8192, 512, 1024),
        costs_of(blocked(make_hw()), 8192, 512, 1024),
    )
    assert int(plain.dram_ifmap_read_bytes[0]) == 4 * 16 * MIB
    assert int(fewest.dram_ifmap_read_bytes[0]) == 16 * MIB
    assert int(plain.dram_filter_read_bytes[0]) == int(fewest.dram_filter_read_bytes[0]) == MIB
    assert int(fewest.dram_ofmap_write_bytes[0]) == 8192 * 512 * 2
    # the chunks change what moves, not the folds the array runs
    assert int(fewest.compute_cycles[0]) == int(plain.compute_cycles[0])


def test_chunks_that_would_read_more_are_not_cut() -> None:
    # A = 1,024 x 8,192 = 16 MiB, two column folds (n = 256); B = 8,192 x 256 = 4 MiB
    # does not fit.  As partial sums need (one chunk): A twice and B once, 36 MiB.  In 16
    # chunks A would be read once but B 16 times, 80 MiB: the chunking is kept.
    plain, fewest = (
        costs_of(psums(make_hw()), 1024, 256, 8192),
        costs_of(blocked(make_hw()), 1024, 256, 8192),
    )
    assert int(plain.dram_ifmap_read_bytes[0]) == 2 * 16 * MIB
    assert int(plain.dram_filter_read_bytes[0]) == 4 * MIB
    for column in ("dram_ifmap_read_bytes", "dram_filter_read_bytes"):
        assert int(getattr(fewest, column)[0]) == int(getattr(plain, column)[0])


def test_several_arrays_side_by_side_pass_the_stream_fewer_times() -> None:
    # Four arrays side by side take the four column folds in one pass: A is read once
    # with or without the option.
    four = make_hw(**{"array.count": 4})
    assert int(costs_of(psums(four), 8192, 512, 1024).dram_ifmap_read_bytes[0]) == 16 * MIB
    assert int(costs_of(blocked(four), 8192, 512, 1024).dram_ifmap_read_bytes[0]) == 16 * MIB


def test_unset_it_follows_the_convention() -> None:
    # The GEMM of the first test on the default hardware, blocking unset: the accelsim
    # convention reads A once (16 MiB), the scalesim convention once per column fold
    # (64 MiB), as SCALE-Sim 3.0.0 does; set, both conventions read what it says.
    hw = make_hw()
    assert hw.mapping.stream_blocking is None
    assert int(costs_of(hw, 8192, 512, 1024).dram_ifmap_read_bytes[0]) == 16 * MIB
    scalesim = costs_of(hw, 8192, 512, 1024, convention=Convention.SCALESIM)
    assert int(scalesim.dram_ifmap_read_bytes[0]) == 4 * 16 * MIB
    assert int(costs_of(psums(hw), 8192, 512, 1024).dram_ifmap_read_bytes[0]) == 4 * 16 * MIB
    fewest = costs_of(blocked(hw), 8192, 512, 1024, convention=Convention.SCALESIM)
    assert int(fewest.dram_ifmap_read_bytes[0]) == 16 * MIB


def test_the_default_stays_out_of_dumps() -> None:
    best = make_hw().model_copy(update={"mapping": MappingSpec(orientation=Orientation.BEST)})
    assert "mapping" not in make_hw().model_dump(mode="json")
    assert best.model_dump(mode="json")["mapping"] == {"orientation": "best"}
    assert blocked(make_hw()).model_dump(mode="json")["mapping"] == {
        "orientation": "as_given",
        "stream_blocking": "fewest_reads",
    }
    assert psums(make_hw()).model_dump(mode="json")["mapping"]["stream_blocking"] == "psums"


def test_an_unknown_blocking_is_an_error(tmp_path: Path) -> None:
    data = yaml.safe_load((ROOT / "configs" / "hardware" / "default.yaml").read_text())
    data["mapping"] = {"stream_blocking": "fewest"}
    path = tmp_path / "hw.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as excinfo:
        load_hardware(path)
    assert [str(p) for p in excinfo.value.problems] == [
        f"{path}: mapping.stream_blocking: input should be 'psums' or 'fewest_reads' (got 'fewest')"
    ]
