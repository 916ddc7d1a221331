"""``dram.model``: one spec per memory model, chosen by name or implied by ``channels``.

A file without ``model`` is fifo with one channel and interleaved with several, and
dumps without ``model``, so sweep identities and resolved configurations do not
change; a model that contradicts ``channels`` is refused at ``dram.model``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelsim.config.dram import FifoDramSpec, InterleavedDramSpec, dram_model_of
from accelsim.config.loader import load_hardware
from accelsim.errors import ConfigError
from tests.conftest import ROOT
from tests.timing.test_engine import hw

HARDWARE = sorted((ROOT / "configs" / "hardware").glob("*.yaml"))
COMMON_KEYS = [
    "bandwidth_bytes_per_cycle",
    "latency_cycles",
    "sharing",
    "capacity_gib",
    "burst_bytes",
    "channels",
    "arbitration",
]


def test_without_a_model_one_channel_is_fifo_and_several_are_interleaved() -> None:
    assert isinstance(hw().dram, FifoDramSpec)
    assert isinstance(hw("dram.channels=4").dram, InterleavedDramSpec)
    assert isinstance(hw("dram.model=interleaved", "dram.channels=2").dram, InterleavedDramSpec)
    assert isinstance(hw("dram.model=fifo").dram, FifoDramSpec)
    assert (hw().dram.model, hw("dram.channels=3").dram.model) == ("fifo", "interleaved")
    assert [dram_model_of(v) for v in ({}, {"channels": 2}, {"channels": True}, 3)] == [
        "fifo",
        "interleaved",
        "fifo",
        "fifo",
    ]


@pytest.mark.parametrize("path", HARDWARE, ids=lambda p: p.stem)
def test_a_bundled_file_dumps_its_common_keys_and_no_model(path: Path) -> None:
    # The dump keeps the keys (in order) it has always had: no model, the read and
    # write bandwidths only where the file sets them.
    dumped = load_hardware(path).model_dump(mode="json")["dram"]
    assert [k for k in dumped if "_bandwidth_" not in k or k == COMMON_KEYS[0]] == COMMON_KEYS


def test_naming_the_implied_model_changes_no_dump() -> None:
    text = json.dumps(hw("dram.channels=4").model_dump(mode="json"))
    assert (
        json.dumps(hw("dram.channels=4", "dram.model=interleaved").model_dump(mode="json")) == text
    )
    assert json.dumps(hw("dram.model=fifo").model_dump(mode="json")) == json.dumps(
        hw().model_dump(mode="json")
    )


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (
            ["dram.model=fifo", "dram.channels=4"],
            "--set: dram.model: fifo is one channel, but channels is 4: use interleaved (or"
            " leave model out) (got 'fifo')",
        ),
        (
            ["dram.model=interleaved"],
            "--set: dram.model: interleaved deals transfers out over several channels, but"
            " channels is 1: set channels above 1 (one channel is fifo) (got 'interleaved')",
        ),
        (
            ["dram.model=lifo"],
            "--set: dram.model: unknown model; did you mean 'fifo'? (got 'lifo')",
        ),
        (["dram.model=hbm"], "--set: dram.model: unknown model; expected one of: fifo, "),
        (
            ["dram.model=intreleaved"],
            "--set: dram.model: unknown model; did you mean 'interleaved'?",
        ),
        (["dram=3"], "--set: dram: expected a mapping (got 3)"),
        (["dram.chanels=2"], "--set: dram.chanels: unknown key; did you mean 'channels'? (got 2)"),
    ],
)
def test_a_contradiction_or_a_bad_model_is_refused_where_it_was_written(
    sets: list[str], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        hw(*sets)
    assert str(caught.value).startswith(message)
