"""Validating a hardware file a section at a time (what a sweep's planning does) gives
exactly what validating the whole merged file gives: the same spec, the same dump and,
for bad input, the same problems blamed on the same places."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import pytest

from accelsim.config import sections
from accelsim.config.hardware import HardwareSpec
from accelsim.config.loader import Override, read_yaml, validate_with_overrides
from accelsim.config.sections import validate_by_sections
from accelsim.errors import ConfigError
from accelsim.sweep.plan import Identities
from tests.conftest import ROOT

HARDWARE = sorted((ROOT / "configs" / "hardware").glob("*.yaml"))
CHOICES: dict[str, list[Any]] = {
    "array.rows": [8, 32, 128, 256],
    "array.cols": [16, 64, 256],
    "array.dataflow": ["os", "ws", "is"],
    "array.count": [1, 2],
    "dram.bandwidth_bytes_per_cycle": [8, 64.5, 512],
    "dram.latency_cycles": [0, 100],
    "dram.channels": [1, 4],
    "dram.model": ["fifo", "interleaved", "row_buffer"],
    "dram.row_bytes": [512, 4096],
    "buffers.ifmap_kib": [256, 4096],
    "mapping.orientation": ["as_given", "best"],
    "timing.op_overhead_cycles": [0, 500],
    "processors": [1, 2],
    "clock_mhz": [700, 1000.5],
}


def memo() -> Callable[[Hashable, Callable[[], Any]], Any]:
    kept: dict[Hashable, Any] = {}

    def once(key: Hashable, make: Callable[[], Any]) -> Any:
        if key not in kept:
            kept[key] = make()
        return kept[key]

    return once


def problems(make: Callable[[], HardwareSpec]) -> list[Any]:
    with pytest.raises(ConfigError) as caught:
        make()
    return caught.value.problems


@pytest.mark.parametrize("path", HARDWARE, ids=lambda p: p.stem)
def test_random_overrides_give_the_whole_file_validation(path: Path) -> None:
    """60 random sets of overrides per bundled file, through one cache: equal specs and
    dumps, equal point-identity text, or the same problems."""
    data, file = read_yaml(path), path.name
    once = memo()
    rng = random.Random(path.stem)
    texts = Identities()
    for _ in range(60):
        keys = rng.sample(sorted(CHOICES), rng.randint(1, 5))
        sets = [Override(k, rng.choice(CHOICES[k]), "sweep.yaml", f"grid.{k}") for k in keys]
        try:
            whole = validate_with_overrides(HardwareSpec, data, file, sets)
        except ConfigError as exc:
            bad = problems(lambda s=sets: validate_by_sections(HardwareSpec, data, file, s, once))
            assert bad == exc.problems
            continue
        parts = validate_by_sections(HardwareSpec, data, file, sets, once)
        assert parts == whole
        assert parts.model_dump(mode="json") == whole.model_dump(mode="json")
        canonical = json.dumps(whole.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        assert texts._sectioned(parts) == canonical


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("array.rows", 0, ("sweep.yaml", "grid.array.rows", "input should be greater than 0", 0)),
        (
            "array.colz",
            8,
            ("sweep.yaml", "grid.array.colz", "unknown key; did you mean 'cols'?", 8),
        ),
        ("array", 5, ("sweep.yaml", "grid.array", "expected a mapping", 5)),
        (
            "buffers.ofmap_kib",
            8,
            (
                "sweep.yaml",
                "grid.buffers.ofmap_kib",
                "too small for one 128x128 tile of 2-byte words (needs >= 32 KiB)",
                8,
            ),
        ),
    ],
)
def test_bad_values_are_blamed_as_the_whole_file_validation_blames_them(
    key: str, value: Any, expected: tuple[Any, ...]
) -> None:
    path = HARDWARE[[p.stem for p in HARDWARE].index("default")]
    data = read_yaml(path)
    sets = [Override(key, value, "sweep.yaml", f"grid.{key}")]
    found = problems(lambda: validate_by_sections(HardwareSpec, data, "hw.yaml", sets, memo()))
    assert [(p.file, p.path, p.message, p.value) for p in found] == [expected]
    assert found == problems(lambda: validate_with_overrides(HardwareSpec, data, "hw.yaml", sets))


def test_each_section_is_validated_once_per_distinct_overrides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """2 row counts x 3 bandwidths x 2 clocks: the file is validated whole once, the
    array section twice and the DRAM section three times; the clock is a top-level key."""
    made: list[str] = []
    real = sections._maker

    def counting(spec: Any, data: Any, file: str, name: str, sets: Any) -> Any:
        make = real(spec, data, file, name, sets)

        def counted() -> Any:
            made.append(name)
            return make()

        return counted

    monkeypatch.setattr(sections, "_maker", counting)
    whole: list[int] = []
    full = sections.validate_with_overrides

    def counting_whole(*args: Any) -> Any:
        whole.append(1)
        return full(*args)

    monkeypatch.setattr(sections, "validate_with_overrides", counting_whole)
    path = HARDWARE[[p.stem for p in HARDWARE].index("default")]
    data, once = read_yaml(path), memo()
    for rows in (32, 64):
        for bandwidth in (16, 32, 64):
            for clock in (500, 1000):
                sets = [
                    Override("array.rows", rows, "s", "rows"),
                    Override("dram.bandwidth_bytes_per_cycle", bandwidth, "s", "bw"),
                    Override("clock_mhz", clock, "s", "clock"),
                ]
                spec = validate_by_sections(HardwareSpec, data, "hw.yaml", sets, once)
                assert (spec.array.rows, spec.dram.bandwidth_bytes_per_cycle) == (rows, bandwidth)
                assert spec.clock_mhz == clock
    assert sorted(made) == ["array"] * 2 + ["dram"] * 3
    assert len(whole) == 1
